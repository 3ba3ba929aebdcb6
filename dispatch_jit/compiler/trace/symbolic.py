"""Graph building for ``dj.compile``: the ``Tracer`` (one trace's graph, recording each call),
which hands the function symbolic tensors (symbolic_tensor.py: their guards abort a trace where
real data would be needed), and ``ExternalTensor`` for real tensors from outside the function,
for the length of a trace (the same guards).  trace/fallback.py drives it: the Tracer key's
fallback and ``trace``."""

from __future__ import annotations

import threading

import numpy as np

from dispatch_jit import return_types
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard
from dispatch_jit.keys import DispatchKey, key_bits
from dispatch_jit.signature import keyset_sig_bits
from dispatch_jit.sparse_base import SparseTensor
from dispatch_jit.tensor import TRACE_MARK, Tensor, wrap

from ..elementwise import result_of
from ..graph.ir import Graph, Node, TensorType, Var, rebuild
from ..graph.views import GETITEM, index_type, is_view, view_type
from .breaks import note_site
from .indexing import record_index
from .symbolic_tensor import SymbolicTensor, guarded_by

__all__ = ["TraceAbort", "Tracer", "is_tracing", "ExternalTensor"]

_K = DispatchKey


class TraceAbort(Exception):
    """Raised inside a trace when the function needs something only real data
    can answer; the compiled function catches it and runs the call eagerly."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _State(threading.local):
    tracer = None


_state = _State()


def is_tracing() -> bool:
    return _state.tracer is not None


class Tracer:
    """The state of one trace: the graph being built and the abort reason, if any."""

    shaped = False       # a ShapedTracer (shaped.py): its placeholders have the real sizes, readable
    # a forward trace (fallback.trace's; joint.py's replay, whose values never require grad): a
    # func transform's level differentiates its values (autodiff.py's ``attach``; ``detach()`` an
    # alias, symbolic_tensor.py); a whole step's walk (training/functionalize.py) sets False
    FORWARD = True

    def __init__(self):
        self.graph = Graph()
        self.aborted: str | None = None
        self.in_meta = 0     # >0 while eager kernels run on the placeholders: guards stand aside
        self.cuda_index = 0  # the device of CUDA placeholders: the first CUDA input's
        self.captured: dict[int, tuple] = {}   # id(real captured tensor) -> (tensor, value id, label)
        self.external: dict[int, tuple] = {}   # id(real tensor from outside) -> (tensor, label): guarded
        self.tainted: dict[int, str] = {}      # runtime scalar index -> what Python did with it
        self.scalars: list = []                # the runtime scalars handed to the function
        self.made: list = []                   # every symbolic tensor: unusable once the trace ends
        self.input_contiguous: dict[int, bool] = {}   # input value id -> its layout (part of the key)
        self.done = False

    def abort(self, reason: str):
        if not self.aborted:
            note_site()       # the user's line, for the graph break's warning (breaks.py)
        self.aborted = self.aborted or reason
        raise TraceAbort(self.aborted)

    def symbolic(self, ty: TensorType, vid: int) -> Tensor:
        if ty.device == "cuda":    # a CUDA placeholder: ops run for their meta launch CUDA kernels
            from dispatch_jit.cuda.array import empty
            t = wrap(empty((1,) * ty.ndim, ty.dtype.np, self.cuda_index))
        else:
            t = wrap(np.empty((1,) * ty.ndim, ty.dtype.np))
        t.__class__ = SymbolicTensor
        t.__dict__[TRACE_MARK] = (self, vid)
        self.made.append(t)
        return t

    def finish(self):
        """The trace is over: a symbolic tensor the function kept somewhere (a global list, an
        attribute) is a placeholder without data.  Its signature gets the Tracer key, so an op
        on it reaches ``tracer_fallback``, which raises, as its data reads do (``_guard``)."""
        self.done = True
        for t in self.made:
            t._sig |= _TRACER_SIG_BIT
        self.made = []

    def dense_only(self, t: Tensor) -> None:
        """Abort on a sparse tensor: the graph's values are strided arrays, and a sparse
        tensor's array is its values, not its matrix (a stand-in would answer ``shape``,
        ``numel`` and ``len`` with the values' count, and a fused loop would read the values
        as the matrix).  Its ops run eagerly, where the sparse kernels are."""
        if isinstance(t, SparseTensor):
            self.abort(f"a {t.layout} tensor reached the function: compiled plans hold strided "
                       f"tensors only, so its sparse kernels run eagerly")

    def add_input(self, t: Tensor) -> Tensor:
        self.dense_only(t)
        ty = _type_of(t)
        if ty.device == "cuda" and not any(self.graph.types[v].device == "cuda" for v in self.graph.inputs):
            self.cuda_index = t._data.device_index
        vid = self.graph.new_value(ty)
        self.graph.inputs.append(vid)
        self.input_contiguous[vid] = t.is_contiguous()
        return self.symbolic(ty, vid)

    def function_applied(self, name: str) -> None:
        """A ``dj.autograd.Function`` runs on traced tensors: its forward's ops are recorded, and
        the graph notes that its backward is not (``entries.grad_obstacle``)."""
        self.graph.functions.append(name)

    def contiguous(self, t: Tensor) -> Tensor:
        """``t.contiguous()`` as eager mode answers it: ``t`` itself where it is contiguous, else
        a recorded clone.  An input's layout is part of the cache key; an op's result (not a view)
        is a fresh contiguous array in eager mode; whether a view is contiguous depends on sizes
        and strides, which the trace does not know: abort."""
        vid = t.__dict__[TRACE_MARK][1]
        if vid in self.input_contiguous:
            return t if self.input_contiguous[vid] else t.clone()
        node = next((n for n in reversed(self.graph.nodes) if vid in n.outs), None)
        if node is None or is_view(node):
            self.abort("contiguous() of a traced view: whether it copies depends on sizes and strides, "
                       "which the trace does not see")
        return t

    def to_arg(self, x):
        """A call argument as the graph stores it: Var for tensors, constants otherwise."""
        if isinstance(x, Tensor):
            sym = x.__dict__.get(TRACE_MARK)
            if sym is not None:
                if sym[0] is not self:
                    self.abort("a tensor from another trace was used")
                return Var(sym[1])
            cap = self.captured.get(id(x))
            if cap is not None and cap[0] is x:      # read through an attribute chain or a container
                return Var(cap[1])
            self.dense_only(x)
            if x.requires_grad:
                return self.lift(x)
            vid = self.graph.new_value(_type_of(x))
            self.graph.nodes.append(Node("const", (), {}, (vid,), value=x))
            return Var(vid)
        if isinstance(x, (list, tuple)):
            return rebuild(x, (self.to_arg(y) for y in x))
        if isinstance(x, dict):
            return {k: self.to_arg(v) for k, v in x.items()}
        return x

    def lift(self, x: Tensor) -> Var:
        """A real tensor that requires grad, reached by identity (a model's parameter): an extra
        input of the graph (``graph.lifted``), so that the compiled backward differentiates with
        respect to it; the entry passes the same object at every call (owners.py guards it)."""
        vid = self.graph.new_value(_type_of(x))
        self.graph.inputs.append(vid)
        self.graph.lifted.append(x)
        self.input_contiguous[vid] = Tensor.is_contiguous(x)    # its layout is guarded (owners.py)
        self.captured[id(x)] = (x, vid, "a tensor that requires grad")
        return Var(vid)

    def record(self, op, args: tuple, kwargs: dict):
        if self.aborted:
            raise TraceAbort(self.aborted)
        self.in_meta += 1    # the dispatcher's own look at runtime scalars is not the function's
        try:
            return self._record(op, args, kwargs)
        finally:
            self.in_meta -= 1

    def _record(self, op, args: tuple, kwargs: dict):
        entry = op._entry
        for a, v in zip(entry.schema.arguments, args + tuple(kwargs.values())):
            if a.is_mutable and v is not None:
                self.abort(f"{entry.name} writes into its argument '{a.name}' "
                           f"(in-place ops and out= are not compiled yet)")
        # the decomposition eager mode runs (none where a backend kernel takes precedence)
        cia = entry.decomposition(_K.CUDA if any(isinstance(x, Tensor) and x.is_cuda for x in args) else _K.CPU)
        if cia is not None:
            # a decomposition: trace through it, so its pieces can fuse (and what it does with a
            # runtime scalar in Python is seen, as the function's own code is)
            self.in_meta -= 1
            try:
                return cia(*args, **kwargs)
            finally:
                self.in_meta += 1
        gargs, gkwargs = self.to_arg(tuple(args)), self.to_arg(dict(kwargs))
        node = Node(op, gargs, gkwargs, ())
        ty = result_of(node, self.graph.types)
        if ty is None:
            ty = self.view_type(op, gargs, gkwargs)
            if isinstance(ty, str):
                self.abort(ty)
        if ty is not None:
            types = [ty]
            single = True
        else:
            types, single = self._meta(op, args, kwargs)
        node.outs = tuple(self.graph.new_value(t) for t in types)
        self.graph.nodes.append(node)
        outs = [self.symbolic(t, v) for t, v in zip(types, node.outs)]
        if single:
            return outs[0]
        named = return_types.of(entry.schema)    # topk(...).values, as eager's
        return tuple(outs) if named is None else named(*outs)

    def view_type(self, op, gargs: tuple, gkwargs: dict):
        """A view's output type from its shape rule (graph/views.py), a string if the sizes decide it."""
        return view_type(op, gargs, gkwargs, self.graph.types)

    def record_getitem(self, t: Tensor, index):
        """``t[index]`` with a basic index: a ``getitem`` node (views.py); anything else aborts."""
        if self.aborted:
            raise TraceAbort(self.aborted)
        src = self.to_arg(t)
        norm, ty = index_type(index, self.graph.types[src.id])
        if norm is None:    # not basic: a view and one aten::index (indexing.py), or abort with ty
            return record_index(self, t, index, ty)
        index = norm
        vid = self.graph.new_value(ty)
        self.graph.nodes.append(Node(GETITEM, (src, index), {}, (vid,)))
        return self.symbolic(ty, vid)

    def _meta(self, op, args, kwargs):
        self.in_meta += 1
        try:
            # the op's meta function, its kernel at the Meta key, says the output types without
            # reading data: the losses of kernels/nn (whose CPU kernels would read the placeholders'
            # garbage as class indices), topk, a custom op's register_fake.  Only an op without one
            # runs on the placeholders, whose garbage makes overflow warnings that mean nothing.
            meta = op._entry.kernels.get(_K.Meta)
            run = meta.fn if meta is not None else op
            if self.captured and not self.shaped:
                args, kwargs = self._stand_in(args, False), self._stand_in(kwargs, False)
            with ExcludeDispatchKeyGuard(_K.Tracer), np.errstate(all="ignore"):
                try:
                    out = run(*args, **kwargs)
                except Exception:
                    if self.shaped:
                        raise
                    # a constant's real sizes may not fit the size-1 placeholders: types only, then
                    out = run(*self._stand_in(args, True), **self._stand_in(kwargs, True))
        except TraceAbort:
            raise
        except Exception as e:   # placeholders have size 1: a size-dependent op may fail on them
            self.abort(f"{op.name()}: no meta function (a kernel at the Meta key; a custom op gets one with "
                       f"register_fake), and running it on placeholders failed ({type(e).__name__}: {e})")
        finally:
            self.in_meta -= 1
        self.last_meta = out     # a ShapedTracer reads the result's sizes
        if isinstance(out, Tensor):
            return [_type_of(out)], True
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, Tensor) for o in out):
            return [_type_of(o) for o in out], False
        self.abort(f"{op.name()} returned {type(out).__name__}, which tracing does not handle")


    def _stand_in(self, x, consts: bool):
        """``x`` with each real tensor that is a graph input (captured, lifted; with ``consts``,
        every real tensor) replaced by a size-1 placeholder of its type, like the symbolic
        tensors': an op run on placeholders for its output type must not mix them with real
        sizes (``linear(x, model.weight)``)."""
        if isinstance(x, Tensor):
            if TRACE_MARK in x.__dict__:
                return x
            cap = self.captured.get(id(x))
            if cap is not None and cap[0] is x:
                return self.symbolic(_type_of(x), cap[1])
            return self.symbolic(_type_of(x), -1) if consts else x
        if isinstance(x, (list, tuple)):
            return rebuild(x, (self._stand_in(y, consts) for y in x))
        if isinstance(x, dict):
            return {k: self._stand_in(v, consts) for k, v in x.items()}
        return x


