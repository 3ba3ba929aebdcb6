"""``dj.ops``: operators as objects, PyTorch's ``torch.ops`` in miniature.

``dj.ops.aten.add`` is an ``OpOverloadPacket`` (all overloads of a name);
``dj.ops.aten.add.Tensor`` and ``.default`` are ``OpOverload``s.  Calling
either goes straight to the generated dispatcher entry.
"""

from __future__ import annotations

from . import dispatcher, registry
from .dispatcher import redispatch as _redispatch
from .registry import OperatorEntry
from .schema import bind
from .tensor import Tensor

__all__ = ["ops", "OpOverload", "OpOverloadPacket", "overload_of", "entries"]


class OpOverload:
    """One overload of an operator.

    >>> import dispatch_jit as dj
    >>> op = dj.ops.aten.add.Tensor
    >>> str(op.schema)
    'aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!)? out=None) -> Tensor'
    """

    def __init__(self, entry: OperatorEntry):
        self._entry = entry
        self.schema = entry.schema
        self.__name__ = entry.name

    def __call__(self, *args, **kwargs):
        return self._entry.entry(*args, **kwargs)

    def name(self) -> str:
        return self._entry.name

    @property
    def tags(self) -> set:
        """The operator's kinds (``dj.Tag``): read live, so a tag added later is seen."""
        return self._entry.tags

    @property
    def overloadpacket(self) -> "OpOverloadPacket":
        return OpOverloadPacket(self._entry.packet_name)

    def redispatch(self, keyset, *args, **kwargs):
        """Run the kernel selected by an explicit key set (PyTorch's ``redispatch``)."""
        b = bind(self.schema, args, kwargs, is_tensor=_is_tensor)
        return _redispatch(self._entry, keyset, tuple(b.values()))

    def __repr__(self) -> str:
        return f"<OpOverload {self._entry.name}>"

    # Equality and hashing are identity's (C speed, used as dict keys on hot paths): there is
    # one OpOverload per operator entry (overload_of), so identity is equality by entry.


def _is_tensor(v) -> bool:
    return isinstance(v, Tensor)


_OVERLOADS: dict[int, OpOverload] = {}


def overload_of(entry: OperatorEntry) -> OpOverload:
    ov = _OVERLOADS.get(id(entry))
    if ov is None or ov._entry is not entry:
        ov = _OVERLOADS[id(entry)] = OpOverload(entry)
    return ov


# boxed kernels (backend fallbacks) receive the op as its OpOverload
dispatcher.set_op_handle(overload_of)


class OpOverloadPacket:
    """All overloads of one operator name; calling it uses the first overload."""

    def __init__(self, qualname: str):
        self._qualname = qualname

    def _overloads(self) -> list[OperatorEntry]:
        found = registry.overloads(self._qualname)
        if not found:
            raise AttributeError(f"no operator named '{self._qualname}'")
        return found

    def __getattr__(self, name: str) -> OpOverload:
        if name.startswith("__"):
            raise AttributeError(name)
        want = "" if name == "default" else name
        for e in self._overloads():
            if e.schema.overload_name == want:
                return overload_of(e)
        names = [e.schema.overload_name or "default" for e in self._overloads()]
        raise AttributeError(f"'{self._qualname}' has no overload '{name}'; overloads: {', '.join(names)}")

    def __call__(self, *args, **kwargs):
        return self._overloads()[0].entry(*args, **kwargs)

    def overloads(self) -> list[str]:
        return [e.schema.overload_name or "default" for e in self._overloads()]

    def __repr__(self) -> str:
        return f"<OpOverloadPacket {self._qualname}>"


class _Namespace:
    def __init__(self, ns: str):
        self._ns = ns

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name.startswith("__"):
            raise AttributeError(name)
        qual = f"{self._ns}::{name}"
        if not registry.overloads(qual):
            import difflib
            have = [e.schema.name for e in registry.all_operators() if e.schema.namespace == self._ns]
            close = difflib.get_close_matches(name, have, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise AttributeError(f"no operator '{qual}'{hint}")
        return OpOverloadPacket(qual)


class _Ops:
    """``dj.ops.<namespace>.<name>``"""

    def __getattr__(self, ns: str) -> _Namespace:
        if ns.startswith("__"):
            raise AttributeError(ns)
        return _Namespace(ns)


ops = _Ops()


class entries:
    """``entries("aten").add`` is the generated entry of ``aten::add``, looked up on
    first use and then kept: for op-library code (derivative formulas,
    decompositions) written before the operators it calls are defined."""

    def __init__(self, ns: str):
        self._ns = ns

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        fn = registry.lookup(f"{self._ns}::{name}").entry
        setattr(self, name, fn)
        return fn
