"""Batched gemm of strided operands, without copying them to C order first.

A matrix whose elements are contiguous along one of its two axes is what BLAS takes as it is:
rows of ``lda`` elements apart (``x[..., :n]`` of a wider array, the heads of
``x.view(B, T, nh, hs).transpose(1, 2)``), or, contiguous down its columns, the transpose flag
with the column stride as ``lda`` (``k.transpose(-2, -1)``).  Attention's products read exactly
such views; eager and compiled plans copied each to C order before its gemm.  Here each matrix
of the batch is handed to gemm.py's cblas in place: the batch axes (up to two) index a 4-D view,
so batch strides need not combine into one.

Bits: OpenBLAS packs both operands into its own buffers before the kernel runs, so neither the
leading dimension nor a transpose flag that describes the same matrix changes the arithmetic;
the tests check the result equals the contiguous copy's bit for bit.  Eager (cpu.py) and the
plan functions (compiler/run/tensor_rules.py) call the same kernel, so they agree by
construction.  Only float32/float64 where gemm.py binds NumPy's cblas (``AVAILABLE``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types as nbt
from numba.core.extending import overload

from dispatch_jit.jit import cache

from .gemm import _CBLAS, cblas_gemm, gemm

__all__ = ["AVAILABLE", "batched_gemm_view", "eligible", "strided_matmul"]

AVAILABLE = frozenset(_CBLAS)       # the np.dtypes with a bound cblas gemm


def eligible(x: np.ndarray) -> bool:
    """Whether every matrix of ``x`` (2 to 4 dimensions) is one gemm can read in place: unit
    stride along one of its axes, the other stride at least that axis's length."""
    if x.ndim < 2 or x.ndim > 4 or x.dtype not in AVAILABLE or not x.flags.writeable:
        return False
    ok, _, _ = _layout_py(x.shape[-2], x.shape[-1], x.strides[-2] // x.itemsize, x.strides[-1] // x.itemsize)
    return ok and all(s >= 0 for s in x.strides) and all(s % x.itemsize == 0 for s in x.strides)


def _layout_py(r, c, s0, s1):
    """(ok, transposed, leading dimension) of an r x c matrix with element strides s0, s1."""
    if (s1 == 1 or c == 1) and (r == 1 or s0 >= max(c, 1)):
        return True, False, (max(s0, c, 1) if r > 1 else max(c, 1))
    if (s0 == 1 or r == 1) and (c == 1 or s1 >= max(r, 1)):
        return True, True, (max(s1, r, 1) if c > 1 else max(r, 1))
    return False, False, 0


_layout = numba.njit(_layout_py)


def _gemm_view(a, b, out):
    """out = a @ b for 2-D ``a``, ``b`` of any strides (``out`` C-contiguous)."""
    return _gemm_view_impl    # named for the disk cache's fingerprint, as gemm.py's stubs


@overload(_gemm_view)
def _gemm_view_impl(a, b, out):
    if np.dtype(numba.np.numpy_support.as_dtype(a.dtype)) not in _CBLAS:
        def by_copies(a, b, out):    # no cblas bound for this dtype: the callers do not come here
            gemm(np.ascontiguousarray(a), False, np.ascontiguousarray(b), False, out)
        return by_copies

    def impl(a, b, out):
        m, n = out.shape
        k = a.shape[1]
        isz = a.itemsize
        oka, ta, lda = _layout(m, k, a.strides[0] // isz, a.strides[1] // isz)
        okb, tb, ldb = _layout(k, n, b.strides[0] // isz, b.strides[1] // isz)
        if not (oka and okb):
            # not reachable from the callers, which check ``eligible`` first; the copies' bits
            gemm(np.ascontiguousarray(a), False, np.ascontiguousarray(b), False, out)
            return
        cblas_gemm(a, ta, lda, b, tb, ldb, out, k)
    return impl


@numba.njit(boundscheck=False)
def batched_gemm_view(a4, b4, o3, ia, ib):
    """``o3[t] = a4[ia[t]] @ b4[ib[t]]``, the batch index flat over the two batch axes."""
    a1, b1 = a4.shape[1], b4.shape[1]
    for t in range(o3.shape[0]):
        i, j = ia[t], ib[t]
        _gemm_view(a4[i // a1, i % a1], b4[j // b1, j % b1], o3[t])


_INDEX = nbt.Array(nbt.intp, 1, "C")
_KIND = __name__
_ENTRIES = cache.entries(_KIND)


def _as_4d(x: np.ndarray) -> np.ndarray:
    return x[(None,) * (4 - x.ndim)]


def strided_matmul(a: np.ndarray, b: np.ndarray, o3: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> None:
    """Eager mode's product of two ``eligible`` operands (cpu.py): ``o3`` (nbatch, m, n), the
    batch index maps of cpu.py's plan."""
    dt = a.dtype
    fn = _ENTRIES.get(("batched_gemm_view", dt))
    if fn is None:
        # the Numba signature only on a miss: making array types costs microseconds, which an
        # attention's small products (two a call of each head's matrices) would pay every call
        arr = nbt.Array(numba.from_dtype(dt), 4, "A")
        fn = cache.njit_function(_KIND, ("batched_gemm_view", dt), "batched_gemm_view", batched_gemm_view,
                                 (arr, arr, nbt.Array(numba.from_dtype(dt), 3, "C"), _INDEX, _INDEX))
    fn(_as_4d(a), _as_4d(b), o3, ia, ib)
