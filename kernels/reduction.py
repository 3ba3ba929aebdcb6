"""CPU reduction kernels over NumPy arrays, compiled lazily with Numba.

sum, prod, mean, max, min, argmax, argmin, var, std, all, any, logsumexp;
dtype rules as PyTorch and the array API (see ``result_dtype``).

Ops are data.  Each op is a ``ReductionSpec`` in ``REDUCTIONS``: its dtype
rules and one or more ``Pass``es, each a few lines of scalar Python (init,
step, merge, post) over named states.  ``_source`` pastes the snippets into
a few loop shapes and ``exec`` + ``numba.njit`` compile them, once per
(op, kernel dtype, variant), on first use.  mean, std and all are derived:
they run sum's, var's and any's kernels.  The loop shapes:

* rows ("inner", mode 0): per output, walk its reduced elements, whose
  innermost run is contiguous or strided; states live in registers and the
  loop vectorizes (float32 sums accumulate in float64, reassociation allowed).
* columns ("outer", mode 2): the kept axis is the contiguous one
  (``sum(axis=0)`` of a C array): read 16 reduced rows at a time in memory
  order, fold them into per-output state buffers that Python allocated.
* lanes: max/argmax-like steps (compare-and-select with NaN propagation) do
  not vectorize as reductions, so long contiguous runs fold into 32
  independent lane states, merged at the end.
* parallel (prange): rows split across threads, one long run split into
  chunks with per-chunk partial states, or column blocks; used above
  ``PARALLEL_THRESHOLD`` elements where a one-time probe finds that two
  threads really run at once (see ``_threads_run_in_parallel``).

Every input is planned as a 4-D strided view ``(K1, K2, R1, R2)`` of one
1-D contiguous buffer (kept dims K, reduced dims R, element strides), dims
that address memory as one merged; so transposed, sliced, negative-stride
and broadcast inputs run without a copy unless more than two runs of kept
(or reduced) dims are left.  Plans are memoized per (shape, strides, axis,
keepdims).  As the project's rule says, outputs and state buffers are
allocated with NumPy in Python and passed in.

>>> import numpy as np
>>> f = get_reduction("sum", np.dtype(np.float32))
>>> f(np.ones((2, 3), np.float32), (1,), False)
array([3., 3.], dtype=float32)
>>> get_reduction("max", np.dtype(np.int8))(np.array([[1, 9], [4, 2]], np.int8), (0,), True)
array([[4, 9]], dtype=int8)
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
import time
from typing import Callable

import llvmlite.ir
import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic

try:
    from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
except Exception:  # the package is mid-construction (any error importing it): load errors.py by path
    import importlib.util as _ilu
    import pathlib as _pl

    _p = _pl.Path(__file__).resolve().parent.parent / "dispatch_jit" / "errors.py"
    _spec = _ilu.spec_from_file_location("_dispatch_jit_errors", _p)
    _errors = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_errors)
    DTypeError, SchemaError, ShapeError = _errors.DTypeError, _errors.SchemaError, _errors.ShapeError

__all__ = ["REDUCTIONS", "ReductionSpec", "Pass", "get_reduction", "result_dtype",
           "compiled_signatures", "warmup", "PARALLEL_THRESHOLD", "PARALLEL"]

# From this many input elements on, a parallel variant may run (where threads
# pay, see _use_parallel): 4 MB of float32 take ~100 us on one core, waking
# the thread pool ~10-20 us; below that the serial kernel wins.
PARALLEL_THRESHOLD = 1 << 20
# None: use threads above the threshold if a one-time probe finds that two
# threads really run at once here; True/False: force (tests, benchmarks).
PARALLEL: bool | None = None
# A chunk of a full reduction is at least this long, so partials stay few.
_MIN_CHUNK = 1 << 16

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


# exp as plain arithmetic: the PyPI llvmlite has no SVML, so np.exp in a loop
# is a scalar libm call (~2.4 ns per element, 4x NumPy's logsumexp); range
# reduction + polynomial + a bit-built 2**k vectorize like any other loop.

@intrinsic
def _as_float64(typingctx, bits):
    """Reinterpret int64 bits as a float64 (an LLVM bitcast)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvmlite.ir.DoubleType())
    return types.float64(types.int64), codegen


