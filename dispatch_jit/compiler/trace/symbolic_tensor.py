"""The tensors a trace hands the function (``SymbolicTensor``: a size-1 placeholder of the right
dtype and ndim) and the table of reads that need real data, whose guards abort the trace
(``_GUARDED``, ``_GUARDED_PROPS``; symbolic.py's ``ExternalTensor`` and training/functionalize.py's
``StepTensor`` install the same guards).  Its methods reach the tracer that made it only through
the tensor (``TRACE_MARK``: the tracer and the value id), so this module does not import the
``Tracer`` (symbolic.py imports it)."""

from __future__ import annotations

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.errors import EscapedTensorError
from dispatch_jit.tensor import TRACE_MARK, Tensor

from .indexing import traced_setitem

__all__ = ["SymbolicTensor", "STEP_REASONS", "SIZE_REASONS", "DETACH_WITH_GRAD"]


def _escaped(what: str):
    raise EscapedTensorError(
        f"{what} a tensor made while dj.compile traced a function, which the function kept outside "
        f"itself (in a global, an attribute or a container): it is a placeholder without data. Return "
        f"it from the function instead (a trace stores it only once, not at every call)")


# -- what needs data aborts the trace ------------------------------------------------------
_GUARDED = {
    "__bool__": "bool() of a traced tensor (data-dependent control flow)",
    "item": "Tensor.item() reads data", "tolist": "Tensor.tolist() reads data",
    "numpy": "Tensor.numpy() exposes data", "__array__": "conversion to a NumPy array",
    "__float__": "float() of a traced tensor", "__int__": "int() of a traced tensor",
    "__index__": "a traced tensor used as an index", "__complex__": "complex() of a traced tensor",
    "__len__": "len() depends on sizes", "__iter__": "iteration depends on sizes",
    # printing shows data: a placeholder's would be bogus (str() and format() go through __repr__)
    "__repr__": "repr()/print() of a traced tensor shows its data",
    "__str__": "str()/print() of a traced tensor shows its data",
    "__reduce_ex__": "pickling or copying a traced tensor reads its data",
    "is_contiguous": "Tensor.is_contiguous() depends on sizes and strides (a placeholder's would be bogus)",
    "size": "Tensor.size() depends on sizes", "numel": "Tensor.numel() depends on sizes",
    "stride": "Tensor.stride() depends on sizes", "detach": "detach() is not traced yet",
    "requires_grad_": "requires_grad_() inside a compiled function",
    # a whole training step (forward, backward, update): traced again by training/functionalize.py (STEP_REASONS)
    "backward": "the function calls backward() (a whole training step: traced as one, training/whole_step.py)",
}
# the aborts after which dj.compile traces the call as a whole training step (training/functionalize.py)
STEP_REASONS = frozenset({_GUARDED["backward"], "the function calls an optimizer's step() or zero_grad() "
                                                "(a whole training step: traced as one, training/whole_step.py)"})
_GUARDED_PROPS = {"shape": "Tensor.shape depends on sizes (sizes are not part of the cache key)",
                  "strides": "Tensor.strides depends on sizes",
                  "__cuda_array_interface__": "__cuda_array_interface__ exposes data"}


def _install_guards(cls, check) -> None:
    """Every data or size read of ``cls`` (_GUARDED methods, _GUARDED_PROPS properties) guarded:
    ``check(tensor, name, reason, prop)`` runs first (it aborts the trace where the read needs
    data), then Tensor's own method or property.  A read the class defines in its own body is
    left as it is (that method does its own check)."""
    for name, reason in _GUARDED.items():
        if name not in cls.__dict__:
            setattr(cls, name, _method_guard(name, reason, check))
    for name, reason in _GUARDED_PROPS.items():
        if name not in cls.__dict__:
            setattr(cls, name, _prop_guard(name, reason, check))


def guarded_by(check):
    """Class decorator: ``_install_guards(cls, check)``, where a reader of the class sees it."""
    def install(cls):
        _install_guards(cls, check)
        return cls
    return install


def _method_guard(name, reason, check):
    def guarded(self, *args, **kwargs):
        check(self, name, reason, False)
        return getattr(Tensor, name)(self, *args, **kwargs)
    guarded.__name__ = name
    return guarded


def _prop_guard(name, reason, check):
    def get(self):
        check(self, name, reason, True)
        return Tensor.__dict__[name].fget(self)
    return property(get)


# size reads a ShapedTracer answers (its sizes are those of the call it was made for)
_SIZE_READS = frozenset({"shape", "size", "numel", "__len__"})
# the aborts after which dj.compile traces again with the call's sizes in its key (api.py)
SIZE_REASONS = frozenset({_GUARDED_PROPS["shape"], _GUARDED["size"], _GUARDED["numel"], _GUARDED["__len__"]})


