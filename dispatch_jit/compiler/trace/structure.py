"""The structure a cached entry depends on: containers, hooks, and the check of both.

A trace runs the Python code once; its plan then stands for every later call whose key
matches.  The key and the per-call checks (guards.py, owners.py) cover the values the
code read, but not the *shape* of what it walked: a submodule added to a ``Sequential``
(``m.add_module("extra", lin)``: its ``forward`` iterates ``_modules``), a parameter or
buffer added to a module, a forward hook on a module, or a gradient hook on a leaf
tensor (a compiled training step accumulates ``.grad`` itself and would skip it).

``fingerprint`` walks what a call reaches (its positional arguments and the captured
values, through lists, tuples, dicts, ``dj.nn`` modules and optimizers' parameter
groups) and lists, per module, the names and identities of its submodules, the names
of its parameters and buffers (one replaced is owners.py's check) and its forward hooks, and per leaf tensor that
requires grad its gradient hooks.  An entry keeps that list, the objects it names (so
that no id is reused while the entry lives), and the hooks' epoch it was checked at
(autograd/hooks.py: every API that changes one of these bumps it).  A call compares
the epoch, one integer, and only when it moved takes the fingerprint again: equal, the
entry is good for the new epoch; different, the function retraces and ``explain()``
says what changed (``describe``).
"""

from __future__ import annotations

from dispatch_jit.autograd.hooks import EPOCH
from dispatch_jit.nn.module import Module
from dispatch_jit.optim.optimizer import Optimizer
from dispatch_jit.tensor import Tensor

__all__ = ["EPOCH", "fingerprint", "changed", "describe"]

_MAX_DEPTH = 32         # nesting of modules and containers walked (as owners.py)
_REGISTRIES = ("_modules", "_parameters", "_buffers")
_HOOKS = (("_forward_pre_hooks", "forward pre-hook"), ("_forward_hooks", "forward hook"))


def fingerprint(args, caps, captures) -> tuple:
    """(items, objects): ``items``, a sorted tuple of (label, what, names and ids) for everything
    the call reaches (see the module docstring); ``objects``, what those ids name."""
    items: list = []
    keep: list = []
    seen: set = set()
    for i, a in enumerate(args):
        _walk(a, f"argument #{i}", items, keep, seen, 0)
    for c, v in zip(captures, caps):
        _walk(v, c.label, items, keep, seen, 0)
    # sorted (parents before children): a parameter re-registered at the end walks in another order
    return tuple(sorted(items)), keep


def changed(entry, args, caps, captures) -> str:
    """'' if what ``entry`` walked (``entry.walked``, a fingerprint) is as it was, and then the
    entry holds for the current epoch; else what changed."""
    epoch = EPOCH[0]           # read first: a bump during the walk is checked at the next call
    walked, _ = fingerprint(args, caps, captures)
    if walked == entry.walked[0]:
        entry.epoch = epoch
        return ""
    return describe(entry.walked[0], walked) or "the containers or hooks it reached changed"


def _walk(x, label, items, keep, seen, depth):
    if depth > _MAX_DEPTH or id(x) in seen:
        return
    if isinstance(x, Tensor):
        seen.add(id(x))
        if x.requires_grad and x.grad_fn is None:
            edge = x.__dict__.get("_leaf_edge")
            hooks = [h for hs in edge[0].pre_hooks.values() for h in hs] if edge is not None else []
            keep += hooks
            items.append((label, "gradient hook", tuple(map(id, hooks))))
        return
    if isinstance(x, Module):
        seen.add(id(x))
        d = x.__dict__
        mods = d.get("_modules") or {}
        keep += mods.values()
        items.append((label, "submodule", tuple([(k, id(v)) for k, v in mods.items()])))
        # parameters and buffers by name: one replaced (``m.weight = Parameter(...)``, which also
        # moves it to the end) is owners.py's check, a retrace of this entry only
        items.append((label, "parameter", tuple([(k, 0) for k in sorted(d.get("_parameters") or {})])))
        items.append((label, "buffer", tuple([(k, 0) for k in sorted(d.get("_buffers") or {})])))
        for attr, what in _HOOKS:
            hooks = list(getattr(x, attr).values())
            keep += hooks
            items.append((label, what, tuple(map(id, hooks))))
        for reg in _REGISTRIES:
            for k, v in (d.get(reg) or {}).items():
                _walk(v, f"{label}.{k}", items, keep, seen, depth + 1)
    elif isinstance(x, Optimizer):
        seen.add(id(x))
        for i, g in enumerate(x.param_groups):
            for j, p in enumerate(g.get("params", ())):
                _walk(p, f"{label}.param_groups[{i}]['params'][{j}]", items, keep, seen, depth + 1)
    elif isinstance(x, (list, tuple)):
        seen.add(id(x))
        for i, y in enumerate(x):
            _walk(y, f"{label}[{i}]", items, keep, seen, depth + 1)
    elif isinstance(x, dict):
        seen.add(id(x))
        for k, y in x.items():
            _walk(y, f"{label}[{k!r}]", items, keep, seen, depth + 1)


def describe(old: tuple, new: tuple) -> str:
    """What differs between two fingerprints, as ``explain()`` says it ('' if nothing)."""
    was = {(label, what): ids for label, what, ids in old}
    now = {(label, what): ids for label, what, ids in new}
    for (label, what), ids in now.items():
        if (label, what) not in was:
            return f"{label} was not there at the last trace (a {what} list appeared)"
        before = was[(label, what)]
        if ids == before:
            continue
        if what in ("submodule", "parameter", "buffer"):
            names, old_names = dict(ids), dict(before)
            added = [k for k in names if k not in old_names]
            removed = [k for k in old_names if k not in names]
            replaced = [k for k in names if k in old_names and names[k] != old_names[k]]
            parts = [f"{what} {k!r} added" for k in added] + [f"{what} {k!r} removed" for k in removed]
            parts += [f"{what} {k!r} replaced" for k in replaced]
            return f"{label}: {', '.join(parts) or f'its {what}s were reordered'}"
        if len(ids) > len(before):
            return f"{label}: a {what} was registered"
        if len(ids) < len(before):
            return f"{label}: a {what} was removed"
        return f"{label}: its {what}s changed"
    for label, what in was:
        if (label, what) not in now:
            return f"{label} is no longer reached (its {what}s were part of the last trace)"
    return ""
