"""What the package exposes: functions, Tensor methods and Python operators, as tables.

``dispatch_jit/_install.py`` installs these: each name is the generated
dispatcher entry of an operator overload (``dj.add`` -> ``aten::add.Tensor``),
so a public call costs what a dispatcher call costs.  Derived from the
families' schemas, so a new op is public without an edit here unless its
public name differs from its op's.
"""

from __future__ import annotations

from dispatch_jit.registry import lookup

from . import (composite, composite_creation, composite_math, composite_torch, products, shape_splits, shape_views,
               torch_functions, torch_kwargs, unique)
from .elementwise import torch_names as elementwise_functions
from .arrayops import op as arrayops_ops
from .indexing import advanced as indexing_advanced, composite as indexing_composite, inplace as indexing_inplace, op as indexing_ops
from .nn import op as nn_ops
from .op_examples import EXAMPLES as _CORE_EXAMPLES
from .elementwise.examples import EXAMPLES as _ELEMENTWISE_EXAMPLES
from .elementwise.table import ELEMENTWISE_SCHEMAS, SCALAR_OPS
from .linalg import op as linalg_ops
from .reduction import composite as reduction_composite, counting, op as reduction_ops, scans
from .shape.cpu import SHAPE_KERNELS

__all__ = ["FUNCTIONS", "METHODS", "OPERATORS", "PY_FUNCTIONS", "PY_METHODS", "ARRAY_API_ALIASES",
           "quantized_matmul", "quantized_add", "quantized_linear"]

# the op entries' docstring examples (dispatch_jit/_install.py reads EXAMPLES)
EXAMPLES = {**_CORE_EXAMPLES, **_ELEMENTWISE_EXAMPLES}

# dj.<name> -> operator overload name
FUNCTIONS: dict[str, str] = {}
for _op in SCALAR_OPS.values():
    if _op.function:
        FUNCTIONS[_op.name] = ELEMENTWISE_SCHEMAS[_op.name][0].split("(")[0]
_NN_PUBLIC = [s for s in nn_ops.SCHEMAS if s.split("(")[0] in nn_ops.PUBLIC]
for _schema in (list(SHAPE_KERNELS) + reduction_ops.SCHEMAS + linalg_ops.SCHEMAS + composite.SCHEMAS + _NN_PUBLIC
                + arrayops_ops.SCHEMAS + indexing_ops.SCHEMAS + composite_torch.SCHEMAS
                + composite_math.SCHEMAS + scans.SCHEMAS):
    _full = _schema.split("(")[0]
    FUNCTIONS.setdefault(_full.split(".")[0], _full)
FUNCTIONS.pop("to", None)
FUNCTIONS.pop("view", None)
# the reductions max/min are PyTorch's amax/amin; dj.max/dj.min are PY_FUNCTIONS' (values and indices)
FUNCTIONS["amax"], FUNCTIONS["amin"] = FUNCTIONS.pop("max"), FUNCTIONS.pop("min")

# dj.<name> (and Tensor.<name> where flagged) that are Python functions over the ops, as PyTorch's
# overloaded names (max(x) / max(x, dim) / max(x, other)) and non-tensor results (equal -> bool)
PY_FUNCTIONS = dict(reduction_ops.PY_FUNCTIONS, **torch_functions.PY_FUNCTIONS, **composite_math.PY_FUNCTIONS,
                    **unique.PY_FUNCTIONS, **torch_kwargs.PY_FUNCTIONS, **reduction_composite.PY_FUNCTIONS,
                    **counting.PY_FUNCTIONS, **indexing_composite.PY_FUNCTIONS, **shape_views.PY_FUNCTIONS,
                    **shape_splits.PY_FUNCTIONS, **products.PY_FUNCTIONS, **composite_creation.PY_FUNCTIONS,
                    **elementwise_functions.PY_FUNCTIONS)
# Tensor.<name> only (PyTorch has no torch.<name> function for these)
PY_METHODS = dict(shape_views.METHODS_ONLY, **shape_splits.METHODS_ONLY, **composite_creation.METHODS_ONLY,
                  **indexing_inplace.METHODS_ONLY)
torch_kwargs.attach_ops()
# dj.mode is torch.mode; a string (the execution mode's old spelling) gets an error naming dj.execution_mode
PY_FUNCTIONS["mode"] = (arrayops_ops.mode_function, False)
arrayops_ops._MODE.append(lookup("aten::mode").entry)
FUNCTIONS.pop("where")    # dj.where is torch_functions.where: where(cond) alone is nonzero(as_tuple=True)

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
              *reduction_ops.METHODS, *linalg_ops.METHODS, *composite.METHODS, *nn_ops.METHODS,
              *arrayops_ops.METHODS, *indexing_ops.METHODS, *indexing_advanced.METHODS,
              *composite_torch.METHODS, *composite_math.METHODS, *scans.METHODS):
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

# the quantized ops' public entries (dj.quantized_matmul, ...): the generated dispatcher functions
quantized_matmul = lookup("aten::quantized_matmul").entry
quantized_add = lookup("aten::quantized_add").entry
quantized_linear = lookup("aten::quantized_linear").entry
