"""Operator schemas: parse PyTorch-style schema strings and bind calls to them.

The grammar is PyTorch's (``native_functions.yaml``), restricted to what the
engine needs::

    [ns::]name[.overload](Type name[=default], ..., *, kwonly...) -> Ret

``str(parse_schema(s))`` is a canonical spelling that parses back to an equal
schema, so schemas can be stored, compared and printed as strings.  This
module sits low in the import graph: it knows nothing of tensors, dtypes or
the dispatcher; ``bind`` is told what a tensor is through ``is_tensor``.
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
from dataclasses import dataclass, replace
from typing import Callable

from .errors import ArgumentTypeError, SchemaError, SchemaParseError

__all__ = ["NO_DEFAULT", "AliasInfo", "SchemaType", "Argument", "Return", "FunctionSchema",
           "parse_schema", "bind", "format_call"]


class _NoDefault:
    """Marks an argument without a default (``None`` is a real default)."""

    __slots__ = ()
    # __reduce__ returning the global's name keeps the singleton through pickle and deepcopy
    __repr__ = __reduce__ = lambda self: "NO_DEFAULT"


NO_DEFAULT = _NoDefault()

# MemoryFormat and Generator are not in the core list but appear in common
# PyTorch schemas (clone, empty_like, rand); they bind like Device.
_BASE_TYPES = ("Tensor", "int", "float", "bool", "str", "Scalar", "ScalarType", "Device", "Layout",
               "MemoryFormat", "Generator")
_TYPE_ALIASES = {"SymInt": "int"}  # no symbolic shapes here: a SymInt is an int


@dataclass(frozen=True)
class AliasInfo:
    set: str
    is_write: bool = False

    def __str__(self) -> str:
        return self.set + ("!" if self.is_write else "")


@dataclass(frozen=True)
class SchemaType:
    base: str
    optional: bool = False
    is_list: bool = False
    list_size: int | None = None
    alias: AliasInfo | None = None
    elem_optional: bool = False  # Tensor?[]: the elements may be None

    def __str__(self) -> str:
        s = self.base + (f"({self.alias})" if self.alias else "")
        if self.is_list:
            s += ("?" if self.elem_optional else "") + f"[{'' if self.list_size is None else self.list_size}]"
        return s + ("?" if self.optional else "")

    @property
    def is_tensor_like(self) -> bool:
        return self.base == "Tensor"


@dataclass(frozen=True)
class Argument:
    name: str
    type: SchemaType
    default: object = NO_DEFAULT
    kwarg_only: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    @property
    def is_mutable(self) -> bool:
        return self.type.alias is not None and self.type.alias.is_write

    @property
    def is_out(self) -> bool:
        return self.kwarg_only and self.is_mutable

    def __str__(self) -> str:
        d = "" if self.default is NO_DEFAULT else "=" + _format_default(self.default)
        return f"{self.type} {self.name}{d}"


@dataclass(frozen=True)
class Return:
    name: str | None
    type: SchemaType

    def __str__(self) -> str:
        return str(self.type) if self.name is None else f"{self.type} {self.name}"


@dataclass(frozen=True, repr=False)
class FunctionSchema:
    namespace: str | None
    name: str
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

    @property
    def full_name(self) -> str:
        return self.qualname + (f".{self.overload_name}" if self.overload_name else "")

    @property
    def positional(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if not a.kwarg_only)

    @property
    def kwarg_only(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.kwarg_only)

    @property
    def is_mutable(self) -> bool:
        return any(a.is_mutable for a in self.arguments)

    @property
    def tensor_arguments(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.type.is_tensor_like)

    def with_namespace(self, ns: str | None) -> FunctionSchema:
        return replace(self, namespace=ns)

    def __str__(self) -> str:
        parts = [str(a) for a in self.arguments]
        first_kw = next((i for i, a in enumerate(self.arguments) if a.kwarg_only), None)
        if first_kw is not None:
            parts.insert(first_kw, "*")
        rets = self.returns
        ret = str(rets[0]) if len(rets) == 1 and rets[0].name is None else f"({', '.join(map(str, rets))})"
        return f"{self.full_name}({', '.join(parts)}) -> {ret}"

    def __repr__(self) -> str:
        return f"FunctionSchema({str(self)!r})"


def _format_default(v: object) -> str:
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(map(_format_default, v)) + "]"
    # repr: floats keep their float-ness ('1.0', '1e-05', '-inf') and strings
    # come back quoted and escaped so that ast.literal_eval reverses them
    return repr(v) if isinstance(v, (float, str)) else str(v)


# -- parsing ---------------------------------------------------------------------
# Order matters: '->' before '-', names before numbers so 'inf' is a name while
# '-inf' is a number.
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<op>->|::)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|inf(?![A-Za-z0-9_])))
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<op1>[()\[\],=*?!.|])
""", re.VERBOSE)
_INT = re.compile(r"-?\d+\Z")
_LITERAL_NAMES = {"True": True, "False": False, "None": None, "inf": float("inf")}


