"""The executable plan of an optimized graph: its steps (steps.py) in order, and how
to read the outputs from the values they define; after its first run, where it can,
the whole plan as one compiled function (function.py).
"""

from __future__ import annotations

from ..cuda import CudaFusedStep
from ..graph.ir import Graph, Var
from .function import build as _build_function
from .steps import ConstStep, EagerStep, FusedStep, Stats, subst

__all__ = ["Plan"]


class Plan:
    """Steps in order, and how to read the outputs from the values they define.

    ``one_function``: the plan's inputs have fixed sizes (a fused backward's plans, per set of
    input sizes), so after its first interpreted run the plan becomes one compiled function
    where it can (run/function.py); ``function`` is it, or why there is none ("" before the first run)."""

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