def _make_exp(degree: int):
    coeffs = tuple(1.0 / math.factorial(i) for i in range(degree, -1, -1))

    @numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy")
    def exp(y):
        ys = (-708.0 if y < -708.0 else 709.79 if y > 709.79 else y) if y == y else 0.0
        k = np.floor(ys * 1.4426950408889634 + 0.5)
        # Cody-Waite reduction: ln2_hi has 21 trailing zero bits, so k * ln2_hi is exact
        r = (ys - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
        p = 0.0
        for c in coeffs:                                       # Taylor on |r| <= ln2 / 2, Horner
            p = p * r + c
        e = p * _as_float64((np.int64(k) + 1022) << 52) * 2.0   # 2**(k-1) * 2: k = 1024 still representable
        e = np.inf if y > 709.782712893384 else e
        e = 0.0 if y < -708.0 else e
        return e if y == y else y

    exp.__doc__ = f"exp(y) of a float64 by a degree-{degree} polynomial; below exp(-708) flushes to 0."
    return exp


# float64 results: degree 13, within 1.5 ulp (measured); float32 results:
# degree 8, relative error < 2e-10, far below a float32 ulp, and 2x faster.
_exp, _exp_f32 = _make_exp(13), _make_exp(8)


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
    ReductionSpec("any", "biufc", lambda dt: _BOOL, _same, _any, "{b} != inv", False),
    ReductionSpec("all", "biufc", lambda dt: _BOOL, identity=True, kernel="any", arg=1.0),
    ReductionSpec("logsumexp", "biufc", _float32_if_int, _wide, _logsumexp, "np.log({s}) + {m}", -math.inf,
                  int_cast=_F32),
]}


def _check_dtype(spec: ReductionSpec, dtype) -> np.dtype:
    try:
        dt = np.dtype(getattr(dtype, "np", dtype))   # a NumPy dtype, or a dispatch_jit DType
    except TypeError:
        raise DTypeError(f"{spec.name}(): {dtype!r} is not a dtype") from None
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


def _kernel_dtype(spec: ReductionSpec, dt: np.dtype) -> np.dtype:
    """What the kernel reads: bool as its uint8 bytes (a free view), float16 as
    float32 (a copy: Numba's CPU backend has no float16 arithmetic), ints as
    ``spec.int_cast`` where the op casts them first (a copy)."""
    if spec.int_cast is not None and dt.kind in "biu":
        return spec.int_cast
    return _U8 if dt == _BOOL else _F32 if dt == _F16 else dt


# ---------------------------------------------------------------- code generation
#
# Every kernel has one signature:
#   kern(buf, off, K1, K2, R1, R2, sK1, sK2, sR1, sR2, oK1, oK2, mode, n, arg, blk, out, *scratch)
# buf: 1-D contiguous (read-only) buffer; off and the s* strides: elements
# into it; K* kept sizes, R* reduced sizes; oK*: output strides; n = R1 * R2;
# arg: the op's runtime scalar (var's correction, any/all's inversion);
# blk: rows per block / chunk length / columns per block (parallel variants);
# scratch: one K1 * K2 buffer per state (outer mode only).
#
# Index arithmetic is uint64 on purpose (negative strides arrive as their
# two's complement and wrap back): with signed indices Numba emits a
# negative-index fix-up per load and LLVM cannot vectorize; with unsigned
# ones LLVM versions each loop on "stride == 1" and vectorizes that copy.
# The reduced flat index ``j`` (argmax) is cast back to int64.

# serial: modes 0 and 2, scalar rows; lanes: mode 0 with lane blocks (long
# contiguous rows of a lanes op, compiled only when one shows up); rows,
# chunks, cols: the parallel shapes (lanes included).
_VARIANTS = ("serial", "lanes", "rows", "chunks", "cols")
_LANE_MIN = 2048   # a contiguous run at least this long takes the lanes kernel
_LANES = 32    # lane states per contiguous run, for ``Pass.lanes`` steps
_GROUP = 16    # reduced rows folded per load/store of the outer mode's states
_LANE_GROUP = 8   # rows of a lane block: blocks are _LANES * _LANE_GROUP elements


