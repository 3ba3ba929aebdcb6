"""The executable plan of an optimized graph: one step per node.

* ``ConstStep``: a tensor captured from the function's closure, and
  ``EagerStep``: an op run through the eager dispatcher (matmul, reductions,
  views, custom ops, anything unfused); both in steps.py;
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
  nothing raise there, sum/mean/prod give their identities).
* ``cuda.CudaFusedStep``: the same for a region on CUDA tensors, one
  ``numba.cuda.jit`` grid-stride kernel (see cuda.py).
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
from ..cuda import CudaFusedStep
from ..elementwise import reduced_shape
from ..graph.ir import Graph, Var, is_runtime_scalar, scalar_var
from .function import build as _build_function
from .steps import ConstStep, EagerStep, Stats, subst

__all__ = ["Plan", "FusedStep"]


_new = object.__new__


class FusedStep:
    plan_kind = "fused"       # what a plan function (planfn.py) asks of a step

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
                extra.append(np.empty(nc if flat else min(nc, shape[0]), self.acc_np))
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


class Plan:
    """Steps in order, and how to read the outputs from the values they define.

    ``one_function``: the plan's inputs have fixed sizes (a fused backward's plans, per set of
    input sizes), so after its first interpreted run the plan becomes one compiled function
    where it can (planfn.py); ``function`` is it, or why there is none ("" before the first run)."""

    function = None
    function_reason = ""

    def __init__(self, graph: Graph, stats: Stats, parallel: bool = True, one_function: bool = False):
        self.graph, self.stats, self.parallel = graph, stats, parallel
        self.one_function = one_function
        self.steps, self.fused = [], []
        for n in graph.nodes:
            if n.op == "const":
                self.steps.append(ConstStep(n))
            elif n.op == "fused":
                if graph.types[n.outs[0]].device == "cuda":
                    f = CudaFusedStep(n, graph, stats)
                else:
                    f = FusedStep(n, graph, stats, parallel)
                self.steps.append(f)
                self.fused.append(f)
            else:
                self.steps.append(EagerStep(n))
        self.inputs, self.outputs = graph.inputs, graph.outputs
        out = self.outputs
        # the common output structures without subst's walk
        self._out1 = out.id if isinstance(out, Var) else None
        self._outn = tuple(v.id for v in out) if (type(out) is tuple and out
                                                   and all(isinstance(v, Var) for v in out)) else None

    def run(self, tensors, scalars=(), declined=False):
        """``tensors``: the graph's inputs; ``scalars``: the values of its runtime scalars
        (``RuntimeFloat``/``RuntimeInt`` index i is ``scalars[i]``); ``declined``: the caller
        called the plan function already, which declined this call."""
        fn = self.function
        env = fn(tensors, scalars) if fn is not None and not declined else None
        if env is None:
            env = dict(zip(self.inputs, tensors))
            for i, x in enumerate(scalars):
                env[-1 - i] = x          # ir.scalar_var(i)
            for s in self.steps:
                s(env)
            if self.one_function and fn is None and not self.function_reason:
                self._make_function(env, tensors, scalars)
        if self._out1 is not None:
            return env[self._out1]
        if self._outn is not None:
            return tuple([env[v] for v in self._outn])
        return subst(self.outputs, env)

    def _make_function(self, env, tensors, scalars):
        got = _build_function(self, env, tensors, scalars, self.parallel)
        if isinstance(got, str):
            self.function_reason = got
        else:
            self.function = got

    def describe_function(self) -> str:
        """One phrase: whether the plan runs as one compiled function, and why not."""
        f = self.function
        if f is not None:
            tail = f", {f.declined} call(s) ran interpreted (last: {f.declined_reason})" if f.declined else ""
            return f"one compiled function ({f.calls} call(s){tail})"
        return f"interpreted step by step ({self.function_reason})" if self.function_reason else "not run yet"
