"""Straight-line code for the commonest compiled call: one fused loop, small inputs.

A compiled function whose plan is a single fused region without a reduction,
reading only the function's tensor arguments and returning only the region's
outputs, runs through ``Plan.run``: an environment dict, a step object, lists
and loops over inputs and outputs.  On 16 elements that bookkeeping costs ten
times the loop.  This module generates, per such plan, the same work unrolled,
as the eager kernels' fast paths are (kernels/elementwise/cpu.py)::

    def run(t0, t1, t2):
        a0 = t0._data; a1 = t1._data; a2 = t2._data
        s = a0.shape
        if a1.shape == s and a2.shape == s and t0._sig & t1._sig & t2._sig & 1 and a0.size < _SMALL:
            o0 = _empty(s, _D0)
            _loop(a0, a1, a2, _S0, _S1, o0)       # the serial flat loop, compiled already
            r0 = _new(_T); r0._data = o0; r0._sig = _G0
            return r0
        return _slow((t0, t1, t2))               # Plan.run: broadcasting, strides, big sizes

Contiguity is read from the signatures' bit, as the eager fast paths do.  The
guard covers everything the plan's own fast path checks, so the results are
``Plan.run``'s, bit for bit; the outputs are small (below the output pool's
threshold and ``PARALLEL_MIN``), so they come from ``np.empty``.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.bufferpool import pool
from dispatch_jit.jit.source import define
from dispatch_jit.kernels.support.loops import PARALLEL_MIN
from dispatch_jit.signature import CONTIGUOUS_BIT
from dispatch_jit.tensor import Tensor

from ..graph.ir import Var
from .plan import FusedStep

__all__ = ["fast_runner"]

NOT_YET = None      # the serial loop is not compiled yet: ask again after a call
NEVER = False       # the plan has another shape: Plan.run it is


def fast_runner(plan):
    """The generated runner of ``plan`` (taking the plan's input tensors positionally),
    ``NEVER`` if the plan is not one fused loop of the function's arguments, or
    ``NOT_YET`` while its serial flat loop has not been compiled by a call."""
    if len(plan.steps) != 1 or not isinstance(plan.steps[0], FusedStep):
        return NEVER
    step = plan.steps[0]
    r = step.region
    if r.reduce is not None or not r.inputs or not all(v in plan.inputs for v in r.inputs) or step.runtime:
        return NEVER      # (runtime scalars are read per call; the runner binds constants)
    outs = plan.outputs
    single = isinstance(outs, Var)
    flat = [outs] if single else list(outs) if type(outs) is tuple else None
    if not flat or not all(isinstance(v, Var) and v.id in r.all_outputs for v in flat):
        return NEVER
    loop = step.loops.get((True, False))
    if loop is None:
        return NOT_YET
    nin = len(plan.inputs)
    params = [f"t{i}" for i in range(nin)]
    pos = {v: i for i, v in enumerate(plan.inputs)}
    arrays = [f"a{k}" for k in range(len(r.inputs))]
    lines = [f"def run({', '.join(params)}):"]
    lines += [f"    a{k} = t{pos[v]}._data" for k, v in enumerate(r.inputs)]
    used = sorted({pos[v] for v in r.inputs})
    cond = [f"{a}.shape == s" for a in arrays[1:]]
    cond.append(f"{' & '.join(f't{i}._sig' for i in used)} & {CONTIGUOUS_BIT}")
    cond.append("a0.size < _SMALL and a0.size < _pool.small")
    lines += ["    s = a0.shape", f"    if {' and '.join(cond)}:"]
    outs_np = [f"o{j}" for j in range(len(step.out_np))]
    lines += [f"        o{j} = _empty(s, _D{j})" for j in range(len(step.out_np))]
    lines.append(f"        _loop({', '.join(arrays + [f'_S{i}' for i in range(len(step.scalars))] + outs_np)})")
    index = {v: j for j, v in enumerate(r.all_outputs)}
    for j in range(len(step.out_np)):
        lines += [f"        r{j} = _new(_T)", f"        r{j}._data = o{j}", f"        r{j}._sig = _G{j}"]
    res = [f"r{index[v.id]}" for v in flat]
    lines.append(f"        return {res[0] if single else '(' + ', '.join(res) + ',)'}")
    lines.append(f"    return _slow(({', '.join(params)}{',' if nin == 1 else ''}))")
    g = {"_empty": np.empty, "_loop": loop, "_new": object.__new__, "_T": Tensor, "_slow": plan.run,
         "_SMALL": PARALLEL_MIN, "_pool": pool}
    for j, d in enumerate(step.out_np):
        g[f"_D{j}"] = d
        g[f"_G{j}"] = step.out_sigs[j]
    for i, s in enumerate(step.scalars):
        g[f"_S{i}"] = s
    src = "\n".join(lines) + "\n"
    fn = define(src, "run", g, f"<dispatch_jit compiled fast path {step.name}>")
    fn.__source__ = src
    return fn
