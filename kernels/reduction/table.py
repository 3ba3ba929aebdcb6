"""The reduction op table: each reduction as data (dtype rules and scalar passes).

sum, prod, mean, max, min, argmax, argmin, var, std, all, any, logsumexp.
Each op is a ``ReductionSpec`` in ``REDUCTIONS``: its dtype rules (as PyTorch
and the array API, see ``result_dtype``) and one or more ``Pass``es, each a
few lines of scalar Python (init, step, merge, post) over named states.
mean, std and all are derived: they run sum's, var's and any's kernels.
codegen.py pastes the snippets into loop shapes (CPU);
cuda.py into block reductions (CUDA); the compiled mode's fused
epilogues read the same table.

>>> import numpy as np
>>> result_dtype("sum", np.dtype(np.int8)), result_dtype("var", np.dtype(np.complex64))
(dtype('int64'), dtype('float32'))
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from dispatch_jit.dtypes import BF16_STORAGE
from dispatch_jit.errors import DTypeError, SchemaError

__all__ = ["REDUCTIONS", "ReductionSpec", "Pass", "SUPPORTED", "result_dtype", "kernel_dtype", "state_dtypes",
           "check_dtype", "spec_of"]

SUPPORTED = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_I64, _U64, _BOOL, _U8 = np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.bool_), np.dtype(np.uint8)
_C128 = np.dtype(np.complex128)


# ---------------------------------------------------------------- dtype rules
# Kinds: b bool, i signed, u unsigned, f floating, c complex (NumPy's dtype.kind).

def _same(dt):
    return dt


def _int64_or_same(dt):
    """sum/prod: bool and ints widen to int64 (uint64 stays), floats and complex stay."""
    if dt.kind in "bi" or (dt.kind == "u" and dt != _U64):
        return _I64
    return dt


def _real(dt):
    """var/std of complex is real; of real, unchanged."""
    return np.dtype(dt.type(0).real.dtype) if dt.kind == "c" else dt


def _float32_if_int(dt):
    """logsumexp promotes bool and ints to the default float dtype, as PyTorch."""
    return _F32 if dt.kind in "biu" else dt


def _wide(dt):
    """Accumulator: float64 for real floats and ints-to-float, complex128 for complex."""
    return _C128 if dt.kind == "c" else _F64


def _acc_fold(dt):
    """sum/prod accumulate ints in int64 (uint64), floats in float64, complex in complex128."""
    return _int64_or_same(dt) if dt.kind in "biu" else _wide(dt)


# ---------------------------------------------------------------- the op table

@dataclasses.dataclass(frozen=True)
class Pass:
    """One sweep over the reduced elements.

    states: (name, type rule, initial value) per state; the type rule is
        "acc" (the compute dtype), "real" (its real part), "int64" or "bool".
    step: statement(s) folding element ``x`` (at reduced flat index ``j``)
        into the states, written with ``{name}`` placeholders.
    merge: folds another partial state ``{name_o}`` into ``{name}``; it must
        not depend on which partial came first (chunks and lanes both merge).
    post: statement(s) run on the states once the sweep is over.
    lanes: the step is a compare-and-select that LLVM cannot vectorize as a
        reduction (NaN-propagating max needs no-NaN fast-math); contiguous
        runs then fold into ``_LANES`` independent lane states instead.
    """

    states: tuple[tuple[str, str, str], ...]
    step: str
    merge: str
    post: str = ""
    lanes: bool = False


@dataclasses.dataclass(frozen=True)
class ReductionSpec:
    """One reduction, as data.

    kinds: the dtype kinds it accepts ("biufc" subset).
    result: input dtype -> result dtype.
    acc: kernel input dtype -> compute dtype that elements are converted to.
    passes: kernel input dtype -> tuple of ``Pass``.
    final: expression of the states, ``n`` (elements per output) and ``arg``.
    identity: value of an empty reduction; None means it has none (error).
    ordered: the reduced index matters (argmax), so reduced axes keep C order.
    hint: why a dtype kind is refused, for the error message.
    int_cast: bool and int inputs are cast to this dtype first (PyTorch's
        logsumexp does exactly that), so they share its kernel.
    kernel: a derived op runs this op's kernels (no compile of its own) with
        ``arg`` and then ``post(out, n)`` in place: mean = sum / n,
        std = sqrt(var), all = any with its test inverted.
    arg: the kernel's runtime scalar, unless the static ``static_arg`` is given.
    """

    name: str
    kinds: str
    result: Callable[[np.dtype], np.dtype]
    acc: Callable[[np.dtype], np.dtype] | None = None
    passes: Callable[[np.dtype], tuple[Pass, ...]] | None = None
    final: str = ""
    identity: object = None
    ordered: bool = False
    hint: str = ""
    int_cast: np.dtype | None = None
    kernel: str | None = None
    arg: float = 0.0
    static_arg: str = ""
    post: Callable[[np.ndarray, int], object] | None = None


def _fold(op, init):
    return lambda dt: (Pass((("s", "acc", init),), f"{{s}} {op}= x", f"{{s}} {op}= {{s_o}}"),)


def _bool_or_u8(dt):
    # PyTorch's legacy rule: all/any of uint8 are uint8 (0 or 1); of any other dtype, bool
    return _U8 if dt == _U8 else _BOOL


def _any(dt):
    # any(x) = OR(x != 0); all(x) = not OR(x == 0): the same kernel with
    # inv = (arg != 0) flipping both the test and the result.
    return (Pass((("b", "bool", "False"),), "{b} = {b} | ((x != 0) != inv)", "{b} = {b} | {b_o}"),)


def _extreme(cmp, init):
    # NaN propagates: a NaN element is taken, and once the state is NaN no
    # comparison with it is true, so it stays.
    return lambda dt: (Pass(
        (("m", "acc", init),),
        f"if x {cmp} {{m}} or x != x:\n    {{m}} = x",
        f"if {{m_o}} {cmp} {{m}} or {{m_o}} != {{m_o}}:\n    {{m}} = {{m_o}}", lanes=True),)


def _arg(cmp, init):
    # In index order, a strict comparison keeps the first of equal values and
    # the first NaN (no later element replaces a NaN).  The merge compares
    # indices, so partials may merge in any order.  Branches, not selects:
    # in the scalar loops they predict well (a running max rarely changes),
    # and LLVM still if-converts them in the lane and column loops.
    return lambda dt: (Pass(
        (("m", "acc", init), ("i", "int64", "0")),
        f"if x {cmp} {{m}} or (x != x and {{m}} == {{m}}):\n    {{m}} = x\n    {{i}} = j",
        f"if ({{m_o}} {cmp} {{m}} or ({{m_o}} == {{m}} and {{i_o}} < {{i}})\n"
        f"        or ({{m_o}} != {{m_o}} and ({{m}} == {{m}} or {{i_o}} < {{i}}))):\n"
        f"    {{m}} = {{m_o}}\n    {{i}} = {{i_o}}", lanes=True),)


def _two_pass_var(dt):
    # mean first, then the sum of squared deviations from it: no catastrophic
    # cancellation, unlike E[x^2] - E[x]^2; both passes accumulate in float64.
    sq = "d.real * d.real + d.imag * d.imag" if dt.kind == "c" else "d * d"
    return (Pass((("s", "acc", "0"),), "{s} += x", "{s} += {s_o}", "{s} = {s} / n"),
            Pass((("q", "real", "0"),), f"d = x - {{s}}\n{{q}} += {sq}", "{q} += {q_o}"))


def _logsumexp(dt):
    # Shift by the (real) maximum; an infinite maximum shifts by 0 instead,
    # as PyTorch does, so all -inf gives -inf and any +inf gives +inf.
    xr = "x.real" if dt.kind == "c" else "x"
    return (Pass((("m", "real", "-INF"),),
                 f"xr = {xr}\nif xr > {{m}} or xr != xr:\n    {{m}} = xr",
                 "if {m_o} > {m} or {m_o} != {m_o}:\n    {m} = {m_o}",
                 "if {m} == INF or {m} == -INF:\n    {m} = 0.0", lanes=True),
            Pass((("s", "acc", "0"),), f"{{s}} += {'np.exp' if dt.kind == 'c' else 'EXP'}(x - {{m}})",
                 "{s} += {s_o}"))


_VAR_HINT = "{name}() needs a floating or complex input; cast with .to(dj.float32)"
_NO_COMPLEX = "{name}() is not defined for complex inputs (complex numbers are not ordered)"
_DIVISOR = "max(n - arg, 0.0)"   # as NumPy's ddof and PyTorch's correction: n - c <= 0 gives inf/nan

REDUCTIONS: dict[str, ReductionSpec] = {s.name: s for s in [
    ReductionSpec("sum", "biufc", _int64_or_same, _acc_fold, _fold("+", "0"), "{s}", 0),
    ReductionSpec("prod", "biufc", _int64_or_same, _acc_fold, _fold("*", "1"), "{s}", 1),
    ReductionSpec("mean", "fc", _same, identity=math.nan, hint=_VAR_HINT, kernel="sum",
                  post=lambda out, n: np.divide(out, n, out=out)),
    ReductionSpec("max", "biuf", _same, _same, _extreme(">", "LOW"), "{m}", hint=_NO_COMPLEX),
    ReductionSpec("min", "biuf", _same, _same, _extreme("<", "HIGH"), "{m}", hint=_NO_COMPLEX),
    ReductionSpec("argmax", "biuf", lambda dt: _I64, _same, _arg(">", "LOW"), "{i}", ordered=True,
                  hint=_NO_COMPLEX),
    ReductionSpec("argmin", "biuf", lambda dt: _I64, _same, _arg("<", "HIGH"), "{i}", ordered=True,
                  hint=_NO_COMPLEX),
    ReductionSpec("var", "fc", _real, _wide, _two_pass_var, f"{{q}} / {_DIVISOR}", math.nan, hint=_VAR_HINT,
                  static_arg="correction"),
    ReductionSpec("std", "fc", _real, identity=math.nan, hint=_VAR_HINT, kernel="var", static_arg="correction",
                  post=lambda out, n: np.sqrt(out, out=out)),
    ReductionSpec("any", "biufc", _bool_or_u8, _same, _any, "{b} != inv", False),
    ReductionSpec("all", "biufc", _bool_or_u8, identity=True, kernel="any", arg=1.0),
    ReductionSpec("logsumexp", "biufc", _float32_if_int, _wide, _logsumexp, "np.log({s}) + {m}", -math.inf,
                  int_cast=_F32),
]}


def check_dtype(spec: ReductionSpec, dtype) -> np.dtype:
    try:
        dt = np.dtype(getattr(dtype, "np", dtype))   # a NumPy dtype, or a dispatch_jit DType
    except TypeError:
        raise DTypeError(f"{spec.name}(): {dtype!r} is not a dtype") from None
    if dt not in SUPPORTED or dt.kind not in spec.kinds:
        ok = ", ".join(d.name for d in SUPPORTED if d.kind in spec.kinds)
        why = spec.hint.format(name=spec.name) + "; " if spec.hint and dt.kind in "biuc" else ""
        raise DTypeError(f"{spec.name}() does not support dtype {dt.name}: {why}supported dtypes: {ok}")
    return dt


def spec_of(name: str) -> ReductionSpec:
    try:
        return REDUCTIONS[name]
    except KeyError:
        raise SchemaError(f"unknown reduction {name!r}; known: {', '.join(REDUCTIONS)}") from None


def result_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype ``name`` returns for ``dtype`` input; raises DTypeError if unsupported.

    >>> result_dtype("sum", np.dtype(np.int8)), result_dtype("var", np.dtype(np.complex64))
    (dtype('int64'), dtype('float32'))
    """
    spec = spec_of(name)
    if np.dtype(getattr(dtype, "np", dtype)) == BF16_STORAGE:
        # bfloat16 reduces as float32 (cpu.py widens it): a float32 result is rounded back
        r = spec.result(check_dtype(spec, _F32))
        return BF16_STORAGE if r == _F32 else r
    return spec.result(check_dtype(spec, dtype))


def kernel_dtype(spec: ReductionSpec, dt: np.dtype) -> np.dtype:
    """What the kernel reads: bool as its uint8 bytes (a free view), float16 as
    float32 (a copy: Numba's CPU backend has no float16 arithmetic), ints as
    ``spec.int_cast`` where the op casts them first (a copy)."""
    if spec.int_cast is not None and dt.kind in "biu":
        return spec.int_cast
    return _U8 if dt == _BOOL else _F32 if dt == _F16 else dt



def state_dtypes(spec: ReductionSpec, kin: np.dtype) -> list[tuple[str, np.dtype]]:
    """(state name, dtype) over all of ``spec``'s passes, for kernel input dtype ``kin``."""
    acc = spec.acc(kin)
    rule = {"acc": acc, "real": _real(acc), "int64": _I64, "bool": _BOOL}
    return [(s, rule[r]) for p in spec.passes(kin) for s, r, _ in p.states]
