"""Tracing: run the user's function on symbolic tensors, recording every op.

A symbolic tensor is a real ``dj.Tensor`` over a tiny placeholder array of
the right dtype and ndim, with ``(tracer, value id)`` in its ``__dict__``.
While a trace runs, the Tracer key is in the thread's include set, so every
operator call lands in ``tracer_fallback`` (a boxed backend fallback), which
appends a node to the graph and returns a fresh symbolic tensor.  Output
types come from the op's meta function, without running the op: the
elementwise type rules (compiler/elementwise.py), a view's shape rule asked
with every size unknown (views.py; sizes are not part of the cache key, so
only dtype and ndim matter), or the op's kernel at the Meta key (built-in
ones, a custom op's ``register_fake``).  Only an op with none of these runs
eagerly on the placeholders, with the Tracer key excluded.

Anything that needs real data (``bool(t)``, ``t.item()``, ``t.numpy()``,
``print(t)``/``repr(t)``, ``float(t)``, iteration, ``t.shape``, advanced
indexing, in-place writes) raises ``TraceAbort``; the compiled function then
runs that call eagerly and records the reason, so no placeholder's value is
ever shown or used.  The same holds for real tensors from outside the
function that the trace uses by identity (captured through an attribute chain
or a container, default argument values): for the length of the trace they
are ``ExternalTensor``s, whose data reads abort in the tracing thread.  A
symbolic tensor that the function stores outside itself outlives the trace
as a placeholder; ``Tracer.finish`` makes every use of it raise.
Views are recorded like other ops; basic indexing (``t[1:, ::2, None]``)
becomes a ``getitem`` node.

This module is the driver (the Tracer key's fallback, ``trace``, the stand-ins for
the function's arguments and runtime scalars); trace/symbolic.py builds the graph (``Tracer``)
and holds the symbolic and external tensors with their guards.
"""

from __future__ import annotations

import contextlib

from dispatch_jit.creation import default_generator
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard, IncludeDispatchKeyGuard
from dispatch_jit.keys import DispatchKey, DispatchKeySet
from dispatch_jit import registry
from dispatch_jit.errors import RegistrationError
from dispatch_jit.tensor import TRACE_MARK, Tensor

from ..elementwise import scalar_op_of
from ..graph.ir import Graph, RuntimeFloat, RuntimeInt, rebuild, runtime_scalar
from .autodiff import DENSE, attach, needs_grad, returns_grad
from .owners import module_tensors
from .shaped import ShapedTracer
from .symbolic import TraceAbort, Tracer, _GuardExternal, _state, _type_of, is_tracing
from .symbolic_tensor import DETACH_WITH_GRAD, SymbolicTensor, _escaped

__all__ = ["TraceAbort", "trace", "is_tracing", "install_tracer_fallback", "flat_tensors",
           "active", "misplaced_scalars", "TRACED_SCALARS"]

_K = DispatchKey



@contextlib.contextmanager
def rewinding(tracer, who: str):
    """Run a traced function; if it drew from the default generator, rewind it and abort the trace.

    Random tensors made while tracing would be constants of the trace, the same at every call;
    rewound, the eager run draws what eager mode would.
    """
    gen = default_generator
    rng = gen.rng
    state = rng.bit_generator.state
    try:
        yield
    finally:
        if gen.rng is not rng or rng.bit_generator.state != state:
            gen.rng, rng.bit_generator.state = rng, state
            tracer.aborted = tracer.aborted or (
                f"{who} draws random numbers from the default generator (dj.rand, dj.randn, dj.randint, "
                f"dropout): a trace would draw them once and replay them at every call")

_BATCHED = 1 << _K.Batched
_BELOW_TRACER = (1 << _K.Tracer) - 1


