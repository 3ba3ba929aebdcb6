"""The steps of a plan that every backend shares: ``ConstStep`` (a tensor captured
from the function's closure) and ``EagerStep`` (an op run through the eager
dispatcher: matmul, reductions, views, custom ops, anything unfused, and a fused
region's nodes when a call's sizes do not fit its loop); and ``Stats``, the
counters a compiled function shares with its plans.

A step is called with the plan's environment (value id -> value) and defines
its outputs in it.  plan.py (``FusedStep``, ``Plan``) and cuda.py
(``CudaFusedStep``) build on these.
"""

from __future__ import annotations

from ..graph.ir import Var, is_runtime_scalar, rebuild, scalar_var

__all__ = ["Stats", "ConstStep", "EagerStep", "subst"]


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
    plan_kind = "const"       # what a plan function (planfn.py) asks of a step

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
