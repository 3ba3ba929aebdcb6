"""Dispatch keys and key sets.

A ``DispatchKey`` names one reason a kernel may need to run: a backend (CPU,
CUDA), a layout (SparseCsr), a quantization scheme, or a cross-cutting concern
that wraps the backends (Autograd, Autocast, Tracer, Python modes).  A
``DispatchKeySet`` is a bitmask of runtime keys; the dispatcher ORs the key
sets of a call's tensors, adjusts them with thread-local state, and runs the
kernel of the highest key.  This module is the bottom of the import graph.
"""

from __future__ import annotations

import enum
from typing import Iterable

from .errors import InvalidArgumentError, RegistrationError

__all__ = ["DispatchKey", "DispatchKeySet", "RUNTIME_KEYS", "ALIAS_KEYS", "key_bits", "bits_below", "AUTOGRAD_BITS",
           "AUTOCAST_BITS", "BATCHED_BITS", "CUDA_KEY_BITS", "PRIVATEUSE1_KEY_BITS", "rename_privateuse1_backend",
           "privateuse1_backend_name"]


class DispatchKey(enum.IntEnum):
    """Dispatch keys.

    THE DECLARATION ORDER IS THE PRIORITY: a key declared later wins over a
    key declared earlier.  For runtime keys the value is also the bit position
    in a ``DispatchKeySet``, so "highest priority" is "highest set bit".
    This is a subset of PyTorch's order (c10/core/DispatchKey.h).

    >>> DispatchKey.AutogradCPU > DispatchKey.CPU
    True
    """

    # -- runtime keys, lowest priority first ---------------------------------
    # Undefined is -1 so that Meta takes bit 0 and the keys up to AutogradCPU fit below bit 14:
    # a dense CPU tensor that requires grad keeps a signature under 2**30 (signature.py: KS_SHIFT 16).
    # The backend keys keep PyTorch's order: dense < Quantized < Sparse (COO) < SparseCsr.
    Undefined = -1      # no key: the empty set's highest() (bit_length() - 1 of 0)
    Meta = 0            # shapes and dtypes only, no data
    CPU = 1             # dense CPU kernels (Numba njit)
    CUDA = 2            # dense CUDA kernels (numba.cuda.jit)
    QuantizedCPU = 3
    QuantizedCUDA = 4
    SparseCPU = 5       # sparse COO layout (PyTorch's name), CPU arrays (dispatch_jit/sparse_coo.py)
    SparseCUDA = 6      # sparse COO layout, device arrays (kernels/sparse/coo_cuda.py)
    SparseCsrCPU = 7
    SparseCsrCUDA = 8
    PrivateUse1 = 9     # a backend that is not built in (rename_privateuse1_backend names it)
    Batched = 10        # vmap's BatchedTensor: batching rules (dispatch_jit.func, kernels/batching)
    ADInplaceOrView = 11
    AutogradOther = 12  # autograd for backends without a key of their own
    AutogradCPU = 13
    AutogradCUDA = 14
    AutogradPrivateUse1 = 15
    AutocastCPU = 16
    AutocastCUDA = 17
    Tracer = 18         # compiled mode: records ops instead of running them
    Python = 19         # dispatch modes (DispatchMode.__dispatch__)
    # -- alias keys: registration targets only, never in a runtime key set ---
    CompositeExplicitAutograd = 32
    CompositeImplicitAutograd = 33
    Autograd = 34

    @property
    def is_alias(self) -> bool:
        return self.value >= 32

    @classmethod
    def parse(cls, key: "DispatchKey | str") -> "DispatchKey":
        """Accept a key or its name ("CPU", "AutogradCUDA", ...)."""
        if isinstance(key, DispatchKey):
            return key
        if isinstance(key, str) and key in cls.__members__:
            return cls[key]
        names = ", ".join(cls.__members__)
        raise InvalidArgumentError(f"unknown dispatch key {key!r}; expected one of: {names}")


