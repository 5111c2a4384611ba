"""Calibrating the host cost model against ORT profiling and the plugin's kernel trace; the steps and
their order are described in `tools/calibrate.py`, which runs them."""

# The command's defaults, here so that the CLI shows them without loading the steps (tools/calibrate.py
# imports ORT profiling and the kernel trace; the CLI imports it only to run).
DEFAULT_RUNS = 200  # traced and profiled runs per model after warm-up (`calibrate --runs`). With 40, the
# held-out fused-call median of seven runs in one quiet half hour spread 13.6-20.9% (convnet_heads' pair -18% to
# -25% in all seven: its calls measured slower than with more runs); with 200, 10.7-14.6% in four (convnet_heads
# -4% to -8%), 4.7 s a run against 2.9 (Intel VM, 2026-12-07, docs/DROPIN.md)
DEFAULT_WARMUP = 3