def _indent(code: str, level: int) -> str:
    return textwrap.indent(code, "    " * level)


def _names(states, fmt: str) -> dict:
    return {s: fmt.format(s) for s, _, _ in states}


def _source(spec: ReductionSpec, passes: tuple[Pass, ...], variant: str) -> str:
    """Python source of one kernel variant: the loop shapes around the op's snippets."""
    if variant == "serial":
        passes = tuple(dataclasses.replace(p, lanes=False) for p in passes)
    states = [st for p in passes for st in p.states]
    scalar = _names(states, "st_{}")

    def init(p, nm):
        return "".join(f"{nm[s]} = T_{s}({v})\n" for s, _, v in p.states)

    def lanes_alloc():
        return "".join(f"ln_{s} = np.empty(W, T_{s})\n" for p in passes if p.lanes for s, _, _ in p.states)

    def run(p, nm, t0, t1, rb, jb):
        # elements [t0, t1) of one run of the innermost reduced axis, at row base rb
        tail = (f"for t in range(ta, {t1}):\n    x = ACC(buf[{rb} + t * sR2])\n    j = np.int64({jb} + t)\n"
                f"{_indent(p.step.format(**nm), 1)}\n")
        if not p.lanes:
            return f"ta = {t0}\n" + tail
        # Blocks of W * LG elements as an (LG, W) matrix: lane w folds column
        # w, LG rows per load/store of its state, as the outer mode does.
        lane = dict(nm, **_names(p.states, "l_{}"))
        load = "".join(f"l_{s} = ln_{s}[w]\n" for s, _, _ in p.states)
        store = "".join(f"ln_{s}[w] = l_{s}\n" for s, _, _ in p.states)
        return (f"ta = {t0}\nif sR2 == U1:\n    nl = ({t1} - {t0}) // WG\n    for g in range(nl):\n"
                f"        gb = {rb} + {t0} + g * WG\n        jg = {jb} + {t0} + g * WG\n"
                f"        for w in range(W):\n{_indent(load, 3)}            for gq in range(LG):\n"
                f"                x = ACC(buf[gb + gq * W + w])\n                j = np.int64(jg + gq * W + w)\n"
                f"{_indent(p.step.format(**lane), 4)}\n{_indent(store, 3)}    ta = {t0} + nl * WG\n" + tail)

    def lanes_open(p, nm):
        return f"for w in range(W):\n{_indent(init(p, _names(p.states, 'ln_{}[w]')), 1)}" if p.lanes else ""

    def lanes_close(p, nm):
        if not p.lanes:
            return ""
        merged = dict(nm, **{f"{s}_o": f"ln_{s}[w]" for s, _, _ in p.states})
        return f"for w in range(W):\n{_indent(p.merge.format(**merged), 1)}\n"

    def row():
        # one output element at `base`: every pass over all R1 * R2 elements
        code = ""
        for p in passes:
            code += (init(p, scalar) + lanes_open(p, scalar) + "for r1 in range(R1):\n    b = base + r1 * sR1\n"
                     "    jb = r1 * R2\n" + _indent(run(p, scalar, "Z", "R2", "b", "jb"), 1)
                     + lanes_close(p, scalar) + p.post.format(**scalar) + "\n")
        return code + f"out[k1 * oK1 + k2 * oK2] = {spec.final.format(**scalar)}\n"

    def chunked_row():
        # one output element, its reduced elements split into chunks of blk
        # across threads: a chunk walks [lo, hi) run by run; partials merge.
        code = "nch = np.int64((n_u + blk - U1) // blk)\n"
        for p in passes:
            local = dict(scalar, **_names(p.states, "c_{}"))
            merged = dict(scalar, **{f"{s}_o": f"p_{s}[c]" for s, _, _ in p.states})
            body = (lanes_alloc() + "lo = np.uint64(c) * blk\nhi = min(n_u, lo + blk)\n" + init(p, local)
                    + lanes_open(p, local) + "j0 = lo\nwhile j0 < hi:\n    r1 = j0 // R2\n    t0 = j0 - r1 * R2\n"
                    "    t1 = min(R2, t0 + (hi - j0))\n    jb = r1 * R2\n"
                    + _indent(run(p, local, "t0", "t1", "base + r1 * sR1", "jb"), 1) + "    j0 += t1 - t0\n"
                    + lanes_close(p, local) + "".join(f"p_{s}[c] = c_{s}\n" for s, _, _ in p.states))
            code += "".join(f"p_{s} = np.empty(nch, T_{s})\n" for s, _, _ in p.states)
            code += f"for c in prange(nch):\n{_indent(body, 1)}"
            code += init(p, scalar) + f"for c in range(nch):\n{_indent(p.merge.format(**merged), 1)}\n"
            code += p.post.format(**scalar) + "\n"
        return code + f"out[k1 * oK1 + k2 * oK2] = {spec.final.format(**scalar)}\n"

    def cols():
        # Columns [lo, hi) of kept row k1, the kept axis being the contiguous
        # one: read _GROUP reduced rows at a time in memory order and fold them
        # into the per-column states sc_*, loaded once per group.
        flat = _names(states, "sc_{}[kb + t]")
        code = "kb = k1 * K2\nkbase = off + k1 * sK1\n"
        for p in passes:
            used = [s for s, _, _ in states if "{" + s + "}" in p.step]
            local = dict(flat, **{s: f"l_{s}" for s in used})
            loads = "".join(f"l_{s} = sc_{s}[kb + t]\n" for s in used)
            stores = "".join(f"sc_{s}[kb + t] = l_{s}\n" for s, _, _ in p.states)
            group = (f"for t in range(lo, hi):\n{_indent(loads, 1)}    for gq in range(G):\n"
                     f"        x = ACC(buf[b + gq * sR2 + t * sK2])\n        j = np.int64(jb + r2 + gq)\n"
                     f"{_indent(p.step.format(**local), 2)}\n{_indent(stores, 1)}")
            single = (f"for t in range(lo, hi):\n    x = ACC(buf[b + t * sK2])\n    j = np.int64(jb + r2)\n"
                      f"{_indent(p.step.format(**flat), 1)}\n")
            code += (f"for t in range(lo, hi):\n{_indent(init(p, flat), 1)}"
                     f"for r1 in range(R1):\n    b1 = kbase + r1 * sR1\n    jb = r1 * R2\n    r2 = Z\n"
                     f"    while r2 + G <= R2:\n        b = b1 + r2 * sR2\n{_indent(group, 2)}        r2 += G\n"
                     f"    while r2 < R2:\n        b = b1 + r2 * sR2\n{_indent(single, 2)}        r2 += U1\n")
            if p.post:
                code += f"for t in range(lo, hi):\n{_indent(p.post.format(**flat), 1)}\n"
        return code + f"for t in range(lo, hi):\n    out[k1 * oK1 + t * oK2] = {spec.final.format(**flat)}\n"

    if variant in ("serial", "lanes"):
        rows = (f"{lanes_alloc()}for k1 in range(K1):\n    for k2 in range(K2):\n"
                f"        base = off + k1 * sK1 + k2 * sK2\n{_indent(row(), 2)}")
        body = rows if variant == "lanes" else (
            f"if mode == 0:\n{_indent(rows, 1)}else:\n    lo = Z\n    hi = K2\n    for k1 in range(K1):\n"
            f"{_indent(cols(), 2)}")
    elif variant == "rows":
        body = (f"K = K1 * K2\nfor q in prange(np.int64((K + blk - U1) // blk)):\n{_indent(lanes_alloc(), 1)}"
                f"    q0 = np.uint64(q) * blk\n    for kk in range(q0, min(K, q0 + blk)):\n"
                f"        k1 = kk // K2\n        k2 = kk - k1 * K2\n        base = off + k1 * sK1 + k2 * sK2\n"
                f"{_indent(row(), 2)}")
    elif variant == "chunks":
        body = (f"n_u = R1 * R2\nfor k1 in range(K1):\n    for k2 in range(K2):\n"
                f"        base = off + k1 * sK1 + k2 * sK2\n{_indent(chunked_row(), 2)}")
    else:
        body = (f"nb = (K2 + blk - U1) // blk\nfor q in prange(np.int64(K1 * nb)):\n    k1 = np.uint64(q) // nb\n"
                f"    lo = (np.uint64(q) - k1 * nb) * blk\n    hi = min(K2, lo + blk)\n{_indent(cols(), 1)}")
    scratch = "".join(f", sc_{s}" for s, _, _ in states)
    if "inv" in spec.final:
        body = "inv = arg != 0.0\n" + body
    return (f"def kern(buf, off, K1, K2, R1, R2, sK1, sK2, sR1, sR2, oK1, oK2, mode, n, arg, blk, out{scratch}):\n"
            + _indent(body, 1))


