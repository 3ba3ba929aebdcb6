"""The fuzzers' op table: one row per operator, so adding an op is one row.

Each ``Row`` says how to call the op in dispatch_jit (``forms``: source
templates, so that what runs is exactly what a reproducer prints), which
dtype categories it accepts, how to pick its static parameters from the
operands' shapes (``params``), how to compute it in NumPy (``np``: PyTorch's
type promotion first, then the op in the compute dtype; views return NumPy
views and in-place ops write into their target, so a whole graph run in
NumPy has eager mode's aliasing), in PyTorch (``torch``, optional), and how
close a float result must be (``tol``).

The NumPy side raises ``OracleError`` where PyTorch's semantics say the call
is an error (bad dtype, shapes that do not broadcast, integer division by
zero, ...) and ``Undefined`` where the result is undefined behaviour (a float
to int cast out of range): the generator never keeps such a node.

This module imports only numpy (and, lazily, math/torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

# -- dtypes and PyTorch's type promotion --------------------------------------------------------------
INTS = ("int8", "uint8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64")
DTYPES = ("bool",) + INTS + FLOATS
TORCH_DTYPES = ("bool", "int8", "uint8", "int16", "int32", "int64") + FLOATS   # PyTorch promotes these


def cat_of(dt) -> int:
    """0 bool, 1 integer, 2 floating (PyTorch's categories)."""
    k = np.dtype(dt).kind
    return 0 if k == "b" else 1 if k in "iu" else 2


class OracleError(Exception):
    """PyTorch's semantics make this call an error."""


class Undefined(Exception):
    """The result is undefined behaviour (float -> int out of range): never generated."""


def promote_types(a: str, b: str) -> str:
    a, b = np.dtype(a).name, np.dtype(b).name
    if a == b:
        return a
    ca, cb = cat_of(a), cat_of(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 1 and "uint64" in (a, b) and (a.startswith("int") or b.startswith("int")):
        raise OracleError(f"cannot promote {a} and {b}")
    return np.promote_types(a, b).name


def _scalar_dtype(v) -> str:
    return "bool" if isinstance(v, (bool, np.bool_)) else "int64" if isinstance(v, int) else "float32"


def result_type(*operands) -> str:
    """PyTorch's result_type: dimensioned tensors > 0-d tensors > Python scalars, by category."""
    groups = [[], [], []]
    for x in operands:
        if x is None:
            continue
        if isinstance(x, np.ndarray):
            groups[0 if x.ndim else 1].append(x.dtype.name)
        else:
            groups[2].append(_scalar_dtype(x))
    res = [None, None, None]
    for i, g in enumerate(groups):
        for d in g:
            res[i] = d if res[i] is None else promote_types(res[i], d)

    def combine(higher, lower):
        if higher is None:
            return lower
        if lower is None:
            return higher
        if cat_of(higher) == 2:
            return higher
        if higher == "bool" or cat_of(lower) == 2:
            return promote_types(higher, lower)
        return higher
    return combine(res[0], combine(res[1], res[2]))


def can_cast(frm: str, to: str) -> bool:
    return cat_of(frm) <= cat_of(to)


def as_dtype(x, dt: str) -> np.ndarray:
    """x (array or Python scalar) as an array of dtype ``dt``, PyTorch's way; Undefined for a float -> int
    conversion out of range."""
    a = np.asarray(x)
    dt = np.dtype(dt)
    if a.dtype == dt:
        return a
    if dt.kind in "iu" and a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            t = np.trunc(a.astype(np.float64))
        info = np.iinfo(dt)
        if a.size and not (np.isfinite(t).all() and t.min() >= info.min and t.max() <= info.max):
            raise Undefined(f"float -> {dt.name} cast out of range")
    if dt.kind == "b":
        return a != 0
    with np.errstate(all="ignore"):
        return a.astype(dt)


# -- input values: standalone, so that a reproducer can paste this function's source --------------------
def make_values(shape, dtype, seed, flavor):
    """Deterministic test values: ``flavor`` 'small' (small magnitudes), 'special' (also 0, -0, nan,
    inf, extremes, subnormals), 'nonzero' (no zeros), 'positive' (floats in [0.5, 2])."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = rng.random(n) < 0.5
    elif dt.kind in "iu":
        lo, hi = (-4, 5) if dt.kind == "i" else (0, 9)
        a = rng.integers(lo, hi, n)
        if flavor == "nonzero":
            a = np.where(a == 0, 1, a)
        a = a.astype(dt)
        if flavor == "special":
            info = np.iinfo(dt)
            pool = np.array([info.min, info.max, 0, 1, info.max // 2 + 1], dtype=dt)
            mask = rng.random(n) < 0.15
            a[mask] = rng.choice(pool, int(mask.sum()))
    else:
        if flavor == "positive":
            a = rng.uniform(0.5, 2.0, n)
        else:
            a = np.round(rng.standard_normal(n) * 2.0, 3 if rng.random() < 0.5 else 12)
        if flavor == "nonzero":
            a = np.where(a == 0, 1.0, a)
        a = a.astype(dt)
        if flavor == "special":
            fi = np.finfo(dt)
            pool = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, float(fi.max) / 2, -float(fi.max),
                             float(fi.smallest_subnormal) * 3, float(fi.tiny), 1e4, -1e4, 0.5, 88.5, -104.0],
                            dtype=np.float64)
            mask = rng.random(n) < 0.15
            with np.errstate(all="ignore"):
                a[mask] = rng.choice(pool, int(mask.sum())).astype(dt)
    return a.reshape(shape)


# -- scalar literals --------------------------------------------------------------------------------
def lit(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return repr(v)


SCALARS = {0: [True, False], 1: [0, 1, 2, -3, 5, 300], 2: [0.5, -1.5, 2.0, 0.0, -0.0, 3.25, float("inf"), float("nan")]}


# -- tolerances ------------------------------------------------------------------------------------
def ulps(n: float):
    """``n`` units in the last place of the result dtype (relative), n smallest subnormals (absolute)."""
    def tol(args, p, want):
        if want.dtype.kind != "f":
            return None
        fi = np.finfo(want.dtype)
        return n * float(fi.eps) + (2.0 ** -10 if want.dtype == np.float16 else 0.0), n * float(fi.smallest_subnormal)
    return tol


EXACT = None


def _n_reduced(a, axis):
    if axis is None:
        return a.size
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([a.shape[ax] for ax in axes], dtype=np.int64)) if axes else 1


def _sum_abs(a, p):
    with np.errstate(all="ignore"):
        f = np.abs(a.astype(np.float64))
        f = np.where(np.isfinite(f), f, 0.0)
        return np.sum(f, axis=p.get("axis"), keepdims=p.get("keepdims", False))


def tol_sum(args, p, want):
    if want.dtype.kind != "f":
        return None
    a = args[0]
    eps = float(np.finfo(want.dtype).eps)
    n = _n_reduced(a, p.get("axis"))
    s = _sum_abs(a, p)
    if p.get("mean"):
        s = s / max(n, 1)
    return 2 * eps, (4 + n) * eps * s * (np.finfo(np.float64).eps / eps if False else 1.0)


def tol_prod(args, p, want):
    if want.dtype.kind != "f":
        return None
    n = _n_reduced(args[0], p.get("axis"))
    fi = np.finfo(want.dtype)
    return (4 + 2 * n) * float(fi.eps), 4 * float(fi.smallest_subnormal)


def tol_var(args, p, want):
    a = args[0]
    fi = np.finfo(want.dtype)
    n = _n_reduced(a, p.get("axis"))
    with np.errstate(all="ignore"):
        f = a.astype(np.float64)
        m2 = np.mean(np.where(np.isfinite(f), f * f, 0.0), axis=p.get("axis"), keepdims=p.get("keepdims", False)) \
            if a.size else np.float64(0.0)
    at = (8 + 2 * n) * float(fi.eps) * m2 * (n / max(n - p.get("correction", 1), 1))
    if p.get("std"):
        at = np.sqrt(at)
    return 8 * float(fi.eps), at


def tol_softmax(args, p, want):
    fi = np.finfo(want.dtype)
    a = args[0]
    n = a.shape[p["axis"]] if a.ndim else 1
    with np.errstate(all="ignore"):
        f = a.astype(np.float64)
        mag = np.max(np.abs(np.where(np.isfinite(f), f, 0.0)), axis=p["axis"], keepdims=True) if a.size else 0.0
    scale = 1.0 if p.get("kind") == "softmax" else np.maximum(mag, 1.0)
    return 8 * float(fi.eps), (8 + 2 * n) * float(fi.eps) * scale


def tol_matmul(args, p, want):
    if want.dtype.kind != "f":
        return None
    fi = np.finfo(want.dtype)
    a, b = (np.abs(np.nan_to_num(x.astype(np.float64), posinf=0, neginf=0)) for x in args[:2])
    k = a.shape[-1]
    return 4 * float(fi.eps), (4 + k) * float(fi.eps) * (a @ b)


# -- the rows ----------------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    kind: str                 # unary binary ternary reduce view index shape list cast inplace setitem matmul
    forms: tuple              # callables (arg sources, params) -> source (an expression; for kind 'setitem'
                              # and the in-place rows written as statements, see render)
    cats: str = "bif"         # categories of the compute dtype the op accepts (b bool, i int, f float)
    np: Callable = None       # (args, params) -> array
    torch: Callable = None    # (torch args, params) -> torch tensor, or None
    tol: Callable = EXACT     # (args, params, want) -> None (exact) or (rtol, atol)
    params: Callable = None   # (chooser, operand arrays) -> dict, or None when the op does not apply
    grad: bool = False        # differentiable (used by the gradient fuzzer on float64)
    pos: tuple = ()           # operand positions that must be positive for gradients
    keeps_pos: bool = False   # positive operands give a positive result
    arity: int = 1
    torch_skip: Callable = None   # (args, params) -> True where PyTorch's answer is known to differ by design
    statement: bool = False   # the form is a statement mutating operand 0


def _cat_letter(dt) -> str:
    return "bif"[cat_of(dt)]


def _compute(rule, promoted):
    if rule == "float":
        return ("float32" if cat_of(promoted) < 2 else promoted), None
    if rule in ("compare", "predicate"):
        return promoted, "bool"
    if rule == "logical":
        return "bool", "bool"
    if rule == "square" and promoted == "bool":
        return "int64", None
    return promoted, None


def ew(fn, rule="promote", cats="bif", check=None):
    """NumPy side of an elementwise op: promote, check the category, cast, compute, cast the result."""
    def run(args, p):
        present = [a for a in args if a is not None]
        if rule == "where":
            promoted = result_type(*present[1:])
        else:
            promoted = result_type(*present)
        compute, result = _compute(rule, promoted)
        if _cat_letter(compute) not in cats:
            raise OracleError(f"dtype {compute} not supported")
        # bool, or uint8 (deprecated in PyTorch, still accepted)
        if rule == "where" and not (isinstance(args[0], np.ndarray) and args[0].dtype in (np.bool_, np.uint8)):
            raise OracleError("where: the condition must be a bool tensor")
        # float16 computes in float32 (PyTorch's opmath, and dispatch_jit's): a 0-d or Python float
        # operand keeps float32 precision instead of being rounded to float16 first
        work = "float32" if compute == "float16" else compute
        if rule == "where":
            cast = [as_dtype(args[0], "bool")] + [as_dtype(a, work) for a in args[1:]]
        else:
            cast = [None if a is None else as_dtype(a, work) for a in args]
        try:
            np.broadcast_shapes(*[np.shape(a) for a in cast if a is not None])
        except ValueError as e:
            raise OracleError(str(e)) from None
        if check is not None:
            check(cast, compute, args)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*cast))
        return as_dtype(out, result or compute) if out.dtype.name != (result or compute) else out
    run.rule = rule
    return run


def _f64(fn):
    """A float function evaluated in float64 (then cast back by ew)."""
    def run(*xs):
        dt = xs[0].dtype
        with np.errstate(all="ignore"):
            return np.asarray(fn(*[x.astype(np.float64) for x in xs])).astype(dt)
    return run


def _int_nonzero_divisor(cast, compute, args):
    size = int(np.prod(np.broadcast_shapes(*[np.shape(a) for a in cast if a is not None])))
    if cat_of(compute) == 1 and size and np.any(cast[1] == 0):      # an empty result divides nothing
        raise OracleError("integer division by zero")


def _int_scalar_nonneg_exponent(cast, compute, args):
    # PyTorch refuses a negative Python int exponent (whatever the size, even a uint8 base's);
    # a tensor exponent holding negatives computes (_int_pow)
    if cat_of(compute) == 1 and not isinstance(args[1], np.ndarray) and args[1] < 0:
        raise OracleError("integers to negative integer powers")


def _pow(x, y):
    """PyTorch's power: float in float64; integers wrap as NumPy's, and a negative exponent gives
    1 / x**|y| truncated (1 for base 1, -1 or 1 for base -1, else 0), where NumPy raises."""
    if x.dtype.kind == "f":
        return _f64(np.power)(x, y)
    neg = y < 0
    with np.errstate(all="ignore"):
        r = np.asarray(np.power(x, np.where(neg, np.zeros((), y.dtype), y)))
    if x.dtype.kind == "i" and np.any(neg):
        one = np.ones((), r.dtype)
        inv = np.where(x == 1, one, np.where(x == -1, np.where(y % 2 != 0, -one, one), np.zeros((), r.dtype)))
        r = np.where(neg, inv, r).astype(r.dtype)
    return r


def _shift_count(cast, compute, args):
    if np.any(cast[1] < 0):
        raise Undefined("a negative shift count (the array API leaves it undefined)")


def _no_float16(cast, compute, args):
    if compute == "float16":
        raise OracleError("nextafter refuses float16 (its loops compute in float32)")


def _int_identity(fn):
    """A rounding function that leaves integers as they are (NumPy's goes through float64, which
    loses uint64 and int64 values above 2**53)."""
    return lambda x: x.copy() if x.dtype.kind in "biu" else fn(x)


def _sign(x):
    if x.dtype.kind == "b":
        return x.copy()       # a new tensor, as dj.sign's (the mirror must not alias it)
    s = np.sign(x)
    return np.where(np.isnan(s), np.zeros_like(s), s) if x.dtype.kind == "f" else s    # torch.sign(nan) == 0


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _fn_forms(name, method=True, op=None, rop=None):
    forms = [lambda a, p, n=name: f"dj.{n}({', '.join(a)})"]
    if method:
        forms.append(lambda a, p, n=name: f"{a[0]}.{n}({', '.join(a[1:])})")
    if op:
        if len(op) == 1 or op in ("//", "**"):
            pass
        forms.append(lambda a, p, o=op: f"({a[0]} {o} {a[1]})" if len(a) == 2 else f"({o}{a[0]})")
    return tuple(forms)


def _tsk_nonfinite(args, p):
    """PyTorch's composites give nan at +-inf where the limit exists (gelu(inf) = nan): not compared."""
    return any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and not np.isfinite(a).all() for a in args)


def _tsk_nan(args, p):
    return any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and np.isnan(a).any() for a in args)


