"""The dispatcher: thread-local key state, the memoized hot path, and the miss path.

The hot path of every operator is a function generated from its schema::

    def add(self, other, *, alpha=1, out=None):
        f = memo_get((tls.k, <sig of self>, <sig of other>, <type of alpha>, <sig of out>))
        if f is None:
            f = miss(op, (self, other, alpha, out))
        return f(self, other, alpha, out)

``tls.k`` is one small int standing for all thread-local state that changes
which kernel runs (include/exclude sets, trace printing); the signatures fix
the dispatch keys, dtypes, ndim, contiguity and device of the tensors, and the
types of the other arguments fix what the schema binder would say of them.  The
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
import sys
import threading
from typing import Callable

from . import bf16
from .errors import DeviceMismatchError, NoKernelError, SchemaError
from .introspect import dump_table
from .keys import DispatchKey, DispatchKeySet, bits_below
from .registry import KernelKind, OperatorEntry
from .signature import SIG_NONE, decode, list_sig, scalar_sig
# the write observers live in writes.py; before_write stays importable from here
from .writes import before_write, guard_writes  # noqa: F401

__all__ = ["IncludeDispatchKeyGuard", "ExcludeDispatchKeyGuard", "show_dispatch_trace", "Call",
           "redispatch", "tls", "set_tensor_type", "set_op_handle", "memo_key", "key_fields",
           "is_tracing_dispatch", "before_write", "resolve_call"]


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


# -- the memo key ------------------------------------------------------------------
# One memo key per call: the thread-local state id, then, per schema argument, what the miss
# path's resolution depends on: a tensor-like argument's signature, and the type of every other
# argument the schema binder checks (an int axis, a bool keepdims, a Scalar alpha: an int alpha on
# int tensors, a float on floats; an int[] axis: its element types).  A hit must be exactly what a
# miss would resolve, errors included: with only the tensors in it, dj.sum(M, True) after
# dj.sum(M, 1) would reuse the resolution of axis=1 where the binder refuses a bool axis.
# ``key_fields`` says which arguments and how; ``memo_key`` builds the key from them (the miss
# path, redispatch) and entry.py renders the same fields as the generated entry's inline
# expression (the hot path).  This is the one source of truth: tests/test_memo_key.py checks that
# the generated entries agree with it, and that a hit equals a fresh resolution.
TENSOR, OPTIONAL_TENSOR, SIG, CLASS, LIST = "tensor", "optional tensor", "sig", "class", "list"
# the binder checks these types' values by class; the others (ScalarType, Device, ...) take any
# object, and only refuse None where they are not optional
_CHECKED_BASES = frozenset({"Scalar", "int", "float", "bool", "str"})
_GENERATED_GLOBALS: list[dict] = []
_TENSOR_TYPE: list = [None]
_OP_HANDLE: list = [None]      # set_op_handle
_KEY_FIELDS: dict = {}


def key_fields(op: OperatorEntry) -> tuple:
    """(argument index, kind) for each argument in ``op``'s memo key, in schema order.

    Kinds: TENSOR (a Tensor: its ``_sig``, or ``scalar_sig`` of a number passed for it),
    OPTIONAL_TENSOR (the same, ``-1`` for None), SIG (Tensor lists: ``scalar_sig``), CLASS
    (Scalar, int, float, bool and str arguments, and a required ScalarType, Device, ...: their
    type) and LIST (int[], float[], bool[N]: ``list_sig``).  An optional ScalarType, Device, ...
    is not in the key: the binder takes any value there."""
    fields = _KEY_FIELDS.get(op.schema)
    if fields is None:
        fields = []
        for i, a in enumerate(op.schema.arguments):
            t = a.type
            if t.is_tensor_like:
                if t.base == "Tensor" and not t.is_list:
                    fields.append((i, OPTIONAL_TENSOR if t.optional else TENSOR))
                else:
                    fields.append((i, SIG))
            elif t.is_list:
                fields.append((i, LIST))
            elif t.base in _CHECKED_BASES or not t.optional:
                fields.append((i, CLASS))
        fields = _KEY_FIELDS[op.schema] = tuple(fields)
    return fields


def memo_key(op: OperatorEntry, args: tuple) -> tuple:
    """The memo key of a call of ``op`` on ``args`` (every schema argument, positionally)
    in this thread's current dispatch state."""
    T = _TENSOR_TYPE[0]
    key = [tls.k]
    for i, kind in key_fields(op):
        v = args[i]
        if kind == CLASS:
            key.append(v.__class__)
        elif kind == LIST:
            key.append(list_sig(v))
        elif kind == OPTIONAL_TENSOR and v is None:
            key.append(SIG_NONE)
        elif kind != SIG and v.__class__ is T:
            key.append(v._sig)
        else:
            key.append(scalar_sig(v))
    return tuple(key)


