"""Operators, their kernels per dispatch key, and the computed dispatch table.

An ``OperatorEntry`` is the source of truth for one overload: the kernels
registered per key (runtime or alias).  From it we compute a flat table with
one entry per runtime key, using PyTorch's precedence (see
``compute_table_entry``).  Every registration recomputes the table and clears
the operator's memo, and returns a ``RegistrationHandle`` whose ``remove()``
undoes it.

Caches derived from registrations outside the memo (compiled mode's
decompositions and record specializations, ``dj.compile``'s traces) subscribe
with ``on_change``: the one mechanism that clears a memo (``refresh``, and
``undefine``) calls them too, so no cache outlives the registration it was
computed from.
"""

from __future__ import annotations

import enum
import itertools
import threading
from dataclasses import dataclass
from typing import Callable, NamedTuple

from .errors import RegistrationError, UnknownOperatorError
from .keys import ALIAS_EXPANSION, RUNTIME_KEYS, DispatchKey, key_bits
from .schema import FunctionSchema, parse_schema

__all__ = ["OperatorEntry", "CompiledSignature", "RegistrationHandle", "fallthrough_kernel", "lookup", "all_operators",
           "compute_table_entry", "KernelKind", "FALLTHROUGH_KINDS", "backend_fallbacks", "registry_lock", "on_change",
           "calls_of", "Tag"]

_K = DispatchKey


def fallthrough_kernel(*args, **kwargs):
    """Register this at a key to make the key invisible for an op.

    A fallthrough costs nothing at call time: the key is masked out of the
    call's key set before the highest key is chosen.
    """
    raise AssertionError("fallthrough_kernel is a marker and is never called")


# Registration is rare and takes this lock; lookups on the hot path never do.
registry_lock = threading.RLock()

# qualified overload name ("aten::add.Tensor", "aten::add" for the default) -> entry
_OPERATORS: dict[str, "OperatorEntry"] = {}
# overloads per packet name ("aten::add") in definition order
_PACKETS: dict[str, list["OperatorEntry"]] = {}
# key -> boxed kernel fn(op, keyset, args, kwargs), applied to every operator
_BACKEND_FALLBACKS: dict[DispatchKey, Callable] = {}
# fn() per cache derived from registrations: called after every change that clears a memo
_LISTENERS: list[Callable[[], None]] = []


@dataclass
class Kernel:
    fn: Callable
    key: DispatchKey
    debug: str  # where it was registered, for dump()


