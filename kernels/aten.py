"""The "aten" operator library: definitions, then per-key implementation blocks.

Like TORCH_LIBRARY / TORCH_LIBRARY_IMPL: one ``Library("aten", "DEF")``
defines every schema, then one block per dispatch key registers kernels.
The schemas of the elementwise ops are generated from scalar_ops.py; the
public functions (``dj.add``), Tensor methods (``x.add``) and Python
operators (``x + y``) are the generated dispatcher entries, installed from
the tables at the bottom.
"""

from __future__ import annotations

from dispatch_jit.autograd.fallback import autograd_not_implemented
from dispatch_jit.autograd.kernel import AutogradInplaceKernel, AutogradKernel
from dispatch_jit.library import Library, fallthrough_kernel
from dispatch_jit.registry import lookup

from . import composite
from .linalg import cuda as cuda_linalg
from .reduction import cuda as cuda_reduction
from .shape import cuda as cuda_shape
from .linalg import op as linalg_ops
from .reduction import op as reduction_ops
from .elementwise.cpu import ElementwiseCPU
from .derivatives import DERIVATIVES
from .elementwise.table import SCALAR_OPS
from .shape.cpu import SHAPE_KERNELS

__all__ = ["aten", "FUNCTIONS", "METHODS", "OPERATORS", "PY_FUNCTIONS"]

aten = Library("aten", "DEF")

# -- definitions ---------------------------------------------------------------------------------
_OUT = "Tensor(a!)? out=None"
ELEMENTWISE_SCHEMAS: dict[str, tuple[str, str | None]] = {}   # op -> (functional, inplace)


def _elementwise_schemas(op) -> tuple[str, str | None]:
    statics = [s for s in op.statics]
    if op.arity == 1:
        f = f"{op.name}(Tensor self, *, {_OUT}) -> Tensor"
        i = f"{op.name}_(Tensor(a!) self) -> Tensor(a!)"
    elif op.arity == 2:
        kw = ", ".join(statics + [_OUT])
        f = f"{op.name}.Tensor(Tensor self, Tensor other, *, {kw}) -> Tensor"
        kwi = (", *, " + ", ".join(statics)) if statics else ""
        i = f"{op.name}_.Tensor(Tensor(a!) self, Tensor other{kwi}) -> Tensor(a!)"
    elif op.name == "where":
        f, i = "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", None
    else:  # clamp
        f = f"clamp(Tensor self, Tensor? min=None, Tensor? max=None, *, {_OUT}) -> Tensor"
        i = "clamp_(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)"
    return f, (i if op.inplace else None)


for _op in SCALAR_OPS.values():
    f, i = _elementwise_schemas(_op)
    ELEMENTWISE_SCHEMAS[_op.name] = (f, i)
    aten.define(f)
    if i:
        aten.define(i)

for _schema in SHAPE_KERNELS:
    aten.define(_schema)
for _schema in reduction_ops.SCHEMAS:
    aten.define(_schema)
for _schema in linalg_ops.SCHEMAS:
    aten.define(_schema)
for _schema in composite.SCHEMAS:
    aten.define(_schema)

# -- CPU ------------------------------------------------------------------------------------------
aten_cpu = Library("aten", "IMPL", "CPU")
for _op in SCALAR_OPS.values():
    f, i = ELEMENTWISE_SCHEMAS[_op.name]
    aten_cpu.impl(f.split("(")[0], ElementwiseCPU(_op, "functional"))
    if i:
        aten_cpu.impl(i.split("(")[0], ElementwiseCPU(_op, "inplace"))
for _schema, _kernel in SHAPE_KERNELS.items():
    aten_cpu.impl(_schema.split("(")[0], _kernel)
for _name, _kernel in reduction_ops.CPU_KERNELS.items():
    aten_cpu.impl(_name, _kernel)
for _name, _kernel in linalg_ops.CPU_KERNELS.items():
    aten_cpu.impl(_name, _kernel)

# -- CUDA: numba.cuda.jit kernels from the same op definitions (numba.cuda is imported on first use) --
aten_cuda = Library("aten", "IMPL", "CUDA")
# (each CUDA kernel module registers its table here)
for _name, _kernel in cuda_reduction.CUDA_KERNELS.items():   # reductions
    aten_cuda.impl(_name, reduction_ops.VarStd(_kernel) if _name in reduction_ops.VAR_STD else _kernel)
for _name, _kernel in cuda_linalg.CUDA_KERNELS.items():   # matmul, dot
    aten_cuda.impl(_name, _kernel)
from .elementwise.cuda import ElementwiseCUDA  # noqa: E402  (elementwise ops, from scalar_ops.py)
for _op in SCALAR_OPS.values():
    f, i = ELEMENTWISE_SCHEMAS[_op.name]
    aten_cuda.impl(f.split("(")[0], ElementwiseCUDA(_op, "functional"))
    if i:
        aten_cuda.impl(i.split("(")[0], ElementwiseCUDA(_op, "inplace"))
for _name, _kernel in cuda_shape.CUDA_KERNELS.items():
    aten_cuda.impl(_name, _kernel)

# -- CompositeImplicitAutograd: decompositions into other ops -------------------------------------
aten_composite = Library("aten", "IMPL", "CompositeImplicitAutograd")
for _name, _kernel in composite.KERNELS.items():
    aten_composite.impl(_name, _kernel)

