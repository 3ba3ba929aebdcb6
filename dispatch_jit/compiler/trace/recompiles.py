"""Why a compiled function recompiled: the part of a new key that differs from the cached ones.

A miss on a function that has entries already names the closest of the latest cached keys
and what differs from it (``explain()``'s "last recompile"): the dispatch state, the default
dtype, an argument's or a capture's signature or value (``argument 'x': dtype float32 ->
float64``).  A retrace because the containers or hooks a trace walked changed is said by
structure.py instead.
"""

from __future__ import annotations

import itertools

from dispatch_jit.keys import AUTOGRAD_BITS
from dispatch_jit.signature import decode, keyset_sig_bits

__all__ = ["key_change", "describe_sig"]

_AUTOGRAD_SIG_BITS = keyset_sig_bits(AUTOGRAD_BITS)   # AutogradOther, AutogradCPU, AutogradCUDA


def describe_sig(s) -> dict:
    """The fields of one key part: a tensor's signature int, a scalar's type, or a value."""
    if isinstance(s, int) and s >= 0:
        m = decode(s)
        return {"dtype": m.dtype.name, "ndim": m.ndim, "contiguous": m.contiguous, "device": m.device,
                "requires_grad": bool(s & _AUTOGRAD_SIG_BITS)}
    if isinstance(s, type):              # a runtime scalar: its type is all the key holds
        return {"type": s.__name__}
    if isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], type):
        return {"type": s[0].__name__, "value": s[1]}
    return {"value": s}


def key_change(cache: dict, key: tuple, captures: list, arg_name) -> str:
    """Which part of ``key`` differs from the closest of the latest keys of ``cache``;
    ``captures``: the function's (guards.py), naming the key's last part; ``arg_name(i)``: how
    positional argument ``i`` is named."""
    best = None
    for old in itertools.islice(reversed(cache), 32):
        changes = []
        if old[0] != key[0]:
            changes.append("dispatch state (grad mode, included/excluded keys) changed")
        if old[1] != key[1]:
            changes.append(f"default dtype {old[1].name} -> {key[1].name}")
        if len(old[2]) != len(key[2]) or [k for k, _ in old[3]] != [k for k, _ in key[3]]:
            changes.append("argument count or keyword names changed")
        else:
            pairs = [(f"argument {arg_name(i)}", a, b) for i, (a, b) in enumerate(zip(old[2], key[2]))]
            pairs += [(f"argument '{k}'", a, b) for (k, a), (_, b) in zip(old[3], key[3])]
            pairs += [(c.label, a, b) for c, a, b in zip(captures, old[4], key[4])]
            for name, a, b in pairs:
                if a == b:
                    continue
                da, db = describe_sig(a), describe_sig(b)
                parts = [f"{f} {da.get(f)} -> {db.get(f)}" for f in sorted(set(da) | set(db))
                         if da.get(f) != db.get(f)]
                changes.append(f"{name}: {', '.join(parts)}")
            if len(old) > 5 and len(key) > 5 and old[5] != key[5]:     # a sized function (api.py)
                changes.append("input sizes " + ", ".join(f"{list(a)} -> {list(b)}" for a, b in
                                                          zip(old[5], key[5]) if a != b))
        if best is None or len(changes) < len(best):
            best = changes
    return "; ".join(best) if best else "same key"
