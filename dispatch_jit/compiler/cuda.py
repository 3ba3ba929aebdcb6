"""Fused regions on CUDA tensors: one ``numba.cuda.jit`` grid-stride kernel per region.

The kernel body is the CPU loop's (``Codegen`` with ``target="cuda"``: the
same per-node casts, scalar expressions and result dtypes, so a fused CUDA
chain stores what eager mode would, computed in registers), inside the
grid-stride loop of the eager CUDA kernels (kernels/elementwise/cuda.py).
Operands are (flat device buffer, element offset, element strides), as
``dispatch_jit/cuda/codegen.py`` passes them.  Two shapes:

* ``flat``: every input C-contiguous with the iteration shape: each index is
  ``offset + i``;
* ``strided``: the linear index is unravelled into one flat index per input
  (``codegen.unravel``) over broadcast views whose broadcast
  dimensions have stride 0, so nothing is copied; outputs are fresh
  C-contiguous arrays, indexed ``offset + i`` either way.

Outputs come from the CUDA caching allocator (``dispatch_jit.cuda.array.empty``);
intermediates stay in registers.

A full reduction (every axis: ``sum``, ``mean``, ``prod``, ``max``, ``min``)
ends a CUDA region as its epilogue: each thread folds the reduced value of
its grid-stride elements into a register accumulator of the eager kernels'
accumulator dtype (float64 for float32 sums), the block merges its threads'
accumulators with a shared-memory tree (no warp shuffles, so the simulator
runs the same code) and writes one partial, and a second kernel of one
block (``fused_{index}_final``) merges the blocks' partials the same way and
stores the result (divided by the count for ``mean``): two launches, and the
reduced value is never stored.  Reductions over some axes are left to the
eager CUDA reduction kernel by ``elementwise.reduction_info``: the region
stores the reduced value and the reduction is the plan's next (eager) step.

Kernels are cached in memory by source (``compile_cuda``); there is no
on-disk cache for CUDA kernels.  Sizes are kernel arguments, so a new size
neither regenerates nor recompiles.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.cuda.array import empty
from dispatch_jit.cuda.launch import elementwise_config, run
from dispatch_jit.kernels.support.loops import TYPE_FNS
from dispatch_jit.cuda.codegen import compile_cuda_counted
from dispatch_jit.cuda.words import words
from dispatch_jit.kernels.support.loops.cuda import CudaNest
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CUDA_BITS, Tensor

from .codegen import Codegen
from .run.steps import EagerStep

__all__ = ["CudaFusedStep", "cuda_region_source"]



TPB_MAX = 256      # the shared-memory tree of a reduction epilogue holds one block of partials


def cuda_region_source(gen: Codegen, flat: bool) -> str:
    """The grid-stride kernel ``fused_{index}`` of ``gen``'s region; with a (full)
    reduction epilogue it also folds the reduced value into one partial per block."""
    r, red = gen.region, gen.region.reduce
    ins, outs = [f"a{i}" for i in range(len(r.inputs))], [f"o{j}" for j in range(len(r.outputs))]
    nest = CudaNest(flat, r.ndim, ins, outs, fresh_outputs=True)
    params = [p for a in ins for p in nest.params(a)] + [f"s{k}" for k in range(len(gen.scalars))]
    params += [p for o in outs for p in nest.params(o)] + (["p0"] if red is not None else []) + nest.sizes()
    prelude = list(gen.preamble) + ([f"acc = {gen.fold.init()}"] if red is not None else [])
    epilogue = []
    if red is not None:                                           # one partial per block
        epilogue = _block_tree(gen) + ["if t == 0:", "    p0[cuda.blockIdx.x] = sh[0]"]

    def body(at) -> list:
        out = gen._element(at)
        return out + (gen.fold.step("acc", gen.local[red.src]) if red is not None else [])
    return nest.kernel(f"fused_{r.index}", params, body, prelude, epilogue)


def _block_tree(gen: Codegen) -> list[str]:
    """Lines merging the threads' ``acc`` of one block into ``sh[0]``: a shared-memory tree
    (blockDim.x is a power of two <= TPB_MAX; no warp shuffles, so the simulator runs it too)."""
    lines = [f"sh = cuda.shared.array({TPB_MAX}, _acc_t)",
             "t = cuda.threadIdx.x",
             "sh[t] = acc",
             "cuda.syncthreads()",
             "s = cuda.blockDim.x // 2",
             "while s > 0:",
             "    if t < s:",
             "        acc = sh[t]"]
    lines += [f"        {x}" for x in gen.fold.step("acc", "sh[t + s]", merge=True)]
    lines += ["        sh[t] = acc",
              "    cuda.syncthreads()",
              "    s //= 2"]
    return lines


def cuda_final_source(gen: Codegen) -> str:
    """The reduction epilogue's second kernel ``fused_{index}_final``, launched as one
    block: the blocks' partials merged into the result (divided by the count for mean)."""
    lines = [f"def fused_{gen.region.index}_final(p0, nb, r0, r0_o, cnt):",
             f"    acc = {gen.fold.init()}",
             "    j = cuda.threadIdx.x",
             "    while j < nb:"]
    lines += [f"        {x}" for x in gen.fold.step("acc", "p0[j]", merge=True)]
    lines += ["        j += cuda.blockDim.x"]
    lines += [f"    {x}" for x in _block_tree(gen)]
    lines += ["    if t == 0:", f"        r0[r0_o] = {gen.fold.final('sh[0]', 'cnt')}"]
    return "\n".join(lines) + "\n"


