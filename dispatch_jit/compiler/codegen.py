"""Code generation: one Numba loop nest per fused region.

The whole chain is computed per element, intermediates in local variables
(registers), never in arrays.  Each node reads its operands cast as its type
rule says (``_t_float32(x)`` or ``(x != 0)``), evaluates the op's scalar
expression from SCALAR_OPS (names substituted in the AST, so precedence is
kept), and casts the result to the dtype eager mode would have stored it in.
Python scalars of the trace and static parameters (``alpha``) are kernel
arguments, not literals, so a new constant value reuses the compiled loop.

Two loop shapes, as the eager kernels: ``flat`` (every input C-contiguous and
of the iteration shape: one 1-D loop, which LLVM vectorizes) and ``strided``
(one loop per dimension over NumPy broadcast views), which walks the last two
dimensions in tiles when an input is read crosswise (a transposed view, see
``crosswise``).  Outputs are allocated by the caller.

A region with a reduction epilogue folds the reduced value into an
accumulator of the eager kernel's accumulator dtype (float64 for float32
sums) instead of storing it, in one of three shapes: ``full`` (every axis:
the flat range, or the outermost dimension, split into chunks, prange over
the chunks, one private accumulator each in a ``p0`` buffer, merged at the
end in order; the flat range in the eager kernel's chunks, for its bits), ``rows`` (the reduced axes are the last ones: one register
accumulator per output element, prange over the first kept dimension) and
``cols`` (any other axes: accumulators in a ``p0`` array of the keepdim
shape, visited in memory order; prange only when dimension 0 is kept).
Float sums and products step through ``Codegen.radd``/``rmul``, compiled
with reassociation allowed, so LLVM vectorizes the accumulation even though
the loop itself is compiled strictly.  Compiled loops are cached process-wide by (source, argument
types, parallel) in the one compile cache (dispatch_jit/jit/cache.py, kind "loop"), so functions
with the same structure share them, and on disk (dispatch_jit/jit/diskcache.py), so that a fresh
process loads them instead.

``Codegen(..., target="cuda")`` builds the same body with the expressions
as CUDA device code compiles them; cuda.py wraps it in a grid-stride kernel.
"""

from __future__ import annotations

import ast

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.dtypes import BOOL, FLOAT, DType
from dispatch_jit.kernels.support.loops import Nest, constant, crosswise, loop_globals, read_cast, type_fn
from dispatch_jit.kernels.support.numba_types import NB_DTYPE as _NB_DTYPE

from dispatch_jit.jit import cache
from .graph.ir import Var

__all__ = ["Codegen", "compile_loop", "compile_source", "compiled_loops", "crosswise", "disk_hits", "last_outcome",
           "loop_globals"]

_NAMES = ("x", "y", "z")
_CACHE_KIND = "loop"      # the compile cache's name for fused loops


def compiled_loops() -> int:
    """Fused loops compiled in this process (all functions)."""
    return cache.size(_CACHE_KIND)


def _scalar_nbtype(v):
    if isinstance(v, bool):
        return nbt.boolean
    if isinstance(v, int):
        return nbt.int64
    if isinstance(v, float):
        return nbt.float64
    return numba.from_dtype(np.asarray(v).dtype)


