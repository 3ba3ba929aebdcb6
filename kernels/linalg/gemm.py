"""gemm for njit code: NumPy's own OpenBLAS where NumPy ships one, else Numba's ``np.dot``.

Numba's ``np.dot`` calls the gemm of SciPy's OpenBLAS (0.3.30 here); NumPy wheels bundle
OpenBLAS 0.3.31 (ILP64, symbols ``scipy_cblas_?gemm64_``), whose small sgemm is faster: 64x64
float32 took 5.95 us through SciPy's and 4.92 us through NumPy's (issue 14), measured again
from njit in one process, min of 7: 5.84 vs 4.73 us.  This module binds NumPy's cblas
``sgemm``/``dgemm`` as Numba external functions, resolved by symbol name (``llvmlite``'s
``add_symbol``, done at import), so kernels that call them still go to the disk cache: the
compiled code names the symbol, never an address.  Using NumPy's library also keeps
dispatch_jit's products in the same thread pool as NumPy's own, one pool fewer on shared
cores.  Where NumPy has no such library (another build, complex dtypes) ``np.dot`` runs.

Every float product of the library goes through here (kernels/linalg/cpu.py's ``_blas``,
product.py's ``product_into`` that the compiled plans call), so eager and compiled products
call the same gemm with the same transpose flags and get the same bits.

Threads: before each product, the OpenBLAS count is set to
``dispatch_jit.jit.threads.blas_threads(2*m*n*k)`` (``openblas_set_num_threads_local`` of the
library that runs it: NumPy's, or SciPy's for ``np.dot``), the cap read from the C global that
``dj.set_num_threads`` writes: the count follows from the sizes alone, so the bits do too.  That
setter sets the library's count (0.3.31, pthreads build), so the set and the gemm must not be
split by another thread's: every caller of this module is njit code that holds the GIL (no
``nogil``), which keeps them together.  NumPy's own products in other threads run with
whatever count dispatch_jit's last product left.
"""

from __future__ import annotations

import ctypes
import glob
import os

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba import types as nbt
from numba.core.extending import intrinsic, overload

from dispatch_jit.jit.threads import BLAS_GRAIN, NUM_THREADS_SYMBOL

