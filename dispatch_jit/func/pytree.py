"""Nested inputs and outputs (tuples, lists, dicts) flattened to leaves, as torch.utils._pytree."""

from __future__ import annotations

from ..errors import InvalidArgumentError

__all__ = ["tree_flatten", "tree_unflatten", "broadcast_prefix"]


def tree_flatten(tree):
    """(leaves, spec): the leaves in order, and what rebuilds the structure."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    if type(tree) in (tuple, list) or (isinstance(tree, tuple) and hasattr(tree, "_fields")):   # namedtuples too
        return (type(tree), [_flatten(t, leaves) for t in tree])
    if isinstance(tree, dict):
        keys = list(tree)
        return (dict, keys, [_flatten(tree[k], leaves) for k in keys])
    leaves.append(tree)
    return None


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    return _build(spec, it)


def _build(spec, it):
    if spec is None:
        return next(it)
    if spec[0] is dict:
        return {k: _build(s, it) for k, s in zip(spec[1], spec[2])}
    kind, children = spec
    items = [_build(s, it) for s in children]
    if hasattr(kind, "_fields"):
        return kind(*items)
    return kind(items)


def broadcast_prefix(prefix, tree) -> list:
    """One value of ``prefix`` per leaf of ``tree``: a leaf of ``prefix`` (an int, None) applies to
    the whole subtree below it (torch.func's in_dims / out_dims).  ValueError if the structures differ."""
    out: list = []
    _broadcast(prefix, tree, out)
    return out


def _broadcast(prefix, tree, out):
    if prefix is None or isinstance(prefix, int):
        n = len(tree_flatten(tree)[0])
        out.extend([prefix] * n)
        return
    if isinstance(prefix, (tuple, list)):
        if not isinstance(tree, (tuple, list)) or len(tree) != len(prefix):
            raise InvalidArgumentError("in_dims/out_dims: structure mismatch")
        for p, t in zip(prefix, tree):
            _broadcast(p, t, out)
        return
    if isinstance(prefix, dict):
        if not isinstance(tree, dict) or set(prefix) != set(tree):
            raise InvalidArgumentError("in_dims/out_dims: structure mismatch")
        for k in tree:
            _broadcast(prefix[k], tree[k], out)
        return
    out.append(prefix)      # an unsupported in_dim value: reported by the caller
