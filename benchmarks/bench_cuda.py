"""GPU eager kernels: bandwidth of elementwise and sum, and per-op overhead.

Targets (issue 4), as ratios measured in one process on the GPU machine:

* ``a * b + c`` on 1e8 float32 reaches at least 80% of the bandwidth of a
  device-to-device copy (``ElementwiseBandwidth.track_fraction_of_copy``);
* ``sum`` of 1e8 float32 reaches at least 70% of it
  (``SumBandwidth.track_fraction_of_copy``);
* a tiny CUDA op (launch + dispatch, no synchronize) costs at most 2x
  CuPy's (``TinyOp.track_add16_dj_over_cupy``; ``track_us`` states the
  microseconds).

Bandwidth counts the bytes each computation must move: a copy of n float32
reads and writes 8n bytes, ``a * b + c`` moves 16n (two kernels eagerly:
``a*b`` 12n, ``+ c`` 12n, so the eager figure is 24n over the time; both
figures are given), ``sum`` reads 4n.  Every benchmark needs a real GPU: on
a CPU-only machine or under the simulator ``setup`` raises
NotImplementedError, asv's skip.  Importing touches no GPU.
"""

from __future__ import annotations

import time

import dispatch_jit as dj

N = 100_000_000


def _require_gpu() -> None:
    if not dj.cuda.is_available() or dj.cuda.is_simulator():
        raise NotImplementedError("needs a real CUDA GPU (none, or the Numba CUDA simulator)")


def _best(call, calls: int = 5, samples: int = 5) -> float:
    call()
    dj.cuda.synchronize()
    best = float("inf")
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        dj.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


class _Big:
    timeout = 600

    def setup(self):
        _require_gpu()
        self.a = dj.rand(N, device="cuda")
        self.b = dj.rand(N, device="cuda")
        self.c = dj.rand(N, device="cuda")
        self.dst = dj.empty(N, device="cuda")
        src, dst = self.a._data.storage.buf, self.dst._data.storage.buf
        self.copy = lambda: dst.copy_to_device(src)       # cuMemcpyDtoD
        self.copy_gbs = 8 * N / _best(self.copy) / 1e9


class ElementwiseBandwidth(_Big):
    unit = "fraction"

    def time_fma(self):
        self.a * self.b + self.c
        dj.cuda.synchronize()

    def track_fraction_of_copy(self):
        """Effective bandwidth of ``a*b+c`` (24n bytes moved by the two eager kernels) / copy's."""
        t = _best(lambda: self.a * self.b + self.c)
        return (24 * N / t / 1e9) / self.copy_gbs

    def track_copy_gbs(self):
        return self.copy_gbs
    track_copy_gbs.unit = "GB/s"


class SumBandwidth(_Big):
    unit = "fraction"

    def time_sum(self):
        self.a.sum()
        dj.cuda.synchronize()

    def track_fraction_of_copy(self):
        t = _best(lambda: self.a.sum())
        return (4 * N / t / 1e9) / self.copy_gbs


class TinyOp:
    """``a + b`` on 16-element float32 tensors: launch + dispatch, no synchronize."""

    unit = "ratio"
    timeout = 300

    def setup(self):
        _require_gpu()
        self.a = dj.rand(16, device="cuda")
        self.b = dj.rand(16, device="cuda")
        dj.add(self.a, self.b)

    def _per_call(self, fn, calls=2000) -> float:
        fn()
        dj.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - t0) / calls)
            dj.cuda.synchronize()
        return best

    def time_add(self):
        dj.add(self.a, self.b)

    def track_us(self):
        return self._per_call(lambda: dj.add(self.a, self.b)) * 1e6
    track_us.unit = "us"

    def track_add16_dj_over_cupy(self):
        try:
            import cupy
        except Exception as e:
            raise NotImplementedError(f"cupy is not importable ({e})") from None
        ca, cb = cupy.asarray(self.a), cupy.asarray(self.b)
        return self._per_call(lambda: dj.add(self.a, self.b)) / self._per_call(lambda: cupy.add(ca, cb))
