"""A plan as one compiled function: every step of a plan (plan.py) called from one generated
``numba.njit`` function, so that a call costs one Python-level call instead of one per step.

An interpreted plan calls its steps from Python: each fused loop, each matmul, each loss
kernel is a call through the dispatcher or a step object (microseconds each, which on a
small training step is as much as the arithmetic).  Where every step is one the plan
function can call (a fused loop without a reduction epilogue, a lone elementwise op as a
one-node loop, or an op of planops.RULES) and the plan reads no runtime scalar, the plan's
first interpreted run fixes the shape, dtype and layout of every value, and ``build``
generates::

    @numba.njit(error_model="numpy")
    def fused_0(a0, a1, o0): ...          # codegen.py's loop, as the FusedStep runs it

    def plan_fn(i0, i1, i2, v6, v7, w0, p0):
        np.dot(i0, i1.T, v6)              # planops.py's rules: what the eager kernel calls
        fused_0(v6, v7)
        ...
        return -1

with the inputs (``i``), every value a step defines (``v``) and the work arrays (``w``)
passed in, allocated by NumPy in Python (allocation inside njit is slower here), and the
loops' scalars (``p``) fixed by the trace.  It is compiled through the one compile cache
(dispatch_jit/jit/cache.py, kind "plan"; on disk too, so a fresh process loads it).

Per call, ``PlanFunction.__call__`` checks that each input has the recorded shape and dtype
and is C-contiguous (else None: the plan runs interpreted for that call), allocates, calls,
and wraps the outputs.  Each rule calls what the eager kernel calls, so results are the
interpreted plan's bit for bit (tests/compiler/test_planfn.py); a kernel that refuses its
input (a target out of range) returns the node's position and the call runs interpreted,
which raises eager mode's own error.
"""

from __future__ import annotations

import numba
import numpy as np

from dispatch_jit.bufferpool import pool as _pool
from dispatch_jit.jit import cache
from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN
from dispatch_jit.signature import CONTIGUOUS_BIT
from dispatch_jit.tensor import Tensor

from .codegen import Codegen, loop_globals
from .ir import vars_in
from .passes import lone_region
from .planops import HELPERS, RULES, Site

__all__ = ["PlanFunction", "build", "compiled_functions"]

_KIND = "plan"
_NAME = "plan_fn"
_new = object.__new__
_OPTIONS = {"error_model": "numpy", "boundscheck": False}


def compiled_functions() -> int:
    """Plan functions compiled or loaded in this process."""
    return cache.size(_KIND)


class PlanFunction:
    """One plan's compiled function for one set of input sizes (see the module docstring)."""

    def __init__(self, ep, src, in_meta, consts, allocs, scalars, outs, refused_by):
        self.ep, self.source = ep, src
        self.in_meta = in_meta          # per input: (shape, dtype)
        self.consts = consts            # (captured tensor, shape, dtype): read per call, as ConstStep does
        self.allocs = allocs            # per defined value, then per work array: (shape, dtype, size)
        self.scalars = scalars
        self.outs = outs                # (value id, index into the allocations or -1 - input position, sig)
        self.refused_by = refused_by    # node position -> its op's name, for the refusals' reason
        self.calls = self.declined = 0
        self.declined_reason = ""

    def __call__(self, tensors):
        """{value id: tensor} of the plan's outputs, or None where this call runs interpreted."""
        arrays = []
        for t, (shape, dt) in zip(tensors, self.in_meta):
            a = t._data
            if a.shape != shape or a.dtype != dt or not t._sig & CONTIGUOUS_BIT:
                return self._decline(f"an input of shape {a.shape}, {a.dtype}, not the recorded C-contiguous "
                                     f"{shape}, {dt}")
            arrays.append(a)
        for t, shape, dt in self.consts:
            a = t._data
            if a.shape != shape or a.dtype != dt or not a.flags.c_contiguous:
                return self._decline("a captured tensor changed its shape, dtype or layout")
            arrays.append(a)
        small = _pool.small
        bufs = [np.empty(s, d) if n < small else _pool.empty(s, d, n) for s, d, n in self.allocs]
        code = self.ep(*arrays, *bufs, *self.scalars)
        if code >= 0:
            return self._decline(f"{self.refused_by[code]} refused its input")
        self.calls += 1
        env = {}
        for vid, k, sig in self.outs:
            if k < 0:
                env[vid] = tensors[-1 - k]
            else:
                t = _new(Tensor)
                t._data = bufs[k]
                t._sig = sig
                env[vid] = t
        return env

    def _decline(self, why: str):
        self.declined += 1
        self.declined_reason = why
        return None


