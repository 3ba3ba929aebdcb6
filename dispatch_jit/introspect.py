"""Looking inside the dispatcher: registered kernels, computed tables, caches.

Everything here is read from the registry's ``OperatorEntry`` objects, so this
module sits below the dispatcher, whose errors quote ``dump_table``.

>>> import dispatch_jit as dj
>>> dj.has_kernel("aten::add", "CPU"), dj.has_kernel("aten::add", "Meta")
(True, False)
"""

from __future__ import annotations

from .keys import RUNTIME_KEYS, DispatchKey, privateuse1_backend_name
from .registry import (FALLTHROUGH_KINDS, OperatorEntry, all_operators, backend_fallbacks, calls_of, lookup,
                       overloads)

__all__ = ["dump", "dump_table", "has_kernel", "cache_info", "list_operators"]


def _op(name) -> OperatorEntry:
    if isinstance(name, OperatorEntry):
        return name
    if hasattr(name, "_entry"):          # OpOverload
        return name._entry
    if hasattr(name, "_qualname"):       # OpOverloadPacket
        return lookup(name._qualname)
    if callable(name) and hasattr(name, "_op"):   # a generated entry, e.g. dj.add
        return name._op
    return lookup(name)


def _kernel_name(fn) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def dump(name) -> str:
    """The kernels registered for an operator, per key; alias keys are marked.

    >>> import dispatch_jit as dj
    >>> print(dj.dump("aten::add"))          # doctest: +ELLIPSIS
    name: aten::add.Tensor
    schema: aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!)? out=None) -> Tensor
    Autograd: autograd_AddBackward [alias kernel]...
    CPU: add_cpu [kernel]...
    """
    op = _op(name)
    lines = [f"name: {op.name}", f"schema: {op.schema}"]
    for key in sorted(op.kernels, key=lambda k: -k.value):
        k = op.kernels[key]
        tag = "alias kernel" if key.is_alias else "kernel"
        lines.append(f"{key.name}: {_kernel_name(k.fn)} [{tag}] ({k.debug})")
    fbs = backend_fallbacks()
    if fbs:
        lines.append("backend fallbacks (all ops): " + ", ".join(
            f"{k.name}={'fallthrough' if _kernel_name(f) == 'fallthrough_kernel' else _kernel_name(f)}"
            for k, f in sorted(fbs.items(), key=lambda kv: -kv[0].value)))
    return "\n".join(lines)


def dump_table(name) -> str:
    """The computed dispatch table: the kernel each runtime key runs, and its source
    (kernel, CompositeExplicitAutograd, CompositeImplicitAutograd, Autograd,
    backend fallback, fallthrough, missing)."""
    op = _op(name)
    lines = [f"Computed dispatch table for {op.name}:"]
    width = max(len(k.name) for k in RUNTIME_KEYS)
    for key in sorted(RUNTIME_KEYS, key=lambda k: -k.value):
        fn, kind = op.table[key.value]
        what = "-" if fn is None else ("fallthrough" if kind in FALLTHROUGH_KINDS else _kernel_name(fn))
        lines.append(f"  {_label(key):<{width}}  {what}  [{kind.value}]")
    return "\n".join(lines)


def _label(key: DispatchKey) -> str:
    """A key's row: PrivateUse1 says which backend it is once one renamed it ("PrivateUse1 (dask)")."""
    name = privateuse1_backend_name()
    return f"{key.name} ({name})" if key is DispatchKey.PrivateUse1 and name != "privateuseone" else key.name


def has_kernel(name, key) -> bool:
    """Whether a call that lands on ``key`` finds a real kernel (not missing, not fallthrough)."""
    return _op(name).has_kernel_for(DispatchKey.parse(key))


def cache_info(name) -> dict:
    """Memoized-resolution state of an operator (all overloads of a packet name).

    Keys: ``hits`` (calls answered by the memo), ``misses`` (calls that
    resolved a new signature), ``resolved_signatures`` (entries in the memo),
    ``compiled`` (kernel -> compiled dtype signatures, in compile order).

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([1.0, 2.0]); _ = dj.neg(x); _ = dj.neg(x)
    >>> info = dj.cache_info("aten::neg")
    >>> info["hits"] >= 1, "(float32) -> float32 [1d flat]" in info["compiled"]["neg_cpu"]
    (True, True)
    """
    if isinstance(name, str) and "." not in name.split("::")[-1] and overloads(
            name if "::" in name else f"aten::{name}"):
        ops = overloads(name if "::" in name else f"aten::{name}")
    else:
        ops = [_op(name)]
    info = {"hits": 0, "misses": 0, "resolved_signatures": 0, "compiled": {}}
    for op in ops:
        info["hits"] += calls_of(op) - op.misses
        info["misses"] += op.misses
        info["resolved_signatures"] += len(op.memo)
        for k, v in op.compiled.items():
            info["compiled"].setdefault(k, []).extend(map(str, v))
    return info


def list_operators(namespace: str | None = None) -> list[str]:
    return sorted(op.name for op in all_operators() if namespace is None or op.schema.namespace == namespace)
