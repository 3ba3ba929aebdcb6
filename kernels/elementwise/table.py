"""Elementwise operators as data: one scalar definition per op.

Each ``ScalarOp`` holds the per-element expression over ``x, y, z`` (the
op's tensor inputs, already cast to the compute dtype), its type rule, the
dtype categories it accepts, and its static (non-tensor) parameters.  The
eager CPU kernels (cpu.py) are generated from this table; the
CUDA kernels and the fused code of compiled mode are meant to come from the
same entries, so nothing here may be CPU-specific: expressions use operators,
``math``/``cmath`` functions, a few ``np`` scalar functions, and the helpers
of support/scalar_helpers.py.

Type rules (``TYPE_RULES``) map the inputs' promotion dtype to
(compute dtype, result dtype, how each input is cast).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dispatch_jit.dtypes import (BOOL, COMPLEX, FLOAT, INT, DType, bfloat16, bool_, complex128, float16, float32,
                                 float64, get_default_dtype, int64)
from dispatch_jit.errors import ArgumentTypeError

from ..support.loops import constant
from ..support.sincos_f32 import GUARD as SINCOS_GUARD
from .rows_activation import ROWS as ACTIVATION_ROWS
from .rows_math import ROWS as MATH_ROWS
from .scalar_op import ALL, FLT, FLT_C, INTEGRAL, INTS, NUM, REAL, REAL_B, Check, ScalarOp

__all__ = ["Check", "ScalarOp", "SCALAR_OPS", "TYPE_RULES", "type_rule", "Resolved", "resolve", "broadcast_shape",
           "check_output", "ELEMENTWISE_SCHEMAS",
           "kernel_prelude", "check_statics", "output_tensor", "ElementwiseKernel"]

_DIV0 = Check("y == 0", "ZeroDivisionError", "floor_divide: integer division by zero; mask the zero divisors "
              "or divide in floating point (x.to(dj.float32))")
_MOD0 = Check("y == 0", "ZeroDivisionError", "remainder: integer modulo by zero; mask the zero divisors "
              "or compute in floating point (x.to(dj.float32))")
# PyTorch's rule: a negative Python int exponent of an integer base raises; a tensor exponent holding
# negatives computes (_ipow: 1 for base 1, -1 or 1 for base -1, else 0)
_NEGPOW = Check("y < 0", "ValueError", "pow: integers to negative integer powers are not allowed; "
                "use a floating point base (x.to(dj.float32))", scalar=True)


def _clamp_expr(present: tuple[str, ...]) -> str:
    if "y" not in present and "z" not in present:
        from dispatch_jit.errors import SchemaError
        raise SchemaError("clamp: at least one of 'min' or 'max' must not be None")
    e = "x"
    if "y" in present:
        e = f"_maximum({e}, y)"
    if "z" in present:
        e = f"_minimum({e}, z)"
    return e


# int64 arithmetic that wraps: Numba emits signed adds and multiplies with LLVM's ``nsw`` flag
# (overflow is undefined behaviour), and in a fused loop LLVM uses that: ``pow`` of a non-negative
# base followed by ``relu`` lost the relu when the power wrapped negative.  The same operation on
# uint64 bits is defined to wrap, as NumPy's and torch's int64 arithmetic does.  Narrower ints
# compute in int64 inside Numba, where their products cannot overflow.
_WRAP64 = {
    "add": "np.int64(np.uint64(x) + np.uint64(alpha) * np.uint64(y))",
    "sub": "np.int64(np.uint64(x) - np.uint64(alpha) * np.uint64(y))",
    "mul": "np.int64(np.uint64(x) * np.uint64(y))",
    "neg": "np.int64(np.uint64(0) - np.uint64(x))",
    "square": "np.int64(np.uint64(x) * np.uint64(x))",
    "pow": "np.int64(_ipow(np.uint64(x), y))",
}


_U, _B = 1, 2
# Rows marked "vecmath": their float32 forms are support/vecmath's (and support/sincos_f32's)
# vectorizable functions, within 1 ulp (bounds in their docstrings); float64 keeps libm
_OPS = [
    # -- unary --------------------------------------------------------------------------------
    ScalarOp("abs", 1, "abs(x)", rule="abs", cats=NUM, operator=("__abs__",)),
    ScalarOp("neg", 1, "-x", cats=NUM, by_cat={"int64": _WRAP64["neg"]}, operator=("__neg__",)),
    ScalarOp("sign", 1, "_sign(x)", cats=ALL, by_cat={COMPLEX: "_csign(x)"}),
    ScalarOp("exp", 1, "math.exp(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "cmath.exp(x)", "float32": "_exp_f32(x)"}),                 # vecmath
    ScalarOp("expm1", 1, "math.expm1(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "_cexpm1(x)", "float32": "_expm1_f32(x)"}),                # vecmath
    ScalarOp("log", 1, "math.log(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "cmath.log(x)", "float32": "_log_f32(x)"}),                 # vecmath
    ScalarOp("log1p", 1, "math.log1p(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "_clog1p(x)", "float32": "_log1p_f32(x)"}),                 # vecmath
    ScalarOp("log2", 1, "math.log2(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "_clog2(x)", "float32": "_log2_f32(x)"}),                   # vecmath
    ScalarOp("log10", 1, "math.log10(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "cmath.log10(x)"}),
    ScalarOp("sqrt", 1, "math.sqrt(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "cmath.sqrt(x)"}),
    ScalarOp("rsqrt", 1, "_one / math.sqrt(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "_cdiv(_one, cmath.sqrt(x))"}),
    ScalarOp("square", 1, "x * x", rule="square", cats=NUM, by_cat={"int64": _WRAP64["square"]}),
    ScalarOp("reciprocal", 1, "_one / x", rule="float", cats=FLT_C, by_cat={COMPLEX: "_cdiv(_one, x)"}),
    ScalarOp("sin", 1, "math.sin(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "cmath.sin(x)", "float32": "_sin_f32(x)"},
             fast={"float32": ("_sin_f32_fast(x)", SINCOS_GUARD)}),
    ScalarOp("cos", 1, "math.cos(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "cmath.cos(x)", "float32": "_cos_f32(x)"},
             fast={"float32": ("_cos_f32_fast(x)", SINCOS_GUARD)}),
    ScalarOp("tan", 1, "math.tan(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "cmath.tan(x)"}),
    ScalarOp("asin", 1, "math.asin(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "cmath.asin(x)"}),
    ScalarOp("acos", 1, "math.acos(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "_cacos(x)"}),
    ScalarOp("atan", 1, "math.atan(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "cmath.atan(x)"}),
    ScalarOp("asinh", 1, "math.asinh(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "_casinh(x)"}),
    ScalarOp("acosh", 1, "math.acosh(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "_cacosh(x)"}),
    ScalarOp("atanh", 1, "math.atanh(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "_catanh(x)"}),
    ScalarOp("sinh", 1, "math.sinh(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "_csinh(x)"}),
    ScalarOp("cosh", 1, "math.cosh(x)", rule="float", cats=FLT_C, by_cat={COMPLEX: "_ccosh(x)"}),
    ScalarOp("tanh", 1, "math.tanh(x)", rule="float", cats=FLT_C,
             by_cat={COMPLEX: "_ctanh(x)", "float32": "_tanh_f32(x)"}),                   # vecmath
    ScalarOp("erf", 1, "math.erf(x)", rule="float", cats=FLT, by_cat={"float32": "_erf_f32(x)"}),   # vecmath
    ScalarOp("sigmoid", 1, "_one / (_one + math.exp(-x))", rule="float", cats=FLT,
             by_cat={"float32": "_sigmoid_f32(x)"}),                                            # vecmath
    ScalarOp("relu", 1, "x if not (x <= _zero) else _zero", cats=REAL),
    ScalarOp("floor", 1, "np.floor(x)", cats=REAL, by_cat={INT: "x"}),
    ScalarOp("ceil", 1, "np.ceil(x)", cats=REAL, by_cat={INT: "x"}),
    ScalarOp("round", 1, "np.rint(x)", cats=REAL, by_cat={INT: "x"}),
    ScalarOp("trunc", 1, "np.trunc(x)", cats=REAL, by_cat={INT: "x"}),
    ScalarOp("isnan", 1, "x != x", rule="predicate", cats=ALL, by_cat={INT: "False", BOOL: "False"},
             inplace=False),
    ScalarOp("isinf", 1, "math.isinf(x)", rule="predicate", cats=ALL,
             by_cat={INT: "False", BOOL: "False", COMPLEX: "cmath.isinf(x)"}, inplace=False),
    ScalarOp("isfinite", 1, "math.isfinite(x)", rule="predicate", cats=ALL,
             by_cat={INT: "True", BOOL: "True", COMPLEX: "cmath.isfinite(x)"}, inplace=False),
    ScalarOp("logical_not", 1, "not x", rule="logical", cats=ALL),
    ScalarOp("bitwise_not", 1, "~x", cats=INTEGRAL, by_cat={BOOL: "not x"}, operator=("__invert__",)),
    ScalarOp("signbit", 1, "math.copysign(1.0, x) < 0", rule="predicate", cats=REAL_B,
             by_cat={INT: "x < 0", BOOL: "False"}, inplace=False),
    # conj/real/imag of a real tensor are the tensor itself (real), or zeros (imag); PyTorch's real
    # and imag are views and attributes: here they are functions only, computing a new tensor
    ScalarOp("conj", 1, "x", cats=ALL, by_cat={COMPLEX: "x.conjugate()"}, inplace=False),
    ScalarOp("real", 1, "x", rule="abs", cats=ALL, by_cat={COMPLEX: "x.real"}, inplace=False, method=False),
    ScalarOp("imag", 1, "_zero", rule="abs", cats=NUM, by_cat={COMPLEX: "x.imag"}, inplace=False, method=False),
    # -- binary -------------------------------------------------------------------------------
    ScalarOp("add", 2, "x + alpha * y", cats=ALL, by_cat={BOOL: "x or (alpha and y)", "int64": _WRAP64["add"]},
             statics=("Scalar alpha=1",), operator=("__add__", "__radd__", "__iadd__")),
    ScalarOp("sub", 2, "x - alpha * y", cats=NUM, statics=("Scalar alpha=1",), by_cat={"int64": _WRAP64["sub"]},
             operator=("__sub__", "__rsub__", "__isub__")),
    ScalarOp("mul", 2, "x * y", cats=ALL, by_cat={BOOL: "x and y", "int64": _WRAP64["mul"]}, operator=("__mul__", "__rmul__", "__imul__")),
    # complex: _cdiv, which gives NumPy's and PyTorch's inf/nan at a zero divisor (Numba's x / y raises)
    ScalarOp("div", 2, "x / y", rule="float", cats=FLT_C, by_cat={COMPLEX: "_cdiv(x, y)"},
             operator=("__truediv__", "__rtruediv__", "__itruediv__")),
    ScalarOp("floor_divide", 2, "x // y", cats=REAL, by_cat={INT: "_ifloordiv(x, y)"}, checks={INT: _DIV0},
             operator=("__floordiv__", "__rfloordiv__", "__ifloordiv__")),
    ScalarOp("remainder", 2, "x % y", cats=REAL, by_cat={INT: "_iremainder(x, y)"}, checks={INT: _MOD0},
             operator=("__mod__", "__rmod__", "__imod__")),
    ScalarOp("pow", 2, "x ** y", cats=NUM, checks={INT: _NEGPOW},
             by_cat={INT: "_ipow(x, y)", "int64": _WRAP64["pow"], "float32": "_pow_f32(x, y)"},   # vecmath
             operator=("__pow__", "__rpow__", "__ipow__")),
    ScalarOp("maximum", 2, "_maximum(x, y)", cats=REAL_B),
    ScalarOp("minimum", 2, "_minimum(x, y)", cats=REAL_B),
    ScalarOp("atan2", 2, "math.atan2(x, y)", rule="float", cats=FLT),
    ScalarOp("copysign", 2, "math.copysign(x, y)", rule="float", cats=FLT),
    ScalarOp("hypot", 2, "math.hypot(x, y)", rule="float", cats=FLT),
    ScalarOp("logaddexp", 2, "_logaddexp(x, y)", rule="float", cats=FLT),
    ScalarOp("nextafter", 2, "np.nextafter(x, y)", rule="no_half", cats=FLT),
    # derivatives as one op each (kernels/derivatives.py): x the output's gradient, y the forward's
    # result; PyTorch's tanh_backward/sigmoid_backward, one pass where three elementwise ops made three
    # 1 - y*y cancels as |y| nears 1 (16 ulp lost at y = 0.9926); (1 - y)(1 + y) rounds twice, whatever y.
    # Complex: the conjugate, PyTorch's convention (tanh's gradient is g * conj(1 - y*y))
    ScalarOp("tanh_backward", 2, "x * ((_one - y) * (_one + y))", rule="float", cats=FLT_C, inplace=False,
             method=False, by_cat={COMPLEX: "x * (_one - y * y).conjugate()"}),
    ScalarOp("sigmoid_backward", 2, "x * (y * (_one - y))", rule="float", cats=FLT, inplace=False, method=False),
    ScalarOp("eq", 2, "x == y", rule="compare", cats=ALL, operator=("__eq__",)),
    ScalarOp("ne", 2, "x != y", rule="compare", cats=ALL, operator=("__ne__",)),
    ScalarOp("lt", 2, "x < y", rule="compare", cats=REAL_B, operator=("__lt__",)),
    ScalarOp("le", 2, "x <= y", rule="compare", cats=REAL_B, operator=("__le__",)),
    ScalarOp("gt", 2, "x > y", rule="compare", cats=REAL_B, operator=("__gt__",)),
    ScalarOp("ge", 2, "x >= y", rule="compare", cats=REAL_B, operator=("__ge__",)),
    ScalarOp("logical_and", 2, "x and y", rule="logical", cats=ALL),
    ScalarOp("logical_or", 2, "x or y", rule="logical", cats=ALL),
    ScalarOp("logical_xor", 2, "x != y", rule="logical", cats=ALL),
    ScalarOp("bitwise_and", 2, "x & y", cats=INTEGRAL, operator=("__and__", "__rand__", "__iand__")),
    ScalarOp("bitwise_or", 2, "x | y", cats=INTEGRAL, operator=("__or__", "__ror__", "__ior__")),
    ScalarOp("bitwise_xor", 2, "x ^ y", cats=INTEGRAL, operator=("__xor__", "__rxor__", "__ixor__")),
    ScalarOp("bitwise_left_shift", 2, "_lshift(x, y)", cats=INTS,
             operator=("__lshift__", "__rlshift__", "__ilshift__")),
    ScalarOp("bitwise_right_shift", 2, "_rshift(x, y)", cats=INTS,
             operator=("__rshift__", "__rrshift__", "__irshift__")),
    # -- ternary ------------------------------------------------------------------------------
    ScalarOp("where", 3, "y if x else z", rule="where", cats=ALL, inplace=False, method=False),
    ScalarOp("clamp", 3, _clamp_expr, rule="clamp", cats=REAL_B),
    *MATH_ROWS,
    *ACTIVATION_ROWS,
]
SCALAR_OPS: dict[str, ScalarOp] = {op.name: op for op in _OPS}


# -- type rules ------------------------------------------------------------------------------
# Each rule: (promoted dtype of the inputs, input metas) -> (compute, result, casts)
# casts[i] is "compute" (cast element to the compute dtype), "bool" (x != 0) or "none".
def _promote(d: DType, n: int):
    return d, d, ("compute",) * n


def _square(d: DType, n: int):
    # PyTorch's square is pow(x, 2): a bool tensor meets the Python int 2 and computes in int64
    return (int64, int64, ("compute",)) if d.category == BOOL else _promote(d, n)


def _float(d: DType, n: int):
    c = get_default_dtype() if d.category < FLOAT else d
    return c, c, ("compute",) * n


def _compare(d: DType, n: int):
    return d, bool_, ("compute",) * n


def _logical(d: DType, n: int):
    return bool_, bool_, ("bool",) * n


def _abs(d: DType, n: int):
    return d, (float64 if d.name == "complex128" else float32) if d.category == COMPLEX else d, ("compute",)


def _double(d: DType, n: int):
    # float_power: float64, or complex128 for complex inputs, whatever the inputs' precision
    c = complex128 if d.category == COMPLEX else float64
    return c, c, ("compute",) * n


def _predicate(d: DType, n: int):
    return d, bool_, ("compute",) * n


def _no_half(d: DType, n: int):
    # float16 computes in float32 in every loop: float32's neighbour of x rounds back to x
    if d is float16 or d is bfloat16:
        from dispatch_jit.errors import DTypeError
        raise DTypeError(f"nextafter() does not support {d.name} (it computes in float32, whose neighbour of x "
                         f"rounds back to x in {d.name}); supported dtypes: float32, float64; convert first: "
                         "x.to(dj.float32)")
    return d, d, ("compute",) * n


TYPE_RULES: dict[str, Callable] = {
    "promote": _promote, "square": _square, "float": _float, "compare": _compare, "logical": _logical, "abs": _abs,
    "predicate": _predicate, "clamp": _promote, "no_half": _no_half, "double": _double,
}


WHERE_CONDITION_DTYPES = ("bool", "uint8")    # as torch.where (uint8: deprecated there, still accepted)


def check_where_condition(dtype: DType) -> None:
    """where's condition must be bool, as PyTorch's: a float or int one raises, never a silent ``!= 0``."""
    if dtype.name not in WHERE_CONDITION_DTYPES:
        from dispatch_jit.errors import DTypeError
        raise DTypeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                         f"{dtype.name}; compare first, e.g. dj.where(cond != 0, x, y)")


def type_rule(op: ScalarOp, promoted: DType, n: int):
    if op.rule == "where":
        # the condition is read as bool; the branches promote among themselves
        return promoted, promoted, ("bool", "compute", "compute")
    return TYPE_RULES[op.rule](promoted, n)


# -- one call signature, resolved (shared by the CPU and CUDA kernels) ------------------------------
_CATEGORY_NAMES = {0: "bool", 1: "integer", 2: "floating", 3: "complex"}


@dataclass(frozen=True)
class Resolved:
    """Where an op's operands sit in its schema, and the dtypes a signature computes in."""

    in_idx: list          # schema positions of the tensor inputs (not out=)
    static_idx: list      # schema positions of the static (non-tensor) parameters
    static_names: tuple
    out_pos: int | None
    in_metas: list        # ArgMeta of each tensor input
    compute: DType
    result: DType
    casts: tuple


