"""Quantized int8 kernels (kernels/quantized/cpu.py) against the float32 matmul paths.

``QuantizedMatmul`` times, on square n x n operands (n = 64, 256, 1024):

* ``time_quantized_matmul``: ``aten::quantized_matmul`` on qint8 x qint8 with
  given output scale / zero point (int32 accumulation, requantized);
* ``time_quantized_matmul_auto``: ``dj.matmul`` on the same quantized tensors
  (output parameters picked from the result's min/max: one more pass);
* ``time_dj_matmul_float32``: ``dj.matmul`` on float32, the Numba path
  (``np.dot`` inside njit, bound to SciPy's OpenBLAS sgemm);
* ``time_np_matmul_float32``: ``np.matmul`` on float32 (NumPy's OpenBLAS).

Targets, reported by ``QuantizedTargets`` as ratios (quantized time / float32
time, below 1.0 means the int8 product is faster) measured in one process:

* quantized int8 matmul 1024x1024 / ``dj.matmul`` float32 on the same shapes: < 1.0
* quantized int8 matmul 1024x1024 / ``np.matmul`` float32 (BLAS sgemm): reported, no target

The two sides are timed in alternating blocks (best of ``samples`` calls each,
a 0.3 s pause before every block, ``rounds`` rounds) and each ratio is best
over best: interleaving OpenBLAS calls with the Numba thread pool call by call
is unfair to whichever runs second (the other pool's threads are still
spinning, see kernels/linalg/cpu.py), and alternating blocks let a burst of load
from elsewhere hit both sides.  The 1024x1024 ratios are marked ``slow = True``
like bench_kernels' targets.

Single-threaded figures: ``OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1`` in the
environment (both pools read it at start).  ``python benchmarks/bench_quantized.py``
prints the ratios, the times and the machine's load.
"""

from __future__ import annotations

import math
import time
import timeit

import numpy as np

import dispatch_jit as dj
import dispatch_jit.kernels.quantized.cpu  # noqa: F401  (registers the QuantizedCPU kernels)
from dispatch_jit.quantized import qint8, quantize_per_tensor

OPS = dj.ops.aten


def _slow(fn):
    fn.slow = True
    return fn


def _operands(n: int):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    qa = quantize_per_tensor(dj.from_numpy(a), 4.0 / 127, 0, qint8)
    qb = quantize_per_tensor(dj.from_numpy(b), 4.0 / 127, 0, qint8)
    # output scale: the float product's entries have standard deviation ~sqrt(n)
    so = 4.0 * float(np.sqrt(n)) / 127
    return a, b, qa, qb, so


def _alternating_best(fns, samples: int, rounds: int, pause: float = 0.3) -> list[float]:
    """Seconds per call of each callable: min over ``rounds`` blocks of ``samples`` calls,
    the callables' blocks alternating, each after ``pause`` s (the other pool goes idle)."""
    for f in fns:
        f()
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            time.sleep(pause)
            best[i] = min(best[i], min(timeit.repeat(f, number=1, repeat=samples)))
    return best


class QuantizedMatmul:
    params = [64, 256, 1024]
    param_names = ["n"]
    timeout = 300

    def setup(self, n):
        self.a, self.b, self.qa, self.qb, self.so = _operands(n)
        self.x, self.y = dj.from_numpy(self.a), dj.from_numpy(self.b)
        # compile (including the prange variant n selects) outside the timing
        OPS.quantized_matmul(self.qa, self.qb, self.so, 0)
        dj.matmul(self.qa, self.qb)
        dj.matmul(self.x, self.y)

    def time_quantized_matmul(self, n):
        OPS.quantized_matmul(self.qa, self.qb, self.so, 0)

    def time_quantized_matmul_auto(self, n):
        dj.matmul(self.qa, self.qb)

    def time_dj_matmul_float32(self, n):
        dj.matmul(self.x, self.y)

    def time_np_matmul_float32(self, n):
        np.matmul(self.a, self.b)


class QuantizedElementwise:
    """add (given output parameters) and relu on 1e6 qint8 elements, vs float32 np.add / np.maximum."""

    params = [1_000, 1_000_000]
    param_names = ["n"]

    def setup(self, n):
        rng = np.random.default_rng(1)
        self.a = rng.standard_normal(n).astype(np.float32)
        self.q = quantize_per_tensor(dj.from_numpy(self.a), 4.0 / 127, 0, qint8)
        OPS.quantized_add(self.q, self.q, 8.0 / 127, 0)
        dj.relu(self.q)

    def time_quantized_add(self, n):
        OPS.quantized_add(self.q, self.q, 8.0 / 127, 0)

    def time_quantized_relu(self, n):
        dj.relu(self.q)

    def time_np_add_float32(self, n):
        np.add(self.a, self.a)


class QuantizedTargets:
    """Quantized matmul time / float32 matmul time, 1024x1024, one process (below 1.0: int8 is faster)."""

    unit = "ratio"
    timeout = 300
    samples = 5
    rounds = 4

    def setup(self):
        self.a, self.b, self.qa, self.qb, self.so = _operands(1024)
        self.x, self.y = dj.from_numpy(self.a), dj.from_numpy(self.b)
        self.calls = {
            "int8": lambda: OPS.quantized_matmul(self.qa, self.qb, self.so, 0),
            "int8 auto": lambda: dj.matmul(self.qa, self.qb),
            "dj float32": lambda: dj.matmul(self.x, self.y),
            "np float32": lambda: np.matmul(self.a, self.b),
        }

    def times(self, *names) -> dict[str, float]:
        """Best seconds per call of the named callables, timed in alternating blocks."""
        return dict(zip(names, _alternating_best([self.calls[k] for k in names], self.samples, self.rounds)))

    def _ratio(self, num: str, den: str) -> float:
        t = self.times(num, den)
        return t[num] / t[den]

    @_slow
    def track_matmul_1024_int8_over_dj_float32(self):
        """quantized int8 matmul / dj.matmul float32 (Numba path), 1024x1024.  Target: < 1.0."""
        return self._ratio("int8", "dj float32")

    @_slow
    def track_matmul_1024_int8_over_numpy_float32(self):
        """quantized int8 matmul / np.matmul float32 (OpenBLAS sgemm), 1024x1024.  Reported."""
        return self._ratio("int8", "np float32")

    @_slow
    def track_matmul_1024_int8_auto_over_dj_float32(self):
        """dj.matmul on qint8 (min/max output parameters) / dj.matmul float32, 1024x1024."""
        return self._ratio("int8 auto", "dj float32")


if __name__ == "__main__":   # one process, all four sides alternating: python benchmarks/bench_quantized.py
    import os

    import numba

    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"numba threads: {numba.get_num_threads()}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    bench = QuantizedTargets()
    bench.setup()
    t = bench.times(*bench.calls)
    for name, sec in t.items():
        print(f"  {name:11s} {sec * 1e3:8.2f} ms")
    for num in ("int8", "int8 auto"):
        print(f"  {num} / dj.matmul float32: {t[num] / t['dj float32']:.2f}    "
              f"{num} / np.matmul float32: {t[num] / t['np float32']:.2f}")
