"""Tools built on the pass and the runtime: bench, calibrate, timeline, tune, emulate, zoo, qnn.

The pass (graph, kinds, select, rewrite, lowering, pipeline) never imports this package.
"""
