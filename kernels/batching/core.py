"""The machinery every batching rule shares: unwrap the innermost level, run the rule, wrap.

A rule is a function ``rule(op, args, bdims)`` over the *values* of the call's arguments
(schema order, keyword-only ones included): ``bdims[i]`` is the batch dim of argument ``i``
at this level (None where it is unbatched or not a tensor; a list for a Tensor[] argument).
It returns ``(result, bdim)``, or for a schema returning several tensors ``(results, bdims)``;
a bdim of None means the result is the same for every example.  ``BatchRule`` turns a rule
into the Batched-key kernel of one op, as functorch's ``VMAP_SUPPORT(op, rule)``.
"""

from __future__ import annotations

import warnings

from dispatch_jit.errors import DispatchJitError, VmapError
from dispatch_jit.func.batched import BatchedTensor, max_level, movedim_front, unwrap_at, wrap_batched
from dispatch_jit.ops import overload_of
from dispatch_jit.tensor import Tensor

__all__ = ["BatchRule", "invoke", "batched_fallback", "front", "batch_size", "FALLBACK_WARNED"]


def invoke(op, args):
    """Call ``op`` (an OperatorEntry) through its entry on schema-ordered ``args``."""
    schema = op.schema.arguments
    pos, kw = [], {}
    for a, v in zip(schema, args):
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    return op.entry(*pos, **kw)


def front(v, bdim):
    """``v`` with its batch dim first; None stays None (unbatched)."""
    return v if bdim is None else movedim_front(v, bdim)


def batch_size(args, bdims) -> int:
    for v, b in zip(args, bdims):
        if isinstance(b, list):
            for vi, bi in zip(v, b):
                if bi is not None:
                    return vi.shape[bi]
        elif b is not None:
            return v.shape[b]
    raise VmapError("vmap: internal error: a batching rule ran with no batched argument")


def _unwrap_all(args, level):
    vals, bdims = [], []
    for a in args:
        if a.__class__ in (list, tuple) and any(isinstance(x, Tensor) for x in a):
            pairs = [unwrap_at(x, level) for x in a]
            vals.append([p[0] for p in pairs])
            bdims.append([p[1] for p in pairs])
        else:
            v, b = unwrap_at(a, level) if isinstance(a, Tensor) else (a, None)
            vals.append(v)
            bdims.append(b)
    return vals, bdims


def _wrap(out, bdim, level):
    if isinstance(out, (tuple, list)):
        items = [_wrap(o, b, level) for o, b in zip(out, bdim)]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if bdim is None or not isinstance(out, Tensor):
        return out
    return wrap_batched(out, bdim, level)


def _check_no_out(op, args):
    for a, v in zip(op.schema.arguments, args):
        if a.name == "out" and v is not None:
            raise VmapError(f"vmap: {op.name} with out=... is not supported inside vmap; call it without out=")


class BatchRule:
    """The Batched-key kernel of one op: the call's innermost level is unwrapped, ``rule``
    runs on the values, its results are wrapped at that level."""

    def __init__(self, rule, name: str | None = None, decomposed=None):
        self.rule = rule
        self.decomposed = decomposed     # the op written with other ops, where ``rule`` says NotImplemented
        self.__name__ = self.__qualname__ = name or getattr(rule, "__name__", "batch_rule")

    def specialize(self, call):
        op, rule, decomposed = call.op, self.rule, self.decomposed
        kwnames = [a.name for a in op.schema.arguments if a.kwarg_only]
        npos = len(op.schema.arguments) - len(kwnames)

        def run(*args):
            level = max_level(args)
            if level is None:
                raise VmapError(f"vmap: {op.name} reached the Batched key with no batched tensor (a tensor "
                                f"kept from inside a vmap is used outside it); return it from the function")
            _check_no_out(op, args)
            if rule is None:
                return decomposed(*args)
            vals, bdims = _unwrap_all(args, level)
            res = rule(op, vals, bdims)
            if res is NotImplemented:
                if decomposed is not None:
                    return decomposed(*args)
                return batched_fallback(overload_of(op), call.keyset, args[:npos], dict(zip(kwnames, args[npos:])))
            return _wrap(res[0], res[1], level)
        run.__qualname__ = run.__name__ = self.__name__
        return run

    def __call__(self, *args, **kwargs):      # a kernel must be callable; dispatch uses specialize
        raise DispatchJitError(f"{self.__name__}: a batching rule runs through the dispatcher")


# -- the boxed fallback ---------------------------------------------------------------
FALLBACK_WARNED: set = set()


def batched_fallback(op, keyset, args, kwargs):
    """The Batched key's boxed fallback: run the op once per example and stack the results,
    warning once per op that it has no batching rule (as functorch's)."""
    entry = op._entry
    allargs = list(args) + list(kwargs.values())
    level = max_level(allargs)
    if level is None:
        raise VmapError(f"vmap: {entry.name} reached the Batched key with no batched tensor (a tensor kept "
                        f"from inside a vmap is used outside it); return it from the function")
    if any(a.type.alias is not None and a.type.alias.is_write and a.name != "out" for a in entry.schema.arguments):
        raise VmapError(f"vmap: {entry.name} writes its input in place and has no batching rule; call its "
                        f"out-of-place form inside vmap")
    if entry.name not in FALLBACK_WARNED:
        FALLBACK_WARNED.add(entry.name)
        warnings.warn(f"There is a performance drop because we have not yet implemented the batching rule for "
                      f"{entry.name}. It runs once per example (a Python loop) and the results are stacked; "
                      f"register a rule with Library(...).impl(op, fn, 'Batched').", UserWarning,
                      stacklevel=_user_stacklevel())
    vals, bdims = _unwrap_all(list(args) + list(kwargs.values()), level)
    B = batch_size(vals, bdims)
    npos = len(args)
    results = []
    for i in range(B):
        sliced = []
        for v, b in zip(vals, bdims):
            if isinstance(b, list):
                sliced.append([vi if bi is None else movedim_front(vi, bi)[i] for vi, bi in zip(v, b)])
            elif b is not None:
                sliced.append(movedim_front(v, b)[i])
            else:
                sliced.append(v)
        results.append(op(*sliced[:npos], **dict(zip(kwargs.keys(), sliced[npos:]))))
    stack = _stack_op()
    if isinstance(results[0], (tuple, list)):
        outs = tuple(stack([r[j] for r in results]) for j in range(len(results[0])))
        wrapped = [wrap_batched(o, 0, level) for o in outs]
        kind = type(results[0])
        return kind(wrapped) if kind in (tuple, list) else kind(*wrapped)
    if not isinstance(results[0], Tensor):
        raise VmapError(f"vmap: {entry.name} returned {type(results[0]).__name__}; the fallback can only stack "
                        f"tensors")
    return wrap_batched(stack(results), 0, level)


def _user_stacklevel() -> int:
    """The warning's stack level that names the user's line: the first frame outside the library
    (dispatch_jit, its kernels, the generated entries)."""
    import os
    import sys
    from dispatch_jit import errors
    roots = (os.path.dirname(errors.__file__), os.path.dirname(os.path.dirname(__file__)), "<dispatch_jit")
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(roots):
        f, level = f.f_back, level + 1
    return level


def _stack_op():
    from dispatch_jit.registry import lookup
    return lookup("aten::stack").entry


__all__ += ["BatchedTensor"]
