"""A plan as one compiled function: every step of a plan (plan.py) called from one generated
``numba.njit`` function, so that a call costs one Python-level call instead of one per step.

An interpreted plan calls its steps from Python: each fused loop, each matmul, each loss
kernel is a call through the dispatcher or a step object (microseconds each, which on a
small training step is as much as the arithmetic).  Where every step is one the plan
function can call (a fused loop, with its reduction epilogue if any; a lone elementwise op
as a one-node loop; a view op, as ``as_strided`` of the contiguous value it views; or an op
of planops.RULES; a runtime scalar only as a loop's parameter), the plan's
first interpreted run fixes the shape, dtype and layout of every value, and ``build``
generates::

    @numba.njit(error_model="numpy")
    def fused_0(a0, a1, o0): ...          # codegen.py's loop, as the FusedStep runs it

    def plan_fn(i0, i1, i2, v6, v7, w0, p0):
        np.dot(i0, i1.T, v6)              # run/call_rules.py's rules: what the eager kernel calls
        fused_0(v6, v7)
        ...
        return -1

with the inputs (``i``), every value a step defines (``v``) and the work arrays (``w``)
passed in, allocated by NumPy in Python (allocation inside njit is slower here), and the
loops' scalars (``p``) fixed by the trace.  It is compiled through the one compile cache
(dispatch_jit/jit/cache.py, kind "plan"; on disk too, so a fresh process loads it).

Per call, ``PlanFunction.__call__`` checks that each input has the recorded shape and dtype
and is C-contiguous, or has the recorded strides where it was strided at the first call (else
None: the plan runs interpreted for that call), allocates, calls, and wraps the outputs (a
returned view: as eager's view op, of its root, which is returned with it).  Only the outputs are new arrays at every call (a caller may keep
them); the intermediates and work arrays, which never leave the function, are allocated once
and reused (``scratch``: a set is taken from a free list for the length of a call, so two
threads calling one plan function never share one; sets of large arrays come from the
output pool at each call instead, so that memory is not held between calls).  Each rule calls what the eager kernel calls, so results are the
interpreted plan's bit for bit (tests/compiler/run/test_plan_function.py); a kernel that refuses its
input (a target out of range) returns the node's position and the call runs interpreted,
which raises eager mode's own error.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.lib.stride_tricks import as_strided

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.bufferpool import pool as _pool
from dispatch_jit.dtypes import BF16_STORAGE
from dispatch_jit.jit import cache
from dispatch_jit.kernels.support.loops import MAX_LOOP_NDIM, PARALLEL_MIN, full_chunks
from dispatch_jit.signature import CONTIGUOUS_BIT
from dispatch_jit.tensor import Tensor, wrap_view

from ..codegen import Codegen, loop_globals
from ..elementwise import reduced_shape
from ..graph.ir import Var, is_runtime_scalar, vars_in
from ..graph.passes import lone_reduction, lone_region
from ..graph.views import is_view, may_copy
from .call_rules import HELPERS, RULES, RUNTIME_READERS, Site
from .segments import compile_plan

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

    def __init__(self, ep, src, in_meta, consts, allocs, scalars, outs, refused_by, chunked=(), nout=None):
        self.ep, self.source = ep, src
        # per input: (shape, dtype, strides): strides None where it was C-contiguous (and must be); else
        # the recorded strides, which the function was generated and typed for (a saved strided view: the
        # same strides at every call), and which a call must match
        self.in_meta = in_meta
        self.consts = consts            # (captured tensor, shape, dtype): read per call, as ConstStep does
        # per defined value (the outputs' first), then per work array: (shape, dtype, size)
        self.allocs = allocs
        self.nout = len(allocs) if nout is None else nout    # the first nout are new arrays at every call
        # the rest, scratch: small ones kept in the sets of the free list, large ones from the pool per call
        self.small = _pool.small
        self.big = [(k, s, d, n) for k, (s, d, n) in enumerate(allocs[self.nout:]) if n >= self.small]
        self.free: list = []
        self.scalars = scalars
        self.outs = outs                # (value id, index into the allocations or -1 - input position, sig)
        self.refused_by = refused_by    # node position -> its op's name, for the refusals' reason
        # (allocation index, (n, cap), dtype): a full reduction's partial sums, one per chunk of its
        # n elements (at most cap: a strided loop's chunks are rows); how many chunks the eager
        # kernel takes is read per call (its thread state), as FusedStep.__call__ reads it
        self.chunked = chunked
        self.calls = self.declined = 0
        self.declined_reason = ""
        self.runtime_types = ()         # per runtime scalar: the Python type its parameter was typed for
        self.inplace = []               # (allocation index, input position): written into the input (_inplace)
        # per returned view: (value id, its root's allocation index or -1 - input position, the root's
        # id and signature, the view's offset in elements, shape, strides)
        self.view_outs = ()
        self.parts = None               # what build generated the source from (run/profile.py)

    def __call__(self, tensors, runtime=()):
        """{value id: tensor} of the plan's outputs, or None where this call runs interpreted;
        ``runtime``: the values of the plan's runtime scalars (Plan.run's ``scalars``)."""
        arrays = []
        for t, (shape, dt, st) in zip(tensors, self.in_meta):
            a = t._data
            if a.shape != shape or a.dtype != dt or not (t._sig & CONTIGUOUS_BIT if st is None else a.strides == st):
                lay = "C-contiguous" if st is None else f"strides {st}"
                return self._decline(f"an input of shape {a.shape}, {a.dtype}, strides {a.strides}, not the "
                                     f"recorded {shape}, {dt}, {lay}")
            arrays.append(a)
        for t, shape, dt in self.consts:
            a = t._data
            if a.shape != shape or a.dtype != dt or not a.flags.c_contiguous:
                return self._decline("a captured tensor changed its shape, dtype or layout")
            arrays.append(a)
        small = _pool.small
        # an output written straight into its input's array, where no other input can see that memory:
        # arrays that own their memory (base None) and are distinct cannot overlap
        into = self.inplace if self.inplace and len({id(a) for a in arrays}) == len(arrays) and \
            all([a.base is None for a in arrays]) else ()
        bufs = [np.empty(s, d) if n < small else _pool.empty(s, d, n)
                for s, d, n in (self.fresh if into else self.allocs[:self.nout])]
        for k, pos in into:
            bufs.insert(k, arrays[pos])
        try:
            scratch = self.free.pop()       # atomic: no other call holds this set now
        except IndexError:
            scratch = [None if n >= self.small else np.empty(s, d) for s, d, n in self.allocs[self.nout:]]
        for k, s, d, n in self.big:
            scratch[k] = _pool.empty(s, d, n)
        nout = self.nout
        for k, (n, cap), d in self.chunked:
            # as many partial sums as the eager kernel takes now (its thread state), read per call
            c = full_chunks(n)
            c = c if cap is None else min(c, cap)
            if scratch[k - nout].shape[0] != c:
                scratch[k - nout] = np.empty(c, d)
        code = self.ep(*arrays, *bufs, *scratch, *self.scalars, *[t(x) for t, x in zip(self.runtime_types, runtime)])
        for k, *_ in self.big:
            scratch[k] = None               # the pool's again once this call is over
        self.free.append(scratch)
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
        for vid, k, root, sig, off, shape, strides in self.view_outs:
            # as the interpreted run's view op: a view of the root's tensor, sharing its version
            # counter, with the root as its _base (which keeps the memory alive)
            base = env.get(root)
            if base is None:
                if k < 0:
                    base = tensors[-1 - k]
                else:
                    base = env[root] = _new(Tensor)
                    base._data = bufs[k]
                    base._sig = sig
            env[vid] = wrap_view(base, as_strided(base._data.reshape(-1)[off:], shape, strides))
        return env

    def _decline(self, why: str):
        self.declined += 1
        self.declined_reason = why
        return None


def _fused_call(region, gen, site, name, scalars, parallel):
    """(the loop's def, its call) as source, or why it stays out."""
    if gen.checks:
        return "a fused loop that checks its input (it raises from inside its loop)"
    if not region.inputs:
        return "a fused loop without an input"
    ins = [site.array_of(v) for v in region.inputs]
    try:
        shape = broadcast_shapes(*[a.shape for a in ins])
    except ValueError:         # FusedStep.__call__ runs such a region's ops one by one
        return _NO_BROADCAST
    if any(site.array_of(v).shape != shape for v in region.outputs):
        return "a fused loop with an output smaller than its loop"
    # as FusedStep.__call__'s partial outputs: a reduced value that reads only some inputs may be
    # smaller than the loop, and summed over the loop it would count each element again and again
    if region.reduce is not None and \
            broadcast_shapes(*[ins[i].shape for i in region.reduce_deps]) != shape:
        return "a fused loop with a reduced value smaller than its loop"
    # as FusedStep.__call__: the flat loop where every input is contiguous and of the loop's shape (and
    # not a view made inside the function: Numba types those as any-layout arrays), else the nest
    # over the inputs broadcast to the loop's shape
    flat = all(a.shape == shape and a.flags.c_contiguous and v not in site.views for v, a in zip(region.inputs, ins))
    red, n = region.reduce, int(np.prod(shape))
    site.elementwise = flat and red is None     # each element written after its inputs' elements are read
    if not flat and len(shape) > MAX_LOOP_NDIM and (red is None or gen.reduce_mode != "full"):
        return f"a fused loop over {len(shape)} dimensions of strided or broadcast operands"
    extra, threads = [], True
    if red is not None:
        # the work arrays FusedStep.__call__ gives the epilogue, so that it adds up as there (and as
        # the eager kernel: the same bits)
        mode = gen.reduce_mode
        if n == 0:
            return "a reduction over an empty shape"
        if why := gen.unlike_eager(shape):
            return why
        if mode != "full" and len(shape) > MAX_LOOP_NDIM:
            return f"a reduction over {len(shape)} dimensions (one nested loop each)"
        extra.append(site.names[red.out])
        if mode == "full":
            extra.append(site.scratch((1,), red.acc.np, chunks_of=(n, None if flat or gen.fold.ordered else shape[0])))
            threads = full_chunks(n) > 1     # as FusedStep.__call__: one chunk runs serially (the same bits)
        elif mode == "cols":
            extra.append(site.scratch(reduced_shape(shape, red.axes, True), red.acc.np))
            threads = 0 not in red.axes      # as FusedStep.threads: no race-free prange over dimension 0
    p = []
    for s in gen.scalars:
        if is_runtime_scalar(s):     # read per call: a parameter of the plan function, r<index>
            p.append(f"r{s.index}")
            continue
        if type(s) not in (bool, int, float):
            return "a fused loop with a non-Python scalar"
        p.append(f"p{len(scalars)}")
        scalars.append(s)
    big = parallel and n >= PARALLEL_MIN and threads
    # a big loop in parallel, as the interpreted plan runs it (the same bits: an elementwise loop
    # does not depend on it, and a reduction's chunks are its work array's, not its threads')
    deco = f"@numba.njit(parallel={big}, error_model='numpy')"
    src = gen.source(flat).replace(f"def fused_{region.index}(", f"{deco}\ndef {name}(", 1)
    if not big:
        src = src.replace("prange(", "range(")
    args = [site.names[v] if a.shape == shape else f"np.broadcast_to({site.names[v]}, {shape})"
            for v, a in zip(region.inputs, ins)] + p + [site.names[v] for v in region.outputs] + extra
    return [src], [f"{name}({', '.join(args)})"]


# a region whose outputs do not share one loop: FusedStep.__call__ runs its ops one by one, and so
# does the plan function (each a one-node loop: an elementwise op's bits do not depend on the loop)
_NO_BROADCAST = "a fused loop over operands that do not broadcast together"


def _view_call(node, site):
    """A view op: the same view of the same memory, made inside the function (``as_strided`` of
    the contiguous array it views: the interpreted run's view fixes its offset, shape and strides,
    which the same sizes and layouts give at every call); or why not.  A view of k tensors at once
    (graph/views.py's ViewOp, sunk through an elementwise chain) makes k views."""
    bases = [a for a in node.args if isinstance(a, Var)]
    if not bases or len(bases) != len(node.outs):
        return f"{node.name}: a view without one tensor operand per output"
    calls = []
    # a ViewOp first expands leaves of different shapes to their common shape (ViewOp.__call__)
    common = broadcast_shapes(*[site.array_of(b.id).shape for b in bases]) if len(bases) > 1 else None
    for base, vid in zip(bases, node.outs):
        root = site.views.get(base.id, base.id)
        r, a = site.array_of(root), site.array_of(vid)
        if not r.flags.c_contiguous or r.dtype != a.dtype:
            return f"{node.name}: a view of a strided value"
        off = a.__array_interface__["data"][0] - r.__array_interface__["data"][0]
        # every element the view reaches lies in the viewed array (else the op made a copy)
        lo = off + sum(min(0, (n - 1) * st) for n, st in zip(a.shape, a.strides))
        hi = off + sum(max(0, (n - 1) * st) for n, st in zip(a.shape, a.strides)) + a.itemsize
        if a.size and a.flags.c_contiguous and not np.may_share_memory(a, r) and \
                (getattr(node.op, "may_copy", False) or may_copy(node.op)):
            # a reshape that copied (the strides cannot express the new shape): the same copy, a
            # C-contiguous array made inside, at every call of these sizes and layouts
            src = site.names[base.id]
            if common is not None and site.array_of(base.id).shape != common:
                src = f"np.ascontiguousarray(np.broadcast_to({src}, {common}))"
            elif base.id in site.views or not site.array_of(base.id).flags.c_contiguous:
                src = f"np.ascontiguousarray({src})"
            calls.append(f"{site.names[vid]} = {src}.reshape({a.shape})")
            continue
        if a.size == 0 or off % a.itemsize or lo < 0 or hi > r.nbytes:
            return f"{node.name} made a copy, not a view"
        site.views[vid] = root
        calls.append(f"{site.names[vid]} = _as_strided({site.names[root]}.reshape(-1)[{off // a.itemsize}:], "
                     f"{a.shape}, {a.strides})")
    return [], calls


def _eager_call(node, graph, site, name, scalars, parallel):
    """(defs, calls) as source for an op the interpreted plan dispatches eagerly: its rule's, a
    view's, or a lone elementwise op's one-node loop; or why it stays out."""
    if is_view(node):
        return _view_call(node, site)
    rule = RULES.get(node.name)
    if rule is not None:
        got = rule(node, site)
        return got if isinstance(got, str) else ([], got)
    region = lone_region(node, graph) or lone_reduction(node, graph)
    if region is None:
        return f"{node.name} has no rule in the plan function (compiler/run/call_rules.py)"
    region.index = 0
    return _fused_call(region, Codegen(region, graph.types), site, name, scalars, parallel)


def _lone_loop_reads_runtime(node, graph) -> bool:
    """Whether ``_eager_call`` makes ``node`` a one-node loop, which reads its runtime scalars as
    parameters of the plan function (``r<index>``), as a fused loop does: a lone elementwise op
    (lazy mode's ``mask == 0``, ``x * float(i)``) that has no rule and is no view."""
    return node.name not in RULES and not is_view(node) and lone_region(node, graph) is not None


class _Site(Site):
    views: dict = None     # value id -> the id of the contiguous value it is a view of (made inside)
    elementwise = False    # the step is a flat loop without reduction (``_inplace``)

    def array_of(self, vid: int) -> np.ndarray:
        return self.arrays[vid]


_NO_NUMBA_DTYPES = frozenset([np.dtype(np.float16), BF16_STORAGE])


def build(plan, env: dict, tensors, scalars, parallel: bool) -> PlanFunction | str:
    """The plan function of ``plan`` for the values ``env`` holds after one interpreted run on
    ``tensors``, or why there is none."""
    runtime = [float if isinstance(x, float) else int if isinstance(x, int) else None for x in scalars]
    if None in runtime:
        return "a runtime scalar that is not a Python float or int"
    if any(t.is_cuda for t in tensors):
        return "a CUDA input (plan functions are CPU code)"
    names, arrays, allocs, consts = {}, {}, [], []
    for k, (v, t) in enumerate(zip(plan.inputs, tensors)):
        names[v], arrays[v] = f"i{k}", t._data
    for s in plan.steps:
        if s.plan_kind == "const":
            names[s.vid], arrays[s.vid] = f"c{len(consts)}", s.value._data
            consts.append((s.value, s.value._data.shape, s.value._data.dtype))
    defined = []            # (value id, the recorded tensor)
    view_outs = {v for s in plan.steps if s.plan_kind == "eager" and is_view(s.node) for v in s.node.outs}
    for v, t in env.items():
        if v in view_outs:
            if not isinstance(t, Tensor):
                return f"value %{v} is not a CPU tensor"
            names[v], arrays[v] = f"v{v}", t._data
        elif v >= 0 and v not in names:
            if not isinstance(t, Tensor) or not t._data.flags.c_contiguous:
                return f"value %{v} is not a C-contiguous CPU tensor"
            names[v], arrays[v] = f"v{v}", t._data
            defined.append((v, t))
    # Numba's CPU target has no float16 arithmetic or array arguments (eager kernels and the
    # interpreted plan compute float16 through float32 in NumPy)
    if any(a.dtype in _NO_NUMBA_DTYPES for a in arrays.values()):
        return "a float16 or bfloat16 value (Numba's CPU target has neither type: the plan runs interpreted)"
    work = []

    def scratch(shape, dtype, chunks_of=None):
        work.append((tuple(shape), np.dtype(dtype), chunks_of))
        return f"w{len(work) - 1}"

    body, defs, loop_scalars, refused_by, views = [], [], [], {}, {}
    segments = []           # (step position, how many lines of body it wrote): run/profile.py's stamps
    reads, made_by, refusing = {}, {}, set()     # for _inplace: what each step reads, where flat loops write
    for pos, s in enumerate(plan.steps):
        site = _Site(names, arrays, scratch, f"return {pos}")
        site.views = views
        kind = s.plan_kind
        if kind == "const":
            continue
        if kind == "fused":
            got = _fused_call(s.region, s.gen, site, f"loop_{pos}", loop_scalars, parallel)
            if got == _NO_BROADCAST:
                got = ([], [])
                for k, e in enumerate(s.eager):
                    one = _eager_call(e.node, plan.graph, site, f"loop_{pos}_{k}", loop_scalars, parallel)
                    if isinstance(one, str):
                        got = one
                        break
                    got = (got[0] + one[0], got[1] + one[1])
        elif kind == "eager":
            if s.node.name not in RUNTIME_READERS and any(
                    is_runtime_scalar(a) for a in list(s.node.args) + list(s.node.kwargs.values())) and \
                    not _lone_loop_reads_runtime(s.node, plan.graph):
                return f"{s.node.name} takes a runtime scalar (only loops read them per call)"
            got = _eager_call(s.node, plan.graph, site, f"loop_{pos}", loop_scalars, parallel)
            refused_by[pos] = s.node.name
        else:
            return f"a {kind} step"
        if isinstance(got, str):
            return got
        defs += got[0]
        body += got[1]
        segments.append((pos, len(got[1])))
        ins = s.region.inputs if kind == "fused" else [v for e in ([s] if kind == "eager" else s.eager)
                                                         for v in e.node.inputs()]
        reads[pos] = {views.get(v, v) for v in ins}
        if kind == "fused" and site.elementwise:
            made_by.update((v, pos) for v in s.region.outputs)
        if any(f"return {pos}" in ln for ln in got[1]):
            refusing.add(pos)
    # the values the plan returns first: new arrays per call; the others are scratch (PlanFunction).
    # A returned view is made of a new array per call too: the value it views (its root) is returned
    # with it, so the caller's view keeps that memory alive and no later call writes into it
    returned = {v.id for v in vars_in(plan.outputs)}
    returned |= {views[v] for v in returned if v in views}
    defined.sort(key=lambda vt: vt[0] not in returned)
    slots = {v: k for k, (v, _) in enumerate(defined)}
    inplace = _inplace(plan, slots, reads, made_by, refusing)
    params = [names[v] for v in plan.inputs] + [f"c{k}" for k in range(len(consts))] + \
             [names[v] for v, _ in defined] + [f"w{k}" for k in range(len(work))] + \
             [f"p{k}" for k in range(len(loop_scalars))] + [f"r{k}" for k in range(len(runtime))]
    src = "\n\n".join(defs + [f"def {_NAME}({', '.join(params)}):\n" +
                              "".join(f"    {ln}\n" for ln in body) + "    return -1\n"])
    argtypes = tuple(numba.typeof(a) for a in [arrays[v] for v in plan.inputs] + [c[0]._data for c in consts]
                     + [t._data for _, t in defined] + [np.empty(s, d) for s, d, _ in work] + loop_scalars
                     + [t(x) for t, x in zip(runtime, scalars)])
    glb = {**loop_globals(True), "numba": numba, "_as_strided": as_strided, **HELPERS}
    # a large body compiles as segments (segments.py), a small one as the one function
    ep, how = compile_plan(_KIND, src, (defs, body, segments, params, argtypes, glb), _OPTIONS)
    plan.stats.compiles += how == "compiled"
    plan.stats.disk_hits += how == "disk"
    allocs = [(t._data.shape, t._data.dtype, t._data.size) for _, t in defined] + \
             [(s, d, int(np.prod(s))) for s, d, _ in work]
    chunked = [(len(defined) + k, n, d) for k, (_, d, n) in enumerate(work) if n is not None]
    slot = {v: k for k, (v, _) in enumerate(defined)}
    inputs = {v: k for k, v in enumerate(plan.inputs)}
    outs, view_outs = [], []
    for var in vars_in(plan.outputs):
        v = var.id
        if v in slot:
            outs.append((v, slot[v], env[v]._sig))
        elif v in inputs:
            outs.append((v, -1 - inputs[v], None))
        elif v in views and (views[v] in slot or views[v] in inputs):
            root = views[v]
            r, a = arrays[root], arrays[v]
            off = (a.__array_interface__["data"][0] - r.__array_interface__["data"][0]) // a.itemsize
            k = slot[root] if root in slot else -1 - inputs[root]
            view_outs.append((v, k, root, env[root]._sig, off, a.shape, a.strides))
        elif v in views:
            return f"output %{v} is a view of a captured tensor"
        else:
            return f"output %{v} is a captured tensor"
    in_meta = [(a._data.shape, a._data.dtype, None if a._data.flags.c_contiguous else a._data.strides)
               for a in tensors]
    fn = PlanFunction(ep, src, in_meta, consts, allocs,
                      tuple(loop_scalars), outs, refused_by, chunked, sum(v in returned for v, _ in defined))
    fn.runtime_types = tuple(runtime)
    fn.view_outs = tuple(view_outs)
    fn.inplace = sorted(inplace)       # ascending: inserted in order, each at its own index
    fn.fresh = [a for k, a in enumerate(allocs[:fn.nout]) if k not in dict(inplace)]
    fn.parts = (defs, body, segments, params, argtypes, glb)     # run/profile.py regenerates from them
    return fn


def _inplace(plan, slots, reads, made_by, refusing) -> list:
    """(allocation index, input position) of each output that the function may write into that
    input's array (``plan.inplace``: output value id -> input position, the values a caller copies
    into those inputs right after the call, a compiled step's rebound parameters): where a flat
    elementwise loop makes it (each element written after that element's inputs are read), no
    later step reads the input, no later step can refuse its input (the call would rerun
    interpreted on overwritten inputs), the input is no output, and the value is returned once."""
    out = []
    returned = [v.id for v in vars_in(plan.outputs)]
    for v, pos in (getattr(plan, "inplace", None) or {}).items():
        iv, at = plan.inputs[pos], made_by.get(v)
        if at is None or iv in returned or returned.count(v) != 1 or v not in slots:
            continue
        if any(q > at and (iv in r or q in refusing) for q, r in reads.items()):
            continue
        out.append((slots[v], pos))
    return out
