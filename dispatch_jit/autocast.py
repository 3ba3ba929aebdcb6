"""Autocast: run chosen ops in lower precision, as dispatch keys.

``autocast("cpu")`` adds AutocastCPU (``"cuda"``: AutocastCUDA) to this
thread's include set.  Ops with a policy in the table (kernels/autocast_policy.py)
have an ``AutocastKernel`` at that key: it casts the floating-point tensor
inputs as the policy says and calls the op again with the autocast keys
excluded, exactly as PyTorch's autocast wrappers do; every other op falls
through at no cost.  Autocast sits above Autograd, so the casts are recorded
and each input's gradient arrives in its own dtype.

Defaults, as PyTorch's: bfloat16 on the CPU, float16 on CUDA; either takes
``dtype=`` (float16, bfloat16, float32, float64).  Both 16-bit types are
storage only on the CPU: the kernels compute in float32 and round once when
storing (bfloat16 to nearest even, as PyTorch's CPU kernels).

>>> import dispatch_jit as dj
>>> a = dj.ones(2, 2)
>>> with dj.autocast("cpu"):
...     (a @ a).dtype, (a @ a).sum().dtype
(dispatch_jit.bfloat16, dispatch_jit.float32)
>>> with dj.autocast("cpu", dtype=dj.float16):
...     (a @ a).dtype
dispatch_jit.float16
"""

from __future__ import annotations

import functools
import threading

from .dispatcher import ExcludeDispatchKeyGuard, tls
from .dtypes import DType, as_dtype, bfloat16, float16, float32, promote_types
from .errors import DTypeError, InvalidArgumentError
from .keys import AUTOCAST_BITS, AUTOCAST_KEY_FOR_DEVICE, DispatchKey, key_bits

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "AutocastKernel", "POLICIES"]

_AUTOCAST_BITS = AUTOCAST_BITS
_DEFAULT_DTYPE = {"cpu": bfloat16, "cuda": float16}     # PyTorch's defaults
_LOWER_OK = {"float16", "bfloat16", "float32", "float64"}


class _State(threading.local):
    def __init__(self):
        self.dtype = dict(_DEFAULT_DTYPE)
        self.depth = 0
        self.cache: dict = {}     # id(leaf) -> (leaf, its cast), for one outermost region


_state = _State()


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    return bool(tls.include & key_bits(AUTOCAST_KEY_FOR_DEVICE[device_type]))


def get_autocast_dtype(device_type: str = "cpu") -> DType:
    return _state.dtype[device_type]


class autocast:
    """Context manager and decorator: ops of the lower-precision policy run in ``dtype``.

    Args:
        device_type: "cpu" or "cuda" (which tensors it applies to).
        dtype: the lower precision (default: bfloat16 on "cpu", float16 on "cuda", as PyTorch's).
        enabled: False disables autocast inside an enclosing region.
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True):
        if device_type not in AUTOCAST_KEY_FOR_DEVICE:
            raise InvalidArgumentError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        d = as_dtype(dtype) if dtype is not None else _DEFAULT_DTYPE[device_type]
        if d.name not in _LOWER_OK:
            raise DTypeError(f"autocast: dtype must be a floating dtype (float16, bfloat16, float32, float64), "
                             f"got {d.name}")
        self.device_type, self.dtype, self.enabled = device_type, d, bool(enabled)
        self.bit = key_bits(AUTOCAST_KEY_FOR_DEVICE[device_type])

    def __enter__(self):
        self.prev = (tls.include, _state.dtype[self.device_type])
        tls.include = (tls.include | self.bit) if self.enabled else (tls.include & ~self.bit)
        tls.update()
        _state.dtype[self.device_type] = self.dtype
        _state.depth += 1
        return self

    def __exit__(self, *exc):
        tls.include, _state.dtype[self.device_type] = self.prev
        tls.update()
        _state.depth -= 1
        if _state.depth == 0:
            _state.cache.clear()      # casts are cached within one region only

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapper


def _cast(t, dtype: DType):
    """Cast a floating tensor; leaves that require grad (weights) are cast once per region."""
    if t.dtype is dtype:
        return t
    if t.requires_grad and t.grad_fn is None:
        hit = _state.cache.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        c = t.to(dtype)
        _state.cache[id(t)] = (t, c)
        return c
    return t.to(dtype)


def _floating(v) -> bool:
    # dense floating tensors only: quantized and sparse tensors keep their own representation
    return hasattr(v, "_sig") and v.layout == "strided" and getattr(v.dtype, "category", -1) == 2


# policy name -> how the floating inputs are cast, given the call's floating inputs
def _lower(tensors, device):
    return _state.dtype[device]


def _fp32(tensors, device):
    return float32


def _promote(tensors, device):
    widest = None
    for t in tensors:
        widest = t.dtype if widest is None else promote_types(widest, t.dtype)
    return widest


POLICIES = {"lower_precision": _lower, "fp32": _fp32, "promote": _promote}


class AutocastKernel:
    """The kernel of one op at AutocastCPU/AutocastCUDA under one policy."""

    def __init__(self, policy: str):
        self.policy = POLICIES[policy]
        self.__name__ = f"autocast_{policy}"

    @classmethod
    def to_dtype(cls, dtype: DType) -> "AutocastKernel":
        """A kernel that casts every floating input to ``dtype`` (custom ops' register_autocast)."""
        k = cls("fp32")
        k.policy = lambda tensors, device: dtype
        k.__name__ = f"autocast_to_{dtype.name}"
        return k

    def specialize(self, call):
        device = "cuda" if call.key is DispatchKey.AutocastCUDA else "cpu"
        entry = call.op.entry
        schema = call.op.schema
        kwnames = [a.name for a in schema.arguments if a.kwarg_only]
        npos = len(schema.arguments) - len(kwnames)
        tensor_pos = [i for i, a in enumerate(schema.arguments) if a.type.is_tensor_like and a.name != "out"]
        list_pos = [i for i in tensor_pos if schema.arguments[i].type.is_list]
        policy = self.policy

        def run(*args):
            args = list(args)
            floats = [args[i] for i in tensor_pos if i not in list_pos and _floating(args[i])]
            for i in list_pos:
                floats += [t for t in args[i] if _floating(t)]
            if floats:
                target = policy(floats, device)
                for i in tensor_pos:
                    if i in list_pos:
                        args[i] = [_cast(t, target) if _floating(t) else t for t in args[i]]
                    elif _floating(args[i]):
                        args[i] = _cast(args[i], target)
            with ExcludeDispatchKeyGuard(_AUTOCAST_BITS):
                return entry(*args[:npos], **dict(zip(kwnames, args[npos:])))
        return run