_RED_GLOBALS: dict = {}


def _reduce_globals(acc_np) -> dict:
    """Globals of a reduction epilogue's kernels (one object each, so ``compile_cuda``'s key is stable)."""
    g = _RED_GLOBALS.get(acc_np)
    if g is None:
        import math
        from dispatch_jit.cuda.runtime import cuda_module
        base = _RED_GLOBALS.get("base")
        if base is None:
            jit = cuda_module().jit(device=True)
            base = _RED_GLOBALS["base"] = {"_cadd": jit(lambda a, b: a + b), "_cmul": jit(lambda a, b: a * b),
                                           "_inf": math.inf}
        g = _RED_GLOBALS[acc_np] = {**base, "_acc_t": np.dtype(acc_np).type}
    return g


class CudaFusedStep:
    """A fused region on CUDA tensors: per call, the broadcast shape of its inputs
    is the iteration shape; one kernel launch computes every output (two with a
    reduction epilogue).  Sizes that make an output smaller than the iteration
    shape, or inputs that are not all on one CUDA device, run the region's
    nodes eagerly for that call (which also raises eager mode's errors)."""

    plan_kind = "cuda"       # what a plan function (run/function.py) asks of a step

    device = "cuda"

    def __init__(self, node, graph, stats):
        self.region = r = node.value
        red = r.reduce
        assert red is None or red.full, "CUDA epilogues are full reductions (elementwise.reduction_info)"
        self.gen = Codegen(r, graph.types, target="cuda")
        self.stats = stats
        self.out_dtypes = [graph.types[v].dtype for v in r.outputs]
        self.out_np = [d.np for d in self.out_dtypes]
        self.scalars = tuple(self.gen.scalars)
        self.name = f"fused_{r.index}"
        self.partial = [(j, idx) for j, (v, idx) in enumerate(r.deps.items()) if len(idx) < len(r.inputs)]
        self.kernels: dict = {}
        self.launches = 0          # kernel launches of this step (tests count them)
        self.out_sigs: dict = {}   # device index -> the outputs' signatures
        self.eager = [EagerStep(n) for n in r.nodes]
        self.final = None
        if red is not None:
            self.eager.append(EagerStep(red.node))
            self.partial.append(("reduced value", r.reduce_deps))
            self.red_np, self.acc_np = red.result.np, red.acc.np
            self.red_sig: dict = {}

    def source(self, flat: bool = True) -> str:
        src = cuda_region_source(self.gen, flat)
        if self.region.reduce is not None:
            src += "\n\n" + cuda_final_source(self.gen)
        return src

    def _globals(self) -> dict:
        from dispatch_jit.kernels.support.loops.cuda import device_globals
        g = {**TYPE_FNS, **device_globals()}
        if self.region.reduce is not None:
            g.update(_reduce_globals(self.acc_np))
        return g

    def kernel(self, flat: bool):
        k = self.kernels.get(flat)
        if k is None:
            k, how = compile_cuda_counted(cuda_region_source(self.gen, flat), self.name, self._globals())
            compiled = how == "compiled"
            if self.region.reduce is not None and self.final is None:
                self.final, how = compile_cuda_counted(cuda_final_source(self.gen), f"{self.name}_final",
                                                       self._globals())
                compiled = compiled or how == "compiled"
            self.stats.compiles += compiled
            self.kernels[flat] = k
        return k

    def run_eagerly(self, env, why: str):
        self.stats.region_eager_runs += 1
        self.stats.region_eager_reason = f"fused#{self.region.index}: {why}"
        for s in self.eager:
            s(env)

    def __call__(self, env):
        tensors = [env[v] for v in self.region.inputs]
        if not all(t.is_cuda for t in tensors):
            return self.run_eagerly(env, "an input is not a CUDA tensor")
        arrays = [t._data for t in tensors]
        dev = arrays[0].device_index
        if any(a.device_index != dev for a in arrays):
            return self.run_eagerly(env, "inputs on different CUDA devices")
        shapes = [a.shape for a in arrays]
        try:
            shape = broadcast_shapes(*shapes)
        except ValueError:
            return self.run_eagerly(env, "input shapes do not broadcast")
        for j, idx in self.partial:
            if broadcast_shapes(*[shapes[i] for i in idx]) != shape:
                return self.run_eagerly(env, f"output {j} is smaller than the loop's shape {shape}")
        n = 1
        for d in shape:
            n *= d
        red = self.region.reduce
        if red is not None:
            if n == 0:
                return self.run_eagerly(env, f"{red.kind} over an empty shape {shape}")
            blocks, threads = elementwise_config(n, dev)
            if threads > TPB_MAX or threads & (threads - 1):
                return self.run_eagerly(env, f"{threads} threads per block do not fit the reduction tree")
        outs = [empty(shape, d, dev) for d in self.out_np]
        if n:
            flat = all(a.flags.c_contiguous and a.shape == shape for a in arrays)
            args = []
            # bfloat16 buffers go in as their uint16 words (the body reads and stores them so)
            if flat:
                for a in arrays:
                    args += [words(a.storage.buf), a.offset]
            else:
                for a in arrays:
                    if a.shape != shape:
                        a = a.view_as(lambda l: np.broadcast_to(l, shape))
                    args += [words(a.storage.buf), a.offset, *a.elem_strides()]
            args += self.scalars
            for o in outs:
                args += [words(o.storage.buf), o.offset]
            blocks, threads = elementwise_config(n, dev)
            if red is not None:
                part = empty((blocks,), self.acc_np, dev)
                args.append(part.storage.buf)
            if not flat:
                args += shape
            args.append(n)
            run(self.kernel(flat), blocks, threads, args)
            self.launches += 1
            if red is not None:
                r0 = empty(tuple(1 for _ in shape) if red.keepdim else (), self.red_np, dev)
                run(self.final, 1, threads, (part.storage.buf, blocks, r0.storage.buf, r0.offset, n))
                self.launches += 1
        sigs = self.out_sigs.get(dev)
        if sigs is None:
            sigs = self.out_sigs[dev] = [make_sig(CUDA_BITS, d, len(shape), True, dev) for d in self.out_dtypes]
        for v, o, sig in zip(self.region.outputs, outs, sigs):
            t = Tensor.__new__(Tensor)
            t._data = o
            t._sig = sig
            env[v] = t
        if red is not None:
            t = Tensor.__new__(Tensor)
            t._data = r0
            t._sig = make_sig(CUDA_BITS, red.result, r0.ndim, True, dev)
            env[red.out] = t