RUNTIME_KEYS: tuple[DispatchKey, ...] = tuple(k for k in DispatchKey if not k.is_alias and k is not DispatchKey.Undefined)
ALIAS_KEYS: tuple[DispatchKey, ...] = tuple(k for k in DispatchKey if k.is_alias)

_K = DispatchKey

# Backend keys: where data lives and how it is laid out.  Every other runtime
# key is a "functionality" key that wraps a backend.  PrivateUse1 is a backend too, but
# not one the composite alias keys cover: the built-in composite kernels may read NumPy
# storage, which an out-of-tree backend's tensors need not have.  Such a backend registers
# its kernels (or a boxed fallback) at PrivateUse1 itself; an op it lacks is a NoKernelError.
BACKEND_KEYS = (_K.Meta, _K.CPU, _K.CUDA, _K.QuantizedCPU, _K.QuantizedCUDA, _K.SparseCPU, _K.SparseCUDA,
                _K.SparseCsrCPU, _K.SparseCsrCUDA)

AUTOCAST_KEY_FOR_DEVICE = {"cpu": _K.AutocastCPU, "cuda": _K.AutocastCUDA}

# What each alias key stands for, as in PyTorch's getRuntimeDispatchKeySet.
ALIAS_EXPANSION: dict[DispatchKey, tuple[DispatchKey, ...]] = {
    _K.Autograd: (_K.AutogradOther, _K.AutogradCPU, _K.AutogradCUDA, _K.AutogradPrivateUse1),
    _K.CompositeExplicitAutograd: BACKEND_KEYS,
    # and Batched: an op with no batching rule decomposes there, as functorch's OP_DECOMPOSE does
    _K.CompositeImplicitAutograd: BACKEND_KEYS + (_K.AutogradOther, _K.AutogradCPU, _K.AutogradCUDA, _K.Batched),
}


class DispatchKeySet:
    """An immutable set of runtime dispatch keys, stored as an int bitmask.

    >>> ks = DispatchKeySet(DispatchKey.CPU) | DispatchKey.AutogradCPU
    >>> ks.highest()
    <DispatchKey.AutogradCPU: 13>
    >>> DispatchKey.CPU in ks, (ks - DispatchKey.AutogradCPU).highest().name
    (True, 'CPU')
    """

    __slots__ = ("bits",)

    def __init__(self, keys: "DispatchKey | Iterable[DispatchKey] | int | DispatchKeySet" = 0):
        self.bits = _to_bits(keys)

    @classmethod
    def from_bits(cls, bits: int) -> "DispatchKeySet":
        ks = cls.__new__(cls)
        ks.bits = bits
        return ks

    def __or__(self, other) -> "DispatchKeySet":
        return DispatchKeySet.from_bits(self.bits | _to_bits(other))

    __ror__ = __or__

    def __and__(self, other) -> "DispatchKeySet":
        return DispatchKeySet.from_bits(self.bits & _to_bits(other))

    def __sub__(self, other) -> "DispatchKeySet":
        return DispatchKeySet.from_bits(self.bits & ~_to_bits(other))

    def __contains__(self, key: DispatchKey) -> bool:
        key = DispatchKey.parse(key)
        return key is not DispatchKey.Undefined and bool(self.bits >> key & 1)

    def __iter__(self):
        """Keys from highest to lowest priority."""
        bits = self.bits
        while bits:
            top = bits.bit_length() - 1
            yield DispatchKey(top)
            bits &= ~(1 << top)

    def __len__(self) -> int:
        return self.bits.bit_count()

    def __bool__(self) -> bool:
        return self.bits != 0

    def __eq__(self, other) -> bool:
        return isinstance(other, DispatchKeySet) and other.bits == self.bits

    def __hash__(self) -> int:
        return hash(self.bits)

    def highest(self) -> DispatchKey:
        """The key whose kernel runs: the highest-priority key in the set."""
        return DispatchKey(self.bits.bit_length() - 1) if self.bits else DispatchKey.Undefined

    def __repr__(self) -> str:
        return "DispatchKeySet(" + ", ".join(k.name for k in self) + ")"


