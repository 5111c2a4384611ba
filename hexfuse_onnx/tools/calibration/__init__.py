"""Calibrating the host cost model against ORT profiling and the plugin's kernel trace; the steps and
their order are described in `tools/calibrate.py`, which runs them."""