# ---------------------------------------------------------------- lazy compilation

_ENTRY: dict[tuple[str, np.dtype, str], Callable] = {}   # (op, kernel dtype, variant) -> compiled overload
_SOURCES: dict[tuple[str, np.dtype, str], str] = {}      # the generated code, for inspection
_DISPATCHERS: dict[tuple[str, np.dtype, str], object] = {}   # for inspect_llvm / inspect_asm
_FLAGS = dict(fastmath={"reassoc", "contract"}, error_model="numpy", nogil=True)


def _state_dtypes(spec: ReductionSpec, kin: np.dtype) -> list[tuple[str, np.dtype]]:
    acc = spec.acc(kin)
    rule = {"acc": acc, "real": _real(acc), "int64": _I64, "bool": _BOOL}
    return [(s, rule[r]) for p in spec.passes(kin) for s, r, _ in p.states]


def _kernel(name: str, kin: np.dtype, variant: str) -> Callable:
    """The compiled overload for (op, kernel dtype, variant): existing? -> generate -> compile.

    Only ``dispatcher.compile(sig)``'s entry point is kept, so a call skips
    Numba's type dispatch.  The buffer is typed readonly: writable arrays
    convert to it, so read-only (broadcast) inputs share the same overload.
    """
    key = (name, kin, variant)
    ep = _ENTRY.get(key)
    if ep is not None:
        return ep
    if variant not in _VARIANTS:
        raise SchemaError(f"unknown kernel variant {variant!r}; known: {', '.join(_VARIANTS)}")
    spec = REDUCTIONS[name]
    passes, acc, states = spec.passes(kin), spec.acc(kin), _state_dtypes(spec, kin)
    src = _source(spec, passes, variant)
    # Trim what this op does not use: less IR, faster compiles.
    if acc == kin:
        src = re.sub(r"ACC\((buf\[[^\]]*\])\)", r"\1", src)
    if not any(re.search(r"\bj\b", p.step) for p in passes):
        src = re.sub(r"(?m)^ *(j = np\.int64\(.*\)|jb = r1 \* R2|jg = .*)\n", "", src)
    info = np.finfo(acc) if acc.kind in "fc" else np.iinfo(acc)
    low, high = (-math.inf, math.inf) if acc.kind in "fc" else (int(info.min), int(info.max))
    u64 = np.uint64
    ns = {"np": np, "prange": prange, "EXP": _exp_f32 if spec.result(kin) == _F32 else _exp, "ACC": acc.type,
          "LOW": low, "HIGH": high, "INF": math.inf, "Z": u64(0), "U1": u64(1), "W": u64(_LANES),
          "G": u64(_GROUP), "LG": u64(_LANE_GROUP), "WG": u64(_LANES * _LANE_GROUP),
          **{f"T_{s}": dt.type for s, dt in states}}
    exec(compile(src, f"<reduction {name} {kin.name} {variant}>", "exec"), ns)
    disp = numba.njit(parallel=variant in ("rows", "chunks", "cols"), **_FLAGS)(ns["kern"])
    arr = lambda dt, ro=False: types.Array(numba.from_dtype(dt), 1, "C", readonly=ro)
    sig = types.void(arr(kin, True), *[types.uint64] * 11, types.int64, types.int64, types.float64, types.uint64,
                     arr(spec.result(kin)), *[arr(dt) for _, dt in states])
    ep = disp.compile(sig)
    _SOURCES[key] = src
    _DISPATCHERS[key] = disp
    _ENTRY[key] = ep
    return ep


