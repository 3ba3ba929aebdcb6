"""What a compiled function reads besides its arguments, and how each call re-reads it.

A trace records what the function did with the values it saw.  Its arguments
are in the cache key; everything else it reads must be too, or a later call
would silently use a stale value.  ``find_captures`` reads the function's
bytecode (and that of the functions and lambdas it defines or calls by a
global or closure name, a few levels deep) for:

* global names (``LOAD_GLOBAL``) and closure variables (``LOAD_DEREF``),
* attribute chains from those and from the function's arguments
  (``model.w``, ``self.w``, ``cfg.scale``, ``Cfg.scale``): followed while each
  attribute is a module's, lives in the object's ``__dict__`` or ``__slots__``,
  or is a data attribute of its (user) class; no property or other descriptor
  runs,
* the methods and property getters of user objects on such a chain
  (``m.scale(x)``, ``self.layer(x)`` through its class's ``__call__``): their
  reads of ``self.w`` are captured as the chain that reaches that self
  (``global 'm'.w``, ``'self'.layer.w``), so rebinding ``m.w`` is seen,
* ``dj.nn`` modules: a chain goes through a module's parameters, buffers and
  submodules as its ``__getattr__`` would; calling a user module walks its
  ``forward``; a library module (``Sequential``, ``Linear``, ``Dropout``) has its
  options (``training``, ``p``, ``eps``, ...) guarded and its submodules walked
  the same way, at any nesting depth; a module's forward hooks and forward
  pre-hooks are walked as helpers of its forward (structure.py guards their
  registration, and the submodules a module has),
* a ``functools.partial``'s function and its bound ``args``/``keywords``, and
  a callable object's ``__call__``.

The same walk lists every function it looked into; ``writes_outside`` reads
them for side effects a trace cannot repeat (assigning a global or a closure
variable, calling ``print``), which make the call run eagerly.

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
through other means (``getattr`` with a computed name, subscripts of or
iteration over containers of objects, ``globals()``), and functions more than
``_MAX_DEPTH`` calls deep.  Direct globals and closure variables are traced as
symbolic stand-ins; every other captured tensor (and a default argument
value) is the real tensor, guarded while tracing (tracer.ExternalTensor), so a
data or size read of any of them falls back to eager as an argument's does.
"""

from __future__ import annotations

import dis
import functools
import inspect
import sys
import types
from collections import namedtuple

import numpy as np

from dispatch_jit.dtypes import DType
from dispatch_jit.jit.source import define
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


def _unwrap(fn):
    """(Python function, bound self or None, positional arguments bound before the call's), or
    None: through bound methods, ``functools.partial``, compiled functions (inlined into the
    trace) and callable objects (their class's ``__call__``, bound to them)."""
    self, bound = None, 0
    for _ in range(8):
        if isinstance(fn, types.FunctionType):
            return fn, self, bound
        if isinstance(fn, functools.partial):
            bound += len(fn.args)
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            self, fn = fn.__self__, fn.__func__
        elif getattr(fn, "fn", None) is not None and hasattr(fn, "max_recompiles"):
            fn = fn.fn
        else:
            call = _method(fn, "__call__")
            if call is None:
                return None
            self, fn = fn, call
    return None


def _method(obj, name):
    """The Python function behind ``obj.name`` if it is a method (or a property's getter) of a
    user class, else None; looked up without running any descriptor."""
    if isinstance(obj, _LIBRARY) or isinstance(obj, (types.FunctionType, types.MethodType)) or \
            _is_library(type(obj)):
        return None            # a library's object (a tensor's methods are generated, module-less)
    if name == "__call__" and _is_module(obj):
        name = "forward"       # dj.nn.Module.__call__ (library code) runs the user's forward
    m = inspect.getattr_static(type(obj), name, None)
    if isinstance(m, property):
        m = m.fget
    return m if isinstance(m, types.FunctionType) and not _is_library(m) else None


def _code_of(fn):
    """(code, globals, closure cells by name, bound self or None, positions bound by partials)."""
    u = _unwrap(fn)
    if u is None:
        return None
    fn, self, bound = u
    code = fn.__code__
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    return code, fn.__globals__, cells, self, bound


def _codes(code):
    """``code`` and the code objects nested in it (lambdas, comprehensions, inner functions)."""
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out += _codes(c)
    return out


def _attr_of(obj, name):
    """``obj.name`` if it is plain data (a module attribute, an instance-dict entry, or a data
    attribute of a user class: ``Cfg.scale``, ``self.k`` set on the class), else a miss."""
    if isinstance(obj, types.ModuleType):
        return obj.__dict__.get(name, _MISS)
    if not isinstance(obj, type):
        d = getattr(obj, "__dict__", None)
        if isinstance(d, dict) and name in d and not isinstance(getattr(type(obj), name, None), property):
            return d[name]
        for reg in _MODULE_REGISTRIES if isinstance(d, dict) else ():
            if isinstance(d.get(reg), dict) and name in d[reg]:
                return d[reg][name]          # a dj.nn.Module's parameter, buffer or submodule
    cls = obj if isinstance(obj, type) else type(obj)
    if _is_library(cls):
        return _MISS
    v = inspect.getattr_static(obj, name, _MISS)     # no descriptor runs
    if isinstance(v, types.MemberDescriptorType) and not isinstance(obj, type):
        v = getattr(obj, name, _MISS)                # a __slots__ entry: a plain read
    return v if v is not _MISS and _is_data(v) else _MISS


