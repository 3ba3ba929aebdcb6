"""CPU reduction kernels (sum, prod, mean, max, min, argmax, argmin, var, std,
all, any, logsumexp) over NumPy arrays, compiled lazily with Numba.

Ops are data.  Each op is a ``ReductionSpec``: its dtype rules and one or more
*passes*, each a few lines of scalar Python (init, step, merge, post) over
named states.  ``_source`` pastes those snippets into three loop shapes and
``exec`` turns the result into one serial and one parallel kernel per
(op, kernel dtype), so twelve ops share one loop generator, not twelve
hand-written kernels per case:

* mode 0, "inner": for each output element, walk its reduced elements, whose
  innermost run is contiguous; states live in registers and the loop
  vectorizes (float32 sums accumulate in float64 with reassociation allowed).
* mode 1, "chunked" (parallel only): few outputs, many inputs (a full
  reduction): split the reduced run into chunks across threads, keep one
  partial state per chunk, merge the partials in order.
* mode 2, "outer": the kept axis is the contiguous one (``sum(axis=0)`` of a
  C array): rows are read in memory order and accumulated into per-output
  state buffers allocated by the caller.

Every input is described as a 4-D strided view ``(K1, K2, R1, R2)`` of a
1-D contiguous buffer (kept axes K, reduced axes R, element strides); axes
that merge are merged, so any layout that NumPy can express as a 2+2-D view
runs without a copy.  The rule of the project holds: outputs and state
buffers are allocated with NumPy in Python and passed in.

Example:

>>> import numpy as np
>>> f = get_reduction("sum", np.dtype(np.float32))
>>> f(np.ones((2, 3), np.float32), (1,), False)
array([3., 3.], dtype=float32)
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
from typing import Callable

import numba
import numpy as np
from numba import prange, types

try:
    from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
except ImportError:  # the package is mid-construction: load errors.py by path
    import importlib.util as _ilu
    import pathlib as _pl

    _p = _pl.Path(__file__).resolve().parent.parent / "dispatch_jit" / "errors.py"
    _spec = _ilu.spec_from_file_location("_dispatch_jit_errors", _p)
    _errors = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_errors)
    DTypeError, SchemaError, ShapeError = _errors.DTypeError, _errors.SchemaError, _errors.ShapeError

__all__ = ["REDUCTIONS", "ReductionSpec", "Pass", "get_reduction", "result_dtype",
           "compiled_signatures", "warmup", "PARALLEL_THRESHOLD"]

# Above this many input elements the parallel variant runs: below it, waking
# the thread pool costs more than it saves (measured crossover on 2 cores).
PARALLEL_THRESHOLD = 1 << 18
# A chunk of a full reduction is at least this long, so partials stay few.
_MIN_CHUNK = 1 << 15

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


# ---------------------------------------------------------------- the op table

@dataclasses.dataclass(frozen=True)
class Pass:
    """One sweep over the reduced elements.

    states: (name, type rule, initial value) per state; the type rule is
        "acc" (the compute dtype), "real" (its real part), "int64" or "bool".
    step: statement(s) folding element ``x`` (at reduced flat index ``j``)
        into the states, written with ``{name}`` placeholders.
    merge: folds a partial state ``{name_o}`` (a later chunk) into ``{name}``.
    post: statement(s) run on the states once the sweep is over.
    """

    states: tuple[tuple[str, str, str], ...]
    step: str
    merge: str
    post: str = ""


@dataclasses.dataclass(frozen=True)
class ReductionSpec:
    """One reduction, as data.

    kinds: the dtype kinds it accepts ("biufc" subset).
    result: input dtype -> result dtype.
    acc: kernel input dtype -> compute dtype that elements are converted to.
    passes: kernel input dtype -> tuple of ``Pass``.
    final: expression of the states, ``n`` (elements per output) and ``corr``.
    identity: value of an empty reduction; None means it has none (error).
    ordered: the reduced index matters (argmax), so reduced axes keep C order.
    """

    name: str
    kinds: str
    result: Callable[[np.dtype], np.dtype]
    acc: Callable[[np.dtype], np.dtype]
    passes: Callable[[np.dtype], tuple[Pass, ...]]
    final: str
    identity: object = None
    ordered: bool = False
    hint: str = ""


def _fold(op, init):
    return lambda dt: (Pass((("s", "acc", init),), f"{{s}} {op}= x", f"{{s}} {op}= {{s_o}}"),)


def _extreme(cmp, init):
    # NaN propagates: once the state is NaN, `x > NaN` is False and it stays.
    return lambda dt: (Pass(
        (("m", "acc", init),),
        f"if x {cmp} {{m}} or x != x:\n    {{m}} = x",
        f"if {{m_o}} {cmp} {{m}} or {{m_o}} != {{m_o}}:\n    {{m}} = {{m_o}}"),)


def _arg(cmp, init):
    # Strict comparison keeps the first of equal values; the first NaN wins
    # and no later element (not even another NaN) replaces it.
    return lambda dt: (Pass(
        (("m", "acc", init), ("i", "int64", "0")),
        f"if x {cmp} {{m}} or (x != x and {{m}} == {{m}}):\n    {{m}} = x\n    {{i}} = j",
        f"if {{m_o}} {cmp} {{m}} or ({{m_o}} != {{m_o}} and {{m}} == {{m}}):\n"
        f"    {{m}} = {{m_o}}\n    {{i}} = {{i_o}}"),)


def _two_pass_var(dt):
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
                 "if {m} == INF or {m} == -INF:\n    {m} = 0.0"),
            Pass((("s", "acc", "0"),), "{s} += np.exp(x - {m})", "{s} += {s_o}"))


_VAR_HINT = "{name}() needs a floating or complex input; cast with .to(dj.float32)"
_NO_COMPLEX = "{name}() is not defined for complex inputs (complex numbers are not ordered)"

REDUCTIONS: dict[str, ReductionSpec] = {s.name: s for s in [
    ReductionSpec("sum", "biufc", _int64_or_same, _int64_or_same, _fold("+", "0"), "{s}", 0),
    ReductionSpec("prod", "biufc", _int64_or_same, _int64_or_same, _fold("*", "1"), "{s}", 1),
    ReductionSpec("mean", "fc", _same, _wide, _fold("+", "0"), "{s} / n", math.nan, hint=_VAR_HINT),
    ReductionSpec("max", "biuf", _same, _same, _extreme(">", "LOW"), "{m}", hint=_NO_COMPLEX),
    ReductionSpec("min", "biuf", _same, _same, _extreme("<", "HIGH"), "{m}", hint=_NO_COMPLEX),
    ReductionSpec("argmax", "biuf", lambda dt: _I64, _same, _arg(">", "LOW"), "{i}", ordered=True,
                  hint=_NO_COMPLEX),
    ReductionSpec("argmin", "biuf", lambda dt: _I64, _same, _arg("<", "HIGH"), "{i}", ordered=True,
                  hint=_NO_COMPLEX),
    ReductionSpec("var", "fc", _real, _wide, _two_pass_var, "{q} / max(n - corr, 0.0)", math.nan,
                  hint=_VAR_HINT),
    ReductionSpec("std", "fc", _real, _wide, _two_pass_var, "np.sqrt({q} / max(n - corr, 0.0))",
                  math.nan, hint=_VAR_HINT),
    ReductionSpec("all", "biufc", lambda dt: _BOOL, _same,
                  lambda dt: (Pass((("b", "bool", "True"),), "{b} = {b} & (x != 0)", "{b} = {b} & {b_o}"),),
                  "{b}", True),
    ReductionSpec("any", "biufc", lambda dt: _BOOL, _same,
                  lambda dt: (Pass((("b", "bool", "False"),), "{b} = {b} | (x != 0)", "{b} = {b} | {b_o}"),),
                  "{b}", False),
    ReductionSpec("logsumexp", "biufc", _float32_if_int, _wide, _logsumexp, "np.log({s}) + {m}", -math.inf),
]}


def _check_dtype(spec: ReductionSpec, dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in SUPPORTED or dt.kind not in spec.kinds:
        ok = ", ".join(d.name for d in SUPPORTED if d.kind in spec.kinds)
        why = spec.hint.format(name=spec.name) + "; " if spec.hint and dt.kind in "biuc" else ""
        raise DTypeError(f"{spec.name}() does not support dtype {dt.name}: {why}supported dtypes: {ok}")
    return dt


def _spec(name: str) -> ReductionSpec:
    try:
        return REDUCTIONS[name]
    except KeyError:
        raise SchemaError(f"unknown reduction {name!r}; known: {', '.join(REDUCTIONS)}") from None


def result_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype ``name`` returns for ``dtype`` input; raises DTypeError if unsupported.

    >>> result_dtype("sum", np.dtype(np.int8)), result_dtype("var", np.dtype(np.complex64))
    (dtype('int64'), dtype('float32'))
    """
    spec = _spec(name)
    return spec.result(_check_dtype(spec, dtype))


