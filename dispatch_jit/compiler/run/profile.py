"""Where a plan function's time goes: the plan function (function.py) regenerated with a time
stamp after each step, run in place of the plan's own for as long as a ``with`` block lasts.

A plan function is one compiled call: a Python profiler sees one line, however many fused loops,
matmuls and kernels it runs.  ``profile(plan)`` compiles a variant of the same source that also
takes an int64 array and writes the CPU's cycle counter (LLVM's ``readcyclecounter``: the TSC on
x86) into it before the first step and after each step, and swaps it in as ``plan.function``
until the block ends; every call the plan makes meanwhile is recorded.  The steps run the same
code on the same arrays, so results are the plan function's bit for bit; the stamps cost a few
nanoseconds each.  A debugging tool: the variant is compiled once per block (not cached on disk),
which for a large plan takes as long as the plan's own first compile.

>>> import dispatch_jit as dj
>>> from dispatch_jit.compiler.run.profile import profile
>>> model = dj.nn.Linear(3, 2)
>>> cf = dj.compile(lambda x: model(x).tanh().sum())
>>> x = dj.ones(4, 3)
>>> for _ in range(2):
...     cf(x).backward()
>>> (f,) = cf._last.fused.values()      # the fused forward and backward plans
>>> with profile(f.forward) as prof:
...     for _ in range(3):
...         cf(x).backward()
>>> prof.calls, prof.rows()[0][1]
(3, 'linear')
>>> print(prof.report())                 # doctest: +SKIP
3 call(s); the steps' medians add up to 0.004 ms (2 steps)
    0.003 ms  75.0%  x1   linear
    0.001 ms  25.0%  x1   fused[tanh,sum]
"""

from __future__ import annotations

import copy
import time

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from dispatch_jit.errors import InvalidArgumentError
from dispatch_jit.jit import cache

from .function import _OPTIONS

__all__ = ["profile", "PlanProfile", "cycles_per_second"]

_KIND = "plan_profile"
_NAME = "plan_fn"


@intrinsic
def _cycles(typingctx):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@numba.njit
def _now():
    return _cycles()


_RATE = []


def cycles_per_second() -> float:
    """The cycle counter's rate, measured once per process against ``time.perf_counter``
    (0.0 where the CPU has no counter LLVM can read)."""
    if not _RATE:
        c0, t0 = _now(), time.perf_counter()
        time.sleep(0.05)
        c1, t1 = _now(), time.perf_counter()
        _RATE.append((c1 - c0) / (t1 - t0))
    return _RATE[0]


def _name(node) -> str:
    return node.name.rsplit("::", 1)[-1]


def _label(step) -> str:
    if step.plan_kind == "fused":
        return "fused[" + ",".join(_name(e.node) for e in step.eager) + "]"
    return _name(step.node)


class PlanProfile:
    """The stamps of every call a plan made while profiled: ``samples`` (calls x steps, cycles)."""

    def __init__(self, plan):
        fn = plan.function
        if fn is None or fn.parts is None:
            raise InvalidArgumentError(
                "profile(plan): the plan has no compiled plan function to profile "
                f"({plan.describe_function()}); run it once first (a plan made with one_function=True)")
        self.plan, self.original = plan, fn
        defs, body, segments, params, argtypes, glb = fn.parts
        self.positions = [pos for pos, _ in segments]
        lines, at = ["_ts[0] = _cycles()"], 0
        for k, (_, n) in enumerate(segments):
            lines += body[at:at + n]
            at += n
            # a step's lines end at the body's indentation (its refusal check closes with the step)
            lines.append(f"_ts[{k + 1}] = _cycles()")
        src = "\n\n".join(defs + [f"def {_NAME}({', '.join(params + ['_ts'])}):\n" +
                                  "".join(f"    {ln}\n" for ln in lines) + "    return -1\n"])
        self.source = src
        ep, _ = cache.njit_source(_KIND, src, _NAME, argtypes + (numba.int64[::1],),
                                  {**glb, "_cycles": _cycles}, options=_OPTIONS)
        self.stamps = np.zeros(len(segments) + 1, np.int64)
        self.samples: list = []
        stamps, samples = self.stamps, self.samples

        def run(*args):
            stamps[:] = 0
            code = ep(*args, stamps)
            if code < 0:        # a refused call stopped part way: its stamps are not a whole call
                samples.append(np.diff(stamps))
            return code

        self.function = copy.copy(fn)
        self.function.ep = run

    @property
    def calls(self) -> int:
        return len(self.samples)

    def __enter__(self):
        self.plan.function = self.function
        return self

    def __exit__(self, *exc):
        self.plan.function = self.original
        return False

    def rows(self) -> list:
        """Per step, in plan order: (position, label, median seconds, share of the medians' sum)."""
        if not self.samples:
            return []
        rate = cycles_per_second() or 1.0
        cyc = np.array(self.samples)
        med = np.median(cyc, axis=0) / rate
        total = float(med.sum())
        steps = self.plan.steps
        return [(pos, _label(steps[pos]), float(m), float(m) / total if total else 0.0)
                for pos, m in zip(self.positions, med)]

    def report(self, top: int = 25, by: str = "label") -> str:
        """A table: the ``top`` costs, summed per step label (``by="label"``) or per step (``"step"``),
        with the median call's total."""
        rows = self.rows()
        if not rows:
            return "no calls profiled"
        total = sum(r[2] for r in rows)
        agg: dict = {}
        for pos, label, sec, _ in rows:
            key = label if by == "label" else f"{pos}: {label}"
            n, s = agg.get(key, (0, 0.0))
            agg[key] = (n + 1, s + sec)
        out = [f"{self.calls} call(s); the steps' medians add up to {1e3 * total:.3f} ms ({len(rows)} steps)"]
        for key, (n, sec) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:top]:
            out.append(f"{1e3 * sec:9.3f} ms {100 * sec / total:5.1f}%  x{n:<3d} {key}")
        return "\n".join(out)


def profile(plan) -> PlanProfile:
    """A context manager: while it is open, ``plan`` runs an instrumented copy of its plan function
    that records how long each step takes (``PlanProfile.report()``, ``rows()``)."""
    return PlanProfile(plan)
