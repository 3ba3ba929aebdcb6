"""asv benchmark suites for dispatch_jit (see asv.conf.json at the repository root).

bench_dispatch: eager per-op overhead on tiny tensors (cache hit, cold miss).
bench_kernels:  kernel throughput per op family x dtype x size, against NumPy.
bench_compile:  lazy compile time per dtype and import time, in fresh interpreters.
bench_shared_cores: parallel kernels while two busy processes hold the cores, and quiet.

Each suite also reports, as ``track_*`` benchmarks, the ratios the project's
targets are stated in, measured in the same process against NumPy, PyTorch
and a hand-written Numba loop.
"""