_MISS = object()
# where a dj.nn.Module keeps what its __getattr__ finds (the walk reads them without running it)
_MODULE_REGISTRIES = ("_parameters", "_buffers", "_modules")


def _is_module(obj) -> bool:
    d = getattr(obj, "__dict__", None)
    return isinstance(d, dict) and isinstance(d.get("_modules"), dict) and hasattr(obj, "forward")


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


def writes_outside(fn, visited=None) -> str:
    """'' or why tracing ``fn`` once cannot stand for every call: it, or a function it calls
    that ``find_captures`` followed (``visited``), assigns a global or a closure variable of
    its own, or calls ``print`` (those side effects would happen only when it traces, and a
    print of a traced tensor has no data to show)."""
    if visited is None:
        c = _code_of(fn)
        visited = [] if c is None else [(c[0], c[1], "")]
    for code, glb, where in visited:
        who = f"{where[:-4]}, which it calls," if where else "it"
        for sub in _codes(code):
            for x in dis.get_instructions(sub):
                if x.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                    return f"{who} assigns the global '{x.argval}' (a trace would do that once, not at every call)"
                if x.opname in ("STORE_DEREF", "DELETE_DEREF") and sub is code and x.argval in code.co_freevars:
                    return f"{who} assigns the closure variable '{x.argval}' (a trace would do that once)"
                if x.opname == "LOAD_GLOBAL" and x.argval == "print" and glb.get("print", print) is print:
                    return (f"{who} calls print() (a trace would print once, when it traces, not at every "
                            f"call, and a traced tensor has no data to show)")
    return ""


def find_captures(fn, args: tuple = (), visited: list | None = None) -> list[Capture]:
    """Every global, closure variable and attribute chain ``fn`` reads that a call must
    re-read or guard (see the module docstring), in a fixed order; ``args``: the first
    call's, whose attribute chains (``self.w``) are followed as they stand.  ``visited``:
    if given, gets (code, globals, label) of each function looked into (``writes_outside``)."""
    out: list[Capture] = []
    if isinstance(fn, functools.partial):      # its bound arguments are read at every call
        out.append(Capture("self", fn, "partial", ("args",), "functools.partial's args"))
        out.append(Capture("self", fn, "partial", ("keywords",), "functools.partial's keywords"))
    _find(fn, args, out, set(), 0, "", None, [] if visited is None else visited)
    return out


def _is_data(v) -> bool:
    return isinstance(v, (Tensor, _SCALARS, tuple, list, dict))


def _is_library(fn) -> bool:
    mod = (getattr(fn, "__module__", None) or "").partition(".")[0]
    return mod in _LIBRARIES or mod in sys.stdlib_module_names


_LIBRARIES = {"dispatch_jit", "numpy", "numba", "torch", "builtins"}


def _classify(value, attrs):
    """(what to capture: the attributes followed, or None; a helper function to look into;
    for a helper that is a method of an object on the chain, the attributes leading to it;
    the object the followed attributes reach)."""
    final, done = _chain(value, attrs)
    if isinstance(final, types.ModuleType):
        return None, None, None, final
    if isinstance(value, types.ModuleType):    # through a module only data is guarded (cfg.scale)
        return ((done, None, None, final) if done and _is_data(final) else (None, None, None, final))
    if not done and isinstance(final, _LIBRARY):
        return None, None, None, final
    user_fn = isinstance(final, (types.FunctionType, types.MethodType)) or hasattr(final, "max_recompiles")
    if user_fn:
        return done, (final if not _is_library(final) else None), None, final
    # a method or property of a user object (``m.scale(x)``, ``self.layer(x)``): its reads of
    # ``self.w`` are reads of ``m.w`` / ``self.layer.w``, captured as such
    rest = attrs[len(done):]
    m = _method(final, rest[0] if rest else "__call__")
    return done, (None if m is None else types.MethodType(m, final)), (None if m is None else done), final


