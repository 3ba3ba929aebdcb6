"""GPU matmul: dj.matmul on CUDA tensors against cuBLAS (torch.matmul) and CuPy.

Target (issue 4): float32 matmul 4096x4096 on the GPU: state the TFLOP/s,
and reach at least 25% of what torch.matmul (cuBLAS) reaches in the same
run.  ``MatmulCUDA.track_tflops`` states the figure,
``MatmulCUDARatioTorch`` / ``MatmulCUDARatioCupy`` measure dj / torch and
dj / CuPy in one process, interleaved.

Target (issue 6): a float32 matmul chain under ``dj.autocast("cuda")``
(float16 kernels) runs faster than without it: ``AutocastChainCUDA.
track_no_autocast_over_autocast`` is time without / time with autocast (> 1).

Every benchmark here needs a real CUDA GPU: on a CPU-only machine, or under
Numba's CUDA simulator, ``setup`` raises NotImplementedError, which is
asv's documented skip.  Importing this module touches no GPU and imports
neither numba.cuda, torch nor CuPy; each is imported in ``setup``.

Each timed call is followed by a device synchronize (kernels launch
asynchronously); a TFLOP/s figure is 2*n**3 / (best seconds per call) over
``samples`` samples of ``calls_per_sample`` back-to-back calls.  torch runs
with TF32 off (``allow_tf32 = False``), so every library computes true
float32 products.
"""

from __future__ import annotations

import time

import dispatch_jit as dj

N = 4096


def _require_gpu() -> None:
    if not dj.cuda.is_available() or dj.cuda.is_simulator():
        raise NotImplementedError("needs a real CUDA GPU (none, or the Numba CUDA simulator)")


