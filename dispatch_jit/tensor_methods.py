"""Tensor methods of PyTorch's that are no single op: ``.data``, ``is_floating_point`` and the
in-place fills and scatters (``zero_``, ``fill_``, ``normal_``, ``uniform_``, ``masked_fill_``,
``scatter_``, ``scatter_add_``).  _install.py binds ``METHODS`` onto Tensor.

Each in-place method computes its new values (a fill, random samples, or the functional op:
``masked_fill``, ``scatter``, ``scatter_add``) and writes them with item assignment,
``self[...] = values``, which carries the codebase's in-place rules (autograd/inplace.py's
``setitem``): the version counter moves, a leaf that requires grad refuses, a view writes
through to its base and rebases its history, and under autograd the write records CopySlices,
so the gradient flows to whatever the values were computed from (the functional op's inputs,
``self``'s old value among them) and a fill gives ``self`` a zero gradient, as PyTorch.
"""

from __future__ import annotations

import functools

import numpy as np

from .bf16 import astype as bf16_astype
from .dtypes import COMPLEX, FLOAT
from .autograd.grad_mode import is_grad_enabled
from .creation import full
from .errors import ArgumentTypeError, AutogradError, DTypeError, InvalidArgumentError
from .registry import lookup
from .tensor import Tensor, _AUTOGRAD_SIG_BITS, _sig_for
from .tensor_factories import METHODS as _FACTORIES
from .writes import before_write

__all__ = ["METHODS"]

_new = object.__new__


def _get_data(self) -> Tensor:
    # detach() shares the version counter; .data does not (PyTorch's difference between the two:
    # changes through .data are invisible to autograd's saved-tensor checks)
    t = _new(Tensor)
    t._data = self._data
    t._sig = self._sig & ~_AUTOGRAD_SIG_BITS
    return t


_NATIVE_DEVICES = {"cpu", "cuda"}     # storages whose signature _sig_for computes


def _set_data(self, value) -> None:
    """``x.data = y``: x takes y's storage (shape, dtype and device too: CPU and CUDA) and keeps
    its own autograd identity (requires_grad, .grad, grad_fn), as PyTorch (``Module.to`` moves
    parameters this way, so that an optimizer made before still holds them)."""
    if not isinstance(value, Tensor):
        raise ArgumentTypeError(f"data must be set to a Tensor, got {type(value).__name__}")
    if value.device != self.device and not {value.device.type, self.device.type} <= _NATIVE_DEVICES:
        raise DTypeError(f"data: cannot set the data of a {self.device} tensor to a {value.device} tensor; "
                         f"move it first: value.to({str(self.device)!r})")
    before_write(self)      # a pending compiled-mode graph that reads the old storage reads it now
    self._data = value._data
    self._sig = _sig_for(value._data, self.requires_grad)


def is_floating_point(self) -> bool:
    """Whether this tensor's dtype is a floating-point one (float16, float32, float64).

    >>> import dispatch_jit as dj
    >>> dj.tensor([1.0]).is_floating_point(), dj.tensor([1]).is_floating_point()
    (True, False)
    """
    return self.dtype.category == FLOAT


def _part(name: str):
    def part(self) -> Tensor:
        if self.dtype.category != COMPLEX:
            if name == "real":
                return self          # PyTorch's x.real of a real tensor is x
            raise DTypeError("imag is not implemented for tensors with non-complex dtypes (as PyTorch); "
                             "dj.imag(x) gives zeros")
        out = lookup(f"aten::{name}").entry(self)
        a = out._data
        if not hasattr(a, "flags"):
            raise DTypeError(f"x.{name} of a {self.device} tensor is not implemented: use dj.{name}(x), a copy")
        # PyTorch's x.real/x.imag are views that write through to x; this is a copy, made read-only so
        # that a write into it raises instead of silently missing x
        a.flags.writeable = False
        return out
    part.__doc__ = (f"``x.{name}``: the {name} part of a complex tensor, as a read-only copy (PyTorch's is a "
                    f"view that writes through; write into x instead)" +
                    (", and ``x`` itself for a real tensor." if name == "real" else "."))
    return property(part)


def is_complex(self) -> bool:
    """Whether this tensor's dtype is a complex one (complex64, complex128).

    >>> import dispatch_jit as dj
    >>> dj.tensor([1j]).is_complex(), dj.tensor([1.0]).is_complex()
    (True, False)
    """
    return self.dtype.category == COMPLEX


def _write(op: str, self, values) -> Tensor:
    if self.requires_grad and self.grad_fn is None and is_grad_enabled():
        # the check item assignment makes, named for the method called
        raise AutogradError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                            f"do it under dj.no_grad() (as nn.init does) or on a clone")
    self[...] = values
    return self


