"""matmul and dot: schemas, and their argument handling for the CPU and CUDA kernels."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.dtypes import result_type
from dispatch_jit.errors import SchemaError
from dispatch_jit.registry import CompiledSignature
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CPU_BITS, Tensor, wrap, wrap_like_sig

__all__ = ["SCHEMAS", "METHODS", "Linalg", "CPU"]

SCHEMAS = [
    "matmul(Tensor self, Tensor other) -> Tensor",
    "dot(Tensor self, Tensor other) -> Tensor",
]
METHODS = ["matmul", "dot"]


class Linalg:
    """matmul or dot at one backend key.  Both operands are promoted to ``result_type``
    (as the array API's matmul does); the backend's ``bind(name, call, dt)`` resolves the
    dtype-specialized run on the miss path and raises the CPU's DTypeError for dtypes
    without a kernel."""

    def __init__(self, name: str, device: str, backend):
        self.name, self.backend = name, backend
        self.__name__ = f"{name}_{device}"

    def specialize(self, call):
        a, b = call.metas[0], call.metas[1]
        if a.kind != "tensor" or b.kind != "tensor":
            raise SchemaError(f"{call.op.name}: both arguments must be tensors, got {a.kind} and {b.kind}")
        dt = result_type(a, b)
        run = self.backend.bind(self.name, call, dt)
        call.op.note_compiled(self.__name__, CompiledSignature((dt.name,)))
        return run


def _bind_cpu(name: str, call, dt):
    from . import cpu as linalg   # imported on first use: keeps `import dispatch_jit` light
    fn = (linalg.get_matmul if name == "matmul" else linalg.get_dot)(dt.np)
    a, b = call.metas[0], call.metas[1]
    npdt = dt.np
    ndim = max(a.ndim, b.ndim) if name == "matmul" and a.ndim >= 2 and b.ndim >= 2 else None
    osig = make_sig(CPU_BITS, dt, ndim, True) if ndim is not None else None

    def run(x, y):
        xa, ya = x._data, y._data
        if xa.dtype != npdt:
            xa = bf16.cast(xa, npdt)      # NumPy's cast, or bfloat16's rounding one
        if ya.dtype != npdt:
            ya = bf16.cast(ya, npdt)
        r = fn(xa, ya)
        if osig is not None and r.flags.c_contiguous:
            return wrap_like_sig(r, osig)
        return wrap(np.asarray(r))
    product = linalg.matrix_product(npdt) if name == "matmul" and _plain_matrices(a, b, dt) else None
    if product is None:
        return run

    def run_matrices(x, y):
        # two C-contiguous matrices of the result dtype (the signature says so): one BLAS call,
        # once the inner sizes fit and nothing is empty (else run's checks and messages)
        xa, ya = x._data, y._data
        sa, sb = xa.shape, ya.shape
        if sa[1] != sb[0] or not (sa[0] and sa[1] and sb[1]):
            return run(x, y)
        t = _new(Tensor)
        t._data = product(xa, ya)
        t._sig = osig
        return t
    return run_matrices


def _plain_matrices(a, b, dt) -> bool:
    return all(m.ndim == 2 and m.contiguous and m.dtype == dt for m in (a, b))


_new = object.__new__


# the CPU backend lives here, not in cpu.py: cpu.py is the array-level kernel (NumPy in, NumPy
# out) and stays importable without the dispatcher
CPU = SimpleNamespace(bind=_bind_cpu)