class _Subst(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            return ast.parse(self.names[node.id], mode="eval").body
        return node


def _substitute(expr: str, names: dict[str, str]) -> str:
    return ast.unparse(_Subst(names).visit(ast.parse(expr, mode="eval")))


class Codegen:
    """The source of one region's loop, and the scalar arguments it takes."""

    def __init__(self, region, types, target: str = "cpu"):
        """``target`` "cuda": the expressions as CUDA device code compiles them (see cuda.py)."""
        self.region, self.types = region, types
        expression = (lambda sop, cat, present, ct: sop.expression(cat, present, ct))
        if target == "cuda":
            from dispatch_jit.cuda.runtime import is_simulator
            from dispatch_jit.kernels.support.loops.cuda import cuda_expression
            sim = is_simulator()
            expression = (lambda sop, cat, present, ct: cuda_expression(sop, info.compute, present, sim))
        self.scalars: list = []          # values passed as s0, s1, ... (fixed by the trace)
        self.preamble: list[str] = []
        self.body: list[str] = []
        self.checks: list = []           # (counter name, Check) in node order
        local = {v: f"x{i}" for i, v in enumerate(region.inputs)}
        consts = set()
        for node, info in zip(region.nodes, region.infos):
            ct = info.compute.name
            for lit, val in (("zero", 0), ("one", 1)):
                if (lit, ct) not in consts:
                    consts.add((lit, ct))
                    self.preamble.append(f"{lit}_{ct} = {constant(val, type_fn(ct))}")
            vid = node.outs[0]
            names = {"_zero": f"zero_{ct}", "_one": f"one_{ct}"}
            raw = {}                     # the Python-number operands as given (a scalar Check reads them)
            present = []
            for i, (x, cast) in enumerate(zip(info.operands, info.casts)):
                if x is None:
                    continue
                present.append(_NAMES[i])
                if isinstance(x, Var):
                    src = local[x.id]
                    names[_NAMES[i]] = self._cast(src, cast, ct)
                else:
                    s = self._scalar(x)
                    raw[_NAMES[i]] = s
                    c = f"c{vid}_{i}"
                    self.preamble.append(f"{c} = {self._cast(s, cast, ct)}")
                    names[_NAMES[i]] = c
            for name, value in info.statics:
                # eager passes statics as int64/float64 by the compute category, then casts; here
                # they are literals (alpha=1 folds away: x * 1 is exact)
                lit = repr(float(value) if info.compute.category == FLOAT else int(value))
                c = f"{name}{vid}"
                self.preamble.append(f"{c} = {constant(lit, type_fn(ct))}")
                names[name] = c
            expr = _substitute(expression(info.sop, info.compute.category, tuple(present), ct), names)
            check = info.sop.checks.get(info.compute.category) if target == "cpu" else None
            if check is not None and check.scalar:
                # once per call on the numbers as given, as eager's kernel; none where they are tensors
                if check.names() <= raw.keys():
                    self.checks.append((f"e{vid}", check))
                    self.preamble.append(f"e{vid} = 1 if {_substitute(check.guard, raw)} else 0")
            elif check is not None:
                # refused inputs are counted here and raised after the loop (a raise inside prange
                # is lost with its thread); CUDA kernels return placeholders, as eager CUDA does
                self.checks.append((f"e{vid}", check))
                self.preamble.append(f"e{vid} = 0")
                self.body.append(f"e{vid} += {_substitute(check.guard, names)}")
            rt = info.result
            rhs = expr if rt.category == BOOL else f"{type_fn(rt.name)}({expr})"
            self.body.append(f"v{vid} = {rhs}")
            local[vid] = f"v{vid}"
        self.local = local

    def _raises(self) -> list[str]:
        """After the loop: the first node (in eager mode's order) with a refused input raises."""
        return [ln for name, check in self.checks for ln in (f"    if {name}:", f"        {check.raise_stmt()}")]

    def _scalar(self, value) -> str:
        self.scalars.append(value)
        return f"s{len(self.scalars) - 1}"

    @staticmethod
    def _cast(src: str, cast: str, ct: str) -> str:
        return read_cast(cast, src, type_fn(ct))

    # accumulator steps with reassociation allowed: LLVM inlines them into the strictly compiled
    # loop and vectorizes the reduction (measured: 3.7 ms against 6.4 ms for 1e7 float32 on one core)
    radd = staticmethod(numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy")(lambda a, b: a + b))
    rmul = staticmethod(numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy")(lambda a, b: a * b))

    @property
    def reduce_mode(self) -> str | None:
        """"full", "rows" or "cols" (see the module docstring), or None without an epilogue."""
        red = self.region.reduce
        if red is None:
            return None
        return "full" if red.full else "rows" if red.trailing else "cols"

    def _red_init(self) -> str:
        red = self.region.reduce
        a = red.acc
        if red.kind in ("sum", "mean"):
            lit = "0"
        elif red.kind == "prod":
            lit = "1"
        elif a.category == FLOAT:
            lit = "-math.inf" if red.kind == "max" else "math.inf"
        elif a.category == BOOL:
            lit = "False" if red.kind == "max" else "True"
        else:
            info = np.iinfo(a.np)
            lit = str(int(info.min if red.kind == "max" else info.max))
        return f"_t_{a.name}({lit})"

    def _red_step(self, acc: str, value: str, merge: bool = False) -> list[str]:
        """Statements folding ``value`` (an element, or another partial when ``merge``) into ``acc``."""
        red = self.region.reduce
        at = red.acc.name
        x = value if merge else f"_t_{at}({value})"
        if red.kind in ("max", "min"):
            cmp = ">" if red.kind == "max" else "<"
            # NaN propagates as in the eager kernel: a NaN is taken, and nothing replaces it
            return [f"xr = {x}", f"if xr {cmp} {acc} or xr != xr:", f"    {acc} = xr"]
        op = "+" if red.kind in ("sum", "mean") else "*"
        if red.acc.category == FLOAT:      # the merge too: eager's merge loop is compiled with reassociation
            return [f"{acc} = {'_radd' if op == '+' else '_rmul'}({acc}, {x})"]
        return [f"{acc} {op}= {x}"]

    def _red_final(self, acc: str, count: str) -> str:
        red = self.region.reduce
        rt = red.result.name
        if red.kind == "mean":   # eager: the sum stored in the result dtype, then divided in it
            return f"_t_{rt}(_t_{rt}({acc}) / _t_{rt}({count}))"
        return acc if red.kind in ("max", "min") else f"_t_{rt}({acc})"

    def _reduce_source(self, flat: bool) -> str:
        r, red, mode = self.region, self.region.reduce, self.reduce_mode
        nin, nout, nd = len(r.inputs), len(r.outputs), r.ndim
        params = [f"a{i}" for i in range(nin)] + [f"s{i}" for i in range(len(self.scalars))] + \
                 [f"o{j}" for j in range(nout)] + ["r0"] + ([] if mode == "rows" else ["p0"])
        lines = ["from dispatch_jit.compiler.codegen import Codegen as _Codegen",
                 "_radd, _rmul = _Codegen.radd, _Codegen.rmul", "",
                 f"def fused_{r.index}({', '.join(params)}):"] + [f"    {p}" for p in self.preamble]
        lines.append(f"    init_r = {self._red_init()}")
        value = self.local[red.src]
        dims = ", ".join(f"n{d}" for d in range(nd)) + ("," if nd == 1 else "")
        full_idx = ", ".join(f"i{d}" for d in range(nd))

        def element(ind: str, src: str, dst: str, idx: str) -> list[str]:
            out = [f"{ind}x{i} = {src}{i}[{idx}]" for i in range(nin)]
            out += [f"{ind}{b}" for b in self.body]
            out += [f"{ind}{dst}{j}[{idx}] = {self.local[v]}" for j, v in enumerate(r.outputs)]
            return out

        if mode == "full":
            flat_loop = flat
            if flat_loop:
                for i in range(nin):
                    lines.append(f"    f{i} = a{i}" + ("" if nd == 1 else f".reshape(a{i}.size)"))
                for j in range(nout):
                    lines.append(f"    g{j} = o{j}" + ("" if nd == 1 else f".reshape(o{j}.size)"))
                lines += ["    n = f0.shape[0]", "    cnt = n"]
                outer = "n"
            else:
                lines += [f"    {dims} = a0.shape", f"    cnt = {' * '.join(f'n{d}' for d in range(nd))}"]
                outer = "n0"
            # chunks of support/loops' full_chunks, eager's split: blk each, the last shorter,
            # merged in order from init_r, so that float sums round as eager's do
            lines += ["    nc = p0.shape[0]",
                      f"    blk = ({outer} + nc - 1) // nc",
                      "    for ch in prange(nc):",
                      "        lo = ch * blk",
                      f"        hi = min(lo + blk, {outer})",
                      "        acc = init_r"]
            # each chunk loops from 0 over its own slices: ``range(lo, hi)`` over the whole arrays
            # does not vectorize (measured 60 ms against 11 ms for 1e7 float32 on one core)
            src, dst = ("f", "g") if flat_loop else ("a", "o")
            lines += [f"        h{i} = {src}{i}[lo:hi]" for i in range(nin)]
            lines += [f"        k{j} = {dst}{j}[lo:hi]" for j in range(nout)]
            if flat_loop:
                lines.append("        for i in range(hi - lo):")
                ind = "            "
                lines += element(ind, "h", "k", "i")
            else:
                lines.append("        for i0 in range(hi - lo):")
                for d in range(1, nd):
                    lines.append(f"{'    ' * (d + 2)}for i{d} in range(n{d}):")
                ind = "    " * (nd + 2)
                lines += element(ind, "h", "k", full_idx)
            lines += [f"{ind}{s}" for s in self._red_step("acc", value)]
            lines += ["        p0[ch] = acc", "    tot = init_r", "    for ch in range(nc):"]
            lines += [f"        {s}" for s in self._red_step("tot", "p0[ch]", merge=True)]
            ridx = ", ".join("0" for _ in range(red.out_ndim)) or "()"
            lines.append(f"    r0[{ridx}] = {self._red_final('tot', 'cnt')}")
        elif mode == "rows":
            k = nd - len(red.axes)
            lines += [f"    {dims} = a0.shape", f"    cnt = {' * '.join(f'n{d}' for d in red.axes)}"]
            for d in range(nd):
                if d == k:
                    lines.append(f"{'    ' * (d + 1)}acc = init_r")
                lines.append(f"{'    ' * (d + 1)}for i{d} in {'prange' if d == 0 else 'range'}(n{d}):")
            ind = "    " * (nd + 1)
            lines += element(ind, "a", "o", full_idx)
            lines += [f"{ind}{s}" for s in self._red_step("acc", value)]
            ridx = [f"i{d}" for d in range(k)] + (["0"] * len(red.axes) if red.keepdim else [])
            lines.append(f"{'    ' * (k + 1)}r0[{', '.join(ridx)}] = {self._red_final('acc', 'cnt')}")
        else:
            lines += [f"    {dims} = a0.shape", f"    cnt = {' * '.join(f'n{d}' for d in red.axes)}",
                      "    q = p0.reshape(p0.size)", "    for j in range(q.shape[0]):", "        q[j] = init_r"]
            for d in range(nd):
                loop = "prange" if d == 0 and 0 not in red.axes else "range"
                lines.append(f"{'    ' * (d + 1)}for i{d} in {loop}(n{d}):")
            ind = "    " * (nd + 1)
            lines += element(ind, "a", "o", full_idx)
            pidx = ", ".join("0" if d in red.axes else f"i{d}" for d in range(nd))
            lines.append(f"{ind}acc = p0[{pidx}]")
            lines += [f"{ind}{s}" for s in self._red_step("acc", value)]
            lines.append(f"{ind}p0[{pidx}] = acc")
            # r0 holds p0's elements in the same C order (only size-1 dims differ)
            lines += ["    w = r0.reshape(r0.size)", "    for j in range(q.shape[0]):",
                      f"        w[j] = {self._red_final('q[j]', 'cnt')}"]
        return "\n".join(lines + self._raises()) + "\n"

    def source(self, flat: bool, tiled: bool = False) -> str:
        """``tiled``: the strided nest walks the last two dimensions in TILE blocks (see ``crosswise``)."""
        r = self.region
        if r.reduce is not None:
            return self._reduce_source(flat)
        nin, nout, nd = len(r.inputs), len(r.outputs), r.ndim
        ins, outs = [f"a{i}" for i in range(nin)], [f"o{j}" for j in range(nout)]
        params = ins + [f"s{i}" for i in range(len(self.scalars))] + outs
        lines = [f"def fused_{r.index}({', '.join(params)}):"] + [f"    {p}" for p in self.preamble]
        nest = Nest("flat" if flat else "tiled" if tiled else "strided", nd, ins, outs)
        lines += nest.setup + nest.loop(self._element)
        return "\n".join(lines + self._raises()) + "\n"

    def _element(self, at) -> list[str]:
        """One element of the region: read the inputs, compute the nodes, store the outputs."""
        r = self.region
        return ([f"x{i} = {at(f'a{i}')}" for i in range(len(r.inputs))] + list(self.body)
                + [f"{at(f'o{j}')} = {self.local[v]}" for j, v in enumerate(r.outputs)])

    def argtypes(self, in_dtypes: list[DType], out_dtypes: list[DType], flat: bool) -> tuple:
        """Numba types of the loop's arguments; ``out_dtypes`` are the stored outputs' (not the reduction's)."""
        layout, nd = ("C" if flat else "A"), self.region.ndim
        types = [nbt.Array(_NB_DTYPE[d.np], nd, layout) for d in in_dtypes] + \
                [_scalar_nbtype(s) for s in self.scalars] + \
                [nbt.Array(_NB_DTYPE[d.np], nd, layout) for d in out_dtypes]
        red = self.region.reduce
        if red is not None:
            types.append(nbt.Array(_NB_DTYPE[red.result.np], red.out_ndim, "C"))
            mode = self.reduce_mode
            if mode != "rows":
                types.append(nbt.Array(_NB_DTYPE[red.acc.np], 1 if mode == "full" else nd, "C"))
        return tuple(types)


def compile_source(src: str, name: str, argtypes: tuple, parallel: bool):
    """(entry point, whether this call compiled it).

    Loops are cached in memory by (source, argument types, parallel), then on
    disk (see dispatch_jit/jit/diskcache.py): a loop loaded from disk is not a compile; the
    thread's ``last_outcome()`` says which of "memory", "disk" or "compiled"
    the last call was.  ``compile_loop`` returns that outcome instead.
    """
    ep, how = compile_loop(src, name, argtypes, parallel)
    return ep, how == "compiled"


def compile_loop(src: str, name: str, argtypes: tuple, parallel: bool):
    """(entry point, how it was obtained: "memory", "disk" or "compiled").  Counters
    take the outcome from here, not from thread state another caller may have left."""
    return cache.njit_source(_CACHE_KIND, src, name, argtypes, lambda: loop_globals(parallel), parallel=parallel,
                             disk=True)


def last_outcome() -> str | None:
    """What this thread's last ``compile_source`` call did ("memory", "disk", "compiled"), once:
    reading it clears it."""
    return cache.last_outcome(_CACHE_KIND)


def disk_hits() -> int:
    """Fused loops loaded from the on-disk cache in this process (all functions)."""
    return cache.counts(_CACHE_KIND)["disk"]
