"""What a compiled kernel's machine code depends on, as a hash: the source of the kernel and of
everything it calls, its compile options, and the values of the globals it reads.

The disk cache (diskcache.py) keys an entry by this fingerprint, so that an edit to a kernel,
to a helper it calls (Numba does not track a callee's changes), to a module constant it reads
(Numba freezes globals into the code) or to its options makes a new entry instead of loading
stale code.  A Python function is fingerprinted by its bytecode, not its file: moving it or
editing its neighbours keeps its entries, a change to what it computes does not.

What the kernel reads is walked recursively: the names its code (and its nested code) uses,
looked up in its globals and its closure (and, for a module of ours it names, in that module).  Numba dispatchers, intrinsics and plain functions
are fingerprinted by their code; numbers, strings, dtypes, Numba types, classes and modules by
what they are.  Anything else (an object whose value we cannot see) makes the whole
fingerprint ``None``: such a kernel is compiled in every process, never loaded from disk, since
a key that missed a changed value would load a wrong answer.

>>> import numba
>>> f = numba.njit(lambda x: x + 1)
>>> g = numba.njit(lambda x: x + 2)
>>> of_dispatcher(f) == of_dispatcher(f) != of_dispatcher(g)
True
>>> of_source("def k(x):\\n    return x * K\\n", {"K": 2}) != of_source("def k(x):\\n    return x * K\\n", {"K": 3})
True
"""

from __future__ import annotations

import dis
import hashlib
import re
import types

import llvmlite.ir
import numpy as np

__all__ = ["of_dispatcher", "of_options", "of_source", "of_value"]

_LIBRARY = re.compile(r"(numba|numpy|llvmlite|math|cmath|builtins)(\.|$)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


class _Unseen(Exception):
    """A value the fingerprint cannot see into."""


def _code_names(code: types.CodeType, out: set) -> set:
    out.update(code.co_names)
    out.update(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)
    return out


# the opcodes that read a name from the globals (or the builtins), as Numba resolves them; a name
# that the code only reads as an attribute (``np.empty``) is no global, even where the module
# binds that name to something else (``from dispatch_jit.creation import empty``)
_GLOBAL_OPS = frozenset(["LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"])     # the last: Python 3.12+


def _global_names(code: types.CodeType, out: set) -> set:
    out.update(i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_OPS)
    out.update(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _global_names(c, out)
    return out


def _code_bytes(code: types.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    h.update(repr((code.co_varnames, code.co_freevars, code.co_argcount, code.co_kwonlyargcount)).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_bytes(c, h)
        else:
            h.update(repr((type(c).__name__, c)).encode())


def _function(fn: types.FunctionType, seen: set) -> str:
    # Not memoized: a global a kernel reads may be rebound, and the walk costs ~20 us a function, on
    # the compile path only.
    if id(fn) in seen:          # recursion (a kernel calling itself): its own code is already hashed
        return f"<recursive {fn.__qualname__}>"
    seen = seen | {id(fn)}
    h = hashlib.sha256()
    code = fn.__code__
    _code_bytes(code, h)
    h.update(repr(fn.__defaults__).encode())
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    names = sorted(_code_names(code, set()))
    for name in sorted(_global_names(code, set())):
        if name in cells:
            try:
                v = cells[name].cell_contents
            except ValueError:              # an empty cell
                continue
        elif name in fn.__globals__:
            v = fn.__globals__[name]
        else:
            continue                        # a builtin
        h.update(f"\0{name}=".encode() + _value(v, seen).encode())
        if isinstance(v, types.ModuleType) and not _LIBRARY.match(v.__name__):
            # ``helpers.f(x)``: what the kernel reads through a module of ours (the code's names
            # include the attribute's; more of them than it reads, which only costs hashing)
            for attr in names:
                if attr in vars(v):
                    h.update(f"\0{name}.{attr}=".encode() + _value(vars(v)[attr], seen).encode())
    return h.hexdigest()


def _value(v, seen: set) -> str:
    from numba.core import types as nbtypes
    from numba.core.dispatcher import Dispatcher
    from numba.core.extending import _Intrinsic
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return repr((type(v).__name__, v))
    if isinstance(v, np.generic):
        return repr((v.dtype.str, v.item()))
    if isinstance(v, np.ndarray):
        return f"array {v.dtype.str} {v.shape} " + hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
    if isinstance(v, np.dtype):
        return f"dtype {v.str}"
    if isinstance(v, types.ModuleType):
        return f"module {v.__name__}"
    if isinstance(v, nbtypes.Type):
        return f"numba type {v}"
    if isinstance(v, (llvmlite.ir.Type, llvmlite.ir.Constant)):     # what an intrinsic's codegen builds with
        return f"llvm {type(v).__name__} {v}"
    if isinstance(v, type):
        return f"class {v.__module__}.{v.__qualname__}"
    if callable(v) and _LIBRARY.match(getattr(v, "__module__", None) or ""):
        # the libraries' own functions (np.dot, numba.get_num_threads): their versions are in the
        # disk key (diskcache.target_tag)
        return f"library {v.__module__}.{getattr(v, '__qualname__', getattr(v, '__name__', ''))}"
    if isinstance(v, Dispatcher):
        return "njit " + _dispatcher(v, seen)
    if isinstance(v, _Intrinsic):
        return "intrinsic " + _function(v._defn, seen)
    if isinstance(v, types.FunctionType):
        return "function " + _function(v, seen)
    if isinstance(v, (tuple, list, frozenset)):
        items = sorted(v, key=repr) if isinstance(v, frozenset) else v
        return f"{type(v).__name__}(" + ",".join(_value(x, seen) for x in items) + ")"
    if type(v) is dict:      # a table a kernel's overload picks from (kernels/linalg/gemm.py's _CBLAS)
        return "dict(" + ",".join(f"{_value(k, seen)}:{_value(x, seen)}" for k, x in sorted(v.items(), key=repr)) + ")"
    raise _Unseen(f"{type(v).__module__}.{type(v).__qualname__}")


def of_options(options: dict) -> str:
    """Compile options as a string that is the same in every process (a set's repr is not:
    string hashes are salted per process)."""
    canon = lambda v: repr(sorted(v)) if isinstance(v, (set, frozenset)) else repr(v)
    return repr(sorted((k, canon(v)) for k, v in options.items()))


def _dispatcher(disp, seen: set) -> str:
    return hashlib.sha256(f"{of_options(disp.targetoptions)}\0{_function(disp.py_func, seen)}".encode()).hexdigest()


def of_value(v) -> str | None:
    """The fingerprint of one value a kernel reads, or None if it cannot be seen into."""
    try:
        return _value(v, set())
    except _Unseen:
        return None


def of_dispatcher(disp) -> str | None:
    """The fingerprint of a ``numba.njit`` function: its options, its code and what it reads."""
    try:
        return _dispatcher(disp, set())
    except _Unseen:
        return None


def of_source(src: str, glb: dict) -> str | None:
    """The fingerprint of generated source ``src`` run with globals ``glb``: the source and the
    globals it names (any identifier in it that ``glb`` holds, which over-approximates)."""
    h = hashlib.sha256(src.encode())
    try:
        for name in sorted(set(_IDENT.findall(src)) & glb.keys()):
            h.update(f"\0{name}=".encode() + _value(glb[name], set()).encode())
    except _Unseen:
        return None
    return h.hexdigest()