def set_tensor_type(cls) -> None:
    """Called once by tensor.py: the generated entries test ``x.__class__ is _T``."""
    _TENSOR_TYPE[0] = cls
    for g in _GENERATED_GLOBALS:
        g["_T"] = cls


def set_op_handle(handle: Callable) -> None:
    """Called once by ops.py (above this module): a boxed kernel receives ``handle(op)``, the
    operator's public ``OpOverload``, as PyTorch's boxed kernels receive an OperatorHandle."""
    _OP_HANDLE[0] = handle


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
    key = memo_key(op, args)
    op.misses += 1
    fn = guard_writes(op, metas, fn)
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
        kernel, kind = op.table[key.value]
        ks &= bits_below(key)
        if kind is not KernelKind.BACKEND_FALLBACK or not ks:
            name = getattr(kernel, "__qualname__", None) or getattr(kernel, "__name__", None) or repr(kernel)
            return name, kind.value, key


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
    fn, kind = op.table[key.value] if ks else (None, KernelKind.MISSING)
    if fn is None:
        raise no_kernel_error(op, key, ks)
    if (key, kind) in _BF16_CHECKED and bf16.refused(op.name, op.schema.namespace, key.name, metas):
        raise NoKernelError(bf16.refusal(op.name, key.name))
    call = Call(op, key, ks, metas, trace)
    if kind is KernelKind.BACKEND_FALLBACK:
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


# the kernels that see arrays: bfloat16 reaches only those declared for it (bf16.py)
_BF16_CHECKED = frozenset([(k, kind) for k in (DispatchKey.CPU, DispatchKey.CUDA)
                           for kind in (KernelKind.KERNEL, KernelKind.COMPOSITE_EXPLICIT)])


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
    public = _OP_HANDLE[0](op)
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


_LAYOUT_KEYS = {"SparseCPU": "sparse COO", "SparseCUDA": "sparse COO", "SparseCsrCPU": "sparse CSR", "SparseCsrCUDA": "sparse CSR"}


def no_kernel_error(op: OperatorEntry, key: DispatchKey, ks: int) -> NoKernelError:
    have = [k.name for k in op.kernels] or ["none"]
    layout, hint = _LAYOUT_KEYS.get(key.name), ""
    if layout is not None:      # a layout's key: say which ops that layout has
        from .registry import all_operators
        ops = sorted(o.name for o in all_operators() if key in o.kernels)
        hint = f" The {layout} layout has kernels only for: {', '.join(ops)}; convert with .to_dense() first."
    return NoKernelError(
        f"Could not run '{op.name}' with arguments from the '{key.name}' backend "
        f"(call keys: {DispatchKeySet.from_bits(ks)}). '{op.name}' has kernels registered only for: "
        f"{', '.join(have)}.{hint} Register one with Library('{op.schema.namespace}', 'IMPL').impl(...) "
        f"or move the inputs to a backend that has one.\n{dump_table(op)}")


def redispatch(op: OperatorEntry, keyset, args: tuple) -> object:
    """Run ``op`` on positional ``args`` (schema order) with an explicit key set."""
    bits = keyset.bits if isinstance(keyset, DispatchKeySet) else int(keyset)
    key = ("redispatch", bits) + memo_key(op, args)    # never equal to an entry's key (a str first)
    fn = op.memo.get(key)
    if fn is None:
        metas = _metas(op, args)
        fn = guard_writes(op, metas, _resolve_keyset(op, bits, metas, "redispatch", tls.trace))
        op.memo[key] = fn
    return fn(*args)