def _find(fn, call_args, out, seen, depth, where, prefix, visited):
    """``prefix``: (root, obj, name, attrs, label) of the chain that reaches the bound ``self`` of
    ``fn`` (a method followed from a chain), or None: ``self.x`` is then ``prefix``'s ``.x``."""
    c = _code_of(fn)
    if c is None or depth > _MAX_DEPTH:
        return
    code, glb, cells, self, bound = c
    mark = (code, None if prefix is None else (prefix[0], id(prefix[1]), prefix[2], prefix[3]))
    if mark in seen:
        return
    seen.add(mark)
    visited.append((code, glb, where))
    nargs = code.co_argcount + code.co_kwonlyargcount
    params = code.co_varnames[:nargs]
    keys = {(k.root, id(k.obj), k.name, k.attrs) for k in out}
    helpers = []
    if self is not None and _is_module(self):
        _module_hooks(self, where, helpers)
    for sub in _codes(code):
        for x, attrs in _loads(sub):
            name = x.argval
            base, of_self = (), False
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
            elif x.opname.startswith("LOAD_FAST") and sub is code and name in params and attrs:
                i = params.index(name) - (self is not None) - bound
                if self is not None and params.index(name) == 0:
                    if prefix is None:
                        root, obj, value, label = "self", self, self, f"'{name}'"
                    else:
                        root, obj, name, base, label = prefix
                        value, of_self = self, True
                elif depth == 0 and 0 <= i < len(call_args) and not isinstance(call_args[i], Tensor):
                    root, obj, value, label = "arg", i, call_args[i], f"'{name}'"
                else:
                    continue
            else:
                continue
            done, helper, via, final = _classify(value, attrs)
            if done is None:
                continue
            chain = base + done
            # a read of a followed method's self is named by its chain alone ("global 'm'.w")
            full = ("" if of_self else where) + label + "".join(f".{a}" for a in chain)
            if helper is not None:
                # a module's forward, called through its __call__: nesting, not depth
                deeper = 0 if via is not None and _is_module(final) else 1
                helpers.append((helper, full, None if via is None else (root, obj, name, base + via, label), deeper))
            if not chain and root in ("self", "arg"):
                continue              # the argument itself is in the key already; a bound self is fixed
            _add(Capture(root, obj, name, chain, full), out, keys)
            if helper is None and _is_module(final) and _is_library(type(final)):
                _library_module(final, (root, obj, name, base + done, label), full, out, keys, helpers, set())
    for h, label, sub_prefix, deeper in helpers:
        _find(h, (), out, seen, depth + deeper, f"{label} -> ", sub_prefix, visited)


def _add(cap: Capture, out: list, keys: set) -> None:
    """Append ``cap`` to the captures ``out`` unless the same chain is there (``keys``)."""
    k = (cap.root, id(cap.obj), cap.name, cap.attrs)
    if k not in keys:
        keys.add(k)
        out.append(cap)


def _library_module(m, prefix, full, out, keys, helpers, walked):
    """A dj.nn module of the library's own (``Sequential``, ``Linear``, ``Dropout``, ...) reached by
    the chain ``prefix``: its code is not walked, so what it reads is guarded wholesale: each plain
    option of its own (``training``, ``p``, ``eps``, ...), and, through its submodules, theirs; a
    submodule of a user class is walked as a call of its ``forward``.  Module nesting does not count
    against the depth limit (it is finite: ``walked`` stops a module that holds itself)."""
    if id(m) in walked:
        return
    walked.add(id(m))
    _module_hooks(m, f"{full} -> ", helpers)
    root, obj, name, chain, label = prefix
    for a, v in m.__dict__.items():
        if a in _MODULE_REGISTRIES or a.startswith("_") or not isinstance(v, _SCALARS + (tuple, list)):
            continue
        _add(Capture(root, obj, name, chain + (a,), f"{full}.{a}"), out, keys)
    for cname, child in m.__dict__["_modules"].items():
        if child is None:
            continue
        sub = (root, obj, name, chain + (cname,), label)
        if _is_library(type(child)):
            _library_module(child, sub, f"{full}.{cname}", out, keys, helpers, walked)
        else:
            fwd = _method(child, "__call__")
            if fwd is not None:
                helpers.append((types.MethodType(fwd, child), f"{full}.{cname}", sub, 0))


def _module_hooks(m, where, helpers) -> None:
    """A module's forward hooks run with its forward (``Module.__call__``): they are walked as
    helpers one call deeper (their globals and closure variables are guarded; what they read
    from their ``module`` argument is not)."""
    for attr in ("_forward_pre_hooks", "_forward_hooks"):
        for i, h in enumerate(getattr(m, attr, {}).values()):
            helpers.append((h, f"{where}{attr[1:-1].replace('_', ' ')} #{i}", None, 1))


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
        lines.append(f"    v{i} = {base}{''.join(f'.{a}' if a.isidentifier() else f'._modules[{a!r}]' for a in c.attrs)}")
    vs = [f"v{i}" for i in range(len(caps))]
    key = ", ".join(f"v{i}._sig if v{i}.__class__ is _T else _K(v{i})" for i in range(len(caps)))
    lines.append(f"    return ({key},), ({', '.join(vs)},)")
    src = "\n".join(lines) + "\n"
    read = define(src, "read", g, "<dispatch_jit compiled guards>")
    read.__source__ = src
    return read
