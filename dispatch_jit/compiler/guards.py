"""What a compiled function reads besides its arguments, and how each call re-reads it.

A trace records what the function did with the values it saw.  Its arguments
are in the cache key; everything else it reads must be too, or a later call
would silently use a stale value.  ``find_captures`` reads the function's
bytecode (and that of the functions and lambdas it defines or calls by a
global or closure name, a few levels deep) for:

* global names (``LOAD_GLOBAL``) and closure variables (``LOAD_DEREF``),
* attribute chains from those and from the function's arguments
  (``model.w``, ``self.w``, ``cfg.scale``): followed while each attribute is
  a module's or lives in the object's ``__dict__`` (no property runs).

Each capture is then read at every call by one generated function
(``make_reader``), which returns the key part and the values:

* a tensor: an implicit input of the graph; its signature (dtype, ndim,
  contiguity, device) is in the key, its sizes and data are not, so a
  rebound tensor of the same signature is simply read (no retrace);
* a number, string, bool, None, dtype, or a tuple/list/dict of such (or of
  tensors): guarded by value: a change retraces, and ``explain()`` names it;
* a function or other object: guarded by identity (a helper rebound
  retraces); modules and library functions reached through a module
  (``dj.relu``, ``np.exp``) are not guarded.

What cannot be guarded (an unhashable object such as a NumPy array) makes the
call run eagerly, and ``explain()`` says which name.  Not covered: state read
through other means (``getattr`` with a computed name, subscripts of objects
other than lists/tuples/dicts, methods and properties of objects, globals of
functions reached only through objects), and data reads (``.item()``,
``.shape``) of a tensor reached through an attribute chain while tracing.
Direct globals and closure variables are traced as symbolic stand-ins, so a
data read of those falls back to eager as an argument's does.
"""

from __future__ import annotations

import dis
import sys
import types
from collections import namedtuple

import numpy as np

from dispatch_jit.dtypes import DType
from dispatch_jit.tensor import Tensor

__all__ = ["Capture", "find_captures", "make_reader", "capture_key", "Unguardable", "writes_outside"]

# root: "global" (obj: the globals dict), "cell" (obj: the cell), "arg" (obj: the position),
# "self" (obj: a bound method's object); attrs: the chain; label: how explain() names it
Capture = namedtuple("Capture", "root obj name attrs label")

_LOAD_ATTR = ("LOAD_ATTR", "LOAD_METHOD")
_MAX_DEPTH = 3                 # helper functions followed this many calls deep
_LIBRARY = (types.ModuleType, types.BuiltinFunctionType, type)


class Unguardable(Exception):
    """A captured value that no cache key can stand for (an unhashable object)."""


def _code_of(fn):
    """(code, globals, closure cells by name, bound self or None) of a Python function."""
    self = None
    if isinstance(fn, types.MethodType):
        self, fn = fn.__self__, fn.__func__
    inner = getattr(fn, "fn", None)        # a CompiledFunction: inlined into the trace
    if inner is not None and not isinstance(fn, types.FunctionType):
        return _code_of(inner)
    if not isinstance(fn, types.FunctionType):
        return None
    code = fn.__code__
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    return code, fn.__globals__, cells, self


def _codes(code):
    """``code`` and the code objects nested in it (lambdas, comprehensions, inner functions)."""
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _codes(c)
    return out


def _attr_of(obj, name):
    """``obj.name`` if it is plain data (a module attribute or an instance-dict entry), else a miss."""
    if isinstance(obj, types.ModuleType):
        return obj.__dict__.get(name, _MISS)
    d = getattr(obj, "__dict__", None)
    if not isinstance(d, dict) or name not in d or isinstance(getattr(type(obj), name, None), property):
        return _MISS
    return d[name]


_MISS = object()


def _chain(value, attrs):
    """How far the attribute chain goes through plain data: (value, attrs followed)."""
    done = []
    for a in attrs:
        nxt = _attr_of(value, a)
        if nxt is _MISS:
            break
        value = nxt
        done.append(a)
    return value, tuple(done)


def _loads(code):
    """(instruction, following attribute names) for each load of a global, closure variable or local."""
    ins = list(dis.get_instructions(code))
    for i, x in enumerate(ins):
        if x.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FAST", "LOAD_FAST_CHECK"):
            attrs = []
            for y in ins[i + 1:]:
                if y.opname not in _LOAD_ATTR:
                    break
                attrs.append(y.argval)
            yield x, attrs


def writes_outside(fn) -> str:
    """'' or why tracing ``fn`` once cannot stand for every call: it assigns a global or
    a closure variable of its own (that side effect would happen only when it traces)."""
    c = _code_of(fn)
    if c is None:
        return ""
    code = c[0]
    for sub in _codes(code):
        for x in dis.get_instructions(sub):
            if x.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                return f"it assigns the global '{x.argval}' (a trace would do that once, not at every call)"
            if x.opname in ("STORE_DEREF", "DELETE_DEREF") and sub is code and x.argval in code.co_freevars:
                return f"it assigns the closure variable '{x.argval}' (a trace would do that once)"
    return ""


def find_captures(fn, args: tuple = ()) -> list[Capture]:
    """Every global, closure variable and attribute chain ``fn`` reads that a call must
    re-read or guard (see the module docstring), in a fixed order; ``args``: the first
    call's, whose attribute chains (``self.w``) are followed as they stand."""
    out: list[Capture] = []
    _find(fn, args, out, set(), 0, "")
    return out


