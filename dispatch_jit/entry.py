"""The generated entry of an operator: its hot path, written from its schema.

For ``aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!)? out=None)``::

    def add(self, other, *, alpha=1, out=None):
        _count()
        _f = _memo_get((_tls.k, <sig of self>, <sig of other>, alpha.__class__, <sig of out>))
        if _f is None:
            _f = _miss(_op, (self, other, alpha, out))
        return _f(self, other, alpha, out)

and ``aten::sum``'s key, for ``(Tensor self, int[]? axis=None, bool keepdims=False, *, ScalarType? dtype=None)``,
is ``(_tls.k, <sig of self>, <type of axis, or list_sig of a sequence>, keepdims.__class__)``.

The key's fields are dispatcher.key_fields, rendered inline (dispatcher.memo_key computes
the same key for the miss path and redispatch); the miss is dispatcher.resolve_call.
"""

from __future__ import annotations

import re
from typing import Callable

from .dispatcher import (CLASS, LIST, MISSING, OPTIONAL_TENSOR, SIG, _GENERATED_GLOBALS, _TENSOR_TYPE, _MissingArg,
                         key_fields, resolve_call, tls)
from .errors import DispatchJitError, SchemaError
from .jit.source import define
from .registry import OperatorEntry
from .signature import _PY_SCALAR_SIGS, SIG_NONE, list_sig, scalar_sig

__all__ = ["make_entry", "KEYWORD_ALIASES", "errors_name"]


def _field_expr(name: str, kind: str) -> str:
    """One memo-key field (dispatcher.key_fields) as inline source: what dispatcher.memo_key computes."""
    if kind == CLASS:
        return f"{name}.__class__"
    if kind == SIG:
        return f"_ssig({name})"
    if kind == LIST:   # the statements of _list_field leave it in a local
        return f"_l_{name}"
    # a Python number (x * 2.0, lr * g) finds its signature in a dict, without a call of _ssig
    expr = f"({name}._sig if {name}.__class__ is _T else (_pysig({name}.__class__) or _ssig({name})))"
    if kind == OPTIONAL_TENSOR:   # out=None is the common case: no call for it
        expr = f"({SIG_NONE} if {name} is None else {expr})"
    return expr


def _list_field(name: str) -> str:
    """Statements leaving ``list_sig(name)`` in the local ``_l_<name>``, without a call for a
    bare value (axis=1, None) or a sequence of ints (axis=(0, 1), a shape): the common calls."""
    v = f"_l_{name}"
    return (f"    {v} = {name}.__class__\n"
            f"    if {v} is tuple or {v} is list:\n"
            f"        for _e in {name}:\n"
            f"            if _e.__class__ is not int:\n"
            f"                {v} = _lsig({name})\n"
            f"                break\n"
            f"        else:\n"
            f"            if not {name}:\n"
            f"                {v} = ({v},)\n")


