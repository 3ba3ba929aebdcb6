"""Where the tensors a trace uses by identity live, and the per-call check that they still do.

A trace finds some real tensors neither as arguments nor through a guarded attribute
chain (guards.py): a model's parameters, reached through ``dj.nn`` modules whose code
the guards do not follow (``model(x)`` walks ``Sequential``'s children, ``Linear``
reads ``self.weight`` from its registry).  Such a tensor is a constant of the graph,
or, if it requires grad, an extra input (``Graph.lifted``, trace/symbolic.py) that the compiled
backward differentiates with respect to.  Either way the entry holds that very object,
so an in-place change (an optimizer's step) shows at the next call; but a
``model[0].weight = Parameter(...)`` or a ``requires_grad_`` flip must not go unseen:
the compiled call would silently use the old tensor, or give it no gradient.

``module_tensors`` walks the objects a call's key already guards by identity (the
positional arguments and what the captures read) through lists, tuples, dicts and
``dj.nn.Module`` registries (``_parameters``, ``_buffers``, ``_modules``), and says
for each tensor found how to reach it again (``caps[0]._modules['0']._parameters
['weight']``) and how ``explain()`` names it (``global 'model'.0.weight``).
``trace`` guards those tensors while it runs (a data or size read of them aborts, as
for any captured tensor), and ``make_check`` generates the entry's ``stale(args,
caps)``: for every constant and lifted tensor, its signature (requires_grad, dtype,
layout) is what the trace saw and, where its owner is known, it is still there; else
it returns why not, and the call retraces.  A tensor that requires grad whose owner
is not known cannot be guarded: that signature runs eagerly (``unguarded``).
"""

from __future__ import annotations

from dispatch_jit.jit.source import define
from dispatch_jit.nn.module import Module
from dispatch_jit.tensor import Tensor

__all__ = ["module_tensors", "make_check", "unguarded"]

_MAX_DEPTH = 32        # nesting of modules and containers walked


def module_tensors(args, caps, captures) -> dict:
    """{id(tensor): (tensor, expression reaching it from ``args``/``caps``, label)} for the
    tensors held by modules (and containers of them) among the call's positional ``args``
    and the captured values ``caps`` (read by ``captures``, guards.py); first path wins."""
    found: dict = {}
    seen: set = set()
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            _walk(a, f"args[{i}]", f"argument #{i}", found, seen, 0, False)
    for j, (c, v) in enumerate(zip(captures, caps)):
        _walk(v, f"caps[{j}]", c.label, found, seen, 0, False)
    return found


def _walk(x, expr, label, found, seen, depth, in_module):
    if depth > _MAX_DEPTH:
        return
    if isinstance(x, Tensor):
        if in_module:          # a bare captured tensor is a graph input already (guards.py)
            found.setdefault(id(x), (x, expr, label))
        return
    if id(x) in seen:
        return
    if isinstance(x, Module):
        seen.add(id(x))
        d = x.__dict__
        for reg in ("_parameters", "_buffers"):
            for name, t in d.get(reg, {}).items():
                if isinstance(t, Tensor):
                    found.setdefault(id(t), (t, f"{expr}.{reg}[{name!r}]", f"{label}.{name}"))
        for name, m in d.get("_modules", {}).items():
            _walk(m, f"{expr}._modules[{name!r}]", f"{label}.{name}", found, seen, depth + 1, True)
    elif isinstance(x, (list, tuple)):
        seen.add(id(x))
        for i, y in enumerate(x):
            _walk(y, f"{expr}[{i}]", f"{label}[{i}]", found, seen, depth + 1, in_module)
    elif isinstance(x, dict):
        seen.add(id(x))
        for k, y in x.items():
            if isinstance(k, (str, int)):
                _walk(y, f"{expr}[{k!r}]", f"{label}[{k!r}]", found, seen, depth + 1, in_module)


def unguarded(graph, owners: dict) -> str:
    """Why an entry for ``graph`` cannot be kept ('' if it can): a lifted tensor (one that
    requires grad, found by identity) whose owner no walk found."""
    for t in graph.lifted:
        if id(t) not in owners:
            return ("a tensor that requires grad reached the trace by identity from something no guard "
                    "watches (not an argument, a global, a closure variable, an attribute chain or a "
                    "dj.nn.Module they hold): a later call could not tell if it was replaced. Pass it "
                    "as an argument, or keep it in a dj.nn.Module")
    return ""


def make_check(graph, owners: dict):
    """The generated ``stale(args, caps) -> str`` of an entry for ``graph`` ('' while every
    constant and lifted tensor is as the trace saw it), or None if there is nothing to check."""
    tensors = [n.value for n in graph.nodes if n.op == "const"] + list(graph.lifted)
    if not tensors:
        return None
    g: dict = {}
    lines = ["def stale(args, caps):", "    try:"]
    for i, t in enumerate(tensors):
        g[f"T{i}"] = t
        own = owners.get(id(t))
        label = own[2] if own is not None else "a tensor the function captured"
        lines.append(f"        if T{i}._sig != {t._sig}:")
        lines.append(f"            return {label + ': its requires_grad, dtype or layout changed'!r}")
        if getattr(graph, "shapes", None):     # a sized trace (a ShapedTracer's) holds the sizes it saw
            lines.append(f"        if T{i}._data.shape != {tuple(t._data.shape)}:")
            lines.append(f"            return {label + ': its sizes changed'!r}")
        if own is not None:
            lines.append(f"        if {own[1]} is not T{i}:")
            lines.append(f"            return {label + ' is another tensor now'!r}")
    lines += ["    except (LookupError, AttributeError, TypeError) as e:",
              "        return f'a captured module changed ({type(e).__name__}: {e})'",
              "    return ''"]
    src = "\n".join(lines) + "\n"
    stale = define(src, "stale", g, "<dispatch_jit compiled tensor guards>")
    stale.__source__ = src
    return stale