def _is_data(v) -> bool:
    return isinstance(v, (Tensor, _SCALARS, tuple, list, dict))


def _is_library(fn) -> bool:
    mod = (getattr(fn, "__module__", None) or "").partition(".")[0]
    return mod in _LIBRARIES or mod in sys.stdlib_module_names


_LIBRARIES = {"dispatch_jit", "numpy", "numba", "torch", "builtins"}


def _classify(value, attrs):
    """(what to capture: the attributes followed, or None; a helper function to look into)."""
    final, done = _chain(value, attrs)
    if isinstance(final, types.ModuleType):
        return None, None
    if isinstance(value, types.ModuleType):    # through a module only data is guarded (cfg.scale)
        return (done, None) if done and _is_data(final) else (None, None)
    if not done and isinstance(final, _LIBRARY):
        return None, None
    user_fn = isinstance(final, (types.FunctionType, types.MethodType)) or hasattr(final, "max_recompiles")
    return done, (final if user_fn and not _is_library(final) else None)


def _find(fn, call_args, out, seen, depth, where):
    c = _code_of(fn)
    if c is None or depth > _MAX_DEPTH:
        return
    code, glb, cells, self = c
    if code in seen:
        return
    seen.add(code)
    nargs = code.co_argcount + code.co_kwonlyargcount
    params = code.co_varnames[:nargs]
    keys = {(k.root, id(k.obj), k.name, k.attrs) for k in out}
    helpers = []
    for sub in _codes(code):
        for x, attrs in _loads(sub):
            name = x.argval
            if x.opname == "LOAD_GLOBAL":
                if name not in glb:
                    continue          # a builtin, or not defined yet: nothing to guard
                root, obj, value, label = "global", glb, glb[name], f"global '{name}'"
            elif x.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                if name not in cells:
                    continue          # the function's own local, captured by an inner function
                try:
                    value = cells[name].cell_contents
                except ValueError:    # an empty cell: nothing bound yet
                    continue
                root, obj, label = "cell", cells[name], f"closure variable '{name}'"
            elif x.opname.startswith("LOAD_FAST") and sub is code and name in params and attrs and depth == 0:
                i = params.index(name) - (self is not None)
                if i < 0:
                    root, obj, value = "self", self, self
                elif i < len(call_args) and not isinstance(call_args[i], Tensor):
                    root, obj, value = "arg", i, call_args[i]
                else:
                    continue
                label = f"'{name}'"
            else:
                continue
            done, helper = _classify(value, attrs)
            if done is None or (root in ("self", "arg") and not done):
                continue              # the argument itself is in the key already
            label = where + label + "".join(f".{a}" for a in done)
            if helper is not None:
                helpers.append((helper, label))
            cap = Capture(root, obj, name, done, label)
            k = (cap.root, id(cap.obj), cap.name, cap.attrs)
            if k not in keys:
                keys.add(k)
                out.append(cap)
    for h, label in helpers:
        _find(h, (), out, seen, depth + 1, f"{label} -> ")


# -- reading them at every call ------------------------------------------------------------------
_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic, DType)


def capture_key(v):
    """The key part of a captured value (see the module docstring); raises Unguardable."""
    if isinstance(v, Tensor):
        return v._sig
    if isinstance(v, _SCALARS):
        if isinstance(v, (float, np.floating)) and not (v and v == v):
            # -0.0 == 0.0 and hashes alike but differs in a product; NaN is unequal to itself
            return (type(v), "nan" if v != v else "-0.0" if np.copysign(1.0, v) < 0 else "0.0")
        return (type(v), v)
    if isinstance(v, (tuple, list)):
        return (type(v),) + tuple(capture_key(x) for x in v)
    if isinstance(v, dict):
        return (dict,) + tuple((k, capture_key(x)) for k, x in v.items())
    try:
        hash(v)
    except TypeError:
        raise Unguardable(type(v).__name__) from None
    if type(v).__eq__ is not object.__eq__ and not isinstance(v, (types.FunctionType, types.MethodType)):
        raise Unguardable(type(v).__name__)        # equality by value we cannot vouch for
    return v                                       # identity


def make_reader(caps: list[Capture]):
    """One generated function ``read(args) -> (key part, values)`` for ``caps``: a dict lookup
    or cell read per capture, plus its attribute chain; tensors' signatures inline."""
    if not caps:
        return None
    g = {"_K": capture_key, "_T": Tensor}
    lines = ["def read(args):"]
    for i, c in enumerate(caps):
        g[f"_O{i}"] = c.obj
        base = {"global": f"_O{i}[{c.name!r}]", "cell": f"_O{i}.cell_contents", "self": f"_O{i}",
                "arg": f"args[{c.obj}]"}[c.root]
        lines.append(f"    v{i} = {base}{''.join(f'.{a}' for a in c.attrs)}")
    vs = [f"v{i}" for i in range(len(caps))]
    key = ", ".join(f"v{i}._sig if v{i}.__class__ is _T else _K(v{i})" for i in range(len(caps)))
    lines.append(f"    return ({key},), ({', '.join(vs)},)")
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<dispatch_jit compiled guards>", "exec"), g)
    read = g["read"]
    read.__source__ = src
    return read
