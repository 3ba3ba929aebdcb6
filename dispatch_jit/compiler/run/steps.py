"""The steps of a plan, one per node.  A step is called with the plan's environment
(value id -> value) and defines its outputs in it.

* ``ConstStep``: a tensor captured from the function's closure;
* ``EagerStep``: an op run through the eager dispatcher (matmul, reductions,
  views, custom ops, anything unfused, and a fused region's nodes when a
  call's sizes do not fit its loop);
* ``FusedStep``: one generated loop for a fused region.  Per call it takes
  the broadcast shape of its inputs as the iteration shape, allocates the
  outputs with NumPy, picks the flat or strided loop (serial or parallel by
  size, as the eager kernels do) and compiles that variant on first use.
  Large outputs (and accumulator buffers) come from the output pool
  (dispatch_jit/bufferpool.py): memory a previous call's output used, once
  nothing refers to that output any more, so its pages are already mapped.
  If the sizes make an output smaller than the iteration shape (equal ndim,
  broadcast dims), or do not broadcast at all, the region runs its nodes
  eagerly for that call, which also raises eager mode's own errors.
  A region with a reduction epilogue also allocates the reduction's output
  (and its per-chunk or per-output accumulator buffer) and defines it as
  the step's last value; an empty iteration space runs eagerly (max/min of
  nothing raise there, sum/mean/prod give their identities);
* ``cuda.CudaFusedStep`` (compiler/cuda.py): the same for a region on CUDA
  tensors, one ``numba.cuda.jit`` grid-stride kernel.

``Stats`` holds the counters a compiled function shares with its plans.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.bufferpool import pool as _pool
from dispatch_jit.jit.threads import run as _watch
from dispatch_jit.kernels.support.loops import MAX_LOOP_NDIM, PARALLEL_MIN, full_chunks
from dispatch_jit.signature import CONTIGUOUS_BIT, make_sig
from dispatch_jit.tensor import CPU_BITS, Tensor

from ..codegen import Codegen, compile_loop, crosswise
from ..elementwise import reduced_shape
from ..graph.ir import Graph, Var, is_runtime_scalar, rebuild, scalar_var

__all__ = ["Stats", "ConstStep", "EagerStep", "FusedStep", "subst"]


class Stats:
    """Counters shared by a compiled function and its plans."""

    def __init__(self):
        self.compiles = 0         # loops Numba compiled
        self.disk_hits = 0        # loops loaded from the disk cache instead
        self.region_eager_runs = 0
        self.region_eager_reason = ""


def subst(x, env):
    """``x`` with each Var replaced by its value in ``env``."""
    if isinstance(x, Var):
        return env[x.id]
    if isinstance(x, (list, tuple)):
        return rebuild(x, (subst(y, env) for y in x))
    if isinstance(x, dict):
        return {k: subst(v, env) for k, v in x.items()}
    return x


class ConstStep:
    plan_kind = "const"       # what a plan function (run/function.py) asks of a step

    def __init__(self, node):
        self.vid, self.value = node.outs[0], node.value

    def __call__(self, env):
        env[self.vid] = self.value


def _scalars_as_vars(x):
    """``x`` with each runtime scalar replaced by the Var of its environment slot."""
    if is_runtime_scalar(x):
        return Var(scalar_var(x.index))
    if isinstance(x, (list, tuple)):
        return rebuild(x, (_scalars_as_vars(y) for y in x))
    if isinstance(x, dict):
        return {k: _scalars_as_vars(v) for k, v in x.items()}
    return x


def _has_var(x) -> bool:
    if isinstance(x, Var):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_var(y) for y in x)
    if isinstance(x, dict):
        return any(_has_var(y) for y in x.values())
    return False


class EagerStep:
    plan_kind = "eager"

    def __init__(self, node):
        self.node = node
        self.op, self.outs = node.op, node.outs
        self.args, self.kwargs = _scalars_as_vars(node.args), _scalars_as_vars(node.kwargs)
        # where no Var is nested in a container (the common call), the positions of the Vars,
        # substituted without walking every argument (subst's recursion): None otherwise
        flat = not self.kwargs and not any(isinstance(x, (list, tuple, dict)) and _has_var(x) for x in self.args)
        self.var_pos = tuple((i, x.id) for i, x in enumerate(self.args) if isinstance(x, Var)) if flat else None

    def __call__(self, env):
        if self.var_pos is not None:
            a = list(self.args)
            for i, v in self.var_pos:
                a[i] = env[v]
            out = self.op(*a)
        else:
            out = self.op(*subst(self.args, env), **subst(self.kwargs, env))
        if len(self.outs) == 1:
            env[self.outs[0]] = out
        else:
            for v, o in zip(self.outs, out):
                env[v] = o


_new = object.__new__


class FusedStep:
    plan_kind = "fused"       # what a plan function (run/function.py) asks of a step

    def __init__(self, node, graph: Graph, stats: Stats, parallel: bool):
        self.region = r = node.value
        self.gen = Codegen(r, graph.types)
        self.stats, self.parallel = stats, parallel
        self.in_dtypes = [graph.types[v].dtype for v in r.inputs]
        self.out_dtypes = [graph.types[v].dtype for v in r.outputs]
        self.out_np = [d.np for d in self.out_dtypes]
        self.out_sigs = [make_sig(CPU_BITS, d, r.ndim, True) for d in self.out_dtypes]
        if r.reduce is not None:
            self.out_sigs.append(make_sig(CPU_BITS, r.reduce.result, r.reduce.out_ndim, True))
        self.scalars = tuple(self.gen.scalars)
        # loop parameters that are runtime scalars: (position, environment slot), read per call
        self.runtime = tuple((j, scalar_var(x.index)) for j, x in enumerate(self.scalars) if is_runtime_scalar(x))
        self.name = f"fused_{r.index}"
        # outputs that do not read every input may be smaller than the iteration shape
        self.partial = [(j, idx) for j, (v, idx) in enumerate(r.deps.items()) if len(idx) < len(r.inputs)]
        self.loops: dict = {}
        # the threads' watch: best seconds per element of each parallel loop, per (flat, tiled)
        self.paces = {(f, t): {} for f in (True, False) for t in (True, False)}
        self.eager = [EagerStep(n) for n in r.nodes]
        red = r.reduce
        if red is not None:
            self.eager.append(EagerStep(red.node))
            self.partial.append(("reduced value", r.reduce_deps))
            self.red_np, self.acc_np = red.result.np, red.acc.np
            self.mode = self.gen.reduce_mode
        # a "cols" epilogue reducing dimension 0 has no race-free prange: its loop stays serial
        self.threads = red is None or self.gen.reduce_mode != "cols" or 0 not in red.axes

    def source(self, flat: bool = True) -> str:
        return self.gen.source(flat)

    def loop(self, flat: bool, parallel: bool, tiled: bool = False):
        key = (flat, parallel, True) if tiled else (flat, parallel)
        ep = self.loops.get(key)
        if ep is None:
            src = self.gen.source(flat, tiled)
            ep, how = compile_loop(src, self.name, self.gen.argtypes(self.in_dtypes, self.out_dtypes, flat), parallel)
            self.stats.compiles += how == "compiled"
            self.stats.disk_hits += how == "disk"
            self.loops[key] = ep
        return ep

    def serial_flat(self):
        return self.loops.get((True, False)) or self.loop(True, False)

    def run_eagerly(self, env, why: str):
        self.stats.region_eager_runs += 1
        self.stats.region_eager_reason = f"fused#{self.region.index}: {why}"
        for s in self.eager:
            s(env)

    def __call__(self, env):
        tensors = [env[v] for v in self.region.inputs]
        arrays = [t._data for t in tensors]
        scalars = self.scalars
        if self.runtime:
            scalars = list(scalars)
            for j, slot in self.runtime:
                scalars[j] = env[slot]
        if self.region.reduce is None and arrays:
            # the common case first: same-shape contiguous inputs, no reduction.  np.broadcast_shapes
            # alone costs ~2 us, more than the whole loop on small inputs; contiguity is the
            # signature's bit, as the eager fast paths read it (a.flags costs an object per array)
            shape = arrays[0].shape
            for t, a in zip(tensors, arrays):
                if a.shape != shape or not t._sig & CONTIGUOUS_BIT:
                    break
            else:
                n = arrays[0].size
                parallel = self.parallel and n >= PARALLEL_MIN and self.threads
                ep = self.loops.get((True, parallel)) or self.loop(True, parallel)
                if n < _pool.small:
                    outs = [np.empty(shape, d) for d in self.out_np]
                else:
                    outs = [_pool.empty(shape, d, n) for d in self.out_np]
                if parallel:    # the threads' watch may take the serial twin (same bits: no reduction here)
                    _watch(self.paces[True, False], n, ep, self.serial_flat, *arrays, *scalars, *outs)
                else:
                    ep(*arrays, *scalars, *outs)
                for v, o, sig in zip(self.region.all_outputs, outs, self.out_sigs):
                    t = _new(Tensor)
                    t._data = o
                    t._sig = sig
                    env[v] = t
                return
        shapes = [a.shape for a in arrays]
        try:
            shape = broadcast_shapes(*shapes)
        except ValueError:
            return self.run_eagerly(env, "input shapes do not broadcast")
        for j, idx in self.partial:
            if len(idx) < len(arrays) and broadcast_shapes(*[shapes[i] for i in idx]) != shape:
                return self.run_eagerly(env, f"output {j} is smaller than the loop's shape {shape}")
        red = self.region.reduce
        n = 1
        for d in shape:
            n *= d
        if red is not None and n == 0:
            return self.run_eagerly(env, f"{red.kind} over an empty shape {shape}")
        if red is not None and (why := self.gen.unlike_eager(shape)):
            return self.run_eagerly(env, why)
        flat = all(a.flags.c_contiguous and a.shape == shape for a in arrays)
        if len(shape) > MAX_LOOP_NDIM and not (flat and (red is None or self.mode == "full")):
            # one nested ``for`` per dimension: Python compiles at most 20 nested blocks
            return self.run_eagerly(env, f"{len(shape)} dimensions, deeper than the generated loop nest takes "
                                         f"({MAX_LOOP_NDIM}) unless every input is contiguous")
        if not flat:
            arrays = [a if a.shape == shape else np.broadcast_to(a, shape) for a in arrays]
        empty = _pool.empty if n >= _pool.small else np.empty    # small ones skip the pool's call
        outs = [empty(shape, d) for d in self.out_np]
        parallel = self.parallel and n >= PARALLEL_MIN and self.threads
        extra = []
        if red is not None:
            extra.append(empty(reduced_shape(shape, red.axes, red.keepdim), self.red_np))
            if self.mode == "full":
                # the eager kernel's chunks, so that a fused float sum rounds as eager's (same bits)
                nc = full_chunks(n)
                # one chunk: the serial twin (the same bits).  A prange over one task wakes the pool for
                # nothing, and on a busy machine its task may run on a loaded core: measured 1.59 ms against
                # 0.91 ms for a fused float32 sum of 1e6, 2 threads, load 1.85
                parallel = parallel and nc > 1
                extra.append(np.empty(nc if flat or self.gen.fold.ordered else min(nc, shape[0]), self.acc_np))
            elif self.mode == "cols":
                extra.append(empty(reduced_shape(shape, red.axes, True), self.acc_np))
        # a transposed input: the nest walks tiles (codegen.crosswise), a variant compiled when first needed
        tiled = not flat and red is None and crosswise(arrays)
        if parallel and red is None:
            _watch(self.paces[flat, tiled], n, self.loop(flat, True, tiled),
                   lambda: self.loop(flat, False, tiled), *arrays, *scalars, *outs)
        else:
            self.loop(flat, parallel, tiled)(*arrays, *scalars, *outs, *extra)
        if red is not None:
            outs.append(extra[0])
        for v, o, sig in zip(self.region.all_outputs, outs, self.out_sigs):
            t = Tensor.__new__(Tensor)
            t._data = o
            t._sig = sig
            env[v] = t
