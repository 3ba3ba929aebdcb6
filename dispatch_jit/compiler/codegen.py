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
(one loop per dimension over NumPy broadcast views).  Outputs are allocated by
the caller.  Compiled loops are cached process-wide by (source, argument
types, parallel), so functions with the same structure share them.
"""

from __future__ import annotations

import ast
import cmath
import math
import threading

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.dtypes import ALL_DTYPES, BOOL, COMPLEX, FLOAT, DType, float16
from dispatch_jit.kernels.cpu_elementwise import _JIT_HELPERS, _NB_DTYPE

from .ir import Var

__all__ = ["Codegen", "compile_source", "compiled_loops"]

_NAMES = ("x", "y", "z")
_TYPE_FNS = {f"_t_{d.name}": d.np.type for d in ALL_DTYPES if d is not float16 and d.category != COMPLEX}
_KERNELS: dict = {}
_lock = threading.Lock()


def compiled_loops() -> int:
    """Fused loops compiled in this process (all functions)."""
    return len(_KERNELS)


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

    def __init__(self, region, types):
        self.region, self.types = region, types
        self.scalars: list = []          # values passed as s0, s1, ... (fixed by the trace)
        self.preamble: list[str] = []
        self.body: list[str] = []
        local = {v: f"x{i}" for i, v in enumerate(region.inputs)}
        consts = set()
        for node, info in zip(region.nodes, region.infos):
            ct = info.compute.name
            for lit, val in (("zero", 0), ("one", 1)):
                if (lit, ct) not in consts:
                    consts.add((lit, ct))
                    self.preamble.append(f"{lit}_{ct} = _t_{ct}({val})")
            vid = node.outs[0]
            names = {"_zero": f"zero_{ct}", "_one": f"one_{ct}"}
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
                    c = f"c{vid}_{i}"
                    self.preamble.append(f"{c} = {self._cast(s, cast, ct)}")
                    names[_NAMES[i]] = c
            for name, value in info.statics:
                # eager passes statics as int64/float64 by the compute category, then casts; here
                # they are literals (alpha=1 folds away: x * 1 is exact)
                lit = repr(float(value) if info.compute.category == FLOAT else int(value))
                c = f"{name}{vid}"
                self.preamble.append(f"{c} = _t_{ct}({lit})")
                names[name] = c
            expr = _substitute(info.sop.expression(info.compute.category, tuple(present), ct), names)
            rt = info.result
            rhs = expr if rt.category == BOOL else f"_t_{rt.name}({expr})"
            self.body.append(f"v{vid} = {rhs}")
            local[vid] = f"v{vid}"
        self.local = local

    def _scalar(self, value) -> str:
        self.scalars.append(value)
        return f"s{len(self.scalars) - 1}"

    @staticmethod
    def _cast(src: str, cast: str, ct: str) -> str:
        return {"compute": f"_t_{ct}({src})", "bool": f"({src} != 0)", "none": src}[cast]

    def source(self, flat: bool) -> str:
        r = self.region
        nin, nout, nd = len(r.inputs), len(r.outputs), r.ndim
        params = [f"a{i}" for i in range(nin)] + [f"s{i}" for i in range(len(self.scalars))] + \
                 [f"o{j}" for j in range(nout)]
        lines = [f"def fused_{r.index}({', '.join(params)}):"] + [f"    {p}" for p in self.preamble]
        if flat:
            for i in range(nin):
                lines.append(f"    f{i} = a{i}" + ("" if nd == 1 else f".reshape(a{i}.size)"))
            for j in range(nout):
                lines.append(f"    g{j} = o{j}" + ("" if nd == 1 else f".reshape(o{j}.size)"))
            lines.append("    for i in prange(g0.shape[0]):")
            idx, ind, src, dst = "i", "        ", "f", "g"
        elif nd == 0:
            idx, ind, src, dst = "()", "    ", "a", "o"
        else:
            lines.append(f"    {', '.join(f'n{d}' for d in range(nd))}{',' if nd == 1 else ''} = o0.shape")
            for d in range(nd):
                lines.append(f"{'    ' * (d + 1)}for i{d} in {'prange' if d == 0 else 'range'}(n{d}):")
            idx, ind, src, dst = ", ".join(f"i{d}" for d in range(nd)), "    " * (nd + 1), "a", "o"
        lines += [f"{ind}x{i} = {src}{i}[{idx}]" for i in range(nin)]
        lines += [f"{ind}{b}" for b in self.body]
        lines += [f"{ind}{dst}{j}[{idx}] = {self.local[v]}" for j, v in enumerate(r.outputs)]
        return "\n".join(lines) + "\n"

    def argtypes(self, in_dtypes: list[DType], out_dtypes: list[DType], flat: bool) -> tuple:
        layout, nd = ("C" if flat else "A"), self.region.ndim
        return tuple([nbt.Array(_NB_DTYPE[d.np], nd, layout) for d in in_dtypes]
                     + [_scalar_nbtype(s) for s in self.scalars]
                     + [nbt.Array(_NB_DTYPE[d.np], nd, layout) for d in out_dtypes])


def compile_source(src: str, name: str, argtypes: tuple, parallel: bool):
    """(entry point, whether this call compiled it)."""
    key = (src, argtypes, parallel)
    ep = _KERNELS.get(key)
    if ep is not None:
        return ep, False
    with _lock:
        ep = _KERNELS.get(key)
        if ep is not None:
            return ep, False
        g = {"np": np, "math": math, "cmath": cmath, "prange": numba.prange if parallel else range,
             **_JIT_HELPERS, **_TYPE_FNS}
        exec(compile(src, f"<dispatch_jit {name}>", "exec"), g)
        disp = numba.njit(parallel=parallel, error_model="numpy", nogil=parallel)(g[name])
        ep = disp.compile(argtypes)
        _KERNELS[key] = ep
    return ep, True