def _fused_call(region, gen, site, name, scalars, parallel):
    """(the loop's def, its call) as source, or why it stays out."""
    if region.reduce is not None:
        return "a fused loop with a reduction epilogue"
    if gen.checks:
        return "a fused loop that checks its input (it raises from inside its loop)"
    shape = site.array_of(region.outputs[0]).shape
    for v in list(region.inputs) + list(region.outputs):
        a = site.array_of(v)
        if a.shape != shape or not a.flags.c_contiguous:
            return "a fused loop over broadcast or strided operands"
    p = []
    for s in gen.scalars:
        if type(s) not in (bool, int, float):
            return "a fused loop with a non-Python scalar"
        p.append(f"p{len(scalars)}")
        scalars.append(s)
    big = parallel and int(np.prod(shape)) >= PARALLEL_MIN
    # a big loop in parallel, as the interpreted plan runs it (an elementwise loop: the same bits)
    deco = f"@numba.njit(parallel={big}, error_model='numpy')"
    src = gen.source(True).replace(f"def fused_{region.index}(", f"{deco}\ndef {name}(", 1)
    if not big:
        src = src.replace("prange(", "range(")
    args = [site.names[v] for v in region.inputs] + p + [site.names[v] for v in region.outputs]
    return [src], [f"{name}({', '.join(args)})"]


def _eager_call(node, graph, site, pos, scalars, parallel):
    """(defs, calls) as source for an op the interpreted plan dispatches eagerly: its rule's, or a
    lone elementwise op's one-node loop; or why it stays out."""
    rule = RULES.get(node.name)
    if rule is not None:
        got = rule(node, site)
        return got if isinstance(got, str) else ([], got)
    region = lone_region(node, graph)
    if region is None:
        return f"{node.name} has no rule in the plan function (compiler/planops.py)"
    region.index = pos
    return _fused_call(region, Codegen(region, graph.types), site, f"loop_{pos}", scalars, parallel)


class _Site(Site):
    def array_of(self, vid: int) -> np.ndarray:
        return self.arrays[vid]


def build(plan, env: dict, tensors, scalars, parallel: bool) -> PlanFunction | str:
    """The plan function of ``plan`` for the values ``env`` holds after one interpreted run on
    ``tensors``, or why there is none."""
    if scalars:
        return "the plan reads runtime scalars (a Python number argument, read per call)"
    names, arrays, allocs, consts = {}, {}, [], []
    for k, (v, t) in enumerate(zip(plan.inputs, tensors)):
        names[v], arrays[v] = f"i{k}", t._data
    for s in plan.steps:
        if s.plan_kind == "const":
            names[s.vid], arrays[s.vid] = f"c{len(consts)}", s.value._data
            consts.append((s.value, s.value._data.shape, s.value._data.dtype))
    defined = []            # (value id, the recorded tensor)
    for v, t in env.items():
        if v >= 0 and v not in names:
            if not isinstance(t, Tensor) or not t._data.flags.c_contiguous:
                return f"value %{v} is not a C-contiguous CPU tensor"
            names[v], arrays[v] = f"v{v}", t._data
            defined.append((v, t))
    work = []

    def scratch(shape, dtype):
        work.append((tuple(shape), np.dtype(dtype)))
        return f"w{len(work) - 1}"

    body, defs, loop_scalars, refused_by = [], [], [], {}
    for pos, s in enumerate(plan.steps):
        site = _Site(names, arrays, scratch, f"return {pos}")
        kind = s.plan_kind
        if kind == "const":
            continue
        if kind == "fused":
            got = _fused_call(s.region, s.gen, site, f"loop_{pos}", loop_scalars, parallel)
        elif kind == "eager":
            got = _eager_call(s.node, plan.graph, site, pos, loop_scalars, parallel)
            refused_by[pos] = s.node.name
        else:
            return f"a {kind} step"
        if isinstance(got, str):
            return got
        defs += got[0]
        body += got[1]
    params = [names[v] for v in plan.inputs] + [f"c{k}" for k in range(len(consts))] + \
             [names[v] for v, _ in defined] + [f"w{k}" for k in range(len(work))] + \
             [f"p{k}" for k in range(len(loop_scalars))]
    src = "\n\n".join(defs + [f"def {_NAME}({', '.join(params)}):\n" +
                              "".join(f"    {ln}\n" for ln in body) + "    return -1\n"])
    argtypes = tuple(numba.typeof(a) for a in [arrays[v] for v in plan.inputs] + [c[0]._data for c in consts]
                     + [t._data for _, t in defined] + [np.empty(s, d) for s, d in work] + loop_scalars)
    glb = {**loop_globals(True), "numba": numba, **HELPERS}
    ep, how = cache.njit_source(_KIND, src, _NAME, argtypes, glb, options=_OPTIONS, disk=True)
    plan.stats.compiles += how == "compiled"
    plan.stats.disk_hits += how == "disk"
    allocs = [(t._data.shape, t._data.dtype, t._data.size) for _, t in defined] + \
             [(s, d, int(np.prod(s))) for s, d in work]
    slot = {v: k for k, (v, _) in enumerate(defined)}
    inputs = {v: k for k, v in enumerate(plan.inputs)}
    outs = []
    for var in vars_in(plan.outputs):
        v = var.id
        if v in slot:
            outs.append((v, slot[v], env[v]._sig))
        elif v in inputs:
            outs.append((v, -1 - inputs[v], None))
        else:
            return f"output %{v} is a captured tensor"
    return PlanFunction(ep, src, [(a._data.shape, a._data.dtype) for a in tensors], consts, allocs,
                        tuple(loop_scalars), outs, refused_by)
