"""matmul and dot: schemas and the CPU kernels that adapt linalg.py to the dispatcher."""

from __future__ import annotations

import numpy as np

from dispatch_jit.dtypes import result_type
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CPU_BITS, wrap, wrap_like_sig

__all__ = ["SCHEMAS", "CPU_KERNELS", "METHODS"]

SCHEMAS = [
    "matmul(Tensor self, Tensor other) -> Tensor",
    "dot(Tensor self, Tensor other) -> Tensor",
]
METHODS = ["matmul", "dot"]


class LinalgCPU:
    """Promotes both operands to one dtype (as the array API's matmul does) and
    calls the dtype-specialized kernel resolved on the miss path."""

    def __init__(self, name: str):
        self.name = name
        self.__name__ = f"{name}_cpu"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if a.kind != "tensor" or b.kind != "tensor":
            from dispatch_jit.errors import SchemaError
            raise SchemaError(f"{call.op.name}: both arguments must be tensors, got {a.kind} and {b.kind}")
        from . import cpu as linalg   # imported on first use: keeps `import dispatch_jit` light
        dt = result_type(a, b)
        fn = (linalg.get_matmul if self.name == "matmul" else linalg.get_dot)(dt.np)
        npdt = dt.np
        rec = call.op.compiled.setdefault(self.__name__, [])
        if dt.name not in rec:
            rec.append(dt.name)
        ndim = None
        if self.name == "matmul" and a.ndim >= 2 and b.ndim >= 2:
            ndim = max(a.ndim, b.ndim)
        osig = make_sig(CPU_BITS, dt, ndim, True) if ndim is not None else None

        def run(x, y):
            xa, ya = x._data, y._data
            if xa.dtype != npdt:
                xa = xa.astype(npdt)
            if ya.dtype != npdt:
                ya = ya.astype(npdt)
            r = fn(xa, ya)
            if osig is not None and r.flags.c_contiguous:
                return wrap_like_sig(r, osig)
            return wrap(np.asarray(r))
        return run


CPU_KERNELS = {"matmul": LinalgCPU("matmul"), "dot": LinalgCPU("dot")}
