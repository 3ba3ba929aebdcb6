"""A large plan function compiled as segments: consecutive runs of its steps, each its own
``numba.njit`` function (compiled and cached on disk on its own), called in order from Python.

Numba's compile time grows faster than the function it compiles: LLVM optimizes a function
together with every fused loop it calls (linked into one module), so the one plan function of
a whole training step (function.py, hundreds of steps) took most of a cold step's compile.  Cut
into segments of about ``SEGMENT_LINES`` lines of body each, the same lines compile in pieces
that each cost little, and a step that changes only part of its plan recompiles only the
segments whose source changed (the disk cache keys on the source).  A call costs one Python
call per segment more (a microsecond or two each: a step of a few milliseconds does not see it).

The segments run the plan function's own lines in its order, on the same arrays, so results are
the one function's bit for bit (tests/compiler/run/test_plan_segments.py).  Values the body
makes inside (function.py's locals: views made with ``_as_strided``, copies of reshapes) do not
cross a cut: a view of a value the function is given is made again where a later segment reads
it (the same view of the same memory), and a cut never falls between any other local and a
read of it.  A refusal (``return <position>``) returns from its segment, and the call stops there.
"""

from __future__ import annotations

import re
from operator import itemgetter

from dispatch_jit.jit import cache

__all__ = ["SEGMENT_LINES", "compile_plan", "split"]

# lines of body per segment (cut at a step's end).  The tutorial GPT's whole step at gpt-tiny sizes
# (325 lines of body, 114 loops), its plan function compiled cold in one process, loaded 2 cores: one
# function 848 s (load 11.6), 80-line segments 584 s (load 11.0), 40-line 328 s (load 8.3), 20-line
# 138 s (load 9.0); one sequential run each, in one process, with the loads shown
SEGMENT_LINES = 20

_NAME = "plan_fn"
_TOKEN = re.compile(r"[A-Za-z_]\w*")
_ASSIGN = re.compile(r"\s*(\w+) = ")
# function.py's _view_call: a view of an array, which any segment can make again
_VIEW = re.compile(r"\w+ = _as_strided\((\w+)\.reshape\(-1\)\[\d+:\], ")
_DEF_NAME = re.compile(r"^def (\w+)\(", re.M)


def split(body: list, steps: list, limit: int) -> list[tuple[int, int]]:
    """``[(first line, end line)]`` of each segment of ``body``, whose steps' line counts are
    ``steps`` (function.py's ``(position, lines)``), at most ~``limit`` lines each where a cut
    may fall (see the module docstring)."""
    ends, at = [], 0
    for _, n in steps:
        at += n
        ends.append(at)
    defined, last_use, kept = {}, {}, set()
    for i, ln in enumerate(body):
        m = _ASSIGN.match(ln)
        if m:
            name = m.group(1)
            view = _VIEW.match(ln)
            if name in defined or not view or view.group(1) in kept:
                kept.add(name)          # not made again in a later segment: no cut after it until its last read
            defined.setdefault(name, i)
        for t in _TOKEN.findall(ln):
            if t in defined:
                last_use[t] = i
    cuts, start = [], 0
    for end in ends:
        if end - start < limit or end == len(body):
            continue
        if any(defined[v] < end <= last_use.get(v, -1) for v in kept):
            continue
        cuts.append((start, end))
        start = end
    if start < len(body):
        cuts.append((start, len(body)))
    return cuts


def _segment_source(defs, body, lo, hi, params):
    """(source, parameter positions) of the segment of ``body[lo:hi]``."""
    views = {}
    for ln in body[:lo]:
        m = _VIEW.match(ln)
        if m:
            views[_ASSIGN.match(ln).group(1)] = ln
    lines = body[lo:hi]
    # the views of earlier segments that these lines read, each made again first (and the views
    # they are views of: a view's root may be a view made earlier)
    need, todo = {}, [t for ln in lines for t in _TOKEN.findall(ln) if t in views]
    while todo:
        v = todo.pop()
        if v not in need:
            need[v] = views[v]
            todo += [t for t in _TOKEN.findall(views[v])[1:] if t in views]
    order = [ln for ln in body[:lo] if _ASSIGN.match(ln) and _ASSIGN.match(ln).group(1) in need]
    lines = order + lines
    used = {t for ln in lines for t in _TOKEN.findall(ln)}
    names = {m.group(1): d for d in defs for m in [_DEF_NAME.search(d)] if m}
    mine = [d for n, d in names.items() if n in used]
    idx = [k for k, p in enumerate(params) if p in used]
    src = "\n\n".join(mine + [f"def {_NAME}({', '.join(params[k] for k in idx)}):\n" +
                              "".join(f"    {ln}\n" for ln in lines) + "    return -1\n"])
    return src, idx


def compile_plan(kind, src, parts, options, limit=None):
    """``(entry point, how)`` of the plan function of ``src`` (function.py's whole source) and
    ``parts`` (``(defs, body, steps, params, argtypes, glb)``): the one function where its body
    is at most ``limit`` lines (``SEGMENT_LINES``), else its segments called in order."""
    defs, body, steps, params, argtypes, glb = parts
    limit = SEGMENT_LINES if limit is None else limit
    cuts = split(body, steps, limit) if len(body) > limit else []
    if len(cuts) < 2:
        return cache.njit_source(kind, src, _NAME, argtypes, glb, options=options, disk=True)
    calls, hows = [], set()
    for lo, hi in cuts:
        seg, idx = _segment_source(defs, body, lo, hi, params)
        ep, how = cache.njit_source(kind, seg, _NAME, tuple(argtypes[k] for k in idx), glb,
                                    options=options, disk=True)
        hows.add(how)
        # itemgetter of one index returns the item, not a 1-tuple
        take = itemgetter(*idx) if len(idx) > 1 else (lambda a, k=idx: tuple(a[j] for j in k))
        calls.append((ep, take))

    def run(*args):
        for ep, take in calls:
            code = ep(*take(args))
            if code >= 0:
                return code
        return -1
    run.segments = len(calls)
    return run, "compiled" if "compiled" in hows else "disk" if "disk" in hows else "memory"