def tracer_fallback(op, keyset, args, kwargs):
    """The Tracer key's backend fallback: record the call into the active trace.

    A vmap'd tensor (the Batched key) is not a value of the graph: its batching rule runs
    (the call goes on below this key), and the ops the rule calls on the unwrapped values
    are what the trace records, so the batch is one more loop axis of the graph."""
    if keyset.bits & _BATCHED:
        return op.redispatch(DispatchKeySet.from_bits(keyset.bits & _BELOW_TRACER), *args, **kwargs)
    tracer = _state.tracer
    if tracer is None:   # an escaped symbolic tensor brought the Tracer key (see Tracer.finish)
        for x in flat_tensors((args, kwargs), []):
            if x.__class__ is SymbolicTensor and x.__dict__[TRACE_MARK][0].done:
                _escaped(f"{op.name()} got")
    elif tracer.__class__ is not Tracer:    # lazy mode's recorder: its arguments, cheaply
        for x in args:
            if x.__class__ is SymbolicTensor and x.__dict__[TRACE_MARK][0].done:
                _escaped(f"{op.name()} got")
    if tracer is None:   # Tracer included by someone else: behave as a fallthrough
        with ExcludeDispatchKeyGuard(_K.Tracer):
            return op(*args, **kwargs)
    out = tracer.record(op, args, kwargs)
    if isinstance(tracer, Tracer) and tracer.FORWARD and needs_grad(args, kwargs):
        return attach(tracer, op, args, kwargs, out, DENSE)    # a func transform's level (autodiff.py)
    return out


class _Active:
    """``with _Active(tracer):`` the thread's active trace is ``tracer`` (joint.py traces a backward)."""

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        self.prev, _state.tracer = _state.tracer, self.tracer

    def __exit__(self, *exc):
        _state.tracer = self.prev