def _scalar(self, value):
    """The fill value: a number as it is (item assignment casts it as PyTorch's fill does, 2.7 into
    int32 is 2, and refuses what the dtype cannot hold), a 0-d tensor in this tensor's dtype."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise DTypeError(f"fill_: only supports a 0-dimensional value tensor, but got a tensor with "
                             f"{value.ndim} dimensions")
        return value.to(self.dtype) if value.dtype is not self.dtype else value
    if not isinstance(value, (bool, int, float, complex, np.generic)):
        raise ArgumentTypeError(f"fill_: value must be a number or a 0-d tensor, got {type(value).__name__} "
                                f"({value!r:.40})")
    return value


def fill_(self, value) -> Tensor:
    """Fill this tensor with ``value`` in place (cast to its dtype).

    >>> import dispatch_jit as dj
    >>> dj.zeros(3, dtype=dj.int32).fill_(2.7)
    tensor([2, 2, 2], dtype=dj.int32)
    """
    return _write("fill_", self, _scalar(self, value))


def zero_(self) -> Tensor:
    """Fill this tensor with zeros in place.

    >>> import dispatch_jit as dj
    >>> dj.ones(2).zero_()
    tensor([0., 0.])
    """
    return _write("zero_", self, _scalar(self, 0))


def _random(op: str, self, sample, generator) -> Tensor:
    if self.dtype.category != FLOAT:
        raise DTypeError(f"{op}: expected a floating point tensor, got {self.dtype.name}")
    from .creation import default_generator
    rng = (generator or default_generator).rng
    a = bf16_astype(np.asarray(sample(rng, self.shape)), self.dtype)     # (bfloat16: rounded, not its words)
    from .creation import tensor
    return _write(op, self, tensor(a, device=self.device if self.is_cuda else None))


def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill this tensor in place with samples of the normal distribution N(mean, std**2).

    >>> import dispatch_jit as dj
    >>> dj.manual_seed(0); x = dj.empty(1000).normal_(2.0, 0.5)
    <dispatch_jit.Generator seed=0>
    >>> abs(x.mean().item() - 2.0) < 0.1
    True
    """
    if std < 0:
        raise InvalidArgumentError(f"normal_: expects std >= 0.0, but found std {std}")
    return _random("normal_", self, lambda rng, shape: rng.normal(mean, std, shape), generator)


def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill this tensor in place with samples of the uniform distribution on [a, b).

    >>> import dispatch_jit as dj
    >>> x = dj.empty(100).uniform_(-1.0, 1.0); bool(((x >= -1) & (x < 1)).all())
    True
    """
    if a > b:
        raise InvalidArgumentError(f"uniform_: expects a <= b, but found a={a} and b={b}")
    return _random("uniform_", self, lambda rng, shape: rng.uniform(a, b, shape), generator)


def masked_fill_(self, mask, value) -> Tensor:
    """``masked_fill`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([1.0, 2.0, 3.0]); _ = x.masked_fill_(x > 1.5, 0.0); x
    tensor([1., 0., 0.])
    """
    return _write("masked_fill_", self, lookup("aten::masked_fill").entry(self, mask, value))


def scatter_(self, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    """``scatter`` written into this tensor (``src`` a tensor of its dtype, or a number: ``value``);
    ``reduce="add"``/``"multiply"`` combines with what is there, as PyTorch's.

    >>> import dispatch_jit as dj
    >>> dj.ones(3).scatter_(0, dj.tensor([0, 0]), 2.0, reduce="multiply")
    tensor([4., 1., 1.])
    """
    if src is None:
        src = value
    if reduce is None:
        return _write("scatter_", self, lookup("aten::scatter").entry(self, dim, index, src))
    if reduce not in ("add", "multiply"):
        raise InvalidArgumentError("reduce argument must be either add or multiply.")
    if not isinstance(src, Tensor):
        src = full(tuple(index.shape), src, dtype=self.dtype, device=self.device)
    op = lookup("aten::scatter_add").entry if reduce == "add" else \
        functools.partial(lookup("aten::scatter.reduce").entry, reduce=reduce)
    return _write("scatter_", self, op(self, dim, index, src))


def scatter_add_(self, dim, index, src) -> Tensor:
    """``scatter_add`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).scatter_add_(0, dj.tensor([0, 0, 2]), dj.ones(3))
    tensor([2., 0., 1.])
    """
    return _write("scatter_add_", self, lookup("aten::scatter_add").entry(self, dim, index, src))


METHODS = {
    "data": property(_get_data, _set_data), "real": _part("real"), "imag": _part("imag"),
    "is_floating_point": is_floating_point, "is_complex": is_complex, "fill_": fill_, "zero_": zero_, "normal_": normal_, "uniform_": uniform_, "masked_fill_": masked_fill_, "scatter_": scatter_,
    "scatter_add_": scatter_add_, **_FACTORIES,
}
