"""``Library``: define operators and register kernels per dispatch key (``dj.Library``).

The public facade, dispatch_jit/library.py, shows it at work; its example runs
with the suite's doctests.
"""

from __future__ import annotations

from typing import Callable

from .. import registry
from ..entry import make_entry
from ..errors import ArgumentTypeError, InvalidArgumentError, RegistrationError
from ..keys import DispatchKey
from ..registry import RegistrationHandle, fallthrough_kernel
from ..schema import parse_schema

__all__ = ["Library", "fallthrough_kernel"]

_KINDS = ("DEF", "IMPL", "FRAGMENT")
_DEF_NAMESPACES: set[str] = set()


class Library:
    """A block of definitions and registrations for one namespace.

    Args:
        ns: the namespace ("aten", "myops"); "_" for a library that only
            registers backend fallbacks.
        kind: "DEF" (the one library that defines the namespace's ops, like
            TORCH_LIBRARY), "FRAGMENT" (more definitions for an existing
            namespace), or "IMPL" (kernels only, like TORCH_LIBRARY_IMPL).
        dispatch_key: default key for ``impl`` calls that name none.
    """

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in _KINDS:
            raise InvalidArgumentError(f"Library kind must be one of {_KINDS}, got {kind!r}")
        if not ns or not (ns == "_" or ns.isidentifier()):
            raise InvalidArgumentError(f"Library namespace must be an identifier or '_', got {ns!r}")
        if kind == "DEF":
            if ns in _DEF_NAMESPACES:
                raise RegistrationError(
                    f"namespace '{ns}' already has a DEF library; only one may exist per namespace. "
                    f"Use Library('{ns}', 'FRAGMENT') to define more ops, or 'IMPL' to add kernels")
            _DEF_NAMESPACES.add(ns)
        self.ns, self.kind = ns, kind
        self.dispatch_key = dispatch_key
        self._handles: list[RegistrationHandle] = []

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        """Define an operator from a schema string; returns its qualified name.  ``tags``: its
        kinds (``dj.Tag`` members or their strings), which every layer reads: a ``"view"`` with a
        shape rule (``impl_shape``) is traced and fused as a view, a ``"reduction"`` is recorded
        as one in compiled mode, as the op library's own are."""
        if self.kind == "IMPL":
            raise RegistrationError(f"cannot define '{schema}' in an IMPL library; use 'DEF' or 'FRAGMENT'")
        s = parse_schema(schema)
        if s.namespace is None:
            s = s.with_namespace(self.ns)
        elif s.namespace != self.ns:
            raise RegistrationError(f"schema namespace '{s.namespace}' does not match the library's '{self.ns}'")
        op = registry.define(s, debug=f"Library({self.ns!r}, {self.kind!r})")
        op.tags.update(tags)
        make_entry(op)
        self._handles.append(RegistrationHandle(lambda: registry.undefine(op), f"define {op.name}"))
        return op.packet_name

    def impl(self, op_name: str, fn: Callable | str | None = None, dispatch_key: str = "", *,
             with_keyset: bool = False):
        """Register ``fn`` as the kernel of ``op_name`` at ``dispatch_key``.

        The kernel receives the schema's arguments positionally (keyword-only
        ones as keywords).  Usable as a decorator:
        ``@lib.impl("myadd", dispatch_key="CPU")``.  Returns a handle whose
        ``remove()`` undoes the registration.
        """
        if fn is None or isinstance(fn, (str, DispatchKey)):
            key_arg = fn if fn is not None else dispatch_key

            def deco(f):
                self.impl(op_name, f, key_arg, with_keyset=with_keyset)
                return f
            return deco
        if not (callable(fn) or hasattr(fn, "specialize")):
            raise ArgumentTypeError(f"impl() expects a callable kernel (or an object with .specialize(call)), "
                            f"got {type(fn).__name__}")
        key = DispatchKey.parse(dispatch_key or self.dispatch_key or "CompositeImplicitAutograd")
        op = registry.lookup(op_name, None if "::" in op_name else self.ns)
        if with_keyset:
            fn = _KeysetKernel(fn)
        h = op.register(key, fn, debug=f"Library({self.ns!r}, {self.kind!r}).impl")
        self._handles.append(h)
        return h

    def impl_shape(self, op_name: str, rule: Callable) -> RegistrationHandle:
        """Register ``rule(input_shape, *static_args) -> output_shape`` as the shape rule of the
        view op ``op_name`` (a size may be None, unknown: tracing has no sizes; see
        kernels/shape/op.py).  The compiler types a traced or recorded view with it instead of
        running the op."""
        op = registry.lookup(op_name, None if "::" in op_name else self.ns)
        if op.shape_fn is not None:
            raise RegistrationError(f"{op.name} already has a shape rule")
        op.shape_fn = rule
        h = RegistrationHandle(lambda: setattr(op, "shape_fn", None), f"{op.name} shape rule")
        self._handles.append(h)
        return h

    def fallback(self, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = True) -> RegistrationHandle:
        """Register a boxed kernel ``fn(op, keyset, args, kwargs)`` for every
        operator, present and future, at ``dispatch_key``.  Only on
        ``Library("_", "IMPL")``, as in PyTorch."""
        if self.ns != "_" or self.kind != "IMPL":
            raise RegistrationError("fallback() is only allowed on Library('_', 'IMPL')")
        key = DispatchKey.parse(dispatch_key or self.dispatch_key)
        if key.is_alias:
            raise RegistrationError(f"a backend fallback needs a runtime key, not the alias {key.name}")
        h = registry.register_fallback(key, fn)
        self._handles.append(h)
        return h

    def _destroy(self) -> None:
        """Undo everything this library registered (newest first)."""
        for h in reversed(self._handles):
            h.remove()
        self._handles.clear()
        if self.kind == "DEF":
            _DEF_NAMESPACES.discard(self.ns)

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, registrations={len(self._handles)})"


class _KeysetKernel:
    """A kernel that wants the call's key set as its first argument."""

    def __init__(self, fn):
        self.fn = fn

    def specialize(self, call):
        from ..keys import DispatchKeySet
        from ..dispatcher import _unboxed
        ks = DispatchKeySet.from_bits(call.keyset)
        inner = _unboxed(call.op, lambda *a, **k: self.fn(ks, *a, **k))
        return inner
