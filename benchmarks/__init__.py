"""asv benchmark suites for dispatch_jit (see asv.conf.json at the repository root).

bench_dispatch: eager per-op overhead on tiny tensors (cache hit, cold miss).
bench_kernels:  kernel throughput per op family x dtype x size, against NumPy.
bench_compile:  lazy compile time per dtype and import time, in fresh interpreters.
bench_shared_cores: parallel kernels while two busy processes hold the cores, and quiet.
bench_cuda*:    the GPU's (skipped without one; scripts/gpu_check.py runs them directly).
bench_axes:     bfloat16 over float32, COO sparse.mm, per-sample gradients (vmap) and conv/pool
                against PyTorch.

Each suite also reports, as ``track_*`` benchmarks, the ratios the project's targets are stated
in, measured in the same process: a ratio's name says what over what (``track_sort_dj_over_numpy``:
dj's time over NumPy's; below 1, dj is faster), anything else has an absolute unit.

``QUICK`` selects the quick suite (``scripts/asv_quick.sh``): one target per area, a few minutes
on two cores, results saved for the current commit.
"""

# asv's -b takes a regular expression matched against "file.Class.method" (or "file.function")
QUICK = "|".join([
    r"^bench_dispatch\.(Ratios|TorchRatios)\.",
    r"^bench_kernels\.Targets\.track_(add|sum|matmul)_",
    r"^bench_compiled\.(track_tiny_call_overhead_us|TargetsBig\.track_numpy_over_dj_compiled)$",
    r"^bench_autograd\.TinyForwardBackward\.track_",
    r"^bench_arrayops\.track_sort_",
    r"^bench_training\.MLPStep\.track_mlp_(eager|compile)_",
])