class _Parser:
    """Recursive descent over a token list; every error names a token's position."""

    def __init__(self, s: str):
        self.s, self.i, self.toks, pos = s, 0, [], 0
        while pos < len(s):
            m = _TOKEN.match(s, pos)
            if m is None:
                raise SchemaParseError(s, pos, f"unexpected character {s[pos]!r}")
            if m.lastgroup != "ws":
                self.toks.append(("op" if m.lastgroup == "op1" else m.lastgroup, m.group(), pos))
            pos = m.end()
        self.toks.append(("end", "", len(s)))

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def next(self) -> tuple[str, str, int]:
        self.i += 1
        return self.toks[self.i - 1]

    def fail(self, what: str, tok=None, found: bool = True):
        tok = tok or self.peek()
        if found:
            what += ", found " + (f"'{tok[1]}'" if tok[0] != "end" else "end of input")
        raise SchemaParseError(self.s, tok[2], what)

    def accept(self, text: str) -> bool:
        hit = self.peek()[0] == "op" and self.peek()[1] == text
        self.i += hit
        return hit

    def expect(self, text: str, what: str) -> None:
        if not self.accept(text):
            self.fail(f"expected {what}")

    def name(self, what: str) -> tuple[str, str, int]:
        if self.peek()[0] != "name":
            self.fail(f"expected {what}")
        return self.next()

    def comma_list(self, item, close: str, where: str) -> tuple:
        """Items separated by ',' up to ``close``; the opener is already consumed."""
        out: list = []
        if self.accept(close):
            return ()
        while True:
            out.append(item(out))
            if self.accept(close):
                return tuple(out)
            self.expect(",", f"',' or '{close}' in the {where}")

    def type(self) -> SchemaType:
        tok = self.name("a type")
        base = _TYPE_ALIASES.get(tok[1], tok[1])
        if base not in _BASE_TYPES:
            known = ", ".join(_BASE_TYPES + tuple(_TYPE_ALIASES))
            self.fail(f"unknown type '{tok[1]}' (known: {known})", tok, found=False)
        alias = None
        if self.peek()[:2] == ("op", "("):
            if base != "Tensor":
                self.fail(f"alias annotations apply to Tensor only, not {base}", found=False)
            self.next()
            alias = AliasInfo(self.name("an alias set name such as 'a'")[1], self.accept("!"))
            self.expect(")", "')' closing the alias annotation (only (a) and (a!) are supported)")
        opt, is_list, size, elem_opt = self.accept("?"), False, None, False
        if self.accept("["):
            if self.peek()[0] == "num":
                tok = self.next()
                if not tok[1].isdigit() or int(tok[1]) < 1:
                    self.fail("a list size must be a positive integer", tok, found=False)
                size = int(tok[1])
            self.expect("]", "']' closing the list type")
            is_list, elem_opt, opt = True, opt, self.accept("?")
        return SchemaType(base, opt, is_list, size, alias, elem_opt)

    def literal(self, in_list: bool = False) -> object:
        kind, text, _ = tok = self.next()
        if kind == "num":
            return int(text) if _INT.match(text) else float(text)
        if kind == "str":
            return ast.literal_eval(text)
        if kind == "name" and text in _LITERAL_NAMES:
            return _LITERAL_NAMES[text]
        if tok[:2] == ("op", "[") and not in_list:
            return list(self.comma_list(lambda _: self.literal(in_list=True), "]", "list default"))
        self.fail("expected a default value (number, True/False, None, 'string' or [list])", tok)

    def argument(self, args: list) -> Argument | None:
        tok = self.peek()
        kw = any(a is None for a in args)  # None marks the '*'
        if self.accept("*"):
            if kw:
                self.fail("a second '*': every argument after the first '*' is already keyword-only",
                          tok, found=False)
            if self.peek()[1] == ")":
                self.fail("'*' must be followed by keyword-only arguments", tok, found=False)
            return None
        t, n = self.type(), self.name("an argument name")
        if any(a is not None and a.name == n[1] for a in args):
            self.fail(f"duplicate argument name '{n[1]}'", n, found=False)
        default = NO_DEFAULT
        if self.accept("="):
            start = self.peek()
            default = _coerce_default(t, self.literal())
            if default is _BAD:
                text = self.s[start[2]:self.peek()[2]].strip()
                self.fail(f"default {text} does not fit type {t}", start, found=False)
        elif not kw and any(a is not None and a.has_default for a in args):
            self.fail(f"required argument '{n[1]}' follows an argument with a default; "
                      "give it a default or make it keyword-only (after '*')", n, found=False)
        return Argument(n[1], t, default, kw)

    def ret(self, rets: list) -> Return:
        t = self.type()
        if self.peek()[0] != "name":
            return Return(None, t)
        n = self.next()
        if any(r.name == n[1] for r in rets):
            self.fail(f"duplicate return name '{n[1]}'", n, found=False)
        return Return(n[1], t)


