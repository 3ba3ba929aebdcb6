"""The dispatcher: thread-local key state, the memoized hot path, and the miss path.

The hot path of every operator is a function generated from its schema::

    def add(self, other, *, alpha=1, out=None):
        f = memo_get((tls.k, <sig of self>, <sig of other>, <sig of out>))
        if f is None:
            f = miss(op, (self, other, alpha, out))
        return f(self, other, alpha, out)

``tls.k`` is one small int standing for all thread-local state that changes
which kernel runs (include/exclude sets, trace printing); the signatures fix
the dispatch keys, dtypes, ndim, contiguity and device of the tensors.  The
memo value is the final callable: for Numba kernels, a closure over the
compiled overload's entry point for exactly those types.  Schema checks,
promotion, the table walk and compilation happen once per signature, in
``resolve``:

1. bind the call to the schema (SchemaError on mismatch);
2. decode each argument's signature (ArgMeta);
3. check that tensors share a device;
4. call key set = (OR of the tensors' key sets | TLS include) - TLS exclude
   - the op's fallthrough keys;
5. take the highest key and its entry in the op's computed table
   (NoKernelError if missing);
6. let the kernel specialize itself on the ArgMetas (lazy compile); a
   backend fallback is boxed, unless it too has ``specialize(call, boxed)``;
7. wrap it to print when dispatch tracing is on; memoize.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Callable

from .errors import DeviceMismatchError, DispatchJitError, NoKernelError, SchemaError
from .keys import DispatchKey, DispatchKeySet, bits_below
from .registry import OperatorEntry
from .signature import decode, scalar_sig

__all__ = ["IncludeDispatchKeyGuard", "ExcludeDispatchKeyGuard", "show_dispatch_trace", "Call",
           "make_entry", "redispatch", "tls", "set_tensor_type", "calls_of",
           "is_tracing_dispatch", "set_write_guard"]


class _MissingArg:
    """Default of a required parameter in a generated entry: its signature is
    never in a memo, so a call that omits it reaches the miss path, where the
    schema binder reports it by name."""

    _sig = None

    def __repr__(self):
        return "<missing>"


MISSING = _MissingArg()

_TRACE_DEFAULT = os.environ.get("DISPATCH_JIT_SHOW_DISPATCH_TRACE", "") not in ("", "0")

# (include, exclude, trace) -> small int, shared by all threads
_STATE_IDS: dict[tuple, int] = {}
_state_lock = threading.Lock()


def _state_id(state: tuple) -> int:
    sid = _STATE_IDS.get(state)
    if sid is None:
        with _state_lock:
            sid = _STATE_IDS.setdefault(state, len(_STATE_IDS))
    return sid


class _TLS(threading.local):
    """Per-thread dispatch state; ``k`` summarises it for the memo key."""

    def __init__(self):
        self.include = 0
        self.exclude = 0
        self.trace = _TRACE_DEFAULT
        self.depth = 0
        self.modes: list = []
        self.k = _state_id((0, 0, self.trace))

    def update(self) -> None:
        self.k = _state_id((self.include, self.exclude, self.trace))


tls = _TLS()


def _bits(keys) -> int:
    if isinstance(keys, (DispatchKey, str)):
        keys = [keys]
    return DispatchKeySet(keys).bits if not isinstance(keys, DispatchKeySet) else keys.bits


class IncludeDispatchKeyGuard:
    """Add keys to this thread's include set for the duration of a ``with``.

    >>> import dispatch_jit as dj
    >>> with dj.IncludeDispatchKeyGuard(dj.DispatchKey.AutocastCPU):
    ...     pass
    """

    def __init__(self, keys):
        self.bits = _bits(keys)

    def __enter__(self):
        self.prev = tls.include
        tls.include = self.prev | self.bits
        tls.update()
        return self

    def __exit__(self, *exc):
        tls.include = self.prev
        tls.update()


class ExcludeDispatchKeyGuard:
    """Remove keys from every call's key set in this thread for the duration
    of a ``with`` (exclusion wins over inclusion).

    >>> import dispatch_jit as dj
    >>> with dj.ExcludeDispatchKeyGuard(dj.DispatchKey.AutogradCPU):
    ...     pass
    """

    def __init__(self, keys):
        self.bits = _bits(keys)

    def __enter__(self):
        self.prev = tls.exclude
        tls.exclude = self.prev | self.bits
        tls.update()
        return self

    def __exit__(self, *exc):
        tls.exclude = self.prev
        tls.update()


class show_dispatch_trace:
    """Print every dispatch decision while active (also
    ``DISPATCH_JIT_SHOW_DISPATCH_TRACE=1``)::

        [call] op=[aten::add.Tensor], key=[AutogradCPU]
         [redispatch] op=[aten::add.Tensor], key=[CPU]
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def __enter__(self):
        self.prev = tls.trace
        tls.trace = self.enabled
        tls.update()
        return self

    def __exit__(self, *exc):
        tls.trace = self.prev
        tls.update()


