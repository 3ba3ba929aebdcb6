"""``functional_call``: run a module with the given parameters and buffers in place of its own."""

from __future__ import annotations

from ..errors import InvalidArgumentError

__all__ = ["functional_call"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors in
    ``parameter_and_buffer_dicts`` (a dict of dotted names, or a tuple of dicts), as
    ``torch.func.functional_call``; the module is unchanged afterwards.

    >>> import dispatch_jit as dj
    >>> m = dj.nn.Linear(2, 1)
    >>> p = {"weight": dj.ones(1, 2), "bias": dj.zeros(1)}
    >>> dj.func.functional_call(m, p, (dj.tensor([1.0, 2.0]),))
    tensor([3.])
    """
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        merged = dict(dicts)
    elif isinstance(dicts, (tuple, list)) and all(isinstance(d, dict) for d in dicts):
        merged = {}
        for d in dicts:
            for k, v in d.items():
                if k in merged:
                    raise InvalidArgumentError(f"{k} appeared in multiple dictionaries; behavior of functional call "
                                               f"is ambiguous")
                merged[k] = v
    else:
        raise InvalidArgumentError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, "
                                   f"but got {type(dicts)}")
    known = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
            {n for n, _ in module.named_buffers(remove_duplicate=False)}
    if strict:
        missing = sorted(known - set(merged))
        unexpected = sorted(set(merged) - known)
        if missing or unexpected:
            raise InvalidArgumentError(f"Error(s) in reparametrizing for {type(module).__name__}: missing keys "
                                       f"{missing}, unexpected keys {unexpected}")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    saved = []
    try:
        for name, value in merged.items():
            owner, leaf = _owner(module, name)
            reg = "_parameters" if leaf in owner._parameters else "_buffers" if leaf in owner._buffers else None
            if reg is None:
                raise InvalidArgumentError(f"functional_call: {type(module).__name__} has no parameter or buffer "
                                           f"named {name!r}")
            table = getattr(owner, reg)
            saved.append((table, leaf, table[leaf]))
            dict.__setitem__(table, leaf, value) if isinstance(table, dict) else table.__setitem__(leaf, value)
        return module(*args, **(kwargs or {}))
    finally:
        for table, leaf, old in reversed(saved):
            dict.__setitem__(table, leaf, old) if isinstance(table, dict) else table.__setitem__(leaf, old)


def _owner(module, name: str):
    parts = name.split(".")
    m = module
    for p in parts[:-1]:
        sub = m._modules.get(p) if hasattr(m, "_modules") else None
        if sub is None:
            raise InvalidArgumentError(f"functional_call: {type(module).__name__} has no submodule {p!r} (in {name!r})")
        m = sub
    return m, parts[-1]
