"""Argument signatures: the small ints that make up a dispatch memo key.

Every tensor computes one int at creation (``Tensor._sig``) that fixes
everything a kernel is specialized on: its dispatch key set, dtype, ndim,
contiguity and device index.  A Python scalar's signature is a negative int
naming its type.  The dispatcher's memo key is the tuple of these ints plus
the thread-local state, so a cache hit needs no decoding at all; the miss
path decodes them into ``ArgMeta`` records.

Bit layout of a tensor signature::

    bit 0        C-contiguous
    bits 1-7     ndim (0..64, PyTorch's and NumPy's limit; 7 bits hold up to 127)
    bits 8-11    dtype index (dtypes.ALL_DTYPES)
    bits 12-15   device index (cuda:N, N < 16: MAX_DEVICES)
    bits 16-35   dispatch key set bits

The dense CPU and CPU-with-autograd signatures stay below 2**30, one CPython
digit, so hashing the memo key costs what it did with 5 ndim bits: with the
key set from bit 16, AutogradCPU (key 13) is bit 29.  The price is the device
index: four bits, so dispatch_jit addresses CUDA devices 0-15 and a tensor on
a higher one is refused with a clear error (``make_sig``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import ALL_DTYPES, DType, scalar_dtype, from_numpy_dtype
from .errors import CudaUnavailableError
from .keys import CUDA_KEY_BITS, PRIVATEUSE1_KEY_BITS, DispatchKeySet, privateuse1_backend_name

__all__ = ["make_sig", "ArgMeta", "decode", "scalar_sig", "list_sig", "MAX_NDIM", "CUDA_KEY_BITS", "DEVICE_MASK", "DEVICE_SHIFT",
           "KS_SHIFT", "DTYPE_SHIFT", "DTYPE_MASK", "sig_keyset", "keyset_sig_bits", "sig_dtype_index",
           "sig_device_index", "CONTIGUOUS_BIT", "relayout", "MAX_DEVICES", "check_device_index"]

MAX_NDIM = 64
CONTIGUOUS_BIT = 1               # bit 0
NDIM_SHIFT, NDIM_MASK = 1, 127   # 7 bits from bit 1
DTYPE_SHIFT, DTYPE_MASK = 8, 15
KS_SHIFT = 16
DEVICE_SHIFT = 12
MAX_DEVICES = 16                      # cuda:0 .. cuda:15: what the device index bits hold
DEVICE_MASK = (MAX_DEVICES - 1) << DEVICE_SHIFT      # a tensor signature's device index bits (cuda:N)


def check_device_index(index: int) -> None:
    """Raise a clear error for a CUDA device index the signature cannot hold (16 and up)."""
    if not 0 <= index < MAX_DEVICES:
        raise CudaUnavailableError(
            f"CUDA device cuda:{index} cannot be used: dispatch_jit addresses at most {MAX_DEVICES} CUDA devices "
            f"per process (cuda:0 to cuda:{MAX_DEVICES - 1}; a tensor's signature holds the index in 4 bits); "
            f"restrict the visible devices with CUDA_VISIBLE_DEVICES so that the one you want has an index "
            f"below {MAX_DEVICES}")


def make_sig(ks_bits: int, dtype: DType, ndim: int, contiguous: bool, device_index: int = 0) -> int:
    if device_index:        # a CUDA tensor off cuda:0: an index over 15 would overflow into the key set
        check_device_index(device_index)
    return ((ks_bits << KS_SHIFT) | (device_index << DEVICE_SHIFT) | (dtype.index << DTYPE_SHIFT) | (ndim << NDIM_SHIFT)
            | int(contiguous))


def relayout(sig: int, ndim: int, contiguous: bool) -> int:
    """``sig`` with another ndim and contiguity: the signature of a new array of the same dtype,
    key set and device (no dtype lookup, as ``make_sig`` needs)."""
    return (sig & ~((NDIM_MASK << NDIM_SHIFT) | CONTIGUOUS_BIT)) | (ndim << NDIM_SHIFT) | int(contiguous)


# Decoding one field of a tensor signature.  Hot loops inline these same expressions
# (``sig >> DTYPE_SHIFT & DTYPE_MASK``) with the names above, never with the numbers.
def sig_keyset(sig: int) -> int:
    """The dispatch key set bits of a tensor signature."""
    return sig >> KS_SHIFT


def keyset_sig_bits(ks_bits: int) -> int:
    """Key set bits moved to where a tensor signature holds them (to test ``sig & ...``)."""
    return ks_bits << KS_SHIFT


def sig_dtype_index(sig: int) -> int:
    """The dtype index (into ``dtypes.ALL_DTYPES``) of a tensor signature."""
    return (sig >> DTYPE_SHIFT) & DTYPE_MASK


def sig_device_index(sig: int) -> int:
    """The device index (the N of cuda:N) of a tensor signature."""
    return (sig & DEVICE_MASK) >> DEVICE_SHIFT


# Python scalars: one negative signature per type, so `x * 2` and `x * 2.0`
# resolve (and compile) separately, as their promotion differs.
SIG_NONE = -1
_PY_SCALAR_SIGS = {bool: -2, int: -3, float: -4, complex: -5}
_NP_SCALAR_BASE = -100   # numpy scalars: -100 - dtype index


def scalar_sig(x):
    """Signature of a non-tensor argument in a tensor position, or None if it has none."""
    t = type(x)
    s = _PY_SCALAR_SIGS.get(t)
    if s is not None:
        return s
    if x is None:
        return SIG_NONE
    if isinstance(x, np.generic):
        try:
            return _NP_SCALAR_BASE - from_numpy_dtype(x.dtype).index
        except TypeError:
            return None
    if t is list or t is tuple:
        sigs = tuple(SIG_NONE if v is None else getattr(v, "_sig", None) for v in x)    # None: Tensor?[]
        return None if None in sigs else sigs
    s = getattr(x, "_sig", None)     # Tensor subclasses (quantized, sparse) carry their own
    if s is not None:
        return s
    for base in (bool, int, float, complex):   # subclasses (e.g. IntEnum)
        if isinstance(x, base):
            return _PY_SCALAR_SIGS[base]
    return None


def list_sig(x):
    """Memo-key field of a non-tensor list argument (``int[] axis``, ``int[] shape``): its class
    where it is not a sequence (a bare int, None) or a sequence of ints, the common case; else
    the classes of all its elements.  The schema binder refuses a bool or a float in an ``int[]``
    and an int in a ``bool[2]``, so a key of the container's class alone would let a call with
    ``(True,)`` reuse the resolution of one with ``(1,)``, skipping that check.  (Per argument, the
    binder says the same of every non-empty list of ints; an empty list gets a key of its own.)"""
    c = x.__class__
    if c is tuple or c is list:
        for v in x:
            if v.__class__ is not int:
                return (c,) + tuple([v.__class__ for v in x])
        if not x:
            return (c,)
    return c


@dataclass(frozen=True)
class ArgMeta:
    """What the miss path knows about one argument from its signature alone."""

    kind: str                      # "tensor", "scalar", "none", "list"
    dtype: DType | None = None     # tensors; also the promotion dtype of scalars
    ndim: int = 0
    contiguous: bool = True
    keyset: int = 0
    device: str = "cpu"
    pytype: type | None = None     # scalars: bool/int/float/complex or the NumPy scalar type
    items: tuple = ()              # lists: ArgMeta per element

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def keys(self) -> DispatchKeySet:
        return DispatchKeySet.from_bits(self.keyset)


_DECODED: dict = {}
_PY_BY_SIG = {v: k for k, v in _PY_SCALAR_SIGS.items()}


def decode(sig) -> ArgMeta:
    m = _DECODED.get(sig)
    if m is not None:
        return m
    if type(sig) is tuple:
        m = ArgMeta("list", items=tuple(decode(s) for s in sig))
    elif sig == SIG_NONE:
        m = ArgMeta("none")
    elif sig in _PY_BY_SIG:
        py = _PY_BY_SIG[sig]
        m = ArgMeta("scalar", dtype=scalar_dtype(py(0)), pytype=py)
    elif sig <= _NP_SCALAR_BASE:
        d = ALL_DTYPES[_NP_SCALAR_BASE - sig]
        m = ArgMeta("scalar", dtype=d, pytype=d.np.type)
    else:
        ks = sig_keyset(sig)
        device = f"cuda:{sig_device_index(sig)}" if ks & CUDA_KEY_BITS else \
            privateuse1_backend_name() if ks & PRIVATEUSE1_KEY_BITS else "cpu"
        m = ArgMeta("tensor", dtype=ALL_DTYPES[sig_dtype_index(sig)], ndim=(sig >> NDIM_SHIFT) & NDIM_MASK,
                    contiguous=bool(sig & CONTIGUOUS_BIT), keyset=ks, device=device)
    _DECODED[sig] = m
    return m