_BAD = object()
# Which literal types fit each base type as a default; the rest (Tensor,
# ScalarType, Device, ...) only take None, and only when optional.
_DEFAULT_TYPES = {"int": (int,), "bool": (bool,), "str": (str,), "float": (int, float),
                  "Scalar": (int, float, bool)}


def _coerce_default(t: SchemaType, v: object) -> object:
    """The default as stored (lists become tuples so schemas stay hashable), or _BAD."""
    if v is None:
        return None if t.optional else _BAD
    if not t.is_list:
        return _coerce_scalar(t.base, v)
    if not isinstance(v, list):  # int[2] stride=1 means [1, 1], as in PyTorch's conv schemas
        return v if t.base == "int" and type(v) is int else _BAD
    out = tuple(None if x is None and t.elem_optional else _coerce_scalar(t.base, x) for x in v)
    return _BAD if any(x is _BAD for x in out) else out


def _coerce_scalar(base: str, v: object) -> object:
    if type(v) not in _DEFAULT_TYPES.get(base, ()):
        return _BAD
    return float(v) if base == "float" else v


def parse_schema(s: str) -> FunctionSchema:
    """Parse a PyTorch-style schema string.

    Args:
        s: ``[ns::]name[.overload](Type name[=default], ..., *, kwonly...) -> Ret``.

    Raises:
        SchemaParseError: the message shows the schema with a caret under the problem.

    Example:
        >>> from dispatch_jit.schema import parse_schema
        >>> s = parse_schema("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
        >>> s.full_name, [a.name for a in s.positional], s.kwarg_only[0].default
        ('aten::add.Tensor', ['self', 'other'], 1)
        >>> str(parse_schema("myadd( Tensor self,Tensor other )->Tensor"))
        'myadd(Tensor self, Tensor other) -> Tensor'
    """
    if not isinstance(s, str):
        raise ArgumentTypeError(f"parse_schema expects a str, not {type(s).__name__}")
    p = _Parser(s)
    ns, name = None, p.name("an operator name")[1]
    if p.accept("::"):
        ns, name = name, p.name("an operator name after '::'")[1]
    overload = p.name("an overload name after '.'")[1] if p.accept(".") else ""
    p.expect("(", "'(' opening the argument list")
    args = tuple(a for a in p.comma_list(p.argument, ")", "argument list") if a is not None)
    p.expect("->", "'->' followed by the return type(s)")
    rets = p.comma_list(p.ret, ")", "return list") if p.accept("(") else (Return(None, p.type()),)
    if p.peek()[0] != "end":
        p.fail("unexpected text after the return type", found=False)
    return FunctionSchema(ns, name, overload, args, rets)


# -- binding ---------------------------------------------------------------------
def _np_isinstance(v: object, *names: str) -> bool:
    np = sys.modules.get("numpy")  # no import: a NumPy scalar can only exist if numpy is loaded
    return np is not None and isinstance(v, tuple(getattr(np, n) for n in names))


def _is_number(v: object) -> bool:
    return isinstance(v, (bool, int, float, complex)) or _np_isinstance(v, "number", "bool_")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or _np_isinstance(v, "integer")


# Value checks per base type; ScalarType, Device, ... take any non-None object
# and are validated by their own modules.
_VALUE_CHECKS = {
    "int": _is_int,
    "float": lambda v: _is_int(v) or isinstance(v, float) or _np_isinstance(v, "floating"),
    "bool": lambda v: isinstance(v, bool) or _np_isinstance(v, "bool_"),
    "str": lambda v: isinstance(v, str),
    "Scalar": _is_number,
}


def _fits(base: str, v: object, is_tensor, in_list: bool) -> bool:
    if base == "Tensor":  # numbers are wrapped later, but never inside a Tensor[]
        return bool(is_tensor(v)) or not in_list and _is_number(v)
    return _VALUE_CHECKS.get(base, lambda v: True)(v)