def compiled_signatures() -> dict[str, list[str]]:
    """What has been compiled so far: op -> ["float32", "float32 lanes", "float32 parallel:chunks", ...].

    Kernels are keyed by the op that owns them (mean runs sum's, std var's,
    all any's) and the dtype they read: bool inputs run the uint8 kernel (a
    view), float16 inputs the float32 one (a copy), logsumexp's int inputs
    the float32 one (a cast, as PyTorch).
    """
    out: dict[str, list[str]] = {}
    for name, kin, variant in _ENTRY:
        label = {"serial": "", "lanes": " lanes"}.get(variant, f" parallel:{variant}")
        out.setdefault(name, []).append(kin.name + label)
    return out


def warmup(name: str, dtype, variants: tuple[str, ...] = ("serial",)) -> None:
    """Compile ahead of time what ``get_reduction(name, dtype)`` will run.

    >>> warmup("sum", np.dtype(np.float64)); "float64" in compiled_signatures()["sum"]
    True
    """
    spec = _spec(name)
    dt = _check_dtype(spec, dtype)
    kname = spec.kernel or name
    kin = _kernel_dtype(REDUCTIONS[kname], dt)
    for v in variants:
        _kernel(kname, kin, v)


# ---------------------------------------------------------------- planning
#
# A plan turns (shape, strides, axis, keepdims) into the kernel's integers
# and says how to get the flat buffer.  It depends on nothing else, so each
# callable memoizes plans by that key: a repeated call with the same layout
# is a dict hit, not a re-plan.