def unary(name, fn, rule="promote", cats="bif", tol=EXACT, op=None, grad=False, pos=(), keeps_pos=False,
          torch_name=None, torch_skip=None, method=True):
    forms = _fn_forms(name, method)
    if op:
        forms = forms + (lambda a, p, o=op: f"{o}({a[0]})" if o.isalpha() else f"({o}{a[0]})",)
    tn = torch_name or name
    return Row(name, "unary", forms, cats, ew(fn, rule, cats), lambda t, p, tn=tn: getattr(__import__("torch"), tn)(*t),
               tol, None, grad, pos, keeps_pos, 1, torch_skip)


def binary(name, fn, rule="promote", cats="bif", tol=EXACT, op=None, grad=False, pos=(), keeps_pos=False,
           check=None, torch_name=None, method=True):
    forms = _fn_forms(name, method)
    if op:
        forms = forms + (lambda a, p, o=op: f"({a[0]} {o} {a[1]})",)
    tn = torch_name or name
    return Row(name, "binary", forms, cats, ew(fn, rule, cats, check),
               lambda t, p, tn=tn: getattr(__import__("torch"), tn)(*t), tol, None, grad, pos, keeps_pos, 2)


def _aten_torch(row):
    """``row`` compared with ``torch.ops.aten.<name>`` (an op PyTorch has only there, as tanh_backward):
    scalar operands become 0-d tensors of the other operand's dtype; float operands only (PyTorch's
    aten op refuses integers, which dispatch_jit computes in float32 as the table's "float" rule says)."""
    def call(t, p, name=row.name):
        torch = __import__("torch")
        like = next(a for a in t if isinstance(a, torch.Tensor))
        return getattr(torch.ops.aten, name)(*[a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=like.dtype)
                                               for a in t])
    return replace(row, torch=call, torch_skip=lambda a, p: not all(
        isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in a) or len({x.dtype for x in a}) > 1)


U4, U8 = ulps(4), ulps(8)
_NUM, _REAL, _REALB, _F, _INTEGRAL = "if", "if", "bif", "f", "bi"