def _accepts(op: ScalarOp, d: DType, n: int) -> bool:
    from dispatch_jit.errors import DTypeError
    try:
        return type_rule(op, d, n)[0].category in op.cats
    except DTypeError:
        return False


def resolve(op: ScalarOp, call) -> Resolved:
    """The miss path's type resolution for ``op`` called as ``call`` (PyTorch's promotion, then the
    op's type rule); raises the op's dtype errors."""
    from dispatch_jit.dtypes import ALL_DTYPES, result_type
    from dispatch_jit.errors import DTypeError
    schema_args = call.op.schema.arguments
    in_idx = [i for i, a in enumerate(schema_args) if a.type.is_tensor_like and a.name != "out"]
    static_idx = [i for i, a in enumerate(schema_args) if not a.type.is_tensor_like]
    out_pos = next((i for i, a in enumerate(schema_args) if a.name == "out"), None)
    in_metas = [call.metas[i] for i in in_idx]
    if all(m.kind != "tensor" for m in in_metas):
        raise DTypeError(f"{call.op.name}: expected at least one tensor argument, got only Python scalars")
    promo_in = [m for m in in_metas if m.kind != "none"]
    if op.rule == "where":
        check_where_condition(promo_in[0].dtype)
        promo_in = promo_in[1:]
    promoted = result_type(*[m if m.kind == "tensor" else m.pytype(0) for m in promo_in])
    compute, result, casts = type_rule(op, promoted, len(in_metas))
    if compute.category not in op.cats:
        # the dtypes whose compute dtype the op accepts (exp takes int64: it computes in float32)
        ok = [d.name for d in ALL_DTYPES if _accepts(op, d, len(in_metas))]
        raise DTypeError(f"{op.name}() does not support {_CATEGORY_NAMES[compute.category]} inputs "
                         f"(got {compute.name}); supported dtypes: {', '.join(ok)}")
    return Resolved(in_idx, static_idx, tuple(schema_args[i].name for i in static_idx), out_pos, in_metas,
                    compute, result, casts)


