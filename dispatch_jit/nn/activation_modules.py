"""The activation modules over ``nn.functional``'s activations (functional_activation.py), with
PyTorch's constructor arguments, defaults and ``extra_repr``.

>>> import dispatch_jit as dj
>>> dj.nn.LeakyReLU(0.5)(dj.tensor([-2.0, 1.0]))
tensor([-1.,  1.])
>>> dj.nn.Hardtanh(-2.0, 2.0)
Hardtanh(min_val=-2.0, max_val=2.0)
"""

from __future__ import annotations

from . import functional_activation as F
from .module import Module, Parameter

__all__ = ["Hardswish", "Hardsigmoid", "Hardtanh", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "Softplus",
           "Softshrink", "Hardshrink", "Threshold", "Softsign", "Tanhshrink", "Mish", "LogSigmoid", "PReLU", "RReLU",
           "GLU", "Softmin"]


class _Activation(Module):
    """A module calling ``fn(input, **its arguments)``; ``_args`` names them in PyTorch's order."""

    _args: tuple = ()
    _inplace = False

    def __init__(self, *args, **kwargs):
        super().__init__()
        names = self._args + (("inplace",) if self._inplace else ())
        values = dict(self._defaults())
        if len(args) > len(names):
            from ..errors import ArgumentTypeError
            raise ArgumentTypeError(f"{type(self).__name__}() takes at most {len(names)} arguments "
                                    f"({len(args)} given)")
        values.update(zip(names, args))
        values.update(kwargs)
        for k in names:
            setattr(self, k, values[k])

    def _defaults(self) -> dict:
        return {"inplace": False}

    def forward(self, input):  # noqa: A002
        kw = {k: getattr(self, k) for k in self._args}
        if self._inplace:
            kw["inplace"] = self.inplace
        return self._fn(input, **kw)

    def extra_repr(self) -> str:
        parts = [f"{k}={getattr(self, k)}" for k in self._args]
        if self._inplace and self.inplace:
            parts.append("inplace=True")
        return ", ".join(parts)


def _module(name: str, fn, args: dict, inplace: bool, doc: str):
    cls = type(name, (_Activation,), {"_fn": staticmethod(fn), "_args": tuple(args), "_inplace": inplace,
                                       "_defaults": lambda self, d=dict(args): {**d, "inplace": False},
                                       "__doc__": doc, "__module__": __name__})
    return cls


Hardswish = _module("Hardswish", F.hardswish, {}, True, "``F.hardswish`` as a module.")
Hardsigmoid = _module("Hardsigmoid", F.hardsigmoid, {}, True, "``F.hardsigmoid`` as a module.")
Hardtanh = _module("Hardtanh", F.hardtanh, {"min_val": -1.0, "max_val": 1.0}, True, "``F.hardtanh`` as a module.")
LeakyReLU = _module("LeakyReLU", F.leaky_relu, {"negative_slope": 0.01}, True, "``F.leaky_relu`` as a module.")
ELU = _module("ELU", F.elu, {"alpha": 1.0}, True, "``F.elu`` as a module.")
SELU = _module("SELU", F.selu, {}, True, "``F.selu`` as a module.")
CELU = _module("CELU", F.celu, {"alpha": 1.0}, True, "``F.celu`` as a module.")
Softplus = _module("Softplus", F.softplus, {"beta": 1.0, "threshold": 20.0}, False, "``F.softplus`` as a module.")
Softshrink = _module("Softshrink", F.softshrink, {"lambd": 0.5}, False, "``F.softshrink`` as a module.")
Hardshrink = _module("Hardshrink", F.hardshrink, {"lambd": 0.5}, False, "``F.hardshrink`` as a module.")
Softsign = _module("Softsign", F.softsign, {}, False, "``F.softsign`` as a module.")
Tanhshrink = _module("Tanhshrink", F.tanhshrink, {}, False, "``F.tanhshrink`` as a module.")
Mish = _module("Mish", F.mish, {}, True, "``F.mish`` as a module.")
LogSigmoid = _module("LogSigmoid", F.logsigmoid, {}, False, "``F.logsigmoid`` as a module.")
# PyTorch prints the shrink modules' lambd bare: Softshrink(0.5)
Softshrink.extra_repr = Hardshrink.extra_repr = lambda self: f"{self.lambd}"
RReLU = _module("RReLU", lambda input, lower, upper, inplace: None, {"lower": 1.0 / 8, "upper": 1.0 / 3}, True,
                "``F.rrelu`` as a module: random slopes in training mode, their mean in eval mode.")
RReLU.forward = lambda self, input: F.rrelu(input, self.lower, self.upper, self.training, self.inplace)  # noqa: A002
GLU = _module("GLU", F.glu, {"dim": -1}, False, "``F.glu`` as a module.")


class ReLU6(Hardtanh):
    """``F.relu6`` as a module (a Hardtanh from 0 to 6, as PyTorch's)."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Threshold(_Activation):
    """``F.threshold`` as a module: ``value`` where ``x <= threshold``."""

    _fn = staticmethod(F.threshold)
    _args = ("threshold", "value")
    _inplace = True


class Softmin(Module):
    """``F.softmin`` along ``dim`` as a module."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):  # noqa: A002
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """``F.prelu`` with a learnable weight: ``num_parameters`` slopes (1, or one per channel), each ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        from ..creation import full
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype, device=device))

    def forward(self, input):  # noqa: A002
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