_MASK = (1 << 64) - 1   # negative strides travel as uint64 two's complement
# How the flat buffer is made: a view of a C or F contiguous array; a view
# spanning the strided array's memory; or a copy (see _plan for when).
_FLAT_C, _FLAT_F, _SPAN, _COPY_T, _COPY_C, _EMPTY = range(6)
_PLAN_CACHE_SIZE = 512


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


def _contiguous(shape, st, order) -> bool:
    acc = 1
    for n, s in (reversed(list(zip(shape, st))) if order == "C" else zip(shape, st)):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


def _plan(name, shape, strides, isz, axis, keepdims, ordered):
    """Plan one reduction: (how, extra, out_shape, K, R, ints).

    ints = (off, K1, K2, R1, R2, sK1, sK2, sR1, sR2, oK1, oK2, mode): the
    input as a 4-D (K1, K2, R1, R2) strided view of a flat buffer, in
    elements.  Kept dims are ordered by input stride (writes go through the
    output strides oK*), reduced dims too unless ``ordered`` (argmax's index
    is the C-order flat index); dims that address memory as one are merged.
    mode 0 ("inner") when the innermost reduced stride is the smaller, else
    2 ("outer").
    """
    nd = len(shape)
    axes = _check_axis(axis, nd, name)
    kept = [d for d in range(nd) if d not in axes]
    out_shape = (tuple(1 if d in axes else shape[d] for d in range(nd)) if keepdims
                 else tuple(shape[d] for d in kept))
    K, R = math.prod(shape[d] for d in kept), math.prod(shape[d] for d in axes)
    if K == 0 or R == 0:
        return _EMPTY, axes, out_shape, K, R, None
    how, extra = None, None
    if any(s % isz for s in strides):
        # strides that are not whole elements cannot index a flat buffer: copy
        how, strides = _COPY_C, [isz * math.prod(shape[d + 1:]) for d in range(nd)]
    st = [s // isz for s in strides]
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
        # e.g. a[::2, ::3, ::2] reduced over axis 1: the 4-D view cannot
        # address it, so copy once, reduced axes last, and reduce a 2-D array.
        return _COPY_T, kept + sorted(axes), out_shape, K, R, (0, 1, K, 1, R, 0, R, 0, 1, 0, 1, 0 if R > 1 else 2)
    (K1, sK1, oK1), (K2, sK2, oK2) = ([(1, 0, 0)] * 2 + kd)[-2:]
    (R1, sR1), (R2, sR2) = ([(1, 0)] * 2 + rd)[-2:]
    kin = abs(sK2) if K2 > 1 else math.inf
    rin = abs(sR2) if R2 > 1 else math.inf
    mode = 0 if rin <= kin else 2
    off = 0
    if how is None:
        if _contiguous(shape, st, "C"):
            how = _FLAT_C
        elif _contiguous(shape, st, "F"):
            how = _FLAT_F
        else:
            # A 1-D contiguous view over the whole span the strided array
            # touches, from its lowest address: no copy, and the kernel's
            # inner loops still see unit-stride runs where the layout has them.
            how = _SPAN
            off = sum((n - 1) * -s for n, s in zip(shape, st) if s < 0)
            span = sum((n - 1) * abs(s) for n, s in zip(shape, st)) + 1
            flips = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in st)
            extra = (flips if off else None, (span,), (isz,))
    ints = (off, K1, K2, R1, R2, sK1 & _MASK, sK2 & _MASK, sR1 & _MASK, sR2 & _MASK, oK1, oK2, mode)
    return how, extra, out_shape, K, R, ints