# -- bits of runtime keys: the one place that spells a key's bit position -------------


def key_bits(*keys: DispatchKey) -> int:
    """The bitmask of runtime ``keys`` (a key's bit position is its value).

    >>> key_bits(DispatchKey.CPU, DispatchKey.AutogradCPU) == DispatchKeySet([DispatchKey.CPU, DispatchKey.AutogradCPU]).bits
    True
    """
    bits = 0
    for k in keys:
        bits |= _key_bit(k)
    return bits


def bits_below(key: DispatchKey) -> int:
    """The bitmask of every runtime key of lower priority than ``key`` (what a redispatch keeps)."""
    return (1 << key.value) - 1


def _to_bits(keys) -> int:
    if isinstance(keys, DispatchKeySet):
        return keys.bits
    if isinstance(keys, DispatchKey):
        return _key_bit(keys)
    if isinstance(keys, int):
        return keys
    if isinstance(keys, str):
        return _key_bit(DispatchKey.parse(keys))
    bits = 0
    for k in keys:
        bits |= _key_bit(DispatchKey.parse(k))
    return bits


def _key_bit(key: DispatchKey) -> int:
    if key.is_alias:
        raise InvalidArgumentError(f"{key.name} is an alias key: it names a group of runtime keys for registration "
                         f"and cannot be put in a DispatchKeySet; use one of {[k.name for k in ALIAS_EXPANSION[key]]}")
    return 0 if key is DispatchKey.Undefined else 1 << key.value


AUTOGRAD_BITS = key_bits(_K.AutogradOther, _K.AutogradCPU, _K.AutogradCUDA, _K.AutogradPrivateUse1)
AUTOCAST_BITS = key_bits(_K.AutocastCPU, _K.AutocastCUDA)
BATCHED_BITS = key_bits(_K.Batched)
CUDA_KEY_BITS = key_bits(_K.CUDA, _K.QuantizedCUDA, _K.SparseCUDA, _K.SparseCsrCUDA, _K.AutogradCUDA, _K.AutocastCUDA)
PRIVATEUSE1_KEY_BITS = key_bits(_K.PrivateUse1, _K.AutogradPrivateUse1)


# -- PrivateUse1's name ---------------------------------------------------------------
# As in PyTorch, the key keeps its name (kernels register at "PrivateUse1"); the backend's
# name is what devices are called ("dask", "dask:0") and what error messages say.
_PRIVATEUSE1_NAME = ["privateuseone"]


def rename_privateuse1_backend(name: str) -> None:
    """Name the backend that lives on ``DispatchKey.PrivateUse1`` (``torch.utils.rename_privateuse1_backend``):
    its tensors' device type becomes ``name``.  It may be renamed only once, to a new
    lower-case identifier, and renaming again to the same name is a no-op.

    >>> import dispatch_jit as dj
    >>> dj.utils.privateuse1_backend_name() in ("privateuseone", "dask")
    True
    """
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise InvalidArgumentError(f"rename_privateuse1_backend: the name must be a lower-case identifier, got {name!r}")
    if name in ("cpu", "cuda", "meta"):
        raise InvalidArgumentError(f"rename_privateuse1_backend: {name!r} is a built-in device type; choose another name")
    current = _PRIVATEUSE1_NAME[0]
    if current == name:
        return
    if current != "privateuseone":
        raise RegistrationError(f"rename_privateuse1_backend: the PrivateUse1 backend is already named {current!r}; "
                           f"it can be renamed only once (asked for {name!r})")
    _PRIVATEUSE1_NAME[0] = name


def privateuse1_backend_name() -> str:
    """The PrivateUse1 backend's device type: ``"privateuseone"`` until renamed."""
    return _PRIVATEUSE1_NAME[0]
