"""bfloat16 values in NumPy arrays: the conversions every layer uses.

A bfloat16 is the upper half of a float32: 1 sign bit, 8 exponent bits, 7
mantissa bits.  NumPy has no such type, so a bfloat16 array is stored as its
16-bit words (``dtypes.BF16_STORAGE``, read through a uint16 view) and NumPy's
own casts, which would convert the *words* as integers, are never used on it:

* reading widens the bits: ``float32 bits = word << 16`` (exact);
* writing rounds a float32 to nearest, ties to even, as PyTorch's
  ``c10::BFloat16`` does (``(bits + 0x7FFF + lsb) >> 16``); a NaN stays a
  quiet NaN (0x7FC0, PyTorch's scalar conversion);
* other dtypes go through float32 first, as PyTorch's conversion does
  (a float64 or an int64 is rounded to float32, then to bfloat16).

The generated loops do the same per element (``kernels/support/scalar_helpers.py``'s
``_bf16_load`` and ``_bf16_store``), so an array converted here and a kernel's
store agree bit for bit.

>>> import numpy as np
>>> from dispatch_jit.bf16 import from_float32, to_float32
>>> bits = from_float32(np.array([1.0, 1.00390625, 3.0e38], np.float32))
>>> bits.view(np.uint16).tolist(), to_float32(bits).tolist()
([16256, 16256, 32610], [1.0, 1.0, 3.00405527047391e+38])
"""

from __future__ import annotations

import numba
import numpy as np

from .dtypes import BF16_STORAGE, DType, bfloat16
from .jit import cache

__all__ = ["bits", "to_float32", "from_float32", "cast", "words_to_storage", "FINFO"]

QUIET_NAN = 0x7FC0

# PyTorch's torch.finfo(torch.bfloat16): (bits, eps, max, smallest normal, resolution)
FINFO = (16, 2.0 ** -7, float(np.float32(np.uint32(0x7F7F0000).view(np.float32))), 2.0 ** -126, 0.01)


def bits(a: np.ndarray) -> np.ndarray:
    """The uint16 words of a bfloat16 array (a view, no copy)."""
    return a.view(np.uint16)


def words_to_storage(words: np.ndarray) -> np.ndarray:
    """uint16 words as a bfloat16 array (a view)."""
    return np.asarray(words, np.uint16).view(BF16_STORAGE)


def to_float32(a: np.ndarray) -> np.ndarray:
    """A bfloat16 array's values as float32 (exact)."""
    out = np.empty(a.shape, np.uint32)
    np.left_shift(bits(a), np.uint32(16), out=out, dtype=np.uint32)     # one pass, no temporary
    return out.view(np.float32)


@numba.njit(error_model="numpy")
def _round_words(u, out):
    # one pass over float32 bits: NumPy's expression form made four temporaries the size of the
    # input (4-20x slower on a fresh matmul result, whose pages are touched for the first time)
    for i in range(u.size):
        x = u[i]
        r = (x + (np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
        if (x & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
            r = np.uint32(QUIET_NAN)
        out[i] = np.uint16(r)


cache.on_disk("bf16", _round_words)


def from_float32(f: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16, ties to even; NaN stays NaN."""
    f = np.asarray(f, np.float32)
    if f.ndim == 0:
        # a full reduction's result: the same rounding on a Python int, without the array passes
        u = int(f.view(np.uint32))
        w = QUIET_NAN if u & 0x7FFFFFFF > 0x7F800000 else (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return np.array(w, np.uint16).view(BF16_STORAGE)
    out = np.empty(f.shape, np.uint16)
    _round_words(np.ascontiguousarray(f).reshape(-1).view(np.uint32), out.reshape(-1))
    return out.view(BF16_STORAGE)


def cast(a: np.ndarray, to: DType | np.dtype) -> np.ndarray:
    """``a`` converted to the storage of ``to`` (a dj dtype or a NumPy dtype), a new array;
    either side may be bfloat16.  Every dtype conversion of a bfloat16 array goes through here."""
    to_np = to.np if isinstance(to, DType) else np.dtype(to)
    src_bf = a.dtype == BF16_STORAGE
    if src_bf and to_np == BF16_STORAGE:
        return a.copy()
    if src_bf:
        f = to_float32(a)
        if to_np == np.bool_:
            return f != 0
        return f.astype(to_np, copy=False)     # f is new already
    if to_np == BF16_STORAGE:
        if a.dtype.kind == "c":
            # as PyTorch, the real part (NumPy warns when complex values lose their imaginary part)
            a = a.real
        return from_float32(a.astype(np.float32, copy=False))
    out = np.empty(a.shape, to_np)
    np.copyto(out, a, casting="unsafe")
    return out


def is_bfloat16(d) -> bool:
    return d is bfloat16 or (isinstance(d, np.dtype) and d == BF16_STORAGE)


# -- which kernels take bfloat16 --------------------------------------------------------------
# NumPy code that meets a bfloat16 array would treat its words as integers (a silent wrong
# answer), so a kernel takes bfloat16 only once its op library says it converts through this
# module (``support``); the dispatcher refuses the others on the miss path with a NoKernelError.
_SUPPORTED: set[tuple[str, str]] = set()


def support(*names: str, keys: tuple = ("CPU", "CUDA")) -> None:
    """Declare that the kernels at ``keys`` of the ops ``names`` ("aten::add", or one overload,
    "aten::add.Tensor") handle bfloat16 inputs."""
    _SUPPORTED.update((n, k) for n in names for k in keys)


def supported(op_name: str, key: str) -> bool:
    return (op_name, key) in _SUPPORTED or (op_name.split(".", 1)[0], key) in _SUPPORTED


def supported_ops(key: str = "CPU") -> list[str]:
    """The ops (without their overload names) whose kernels at ``key`` take bfloat16, sorted.

    >>> import dispatch_jit as dj
    >>> "aten::add" in dj.bf16.supported_ops()
    True
    """
    return sorted({n.split(".", 1)[0] for n, k in _SUPPORTED if k == key})


def refused(op_name: str, namespace: str, key: str, metas: tuple) -> bool:
    """Whether a call of an aten op at ``key`` (``metas``: the dispatcher's ArgMetas) has a bfloat16
    tensor its kernel is not declared for.  Other namespaces' kernels are their authors' to check."""
    if namespace != "aten" or supported(op_name, key):
        return False
    for m in metas:
        if m is not None:
            for t in (m.items if m.kind == "list" else (m,)):
                if t.kind == "tensor" and t.dtype is bfloat16:
                    return True
    return False


def refusal(op_name: str, device: str) -> str:
    fix = ("Convert the input with .float() and the result back with .bfloat16()" if device == "CPU" else
           "On CUDA the elementwise ops, reductions, copies and casts take bfloat16 so far: move the tensor "
           "to the CPU with .cpu(), or "
           "convert it there with .float() before moving it")
    return (f"'{op_name}' has no bfloat16 kernel on {device}: its kernel would read bfloat16's 16-bit words "
            f"as integers. {fix}; dispatch_jit.bf16.supported_ops({device!r}) lists the ops that take bfloat16")


def astype(a: np.ndarray, to: DType) -> np.ndarray:
    """``a.astype(to.np, copy=False)``, rounding to bfloat16 where ``to`` is bfloat16."""
    return cast(a, to) if to is bfloat16 or a.dtype == BF16_STORAGE else a.astype(to.np, copy=False)