ROWS: list[Row] = [
    # -- unary elementwise ---------------------------------------------------------------------
    unary("abs", np.abs, cats=_NUM, op="abs", grad=True, keeps_pos=True),
    unary("neg", np.negative, cats=_NUM, op="-", grad=True),
    unary("sign", _sign, cats=_REALB),
    unary("exp", _f64(np.exp), "float", _F, U4, grad=True, keeps_pos=True),
    unary("expm1", _f64(np.expm1), "float", _F, U4, grad=True, keeps_pos=True),
    unary("log", _f64(np.log), "float", _F, U4, grad=True, pos=(0,)),
    unary("log1p", _f64(np.log1p), "float", _F, U4, grad=True, pos=(0,), keeps_pos=True),
    unary("log2", _f64(np.log2), "float", _F, U4, grad=True, pos=(0,)),
    unary("log10", _f64(np.log10), "float", _F, U4, grad=True, pos=(0,)),
    unary("sqrt", np.sqrt, "float", _F, EXACT, grad=True, pos=(0,), keeps_pos=True),
    unary("rsqrt", _f64(lambda x: 1.0 / np.sqrt(x)), "float", _F, U4, grad=True, pos=(0,), keeps_pos=True),
    unary("square", np.square, "square", cats=_NUM, grad=True, keeps_pos=True),   # bool: int64, as torch
    unary("reciprocal", lambda x: np.asarray(1, x.dtype) / x, "float", _F, EXACT, grad=True, pos=(0,),
          keeps_pos=True),
    unary("sin", _f64(np.sin), "float", _F, U4, grad=True),
    unary("cos", _f64(np.cos), "float", _F, U4, grad=True),
    unary("tan", _f64(np.tan), "float", _F, U4),
    unary("asin", _f64(np.arcsin), "float", _F, U4),
    unary("acos", _f64(np.arccos), "float", _F, U4),
    unary("atan", _f64(np.arctan), "float", _F, U4, grad=True),
    unary("asinh", _f64(np.arcsinh), "float", _F, U4, grad=True),
    unary("acosh", _f64(np.arccosh), "float", _F, U4),
    unary("atanh", _f64(np.arctanh), "float", _F, U4),
    unary("sinh", _f64(np.sinh), "float", _F, U4, grad=True),
    unary("cosh", _f64(np.cosh), "float", _F, U4, grad=True, keeps_pos=True),
    unary("tanh", _f64(np.tanh), "float", _F, U4, grad=True),
    unary("erf", _f64(_erf), "float", _F, U4, grad=True),
    unary("sigmoid", _f64(_sigmoid), "float", _F, U8, grad=True, keeps_pos=True),
    unary("relu", lambda x: np.where(x <= 0, np.zeros((), x.dtype), x), cats=_REAL, grad=True, keeps_pos=True),
    unary("floor", _int_identity(np.floor), cats=_REAL),
    unary("ceil", _int_identity(np.ceil), cats=_REAL),
    unary("round", _int_identity(np.rint), cats=_REAL),
    unary("trunc", _int_identity(np.trunc), cats=_REAL),
    unary("isnan", np.isnan, "predicate"),
    unary("isinf", np.isinf, "predicate"),
    unary("isfinite", np.isfinite, "predicate"),
    unary("logical_not", np.logical_not, "logical"),
    unary("bitwise_not", np.invert, cats=_INTEGRAL, op="~"),
    unary("signbit", np.signbit, "predicate", _REALB, method=False),
    unary("conj", lambda x: x.copy(), cats="bif"),
    unary("real", lambda x: x.copy(), cats=_REALB, method=False, grad=True),
    unary("imag", np.zeros_like, cats=_NUM, method=False, torch_skip=lambda a, p: True),
    # -- binary elementwise --------------------------------------------------------------------
    binary("add", np.add, op="+", grad=True, keeps_pos=True),
    binary("sub", np.subtract, cats=_NUM, op="-", grad=True),
    binary("mul", np.multiply, op="*", grad=True, keeps_pos=True),
    binary("div", np.true_divide, "float", _F, EXACT, op="/", grad=True, pos=(1,), keeps_pos=True),
    binary("floor_divide", np.floor_divide, cats=_REAL, op="//", check=_int_nonzero_divisor),
    binary("remainder", np.remainder, cats=_REAL, op="%", check=_int_nonzero_divisor),
    binary("pow", _pow, cats=_NUM, tol=U8, op="**", check=_int_scalar_nonneg_exponent, grad=True, pos=(0,),
           keeps_pos=True),
    binary("maximum", np.maximum, cats=_REALB, grad=True, keeps_pos=True),
    binary("minimum", np.minimum, cats=_REALB, grad=True, keeps_pos=True),
    binary("atan2", _f64(np.arctan2), "float", _F, U4, grad=True),
    binary("copysign", np.copysign, "float", _F, grad=True),
    binary("hypot", _f64(np.hypot), "float", _F, U4, grad=True, pos=(0, 1)),
    binary("logaddexp", _f64(np.logaddexp), "float", _F, U4, grad=True),
    binary("nextafter", np.nextafter, cats=_F, check=_no_float16),
    # tanh's and sigmoid's derivatives as one op (x the gradient, y the forward's result): the same
    # operations in the compute dtype as the loop's, so exact
    _aten_torch(binary("tanh_backward", lambda x, y: x * ((1 - y) * (1 + y)), "float", _F, grad=True, method=False)),
    _aten_torch(binary("sigmoid_backward", lambda x, y: x * (y * (1 - y)), "float", _F, grad=True, method=False)),
    binary("eq", np.equal, "compare", op="=="),
    binary("ne", np.not_equal, "compare", op="!="),
    binary("lt", np.less, "compare", _REALB, op="<"),
    binary("le", np.less_equal, "compare", _REALB, op="<="),
    binary("gt", np.greater, "compare", _REALB, op=">"),
    binary("ge", np.greater_equal, "compare", _REALB, op=">="),
    binary("logical_and", np.logical_and, "logical"),
    binary("logical_or", np.logical_or, "logical"),
    binary("logical_xor", np.logical_xor, "logical"),
    binary("bitwise_and", np.bitwise_and, cats=_INTEGRAL, op="&"),
    binary("bitwise_or", np.bitwise_or, cats=_INTEGRAL, op="|"),
    binary("bitwise_xor", np.bitwise_xor, cats=_INTEGRAL, op="^"),
    binary("bitwise_left_shift", np.left_shift, cats="i", op="<<", check=_shift_count),
    binary("bitwise_right_shift", np.right_shift, cats="i", op=">>", check=_shift_count),
]


# -- ternary -----------------------------------------------------------------------------------------
def _torch_where(t, p):
    import torch
    return torch.where(*t)


def _torch_clamp(t, p):
    import torch
    return torch.clamp(t[0], min=t[1], max=t[2])


def _clamp_quirk(a, p):
    """torch.clamp of a bool tensor with a 0-d tensor bound and a Python number bound promotes the
    number as a 0-d int64 tensor (clamp(bool, int8 0-d, 0) is int64, clamp(int8, 0, int8 0-d) is
    int8): its result_type rule, not a wrapped number's; dispatch_jit follows the rule of every op."""
    scalar = any(x is not None and not isinstance(x, np.ndarray) for x in a[1:3])
    return scalar and isinstance(a[0], np.ndarray) and a[0].dtype == np.bool_

ROWS += [
    Row("where", "ternary", (lambda a, p: f"dj.where({a[0]}, {a[1]}, {a[2]})",), "bif",
        ew(lambda c, x, y: np.where(c, x, y), "where"), _torch_where, EXACT, None, True, (), True, 3),
    Row("clamp", "ternary", (lambda a, p: f"dj.clamp({a[0]}, {a[1]}, {a[2]})",
                             lambda a, p: f"{a[0]}.clamp(min={a[1]}, max={a[2]})",
                             lambda a, p: f"dj.clip({a[0]}, {a[1]}, {a[2]})"), _REALB,
        ew(lambda x, lo=None, hi=None: _clamp(x, lo, hi), "clamp", _REALB), _torch_clamp, EXACT, None, True, (),
        False, 3, torch_skip=_clamp_quirk),
]