def broadcast_shape(opname: str, shapes: list) -> tuple:
    """The broadcast shape of the tensor operands, or the op's BroadcastError."""
    if shapes and all(s == shapes[0] for s in shapes):     # the common case, without NumPy
        return tuple(shapes[0])
    from dispatch_jit.errors import BroadcastError
    from dispatch_jit.broadcast import broadcast_shapes      # NumPy's stops at 32 dims
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        raise BroadcastError(f"{opname}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                             f"cannot be broadcast together") from None


def check_output(opname: str, inplace: bool, result: DType, out_t, shape: tuple) -> None:
    """An ``out=`` tensor or in-place operand must take the result's dtype and shape, and be writeable."""
    from dispatch_jit.dtypes import can_cast
    from dispatch_jit.errors import CastingError, ShapeError
    from dispatch_jit.tensor import Tensor
    if not isinstance(out_t, Tensor):
        raise ArgumentTypeError(f"{opname}: out= must be a Tensor, got {type(out_t).__name__}")
    if not can_cast(result, out_t.dtype):
        raise CastingError(f"{opname}: result type {result.name} can't be cast to the "
                           f"desired output type {out_t.dtype.name}; use an output of dtype "
                           f"{result.name} or convert the inputs first")
    what = "in-place operand" if inplace else "out="
    if tuple(out_t.shape) != tuple(shape):
        raise ShapeError(f"{opname}: {what} has shape {tuple(out_t.shape)}, which doesn't match "
                         f"the broadcast shape {tuple(shape)}")
    # Numba writes through NumPy's read-only flag: check it here.  expand() views are
    # read-only because several of their elements are one memory location (as torch, refuse).
    if not out_t._data.flags.writeable:
        raise ShapeError(f"{opname}: {what} of shape {tuple(out_t.shape)} and strides "
                         f"{out_t.strides} is read-only (an expand()ed view, whose elements share "
                         f"memory, or a read-only NumPy buffer); write into a .clone() of it instead")


# -- schemas: one functional and (where the op has one) one in-place schema per op --------------------
_OUT = "Tensor(a!)? out=None"


def _schemas(op: ScalarOp) -> tuple[str, str | None]:
    statics = [s for s in op.statics]
    if op.arity == 1:
        f = f"{op.name}(Tensor self, *, {', '.join(statics + [_OUT])}) -> Tensor"
        kwi = (", *, " + ", ".join(statics)) if statics else ""
        i = f"{op.name}_(Tensor(a!) self{kwi}) -> Tensor(a!)"
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


# op name -> (functional schema, in-place schema or None)
ELEMENTWISE_SCHEMAS: dict[str, tuple[str, str | None]] = {op.name: _schemas(op) for op in SCALAR_OPS.values()}


# -- what both backends' generated kernels and per-call checks share ------------------------------------
def kernel_prelude(static_names: tuple, ct: str = "_ct") -> list[str]:
    """A generated kernel's first lines: 0 and 1 and the statics (alpha), in the compute dtype
    (``ct`` names its constructor; how operands are read is support/loops' ``read_cast``)."""
    return ["    _zero = " + constant(0, ct), "    _one = " + constant(1, ct)] + \
        [f"    {s} = {constant(s, ct)}" for s in static_names]


def check_statics(opname: str, static_idx: tuple, static_names: tuple, args) -> None:
    """For integral inputs a static (alpha) must not be a float: PyTorch refuses it too."""
    from dispatch_jit.errors import DTypeError
    for i in static_idx:
        if isinstance(args[i], (float, complex)):
            raise DTypeError(f"{opname}: for integral inputs, argument "
                             f"'{static_names[static_idx.index(i)]}' must not be a "
                             f"floating point number (got {args[i]!r})")


def output_tensor(mode: str, inputs: list, args: tuple, out_pos):
    """The tensor the result goes into: the first input in place, ``out=``, or None (allocate)."""
    if mode == "inplace":
        return inputs[0]
    return args[out_pos] if out_pos is not None else None


class ElementwiseKernel:
    """What the CPU and CUDA kernels of one ScalarOp share: the op, the mode ("functional",
    with ``out=``, or "inplace", writing into the first input) and the kernel's name."""

    device = ""

    def __init__(self, op: ScalarOp, mode: str = "functional"):
        self.op, self.mode = op, mode
        self.__name__ = f"{op.name}{'_' if mode == 'inplace' else ''}_{self.device}"

    def specialize(self, call):
        """The miss path: resolve the signature's types (``resolve``), let the backend refuse
        what it cannot compile (``check``), then build its plan (``plan``)."""
        r = resolve(self.op, call)
        # float16 and bfloat16 are stored in 16 bits and computed in float32: neither backend computes in them
        kcompute = float32 if r.compute is float16 or r.compute is bfloat16 else r.compute
        self.check(r)
        call.op.note_compiled(self.__name__)
        return self.plan(call, r, kcompute)

    def check(self, r: Resolved) -> None:
        pass

    def plan(self, call, r: Resolved, kcompute: DType):
        raise NotImplementedError