def _kernel_dtype(dt: np.dtype) -> np.dtype:
    """What the kernel reads: bool as its uint8 bytes (a free view), float16 as
    float32 (a copy: Numba's CPU backend has no float16 arithmetic)."""
    return _U8 if dt == _BOOL else _F32 if dt == _F16 else dt


# ---------------------------------------------------------------- code generation

def _indent(code: str, level: int) -> str:
    return textwrap.indent(code, "    " * level)


def _fmt(code: str, names: dict) -> str:
    return code.format(**names)


def _source(spec: ReductionSpec, passes: tuple[Pass, ...], parallel: bool) -> str:
    """Python source of one kernel: the three loop shapes around the op's snippets.

    Index arithmetic is uint64 on purpose (negative strides arrive as their
    two's complement and wrap back): with signed indices Numba emits a
    negative-index fix-up per load and LLVM cannot vectorize; with unsigned
    ones LLVM versions each loop on "stride == 1" and vectorizes that copy.
    ``j`` (the reduced flat index, for argmax) is cast back to int64.
    """
    states = [st for p in passes for st in p.states]
    scratch = "".join(f", sc_{s}" for s, _, _ in states)
    head = (f"def kern(buf, off, K1, K2, R1, R2, sK1, sK2, sR1, sR2, oK1, oK2, mode, n, corr, blk, "
            f"out{scratch}):\n")
    scalar = {s: f"st_{s}" for s, _, _ in states}
    flat = {s: f"sc_{s}[kb + t]" for s, _, _ in states}
    final = _fmt(spec.final, scalar)

    def init(p, nm):
        return "".join(f"{nm[s]} = T_{s}({v})\n" for s, _, v in p.states)

    def run(step, nm, lo, hi, base):
        # one run of the innermost reduced axis, elements [lo, hi)
        return (f"for t in range({lo}, {hi}):\n    x = ACC(buf[{base} + t * sR2])\n"
                f"    j = np.int64(jb + t)\n{_indent(_fmt(step, nm), 1)}\n")

    def inner_row():
        code = ""
        for p in passes:
            code += (init(p, scalar) + "for r1 in range(R1):\n    b = base + r1 * sR1\n    jb = r1 * R2\n"
                     + _indent(run(p.step, scalar, "Z", "R2", "b"), 1) + _fmt(p.post, scalar) + "\n")
        return code + f"out[k1 * oK1 + k2 * oK2] = {final}\n"

    def chunked_row():
        # Reduced elements [lo, hi) of the (R1, R2) space, run by run; blk is
        # the chunk length, chunks go to threads, partials merge in order.
        code = "R = R1 * R2\nnch = np.int64((R + blk - U1) // blk)\n"
        for p in passes:
            local = dict(scalar, **{s: f"c_{s}" for s, _, _ in p.states})
            merged = dict(scalar, **{f"{s}_o": f"p_{s}[c]" for s, _, _ in p.states})
            code += "".join(f"p_{s} = np.empty(nch, T_{s})\n" for s, _, _ in p.states)
            body = ("lo = np.uint64(c) * blk\nhi = min(R, lo + blk)\n" + init(p, local)
                    + "j0 = lo\nwhile j0 < hi:\n    r1 = j0 // R2\n    t0 = j0 - r1 * R2\n"
                    "    t1 = min(R2, t0 + (hi - j0))\n    jb = r1 * R2\n"
                    + _indent(run(p.step, local, "t0", "t1", "base + r1 * sR1"), 1) + "    j0 += t1 - t0\n"
                    + "".join(f"p_{s}[c] = c_{s}\n" for s, _, _ in p.states))
            code += f"for c in prange(nch):\n{_indent(body, 1)}"
            code += init(p, scalar) + f"for c in range(nch):\n{_indent(_fmt(p.merge, merged), 1)}\n"
            code += _fmt(p.post, scalar) + "\n"
        return code + f"out[k1 * oK1 + k2 * oK2] = {final}\n"

    def outer_block():
        # Columns [lo, hi) of kept row k1: for each reduced element, read a
        # run of the kept axis and fold it into the state buffers sc_*.
        code = "kb = k1 * K2\nkbase = off + k1 * sK1\n"
        for p in passes:
            code += f"for t in range(lo, hi):\n{_indent(init(p, flat), 1)}"
        for p in passes:
            code += (f"for r1 in range(R1):\n    for r2 in range(R2):\n        j = np.int64(r1 * R2 + r2)\n"
                     f"        b = kbase + r1 * sR1 + r2 * sR2\n        for t in range(lo, hi):\n"
                     f"            x = ACC(buf[b + t * sK2])\n{_indent(_fmt(p.step, flat), 3)}\n")
            if p.post:
                code += f"for t in range(lo, hi):\n{_indent(_fmt(p.post, flat), 1)}\n"
        return code + (f"for t in range(lo, hi):\n"
                       f"    out[k1 * oK1 + t * oK2] = {_fmt(spec.final, flat)}\n")

    if not parallel:
        body = (f"if mode == 0:\n    for k1 in range(K1):\n        for k2 in range(K2):\n"
                f"            base = off + k1 * sK1 + k2 * sK2\n{_indent(inner_row(), 3)}"
                f"else:\n    lo = Z\n    hi = K2\n    for k1 in range(K1):\n{_indent(outer_block(), 2)}")
    else:
        body = (f"if mode == 0:\n    for q in prange(np.int64(K1 * K2)):\n        k1 = np.uint64(q) // K2\n"
                f"        k2 = np.uint64(q) - k1 * K2\n"
                f"        base = off + k1 * sK1 + k2 * sK2\n{_indent(inner_row(), 2)}"
                f"elif mode == 1:\n    for k1 in range(K1):\n        for k2 in range(K2):\n"
                f"            base = off + k1 * sK1 + k2 * sK2\n{_indent(chunked_row(), 3)}"
                f"else:\n    nb = (K2 + blk - U1) // blk\n    for q in prange(np.int64(K1 * nb)):\n"
                f"        k1 = np.uint64(q) // nb\n        lo = (np.uint64(q) - k1 * nb) * blk\n"
                f"        hi = min(K2, lo + blk)\n{_indent(outer_block(), 2)}")
    return head + _indent(body, 1)