__all__ = ["LIBRARY", "cblas_gemm", "gemm", "dot_into"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _numpy_openblas() -> tuple[str, dict]:
    """(library path, {dtype: gemm address}) of NumPy's bundled ILP64 OpenBLAS, or ("", {})."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*"))):
        try:
            lib = ctypes.CDLL(path)    # already loaded by NumPy: the same handle, the same pool
            return path, {np.dtype(dt): ctypes.cast(getattr(lib, f"scipy_cblas_{t}gemm64_"), ctypes.c_void_p).value
                          for t, dt in (("s", np.float32), ("d", np.float64))}
        except (OSError, AttributeError):
            continue
    return "", {}


LIBRARY, _ADDRESSES = _numpy_openblas()   # LIBRARY: the path bound, "" where np.dot runs instead


def _local_threads_setter(pattern: str, symbol: str):
    """The Numba external function ``int symbol(int)``: ``openblas_set_num_threads_local`` of the
    library ``pattern`` names (each OpenBLAS exports it under that one name), or None."""
    for path in sorted(glob.glob(pattern)):
        try:
            address = ctypes.cast(ctypes.CDLL(path).openblas_set_num_threads_local, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
        llvm.add_symbol(symbol, address)
        return nbt.ExternalFunction(symbol, nbt.intc(nbt.intc))
    return None


def _scipy_openblas() -> str:
    try:
        import scipy
    except ImportError:
        return ""
    return os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs", "libscipy_openblas-*")


_NUMPY_THREADS = _local_threads_setter(LIBRARY, "dispatch_jit_numpy_openblas_threads") if LIBRARY else None
_SCIPY_THREADS = _local_threads_setter(_scipy_openblas(), "dispatch_jit_scipy_openblas_threads")


@intrinsic
def _num_threads(typingctx):
    """``dj.get_num_threads()`` inside njit code: a load of the C global it is kept in, named by
    symbol (no address in the compiled code, which the disk cache can then store)."""
    def codegen(context, builder, sig, args):
        gv = builder.module.globals.get(NUM_THREADS_SYMBOL)
        if gv is None:
            gv = ir.GlobalVariable(builder.module, ir.IntType(32), NUM_THREADS_SYMBOL)
            gv.linkage = "external"
        return builder.load(gv)
    return nbt.int32(), codegen


def _threads_for(fn):
    """``f(m, n, k)`` for njit code: set the count of the OpenBLAS whose
    ``openblas_set_num_threads_local`` is ``fn`` for an m x k @ k x n product (threads.blas_threads)."""
    def f(m, n, k):
        return _impl            # for the fingerprint, as _gemm_2d's

    @overload(f)
    def _impl(m, n, k):
        if fn is None:
            return lambda m, n, k: None

        def impl(m, n, k):
            fn(max(1, min(np.int64(_num_threads()), (2 * m * n * k) // BLAS_GRAIN)))
        return impl
    return f


_numpy_threads, _scipy_threads = _threads_for(_NUMPY_THREADS), _threads_for(_SCIPY_THREADS)


def _external(dt: np.dtype):
    """The Numba external function of cblas_?gemm for ``dt``, its symbol registered with LLVM."""
    symbol = f"dispatch_jit_cblas_{dt.char}gemm"
    llvm.add_symbol(symbol, _ADDRESSES[dt])
    ft, i, e = numba.from_dtype(dt), nbt.int64, nbt.intc
    p = nbt.CPointer(ft)
    return nbt.ExternalFunction(symbol, nbt.void(e, e, e, i, i, i, ft, p, i, p, i, ft, p, i))


_CBLAS = {dt: _external(dt) for dt in _ADDRESSES}


def _gemm_2d(a, ta, b, tb, out):
    """out = op(a) @ op(b); a and b C-contiguous, ``ta``/``tb``: use the stored matrix's transpose."""
    # names the overload below: the disk cache's fingerprint (jit/fingerprint.py) walks what a
    # function names, and would not otherwise see the implementation's code behind this stub
    return _gemm_2d_impl


@overload(_gemm_2d)
def _gemm_2d_impl(a, ta, b, tb, out):
    if np.dtype(numba.np.numpy_support.as_dtype(a.dtype)) not in _CBLAS:
        # one np.dot call site per layout pair (the layout is part of Numba's type)
        def by_np_dot(a, ta, b, tb, out):
            m, n = out.shape
            _scipy_threads(m, n, a.shape[0] if ta else a.shape[1])
            if ta and tb:
                np.dot(a.T, b.T, out)
            elif ta:
                np.dot(a.T, b, out)
            elif tb:
                np.dot(a, b.T, out)
            else:
                np.dot(a, b, out)
        return by_np_dot

    def by_cblas(a, ta, b, tb, out):
        # row-major: the leading dimension of each stored matrix is its row length
        cblas_gemm(a, ta, max(a.shape[1], 1), b, tb, max(b.shape[1], 1), out, a.shape[0] if ta else a.shape[1])
    return by_cblas


def cblas_gemm(a, ta, lda, b, tb, ldb, out, k):
    """out = op(a) @ op(b) by the bound cblas_?gemm, the stored matrices' leading dimensions given
    (``lda``, ``ldb``: a row stride, or a column stride with the transpose flag, as strided.py
    passes for views), ``k`` the inner size; an empty product writes nothing, k == 0 writes zeros."""
    return _cblas_gemm_impl    # named for the disk cache's fingerprint, as ``_gemm_2d``


@overload(cblas_gemm)
def _cblas_gemm_impl(a, ta, lda, b, tb, ldb, out, k):
    dt = np.dtype(numba.np.numpy_support.as_dtype(a.dtype))
    fn = _CBLAS[dt]
    one, zero = dt.type(1), dt.type(0)

    def impl(a, ta, lda, b, tb, ldb, out, k):
        m, n = out.shape
        if m == 0 or n == 0:
            return
        if k == 0:
            out[:] = 0
            return
        _numpy_threads(m, n, k)
        fn(_ROW_MAJOR, _TRANS if ta else _NO_TRANS, _TRANS if tb else _NO_TRANS, m, n, k, one,
           a.ctypes, lda, b.ctypes, ldb, zero, out.ctypes, max(n, 1))
    return impl


@numba.njit(boundscheck=False)
def gemm(a, ta, b, tb, out):
    """out = op(a) @ op(b) for C-contiguous 2-D ``a``, ``b`` and ``out`` of one float dtype, op the
    transpose where ``ta``/``tb`` say so (an F-ordered operand handed over without a copy)."""
    _gemm_2d(a, ta, b, tb, out)


@numba.njit(boundscheck=False)
def _with_a(a, ta, b, out):
    if b.flags.c_contiguous:
        _gemm_2d(a, ta, b, False, out)
    elif b.T.flags.c_contiguous:
        _gemm_2d(a, ta, b.T, True, out)
    else:
        _gemm_2d(a, ta, np.ascontiguousarray(b), False, out)


@numba.njit(boundscheck=False)
def dot_into(a, b, out):
    """out = a @ b for 2-D ``a`` and ``b`` of any layout (``out`` C-contiguous): an operand that is
    C-contiguous goes as is, one whose transpose is goes transposed, any other is copied first:
    the order kernels/linalg/cpu.py's ``_as_3d`` decides in, so that both call gemm alike."""
    if a.flags.c_contiguous:
        _with_a(a, False, b, out)
    elif a.T.flags.c_contiguous:
        _with_a(a.T, True, b, out)
    else:
        _with_a(np.ascontiguousarray(a), False, b, out)