def _symbolic_check(self, name, reason, prop):
    sym = self.__dict__.get(TRACE_MARK)
    if sym is None:
        return
    if sym[0].done:
        _escaped(f"{name} of" if prop else f"{name}() of")
    if not sym[0].in_meta and not (name in _SIZE_READS and sym[0].shaped):
        sym[0].abort(reason)


DETACH_WITH_GRAD = ("detach() in a compiled call whose inputs require grad (the compiled backward would "
                    "differentiate through it)")


def _alias(tr, t):
    """A new symbolic tensor for ``t``'s value (no node: the graph's values are immutable)."""
    vid = t.__dict__[TRACE_MARK][1]
    a = tr.symbolic(tr.graph.types[vid], vid)
    if tr.shaped:
        tr.place(a, tr.shapes[vid])
    return a


@guarded_by(_symbolic_check)
class SymbolicTensor(Tensor):
    """A tensor inside a trace: a size-1 placeholder of the right dtype and ndim.

    Whatever would read its data or sizes aborts the trace (the call then runs
    eagerly); the guards are this class's own methods (the table's reads generated
    by ``guarded_by``, the rest below), so tracing changes nothing for ordinary
    tensors, in this thread or any other.  While eager kernels run on the
    placeholders to learn output types (``in_meta``), the guards stand aside."""

    __slots__ = ()

    # an advanced index: functionalized (indexing.py)
    __setitem__ = traced_setitem

    def to(self, *args, **kwargs):
        """``to(dtype)`` traces (aten::to.dtype); a move to another device is not an op: abort."""
        sym = self.__dict__.get(TRACE_MARK)
        if sym is not None and not sym[0].in_meta:
            dev = kwargs.get("device")
            for a in args:
                if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda", "meta") or type(a).__name__ == "device":
                    dev = a
            if dev is not None and self.device != dev:
                sym[0].abort(f"moving a traced tensor to {dev} is not traced (device copies run eagerly)")
        return Tensor.to(self, *args, **kwargs)

    def contiguous(self):
        sym = self.__dict__.get(TRACE_MARK)
        if sym is not None and not sym[0].in_meta:
            return sym[0].contiguous(self)
        return Tensor.contiguous(self)

    def __getitem__(self, index):
        """Basic indexing (a view) is recorded; advanced indexing aborts the trace, or is recorded
        as a view and one aten::index (indexing.py)."""
        sym = self.__dict__.get(TRACE_MARK)
        if sym is not None and not sym[0].in_meta:
            if not sym[0].done and self.__dict__.get("requires_grad") and is_grad_enabled():
                # recorded as a getitem node, not an op: no Autograd kernel would see it
                sym[0].abort("indexing (t[...]) of a value that requires grad inside dj.func.grad/vjp "
                             "is not traced yet")
            return sym[0].record_getitem(self, index)
        return Tensor.__getitem__(self, index)

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """``loss.backward()`` in a whole-step trace (training/functionalize.py, a tracer with a
        ``backward``) is its backward; elsewhere it aborts."""
        sym = self.__dict__.get(TRACE_MARK)
        if sym is not None and not sym[0].done and not sym[0].in_meta and hasattr(sym[0], "backward"):
            return sym[0].backward(self, gradient, retain_graph, create_graph)
        _symbolic_check(self, "backward", _GUARDED["backward"], False)
        return Tensor.backward(self, gradient, retain_graph, create_graph)

    def detach(self):
        """``detach()`` in a forward trace (``Tracer.FORWARD``): the same value, cut from the
        autograd graph that a transform's level runs on traced values (its ``_lift``/``_lower``,
        or the user's own; autodiff.py).  The graph has no node for it, so where the compiled
        call itself is differentiated (an input that requires grad: joint.py's walk, a whole
        step's) it still aborts."""
        sym = self.__dict__.get(TRACE_MARK)
        if sym is None or sym[0].done or sym[0].in_meta or not sym[0].FORWARD:
            _symbolic_check(self, "detach", _GUARDED["detach"], False)
            return Tensor.detach(self)
        tr = sym[0]
        if tr.__dict__.get("grad_inputs") or tr.graph.lifted:
            tr.abort(DETACH_WITH_GRAD)
        tr.detached = True
        a = _alias(tr, self)
        a.__dict__["_detached"] = True
        return a

    def _saved_twin(self, box):
        """An op's symbolic output as its autograd node saves it (autograd/graph.py
        ``_output_data``): the same value, without the grad_fn."""
        sym = self.__dict__.get(TRACE_MARK)
        if sym is None or sym[0].done:
            return None
        d = _alias(sym[0], self)
        d._sig = self._sig
        d.__dict__["_vc"] = box
        d.__dict__["requires_grad"] = self.requires_grad
        return d