# -- Autograd: one kernel per row of the derivative table -----------------------------------------
aten_autograd = Library("aten", "IMPL", "Autograd")
for _name, _d in DERIVATIVES.items():
    aten_autograd.impl(_name, AutogradKernel(_d))
for _op in SCALAR_OPS.values():
    f, i = ELEMENTWISE_SCHEMAS[_op.name]
    fname = f.split("(")[0]
    if i and fname in DERIVATIVES:
        aten_autograd.impl(i.split("(")[0], AutogradInplaceKernel(f"aten::{fname}"))
    elif fname not in DERIVATIVES:
        # not differentiable (comparisons, logical and bitwise ops): outputs never require grad
        aten_autograd.impl(fname, fallthrough_kernel)
        if i:
            aten_autograd.impl(i.split("(")[0], fallthrough_kernel)
for _name in ("argmax", "argmin", "all", "any"):
    aten_autograd.impl(_name, fallthrough_kernel)

# -- backend fallbacks for every op, present and future -------------------------------------------
fallbacks = Library("_", "IMPL")
for _key in ("AutogradCPU", "AutogradCUDA", "AutogradOther"):
    # ops with kernels but no derivative (custom ops): outputs do not require grad, and a
    # backward that needs them names the op
    fallbacks.fallback(autograd_not_implemented, _key)
# keys whose kernels arrive with later work fall through until then, at no cost
for _key in ("ADInplaceOrView", "AutocastCPU", "AutocastCUDA"):
    fallbacks.fallback(fallthrough_kernel, _key)


# -- public surface --------------------------------------------------------------------------------
def _entry(qualified: str):
    return lookup(qualified).entry


# dj.<name> -> operator overload name
FUNCTIONS: dict[str, str] = {}
for _op in SCALAR_OPS.values():
    FUNCTIONS[_op.name] = ELEMENTWISE_SCHEMAS[_op.name][0].split("(")[0]
for _schema in list(SHAPE_KERNELS) + reduction_ops.SCHEMAS + linalg_ops.SCHEMAS + composite.SCHEMAS:
    _full = _schema.split("(")[0]
    FUNCTIONS.setdefault(_full.split(".")[0], _full)
FUNCTIONS.pop("to", None)
FUNCTIONS.pop("view", None)
# the reductions max/min are PyTorch's amax/amin; dj.max/dj.min are PY_FUNCTIONS' (values and indices)
FUNCTIONS["amax"], FUNCTIONS["amin"] = FUNCTIONS.pop("max"), FUNCTIONS.pop("min")

# dj.<name> (and Tensor.<name> where flagged) that are Python functions over the ops, as PyTorch's
# overloaded names (max(x) / max(x, dim) / max(x, other)) and non-tensor results (equal -> bool)
PY_FUNCTIONS = dict(reduction_ops.PY_FUNCTIONS)

# Python array API spellings of the same ops
ARRAY_API_ALIASES = {
    # (not "equal": dj.equal is PyTorch's, one bool for the whole tensor)
    "subtract": "sub", "multiply": "mul", "divide": "div", "negative": "neg",
    "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
    "bitwise_invert": "bitwise_not", "concat": "cat", "permute_dims": "permute", "expand_dims": "unsqueeze",
    "true_divide": "div", "clip": "clamp", "absolute": "abs", "power": "pow", "arctan2": "atan2",
}

# Tensor.<name> -> operator overload name
METHODS: dict[str, str] = {}
for _op in SCALAR_OPS.values():
    f, i = ELEMENTWISE_SCHEMAS[_op.name]
    if _op.method:
        METHODS[_op.name] = f.split("(")[0]
    if i:
        METHODS[_op.name + "_"] = i.split("(")[0]
for _name in ("reshape", "view", "permute", "transpose", "expand", "squeeze", "unsqueeze", "flatten", "clone", "narrow",
              *reduction_ops.METHODS, *linalg_ops.METHODS, *composite.METHODS):
    METHODS.setdefault(_name, FUNCTIONS.get(_name, _name))
METHODS["view"] = "view"
METHODS["amax"], METHODS["amin"] = FUNCTIONS["amax"], FUNCTIONS["amin"]
for _alias, _real in (("subtract", "sub"), ("multiply", "mul"), ("divide", "div"), ("clip", "clamp"),
                      ("clip_", "clamp_"), ("negative", "neg"), ("absolute", "abs")):
    METHODS[_alias] = METHODS[_real]

# Python operators: dunder -> (operator overload, reflected?)
OPERATORS: dict[str, tuple[str, bool]] = {}
for _op in SCALAR_OPS.values():
    f, i = ELEMENTWISE_SCHEMAS[_op.name]
    for dunder in _op.operator:
        # "__iadd__" is in-place because "__add__" exists too; "__invert__" is not
        if dunder.startswith("__i") and "__" + dunder[3:] in _op.operator:
            OPERATORS[dunder] = (i.split("(")[0], False)
        elif dunder.startswith("__r") and dunder not in ("__rshift__",):
            OPERATORS[dunder] = (f.split("(")[0], True)
        else:
            OPERATORS[dunder] = (f.split("(")[0], False)
OPERATORS["__matmul__"] = ("matmul", False)
OPERATORS["__rmatmul__"] = ("matmul", True)