class RegistrationHandle:
    """Undoes one registration when ``remove()`` is called (idempotent)."""

    __slots__ = ("_undo", "description")

    def __init__(self, undo: Callable[[], None], description: str):
        self._undo, self.description = undo, description

    def remove(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            with registry_lock:
                undo()

    def __repr__(self) -> str:
        state = "active" if self._undo else "removed"
        return f"<RegistrationHandle {self.description} ({state})>"


class Tag(enum.StrEnum):
    """What kind of op an operator is, as PyTorch's ``torch.Tag``: facts every layer reads from
    ``OperatorEntry.tags`` (and ``OpOverload.tags``) instead of keeping its own list of names.
    Set where an op is defined (``Library.define(..., tags=...)``; the op library's families
    declare theirs in a ``TAGS`` table); ``inplace`` is set from the schema.  A member is its
    string, so ``"view" in op.tags`` reads the same.

    >>> import dispatch_jit as dj
    >>> sorted(map(str, dj.ops.aten.reshape.default.tags))
    ['view', 'view_may_copy']
    >>> dj.Tag.inplace in dj.ops.aten.add_.Tensor.tags
    True
    """

    view = "view"                          # the output re-describes the input's memory (a shape rule types it)
    view_may_copy = "view_may_copy"        # a view that copies where the strides cannot express it (reshape)
    reduction = "reduction"                # reduces its first argument over ``axis`` (keepdims): sum, amax, ...
    inplace = "inplace"                    # ``name_``: writes its ``self`` argument (from the schema)
    nondeterministic_seeded = "nondeterministic_seeded"   # draws from a random generator
    non_differentiable = "non_differentiable"   # outputs never require grad (Autograd falls through)


class KernelKind(enum.StrEnum):
    """What a dispatch table entry is: the dispatcher decides on it (a backend fallback is
    called boxed, a fallthrough is masked out of the key set).  The value is the label that
    ``dump_table`` and error messages show, nothing decides on it."""

    KERNEL = "kernel"                                   # registered at this very key
    FALLTHROUGH = "fallthrough"                         # a fallthrough_kernel registered for this op
    COMPOSITE_EXPLICIT = "CompositeExplicitAutograd"    # the alias kernel covering backend keys
    COMPOSITE_IMPLICIT = "CompositeImplicitAutograd"    # the decomposition, at backend and autograd keys
    AUTOGRAD = "Autograd"                               # the Autograd alias kernel
    BACKEND_FALLBACK = "backend fallback"               # one boxed kernel for every op at this key
    FALLTHROUGH_FALLBACK = "fallthrough (backend fallback)"
    MISSING = "missing"


FALLTHROUGH_KINDS = frozenset([KernelKind.FALLTHROUGH, KernelKind.FALLTHROUGH_FALLBACK])
_MISSING_ENTRY = (None, KernelKind.MISSING)
_TABLE_SIZE = max(k.value for k in RUNTIME_KEYS) + 1     # a flat table indexed by runtime key


class CompiledSignature(NamedTuple):
    """One signature a kernel has been compiled for, as ``dj.cache_info`` lists it: the input
    dtypes (or a scalar's Python type), and, where the kernel has them, its output dtype and
    the loop variant.

    >>> str(CompiledSignature(("float32",), "float32", "1d flat")), str(CompiledSignature(("int8", "int8")))
    ('(float32) -> float32 [1d flat]', 'int8xint8')
    """
    inputs: tuple[str, ...]
    output: str = ""
    variant: str = ""

    def __str__(self) -> str:
        if not self.output:
            return "x".join(self.inputs)
        return f"({', '.join(self.inputs)}) -> {self.output}" + (f" [{self.variant}]" if self.variant else "")


class OperatorEntry:
    """One operator overload: schema, kernels per key, computed table, memo.

    The memo maps a call signature (thread-local state + each argument's
    signature) to the final callable; the dispatcher owns its hot path.
    """

    def __init__(self, schema: FunctionSchema):
        self.schema = schema
        self.name = schema.full_name          # "aten::add.Tensor"
        self.packet_name = schema.qualname    # "aten::add"
        self.kernels: dict[DispatchKey, Kernel] = {}
        # one (callable or None, KernelKind) per runtime key value
        self.table: list[tuple[Callable | None, KernelKind]] = [_MISSING_ENTRY] * _TABLE_SIZE
        self.fallthrough_bits = 0
        self.memo: dict = {}
        self.misses = 0
        self.calls = itertools.count()   # every call through the entry; hits = calls - misses
        self.compiled: dict[str, list[CompiledSignature]] = {}   # kernel name -> its signatures (note_compiled)
        # a view's shape rule (input shape, statics) -> shape; sizes may be unknown.  Other ops'
        # meta functions (register_fake's, kernels/nn's losses) are their kernels at the Meta key.
        self.shape_fn: Callable | None = None
        self.entry: Callable | None = None         # the generated fast entry (dispatcher)
        self.tags: set[str] = set()

    # -- registration --------------------------------------------------------
    def register(self, key: DispatchKey, fn: Callable, debug: str) -> RegistrationHandle:
        with registry_lock:
            if key in self.kernels:
                raise RegistrationError(
                    f"{self.name} already has a kernel registered at {key.name} ({self.kernels[key].debug}); "
                    f"call .remove() on the earlier registration's handle first")
            self.kernels[key] = Kernel(fn, key, debug)
            self.refresh()

        def undo():
            if self.kernels.get(key) is not None and self.kernels[key].fn is fn:
                del self.kernels[key]
                self.refresh()
        return RegistrationHandle(undo, f"{self.name} @ {key.name}")

    def refresh(self, notify: bool = True) -> None:
        """Recompute the dispatch table and drop every memoized resolution, and (``notify``)
        every cache that ``on_change`` listeners derived from registrations."""
        table = [_MISSING_ENTRY] * _TABLE_SIZE
        ft = 0
        for rk in RUNTIME_KEYS:
            fn, kind = compute_table_entry(self, rk)
            table[rk.value] = (fn, kind)
            if kind in FALLTHROUGH_KINDS:
                ft |= key_bits(rk)
        self.table = table
        self.fallthrough_bits = ft
        self.memo.clear()
        if notify:
            _changed()

    def decomposition(self, key: DispatchKey) -> Callable | None:
        """The CompositeImplicitAutograd kernel that a call ending on backend ``key`` runs (what
        tracing records through), or None: there is none, or a kernel registered at ``key`` or a
        CompositeExplicitAutograd one takes precedence (``compute_table_entry``)."""
        fn, kind = self.table[key.value]
        if kind is not KernelKind.COMPOSITE_IMPLICIT or fn is fallthrough_kernel or hasattr(fn, "specialize"):
            return None
        return fn

    def note_compiled(self, kernel: str, sig: CompiledSignature | None = None) -> None:
        """Record that ``kernel`` has compiled (or, once, loaded) ``sig``; with no ``sig``, only that
        the kernel exists (``dj.cache_info`` then lists it with nothing compiled yet).  Miss path only."""
        sigs = self.compiled.setdefault(kernel, [])
        if sig is not None and sig not in sigs:
            sigs.append(sig)

    def has_kernel_for(self, key: DispatchKey) -> bool:
        """Whether a call landing on runtime ``key`` (or alias ``key``) finds a real kernel."""
        if key.is_alias:
            k = self.kernels.get(key)
            return k is not None and k.fn is not fallthrough_kernel
        fn, kind = self.table[key.value]
        return fn is not None and kind not in FALLTHROUGH_KINDS

    def __repr__(self) -> str:
        return f"<OperatorEntry {self.name}>"


def calls_of(op: OperatorEntry) -> int:
    """Calls made through the op's entry so far (an itertools.count: reading it
    must not advance it)."""
    return op.calls.__reduce__()[1][0]


def compute_table_entry(op: OperatorEntry, k: DispatchKey) -> tuple[Callable | None, KernelKind]:
    """The kernel a call landing on runtime key ``k`` runs, and where it came from.

    PyTorch's precedence (computeDispatchTableEntryWithDebug), step by step:

    1. a kernel registered directly at ``k``;
    2. a CompositeExplicitAutograd kernel, if ``k`` is a backend key;
    3. a CompositeImplicitAutograd kernel, if ``k`` is a backend key, or an
       autograd key whose backend has no direct or CompositeExplicit kernel;
    4. an Autograd (alias) kernel, if ``k`` is an autograd key;
    5. the backend fallback registered for ``k`` (applies to every op);
    6. missing.
    """
    kernels = op.kernels
    direct = kernels.get(k)
    if direct is not None:
        return direct.fn, KernelKind.FALLTHROUGH if direct.fn is fallthrough_kernel else KernelKind.KERNEL
    cea = kernels.get(_K.CompositeExplicitAutograd)
    if cea is not None and k in ALIAS_EXPANSION[_K.CompositeExplicitAutograd]:
        return cea.fn, KernelKind.COMPOSITE_EXPLICIT
    cia = kernels.get(_K.CompositeImplicitAutograd)
    if cia is not None and k in ALIAS_EXPANSION[_K.CompositeImplicitAutograd]:
        backend = _AUTOGRAD_TO_BACKEND.get(k)
        if backend is None or not (backend in kernels or cea is not None):
            return cia.fn, KernelKind.COMPOSITE_IMPLICIT
    ag = kernels.get(_K.Autograd)
    if ag is not None and k in ALIAS_EXPANSION[_K.Autograd]:
        return ag.fn, KernelKind.FALLTHROUGH if ag.fn is fallthrough_kernel else KernelKind.AUTOGRAD
    fb = _BACKEND_FALLBACKS.get(k)
    if fb is not None:
        return fb, KernelKind.FALLTHROUGH_FALLBACK if fb is fallthrough_kernel else KernelKind.BACKEND_FALLBACK
    return None, KernelKind.MISSING


_AUTOGRAD_TO_BACKEND = {_K.AutogradCPU: _K.CPU, _K.AutogradCUDA: _K.CUDA}


# -- the global operator registry ------------------------------------------------
def define(schema: FunctionSchema | str, debug: str = "") -> OperatorEntry:
    if isinstance(schema, str):
        schema = parse_schema(schema)
    with registry_lock:
        if schema.full_name in _OPERATORS:
            raise RegistrationError(f"operator {schema.full_name} is already defined "
                                    f"(schema: {_OPERATORS[schema.full_name].schema}); "
                                    f"use a new overload name or Library(ns, 'IMPL') to add kernels")
        op = OperatorEntry(schema)
        if _is_inplace(schema):
            op.tags.add(Tag.inplace)
        op.refresh()
        _OPERATORS[op.name] = op
        _PACKETS.setdefault(op.packet_name, []).append(op)
    return op


def _is_inplace(schema: FunctionSchema) -> bool:
    """PyTorch's in-place convention: ``name_`` whose ``self`` is written (``Tensor(a!) self``)."""
    return schema.name.endswith("_") and any(a.name == "self" and a.is_mutable for a in schema.arguments)


def undefine(op: OperatorEntry) -> None:
    with registry_lock:
        _OPERATORS.pop(op.name, None)
        overloads = _PACKETS.get(op.packet_name, [])
        if op in overloads:
            overloads.remove(op)
        if not overloads:
            _PACKETS.pop(op.packet_name, None)
        _changed()


def lookup(name: str, namespace: str | None = None) -> OperatorEntry:
    """Find an overload by "ns::name[.overload]" (or a bare name within ``namespace``)."""
    if "::" not in name and namespace is not None:
        name = f"{namespace}::{name}"
    if "::" not in name:
        name = f"aten::{name}"
    op = _OPERATORS.get(name)
    if op is None and name in _PACKETS:
        op = _PACKETS[name][0]
    if op is None:
        import difflib
        close = difflib.get_close_matches(name, list(_OPERATORS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownOperatorError(f"no operator named {name!r}{hint}")
    return op


def overloads(packet_name: str) -> list[OperatorEntry]:
    return list(_PACKETS.get(packet_name, ()))


def all_operators() -> list[OperatorEntry]:
    return list(_OPERATORS.values())


def register_fallback(key: DispatchKey, fn: Callable) -> RegistrationHandle:
    with registry_lock:
        if key in _BACKEND_FALLBACKS:
            raise RegistrationError(f"a backend fallback is already registered at {key.name}; "
                                    f"remove its handle first")
        _BACKEND_FALLBACKS[key] = fn
        _refresh_all()

    def undo():
        if _BACKEND_FALLBACKS.get(key) is fn:
            del _BACKEND_FALLBACKS[key]
            _refresh_all()
    return RegistrationHandle(undo, f"fallback @ {key.name}")


def backend_fallbacks() -> dict[DispatchKey, Callable]:
    return dict(_BACKEND_FALLBACKS)


def _refresh_all() -> None:
    for op in _OPERATORS.values():
        op.refresh(notify=False)
    _changed()


def on_change(fn: Callable[[], None]) -> RegistrationHandle:
    """Call ``fn()`` after every registration change (a kernel or fallback registered or
    removed, an operator defined or undefined), when the dispatch memos are cleared: a cache
    computed from registrations subscribes its clearing here.  Returns a handle that
    unsubscribes it.

    >>> from dispatch_jit import registry
    >>> seen = []
    >>> h = registry.on_change(lambda: seen.append(1))
    >>> h2 = registry.register_fallback(DispatchKey.Meta, fallthrough_kernel); h2.remove()
    >>> len(seen)
    2
    >>> h.remove()
    """
    with registry_lock:
        _LISTENERS.append(fn)

    def undo():
        if fn in _LISTENERS:
            _LISTENERS.remove(fn)
    return RegistrationHandle(undo, f"on_change {getattr(fn, '__qualname__', fn)!s}")


def _changed() -> None:
    for fn in list(_LISTENERS):
        fn()
