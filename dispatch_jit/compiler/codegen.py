"""Code generation: one Numba loop nest per fused region.

The whole chain is computed per element, intermediates in local variables
(registers), never in arrays.  Each node reads its operands cast as its type
rule says (``_t_float32(x)`` or ``(x != 0)``), evaluates the op's scalar
expression from SCALAR_OPS (names substituted in the AST, so precedence is
kept), and casts the result to the dtype eager mode would have stored it in.
A bfloat16 value is a float32 local rounded to bfloat16 (``_bf16_store``, then
widened back) after every node, as eager mode rounds it into memory; its arrays
come as stored, one-field records of the 16-bit word, read and written through
the field.
Python scalars of the trace and static parameters (``alpha``) are kernel
arguments, not literals, so a new constant value reuses the compiled loop.

The loops come from the loop generator (dispatch_jit/kernels/support/loops), which the
eager kernels use too: ``flat``, ``strided`` or ``tiled`` nests (``Nest``; tiled when an input
is read crosswise, see ``crosswise``), and the cast rule ``read_cast``.  Outputs are
allocated by the caller.

A region with a reduction epilogue folds the reduced value into an accumulator of
the eager kernel's accumulator dtype (``Fold``) instead of storing it, in one of three
shapes: ``full`` (every axis: in the eager kernel's chunks, one partial each in a ``p0``
buffer, merged at the end in order), ``rows`` (the reduced axes are the last ones, or for
a float sum or product any with the last one: one fold per output element, prange over
the first kept dimension) and ``cols`` (any other axes: accumulators in a ``p0`` array of
the keepdim shape, visited in memory order; prange only when dimension 0 is kept).  A float
sum or product folds in the written lane order of ``support/loops/lanes.py``
(``full_walk``, ``rows_walk``), the eager kernel's, so it stores eager's bits; a shape on
which eager's kernel would fold otherwise runs eagerly (``unlike_eager``).  Compiled loops are cached process-wide by (source, argument types, parallel)
in the one compile cache (dispatch_jit/jit/cache.py, kind "loop"), so functions with the
same structure share them, and on disk (dispatch_jit/jit/diskcache.py), so that a fresh
process loads them instead.

``Codegen(..., target="cuda")`` builds the same body with the expressions
as CUDA device code compiles them; cuda.py wraps it in a grid-stride kernel.
"""

from __future__ import annotations

