"""Sparse CSR and COO @ dense: dispatch_jit's SparseCsrCPU kernel against the dense
dj.matmul on the same matrix and against scipy.sparse (when importable).

Case of the target: A is n x n at 1% density, B is n x 64, float32.  The
``time_*`` benchmarks of ``CsrMatmul`` run over n = 1024 and 4096; the
``track_*`` ratios of ``Targets`` use n = 4096 and report, measured in one
process (min of interleaved repeats):

* CSR @ dense / dense dj.matmul      target <= 0.2  (at least 5x faster)
* CSR @ dense / scipy.sparse csr @ B target <= 1.5

``CooMatmul`` is issue 27's COO case: A is n x n with 10 n non-zeros (coalesced, random
positions), B is n x 64, float32, n up to 1e5 (1e6 non-zeros); against ``torch.sparse.mm`` in
the same process, torch at 1 and at 2 threads:

* COO dj.sparse.mm / torch.sparse.mm                        target <= 1.0
* forward + backward to B / torch's (values without grad)    target <= 1.0

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

from ._common import interleaved_ratio, torch_or_skip

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


@functools.cache
def _coo_problem(n: int, seed: int = 0):
    """(indices, values, B, G) for an n x n float32 COO matrix with 10 n coalesced non-zeros."""
    rng = np.random.default_rng(seed)
    lin = np.unique(rng.integers(0, n * n, size=10 * n))         # sorted: row-major, coalesced
    idx = np.stack([lin // n, lin % n]).astype(np.int64)
    vals = rng.standard_normal(idx.shape[1]).astype(np.float32)
    b, g = (rng.standard_normal((n, NCOLS)).astype(np.float32) for _ in range(2))
    return idx, vals, b, g


class CooMatmul:
    """COO @ dense against torch.sparse.mm, torch at ``torch_threads`` threads (dj's Numba pool as
    is); medians of interleaved calls.
    Target: both ratios <= 1.0 at n = 1e5."""

    params = [[10_000, 100_000], [1, 2]]
    param_names = ["n", "torch_threads"]
    unit = "ratio"
    timeout = 600
    samples = 5

    def setup(self, n, torch_threads):
        torch = self.torch = torch_or_skip()
        self.threads_before = torch.get_num_threads()
        torch.set_num_threads(torch_threads)
        idx, vals, b, g = _coo_problem(n)
        self.a = dj.sparse_coo_tensor(idx, vals, (n, n))
        self.b, self.g = dj.from_numpy(b), dj.from_numpy(g)
        ti = torch.from_numpy(idx)
        self.ta = torch.sparse_coo_tensor(ti, torch.from_numpy(vals), (n, n), is_coalesced=True,
                                                check_invariants=False)
        self.tb, self.tg = torch.from_numpy(b), torch.from_numpy(g)

    def teardown(self, n, torch_threads):
        self.torch.set_num_threads(self.threads_before)

    def track_ratio_coo_mm_dj_over_torch(self, n, torch_threads):
        """dj.sparse.mm(A, B) / torch.sparse.mm(A, B).  Target: <= 1.0."""
        calls = [lambda: dj.sparse.mm(self.a, self.b), lambda: self.torch.sparse.mm(self.ta, self.tb)]
        for c in calls:
            c()
        return interleaved_ratio(*calls, self.samples)

    def track_ratio_coo_mm_backward_dj_over_torch(self, n, torch_threads):
        """Forward and backward to B (A^T @ G) / torch's.  Target: <= 1.0."""
        b, tb = self.b.detach().requires_grad_(), self.tb.detach().requires_grad_()

        def ours():
            dj.sparse.mm(self.a, b).backward(self.g)
            b.grad = None

        def theirs():
            self.torch.sparse.mm(self.ta, tb).backward(self.tg)
            tb.grad = None
        for c in (ours, theirs):
            c()
        return interleaved_ratio(ours, theirs, self.samples)
    # torch's first backward in a process imports sympy (seconds): asv runs it, the smoke test not
    track_ratio_coo_mm_backward_dj_over_torch.slow = True