# ---------------------------------------------------------------- lazy compilation

_ENTRY: dict[tuple[str, np.dtype, bool], Callable] = {}   # (op, kernel dtype, parallel) -> overload
_SOURCES: dict[tuple[str, np.dtype, bool], str] = {}     # the generated code, for inspection
_FLAGS = dict(fastmath={"reassoc", "contract"}, error_model="numpy", nogil=True)


def _state_dtypes(spec: ReductionSpec, kin: np.dtype) -> list[tuple[str, np.dtype]]:
    acc = spec.acc(kin)
    rule = {"acc": acc, "real": _real(acc), "int64": _I64, "bool": _BOOL}
    return [(s, rule[r]) for p in spec.passes(kin) for s, r, _ in p.states]


def _kernel(name: str, kin: np.dtype, parallel: bool) -> Callable:
    """The compiled overload for (op, kernel dtype, variant): existing? -> compile.

    Only ``dispatcher.compile(sig)``'s entry point is kept, so a call skips
    Numba's type dispatch.  The buffer is typed readonly: writable arrays
    convert to it, so read-only (broadcast) inputs share the same overload.
    """
    key = (name, kin, parallel)
    ep = _ENTRY.get(key)
    if ep is not None:
        return ep
    spec = REDUCTIONS[name]
    passes, acc, states = spec.passes(kin), spec.acc(kin), _state_dtypes(spec, kin)
    src = _source(spec, passes, parallel)
    # Trim what this op does not use: less IR, faster compiles.
    if acc == kin:
        src = re.sub(r"ACC\((buf\[[^\]]*\])\)", r"\1", src)
    if not any(re.search(r"\bj\b", p.step) for p in passes):
        src = re.sub(r"(?m)^ *(j = np\.int64\(.*\)|jb = r1 \* R2)\n", "", src)
    info = np.finfo(acc) if acc.kind in "fc" else np.iinfo(acc)
    lo, hi = (-math.inf, math.inf) if acc.kind in "fc" else (int(info.min), int(info.max))
    ns = {"np": np, "prange": prange, "Z": np.uint64(0), "U1": np.uint64(1), "ACC": acc.type, "LOW": lo, "HIGH": hi, "INF": math.inf,
          **{f"T_{s}": dt.type for s, dt in states}}
    exec(compile(src, f"<reduction {name} {kin.name}{' parallel' if parallel else ''}>", "exec"), ns)
    disp = numba.njit(parallel=parallel, **_FLAGS)(ns["kern"])
    arr = lambda dt, ro=False: types.Array(numba.from_dtype(dt), 1, "C", readonly=ro)
    i64 = types.int64
    u64 = types.uint64
    sig = types.void(arr(kin, True), *[u64] * 11, i64, i64, types.float64, u64, arr(spec.result(kin)),
                     *[arr(dt) for _, dt in states])
    ep = disp.compile(sig)
    _SOURCES[key] = src
    _ENTRY[key] = ep
    return ep


