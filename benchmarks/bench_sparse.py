"""Sparse CSR @ dense: dispatch_jit's SparseCsrCPU kernel against the dense
dj.matmul on the same matrix and against scipy.sparse (when importable).

Case of the target: A is n x n at 1% density, B is n x 64, float32.  The
``time_*`` benchmarks of ``CsrMatmul`` run over n = 1024 and 4096; the
``track_*`` ratios of ``Targets`` use n = 4096 and report, measured in one
process (min of interleaved repeats):

* CSR @ dense / dense dj.matmul      target <= 0.2  (at least 5x faster)
* CSR @ dense / scipy.sparse csr @ B target <= 1.5

Kernels compile in ``setup`` by one call at the benchmark's size, so the
parallel (prange) variant that this size selects is the one timed.
"""

from __future__ import annotations

import functools
import timeit

import numpy as np

import dispatch_jit as dj
import dispatch_jit.kernels.sparse.cpu  # noqa: F401  (registers the SparseCsrCPU kernels)
from dispatch_jit.sparse import sparse_csr_tensor

DENSITY = 0.01
NCOLS = 64


@functools.cache
def _problem(n: int, seed: int = 0):
    """(indptr, indices, data, B) for an n x n float32 CSR matrix at DENSITY and B of n x NCOLS."""
    rng = np.random.default_rng(seed)
    per_row = rng.binomial(n, DENSITY, size=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_row, out=indptr[1:])
    indices = np.concatenate([np.sort(rng.choice(n, size=k, replace=False)) for k in per_row]).astype(np.int64)
    data = rng.standard_normal(indptr[-1]).astype(np.float32)
    b = rng.standard_normal((n, NCOLS)).astype(np.float32)
    return indptr, indices, data, b


def _interleaved_best(calls, number: int, samples: int) -> list[float]:
    best = [float("inf")] * len(calls)
    for _ in range(samples):
        for i, c in enumerate(calls):
            best[i] = min(best[i], timeit.timeit(c, number=number) / number)
    return best


class CsrMatmul:
    params = [[1024, 4096]]
    param_names = ["n"]
    timeout = 300

    def setup(self, n):
        indptr, indices, data, b = _problem(n)
        self.a = sparse_csr_tensor(indptr, indices, data, (n, n))
        self.b = dj.from_numpy(b)
        self.dense_a = self.a.to_dense()
        dj.matmul(self.a, self.b)

    def time_csr_matmul(self, n):
        dj.matmul(self.a, self.b)

    def time_dense_matmul(self, n):
        dj.matmul(self.dense_a, self.b)


class CsrMatmulScipy:
    params = [[1024, 4096]]
    param_names = ["n"]

    def setup(self, n):
        try:
            import scipy.sparse as sp
        except ImportError:
            raise NotImplementedError("scipy is not installed") from None
        indptr, indices, data, b = _problem(n)
        self.a = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        self.b = b

    def time_scipy_csr_matmul(self, n):
        self.a @ self.b


class Targets:
    """Ratios for the issue's case: 4096 x 4096 at 1% @ 4096 x 64, float32."""

    unit = "ratio"
    timeout = 300
    samples = 7
    slow = True      # a 64 MB dense operand and a 2 GFLOP dense matmul

    def _inputs(self):
        indptr, indices, data, b = _problem(4096)
        a = sparse_csr_tensor(indptr, indices, data, (4096, 4096))
        return a, dj.from_numpy(b), (indptr, indices, data, b)

    def track_csr_matmul_4096_csr_over_dense(self):
        """CSR @ dense / dense dj.matmul.  Target: <= 0.2."""
        a, b, _ = self._inputs()
        d = a.to_dense()
        calls = [lambda: dj.matmul(a, b), lambda: dj.matmul(d, b)]
        for c in calls:
            c()
        t, ref = _interleaved_best(calls, 3, self.samples)
        return t / ref

    def track_csr_matmul_4096_dj_over_scipy(self):
        """CSR @ dense / scipy.sparse csr_matrix @ ndarray.  Target: <= 1.5."""
        try:
            import scipy.sparse as sp
        except ImportError:
            raise NotImplementedError("scipy is not installed") from None
        a, b, (indptr, indices, data, bn) = self._inputs()
        s = sp.csr_matrix((data, indices, indptr), shape=(4096, 4096))
        calls = [lambda: dj.matmul(a, b), lambda: s @ bn]
        for c in calls:
            c()
        t, ref = _interleaved_best(calls, 10, self.samples)
        return t / ref