def is_tracing_dispatch() -> bool:
    return tls.trace


# -- generated entries -------------------------------------------------------
_GENERATED_GLOBALS: list[dict] = []
_TENSOR_TYPE: list = [None]


def set_tensor_type(cls) -> None:
    """Called once by tensor.py: the generated entries test ``x.__class__ is _T``."""
    _TENSOR_TYPE[0] = cls
    for g in _GENERATED_GLOBALS:
        g["_T"] = cls


def _sig_expr(name: str, arg) -> str:
    base = arg.type.base
    if base == "Tensor" and not arg.type.is_list:
        expr = f"({name}._sig if {name}.__class__ is _T else _ssig({name}))"
        if arg.type.optional:   # out=None is the common case: no call for it
            expr = f"(-1 if {name} is None else {expr})"
        return expr
    return f"_ssig({name})"


def make_entry(op: OperatorEntry, public_name: str | None = None, as_alias: bool = False) -> Callable:
    """Generate the fast entry function for ``op`` from its schema.

    ``as_alias=True`` makes another public name for the op (``dj.amax`` for ``aten::max``,
    ``dj.concat`` for ``aten::cat``): the same hot path and memo, not stored as ``op.entry``,
    and errors raised on purpose name ``public_name``, the function the user called, not the
    op underneath (``errors_name``).  Its ``try`` costs nothing until something raises."""
    schema = op.schema
    params, names, sigs = [], [], []
    kw_started = False
    for a in schema.arguments:
        pname = a.name if a.name not in _RESERVED else a.name + "_"
        if a.kwarg_only and not kw_started:
            params.append("*")
            kw_started = True
        default = "_MISSING" if not a.has_default else f"_D_{pname}"
        params.append(f"{pname}={default}")
        names.append(pname)
        if a.type.is_tensor_like:
            sigs.append(_sig_expr(pname, a))
        elif a.type.base == "Scalar":
            # a Scalar's type changes the kernel (int alpha on int tensors, float on floats)
            sigs.append(f"{pname}.__class__")
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
    body = ("    _count()\n"
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
    g = {"_memo_get": op.memo.get, "_count": op.calls.__next__, "_tls": tls, "_T": _TENSOR_TYPE[0], "_ssig": scalar_sig, "_op": op,
         "_miss": resolve_call, "_MISSING": MISSING,
         "_NOALIAS": _NOALIAS, "_both": _both_spellings,
         "_DJError": DispatchJitError, "_rename": errors_name}
    for a, pname in zip(schema.arguments, names):
        if a.has_default:
            d = a.default
            g[f"_D_{pname}"] = tuple(d) if isinstance(d, list) else d
    exec(compile(src, f"<dispatch_jit entry {schema.full_name}>", "exec"), g)
    _GENERATED_GLOBALS.append(g)
    fn = g[fname]
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


_RESERVED = {"from", "in", "is", "lambda", "def", "class", "return", "global", "import", "and", "or",
             "not", "if", "else", "while", "for", "with", "as", "pass", "None", "True", "False"}


# -- the miss path ---------------------------------------------------------------
class Call:
    """What a kernel may specialize on: the op, the key it resolved to, the
    full call key set, and one ArgMeta per schema argument."""

    __slots__ = ("op", "key", "keyset", "metas", "trace")

    def __init__(self, op: OperatorEntry, key: DispatchKey, keyset: int, metas: tuple, trace: bool):
        self.op, self.key, self.keyset, self.metas, self.trace = op, key, keyset, metas, trace

    def redispatch(self) -> Callable:
        """The callable that runs below this call's key (PyTorch's
        ``redispatch(keyset.remove(key))``), resolved now, once."""
        below = self.keyset & bits_below(self.key)
        return _resolve_keyset(self.op, below, self.metas, "redispatch", self.trace)


def _bind_check(op: OperatorEntry, args: tuple) -> None:
    schema = op.schema
    pos, kw = [], {}
    for a, v in zip(schema.arguments, args):
        if v is MISSING:
            continue
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    # bind() reports missing, wrong-typed and malformed arguments by name
    from .schema import bind
    bind(schema, tuple(pos), kw, is_tensor=lambda v: v.__class__ is _TENSOR_TYPE[0]
         or isinstance(v, _TENSOR_TYPE[0]))
    for a, v in zip(schema.arguments, args):
        if v is MISSING and not a.has_default:
            raise SchemaError(f"{schema}: missing required argument '{a.name}'")


def _metas(op: OperatorEntry, args: tuple) -> tuple:
    out = []
    T = _TENSOR_TYPE[0]
    for a, v in zip(op.schema.arguments, args):
        if not a.type.is_tensor_like:
            out.append(None)
            continue
        s = v._sig if isinstance(v, T) else scalar_sig(v)
        if s is None:
            raise SchemaError(f"{op.schema}: argument '{a.name}' must be a tensor or a number, "
                              f"not {type(v).__name__} ({v!r:.60})")
        m = decode(s)
        if a.type.is_list and m.kind == "list":
            pass
        elif m.kind == "list":
            raise SchemaError(f"{op.schema}: argument '{a.name}' must be a Tensor, not a "
                              f"{type(v).__name__}; build one with dj.tensor(...)")
        out.append(m)
    return tuple(out)


def _call_keyset(metas: tuple) -> int:
    ks = 0
    for m in metas:
        if m is None:
            continue
        if m.kind == "tensor":
            ks |= m.keyset
        elif m.kind == "list":
            for item in m.items:
                ks |= item.keyset
    return ks


def check_devices(op: OperatorEntry, metas: tuple) -> None:
    seen = []
    for m in metas:
        if m is None:
            continue
        for t in (m.items if m.kind == "list" else (m,)):
            if t.kind == "tensor" and t.device not in [d for d, _ in seen]:
                seen.append((t.device, t.ndim))
    if len(seen) > 1:
        # A zero-dim CPU tensor may join a CUDA computation as a scalar (PyTorch's rule).
        real = [d for d, nd in seen if not (d == "cpu" and nd == 0)]
        if len(set(real)) > 1 or (len(real) == 1 and len(seen) > 1 and real[0] == "cpu"):
            a, b = seen[0][0], seen[1][0]
            raise DeviceMismatchError(
                f"Expected all tensors to be on the same device, but found {a} and {b} "
                f"(in {op.name}); move them with .to({a!r}) or .to({b!r})")


def resolve_call(op: OperatorEntry, args: tuple) -> Callable:
    """The miss path of a generated entry: steps 1-7 of the module docstring."""
    _bind_check(op, args)
    metas = _metas(op, args)
    check_devices(op, metas)
    state = tls
    tensor_ks = _call_keyset(metas)
    if not tensor_ks and any(m is not None for m in metas):
        seen = ", ".join(repr(v) for a, v in zip(op.schema.arguments, args) if a.type.is_tensor_like)
        raise SchemaError(f"{op.schema}: expected at least one Tensor argument, got only Python values "
                          f"({seen}); make one a tensor with dj.tensor(...)")
    ks = (tensor_ks | state.include) & ~state.exclude
    fn = _resolve_keyset(op, ks, metas, "call", state.trace)
    key = [state.k]
    T = _TENSOR_TYPE[0]
    for a, v in zip(op.schema.arguments, args):
        if a.type.is_tensor_like:
            key.append(v._sig if v.__class__ is T else scalar_sig(v))
        elif a.type.base == "Scalar":
            key.append(v.__class__)
    op.misses += 1
    fn = _guard_writes(op, metas, fn)
    key = tuple(key)
    op.memo[key] = fn = _check_first_return(op, ks, key, fn)
    return fn


def _returns_one_tensor(op: OperatorEntry) -> bool:
    rets = op.schema.returns
    return len(rets) == 1 and rets[0].type.base == "Tensor" and not rets[0].type.is_list \
        and not rets[0].type.optional


def _returning_kernel(op: OperatorEntry, ks: int) -> tuple:
    """(name, source, key) of the kernel a call on ``ks`` ends in: the first below the backend
    fallbacks (autograd's, autocast's), which only pass the kernel's result on."""
    ks &= ~op.fallthrough_bits
    while True:
        key = DispatchKeySet.from_bits(ks).highest()
        kernel, source = op.table[key.value]
        ks &= bits_below(key)
        if not source.startswith("backend fallback") or not ks:
            name = getattr(kernel, "__qualname__", None) or getattr(kernel, "__name__", None) or repr(kernel)
            return name, source, key


def _check_first_return(op: OperatorEntry, ks: int, memo_key: tuple, fn: Callable) -> Callable:
    """For a ``-> Tensor`` schema, the memo's first entry checks what the kernel returned, then
    puts ``fn`` itself in the memo: later calls (the hot path) pay nothing.  A kernel that
    returns a float or None is an error naming it, not a value that fails somewhere later."""
    if not _returns_one_tensor(op):
        return fn
    T = _TENSOR_TYPE[0]

    def first_call(*args):
        out = fn(*args)
        if not isinstance(out, T):
            name, source, key = _returning_kernel(op, ks)
            raise SchemaError(f"{op.name}: the kernel {name!r} ({source} at {key.name}) returned "
                              f"{type(out).__name__} ({out!r:.60}), but the schema '{op.schema}' returns a "
                              f"Tensor; return one (wrap values with dj.tensor(...))")
        if op.memo.get(memo_key) is first_call:
            op.memo[memo_key] = fn
        return out
    first_call.__wrapped__ = fn
    return first_call


def _resolve_keyset(op: OperatorEntry, ks: int, metas: tuple, label: str, trace: bool) -> Callable:
    ks &= ~op.fallthrough_bits
    key = DispatchKeySet.from_bits(ks).highest()
    fn, source = op.table[key.value] if ks else (None, "missing")
    if fn is None:
        raise no_kernel_error(op, key, ks)
    call = Call(op, key, ks, metas, trace)
    if source.startswith("backend fallback"):
        kern = _boxed(op, fn, ks)
        if hasattr(fn, "specialize"):
            # a fallback may specialize per signature too (the Tracer's, for lazy recording): it gets the
            # Call and the boxed kernel, and returns a kernel taking the schema's arguments positionally
            kern = fn.specialize(call, kern)
    elif hasattr(fn, "specialize"):
        kern = fn.specialize(call)
    else:
        kern = _unboxed(op, fn)
    if trace:
        kern = _traced(kern, op, key, label)
    return kern


# -- writes ------------------------------------------------------------------------
# Compiled mode (compiler/lazy.py) must see every write into a tensor before it happens: a pending
# graph of any thread that reads the tensor's storage runs first.  Its hook wraps, on the miss path,
# the memo entries of the call signatures that pass a tensor to an argument the schema marks
# written (in-place ops, out=); every other entry, ``out=None`` calls included, is unchanged.
_WRITE_GUARD: list = [None]     # (before_write(tensor), watched: a container, empty when no graph reads)


def set_write_guard(before_write: Callable, watched) -> None:
    """Install compiled mode's hook: ``before_write(t)`` runs before a call writes into ``t``,
    whenever ``watched`` is not empty.  Memo entries resolved before it are dropped."""
    from .registry import all_operators
    _WRITE_GUARD[0] = (before_write, watched)
    for op in all_operators():
        op.memo.clear()


def _guard_writes(op: OperatorEntry, metas: tuple, fn: Callable) -> Callable:
    guard = _WRITE_GUARD[0]
    if guard is None:
        return fn
    written = [(i, m.kind == "list") for i, (a, m) in enumerate(zip(op.schema.arguments, metas))
               if a.is_mutable and m is not None and m.kind in ("tensor", "list")]
    if not written:
        return fn
    before_write, watched = guard

    def guarded(*args):
        if watched:
            for i, is_list in written:
                for t in (args[i] if is_list else (args[i],)):
                    before_write(t)
        return fn(*args)
    guarded.__wrapped__ = fn
    return guarded


def _unboxed(op: OperatorEntry, fn: Callable) -> Callable:
    """User kernels take positional args; keyword-only schema args as keywords."""
    kwnames = [a.name for a in op.schema.arguments if a.kwarg_only]
    if not kwnames:
        return fn
    npos = len(op.schema.arguments) - len(kwnames)

    def call(*args):
        return fn(*args[:npos], **dict(zip(kwnames, args[npos:])))
    call.__wrapped__ = fn
    return call


def _boxed(op: OperatorEntry, fn: Callable, ks: int) -> Callable:
    from .ops import overload_of
    public = overload_of(op)
    keyset = DispatchKeySet.from_bits(ks)
    kwnames = [a.name for a in op.schema.arguments if a.kwarg_only]
    npos = len(op.schema.arguments) - len(kwnames)

    def call(*args):
        return fn(public, keyset, args[:npos], dict(zip(kwnames, args[npos:])))
    return call


def _traced(kern: Callable, op: OperatorEntry, key: DispatchKey, label: str) -> Callable:
    def traced(*args):
        print(f"{' ' * tls.depth}[{label}] op=[{op.name}], key=[{key.name}]", file=sys.stdout)
        tls.depth += 1
        try:
            return kern(*args)
        finally:
            tls.depth -= 1
    return traced


def no_kernel_error(op: OperatorEntry, key: DispatchKey, ks: int) -> NoKernelError:
    from .introspect import dump_table
    have = [k.name for k in op.kernels] or ["none"]
    return NoKernelError(
        f"Could not run '{op.name}' with arguments from the '{key.name}' backend "
        f"(call keys: {DispatchKeySet.from_bits(ks)}). '{op.name}' has kernels registered only for: "
        f"{', '.join(have)}. Register one with Library('{op.schema.namespace}', 'IMPL').impl(...) "
        f"or move the inputs to a backend that has one.\n{dump_table(op)}")


def redispatch(op: OperatorEntry, keyset, args: tuple) -> object:
    """Run ``op`` on positional ``args`` (schema order) with an explicit key set."""
    bits = keyset.bits if isinstance(keyset, DispatchKeySet) else int(keyset)
    metas = _metas(op, args)
    sigs = tuple(getattr(v, "_sig", None) if m is not None and m.kind == "tensor" else
                 (scalar_sig(v) if m is not None else None) for v, m in zip(args, metas))
    memo_key = ("redispatch", tls.k, bits, sigs)
    fn = op.memo.get(memo_key)
    if fn is None:
        fn = _guard_writes(op, metas, _resolve_keyset(op, bits, metas, "redispatch", tls.trace))
        op.memo[memo_key] = fn
    return fn(*args)


def calls_of(op: OperatorEntry) -> int:
    """Calls made through the op's entry so far (an itertools.count: reading it
    must not advance it)."""
    return op.calls.__reduce__()[1][0]