import ast

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.dtypes import BOOL, FLOAT, DType, bfloat16
from dispatch_jit.kernels.support.loops import Nest, constant, crosswise, loop_globals, read_cast, store, type_fn
from dispatch_jit.kernels.support.loops.fold import FOLD_IMPORTS, Fold
from dispatch_jit.kernels.support.loops.lanes import full_walk, rows_walk
from dispatch_jit.kernels.support.loops.parallel import splits_outputs
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
            # bfloat16 arithmetic is float32's, each node's bfloat16 result rounded where eager stores it
            ct = "float32" if info.compute is bfloat16 else info.compute.name
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
            rhs = (expr if rt.category == BOOL else f"_bf16_load(_bf16_store({expr}))" if rt is bfloat16
                   else f"{type_fn(rt.name)}({expr})")
            self.body.append(f"v{vid} = {rhs}")
            local[vid] = f"v{vid}"
        self.local = local
        red = region.reduce
        self.fold = None if red is None else Fold(red.kind, red.acc, red.result, target)
        self.words_field = target == "cpu"     # CUDA kernels take a bfloat16 buffer as its uint16 words

    def _raises(self) -> list[str]:
        """After the loop: the first node (in eager mode's order) with a refused input raises."""
        return [ln for name, check in self.checks for ln in (f"    if {name}:", f"        {check.raise_stmt()}")]

    def _scalar(self, value) -> str:
        self.scalars.append(value)
        return f"s{len(self.scalars) - 1}"

    @staticmethod
    def _cast(src: str, cast: str, ct: str) -> str:
        return read_cast(cast, src, type_fn(ct))

    @property
    def reduce_mode(self) -> str | None:
        """"full", "rows" or "cols" (see the module docstring), or None without an epilogue."""
        red = self.region.reduce
        if red is None:
            return None
        if red.full:
            return "full"
        # a float sum folds each output's elements in the lane order where eager's kernel does: where
        # the innermost dimension is reduced (eager's "inner" mode on the stored C-contiguous value)
        return "rows" if red.trailing or (self.fold.ordered and red.ndim - 1 in red.axes) else "cols"

    def unlike_eager(self, shape: tuple) -> str:
        """Why this loop's float sum over ``shape`` would not fold in the eager kernel's order
        ("" where it does): eager folds column-wise where the innermost dimension of size > 1
        is kept (a size-1 last dimension decides otherwise here), and splits a few long
        outputs into chunks on threads."""
        red, mode = self.region.reduce, self.reduce_mode
        if not self.fold.ordered or mode == "full":
            return ""
        big = [d for d, n in enumerate(shape) if n > 1]
        kept, reduced = [d for d in big if d not in red.axes], [d for d in big if d in red.axes]
        K = int(np.prod([shape[d] for d in kept]))
        R = int(np.prod([shape[d] for d in reduced]))
        rows = not kept or not reduced or reduced[-1] > kept[-1]
        if R > 1 and rows != (mode == "rows"):
            return (f"{red.kind} over dims {red.axes} of shape {tuple(shape)}: eager's kernel folds "
                    f"{'each output' if rows else 'column-wise'} there, as this loop does not")
        if mode == "rows" and splits_outputs(K, R):
            return f"{red.kind} over dims {red.axes} of shape {tuple(shape)}: eager splits each output across threads"
        return ""

    def _reduce_source(self, flat: bool) -> str:
        r, red, mode = self.region, self.region.reduce, self.reduce_mode
        nin, nout, nd = len(r.inputs), len(r.outputs), r.ndim
        ins, outs = [f"a{i}" for i in range(nin)], [f"o{j}" for j in range(nout)]
        params = ins + [f"s{i}" for i in range(len(self.scalars))] + outs + ["r0"] + ([] if mode == "rows" else ["p0"])
        fold = self.fold
        put = (lambda dst, value: store(dst, value, red.result))    # a bfloat16 result rounds here
        lines = FOLD_IMPORTS + [f"def fused_{r.index}({', '.join(params)}):"] + [f"    {p}" for p in self.preamble]
        lines.append(f"    init_r = {fold.init()}")
        value = self.local[red.src]
        nest = Nest("flat" if flat and mode == "full" else "strided", nd, ins, outs, sizes="a0",
                    parallel=not (mode == "cols" and 0 in red.axes))
        lines += nest.setup
        folded = lambda acc: (lambda at: self._element(at) + fold.step(acc, value))
        stage = fold.stage(self.types[red.src].dtype)      # float32 values staged per run (lanes.lane_run)
        element = lambda at: (self._element(at), value if stage else fold.value(value))
        ridx = ", ".join("0" if d in red.axes else f"i{d}" for d in range(nd) if d not in red.axes or red.keepdim)
        if fold.ordered and mode == "full":
            lines += full_walk(nest, element, "init_r", type_fn(red.acc.name), fold.lane_step, stage)
            lines += ["    tot = init_r", "    for ch in range(nc):"]
            lines += [f"        {s}" for s in fold.step("tot", "p0[ch]", merge=True)]
            lines.append("    " + put("r0[" + (ridx or "()") + "]", fold.final("tot", "cnt")))
        elif fold.ordered and mode == "rows":
            lines += rows_walk(nest, red.axes, element, "init_r", type_fn(red.acc.name), fold.lane_step,
                               lambda acc: [put(f"r0[{ridx}]", fold.final(acc, 'cnt'))], stage)
        elif mode == "full":
            cnt = "n0" if flat else " * ".join(f"n{d}" for d in range(nd))
            lines += [f"    cnt = {cnt}", "    nc = p0.shape[0]"]
            lines += nest.loop_chunks(["acc = init_r"], folded("acc"), ["p0[ch] = acc"])
            lines += ["    tot = init_r", "    for ch in range(nc):"]
            lines += [f"        {s}" for s in fold.step("tot", "p0[ch]", merge=True)]
            ridx = ", ".join("0" for _ in range(red.out_ndim)) or "()"
            lines.append(f"    {put(f'r0[{ridx}]', fold.final('tot', 'cnt'))}")
        elif mode == "rows":
            # the reduced axes are the last ones: one register accumulator per output element
            k = nd - len(red.axes)
            ridx = [f"i{d}" for d in range(k)] + (["0"] * len(red.axes) if red.keepdim else [])
            lines.append(f"    cnt = {' * '.join(f'n{d}' for d in red.axes)}")
            lines += nest.loop(folded("acc"), level=k, before=["acc = init_r"],
                               after=[put(f"r0[{', '.join(ridx)}]", fold.final('acc', 'cnt'))])
        else:
            # accumulators in p0 (the keepdim shape), visited in memory order
            pidx = ", ".join("0" if d in red.axes else f"i{d}" for d in range(nd))
            lines += [f"    cnt = {' * '.join(f'n{d}' for d in red.axes)}",
                      "    q = p0.reshape(p0.size)", "    for j in range(q.shape[0]):", "        q[j] = init_r"]
            lines += nest.loop(lambda at: self._element(at) + [f"acc = p0[{pidx}]"]
                               + fold.step("acc", value) + [f"p0[{pidx}] = acc"])
            # r0 holds p0's elements in the same C order (only size-1 dims differ)
            lines += ["    w = r0.reshape(r0.size)", "    for j in range(q.shape[0]):",
                      f"        {put('w[j]', fold.final('q[j]', 'cnt'))}"]
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
        """One element of the region: read the inputs, compute the nodes, store the outputs.
        A bfloat16 input is widened to float32 as it is read, a bfloat16 output (its value is
        rounded already) stored as its word."""
        r, dt = self.region, (lambda v: self.types[v].dtype)
        f = self.words_field
        reads = [f"x{i} = {read_cast('none', at(f'a{i}'), '', dt(v), f)}" for i, v in enumerate(r.inputs)]
        stores = [store(at(f"o{j}"), self.local[v], dt(v), f) for j, v in enumerate(r.outputs)]
        return reads + list(self.body) + stores

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