def make_entry(op: OperatorEntry, public_name: str | None = None, as_alias: bool = False) -> Callable:
    """Generate the fast entry function for ``op`` from its schema.

    ``as_alias=True`` makes another public name for the op (``dj.amax`` for ``aten::max``,
    ``dj.concat`` for ``aten::cat``): the same hot path and memo, not stored as ``op.entry``,
    and errors raised on purpose name ``public_name``, the function the user called, not the
    op underneath (``errors_name``).  Its ``try`` costs nothing until something raises."""
    schema = op.schema
    params, names = [], []
    kw_started = False
    for a in schema.arguments:
        pname = a.name if a.name not in _RESERVED else a.name + "_"
        if a.kwarg_only and not kw_started:
            params.append("*")
            kw_started = True
        default = "_MISSING" if not a.has_default else f"_D_{pname}"
        params.append(f"{pname}={default}")
        names.append(pname)
    sigs = [_field_expr(names[i], kind) for i, kind in key_fields(op)]
    lists = "".join(_list_field(names[i]) for i, kind in key_fields(op) if kind == LIST)
    # PyTorch spellings accepted as aliases of the array API names (dim= for axis=)
    aliases = [(alias, real) for real, alias in KEYWORD_ALIASES.items() if real in names]
    defaults = dict(zip(names, (p.split("=", 1)[1] for p in params if p != "*")))
    for alias, real in aliases:
        if not kw_started:
            params.append("*")
            kw_started = True
        params.append(f"{alias}=_NOALIAS")
    arglist = ", ".join(names)
    key = "(_tls.k, " + ", ".join(sigs) + ("," if len(sigs) == 1 else "") + ")" if sigs else "(_tls.k,)"
    fname = (public_name or schema.name).replace(".", "_")
    # an alias costs nothing unless given; given, it must not come with its name too (a value other
    # than the default: keepdims=True, keepdim=True raises, as torch; the default passed explicitly
    # cannot be told from no value without a check on every call)
    prologue = "".join(f"    if {alias} is not _NOALIAS:\n"
                       f"        {real} = _both(_op, '{real}', {real}, {defaults[real]}, '{alias}', {alias})\n"
                       for alias, real in aliases)
    body = (lists + "    _count()\n"
            f"    _f = _memo_get({key})\n"
            f"    if _f is None:\n"
            f"        _f = _miss(_op, ({arglist}{',' if len(names) == 1 else ''}))\n"
            f"    return _f({arglist})\n")
    if as_alias:
        body = ("    try:\n" + "".join("    " + line + "\n" for line in body.splitlines()) +
                "    except _DJError as _e:\n"
                f"        _rename(_e, _op, {public_name!r})\n"
                "        raise\n")
        prologue = prologue.replace("_both(_op,", f"_both({public_name!r},")
    src = f"def {fname}({', '.join(params)}):\n" + prologue + body
    g = {"_memo_get": op.memo.get, "_count": op.calls.__next__, "_tls": tls, "_T": _TENSOR_TYPE[0], "_ssig": scalar_sig, "_pysig": _PY_SCALAR_SIGS.get, "_lsig": list_sig, "_op": op,
         "_miss": resolve_call, "_MISSING": MISSING,
         "_NOALIAS": _NOALIAS, "_both": _both_spellings,
         "_DJError": DispatchJitError, "_rename": errors_name}
    for a, pname in zip(schema.arguments, names):
        if a.has_default:
            d = a.default
            g[f"_D_{pname}"] = tuple(d) if isinstance(d, list) else d
    fn = define(src, fname, g, f"<dispatch_jit entry {schema.full_name}>")
    _GENERATED_GLOBALS.append(g)
    fn.__qualname__ = fn.__name__ = public_name or schema.name
    fn.__source__ = src
    fn._op = op
    if not as_alias:
        op.entry = fn
    return fn


KEYWORD_ALIASES = {"axis": "dim", "keepdims": "keepdim"}
_NOALIAS = _MissingArg()


def _both_spellings(op, name: str, value, default, alias: str, alias_value):
    """The value of ``alias=`` (PyTorch's spelling of ``name=``), unless ``name=`` was given too.
    ``op``: the OperatorEntry, or the public name of an alias entry."""
    if value is not default:
        who = op if isinstance(op, str) else op.schema.name
        raise SchemaError(f"{who}() got both {name}={value!r} and {alias}={alias_value!r}, two "
                          f"spellings of one argument; pass one of them")
    return alias_value


_RESERVED = {"from", "in", "is", "lambda", "def", "class", "return", "global", "import", "and", "or",
             "not", "if", "else", "while", "for", "with", "as", "pass", "None", "True", "False"}


def errors_name(exc: BaseException, op: OperatorEntry | str, public_name: str) -> None:
    """Rewrite ``exc``'s message (in place) to name ``public_name`` where it names ``op`` (an
    OperatorEntry or its name): ``max(): ...``/``max: ...`` become ``amax(): ...``/``amax: ...``,
    and a message opening with the qualified name (``aten::sub.Tensor: ...``, or a quoted schema)
    gets ``subtract(): `` in front.
    Other words are left alone (``'min' or 'max'``, ``dj.max(x)``, ``maximum``)."""
    if not exc.args or not isinstance(exc.args[0], str):
        return
    msg, base = exc.args[0], (op if isinstance(op, str) else op.schema.name).split("::")[-1].split(".")[0]
    if base == public_name:
        return
    if base.endswith("_") and public_name.endswith("_"):     # clip_ -> clamp_: kernels say "clamp"
        base, public_name = base[:-1], public_name[:-1]
    new = re.sub(rf"(?<![\w.:'`]){re.escape(base)}(?=\(\)|:(?!:))", public_name, msg)
    if new.startswith("aten::" + base) and not new.startswith(public_name):
        new = f"{public_name}(): {new}"
    if new != msg:
        exc.args = (new,) + exc.args[1:]