def _bound_value(schema: FunctionSchema, a: Argument, v: object, is_tensor) -> object:
    t = a.type
    tname = str(replace(t, alias=None))
    if v is None:
        if t.optional:
            return None
    elif t.is_list:
        if t.base == "int" and _is_int(v):  # PyTorch's IntArrayRef accepts a bare int
            return (v,) * (t.list_size or 1)
        if isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                if not (t.elem_optional if x is None else _fits(t.base, x, is_tensor, True)):
                    raise SchemaError(f"{schema}: argument '{a.name}' must be {tname}, but element {i} "
                                      f"is {type(x).__name__} ({x!r:.60})")
            return tuple(v)
    elif _fits(t.base, v, is_tensor, False):
        return v
    raise SchemaError(f"{schema}: argument '{a.name}' must be {tname}, not {type(v).__name__} ({v!r:.60})")


def _default_value(a: Argument) -> object:
    d = a.default
    if a.type.is_list and type(d) is int:
        return (d,) * (a.type.list_size or 1)
    return tuple(d) if isinstance(d, list) else d  # tuples: nothing mutable is shared


def bind(schema: FunctionSchema, args: tuple, kwargs: dict, *,
         is_tensor: Callable[[object], bool] = lambda v: False) -> dict[str, object]:
    """Match a call to ``schema``: one value per argument, in schema order.

    Defaults are filled in and list values come back as tuples (a bare int
    for ``int[N]`` becomes N copies).  Runs on the dispatcher's miss path only.

    Args:
        schema: the operator's parsed schema.
        args, kwargs: the call as the user wrote it.
        is_tensor: tells tensors apart; numbers are accepted where a Tensor is expected.

    Raises:
        SchemaError: quoting the schema and naming the argument at fault.

    Example:
        >>> from dispatch_jit.schema import bind, parse_schema
        >>> s = parse_schema("sum.dim_IntList(Tensor self, int[1]? dim=None, bool keepdim=False, "
        ...                  "*, ScalarType? dtype=None) -> Tensor")
        >>> bind(s, (2.0, 0), {"keepdim": True})
        {'self': 2.0, 'dim': (0,), 'keepdim': True, 'dtype': None}
        >>> bind(s, (2.0,), {"keepdims": True})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
          ...
        dispatch_jit.errors.SchemaError: ...unknown keyword argument 'keepdims'; did you mean 'keepdim'?
    """
    positional = schema.positional
    if len(args) > len(positional):
        n, m = len(positional), len(args)
        msg = f"takes {n} positional argument{'s' * (n != 1)} but {m} {'was' if m == 1 else 'were'} given"
        extra = schema.kwarg_only[:m - n]
        if m - n <= len(schema.kwarg_only):
            names = ", ".join(f"'{a.name}'" for a in extra)
            msg = (f"argument{'s' * (len(extra) > 1)} {names} {'is' if len(extra) == 1 else 'are'} "
                   f"keyword-only; pass {', '.join(f'{a.name}=...' for a in extra)} ({msg})")
        raise SchemaError(f"{schema}: {msg}")
    given = {a.name: v for a, v in zip(positional, args)}
    names = [a.name for a in schema.arguments]
    for k, v in kwargs.items():
        if k not in names:
            close = difflib.get_close_matches(k, names, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"valid names: {', '.join(names)}"
            raise SchemaError(f"{schema}: unknown keyword argument '{k}'; {hint}")
        if k in given:
            raise SchemaError(f"{schema}: argument '{k}' given both positionally and by keyword")
        given[k] = v
    missing = [a.name for a in schema.arguments if a.name not in given and not a.has_default]
    if missing:
        raise SchemaError(f"{schema}: missing required argument{'s' * (len(missing) > 1)} "
                          + ", ".join(f"'{n}'" for n in missing))
    return {a.name: _bound_value(schema, a, given[a.name], is_tensor) if a.name in given
            else _default_value(a) for a in schema.arguments}


def _describe(v: object, depth: int = 0) -> str:
    if isinstance(v, (list, tuple)) and depth < 2:
        items = [_describe(x, depth + 1) for x in v[:4]] + (["..."] if len(v) > 4 else [])
        return ("[%s]" if isinstance(v, list) else "(%s)") % ", ".join(items)
    if v is None or _is_number(v) or isinstance(v, str):
        return f"{v!r:.40}"
    try:
        shape = tuple(v.shape)
    except Exception:  # noqa: BLE001 - anything without a usable shape is shown by type
        return f"{type(v).__name__}"
    extra = "".join(f", {k}={getattr(v, k)}" for k in ("dtype", "device") if hasattr(v, k))
    return f"{type(v).__name__}(shape={shape}{extra})"


def format_call(schema: FunctionSchema, args: tuple, kwargs: dict) -> str:
    """A short rendering of the values a call saw, e.g.
    ``aten::add.Tensor(Tensor(shape=(2, 3), dtype=float32), 1.0, alpha='x')``."""
    parts = [_describe(v) for v in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return f"{schema.full_name}({', '.join(parts)})"