def _flat(a: np.ndarray, how: int, extra) -> np.ndarray:
    """The flat buffer a plan indexes (the miss-ish path: non-C layouts)."""
    if how == _FLAT_F:
        return a.reshape(-1, order="F")
    if how == _SPAN:
        flips, shape, strides = extra
        return np.lib.stride_tricks.as_strided(a if flips is None else a[flips], shape, strides)
    if how == _COPY_T:
        return np.ascontiguousarray(a.transpose(extra)).reshape(-1)
    return np.ascontiguousarray(a).reshape(-1)   # _COPY_C


# ---------------------------------------------------------------- parallel or not

def _threads_run_in_parallel() -> bool:
    """Measure once whether two threads really run at once on this machine.

    Two CPU-bound, GIL-free NumPy loops on two threads take about as long as
    one on two real cores, and twice as long where the "cores" share one
    (measured on the 2-vCPU VMs: 2.3x, and an OpenMP prange sum of 1e7
    float32 ran 8x slower than the serial kernel).  About 40 ms, once.
    """
    import threading

    x = np.linspace(0.0, 1.0, 1 << 15)
    ys = [np.empty_like(x), np.empty_like(x)]

    def work(y):
        for _ in range(8):
            np.sin(x, out=y)

    def timed(nthreads):
        th = [threading.Thread(target=work, args=(ys[i],)) for i in range(nthreads)]
        t = time.perf_counter()
        for h in th:
            h.start()
        for h in th:
            h.join()
        return time.perf_counter() - t

    timed(1)   # warm up (clock ramp, first-touch)
    ones, twos = [], []
    for _ in range(7):
        ones.append(timed(1))
        twos.append(timed(2))
    # Best single run (what one core does undisturbed) against the median
    # pair (what two threads typically get): noise only biases towards serial.
    return sorted(twos)[3] < 1.3 * min(ones)


_PARALLEL_OK: list[bool] = []


def _use_parallel() -> bool:
    if PARALLEL is not None:
        return PARALLEL
    if numba.get_num_threads() < 2:
        return False
    if not _PARALLEL_OK:
        # twice: a VM whose vCPUs share a core passes one probe now and then
        _PARALLEL_OK.append(_threads_run_in_parallel() and _threads_run_in_parallel())
    return _PARALLEL_OK[0]