def compiled_signatures() -> dict[str, list[str]]:
    """What has been compiled so far: op -> ["float32", "float32 parallel", ...].

    Kernels are keyed by the dtype they read: bool inputs run the uint8
    kernel (a view), float16 inputs the float32 one (a copy).
    """
    out: dict[str, list[str]] = {}
    for name, kin, par in _ENTRY:
        out.setdefault(name, []).append(kin.name + (" parallel" if par else ""))
    return out


def warmup(name: str, dtype, parallel: bool = False) -> None:
    """Compile ahead of time what ``get_reduction(name, dtype)`` will run."""
    spec = _spec(name)
    kin = _kernel_dtype(_check_dtype(spec, dtype))
    _kernel(name, kin, False)
    if parallel:
        _kernel(name, kin, True)


# ---------------------------------------------------------------- planning

_MASK = (1 << 64) - 1   # negative strides travel as uint64 two's complement


def _merge(dims: list[tuple]) -> list[tuple]:
    """Merge adjacent (size, *strides) dims that address memory as one dim."""
    out: list[tuple] = []
    for d in dims:
        if out and all(so == d[0] * sd for so, sd in zip(out[-1][1:], d[1:])):
            out[-1] = (out[-1][0] * d[0], *d[1:])
        else:
            out.append(d)
    return out


