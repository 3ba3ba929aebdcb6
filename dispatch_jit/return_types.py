"""The named tuples ops with several named returns give back, as ``torch.return_types``.

A schema such as ``topk(...) -> (Tensor values, Tensor indices)`` names its
returns; :func:`of` turns those names into one ``namedtuple`` type per op
name, made once and shared, so that eager kernels, autograd kernels and the
compiler's tracer all return the same type (``r.values``, ``r[0]`` and
unpacking all work, and ``isinstance`` agrees across modes).

>>> import dispatch_jit as dj
>>> r = dj.topk(dj.tensor([1.0, 3.0, 2.0]), 2)
>>> type(r).__name__, r.values, r.indices
('topk', tensor([3., 2.]), tensor([1, 2]))
"""

from __future__ import annotations

import collections

_TYPES: dict[tuple[str, tuple[str, ...]], type] = {}


def named(name: str, fields: tuple[str, ...]) -> type:
    """The return type called ``name`` with ``fields``, made on first use."""
    key = (name, tuple(fields))
    t = _TYPES.get(key)
    if t is None:
        t = collections.namedtuple(name, fields)
        t.__module__ = __name__
        t.__doc__ = f"What ``{name}`` returns: {', '.join(f'``{f}``' for f in fields)} (torch.return_types.{name})."
        _TYPES[key] = t
        globals().setdefault(name, t)    # dispatch_jit.return_types.topk, as torch's
    return t


def of(schema) -> type | None:
    """The named tuple for a schema whose returns are all named (None for one return or unnamed ones)."""
    names = tuple(r.name for r in schema.returns)
    if len(names) < 2 or None in names:
        return None
    return named(schema.name, names)