def _type_of(t: Tensor) -> TensorType:
    return TensorType(t.dtype, t.ndim, "cuda" if t.is_cuda else "cpu")


_TRACER_SIG_BIT = keyset_sig_bits(key_bits(_K.Tracer))


# -- real tensors from outside the function: the same guards, while a trace runs ----------------
# A tensor the function reaches through an attribute chain or a container (``self.w``, ``LIST[0]``),
# or a default argument value, is the real tensor, not a stand-in: the trace finds it by identity.
# Its data and sizes can change between calls (in place, or rebound to another tensor of the same
# signature), so whatever reads them while tracing must abort, as for a symbolic tensor.  For the
# length of a trace such a tensor's class is ``ExternalTensor``, whose guards abort only in a
# thread that is tracing (elsewhere they are Tensor's methods, and ``isinstance`` still holds).
def _external_reason(self, reason: str) -> str:
    tr = _state.tracer
    label = tr.external.get(id(self), (None, "a tensor the function did not receive as an argument"))[1]
    return (f"{reason.replace('a traced tensor', 'a captured tensor')}: {label} is read anew at every call, "
            f"so its data and sizes can change between calls and a trace must not use them")


def _external_check(self, name, reason, prop):
    tr = _state.tracer
    if tr.__class__ is Tracer and not tr.in_meta:
        tr.abort(_external_reason(self, reason))


