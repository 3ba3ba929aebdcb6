"""CPU matmul and dot on NumPy arrays: BLAS through Numba, and a Numba loop nest.

The dispatcher promotes both operands to one dtype, then asks this module for
a dtype-specialized callable (``get_matmul`` / ``get_dot``) once, on its miss
path.  The callable does the shape work in Python (``numpy.matmul``
semantics: 1-D operands promoted and the added dimension dropped, batch
dimensions broadcast), flattens the batch into a leading axis and makes one
call into a compiled kernel, whatever the batch size.

Which kernel runs, by dtype (``_KIND``):

- float32/64, complex64/128: gemm inside ``@numba.njit`` (gemm.py): the
  cblas sgemm/dgemm of NumPy's own OpenBLAS (0.3.31), bound by symbol name;
  complex, or a NumPy without that library, Numba's ``np.dot``, which binds
  scipy's OpenBLAS (0.3.30).  Measured on the 2-core machine, 1024x1024,
  median of 5, each pool given 0.3 s to go idle first: float32 np.matmul
  9.4 ms, njit np.dot into a preallocated out 9.7 ms, scipy.linalg.blas.sgemm
  from Python 9.9 ms; this module's matmul (then through np.dot) over three
  quiet runs 0.98-1.07x np.matmul (float64: 20.0 vs 21.0 ms, 0.96x).  For
  64x64 float32 NumPy's library is faster (4.73 vs 5.84 us from njit, min of 7).
  So the project's "kernels are Numba code" rule costs nothing and is kept.
  Interleaving the two libraries call by call is unfair to whichever runs
  second (the other pool's threads are still spinning), and any timing
  taken while another process holds a core is 2-10x off for both.
  F-ordered operands go to BLAS as transposes, never copied.
  Batches of tiny matrices (``m*n*k <= _SMALL_MNK``) use the loop nest
  below: a BLAS call costs more than 8x8x8 multiply-adds (1000 x (8x8)
  float32: 180 us through BLAS, 85 us in the loop nest, 84 us np.matmul);
  so do skinny products (a few rows, ``product.skinny``: 3 x 512 @ 512 x 64 5 us, BLAS 9-15 us;
  compiled plans make the same choice through product.py, for eager mode's bits).
  BLAS is only ever called serially: called from ``prange`` threads it
  fights OpenBLAS's own threads (measured 25x slower on 16 x (128x128)).
- int8/16/32/64, uint8: a cache-blocked i-k-j loop nest (``_ikj_rows``)
  whose inner j loop LLVM vectorizes (checked in the assembly: 512-bit
  vpmulld for int32, vpmullw for int8).  Results are stored in the dtype itself, so they wrap exactly like
  NumPy's.  NumPy has no integer BLAS; its integer matmul is a strided dot
  loop: 256x256 int32 takes it 12.6 ms, this module 0.45 ms (2 threads).
  Matrix-vector shapes (``n < _ROWDOT_MAX_N``) use a row-dot form that
  vectorizes over k instead.
- float16 and bfloat16: computed in float32 and rounded once, like
  PyTorch and NumPy (which also accumulates float16 in float32) do.
- bool: rejected, as PyTorch has no bool matmul on the CPU.

Each kernel compiles lazily, once per (kernel, dtype), for one fixed
signature (3-D C-contiguous operands), and the module keeps the compiled
entry point (not Numba's generic dispatcher) in the compile cache (``_ENTRY``, kind "linalg"); the parallel
variants compile only when a call is big enough to use them.
``compiled_signatures()`` shows what has been compiled so far.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit import bf16
from dispatch_jit.dtypes import BF16_STORAGE
from dispatch_jit.jit import cache
from dispatch_jit.kernels.linalg.gemm import gemm
from dispatch_jit.kernels.linalg.product import ikj_rows as _ikj_rows, product_into, skinny
from dispatch_jit.kernels.linalg.strided import eligible, strided_matmul

try:
    from dispatch_jit.errors import CastingError, DTypeError, ShapeError
except Exception:  # the package is mid-construction: load the leaf module by path
    import importlib.util
    import os

    _errors_path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "dispatch_jit", "errors.py")
    _spec = importlib.util.spec_from_file_location("_dispatch_jit_errors", _errors_path)
    _errors = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_errors)
    CastingError, DTypeError, ShapeError = _errors.CastingError, _errors.DTypeError, _errors.ShapeError

__all__ = ["SUPPORTED_DTYPES", "matmul_result_shape", "get_matmul", "get_dot", "matrix_product",
           "compiled_signatures"]

# dtype -> how it is computed (the module docstring says why)
_KIND = {np.dtype(t): kind for kind, ts in {
    "blas": (np.float32, np.float64, np.complex64, np.complex128),
    "loop": (np.int8, np.int16, np.int32, np.int64, np.uint8),
    "half": (np.float16, BF16_STORAGE),
}.items() for t in ts}
SUPPORTED_DTYPES = tuple(d for d in _KIND if d != BF16_STORAGE)     # NumPy's (and bfloat16, stored as words)

_ROWDOT_MAX_N = 4          # n below this: the row-dot form (vectorizes over k)
_SMALL_MNK = 8 * 8 * 8     # float batches of matrices this small use the loop nest
# (skinny products' choice, and the i-k-j nest itself, live in product.py: compiled plans share them)
_PARALLEL_MIN = 1 << 18    # multiply-adds per loop-nest call before prange (see _parallel)


# --- kernels --------------------------------------------------------------
# Every kernel takes a3 (Ba, m, k), b3 (Bb, k, n), ia/ib (B,) batch index maps
# and writes o3 (B, m, n); all arrays C-contiguous.  Ranges whose start is not
# a literal 0 are written over slices: Numba cannot prove `j >= 0` for
# range(j0, j1), and its negative-index wraparound select stops vectorization.

@numba.njit(boundscheck=False)
def _rowdot_rows(a, bt, out, i0, i1):
    """out[i0:i1] = a[i0:i1] @ bt.T for integers: each entry a reduction over
    k, in int64 (products wrap mod 2**64, so the stored low bits are exact;
    int64 also keeps uint8 out of Numba's int64-with-uint64 -> float64 rule)."""
    k = a.shape[1]
    for i in range(i0, i1):
        ar = a[i]
        for j in range(bt.shape[0]):
            br = bt[j]
            acc = np.int64(0)
            for kk in range(k):
                acc += np.int64(ar[kk]) * np.int64(br[kk])
            out[i, j] = acc


def _serial(rows):
    def kernel(a3, b3, ia, ib, o3):
        for t in range(o3.shape[0]):
            rows(a3[ia[t]], b3[ib[t]], o3[t], 0, o3.shape[1])
    return numba.njit(boundscheck=False)(kernel)


def _parallel_batch(rows):
    def kernel(a3, b3, ia, ib, o3):
        for t in numba.prange(o3.shape[0]):
            rows(a3[ia[t]], b3[ib[t]], o3[t], 0, o3.shape[1])
    return numba.njit(parallel=True, boundscheck=False)(kernel)


def _parallel_rows(rows):
    # nchunks (the thread count) comes from the caller: numba.get_num_threads() called in here
    # would embed the threading layer's address in the code, which keeps a kernel off the disk cache
    def kernel(a3, b3, ia, ib, o3, nchunks):
        m = o3.shape[1]
        for t in range(o3.shape[0]):
            a, b, o = a3[ia[t]], b3[ib[t]], o3[t]
            for c in numba.prange(nchunks):  # contiguous row chunks keep b's tile reuse
                rows(a, b, o, m * c // nchunks, m * (c + 1) // nchunks)
    return numba.njit(parallel=True, boundscheck=False)(kernel)


@numba.njit(boundscheck=False)
def _blas(a3, b3, ia, ib, o3, ta, tb):
    """Batched gemm (gemm.py: NumPy's OpenBLAS).  ta/tb: a3/b3 hold the transposed matrices
    (C-contiguous), which gemm is told instead of copying them."""
    for t in range(o3.shape[0]):
        gemm(a3[ia[t]], ta, b3[ib[t]], tb, o3[t])


# name -> (njit function, the types of its arguments after (a3, b3, ia, ib, o3): blas's two
# transpose flags, the row-parallel kernels' chunk count)
_FLAGS, _NCHUNKS = (nbt.boolean, nbt.boolean), (nbt.intp,)
_KERNELS = {
    "blas": (_blas, _FLAGS),
    "ikj": (_serial(_ikj_rows), ()),
    "ikj_parallel_batch": (_parallel_batch(_ikj_rows), ()),
    "ikj_parallel_rows": (_parallel_rows(_ikj_rows), _NCHUNKS),
    "rowdot": (_serial(_rowdot_rows), ()),
    "rowdot_parallel_batch": (_parallel_batch(_rowdot_rows), ()),
    "rowdot_parallel_rows": (_parallel_rows(_rowdot_rows), _NCHUNKS),
}
_CACHE_KIND = __name__               # the compile cache's name for these kernels (a fresh copy of
                                       # this module, with its own njit functions, gets its own)
_ENTRY = cache.entries(_CACHE_KIND)    # (kernel name, np.dtype) -> compiled entry point
_INDEX = nbt.Array(nbt.intp, 1, "C")
_ZERO = np.zeros(1, np.intp)


def _entry(name: str, dt: np.dtype):
    """The compiled entry point of kernel `name` for `dt`, compiling it on first use."""
    fn = _ENTRY.get((name, dt))
    if fn is None:
        func, extra = _KERNELS[name]
        arr = nbt.Array(numba.from_dtype(dt), 3, "C")
        sig = (arr, arr, _INDEX, _INDEX, arr) + extra
        fn = cache.njit_function(_CACHE_KIND, (name, dt), name, func, sig)
    return fn


def matrix_product(dtype):
    """``f(a, b) -> a @ b`` for 2-D C-contiguous float or complex arrays of ``dtype`` whose
    shapes fit and are not empty (what a caller that knows this can skip checking), else None
    for dtypes that take another kernel; the same kernel (BLAS, or the loop nest for a skinny
    product), and bits, as ``get_matmul``'s.

    >>> f = matrix_product(np.float64)
    >>> f(np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    dt, kind = _kind_of(dtype, "matmul")
    if kind != "blas":
        return None
    key = ("product_2d", dt)
    ep = _ENTRY.get(key)
    if ep is None:
        arr = nbt.Array(numba.from_dtype(dt), 2, "C")
        ep = cache.njit_function(_CACHE_KIND, key, "product_2d", product_into, (arr, arr, arr))
    empty = np.empty

    def product(a, b):
        out = empty((a.shape[0], b.shape[1]), dt)
        ep(a, b, out)
        return out
    return product


def compiled_signatures() -> dict[str, list[str]]:
    """Kernel name -> the Numba signatures compiled so far (empty until first use).

    >>> isinstance(compiled_signatures(), dict)
    True
    """
    return cache.signatures(_CACHE_KIND)


# --- shapes ---------------------------------------------------------------

def _plan(sa: tuple, sb: tuple):
    """numpy.matmul's shape rule: (result shape, batch shape, m, k, n)."""
    if not sa or not sb:
        raise ShapeError(f"matmul: both arguments need at least one dimension, "
                         f"got shapes {tuple(sa)} and {tuple(sb)}")
    m, k = (1, sa[0]) if len(sa) == 1 else sa[-2:]
    kb, n = (sb[0], 1) if len(sb) == 1 else sb[-2:]
    if k != kb:
        raise ShapeError(f"matmul: shapes {tuple(sa)} and {tuple(sb)} cannot be multiplied "
                         f"({k} != {kb})")
    ba, bb = sa[:-2], sb[:-2]
    if ba == bb or not bb:
        batch = tuple(ba)
    elif not ba:
        batch = tuple(bb)
    else:
        nd = max(len(ba), len(bb))
        pa, pb = (1,) * (nd - len(ba)) + tuple(ba), (1,) * (nd - len(bb)) + tuple(bb)
        if any(x != y and x != 1 and y != 1 for x, y in zip(pa, pb)):
            raise ShapeError(f"matmul: batch dimensions {tuple(ba)} and {tuple(bb)} of shapes "
                             f"{tuple(sa)} and {tuple(sb)} cannot be broadcast together")
        batch = tuple(y if x == 1 else x for x, y in zip(pa, pb))
    shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
    return shape, batch, m, k, n


def matmul_result_shape(sa: tuple, sb: tuple) -> tuple:
    """The shape of ``numpy.matmul`` of arrays shaped `sa` and `sb`.

    Raises ShapeError for 0-d operands, mismatched inner dimensions or batch
    dimensions that do not broadcast.

    >>> matmul_result_shape((1, 3, 4), (5, 4, 2))
    (5, 3, 2)
    >>> matmul_result_shape((3,), (3, 2))
    (2,)
    """
    return _plan(sa, sb)[0]


def _as_3d(x: np.ndarray, nb: int, r: int, c: int, trans_ok: bool):
    """x (..., r, c), or 1-D with r*c elements, as a C-contiguous (nb, r, c)
    array; with trans_ok, as the (nb, c, r) array of its transposes (flag
    True) when that is a view.  Copies only when neither is."""
    if x.flags.c_contiguous:
        return x.reshape(nb, r, c), False
    if trans_ok and x.ndim >= 2:
        xt = x.swapaxes(-1, -2)
        if xt.flags.c_contiguous:
            return xt.reshape(nb, c, r), True
    return np.ascontiguousarray(x).reshape(nb, r, c), False


def _copied(x: np.ndarray) -> bool:
    """Whether ``_as_3d(x, ..., trans_ok=True)`` copies ``x``."""
    return not x.flags.c_contiguous and not (x.ndim >= 2 and x.swapaxes(-1, -2).flags.c_contiguous)


def _batch_index(bx: tuple, batch: tuple, nbatch: int) -> np.ndarray:
    """For each flattened output batch entry, the flattened batch entry of an
    operand with batch shape bx (broadcasting without materializing)."""
    if nbatch == 1:
        return _ZERO
    if bx == batch:
        return np.arange(nbatch, dtype=np.intp)
    idx = np.arange(math.prod(bx), dtype=np.intp).reshape(bx)
    return np.broadcast_to(idx, batch).ravel()


# --- plans: everything the shapes alone decide, cached per (kind, shapes) --

_PLANS: dict = {}
_MAX_PLANS = 4096  # a bound, not a tuning knob: shapes that keep changing must not grow memory


def _make_plan(kind: str, sa: tuple, sb: tuple):
    """Shape checks, batch index maps and the kernel choice for one call shape.

    Kernel choice, in order:
      1. floats/complex: BLAS, unless a batch of matrices with m*n*k <=
         _SMALL_MNK, or a product ``product.skinny`` sends to the loop nest
         (few rows), where per-call BLAS overhead dominates;
      2. integers: the row-dot form when n < _ROWDOT_MAX_N, else i-k-j;
      3. a loop nest with at least _PARALLEL_MIN multiply-adds goes parallel
         (over the batch when it is large, else over rows; see _parallel).
    """
    shape, batch, m, k, n = _plan(sa, sb)
    nbatch = math.prod(batch)
    ba = tuple(sa[:-2])
    bb = tuple(sb[:-2])
    mnk = m * n * k
    if kind == "blas" and (nbatch == 1 or mnk > _SMALL_MNK) and not skinny(m, k, n):
        kernel = "blas"
    else:
        kernel = "rowdot" if kind == "loop" and n < _ROWDOT_MAX_N else "ikj"
    plan = (shape, m, k, n, nbatch, math.prod(ba), math.prod(bb),
            _batch_index(ba, batch, nbatch), _batch_index(bb, batch, nbatch),
            kernel, kernel != "blas" and nbatch * mnk >= _PARALLEL_MIN)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[(kind, sa, sb)] = plan
    return plan


def _parallel(kernel: str, nbatch: int, m: int) -> str:
    """The prange variant for a big loop-nest call, given the current thread
    count (numba.set_num_threads may change it between calls).  A prange
    launch costs ~2 us and pays from ~32K multiply-adds on an idle machine;
    _PARALLEL_MIN sits 8x higher (20-60 us of serial work) because on a busy
    one a parallel region waits for a time slice: measured 7 ms instead of
    85 us for 1000 x (8x8) while another process held a core."""
    nthreads = numba.get_num_threads()
    if nbatch >= 2 * nthreads:
        return kernel + "_parallel_batch"
    if m >= nthreads > 1:
        return kernel + "_parallel_rows"
    return kernel


# --- the callables --------------------------------------------------------

def _check_out(out, shape, dt, name):
    if not isinstance(out, np.ndarray) or out.shape != shape:
        got = out.shape if isinstance(out, np.ndarray) else type(out).__name__
        raise ShapeError(f"{name}: out has shape {got}, expected {shape}")
    if out.dtype != dt:
        raise CastingError(f"{name}: out has dtype {out.dtype}, expected {dt}; "
                           f"allocate out with dtype {dt} or omit it")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ShapeError(f"{name}: out must be a writeable C-contiguous array "
                         f"(np.empty({shape}, {dt}))")


def _matmul(dt: np.dtype, kind: str, a: np.ndarray, b: np.ndarray, out, name="matmul"):
    if a.dtype != dt or b.dtype != dt:
        raise DTypeError(f"{name}: kernel for {dt} called with {a.dtype} and {b.dtype}; "
                         f"promote both operands to one dtype and use get_{name}(dtype)")
    sa, sb = a.shape, b.shape
    plan = _PLANS.get((kind, sa, sb)) or _make_plan(kind, sa, sb)
    shape, m, k, n, nbatch, na, nb, ia, ib, kernel, parallel = plan
    if out is not None:
        _check_out(out, shape, dt, name)
        if np.may_share_memory(out, a) or np.may_share_memory(out, b):
            out[...] = _matmul(dt, kind, a, b, None, name)
            return out
    if kind == "half":  # compute in float32, round once (bfloat16: to nearest even, bf16.py)
        r32 = _matmul(_F32, "blas", bf16.cast(a, _F32), bf16.cast(b, _F32), None, name)
        r = bf16.cast(r32, dt)
        if out is None:
            return r
        out[...] = r
        return out
    res = np.empty(shape, dt) if out is None else out
    o3 = res.reshape(nbatch, m, n)
    if kernel == "blas":
        if (_copied(a) or _copied(b)) and eligible(a) and eligible(b):
            strided_matmul(a, b, o3, ia, ib)     # strided.py: the views as they are, no copies
            return res
        a3, ta = _as_3d(a, na, m, k, True)
        b3, tb = _as_3d(b, nb, k, n, True)
        _entry(kernel, dt)(a3, b3, ia, ib, o3, ta, tb)
        return res
    if parallel:
        kernel = _parallel(kernel, nbatch, m)
    a3, _ = _as_3d(a, na, m, k, False)
    if kernel[0] == "r":  # rowdot wants b's columns contiguous: hand it b's transpose
        b3, _ = _as_3d(b.swapaxes(-1, -2) if b.ndim > 1 else b, nb, n, k, False)
    else:
        b3, _ = _as_3d(b, nb, k, n, False)
    if kernel.endswith("_parallel_rows"):
        _entry(kernel, dt)(a3, b3, ia, ib, o3, numba.get_num_threads())
    else:
        _entry(kernel, dt)(a3, b3, ia, ib, o3)
    return res


_F32 = np.dtype(np.float32)
_MATMUL: dict = {}  # np.dtype -> callable
_DOT: dict = {}


def _kind_of(dtype, name: str):
    dt = np.dtype(dtype)
    kind = _KIND.get(dt)
    if kind is None:
        why = " (PyTorch has no bool matmul on the CPU either)" if dt == np.bool_ else ""
        raise DTypeError(f"{name}: dtype {dt} is not supported{why}; supported dtypes: "
                         f"{', '.join(map(str, SUPPORTED_DTYPES))}, bfloat16; cast the operands to one of them")
    return dt, kind


def get_matmul(dtype):
    """The matmul callable ``f(a, b, out=None) -> np.ndarray`` for `dtype`.

    `a` and `b` must already have `dtype`; semantics are ``numpy.matmul``'s,
    except that a 1-D x 1-D product returns a 0-d array.  `out`, if given,
    is a C-contiguous array of the result's shape and dtype.  Nothing
    compiles until the first call.

    >>> f = get_matmul(np.float64)
    >>> f(np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    fn = _MATMUL.get(np.dtype(dtype))
    if fn is None:
        dt, kind = _kind_of(dtype, "matmul")

        def fn(a, b, out=None):
            return _matmul(dt, kind, a, b, out)
        fn.__name__ = fn.__qualname__ = f"matmul_{dt}"
        _MATMUL[dt] = fn
    return fn


def check_dot_shapes(a, b) -> None:
    """dot's shape rule (two 1-D arrays of one length), for the CPU and CUDA kernels."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"dot: expected two 1-D arrays, got shapes {a.shape} and {b.shape}; "
                         f"use matmul for matrices")
    if a.shape != b.shape:
        raise ShapeError(f"dot: shapes {a.shape} and {b.shape} differ in length "
                         f"({a.shape[0]} != {b.shape[0]})")


def get_dot(dtype):
    """The dot callable ``f(a, b) -> 0-d np.ndarray`` for `dtype`: PyTorch's
    dot, 1-D x 1-D of equal length only, without conjugation.

    >>> get_dot(np.int32)(np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32))
    array(5, dtype=int32)
    """
    fn = _DOT.get(np.dtype(dtype))
    if fn is None:
        dt, kind = _kind_of(dtype, "dot")

        def fn(a, b):
            check_dot_shapes(a, b)
            return _matmul(dt, kind, a, b, None, "dot")
        fn.__name__ = fn.__qualname__ = f"dot_{dt}"
        _DOT[dt] = fn
    return fn
