"""Schema inference: the schema string of a Python function, from its type hints.

``custom_op`` (custom_op.py) defines its operator with it, as
``torch.library.infer_schema`` does for ``torch.library.custom_op``.
"""

from __future__ import annotations

import collections.abc
import inspect
import string
import types
import typing
from typing import Callable, Iterable

from ..dtypes import DType
from ..errors import SchemaInferenceError, SchemaParseError
from ..schema import parse_schema
from ..tensor import Tensor, device as _Device

__all__ = ["infer_schema", "SchemaInferenceError"]


# -- schema inference -----------------------------------------------------------------------------
_SCALARS = {Tensor: "Tensor", int: "int", float: "float", bool: "bool", str: "str", DType: "ScalarType",
            _Device: "Device"}
# what ``dj.`` in a string hint resolves to when the function's module has no ``dj`` of its own
_DJ_HINT_NAMES = types.SimpleNamespace(Tensor=Tensor, DType=DType, device=_Device)
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_SUPPORTED = ("dj.Tensor, int, float, bool, str, dj.DType, dj.device, Union[int, float] (Scalar), "
              "list[T] / Sequence[T] of Tensor, Optional[Tensor], int, float or bool, and Optional[...] of these")


def _hint_name(h) -> str:
    return h.__name__ if isinstance(h, type) else repr(h).replace("typing.", "")


def _schema_type(hint, where: str) -> str:
    """The schema spelling of one type hint ("Tensor?", "int[]", "Scalar", ...)."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) < len(args):                     # Optional[...]
            inner = _schema_type(rest[0] if len(rest) == 1 else typing.Union[rest], where)
            if inner.endswith("?"):
                raise SchemaInferenceError(f"{where}: nested Optional in {_hint_name(hint)}")
            return inner + "?"
        if float in rest and set(rest) <= {int, float, bool}:
            return "Scalar"
    elif origin in _SEQUENCES and args and (origin is not tuple or (len(args) == 2 and args[1] is ...)):
        elem = args[0]
        if elem is Tensor:
            return "Tensor[]"
        if typing.get_origin(elem) in (typing.Union, types.UnionType) and set(typing.get_args(elem)) == {
                Tensor, type(None)}:
            return "Tensor?[]"
        if elem in (int, float, bool):
            return f"{_SCALARS[elem]}[]"
    raise SchemaInferenceError(f"{where} has unsupported type annotation {_hint_name(hint)}; supported: {_SUPPORTED}")


def _format_default(v, where: str) -> str:
    if v is None or isinstance(v, (bool, int)):
        return str(v)
    if isinstance(v, (float, str)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_format_default(x, where) for x in v) + "]"
    raise SchemaInferenceError(f"{where}: default {v!r} is not a number, bool, str, None or a list of those")


def _alias_names():
    yield from string.ascii_lowercase
    i = 0
    while True:
        yield f"a{i}"
        i += 1


def infer_schema(fn: Callable, *, mutates_args: Iterable[str] | str, op_name: str | None = None) -> str:
    """The schema of ``fn`` from its type hints (``from __future__ import
    annotations`` strings included): ``"(Tensor x, int[] dims) -> Tensor"``,
    prefixed with ``op_name`` if given.  ``mutates_args`` names the Tensor
    parameters the function writes to ("unknown": every Tensor parameter);
    each gets its own alias set, ``Tensor(a!)``.

    >>> import dispatch_jit as dj
    >>> from typing import Optional
    >>> def f(x: dj.Tensor, w: Optional[dj.Tensor] = None, *, dims: list[int] = (0,)) -> dj.Tensor: ...
    >>> infer_schema(f, mutates_args=())
    '(Tensor x, Tensor? w=None, *, int[] dims=[0]) -> Tensor'
    >>> def g(out: dj.Tensor, x: dj.Tensor) -> None: ...
    >>> infer_schema(g, mutates_args=["out"], op_name="g")
    'g(Tensor(a!) out, Tensor x) -> ()'
    """
    what = f"infer_schema({getattr(fn, '__qualname__', fn)!s})"
    sig = inspect.signature(fn)
    # the function's globals win; our names fill in, so "dj.Tensor" or "Tensor" in a string resolve
    # ("dj" here holds the engine types a hint can name, not the top package, which sits above the engine)
    ns = {"dj": _DJ_HINT_NAMES, "Tensor": Tensor, "Optional": typing.Optional, "Union": typing.Union,
          "List": typing.List, "Sequence": typing.Sequence, **getattr(fn, "__globals__", {})}
    try:
        hints = typing.get_type_hints(fn, globalns=ns)
    except Exception as e:  # noqa: BLE001 - any failure to evaluate a hint is reported the same way
        raise SchemaInferenceError(
            f"{what}: could not evaluate the type hints ({type(e).__name__}: {e}); with 'from __future__ import "
            f"annotations' every name used in a hint must be importable at module level") from e
    if isinstance(mutates_args, str):
        if mutates_args != "unknown":
            raise SchemaInferenceError(f"{what}: mutates_args must be a collection of parameter names or "
                                       f"'unknown', not the string {mutates_args!r} "
                                       f"(did you mean ({mutates_args!r},)?)")
        mutated = None
    else:
        mutated = set(mutates_args)
        unknown = mutated - set(sig.parameters)
        if unknown:
            raise SchemaInferenceError(f"{what}: mutates_args names {sorted(unknown)}, which are not parameters; "
                                       f"parameters: {list(sig.parameters)}")
    aliases = _alias_names()
    parts, kw_started = [], False
    for name, p in sig.parameters.items():
        where = f"{what}: parameter '{name}'"
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise SchemaInferenceError(f"{where}: *args, **kwargs and positional-only parameters are not supported")
        if name not in hints:
            raise SchemaInferenceError(f"{where} needs a type annotation (e.g. {name}: dj.Tensor)")
        t = _schema_type(hints[name], where)
        if mutated is None and t.startswith("Tensor") or mutated is not None and name in mutated:
            if not t.startswith("Tensor"):
                raise SchemaInferenceError(f"{where} is in mutates_args but is {t}; only Tensors can be mutated")
            t = f"Tensor({next(aliases)}!){t[len('Tensor'):]}"
        if p.kind == p.KEYWORD_ONLY and not kw_started:
            parts.append("*")
            kw_started = True
        arg = f"{t} {name}"
        if p.default is not p.empty:
            arg += "=" + _format_default(p.default, where)
            try:   # each argument on its own, so a bad default is reported by name
                parse_schema(f"f({arg}) -> ()")
            except SchemaParseError:
                raise SchemaInferenceError(f"{where}: default {p.default!r} does not fit type {t}") from None
        parts.append(arg)
    if "return" not in hints:
        raise SchemaInferenceError(f"{what}: the return type needs an annotation (-> dj.Tensor, "
                                   f"-> tuple[dj.Tensor, dj.Tensor] or -> None)")
    ret = hints["return"]
    if ret is None or ret is type(None):
        rets = "()"
    elif typing.get_origin(ret) is tuple:
        items = typing.get_args(ret)
        if ... in items:
            raise SchemaInferenceError(f"{what}: return type {_hint_name(ret)}: give the number of outputs, "
                                       f"e.g. tuple[dj.Tensor, dj.Tensor]")
        rets = "(" + ", ".join(_schema_type(r, f"{what}: return type") for r in items) + ")"
    else:
        rets = _schema_type(ret, f"{what}: return type")
    return f"{op_name or ''}({', '.join(parts)}) -> {rets}"