def _parallel_plan(p) -> tuple[str, int]:
    """The parallel variant for a plan, and its block: (variant, blk)."""
    K1, K2, R1, R2, mode = p[2], p[3], p[4], p[5], p[12]
    nt = numba.get_num_threads()
    pieces = 4 * nt
    if mode == 2:
        # one block of columns per thread: long row segments stream best
        nb = max(1, min(-(-nt // K1), -(-K2 // 256)))
        return "cols", -(-K2 // nb)                          # columns per block
    K, R = K1 * K2, R1 * R2
    if K < pieces and R >= 2 * _MIN_CHUNK:
        return "chunks", -(-R // min(pieces, R // _MIN_CHUNK))  # chunk length
    return "rows", -(-K // pieces)                           # rows per block


# ---------------------------------------------------------------- the callable

def _empty_result(spec, shape, axes, out_shape, rdt, R):
    if R == 0 and spec.identity is None:
        raise ShapeError(
            f"{spec.name}(): cannot reduce over a zero-size axis (axes {axes} of shape {shape}) "
            f"because it has no identity; pass a non-empty input, or reduce only over non-empty axes")
    return np.full(out_shape, spec.identity if R == 0 else 0, rdt)


_CALLABLES: dict[tuple[str, np.dtype], Callable] = {}


def get_reduction(name: str, dtype: np.dtype) -> Callable:
    """A reduction specialized to one input dtype.

    The callable is ``f(a, axis, keepdims, **static) -> np.ndarray`` where
    ``axis`` is None (all axes) or a tuple of normalized axes (``()``: no
    reduction), and the only static is ``correction`` (var/std, default 0).
    Full reductions return 0-d arrays.  Kernels compile on first use (the
    serial one first; a parallel one on the first input of
    ``PARALLEL_THRESHOLD`` elements or more, where threads pay) and are
    shared by all callers.

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
    kname = spec.kernel or name          # derived ops run their base op's kernels
    kspec = REDUCTIONS[kname]
    kin = _kernel_dtype(kspec, dt)
    rdt, kout = spec.result(dt), kspec.result(kin)
    conv_in = None if kin == dt else (lambda a: a.view(_U8)) if kin == _U8 else (lambda a: a.astype(kin))
    conv_out = None if rdt == kout else (lambda r: r.view(rdt)) if rdt == _BOOL else (lambda r: r.astype(rdt))
    sdts = [sdt for _, sdt in _state_dtypes(kspec, kin)]
    nostate = tuple(np.empty(0, sdt) for sdt in sdts)
    ordered, post, arg0, static_arg = kspec.ordered, spec.post, float(spec.arg), spec.static_arg
    compiled: dict[str, Callable] = {}   # variant -> overload, compiled on first need
    lanes = any(p.lanes for p in kspec.passes(kin))

    plans: dict = {}
    isz = kin.itemsize

    def reduce(a, axis=None, keepdims=False, **static):
        if type(a) is not np.ndarray:   # the kernels take plain arrays (a matrix reshapes to 2-D)
            a = np.asarray(a)
        if a.dtype != dt:
            raise DTypeError(f"{name}() kernel for {dt.name} got a {a.dtype.name} array")
        arg = arg0
        if static:
            if static_arg in static:
                arg = float(static.pop(static_arg))
            if static:
                raise SchemaError(f"{name}() got unexpected static argument(s) {sorted(static)}")
        src = a if conv_in is None else conv_in(a)
        if axis is None and not keepdims and src.flags.c_contiguous and src.size:
            # full reduction of a contiguous array: the common case, planned inline
            K, R, out_shape = 1, src.size, ()
            p = (src.reshape(-1), 0, 1, 1, 1, R, 0, 0, 0, 1, 0, 0, 0)
        else:
            try:
                how, extra, out_shape, K, R, ints = plans[(src.shape, src.strides, axis, keepdims)]
            except KeyError:
                if len(plans) >= _PLAN_CACHE_SIZE:
                    plans.clear()
                plan = plans[(src.shape, src.strides, axis, keepdims)] = _plan(
                    name, src.shape, src.strides, isz, axis, keepdims, ordered)
                how, extra, out_shape, K, R, ints = plan
            except TypeError:   # an unhashable axis (a list): let the checker say what is wrong
                _check_axis(axis, a.ndim, name)
                raise
            if how == _EMPTY:
                return _empty_result(spec, a.shape, extra, out_shape, rdt, R)
            p = (src.reshape(-1) if how == _FLAT_C else _flat(src, how, extra), *ints)
        out = np.empty(K, kout)
        scratch = tuple(np.empty(K, sdt) for sdt in sdts) if p[12] == 2 else nostate
        if K * R < PARALLEL_THRESHOLD or not _use_parallel():
            variant, blk = "lanes" if lanes and p[12] == 0 and p[9] == 1 and p[5] >= _LANE_MIN else "serial", 1
        else:
            variant, blk = _parallel_plan(p)
        ep = compiled.get(variant)
        if ep is None:
            ep = compiled[variant] = _kernel(kname, kin, variant)
        ep(*p, R, arg, blk, out, *scratch)
        if post is not None:
            post(out, R)
        out = out.reshape(out_shape)
        return out if conv_out is None else conv_out(out)

    reduce.__name__ = reduce.__qualname__ = f"{name}_{dt.name}"
    reduce.__doc__ = f"{name} over a {dt.name} array -> {rdt.name} (see get_reduction)."
    _CALLABLES[key] = reduce
    return reduce
