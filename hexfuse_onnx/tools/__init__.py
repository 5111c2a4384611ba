"""Measuring tools built on the pass and the runtime (tune; bench, calibrate, timeline and qnn to follow).

The pass (graph, discover, select, rewrite, lower, pipeline) never imports this package.
"""
