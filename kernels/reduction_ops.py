"""Reduction operators: schemas and the CPU kernels that adapt reduction.py to the dispatcher.

Every op that takes an axis spells it ``axis=`` (the array API's name); the
dispatcher also accepts ``dim=`` and ``keepdim=`` for PyTorch users.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.dtypes import as_dtype
from dispatch_jit.tensor import wrap

from . import reduction
from .shape import normalize_axes, normalize_axis

__all__ = ["SCHEMAS", "CPU_KERNELS", "METHODS"]

_AXES = "int[]? axis=None, bool keepdims=False"
SCHEMAS = [
    f"sum(Tensor self, {_AXES}, *, ScalarType? dtype=None) -> Tensor",
    f"prod(Tensor self, {_AXES}, *, ScalarType? dtype=None) -> Tensor",
    f"mean(Tensor self, {_AXES}, *, ScalarType? dtype=None) -> Tensor",
    f"max(Tensor self, {_AXES}) -> Tensor",
    f"min(Tensor self, {_AXES}) -> Tensor",
    "argmax(Tensor self, int? axis=None, bool keepdims=False) -> Tensor",
    "argmin(Tensor self, int? axis=None, bool keepdims=False) -> Tensor",
    f"var(Tensor self, {_AXES}, *, float correction=0) -> Tensor",
    f"std(Tensor self, {_AXES}, *, float correction=0) -> Tensor",
    f"all(Tensor self, {_AXES}) -> Tensor",
    f"any(Tensor self, {_AXES}) -> Tensor",
    f"logsumexp(Tensor self, {_AXES}) -> Tensor",
]
METHODS = ["sum", "prod", "mean", "max", "min", "argmax", "argmin", "var", "std", "all", "any", "logsumexp"]


class ReductionCPU:
    """Specializes a reduction on the input dtype: the dtype-specialized
    callable from reduction.get_reduction is resolved once, on the miss path."""

    def __init__(self, name: str, extra: tuple = ()):
        self.name, self.extra = name, extra
        self.__name__ = f"{name}_cpu"

    def specialize(self, call):
        meta = call.metas[0]
        name, extra = self.name, self.extra
        reduction.result_dtype(name, meta.dtype.np)   # raises DTypeError for unsupported dtypes
        fn = reduction.get_reduction(name, meta.dtype.np)
        call.op.compiled.setdefault(self.__name__, [])
        single = name in ("argmax", "argmin")
        record = call.op.compiled[self.__name__]
        if meta.dtype.name not in record:
            record.append(meta.dtype.name)

        def run(self_, axis, keepdims, *rest):
            a = self_._data
            if single:
                axes = None if axis is None else (normalize_axis(axis, a.ndim, name),) if a.ndim else ()
            else:
                axes = None if axis is None else normalize_axes(axis, a.ndim, name)
            kw = dict(zip(extra, rest))
            dtype = kw.pop("dtype", None)
            f = fn
            if dtype is not None:
                d = as_dtype(dtype)
                if d.np != a.dtype:
                    a = a.astype(d.np)
                    f = reduction.get_reduction(name, d.np)
            return wrap(np.asarray(f(a, axes, bool(keepdims), **kw)))
        return run


CPU_KERNELS = {
    "sum": ReductionCPU("sum", ("dtype",)),
    "prod": ReductionCPU("prod", ("dtype",)),
    "mean": ReductionCPU("mean", ("dtype",)),
    "max": ReductionCPU("max"),
    "min": ReductionCPU("min"),
    "argmax": ReductionCPU("argmax"),
    "argmin": ReductionCPU("argmin"),
    "var": ReductionCPU("var", ("correction",)),
    "std": ReductionCPU("std", ("correction",)),
    "all": ReductionCPU("all"),
    "any": ReductionCPU("any"),
    "logsumexp": ReductionCPU("logsumexp"),
}