def _map_tensors(x, fn):
    if isinstance(x, Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return rebuild(x, (_map_tensors(y, fn) for y in x))
    if isinstance(x, dict):
        return {k: _map_tensors(v, fn) for k, v in x.items()}
    return x


def flat_tensors(x, out: list) -> list:
    """The tensors in a nested structure of lists, tuples and dicts, in order."""
    if isinstance(x, Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            flat_tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            flat_tensors(y, out)
    return out


def trace(fn, args: tuple, kwargs: dict, captures=(), values=(), scalars=None, sized: bool = False) -> Graph:
    """Record ``fn(*args, **kwargs)`` as a graph whose inputs are the tensors in
    ``args``/``kwargs`` (in order), then those in ``values`` (what each of
    ``captures``, guards.py, read for this call).  ``scalars``: {("a", position) or
    ("k", name): index} of the Python numbers that are runtime scalars (see
    ``RuntimeFloat``); what the function did with one in Python is in
    ``graph.tainted`` afterwards.  ``sized``: trace with this call's sizes (a
    ``ShapedTracer``: ``.shape`` and ``.size()`` answer), for a caller whose key holds
    every input's sizes.  Raises TraceAbort if it needs data."""
    tracer = ShapedTracer() if sized else Tracer()
    if sized:
        tracer.lifts = True      # parameters become inputs (a ShapedTracer's default is a joint graph's)
    if scalars:
        args, kwargs = _scalar_stand_ins(tracer, args, kwargs, scalars)
    # a detach() is no node of the graph: fine where only a transform's level differentiates it
    tracer.grad_inputs = any(t.requires_grad for t in flat_tensors((args, kwargs, values), []))
    sargs = _map_tensors(args, tracer.shaped_input if sized else tracer.add_input)
    skwargs = _map_tensors(kwargs, tracer.shaped_input if sized else tracer.add_input)
    try:
        with IncludeDispatchKeyGuard(_K.Tracer), _Active(tracer):
            run = _with_stand_ins(tracer, fn, captures, values)
            for t, label in _defaults(fn):
                tracer.external.setdefault(id(t), (t, label))
            for t, _, label in tracer.captured.values():
                tracer.external[id(t)] = (t, label)
            # the tensors of the modules the call's key guards (a model's parameters): used by
            # identity, so guarded while tracing as captured tensors are (owners.py)
            owners = module_tensors(args, values, captures)
            for t, _, label in owners.values():
                tracer.external.setdefault(id(t), (t, label))
            with _GuardExternal([t for t, _ in tracer.external.values()]), rewinding(tracer, "the function"):
                out = fn(*sargs, **skwargs) if run is None else run(*sargs, **skwargs)
            if tracer.aborted:     # the function caught our exception: still abort
                raise TraceAbort(tracer.aborted)
            why = DETACH_WITH_GRAD if getattr(tracer, "detached", False) and tracer.graph.lifted else \
                returns_grad(flat_tensors(out, []), set(tracer.graph.inputs))
            if why:
                tracer.abort(why)
            tracer.graph.outputs = tracer.to_arg(out)
    finally:
        for x in tracer.scalars:
            x._tracer = None       # the graph keeps them: from now on plain numbers
        tracer.finish()
    tracer.graph.tainted = dict(tracer.tainted)
    tracer.graph.owners = owners
    for i, why in misplaced_scalars(tracer.graph).items():
        tracer.graph.tainted.setdefault(i, why)
    return tracer.graph.check()


def _defaults(fn, depth: int = 0) -> list:
    """(tensor, label) for each tensor among ``fn``'s default argument values (and a
    ``functools.partial``'s bound arguments): real tensors from outside, guarded while tracing."""
    import functools
    import types
    out: list = []
    if depth > 3:
        return out
    if isinstance(fn, functools.partial):
        for t in flat_tensors((fn.args, fn.keywords), []):
            out.append((t, "an argument bound by functools.partial"))
        return out + _defaults(fn.func, depth + 1)
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    inner = getattr(fn, "fn", None)        # a CompiledFunction
    if inner is not None and not isinstance(fn, types.FunctionType):
        return _defaults(inner, depth + 1)
    if not isinstance(fn, types.FunctionType):
        call = getattr(type(fn), "__call__", None)
        return _defaults(call, depth + 1) if isinstance(call, types.FunctionType) else out
    for t in flat_tensors((fn.__defaults__ or (), fn.__kwdefaults__ or {}), []):
        out.append((t, f"a default argument value of {fn.__name__}()"))
    return out


def misplaced_scalars(g: Graph) -> dict[int, str]:
    """Runtime scalars that reach the graph anywhere but as an operand of an elementwise op
    (a static such as alpha=, an axis, a size, a non-elementwise op, an output): only
    operands are loop parameters and eager-step arguments; anywhere else the value is
    treated as a constant of the trace, so it must be part of the key."""
    out: dict[int, str] = {}

    def scan(x, where):
        if isinstance(x, (RuntimeFloat, RuntimeInt)):
            out.setdefault(x.index, where)
        elif isinstance(x, (list, tuple)):
            for y in x:
                scan(y, where)
        elif isinstance(x, dict):
            for y in x.values():
                scan(y, where)

    for n in g.nodes:
        sop = scalar_op_of(n.op)
        rest = n.args[sop.arity:] if sop is not None else n.args
        scan((rest, n.kwargs), f"passed to {n.name} as a static argument" if sop is not None
             else f"passed to {n.name}")
    scan(g.outputs, "returned by the function")
    return out


def _with_stand_ins(tracer, fn, captures, values):
    """Make the captured tensors graph inputs, after the arguments.  Those ``fn`` reads by a
    plain global or closure name are traced as symbolic stand-ins (a copy of ``fn`` over a
    copy of its globals / new cells), so that a data read of them aborts as an argument's
    does; the others (attribute chains, containers, helpers' globals) are found by identity.
    Returns the function to trace, or None for ``fn`` itself."""
    if not captures:
        return None
    import types
    base = fn.__func__ if isinstance(fn, types.MethodType) else fn
    plain = isinstance(base, types.FunctionType)
    glb = base.__globals__ if plain else None
    cells = dict(zip(base.__code__.co_freevars, base.__closure__ or ())) if plain else {}
    new_globals, new_cells = {}, {}
    for cap, v in zip(captures, values):
        direct = plain and not cap.attrs and isinstance(v, Tensor) and (
            (cap.root == "global" and cap.obj is glb) or (cap.root == "cell" and cells.get(cap.name) is cap.obj))
        for t in flat_tensors(v, []):
            tracer.dense_only(t)
            vid = tracer.graph.new_value(_type_of(t))
            tracer.graph.inputs.append(vid)
            if tracer.shaped:
                tracer.shapes[vid] = tuple(t._data.shape)
            if direct:
                sym = tracer.symbolic(_type_of(t), vid)
                if tracer.shaped:
                    sym = tracer.place(sym, t._data.shape)
                (new_globals if cap.root == "global" else new_cells)[cap.name] = sym
            elif id(t) in tracer.captured:
                tracer.abort(f"one tensor is read both as {tracer.captured[id(t)][2]} and as {cap.label}; "
                             f"a trace cannot tell which one it used (pass it as an argument)")
            else:
                tracer.captured[id(t)] = (t, vid, cap.label)
    if not (new_globals or new_cells):
        return None
    g = dict(glb, **new_globals) if new_globals else glb
    closure = tuple(types.CellType(new_cells[n]) if n in new_cells else c
                    for n, c in zip(base.__code__.co_freevars, base.__closure__ or ()))
    run = types.FunctionType(base.__code__, g, base.__name__, base.__defaults__, closure or None)
    run.__kwdefaults__ = base.__kwdefaults__
    return types.MethodType(run, fn.__self__) if base is not fn else run


# -- runtime scalars: stand-ins that notice what Python does with them ----------------------------
def _taint(name):
    def method(self, *args):
        tr = self._tracer
        if tr is not None and _state.tracer is tr and not tr.in_meta:
            if args and isinstance(args[0], Tensor):
                return NotImplemented      # a tensor on the other side: the op records it
            tr.tainted.setdefault(self.index, f"its value was used in Python ({name})")
        return getattr(self._base, name)(self, *args)
    method.__name__ = name
    return method


# what a function may do with a number in Python: each of these makes its value part of the key
_NUMBER_METHODS = ("__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ "
                   "__rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __divmod__ __rdivmod__ __neg__ __pos__ "
                   "__abs__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __int__ __float__ __index__ "
                   "__complex__ __round__ __trunc__ __floor__ __ceil__ __hash__ __format__ __repr__ __str__ "
                   "__and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ __rlshift__ __rshift__ "
                   "__rrshift__ __invert__ is_integer as_integer_ratio hex conjugate bit_length bit_count "
                   "to_bytes __getnewargs__ __reduce_ex__").split()


def _traced_scalar_class(base, ir_cls):
    ns = {"_base": ir_cls, "_tracer": None, "__slots__": ()}    # outside a trace: the IR's number
    for name in _NUMBER_METHODS:
        if hasattr(base, name):
            ns[name] = _taint(name)
    return type(f"Traced{base.__name__.title()}", (ir_cls,), ns)


_TRACED = {float: _traced_scalar_class(float, RuntimeFloat), int: _traced_scalar_class(int, RuntimeInt)}
# the names joint.py uses: a backward is traced with the same stand-ins and the same scalar check
TRACED_SCALARS, active = _TRACED, _Active


def _scalar_stand_ins(tracer, args, kwargs, scalars):
    args, kwargs = list(args), dict(kwargs)
    for (where, k), i in scalars.items():
        box = args if where == "a" else kwargs
        x = runtime_scalar(box[k], i, _TRACED[type(box[k])])
        x._tracer = tracer
        tracer.scalars.append(x)
        box[k] = x
    return tuple(args), kwargs


# -- registration --------------------------------------------------------------------------
_handle = []


def install_tracer_fallback(fn=None):
    """Register a fallback at the Tracer key (the op library registers nothing there: the key is
    the compiler's): ``tracer_fallback`` (no ``fn``: kept if one is registered), or, from compiled
    mode's first entry on, ``fn``, the form of it that also specializes per call signature
    (lazy/specialize.py's ``recording_fallback``), which replaces it.  Memo entries resolved
    before are dropped (the registry recomputes every table)."""
    current = registry.backend_fallbacks().get(_K.Tracer)
    if _handle and (fn is None or current is fn):
        return _handle[0]
    if current is not None and not _handle:
        raise RegistrationError(f"a Tracer backend fallback is already registered ({current!r}); "
                                f"compiled mode needs its own")
    if _handle:
        _handle.pop().remove()
    _handle.append(registry.register_fallback(_K.Tracer, fn or tracer_fallback))
    return _handle[0]