def _clamp(x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


# -- reductions --------------------------------------------------------------------------------------
def _axes_param(ch, a, multi=True, allow_none=True):
    """axis: None, an int or a tuple of distinct ints (negative ones too); keepdims."""
    nd = a.ndim
    if nd == 0 or (allow_none and ch.coin(0.3)):
        axis = None
    elif multi and nd >= 2 and ch.coin(0.4):
        k = ch.int(1, nd)
        axis = tuple(sorted({ch.int(0, nd - 1) for _ in range(k)}))
        axis = tuple(x - nd if ch.coin(0.3) else x for x in axis)
    else:
        axis = ch.int(-nd, nd - 1)
    return {"axis": axis, "keepdims": ch.coin(0.4)}


def _norm_axes(a, axis):
    if axis is None:
        return tuple(range(a.ndim))
    return tuple(x % a.ndim for x in ((axis,) if isinstance(axis, int) else axis))


def _red_float64(fn, out_rule):
    def run(args, p):
        a = args[0]
        rd = out_rule(a.dtype)
        ax = _norm_axes(a, p.get("axis"))
        with np.errstate(all="ignore"):
            r = np.asarray(fn(a, ax, p.get("keepdims", False), p))
        return as_dtype_unchecked(r, rd)
    return run


def as_dtype_unchecked(r, dt):
    with np.errstate(all="ignore"):
        return np.asarray(r).astype(dt)


def _sum_rule(dt):
    return np.dtype("uint64") if dt == np.uint64 else np.dtype("int64") if dt.kind in "biu" else dt


def _float_only(dt):
    if dt.kind != "f":
        raise OracleError(f"{dt} not supported (floating point only)")
    return dt


def _float32_if_int(dt):
    return dt if dt.kind == "f" else np.dtype("float32")


def _sum(a, ax, kd, p):
    acc = np.float64 if a.dtype.kind == "f" else _sum_rule(a.dtype)
    return np.sum(a.astype(acc), axis=ax, keepdims=kd)


def _prod(a, ax, kd, p):
    acc = np.float64 if a.dtype.kind == "f" else _sum_rule(a.dtype)
    return np.prod(a.astype(acc), axis=ax, keepdims=kd)


def _mean(a, ax, kd, p):
    return np.mean(a.astype(np.float64), axis=ax, keepdims=kd)


def _maxmin(fn):
    def run(a, ax, kd, p):
        if any(a.shape[i] == 0 for i in ax):
            raise OracleError("max/min of an empty dimension")
        return fn(a, axis=ax, keepdims=kd)
    return run


def _var(a, ax, kd, p):
    c = p.get("correction", 1)
    f = a.astype(np.float64)
    n = int(np.prod([a.shape[i] for i in ax], dtype=np.int64))
    m = np.mean(f, axis=ax, keepdims=True) if a.size else np.zeros([1 if i in ax else s for i, s in enumerate(a.shape)])
    s = np.sum((f - m) ** 2, axis=ax, keepdims=kd)
    r = s / (n - c) if n - c > 0 else s * np.nan if n - c < 0 or True else s
    if p.get("std"):
        r = np.sqrt(r)
    return r


def _lse(a, ax, kd, p):
    f = a.astype(np.float64)
    if a.size == 0:
        return np.log(np.sum(np.exp(f), axis=ax, keepdims=kd))
    m = np.max(f, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    r = np.log(np.sum(np.exp(f - m), axis=ax, keepdims=True)) + m
    return r if kd else np.squeeze(r, axis=ax)


def _argm(fn):
    def run(args, p):
        a = args[0]
        axis, kd = p.get("axis"), p.get("keepdims", False)
        if a.size == 0 and (axis is None or a.shape[axis] == 0):
            raise OracleError("argmax of an empty sequence")
        if axis is None:
            r = np.asarray(fn(a.reshape(-1)), dtype=np.int64)
            return r.reshape((1,) * a.ndim) if kd else r
        return np.asarray(fn(a, axis=axis, keepdims=kd), dtype=np.int64)
    return run


def _all_any(fn):
    def run(args, p):
        a = args[0]
        r = np.asarray(fn(a != 0, axis=_norm_axes(a, p.get("axis")), keepdims=p.get("keepdims", False)))
        return r.astype(np.uint8) if a.dtype == np.uint8 else r      # PyTorch's legacy uint8 -> uint8
    return run


def _red_forms(name):
    def f1(a, p):
        return f"dj.{name}({a[0]}, axis={p['axis']!r}, keepdims={p['keepdims']!r}{_extra(p)})"

    def f2(a, p):
        return f"{a[0]}.{name}(axis={p['axis']!r}, keepdims={p['keepdims']!r}{_extra(p)})"

    def f3(a, p):   # PyTorch's spelling
        if p["axis"] is None:
            return f"{a[0]}.{name}({_extra(p)[2:]})" if not p["keepdims"] else f2(a, p)
        return f"{a[0]}.{name}(dim={p['axis']!r}, keepdim={p['keepdims']!r}{_extra(p)})"

    def f4(a, p):   # var/std's overload (input, unbiased): unbiased=True is correction=1, False 0
        if p["axis"] is None and not p["keepdims"] and p.get("correction") in (0, 1):
            return f"dj.{name}({a[0]}, {p['correction'] == 1})"
        return f1(a, p)
    return (f1, f2, f3, f4) if name in ("var", "std") else (f1, f2, f3)


def _extra(p):
    s = ""
    if "correction" in p and not p.get("default_correction"):
        s += f", correction={p['correction']!r}"
    return s


def _torch_red(name):
    def run(t, p):
        import torch
        kw = {}
        if p["axis"] is not None:
            kw = dict(dim=p["axis"], keepdim=p["keepdims"])
        elif name in ("logsumexp",):
            kw = dict(dim=tuple(range(t[0].ndim)), keepdim=p["keepdims"])
        elif p["keepdims"] and name not in ("argmax", "argmin"):
            kw = dict(dim=tuple(range(t[0].ndim)), keepdim=True)
        elif p["keepdims"]:
            kw = dict(dim=None, keepdim=True)
        if name in ("var", "std"):
            kw["correction"] = p.get("correction", 1)
        fn = {"max": "amax", "min": "amin"}.get(name, name)
        if name in ("all", "any") and isinstance(kw.get("dim"), tuple) and t[0].ndim:
            r = t[0]
            for d in sorted((x % t[0].ndim for x in kw["dim"]), reverse=True):
                r = getattr(torch, name)(r, dim=d, keepdim=kw["keepdim"])
            return r
        return getattr(torch, fn)(t[0], **kw)
    return run


def _red_params(multi=True):
    def make(ch, args):
        return _axes_param(ch, args[0], multi)
    return make


def _var_params(std):
    def make(ch, args):
        p = _axes_param(ch, args[0])
        p["correction"] = ch.choice([0, 1, 1])
        p["std"] = std
        if ch.coin(0.15):      # the default: PyTorch's unbiased estimator
            p["default_correction"], p["correction"] = True, 1
        return p
    return make


def _mean_params(ch, args):
    p = _axes_param(ch, args[0])
    p["mean"] = True
    return p


def _first_form(inner):
    return tuple(lambda a, p, f=f: f"_first({f(a, p)})" for f in inner)


def _maxmin_forms(name):
    """Values of max/min: the full reduction (no dim), or [0] of the (values, indices) of dim=int."""
    return (lambda a, p: f"dj.{name}({a[0]})" if p["axis"] is None else
            f"dj.{name}({a[0]}, dim={p['axis']}, keepdim={p['keepdims']}).values",
            lambda a, p: f"{a[0]}.{name}()" if p["axis"] is None else
            f"{a[0]}.{name}({p['axis']}, keepdim={p['keepdims']})[0]",
            lambda a, p: f"{a[0]}.{name}()" if p["axis"] is None else
            f"{a[0]}.{name}(axis={p['axis']}, keepdims={p['keepdims']}).values")


def _maxmin_index_forms(name):
    return (lambda a, p: f"dj.{name}({a[0]}, dim={p['axis']}, keepdim={p['keepdims']}).indices",
            lambda a, p: f"{a[0]}.{name}({p['axis']}, {p['keepdims']})[1]")


def _maxmin_params(ch, args):
    a = args[0]
    if a.ndim == 0 or ch.coin(0.3):
        return {"axis": None, "keepdims": False}
    return {"axis": ch.int(-a.ndim, a.ndim - 1), "keepdims": ch.coin(0.4)}


def _maxmin_int_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    return {"axis": ch.int(-a.ndim, a.ndim - 1), "keepdims": ch.coin(0.4)}


def _maxmin_indices(fn):
    def run(args, p):
        a = args[0]
        if a.shape[p["axis"]] == 0:
            raise OracleError("max/min of an empty dimension")
        return _argm(fn)(args, p)
    return run


def _torch_maxmin_indices(name):
    def run(t, p):
        import torch
        return getattr(torch, name)(t[0], dim=p["axis"], keepdim=p["keepdims"]).indices
    return run


ROWS += [
    Row("sum", "reduce", _red_forms("sum"), "bif", _red_float64(_sum, _sum_rule), _torch_red("sum"), tol_sum,
        _red_params(), True, (), True),
    # torch multiplies float16 in float32, where a long product can reach 0 and inf (0 * inf = nan);
    # dispatch_jit accumulates float products in float64, as the NumPy oracle does
    Row("prod", "reduce", _red_forms("prod"), "bif", _red_float64(_prod, _sum_rule), _torch_red("prod"), tol_prod,
        _red_params(), True, (), True, torch_skip=lambda a, p: a[0].dtype == np.float16),
    Row("mean", "reduce", _red_forms("mean"), "f", _red_float64(_mean, _float_only), _torch_red("mean"), tol_sum,
        _mean_params, True, (), True),
    # max/min as PyTorch: no dim -> the full reduction; dim=int -> (values, indices); amax/amin: dims
    Row("max", "reduce", _maxmin_forms("max"), "bif", _red_float64(_maxmin(np.max), lambda d: d),
        _torch_red("max"), EXACT, _maxmin_params, True, (), True),
    Row("min", "reduce", _maxmin_forms("min"), "bif", _red_float64(_maxmin(np.min), lambda d: d),
        _torch_red("min"), EXACT, _maxmin_params, True, (), True),
    Row("max.indices", "reduce", _maxmin_index_forms("max"), "bif", _maxmin_indices(np.argmax),
        _torch_maxmin_indices("max"), EXACT, _maxmin_int_params, torch_skip=lambda a, p: a[0].dtype == np.bool_),
    Row("min.indices", "reduce", _maxmin_index_forms("min"), "bif", _maxmin_indices(np.argmin),
        _torch_maxmin_indices("min"), EXACT, _maxmin_int_params, torch_skip=lambda a, p: a[0].dtype == np.bool_),
    Row("amax", "reduce", _red_forms("amax"), "bif", _red_float64(_maxmin(np.max), lambda d: d),
        _torch_red("amax"), EXACT, _red_params(), True, (), True),
    Row("amin", "reduce", _red_forms("amin"), "bif", _red_float64(_maxmin(np.min), lambda d: d),
        _torch_red("amin"), EXACT, _red_params(), True, (), True),
    Row("argmax", "reduce", _red_forms("argmax"), "bif", _argm(np.argmax), _torch_red("argmax"), EXACT,
        _red_params(multi=False), torch_skip=lambda a, p: a[0].dtype == np.bool_),
    Row("argmin", "reduce", _red_forms("argmin"), "bif", _argm(np.argmin), _torch_red("argmin"), EXACT,
        _red_params(multi=False), torch_skip=lambda a, p: a[0].dtype == np.bool_),
    Row("var", "reduce", _red_forms("var"), "f", _red_float64(_var, _float_only), _torch_red("var"), tol_var,
        _var_params(False), True),
    Row("std", "reduce", _red_forms("std"), "f", _red_float64(_var, _float_only), _torch_red("std"), tol_var,
        _var_params(True), True, (), True),
    Row("all", "reduce", _red_forms("all"), "bif", _all_any(np.all), _torch_red("all"), EXACT, _red_params()),
    Row("any", "reduce", _red_forms("any"), "bif", _all_any(np.any), _torch_red("any"), EXACT, _red_params()),
    Row("logsumexp", "reduce", _red_forms("logsumexp"), "bif", _red_float64(_lse, _float32_if_int),
        _torch_red("logsumexp"), lambda a, p, w: tol_softmax(a, dict(p, axis=0, kind="lse"), w)
        if False else (8 * float(np.finfo(w.dtype).eps), (8 + a[0].size) * float(np.finfo(w.dtype).eps)
                       * np.maximum(1.0, np.abs(np.nan_to_num(w.astype(np.float64), posinf=0, neginf=0)))),
        _red_params(), True),
]


# -- softmax-like composites and other composites ------------------------------------------------------
def _softmax_np(log):
    def run(args, p):
        a = args[0]
        if a.dtype.kind != "f":        # as PyTorch: x - max(x) would wrap in an integer dtype
            raise OracleError("softmax of an integer or bool tensor")
        ax = p["axis"] % a.ndim
        f = a.astype(np.float64)
        with np.errstate(all="ignore"):
            m = np.max(f, axis=ax, keepdims=True) if a.size else f
            s = f - m
            r = s - np.log(np.sum(np.exp(s), axis=ax, keepdims=True)) if log else \
                np.exp(s) / np.sum(np.exp(s), axis=ax, keepdims=True)
        return as_dtype_unchecked(r, _float32_if_int(a.dtype))
    return run


def _softmax_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    return {"axis": ch.int(-a.ndim, a.ndim - 1)}


def _torch_softmax(name):
    def run(t, p):
        import torch
        return getattr(torch, name)(t[0], dim=p["axis"])
    return run


def _gelu_np(args, p):
    a = args[0]
    if a.dtype.kind != "f":
        raise OracleError("gelu of a non-float")
    f = a.astype(np.float64)
    if p["approximate"] == "tanh":
        r = 0.5 * f * (1 + np.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))
    else:
        r = 0.5 * f * (1 + _erf(f / math.sqrt(2)))
    return as_dtype_unchecked(r, a.dtype)


def _torch_gelu(t, p):
    import torch
    return torch.nn.functional.gelu(t[0], approximate=p["approximate"])


def _layer_norm_np(args, p):
    a = args[0]
    if a.dtype.kind != "f":
        raise OracleError("layer_norm of a non-float")
    axes = tuple(range(a.ndim - len(p["shape"]), a.ndim))
    f = a.astype(np.float64)
    with np.errstate(all="ignore"):
        c = f - f.mean(axis=axes, keepdims=True)
        return as_dtype_unchecked(c / np.sqrt((c * c).mean(axis=axes, keepdims=True) + 1e-5), a.dtype)


def _layer_norm_params(ch, args):
    """The trailing dims normalized: 1 to ndim of them, none of size 0."""
    a = args[0]
    if a.ndim == 0 or a.size == 0:
        return None
    k = ch.int(1, a.ndim)
    return {"shape": tuple(int(n) for n in a.shape[a.ndim - k:])}


def _tol_layer_norm(args, p, want):
    """float32/float64: statistics in float64, one rounding; float16/bfloat16 compose ops that round at
    each step, amplified by 1/std (up to 1/sqrt(eps) for a constant row)."""
    if want.dtype.itemsize == 2:
        return 0.05, 0.05
    return 16 * float(np.finfo(want.dtype).eps), 512 * float(np.finfo(want.dtype).eps)


def _silu_np(args, p):
    a = args[0]
    if a.dtype.kind != "f":
        raise OracleError("silu of a non-float")
    f = a.astype(np.float64)
    with np.errstate(all="ignore"):
        return as_dtype_unchecked(f * _sigmoid(f), a.dtype)


def _chain_tol(a, p, w):
    if w.dtype.kind != "f":
        return None
    fi = np.finfo(w.dtype)
    return 16 * float(fi.eps) + (2.0 ** -9 if w.dtype == np.float16 else 0), 16 * float(fi.eps)


def _foreach_norm_np(args, p):
    """The 2-norm of each operand, stacked: |x| * |x| rounded to the dtype, summed, then the root."""
    if any(a.dtype.kind != "f" or a.dtype != args[0].dtype for a in args):
        raise OracleError("_foreach_norm of a non-float, or two dtypes stacked")
    with np.errstate(all="ignore"):
        return np.stack([as_dtype_unchecked(np.sqrt(as_dtype_unchecked(
            (np.abs(a) * np.abs(a)).astype(np.float64).sum(), a.dtype).astype(np.float64)), a.dtype) for a in args])


ROWS += [
    Row("softmax", "reduce", (lambda a, p: f"dj.softmax({a[0]}, axis={p['axis']})",
                              lambda a, p: f"{a[0]}.softmax({p['axis']})"), "if", _softmax_np(False),
        _torch_softmax("softmax"), lambda a, p, w: tol_softmax(a, dict(p, kind="softmax"), w), _softmax_params, True,
        torch_skip=lambda a, p: a[0].dtype.kind != "f"),
    Row("log_softmax", "reduce", (lambda a, p: f"dj.log_softmax({a[0]}, axis={p['axis']})",
                                  lambda a, p: f"{a[0]}.log_softmax({p['axis']})"), "if", _softmax_np(True),
        _torch_softmax("log_softmax"), lambda a, p, w: tol_softmax(a, p, w), _softmax_params, True,
        torch_skip=lambda a, p: a[0].dtype.kind != "f"),
    Row("gelu", "unary", (lambda a, p: f"dj.gelu({a[0]}, approximate={p['approximate']!r})",), "f", _gelu_np,
        _torch_gelu, _chain_tol, lambda ch, args: {"approximate": ch.choice(["none", "tanh"])}, True,
        torch_skip=_tsk_nonfinite),
    Row("layer_norm", "reduce", (lambda a, p: f"dj.nn.functional.layer_norm({a[0]}, {p['shape']!r})",), "f",
        _layer_norm_np, lambda t, p: __import__("torch").nn.functional.layer_norm(t[0], p["shape"]), _tol_layer_norm,
        _layer_norm_params, True, torch_skip=_tsk_nonfinite),
    Row("_foreach_norm", "list", (lambda a, p: f"dj.stack(dj.ops.aten._foreach_norm([{', '.join(a)}]))",), "f",
        _foreach_norm_np, None, lambda a, p, w: (16 * float(np.finfo(w.dtype).eps), 0.0)),
    Row("silu", "unary", (lambda a, p: f"dj.silu({a[0]})",), "f", _silu_np,
        lambda t, p: __import__("torch").nn.functional.silu(t[0]), _chain_tol, None, True,
        torch_skip=_tsk_nonfinite),
]


# -- matmul, dot, linear, mse_loss ------------------------------------------------------------------------
def _matmul_np(args, p):
    a, b = args[0], args[1]
    dt = result_type(a, b)
    if cat_of(dt) == 0 or dt in ("uint16", "uint32", "uint64"):
        raise OracleError(f"matmul of {dt}")
    if a.ndim == 0 or b.ndim == 0:
        raise OracleError("matmul of a 0-d tensor")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        if a.shape[-1] != (b.shape[-2] if b.ndim >= 2 else b.shape[0]):
            raise ValueError
    except ValueError:
        raise OracleError("matmul shapes") from None
    acc = np.float64 if cat_of(dt) == 2 else np.dtype(dt)
    with np.errstate(all="ignore"):
        return as_dtype_unchecked(np.matmul(a.astype(acc), b.astype(acc)), dt)


def _mse_np(args, p):
    a, b = args[0], args[1]       # a Python scalar target is a 0-d one (torch refuses it; a result is no harm)
    dt = result_type(a, b)
    if cat_of(dt) != 2:
        raise OracleError("mse_loss of non-floats")
    np.broadcast_shapes(np.shape(a), np.shape(b))
    with np.errstate(all="ignore"):
        d = (np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2
        r = {"mean": np.mean, "sum": np.sum, "none": lambda x: x}[p["reduction"]](d)
    return as_dtype_unchecked(r, dt)


def _mse_tol(a, p, w):
    fi = np.finfo(w.dtype)
    with np.errstate(all="ignore"):
        x = np.nan_to_num(np.asarray(a[0], np.float64), posinf=0, neginf=0)
        y = np.nan_to_num(np.asarray(a[1], np.float64), posinf=0, neginf=0)
        s = np.abs(x) + np.abs(y)
        mag = float(np.max(s)) if s.size else 0.0
        mag = mag * mag if mag < 1e150 else math.inf     # float ** 2 raises OverflowError
    n = np.broadcast_shapes(np.shape(a[0]), np.shape(a[1]))
    n = int(np.prod(n)) if p["reduction"] != "none" else 1
    return 8 * float(fi.eps), (8 + n) * float(fi.eps) * max(mag, 1.0) * 4


def _pair_matmul(a, b):
    return a.ndim >= 1 and b.ndim >= 1 and a.shape[-1] == (b.shape[-2] if b.ndim >= 2 else b.shape[0]) \
        and (a.ndim <= 2 and b.ndim <= 2 or True)


ROWS += [
    Row("matmul", "matmul", (lambda a, p: f"dj.matmul({a[0]}, {a[1]})", lambda a, p: f"({a[0]} @ {a[1]})",
                             lambda a, p: f"{a[0]}.matmul({a[1]})"), "if", _matmul_np,
        lambda t, p: __import__("torch").matmul(t[0], t[1]), tol_matmul, None, True, arity=2),
    Row("dot", "matmul", (lambda a, p: f"dj.dot({a[0]}, {a[1]})", lambda a, p: f"{a[0]}.dot({a[1]})"), "if",
        lambda args, p: _matmul_np(args, p) if args[0].ndim == 1 and args[1].ndim == 1 else _raise("dot: 1-D"),
        lambda t, p: __import__("torch").dot(t[0], t[1]), tol_matmul, None, True, arity=2),
    Row("mse_loss", "binary", (lambda a, p: f"dj.mse_loss({a[0]}, {a[1]}, reduction={p['reduction']!r})",), "f",
        _mse_np, lambda t, p: __import__("torch").nn.functional.mse_loss(t[0], t[1], reduction=p["reduction"]),
        _mse_tol, lambda ch, args: {"reduction": ch.choice(["mean", "sum", "none"])}, True, arity=2,
        torch_skip=lambda a, p: np.shape(a[0]) != np.shape(a[1]) or not all(isinstance(x, np.ndarray) for x in a[:2])),
]


# -- dj.nn ops: the class-index losses (one op each) and linear --------------------------------------------
def _class_params(ch, args):
    """A target of class indices for operand 0 as logits / log-probabilities: (C,), (N, C) or (N, C, d)."""
    x = args[0]
    if x.ndim not in (1, 2, 3) or x.size == 0 or x.dtype.kind != "f":
        return None
    nclass = x.shape[0 if x.ndim == 1 else 1]
    tshape = () if x.ndim == 1 else (x.shape[0],) + x.shape[2:]
    n = int(np.prod(tshape, dtype=np.int64))
    t = [ch.int(0, nclass - 1) if ch.coin(0.85) else -100 for _ in range(n)]
    return {"target": np.array(t, np.int64).reshape(tshape).tolist(), "reduction": ch.choice(["mean", "sum", "none"]),
            "ls": ch.choice([0.0, 0.0, 0.25])}


def _class_loss_np(logits):
    def run(args, p):
        x = args[0]
        if x.dtype.kind != "f":
            raise OracleError("a loss of non-float input")
        t = np.asarray(p["target"], np.int64)
        f = x.astype(np.float64)
        rows = f.reshape(1, -1) if f.ndim == 1 else np.moveaxis(f, 1, -1).reshape(-1, f.shape[1])
        tt = t.reshape(-1)
        nclass = rows.shape[1]
        eps = p["ls"] if logits else 0.0
        out = np.zeros(tt.shape[0])
        with np.errstate(all="ignore"):
            for i, c in enumerate(tt):
                if c == -100:
                    continue
                r = rows[i]
                if logits:
                    m = np.max(r)
                    r = r - m - np.log(np.sum(np.exp(r - m)))
                out[i] = -r[c] if eps == 0 else (1 - eps) * -r[c] + eps / nclass * -np.sum(r)
            valid = float(np.count_nonzero(tt != -100))
            res = {"none": lambda: out.reshape(t.shape), "sum": lambda: np.sum(out),
                   "mean": lambda: np.float64(np.sum(out)) / np.float64(valid)}[p["reduction"]]()
        return as_dtype_unchecked(np.asarray(res), x.dtype)
    return run


def _class_loss_torch(logits):
    def run(t, p):
        import torch
        fn = torch.nn.functional.cross_entropy if logits else torch.nn.functional.nll_loss
        kw = {"label_smoothing": p["ls"]} if logits else {}
        return fn(t[0], torch.tensor(p["target"], dtype=torch.int64), reduction=p["reduction"], **kw)
    return run


def _class_loss_tol(a, p, w):
    fi = np.finfo(w.dtype)
    with np.errstate(all="ignore"):
        f = np.asarray(a[0], np.float64)
        mag = float(np.max(np.abs(np.where(np.isfinite(f), f, 0.0)))) if f.size else 0.0
    return 16 * float(fi.eps) + (2.0 ** -9 if w.dtype == np.float16 else 0), \
        (8 + 4 * f.size) * float(fi.eps) * max(mag, 1.0)


def _class_loss_src(name, logits):
    extra = ", label_smoothing={ls}" if logits else ""
    return (lambda a, p: f"dj.nn.functional.{name}({a[0]}, dj.tensor({p['target']}, dtype=dj.int64), "
                         f"reduction={p['reduction']!r}" + extra.format(ls=p["ls"]) + ")",)


def _linear_params(ch, args):
    return {} if args[1].ndim == 2 and args[0].ndim >= 1 else None


ROWS += [
    Row("cross_entropy", "reduce", _class_loss_src("cross_entropy", True), "f", _class_loss_np(True),
        _class_loss_torch(True), _class_loss_tol, _class_params, True,
        torch_skip=lambda a, p: a[0].dtype == np.float16),
    Row("nll_loss", "reduce", _class_loss_src("nll_loss", False), "f", _class_loss_np(False),
        _class_loss_torch(False), _class_loss_tol, _class_params, True,
        torch_skip=lambda a, p: a[0].dtype == np.float16),
    # the weight is the second operand transposed, so that the generator's matmul shapes fit
    Row("linear", "matmul", (lambda a, p: f"dj.linear({a[0]}, dj.transpose({a[1]}, 0, 1))",
                             lambda a, p: f"dj.nn.functional.linear({a[0]}, {a[1]}.transpose(0, 1))"), "if",
        _matmul_np, lambda t, p: __import__("torch").nn.functional.linear(t[0], t[1].T), tol_matmul, _linear_params,
        True, arity=2, torch_skip=lambda a, p: a[0].dtype.kind != "f" or a[0].dtype != a[1].dtype),
]



# -- dj.nn pooling and pad: (C, H, W) or (N, C, H, W) operands -------------------------------------------------
def _pool_out(n, k, pad, st, dil, ceil):
    o = (n + 2 * pad - dil * (k - 1) - 1 + (st - 1 if ceil else 0)) // st + 1
    return o - 1 if ceil and (o - 1) * st >= n + pad else o


def _pool_params(avg):
    def params(ch, args):
        x = args[0]
        if x.ndim not in (3, 4) or x.size == 0 or x.dtype.kind != "f":
            return None
        h, w = x.shape[-2:]
        k = ch.int(1, min(3, max(h, w)))
        d = 1 if avg or ch.coin(0.7) else 2
        p = {"k": k, "s": ch.int(1, 3), "pad": ch.int(0, k // 2), "d": d, "ceil": ch.coin(0.3)}
        if avg:
            p["include"] = ch.coin(0.6)
        if min(_pool_out(n, k, p["pad"], p["s"], d, p["ceil"]) for n in (h, w)) < 1:
            return None
        return p
    return params


def _pool_np(avg):
    """PyTorch's windows: output i of a dim of size n reads [i*s - pad, ...) every d, clipped to the input;
    max: NaN wins; avg: the divisor counts the padding (clipped to n + pad) with count_include_pad."""
    def run(args, p):
        x = args[0]
        if x.dtype.kind != "f":
            raise OracleError("pooling of a non-float")
        k, st, pad, d, ceil = p["k"], p["s"], p["pad"], p["d"], p["ceil"]
        h, w = x.shape[-2:]
        oh, ow = _pool_out(h, k, pad, st, d, ceil), _pool_out(w, k, pad, st, d, ceil)
        f = x.astype(np.float64)
        out = np.empty(x.shape[:-2] + (oh, ow))
        for i in range(oh):
            for j in range(ow):
                r0, c0 = i * st - pad, j * st - pad
                rows = [r for r in range(r0, r0 + d * k, d) if 0 <= r < h]
                cols = [c for c in range(c0, c0 + d * k, d) if 0 <= c < w]
                win = f[..., rows, :][..., cols]
                if avg:
                    size = (min(r0 + k, h + pad) - r0) * (min(c0 + k, w + pad) - c0) if p["include"] \
                        else len(rows) * len(cols)
                    with np.errstate(all="ignore"):
                        out[..., i, j] = win.sum(axis=(-2, -1)) / size
                else:
                    flat = win.reshape(win.shape[:-2] + (-1,))
                    if flat.shape[-1] == 0:     # a dilated window that misses the input: -inf, as PyTorch's
                        out[..., i, j] = -np.inf
                        continue
                    out[..., i, j] = np.where(np.isnan(flat).any(-1), np.nan, flat.max(-1))
        return as_dtype_unchecked(out, x.dtype)
    return run


def _pool_src(avg):
    if avg:
        return (lambda a, p: f"dj.nn.functional.avg_pool2d({a[0]}, {p['k']}, {p['s']}, {p['pad']}, "
                             f"ceil_mode={p['ceil']}, count_include_pad={p['include']})",)
    return (lambda a, p: f"dj.nn.functional.max_pool2d({a[0]}, {p['k']}, {p['s']}, {p['pad']}, {p['d']}, "
                         f"ceil_mode={p['ceil']})",)


def _pool_torch(avg):
    def run(t, p):
        import torch
        if avg:
            return torch.nn.functional.avg_pool2d(t[0], p["k"], p["s"], p["pad"], p["ceil"], p["include"])
        return torch.nn.functional.max_pool2d(t[0], p["k"], p["s"], p["pad"], p["d"], p["ceil"])
    return run


def _avg_pool_tol(args, p, want):
    """A window sum's rounding: (k*k + 8) ulps of the largest finite input magnitude."""
    fi = np.finfo(want.dtype)
    with np.errstate(all="ignore"):
        f = np.abs(args[0].astype(np.float64))
        mag = float(np.max(np.where(np.isfinite(f), f, 0.0))) if f.size else 0.0
    return 8 * float(fi.eps) + (2.0 ** -10 if want.dtype == np.float16 else 0.0), \
        (p["k"] ** 2 + 8) * float(fi.eps) * max(mag, 1.0)


def _pad_params(ch, args):
    x = args[0]
    if x.ndim not in (2, 3) or x.size == 0 or x.dtype.kind != "f":
        return None
    mode = ch.choice(["constant", "reflect", "replicate", "circular"])
    n = x.shape[-1]
    hi = n - 1 if mode == "reflect" else n if mode == "circular" else 3
    if hi < 0:
        return None
    return {"mode": mode, "pad": (ch.int(0, hi), ch.int(-1 if mode == "constant" and n > 1 else 0, hi))}


def _pad_np(args, p):
    x = args[0]
    lo, hi = p["pad"]
    if hi < 0:
        x, hi = x[..., :hi], 0
    widths = [(0, 0)] * (x.ndim - 1) + [(lo, hi)]
    mode = {"replicate": "edge", "circular": "wrap"}.get(p["mode"], p["mode"])
    return np.pad(x, widths, mode=mode)


# grad=False for now: with these rows among the gradient fuzzer's, its derandomized draws reach a known
# 1-ulp difference of atan2's broadcast gradient in compiled mode (reproduces on main without them);
# avg_pool2d's and pad's gradients are checked by finite differences in tests/nn
ROWS += [
    Row("max_pool2d", "reduce", _pool_src(False), "f", _pool_np(False), _pool_torch(False), EXACT,
        _pool_params(False), False, torch_skip=lambda a, p: a[0].dtype == np.float16),
    Row("avg_pool2d", "reduce", _pool_src(True), "f", _pool_np(True), _pool_torch(True), _avg_pool_tol,
        _pool_params(True), False, torch_skip=lambda a, p: a[0].dtype == np.float16),
    Row("pad", "reduce", (lambda a, p: f"dj.nn.functional.pad({a[0]}, {p['pad']}, mode={p['mode']!r})",), "f",
        _pad_np, lambda t, p: __import__("torch").nn.functional.pad(t[0], p["pad"], mode=p["mode"]), EXACT,
        _pad_params, False),
]


def _raise(msg):
    raise OracleError(msg)


# -- views, indexing, shape ops --------------------------------------------------------------------------
def _transpose_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    return {"d0": ch.int(-a.ndim, a.ndim - 1), "d1": ch.int(-a.ndim, a.ndim - 1)}


def _permute_params(ch, args):
    a = args[0]
    dims = list(range(a.ndim))
    for i in range(len(dims) - 1, 0, -1):
        j = ch.int(0, i)
        dims[i], dims[j] = dims[j], dims[i]
    return {"dims": tuple(d - a.ndim if ch.coin(0.2) else d for d in dims)}


def _unsqueeze_params(ch, args):
    return {"axis": ch.int(-args[0].ndim - 1, args[0].ndim)}


def _squeeze_params(ch, args):
    a = args[0]
    ones = [i for i, s in enumerate(a.shape) if s == 1]
    if ch.coin(0.3) or not a.ndim:
        return {"axis": None}
    if ones and ch.coin(0.7):
        return {"axis": ch.choice(ones)}
    return {"axis": ch.int(0, a.ndim - 1)}      # squeezing a dimension that is not 1 keeps it


def _squeeze_np(args, p):
    a = args[0]
    if p["axis"] is None:
        keep = tuple(s for s in a.shape if s != 1)
    else:
        ax = p["axis"] % a.ndim
        keep = tuple(s for i, s in enumerate(a.shape) if not (i == ax and s == 1))
    return a.reshape(keep)


def _expand_params(ch, args):
    a = args[0]
    size = [(-1 if ch.coin(0.5) else s) if s != 1 else ch.choice([1, 2, 3, -1]) for s in a.shape]
    lead = [ch.choice([1, 2, 3])] if ch.coin(0.3) else []
    return {"size": tuple(lead + size)}


def _expand_np(args, p):
    a = args[0]
    size = p["size"]
    lead = len(size) - a.ndim
    target = tuple(a.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return np.broadcast_to(a, target)


def _pick_axis(ch, a):
    """A random axis of ``a`` (negative half the time) and its length, or None for a 0-d operand."""
    if a.ndim == 0:
        return None
    ax = ch.int(-a.ndim, a.ndim - 1)
    return ax, a.shape[ax]


def _narrow_params(ch, args):
    picked = _pick_axis(ch, args[0])
    if picked is None:
        return None
    ax, n = picked
    start = ch.int(0, n)
    length = ch.int(0, n - start)
    if ch.coin(0.2) and n:
        start -= n
    return {"axis": ax, "start": start, "length": length}


def _narrow_np(args, p):
    a = args[0]
    ax = p["axis"] % a.ndim
    n = a.shape[ax]
    st = p["start"] + n if p["start"] < 0 else p["start"]
    if not (0 <= st <= n and st + p["length"] <= n):
        raise OracleError("narrow out of range")
    return a[(slice(None),) * ax + (slice(st, st + p["length"]),)]


def _slice_params(ch, args):
    picked = _pick_axis(ch, args[0])
    if picked is None:
        return None
    ax, n = picked
    bound = lambda: None if ch.coin(0.3) else ch.int(-n - 2, n + 2)     # noqa: E731  (clamped, as Python's)
    return {"dim": ax, "start": bound(), "end": bound(), "step": ch.int(1, 3)}


def _slice_np(args, p):
    a = args[0]
    return a[(slice(None),) * (p["dim"] % a.ndim) + (slice(p["start"], p["end"], p["step"]),)]


def _index_params(ch, args):
    a = args[0]
    idx = []
    if a.ndim and ch.coin(0.2):
        idx.append(Ellipsis)
        dims = list(a.shape[-ch.int(1, a.ndim):])
    else:
        dims = list(a.shape[:ch.int(0, a.ndim)])
    for n in dims:
        r = ch.int(0, 9)
        if r == 0 and n:
            idx.append(ch.int(-n, n - 1))
        elif r == 1:
            idx.append(None)
            idx.append(_slice(ch, n))
        else:
            idx.append(_slice(ch, n))
    if not idx:
        idx = [Ellipsis]
    return {"idx": tuple(idx)}


def _slice(ch, n):
    step = ch.choice([None, None, 1, 2, 3, -1, -2])
    start = None if ch.coin(0.5) else ch.int(-n - 1, n + 1)
    stop = None if ch.coin(0.5) else ch.int(-n - 1, n + 1)
    return slice(start, stop, step)


def idx_src(idx) -> str:
    parts = []
    for i in idx:
        if i is None:
            parts.append("None")
        elif i is Ellipsis:
            parts.append("...")
        elif isinstance(i, slice):
            s = ("" if i.start is None else str(i.start)) + ":" + ("" if i.stop is None else str(i.stop))
            if i.step is not None:
                s += ":" + str(i.step)
            parts.append(s)
        else:
            parts.append(str(i))
    return ", ".join(parts) if parts else "..."


def getitem_np(a, idx):
    """Basic indexing with PyTorch's result: always a view (a 0-d view where NumPy gives a scalar)."""
    return a[idx] if Ellipsis in idx else a[tuple(idx) + (Ellipsis,)]


def _reshape_params(ch, args):
    a = args[0]
    n = a.size
    divs = [d for d in range(1, min(n, 64) + 1) if n % d == 0] or [1]
    r = ch.int(0, 5)
    if r == 0:
        shape = (-1,)
    elif r == 1 and n:
        d = ch.choice(divs)
        shape = (d, -1)
    elif r == 2 and n:
        d = ch.choice(divs)
        rest = n // d
        e = ch.choice([x for x in divs if rest % x == 0] or [1])
        shape = (d, e, rest // e)
    elif r == 3:
        shape = tuple(reversed(a.shape))
    elif r == 4:
        shape = tuple(a.shape) + (1,)
    else:
        shape = (n,) if ch.coin(0.5) else (n + 1,)    # the second one is an error
    return {"shape": shape, "view": ch.coin(0.25)}


def _reshape_np(args, p):
    a = args[0]
    if p["view"]:
        v = a.view()
        try:
            v.shape = p["shape"]
        except (ValueError, AttributeError):
            raise OracleError("view: incompatible strides") from None
        return v
    return a.reshape(p["shape"])


def _flatten_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return {"start": 0, "end": -1}
    s = ch.int(0, a.ndim - 1)
    return {"start": s, "end": ch.int(s, a.ndim - 1) - (a.ndim if ch.coin(0.3) else 0)}


def _flatten_np(args, p):
    a = args[0]
    if a.ndim == 0:
        return a.reshape(1)
    s, e = p["start"] % a.ndim, p["end"] % a.ndim
    return a.reshape(a.shape[:s] + (int(np.prod(a.shape[s:e + 1], dtype=np.int64)),) + a.shape[e + 1:])


def _ident_view(args, p):
    return args[0].view()


def _clone_np(args, p):
    return args[0].copy()


def _contiguous_np(args, p):
    a = args[0]
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


ROWS += [
    Row("transpose", "view", (lambda a, p: f"{a[0]}.transpose({p['d0']}, {p['d1']})",
                              lambda a, p: f"dj.transpose({a[0]}, {p['d0']}, {p['d1']})"), "bif",
        lambda args, p: np.swapaxes(args[0], p["d0"], p["d1"]), None, EXACT, _transpose_params, True, (), True),
    Row("T", "view", (lambda a, p: f"{a[0]}.T",), "bif", lambda args, p: args[0].T, None, EXACT,
        lambda ch, args: {} if args[0].ndim == 2 else None, True, (), True),
    Row("permute", "view", (lambda a, p: f"{a[0]}.permute({p['dims']!r})",
                            lambda a, p: f"dj.permute({a[0]}, {list(p['dims'])!r})"), "bif",
        lambda args, p: args[0].transpose(p["dims"]), None, EXACT, _permute_params, True, (), True),
    Row("unsqueeze", "view", (lambda a, p: f"{a[0]}.unsqueeze({p['axis']})",
                              lambda a, p: f"dj.unsqueeze({a[0]}, {p['axis']})"), "bif",
        lambda args, p: np.expand_dims(args[0], p["axis"]), None, EXACT, _unsqueeze_params, True, (), True),
    Row("squeeze", "view", (lambda a, p: f"{a[0]}.squeeze({'' if p['axis'] is None else p['axis']})",
                            lambda a, p: f"dj.squeeze({a[0]}, {p['axis']!r})"), "bif", _squeeze_np, None, EXACT,
        _squeeze_params, True, (), True),
    Row("expand", "view", (lambda a, p: f"{a[0]}.expand({p['size']!r})",
                           lambda a, p: f"dj.expand({a[0]}, {list(p['size'])!r})"), "bif", _expand_np, None, EXACT,
        _expand_params, True, (), True),
    Row("narrow", "view", (lambda a, p: f"{a[0]}.narrow({p['axis']}, {p['start']}, {p['length']})",
                           lambda a, p: f"dj.narrow({a[0]}, {p['axis']}, {p['start']}, {p['length']})"), "bif",
        _narrow_np, None, EXACT, _narrow_params, True, (), True),
    Row("slice", "view", (lambda a, p: f"dj.ops.aten.slice({a[0]}, {p['dim']}, {p['start']}, {p['end']}, "
                                       f"{p['step']})",), "bif", _slice_np, None, EXACT, _slice_params, True, (), True),
    Row("getitem", "view", (lambda a, p: f"{a[0]}[{idx_src(p['idx'])}]",), "bif",
        lambda args, p: getitem_np(args[0], p["idx"]), None, EXACT, _index_params, True, (), True),
    Row("reshape", "view", (lambda a, p: f"{a[0]}.{'view' if p['view'] else 'reshape'}({p['shape']!r})",
                            lambda a, p: f"dj.reshape({a[0]}, {p['shape']!r})" if not p["view"]
                            else f"{a[0]}.view({p['shape']!r})"), "bif", _reshape_np, None, EXACT,
        _reshape_params, True, (), True),
    Row("flatten", "view", (lambda a, p: f"{a[0]}.flatten({p['start']}, {p['end']})",
                            lambda a, p: f"dj.flatten({a[0]}, {p['start']}, {p['end']})"), "bif", _flatten_np,
        None, EXACT, _flatten_params, True, (), True),
    Row("clone", "view", (lambda a, p: f"{a[0]}.clone()", lambda a, p: f"dj.clone({a[0]})"), "bif", _clone_np, None,
        EXACT, None, True, (), True),
    Row("contiguous", "view", (lambda a, p: f"{a[0]}.contiguous()",), "bif", _contiguous_np, None, EXACT, None,
        True, (), True),
]



# -- ordering, scans and gathers (kernels/arrayops) ------------------------------------------------------
def _axis_params(ch, args):
    a = args[0]
    if a.ndim == 0:
        return None
    return {"axis": ch.int(-a.ndim, a.ndim - 1), "descending": ch.coin(0.5), "shift": ch.int(-3, 3)}


def _tri_params(ch, args):
    return None if args[0].ndim < 2 else {"k": ch.int(-2, 2)}


def _order_np(indices):
    """Stable sort along the axis; descending keeps equal elements in their order (NaN sorts last
    ascending, first descending, as a reversed ascending sort)."""
    def run(args, p):
        a, ax = args[0], p["axis"]
        if p["descending"]:
            idx = a.shape[ax] - 1 - np.flip(np.argsort(np.flip(a, ax), axis=ax, kind="stable"), ax)
        else:
            idx = np.argsort(a, axis=ax, kind="stable")
        return idx.astype(np.int64) if indices else np.take_along_axis(a, idx, ax)
    return run


def _scan_np(fn):
    """cumsum/cumprod: integers accumulate in int64 (uint64 in uint64), floats in float64 here."""
    def run(args, p):
        a = args[0]
        acc = np.float64 if a.dtype.kind == "f" else _sum_rule(a.dtype)
        with np.errstate(all="ignore"):
            r = fn(a.astype(acc), axis=p["axis"])
        return as_dtype_unchecked(r, a.dtype if a.dtype.kind == "f" else _sum_rule(a.dtype))
    return run


def _torch_call(fn):
    def run(t, p):
        import torch
        return fn(torch, t[0], p)
    return run


ROWS += [
    Row("sort", "reduce", (lambda a, p: f"dj.sort({a[0]}, {p['axis']}, descending={p['descending']}).values",
                           lambda a, p: f"{a[0]}.sort({p['axis']}, {p['descending']})[0]"), "bif",
        _order_np(False), _torch_call(lambda torch, t, p: torch.sort(t, dim=p["axis"], descending=p["descending"],
                                                                     stable=True).values), EXACT, _axis_params, True),
    Row("argsort", "reduce", (lambda a, p: f"dj.argsort({a[0]}, {p['axis']}, {p['descending']})",
                              lambda a, p: f"{a[0]}.argsort({p['axis']}, descending={p['descending']})"), "bif",
        _order_np(True), _torch_call(lambda torch, t, p: torch.argsort(t, dim=p["axis"], descending=p["descending"],
                                                                        stable=True)), EXACT, _axis_params),
    Row("cumsum", "reduce", (lambda a, p: f"dj.cumsum({a[0]}, {p['axis']})", lambda a, p: f"{a[0]}.cumsum({p['axis']})"),
        "bif", _scan_np(np.cumsum), _torch_call(lambda torch, t, p: torch.cumsum(t, p["axis"])),
        # the reduction's bound, kept broadcastable against the scan's full-shape result
        lambda args, p, want: tol_sum(args, dict(p, keepdims=True), want), _axis_params, True),
    Row("cumprod", "reduce", (lambda a, p: f"dj.cumprod({a[0]}, {p['axis']})",
                              lambda a, p: f"{a[0]}.cumprod({p['axis']})"),
        "bif", _scan_np(np.cumprod), _torch_call(lambda torch, t, p: torch.cumprod(t, p["axis"])), tol_prod,
        _axis_params, True),
    Row("flip", "reduce", (lambda a, p: f"dj.flip({a[0]}, [{p['axis']}])", lambda a, p: f"{a[0]}.flip([{p['axis']}])"),
        "bif", lambda args, p: np.flip(args[0], p["axis"]).copy(),
        _torch_call(lambda torch, t, p: torch.flip(t, [p["axis"]])), EXACT, _axis_params, True),
    Row("roll", "reduce", (lambda a, p: f"dj.roll({a[0]}, [{p['shift']}], [{p['axis']}])",),
        "bif", lambda args, p: np.roll(args[0], p["shift"], p["axis"]),
        _torch_call(lambda torch, t, p: torch.roll(t, p["shift"], p["axis"])), EXACT, _axis_params, True),
    Row("tril", "reduce", (lambda a, p: f"dj.tril({a[0]}, {p['k']})", lambda a, p: f"{a[0]}.tril({p['k']})"),
        "bif", lambda args, p: np.tril(args[0], p["k"]), _torch_call(lambda torch, t, p: torch.tril(t, p["k"])),
        EXACT, _tri_params, True),
    Row("triu", "reduce", (lambda a, p: f"dj.triu({a[0]}, {p['k']})", lambda a, p: f"{a[0]}.triu({p['k']})"),
        "bif", lambda args, p: np.triu(args[0], p["k"]), _torch_call(lambda torch, t, p: torch.triu(t, p["k"])),
        EXACT, _tri_params, True),
]

# -- cat / stack ----------------------------------------------------------------------------------------
def _list_np(stack):
    def run(args, p):
        dt = result_type(*args)
        arrays = [as_dtype(a, dt) for a in args]
        if stack:
            if any(a.shape != arrays[0].shape for a in arrays):
                raise OracleError("stack: shapes")
            return np.stack(arrays, axis=p["axis"])
        arrays = [a for a in arrays if not (a.ndim == 1 and a.size == 0)] or arrays[:1]
        if arrays[0].ndim == 0:
            raise OracleError("cat of 0-d")
        try:
            return np.concatenate(arrays, axis=p["axis"])
        except (ValueError, np.exceptions.AxisError) as e:
            raise OracleError(str(e)) from None
    return run


def _list_params(stack):
    def make(ch, args):
        nd = args[0].ndim + (1 if stack else 0)
        if nd == 0:
            return None
        return {"axis": ch.int(-nd, nd - 1)}
    return make


def _torch_list(name):
    def run(t, p):
        import torch
        return getattr(torch, name)(list(t), dim=p["axis"])
    return run


ROWS += [
    Row("cat", "list", (lambda a, p: f"dj.cat([{', '.join(a)}], axis={p['axis']})",
                        lambda a, p: f"dj.concat([{', '.join(a)}], {p['axis']})"), "bif", _list_np(False),
        _torch_list("cat"), EXACT, _list_params(False), True, (), True, arity=2),
    Row("stack", "list", (lambda a, p: f"dj.stack([{', '.join(a)}], axis={p['axis']})",), "bif", _list_np(True),
        _torch_list("stack"), EXACT, _list_params(True), True, (), True, arity=2),
]


# -- casts ----------------------------------------------------------------------------------------------
_CAST_METHODS = {"float32": "float", "float64": "double", "int64": "long", "int32": "int", "float16": "half",
                 "bool": "bool"}


def _cast_params(ch, args):
    return {"dtype": ch.choice(DTYPES), "m": ch.coin(0.3)}


def _cast_form(a, p):
    if p["m"] and p["dtype"] in _CAST_METHODS:
        return f"{a[0]}.{_CAST_METHODS[p['dtype']]}()"
    return f"{a[0]}.to(dj.{p['dtype']})"


def _cast_np(args, p):
    a = args[0]
    return as_dtype(a, p["dtype"]).copy() if a.dtype != np.dtype(p["dtype"]) else a


ROWS += [
    Row("to", "cast", (_cast_form,), "bif", _cast_np,
        lambda t, p: t[0].to(getattr(__import__("torch"), p["dtype"])), EXACT, _cast_params, True, (), True),
]


# -- in-place ops, setitem, copy_ -------------------------------------------------------------------------
def _inplace_np(base):
    def run(args, p):
        target = args[0]
        fn = next(r for r in ROWS if r.name == base).np
        res = fn(args, p)
        if not can_cast(res.dtype.name, target.dtype.name):
            raise OracleError(f"result type {res.dtype} can't be cast to {target.dtype}")
        if res.shape != target.shape:
            raise OracleError("in-place: broadcast shape != target shape")
        if not target.flags.writeable:
            raise OracleError("in-place into a read-only (expanded) view")
        np.copyto(target, as_dtype(res, target.dtype), casting="unsafe")
        return target
    return run


def _foreach_mul_np(args, p):
    """``_foreach_mul_([t], other)``: ``t.mul_(other)`` for a 0-d tensor ``other`` (PyTorch refuses others)."""
    if not isinstance(args[1], np.ndarray) or args[1].ndim != 0:
        raise OracleError("_foreach_mul_ takes a 0-d tensor factor")
    return _inplace_np("mul")(args, p)


def _inplace(name, base, op=None):
    forms = [lambda a, p, n=name: f"{a[0]}.{n}({a[1]})"]
    if op:
        forms.append(lambda a, p, o=op: f"{a[0]}.__i{o}__({a[1]})")
    return Row(name, "inplace", tuple(forms), "bif", _inplace_np(base), None, EXACT, None, False, arity=2,
               statement=True)


def _setitem_np(args, p):
    """``target[idx] = value`` (and copy_): any cast, as PyTorch's (a float truncates into an integer
    tensor); a Python number the dtype cannot hold, before truncation, is PyTorch's overflow error."""
    target, value = args
    if isinstance(value, (int, float)) and not isinstance(value, bool) and target.dtype.kind in "iu" and not (
            np.iinfo(target.dtype).min <= value <= np.iinfo(target.dtype).max):
        raise OracleError(f"value {value} cannot be converted to {target.dtype} without overflow")
    view = getitem_np(target, p["idx"]) if p["idx"] else target
    v = as_dtype(value, target.dtype)
    try:
        v = np.broadcast_to(v, view.shape)
    except ValueError:
        raise OracleError("setitem: value does not broadcast") from None
    if not view.flags.writeable:
        raise OracleError("setitem into a read-only view")
    view[...] = v
    return target


def _setitem_params(ch, args):
    p = _index_params(ch, args) if ch.coin(0.8) else {"idx": ()}
    return p


ROWS += [
    _inplace("add_", "add", "add"),
    _inplace("sub_", "sub", "sub"),
    _inplace("mul_", "mul", "mul"),
    _inplace("div_", "div", "truediv"),
    _inplace("maximum_", "maximum"),
    _inplace("bitwise_xor_", "bitwise_xor"),
    Row("_foreach_mul_", "inplace", (lambda a, p: f"(dj.ops.aten._foreach_mul_([{a[0]}], {a[1]}), {a[0]})[1]",), "bif",
        lambda args, p: _foreach_mul_np(args, p), None, EXACT, None, False, arity=2, statement=True),
    Row("setitem", "setitem", (lambda a, p: f"{a[0]}[{idx_src(p['idx'])}] = {a[1]}",), "bif", _setitem_np, None,
        EXACT, _setitem_params, False, arity=2, statement=True),
    Row("copy_", "setitem", (lambda a, p: f"{a[0]}.copy_({a[1]})",), "bif",
        lambda args, p: _setitem_np(args, {"idx": ()}), None, EXACT, None, False, arity=2, statement=True),
]

# PyTorch's convenience surface (gather, topk, einsum, ...): its rows live in fuzz_ops_torch.py,
# which imports the helpers above from this (by now defined) module
from fuzz_ops_torch import ROWS as _TORCH_SURFACE_ROWS  # noqa: E402
from fuzz_ops_math import ROWS as _MATH_ROWS  # noqa: E402
from fuzz_ops_reduce import ROWS as _REDUCE_ROWS  # noqa: E402
from fuzz_ops_shape import ROWS as _SHAPE_ROWS  # noqa: E402
from fuzz_ops_elementwise import ROWS as _ELEMENTWISE_ROWS  # noqa: E402

ROWS += _TORCH_SURFACE_ROWS + _MATH_ROWS + _REDUCE_ROWS + _SHAPE_ROWS + _ELEMENTWISE_ROWS
ROW = {r.name: r for r in ROWS}

# What dispatch_jit has that the table leaves out on purpose, and what the brief asked for that it lacks.
NOT_IN_TABLE = {
    "quantized_*, sparse_* (but COO @ dense: sparse_matmul)": "other tensor types (not dense elementwise graphs)",
}