@guarded_by(_external_check)
class ExternalTensor(Tensor):
    """A real tensor from outside the function, for the length of a trace (see above)."""

    __slots__ = ()

    def to(self, *args, **kwargs):
        tr = _state.tracer
        if tr.__class__ is Tracer and not tr.in_meta:
            dev = kwargs.get("device")
            for a in args:
                if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda", "meta") or type(a).__name__ == "device":
                    dev = a
            if dev is not None and self.device != dev:
                tr.abort(_external_reason(self, f"moving a captured tensor to {dev} copies its data"))
        return Tensor.to(self, *args, **kwargs)

    def __getitem__(self, index):
        tr = _state.tracer
        if tr.__class__ is Tracer and not tr.in_meta:      # a view of it: recorded, so it stays an input
            return tr.record_getitem(self, index)
        return Tensor.__getitem__(self, index)


_external_lock = threading.Lock()
_external_count: dict[int, list] = {}    # id -> [tensor, traces guarding it]: traces may overlap


class _GuardExternal:
    """Make ``tensors`` ExternalTensors while a trace runs (plain Tensors only: a subclass keeps
    its class, and a pending lazy tensor is computed first, which makes it a plain Tensor)."""

    def __init__(self, tensors):
        self.tensors = tensors

    def __enter__(self):
        for t in self.tensors:
            if t.__class__ is not Tensor and t.__class__ is not ExternalTensor:
                t._data                    # noqa: B018  (a LazyTensor: reading it computes it)
        with _external_lock:
            self.held = []
            for t in self.tensors:
                c = _external_count.get(id(t))
                if c is not None and c[0] is t:
                    c[1] += 1
                elif t.__class__ is Tensor:
                    t.__class__ = ExternalTensor
                    _external_count[id(t)] = [t, 1]
                else:
                    continue
                self.held.append(t)

    def __exit__(self, *exc):
        with _external_lock:
            for t in self.held:
                c = _external_count[id(t)]
                c[1] -= 1
                if not c[1]:
                    del _external_count[id(t)]
                    t.__class__ = Tensor