def _check_axis(axis, nd: int, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(nd))
    if (type(axis) is not tuple or any(type(d) is not int or not 0 <= d < nd for d in axis)
            or len(set(axis)) != len(axis)):
        raise ShapeError(f"{name}(): axis must be None or a tuple of distinct ints in [0, {nd}) "
                         f"(already normalized), got {axis!r} for a {nd}-d input")
    return axis


def _plan(a: np.ndarray, axes: tuple[int, ...], ordered: bool):
    """Describe the reduction of ``a`` over ``axes`` as a (K1, K2, R1, R2) view.

    Returns (buf, off, K1, K2, R1, R2, sK1, sK2, sR1, sR2, oK1, oK2, mode)
    with element strides into the 1-D contiguous ``buf``.  Kept dims are
    ordered by input stride (writes go through output strides oK*), reduced
    dims too unless ``ordered`` (argmax's index is the C-order flat index).
    """
    shape, isz = a.shape, a.itemsize
    if any(s % isz for s in a.strides):
        a = a.copy()  # strides that are not whole elements: cannot index a flat buffer
    st = [s // isz for s in a.strides]
    kept = [d for d in range(a.ndim) if d not in axes]
    ostr, acc = {}, 1
    for d in reversed(kept):
        ostr[d] = acc
        acc *= shape[d]
    kd = sorted(((shape[d], st[d], ostr[d]) for d in kept if shape[d] > 1), key=lambda t: -abs(t[1]))
    rd = [(shape[d], st[d]) for d in sorted(axes) if shape[d] > 1]
    if not ordered:
        rd.sort(key=lambda t: -abs(t[1]))
    kd, rd = _merge(kd), _merge(rd)
    if len(kd) > 2 or len(rd) > 2:
        # Three or more kept (or reduced) runs that no stride order merges,
        # e.g. a[::2, ::3, ::2] summed over axis 1: the 2+2-D kernel cannot
        # address it, so copy once, reduced axes last, and reduce a 2-D array.
        perm = kept + sorted(axes)
        kn = math.prod(shape[d] for d in kept)
        b = np.ascontiguousarray(a.transpose(perm)).reshape(-1)
        rn = b.size // kn
        return b, 0, 1, kn, 1, rn, 0, rn, 0, 1, 0, 1, (0 if rn > 1 or kn == 1 else 2)
    (K1, sK1, oK1), (K2, sK2, oK2) = ([(1, 0, 0)] * 2 + kd)[-2:]
    (R1, sR1), (R2, sR2) = ([(1, 0)] * 2 + rd)[-2:]
    kin = abs(sK2) if K2 > 1 else math.inf
    rin = abs(sR2) if R2 > 1 else math.inf
    mode = 0 if rin <= kin else 2
    if a.flags.c_contiguous:
        buf, off = a.reshape(-1), 0
    elif a.flags.f_contiguous:
        buf, off = a.reshape(-1, order="F"), 0
    else:
        # A 1-D contiguous view over the whole span the strided view touches,
        # starting at its lowest address: no copy, and the kernel's inner
        # loops see unit-stride memory whenever the innermost stride is 1.
        off = sum((n - 1) * -s for n, s in zip(shape, st) if s < 0)
        span = sum((n - 1) * abs(s) for n, s in zip(shape, st)) + 1
        low = a[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in st)]
        buf = np.lib.stride_tricks.as_strided(low, (span,), (isz,))
    return buf, off, K1, K2, R1, R2, sK1 & _MASK, sK2 & _MASK, sR1 & _MASK, sR2 & _MASK, oK1, oK2, mode