def _torch():
    try:
        import torch
    except Exception as e:
        raise NotImplementedError(f"torch is not importable ({e})") from None
    if not torch.cuda.is_available():
        raise NotImplementedError("torch has no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def _cupy():
    try:
        import cupy
    except Exception as e:
        raise NotImplementedError(f"cupy is not importable ({e})") from None
    return cupy


def _best_seconds(call, sync, calls: int, samples: int) -> float:
    """Best seconds per call: each sample runs ``calls`` calls then synchronizes."""
    call()
    sync()
    best = float("inf")
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def _tflops(seconds: float, n: int = N) -> float:
    return 2.0 * n ** 3 / seconds / 1e12


class _DJ:
    calls_per_sample = 5
    samples = 5
    timeout = 600

    def _setup_dj(self):
        _require_gpu()
        self.a = dj.rand(N, N, device="cuda")
        self.b = dj.rand(N, N, device="cuda")
        dj.matmul(self.a, self.b)        # compiles the kernel
        dj.cuda.synchronize()

    def _dj_call(self):
        dj.matmul(self.a, self.b)


class MatmulCUDA(_DJ):
    """dj.matmul, 4096x4096 float32 on the GPU (the tiled shared-memory kernel)."""

    def setup(self):
        self._setup_dj()

    def time_matmul_4096_float32(self):
        dj.matmul(self.a, self.b)
        dj.cuda.synchronize()

    def track_tflops(self):
        return _tflops(_best_seconds(self._dj_call, dj.cuda.synchronize, self.calls_per_sample, self.samples))
    track_tflops.unit = "TFLOP/s"


class MatmulCUDATorch:
    """torch.matmul (cuBLAS), 4096x4096 float32, TF32 off."""
    calls_per_sample = 5
    samples = 5

    def setup(self):
        _require_gpu()
        torch = self.torch = _torch()
        self.a = torch.rand(N, N, device="cuda")
        self.b = torch.rand(N, N, device="cuda")
        torch.matmul(self.a, self.b)
        torch.cuda.synchronize()

    def time_matmul_4096_float32(self):
        self.torch.matmul(self.a, self.b)
        self.torch.cuda.synchronize()

    def track_tflops(self):
        return _tflops(_best_seconds(lambda: self.torch.matmul(self.a, self.b), self.torch.cuda.synchronize,
                                     self.calls_per_sample, self.samples))
    track_tflops.unit = "TFLOP/s"


class MatmulCUDACupy:
    """cupy.matmul (cuBLAS through CuPy), 4096x4096 float32."""
    calls_per_sample = 5
    samples = 5

    def setup(self):
        _require_gpu()
        cp = self.cp = _cupy()
        self.a = cp.random.rand(N, N, dtype=cp.float32)
        self.b = cp.random.rand(N, N, dtype=cp.float32)
        cp.matmul(self.a, self.b)
        cp.cuda.Device().synchronize()

    def track_tflops(self):
        return _tflops(_best_seconds(lambda: self.cp.matmul(self.a, self.b), self.cp.cuda.Device().synchronize,
                                     self.calls_per_sample, self.samples))
    track_tflops.unit = "TFLOP/s"


class _Ratio(_DJ):
    """dj throughput over another library's, measured in one process, the two alternating
    sample by sample (higher is better)."""

    def _ratio(self, other_call, other_sync) -> float:
        ours = theirs = float("inf")
        for _ in range(self.samples):
            ours = min(ours, _best_seconds(self._dj_call, dj.cuda.synchronize, self.calls_per_sample, 1))
            theirs = min(theirs, _best_seconds(other_call, other_sync, self.calls_per_sample, 1))
        return theirs / ours


class MatmulCUDARatioTorch(_Ratio):
    """dj.matmul / torch.matmul (cuBLAS, TF32 off) throughput, 4096x4096 float32: target >= 0.25."""

    def setup(self):
        _require_gpu()
        torch = self.torch = _torch()
        self._setup_dj()
        self.ta = torch.rand(N, N, device="cuda")
        self.tb = torch.rand(N, N, device="cuda")

    def track_dj_tflops_over_torch(self):
        torch = self.torch
        return self._ratio(lambda: torch.matmul(self.ta, self.tb), torch.cuda.synchronize)
    track_dj_tflops_over_torch.unit = "ratio"


class MatmulCUDARatioCupy(_Ratio):
    """dj.matmul / cupy.matmul throughput, 4096x4096 float32."""

    def setup(self):
        _require_gpu()
        cp = self.cp = _cupy()
        self._setup_dj()
        self.ca = cp.random.rand(N, N, dtype=cp.float32)
        self.cb = cp.random.rand(N, N, dtype=cp.float32)

    def track_dj_tflops_over_cupy(self):
        cp = self.cp
        return self._ratio(lambda: cp.matmul(self.ca, self.cb), cp.cuda.Device().synchronize)
    track_dj_tflops_over_cupy.unit = "ratio"


class AutocastChainCUDA:
    """A chain of 4 float32 matmuls (2048x2048) with and without ``dj.autocast("cuda")``, alternating
    sample by sample in one process: the speedup autocast's float16 kernels give (target > 1)."""
    calls_per_sample = 3
    samples = 5
    timeout = 600
    n = 2048

    def setup(self):
        _require_gpu()
        self.x = dj.rand(self.n, self.n, device="cuda")
        self.ws = [dj.rand(self.n, self.n, device="cuda") * (1.0 / self.n) for _ in range(4)]
        self._chain()
        with dj.autocast("cuda"):
            self._chain()           # compiles the float16 kernels and fills the region's cast cache
        dj.cuda.synchronize()

    def _chain(self):
        y = self.x
        for w in self.ws:
            y = dj.matmul(y, w)
        return y

    def _autocast_chain(self):
        with dj.autocast("cuda"):
            return self._chain()

    def track_no_autocast_over_autocast(self):
        plain = mixed = float("inf")
        for _ in range(self.samples):
            plain = min(plain, _best_seconds(self._chain, dj.cuda.synchronize, self.calls_per_sample, 1))
            mixed = min(mixed, _best_seconds(self._autocast_chain, dj.cuda.synchronize, self.calls_per_sample, 1))
        return plain / mixed
    track_no_autocast_over_autocast.unit = "x"
