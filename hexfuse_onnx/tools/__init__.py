"""Tools built on the pass and the runtime: tune, emulate (bench, calibrate, timeline and qnn to follow).

The pass (graph, kinds, select, rewrite, lowering, pipeline) never imports this package.
"""