# ---------------------------------------------------------------- the callable

def _empty_result(spec, a, axes, out_shape, rdt, R):
    if R == 0 and spec.identity is None:
        raise ShapeError(
            f"{spec.name}(): cannot reduce over a zero-size axis (axes {axes} of shape {a.shape}) "
            f"because it has no identity; pass a non-empty input, or reduce only over non-empty axes")
    return np.full(out_shape, spec.identity if R == 0 else 0, rdt)


_CALLABLES: dict[tuple[str, np.dtype], Callable] = {}


def get_reduction(name: str, dtype: np.dtype) -> Callable:
    """A reduction specialized to one input dtype.

    The callable is ``f(a, axis, keepdims, **static) -> np.ndarray`` where
    ``axis`` is None (all axes) or a tuple of normalized axes (``()``: no
    reduction), and the only static is ``correction`` (var/std, default 0).
    Kernels compile on first use (serial first; parallel on the first input
    of ``PARALLEL_THRESHOLD`` elements or more) and are shared by all callers.

    >>> f = get_reduction("argmax", np.dtype(np.float64))
    >>> f(np.array([[1.0, 5.0, 5.0], [np.nan, 0.0, np.nan]]), (1,), True)
    array([[1],
           [0]])
    """
    spec = _spec(name)
    dt = _check_dtype(spec, dtype)
    key = (name, dt)
    fn = _CALLABLES.get(key)
    if fn is not None:
        return fn
    kin = _kernel_dtype(dt)
    rdt, kout = spec.result(dt), spec.result(kin)
    conv_in = (lambda a: a.view(_U8)) if dt == _BOOL else (lambda a: a.astype(_F32)) if dt == _F16 else None
    conv_out = None if rdt == kout else (lambda r: r.view(rdt)) if rdt == _BOOL else (lambda r: r.astype(rdt))
    sdts = [sdt for _, sdt in _state_dtypes(spec, kin)]
    nostate = tuple(np.empty(0, sdt) for sdt in sdts)
    ordered, ident = spec.ordered, spec.identity
    takes_corr = name in ("var", "std")
    cell = [None, None]   # serial and parallel overloads, compiled on first need

    def reduce(a, axis=None, keepdims=False, **static):
        if a.dtype != dt:
            raise DTypeError(f"{name}() kernel for {dt.name} got a {a.dtype.name} array")
        corr = 0.0
        if static:
            corr = float(static.pop("correction", 0)) if takes_corr else 0.0
            if static:
                raise SchemaError(f"{name}() got unexpected static argument(s) {sorted(static)}")
        nd = a.ndim
        if axis is None and not keepdims and a.flags.c_contiguous and a.size:
            # full reduction of a contiguous array: the common case, planned inline
            src = a if conv_in is None else conv_in(a)
            R = a.size
            p = (src.reshape(-1), 0, 1, 1, 1, R, 0, 0, 0, 1, 0, 0, 0)
            out_shape = ()
            K = 1
        else:
            axes = _check_axis(axis, nd, name)
            shp = a.shape
            out_shape = tuple(1 if d in axes else shp[d] for d in range(nd)) if keepdims else \
                tuple(shp[d] for d in range(nd) if d not in axes)
            R = math.prod(shp[d] for d in axes)
            K = a.size // R if R else math.prod(out_shape)
            if R == 0 or K == 0:
                return _empty_result(spec, a, axes, out_shape, rdt, R)
            src = a if conv_in is None else conv_in(a)
            p = _plan(src, axes, ordered)
        out = np.empty(K, kout)
        if p[12] == 2:
            scratch = tuple(np.empty(K, sdt) for sdt in sdts)
        else:
            scratch = nostate
        if K * R < PARALLEL_THRESHOLD:
            ep = cell[0]
            if ep is None:
                ep = cell[0] = _kernel(name, kin, False)
            ep(*p, R, corr, 1, out, *scratch)
        else:
            ep = cell[1]
            if ep is None:
                ep = cell[1] = _kernel(name, kin, True)
            mode, blk = _parallel_mode(p)
            ep(*p[:12], mode, R, corr, blk, out, *scratch)
        out = out.reshape(out_shape)
        return out if conv_out is None else conv_out(out)

    reduce.__name__ = reduce.__qualname__ = f"{name}_{dt.name}"
    reduce.__doc__ = f"{name} over a {dt.name} array -> {rdt.name} (see get_reduction)."
    _CALLABLES[key] = reduce
    return reduce


def _parallel_mode(p) -> tuple[int, int]:
    """Pick the parallel loop shape and its block: (mode, blk)."""
    K1, K2, R1, R2, mode = p[2], p[3], p[4], p[5], p[12]
    nt = numba.get_num_threads()
    pieces = 4 * nt
    if mode == 0:
        if K1 * K2 >= pieces:
            return 0, 1                               # one output per iteration
        R = R1 * R2
        nch = min(pieces, -(-R // _MIN_CHUNK))
        if nch < 2:
            return 0, 1
        return 1, -(-R // nch)                        # chunk length: chunks of the reduced run
    nb = max(1, min(-(-pieces // K1), -(-K2 // 64)))
    return 2, -(-K2 // nb)                            # column blocks of the kept run
