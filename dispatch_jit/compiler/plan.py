"""The executable plan of an optimized graph: one step per node.

* ``ConstStep``: a tensor captured from the function's closure;
* ``EagerStep``: an op run through the eager dispatcher (matmul, reductions,
  views, custom ops, anything unfused);
* ``FusedStep``: one generated loop for a fused region.  Per call it takes
  the broadcast shape of its inputs as the iteration shape, allocates the
  outputs with NumPy, picks the flat or strided loop (serial or parallel by
  size, as the eager kernels do) and compiles that variant on first use.
  If the sizes make an output smaller than the iteration shape (equal ndim,
  broadcast dims), or do not broadcast at all, the region runs its nodes
  eagerly for that call, which also raises eager mode's own errors.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.kernels.cpu_elementwise import PARALLEL_MIN
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CPU_BITS, Tensor

from .codegen import Codegen, compile_source
from .ir import Graph, Var

__all__ = ["Plan", "Stats"]


class Stats:
    """Counters shared by a compiled function and its plans."""

    def __init__(self):
        self.compiles = 0
        self.region_eager_runs = 0
        self.region_eager_reason = ""


def _subst(x, env):
    if isinstance(x, Var):
        return env[x.id]
    if isinstance(x, (list, tuple)):
        return type(x)(_subst(y, env) for y in x)
    if isinstance(x, dict):
        return {k: _subst(v, env) for k, v in x.items()}
    return x


class ConstStep:
    def __init__(self, node):
        self.vid, self.value = node.outs[0], node.value

    def __call__(self, env):
        env[self.vid] = self.value


class EagerStep:
    def __init__(self, node):
        self.op, self.args, self.kwargs, self.outs = node.op, node.args, node.kwargs, node.outs

    def __call__(self, env):
        out = self.op(*_subst(self.args, env), **_subst(self.kwargs, env))
        if len(self.outs) == 1:
            env[self.outs[0]] = out
        else:
            for v, o in zip(self.outs, out):
                env[v] = o


class FusedStep:
    def __init__(self, node, graph: Graph, stats: Stats, parallel: bool):
        self.region = r = node.value
        self.gen = Codegen(r, graph.types)
        self.stats, self.parallel = stats, parallel
        self.in_dtypes = [graph.types[v].dtype for v in r.inputs]
        self.out_dtypes = [graph.types[v].dtype for v in r.outputs]
        self.out_np = [d.np for d in self.out_dtypes]
        self.out_sigs = [make_sig(CPU_BITS, d, r.ndim, True) for d in self.out_dtypes]
        self.scalars = tuple(self.gen.scalars)
        self.name = f"fused_{r.index}"
        # outputs that do not read every input may be smaller than the iteration shape
        self.partial = [(j, idx) for j, (v, idx) in enumerate(r.deps.items()) if len(idx) < len(r.inputs)]
        self.loops: dict = {}
        self.eager = [EagerStep(n) for n in r.nodes]

    def source(self, flat: bool = True) -> str:
        return self.gen.source(flat)

    def loop(self, flat: bool, parallel: bool):
        key = (flat, parallel)
        ep = self.loops.get(key)
        if ep is None:
            src = self.gen.source(flat)
            ep, new = compile_source(src, self.name, self.gen.argtypes(self.in_dtypes, self.out_dtypes, flat),
                                     parallel)
            self.stats.compiles += new
            self.loops[key] = ep
        return ep

    def run_eagerly(self, env, why: str):
        self.stats.region_eager_runs += 1
        self.stats.region_eager_reason = f"fused#{self.region.index}: {why}"
        for s in self.eager:
            s(env)

    def __call__(self, env):
        arrays = [env[v]._data for v in self.region.inputs]
        shapes = [a.shape for a in arrays]
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            return self.run_eagerly(env, "input shapes do not broadcast")
        for j, idx in self.partial:
            if np.broadcast_shapes(*[shapes[i] for i in idx]) != shape:
                return self.run_eagerly(env, f"output {j} is smaller than the loop's shape {shape}")
        flat = all(a.flags.c_contiguous and a.shape == shape for a in arrays)
        if not flat:
            arrays = [a if a.shape == shape else np.broadcast_to(a, shape) for a in arrays]
        outs = [np.empty(shape, d) for d in self.out_np]
        n = outs[0].size
        self.loop(flat, self.parallel and n >= PARALLEL_MIN)(*arrays, *self.scalars, *outs)
        for v, o, sig in zip(self.region.outputs, outs, self.out_sigs):
            t = Tensor.__new__(Tensor)
            t._data = o
            t._sig = sig
            env[v] = t


class Plan:
    """Steps in order, and how to read the outputs from the values they define."""

    def __init__(self, graph: Graph, stats: Stats, parallel: bool = True):
        self.graph = graph
        self.steps, self.fused = [], []
        for n in graph.nodes:
            if n.op == "const":
                self.steps.append(ConstStep(n))
            elif n.op == "fused":
                f = FusedStep(n, graph, stats, parallel)
                self.steps.append(f)
                self.fused.append(f)
            else:
                self.steps.append(EagerStep(n))
        self.inputs, self.outputs = graph.inputs, graph.outputs

    def run(self, tensors: list):
        env = dict(zip(self.inputs, tensors))
        for s in self.steps:
            s(env)
        return _subst(self.outputs, env)
