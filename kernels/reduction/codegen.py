"""Code generation for the CPU reductions: the table's snippets pasted into loop shapes.

``_source`` writes the Python source of one kernel variant for an op of
table.REDUCTIONS; ``kernel`` exec's it and compiles it with
``numba.njit`` once per (op, kernel dtype, variant), on first use, keeping
only the compiled overload's entry point.  cpu.py plans calls onto
these kernels (see its docstring for the loop shapes).  Float sums and
products (sum, mean, prod, var's mean) fold in the written lane order of
support/loops/lanes.py, which the compiler's fused epilogues generate too.

>>> import numpy as np
>>> warmup("sum", np.dtype(np.float64)); "float64" in compiled_signatures()["sum"]
True
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
from typing import Callable

import llvmlite.ir
import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic

from dispatch_jit.dtypes import BF16_STORAGE
from dispatch_jit.errors import SchemaError
from dispatch_jit.jit import cache, diskcache

from ..support.loops.fold import radd
from ..support.loops.lanes import LANES, TAIL, lane_close, lane_open, lane_run, sadd, smul
from ..support.numba_types import JIT_HELPERS

from .table import (REDUCTIONS, Pass, ReductionSpec, _F32, check_dtype, kernel_dtype, spec_of,
                              state_dtypes)

__all__ = ["kernel", "compiled_signatures", "warmup", "LANE_MIN"]

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
LANE_MIN = 2048   # a contiguous run at least this long takes the lanes kernel
_LANES = 32    # lane states per contiguous run, for ``Pass.lanes`` steps
_GROUP = 16    # reduced rows folded per load/store of the outer mode's states
_LANE_GROUP = 8   # rows of a lane block: blocks are _LANES * _LANE_GROUP elements


def _indent(code: str, level: int) -> str:
    return textwrap.indent(code, "    " * level)


def _names(states, fmt: str) -> dict:
    return {s: fmt.format(s) for s, _, _ in states}


def _ordered_step(p: Pass) -> str | None:
    """"_sadd"/"_smul" where a pass is a plain float sum or product (``{s} += x``): it folds in
    the explicit lane order of support/loops/lanes.py, as the fused epilogues do."""
    m = re.fullmatch(r"\{(\w+)\} (?:([+*])= x|= (_sadd|_smul)\(\{\1\}, x\))", p.step)
    if m is None or len(p.states) != 1:
        return None
    return m.group(3) or ("_sadd" if m.group(2) == "+" else "_smul")


def _strict(p: Pass) -> Pass:
    """``p`` with its step and merge strict where it is a plain float sum or product."""
    step = _ordered_step(p)
    if step is None:
        return p
    s = p.states[0][0]
    return dataclasses.replace(p, step=f"{{{s}}} = {step}({{{s}}}, x)", merge=f"{{{s}}} = {step}({{{s}}}, {{{s}_o}})")


def _source(spec: ReductionSpec, passes: tuple[Pass, ...], variant: str, ordered: bool = False) -> str:
    """Python source of one kernel variant: the loop shapes around the op's snippets.
    ``ordered`` (float and complex accumulators): plain sums and products fold in the lane
    order of support/loops/lanes.py, every step strict (``_ordered_step``)."""
    if variant == "serial":
        passes = tuple(dataclasses.replace(p, lanes=False) for p in passes)
    if ordered:
        # column-wise (accumulators in memory) and chunk merges: strict left-to-right steps; such a
        # kernel compiles without fast-math (it would reach into the inlined strict steps too), and
        # its other float sums (var's squares) reassociate through _radd as the fused loops' do
        passes = tuple(_strict(p) for p in passes)
        passes = tuple(p if _ordered_step(p) else dataclasses.replace(p, step=re.sub(
            r"(?m)^\{(\w+)\} \+= (.+)$", r"{\1} = _radd({\1}, \2)", p.step)) for p in passes)
    steps = {id(p): _ordered_step(p) for p in passes} if ordered else {}
    states = [st for p in passes for st in p.states]
    scalar = _names(states, "st_{}")

    def init(p, nm):
        return "".join(f"{nm[s]} = T_{s}({v})\n" for s, _, v in p.states)

    def lanes_alloc():
        return ("".join(f"ln_{s} = np.empty(W, T_{s})\n" for p in passes if p.lanes for s, _, _ in p.states)
                + "".join(f"ln = np.empty(LANES, T_{p.states[0][0]})\n" for p in passes if steps.get(id(p))))

    def ordered_runs(p, nm, runs):
        # one output's (or chunk's) elements in the lane order: ``runs`` walks them, calling
        # ``fold(t0, t1, rb)`` per run of the innermost reduced axis
        (s, _, v), step = p.states[0], steps[id(p)]
        value = lambda t: ([], f"ACC(buf[rb + {t} * sR2])")
        fold = lambda t0, t1, rb: (f"rb = {rb}\n" + "\n".join(lane_run(t0, t1, "t", value, f"T_{s}({v})", step))
                                   + "\n")
        return ("\n".join(lane_open(runs[0], f"T_{s}", alloc=False)) + "\n" + runs[1](fold)
                + "\n".join(lane_close(nm[s], f"T_{s}({v})", step)) + "\n")

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
            if steps.get(id(p)):
                walk = lambda fold: "for r1 in range(R1):\n" + _indent(fold("Z", "R2", "base + r1 * sR1"), 1)
                code += ordered_runs(p, scalar, ("R1 * R2", walk)) + p.post.format(**scalar) + "\n"
                continue
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
            if steps.get(id(p)):
                walk = lambda fold: ("j0 = lo\nwhile j0 < hi:\n    r1 = j0 // R2\n    t0 = j0 - r1 * R2\n"
                                     "    t1 = min(R2, t0 + (hi - j0))\n"
                                     + _indent(fold("t0", "t1", "base + r1 * sR1"), 1) + "    j0 += t1 - t0\n")
                body = (lanes_alloc() + "lo = np.uint64(c) * blk\nhi = min(n_u, lo + blk)\n"
                        + ordered_runs(p, local, ("hi - lo", walk))
                        + "".join(f"p_{s}[c] = c_{s}\n" for s, _, _ in p.states))
            else:
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

_CACHE_KIND = __name__      # the compile cache's name for these kernels (one per module copy)
_ENTRY: dict[tuple[str, np.dtype, str], Callable] = cache.entries(_CACHE_KIND)   # (op, kernel dtype, variant) -> overload
_SOURCES: dict[tuple[str, np.dtype, str], str] = {}      # the generated code, for inspection
_FLAGS = dict(fastmath={"reassoc", "contract"}, error_model="numpy", nogil=True)


def kernel(name: str, kin: np.dtype, variant: str) -> Callable:
    """The compiled overload for (op, kernel dtype, variant): existing? -> generate -> compile.

    Only ``dispatcher.compile(sig)``'s entry point is kept, so a call skips
    Numba's type dispatch.  The buffer is typed readonly: writable arrays
    convert to it, so read-only (broadcast) inputs share the same overload.
    """
    key = (name, kin, variant)
    return cache.lookup(_CACHE_KIND, key, lambda: _compile(key))[0]


def _compile(key: tuple[str, np.dtype, str]):
    name, kin, variant = key
    if variant not in _VARIANTS:
        raise SchemaError(f"unknown kernel variant {variant!r}; known: {', '.join(_VARIANTS)}")
    spec = REDUCTIONS[name]
    # bfloat16 (kin BF16_STORAGE): the buffer holds the 16-bit words, each widened to float32 as it
    # is read; from there the kernel is float32's, the same passes, lane order and accumulators
    words = kin == BF16_STORAGE
    buf_dt, kin = (np.dtype(np.uint16), _F32) if words else (kin, kin)
    passes, acc, states = spec.passes(kin), spec.acc(kin), state_dtypes(spec, kin)
    ordered = acc.kind in "fc" and any(_ordered_step(p) for p in passes)
    src = _source(spec, passes, variant, ordered=ordered)
    if words:
        src = re.sub(r"ACC\((buf\[[^\]]*\])\)", r"ACC(_bf16_load(\1))", src)
    # Trim what this op does not use: less IR, faster compiles.
    if acc == kin:
        src = re.sub(r"ACC\(((?:_bf16_load\()?buf\[[^\]]*\]\)?)\)", r"\1", src)
    if not any(re.search(r"\bj\b", p.step) for p in passes):
        src = re.sub(r"(?m)^ *(j = np\.int64\(.*\)|jb = r1 \* R2|jg = .*)\n", "", src)
    info = np.finfo(acc) if acc.kind in "fc" else np.iinfo(acc)
    low, high = (-math.inf, math.inf) if acc.kind in "fc" else (int(info.min), int(info.max))
    u64 = np.uint64
    ns = {"np": np, "prange": prange, "EXP": _exp_f32 if spec.result(kin) == _F32 else _exp, "ACC": acc.type,
          "LOW": low, "HIGH": high, "INF": math.inf, "Z": u64(0), "U1": u64(1), "W": u64(_LANES),
          "G": u64(_GROUP), "LG": u64(_LANE_GROUP), "WG": u64(_LANES * _LANE_GROUP),
          "LANES": u64(LANES), "TAIL": u64(TAIL), "_sadd": sadd, "_smul": smul, "_radd": radd,
          "_bf16_load": JIT_HELPERS["_bf16_load"], **{f"T_{s}": dt.type for s, dt in states}}
    arr = lambda dt, ro=False: types.Array(numba.from_dtype(dt), 1, "C", readonly=ro)
    argtypes = (arr(buf_dt, True), *[types.uint64] * 11, types.int64, types.int64, types.float64, types.uint64,
                arr(spec.result(kin)), *[arr(dt) for _, dt in states])
    _SOURCES[key] = src
    opts = dict(parallel=variant in ("rows", "chunks", "cols"), **_FLAGS)
    if ordered:
        del opts["fastmath"]
    return diskcache.compile_cached(src, "kern", argtypes, opts, ns)     # (entry point, "disk" | "compiled")


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
        out.setdefault(name, []).append(("bfloat16" if kin == BF16_STORAGE else kin.name) + label)
    return out


def warmup(name: str, dtype, variants: tuple[str, ...] = ("serial",)) -> None:
    """Compile ahead of time what ``reduction.get_reduction(name, dtype)`` will run."""
    spec = spec_of(name)
    dt = check_dtype(spec, dtype)
    kname = spec.kernel or name
    kin = kernel_dtype(REDUCTIONS[kname], dt)
    for v in variants:
        kernel(kname, kin, v)
