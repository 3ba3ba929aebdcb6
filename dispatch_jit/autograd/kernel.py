"""The Autograd kernels: wrapper kernels that record a Node and redispatch.

``AutogradKernel`` is registered at the Autograd alias key of every
differentiable operator, with that operator's entry of the derivative table.
It specializes on the call once (which arguments are tensors, which are
saved, which node class), so a call on tensors that require grad costs one
redispatch to the backend kernel plus the bookkeeping of one Node; the
recorder and the node's backward are generated per signature (codegen.py).
The in-place operators' Autograd kernel is in inplace.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..dtypes import ALL_DTYPES
from ..errors import AutogradError
from ..keys import DispatchKey, key_bits
from ..broadcast import broadcast_shapes
from ..signature import DTYPE_MASK, DTYPE_SHIFT
from ..tensor import Tensor as _T
from .graph import _AG_CPU, _AG_CUDA  # the autograd keys' bits in a tensor signature
from . import codegen
from .graph import SavedTensor, edge_of, mark_output, node_class

__all__ = ["Derivative", "Grad", "AutogradKernel", "mark_output", "sum_to", "grad_to_shape", "layout",
           "meta_requires_grad"]

# dtype indices whose tensors can carry gradients (floating and complex)
_DIFFERENTIABLE = frozenset(d.index for d in ALL_DTYPES if d.category >= 2)


@dataclass(frozen=True)
class Grad:
    """The gradient of one input, as a line of PyTorch's derivatives.yaml: ``fn(g, saved,
    ctx)`` returns it, and ``reads`` names the saved values it uses."""

    fn: Callable
    reads: tuple = ()


@dataclass(frozen=True)
class Derivative:
    """One row of the derivative table.

    ``backward`` is either one formula, ``backward(g, saved, ctx)`` returning one
    gradient per tensor input (None where there is none), which reads the inputs
    named in ``save`` (``"result"`` is the output); or one ``Grad`` per tensor
    input.  With ``Grad`` rows a node saves only what the gradients of the inputs that
    require grad read, and computes only those, as PyTorch does (``x * 2.0``
    saves the 2.0, not ``x``).  ``ctx`` gets the static arguments and each input's
    shape and dtype.  Gradients are summed back over broadcast dimensions and cast
    to each input's dtype by the kernel, not by every formula.
    """

    name: str                      # node class name, e.g. "MulBackward"
    backward: Callable | tuple
    save: tuple = ()
    unbroadcast: bool = True
    extra: dict = field(default_factory=dict)

    def saves_for(self, needs) -> tuple:
        """The names a node saves when the inputs flagged in ``needs`` require grad."""
        if not isinstance(self.backward, tuple):
            return self.save
        names: list = []
        for grad, need in zip(self.backward, needs):
            if need:
                names += [n for n in grad.reads if n not in names]
        return tuple(names)


def sum_to(g, shape: tuple):
    """Sum ``g`` down to ``shape`` (undoing broadcasting), with dispatch_jit ops."""
    gs = tuple(g.shape)
    if gs == tuple(shape):
        return g
    lead = len(gs) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and gs[i + lead] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if lead:
        g = g.reshape(tuple(shape))
    return g


def grad_to_shape(g, shape: tuple, who: str, what: str):
    """A user-supplied gradient for ``what`` (an input of ``shape``): equal, or
    broadcast from it (then summed back, as PyTorch does); anything else is an
    error naming ``who`` returned it."""
    if tuple(g.shape) == shape:
        return g
    try:
        ok = broadcast_shapes(shape, tuple(g.shape)) == tuple(g.shape)
    except ValueError:
        ok = False
    if not ok:
        raise AutogradError(f"{who} returned an invalid gradient for {what}: shape {tuple(g.shape)} for "
                            f"{what} of shape {shape}; the shapes must match")
    return sum_to(g, shape)


def _make_formula(d: Derivative):
    """The node formula of one derivative row: shared by all its nodes (no
    per-call closure); per-call facts (input shapes, dtypes) live in ctx."""
    per_input = d.backward if isinstance(d.backward, tuple) else None

    def formula(grads, saved, ctx, needs):
        if per_input is not None:
            g = grads[0]
            res = tuple([grad.fn(g, saved, ctx) if need else None for grad, need in zip(per_input, needs)])
        else:
            res = d.backward(grads[0], saved, ctx)
            if not isinstance(res, tuple):
                res = (res,)
        out = []
        for g, shape, dti, need in zip(res, ctx["shapes"], ctx["dtypes"], needs):
            if g is None or not need or shape is None:
                out.append(None)
                continue
            if d.unbroadcast and g.shape != shape:
                g = sum_to(g, shape)
            if dti is not None and g._sig >> DTYPE_SHIFT & DTYPE_MASK != dti:
                g = g.to(ALL_DTYPES[dti])
            out.append(g)
        return tuple(out)
    return formula


class AutogradKernel:
    """Records ``derivative`` for calls whose tensor inputs require grad."""

    def __init__(self, derivative: Derivative):
        self.d = derivative
        self.__name__ = f"autograd_{derivative.name}"
        self.node_cls = node_class(derivative.name)
        self.formula = _make_formula(derivative)
        # (which inputs require grad, the layout's names) -> what attach saves: (name, position) of each
        # saved input, whether the result is saved (and the names, which keeps their id unique)
        self._saving: dict = {}

    def attach(self, lay: tuple, opname: str, args: tuple, out, dense: tuple = (_T,)):
        """Record the node of one call whose result ``out`` is computed (or pending): what the
        kernel does after running the op below autograd.  ``lay``: the op's ``layout``;
        ``dense``: the classes of tensors that can require grad here (compiled mode adds its
        pending tensors, whose shape is read without computing them).  Returns ``out``."""
        tensor_pos, list_pos, _, names, statics = lay
        # plain loops, not generator expressions: this runs on every recorded call
        tensors = list(args[list_pos[0]]) if list_pos else [args[i] for i in tensor_pos]
        edges = []
        record = False
        for t in tensors:
            if t is out:
                return out      # the op returned an input itself (x.to(x.dtype)): nothing to record
            if t.__class__ in dense and t.requires_grad:
                edges.append(edge_of(t))
                record = True
            else:
                edges.append(None)
        if not record or (out._sig >> DTYPE_SHIFT) & DTYPE_MASK not in _DIFFERENTIABLE:
            return out
        saving = self.saving(tuple([e is not None for e in edges]), names)
        saved = {}
        for n, i in saving[0]:
            v = args[i]
            saved[n] = SavedTensor(v, name=n) if v.__class__ in dense else v
        ctx = {}
        for n, i in statics:
            ctx[n] = args[i]
        shapes, dtypes = [], []
        for t in tensors:
            if t.__class__ is _T:
                shapes.append(t._data.shape)
                dtypes.append((t._sig >> DTYPE_SHIFT) & DTYPE_MASK)
            elif t.__class__ in dense:
                shapes.append(tuple(t.shape))
                dtypes.append((t._sig >> DTYPE_SHIFT) & DTYPE_MASK)
            else:
                shapes.append(None)
                dtypes.append(None)
        ctx["shapes"], ctx["dtypes"] = shapes, dtypes
        mark_output(out, self.node_cls(self.formula, tuple(edges), saved, ctx, opname))
        if saving[1]:
            # saved after mark_output: the saved output must require grad (and carry the
            # autograd key), or a double backward (create_graph=True) treats it as a constant
            saved["result"] = SavedTensor(out, is_output=True, name="result")
        return out

    def saving(self, needs: tuple, names: list) -> tuple:
        """What a call whose inputs require grad as ``needs`` says saves: ((name, position) of each
        saved input, whether the result is saved, ``names``: the layout's argument names, kept so
        that their id stays unique), cached per needs and layout."""
        key = (needs, id(names))
        s = self._saving.get(key)
        if s is None:
            save = self.d.saves_for(needs)
            s = self._saving[key] = ([(n, names.index(n)) for n in save if n != "result"], "result" in save, names)
        return s

    def specialize(self, call):
        return self.recorder(call, call.redispatch())

    def recorder(self, call, below, pending=None, slow=None):
        """The kernel of one call signature: ``below`` runs the op under autograd, and the
        generated recorder records the node of exactly that signature.  ``pending``: compiled
        mode's class of pending tensors, for the recorder of its Tracer key, whose ``below``
        records the op (None: it did not, and ``slow`` runs the call instead); their shapes
        are read without computing them, and an output saved for backward is saved as its twin."""
        lay = layout(call.op.schema)
        tensor_pos, list_pos, out_pos, names, statics = lay
        d, node_cls, opname, formula = self.d, self.node_cls, call.op.name, self.formula
        attach = self.attach

        def run(*args):
            if out_pos is not None and args[out_pos] is not None:
                raise AutogradError(f"{opname}: functions with out=... arguments don't support automatic "
                                    f"differentiation; call it without out= (or under dj.no_grad())")
            return attach(lay, opname, args, below(*args))
        if list_pos:
            return run if pending is None else slow
        # Which inputs require grad is part of each tensor's signature, so of this specialization:
        # the generated code records exactly those edges, with no per-call checks.
        needs = [meta_requires_grad(call.metas[i]) for i in tensor_pos]
        save_pos, save_result, _ = self.saving(tuple(needs), names)
        ag_bits = _AG_CUDA if any(call.metas[i].device != "cpu" for i in tensor_pos
                                  if call.metas[i].kind == "tensor") else _AG_CPU
        dense_dtypes = [call.metas[i].dtype.index if call.metas[i].kind == "tensor"
                        and call.metas[i].keyset & _DENSE_KS else None for i in tensor_pos]
        # the nodes of this signature: a class of their own, whose apply is generated for it too
        sig_node = node_class(node_cls.__name__, formula, opname)
        saved_names = [n for n, _ in save_pos] + (["result"] if save_result else [])
        sig_node.apply = codegen.node_apply(d.backward, d.unbroadcast, needs, dense_dtypes, saved_names, sum_to,
                                            ALL_DTYPES.__getitem__, opname)
        return codegen.recorder(len(names), tensor_pos, out_pos, statics, save_pos, save_result, below,
                                run if pending is None else slow, sig_node, opname, needs, ag_bits, dense_dtypes,
                                _DIFFERENTIABLE, pending)


def layout(schema) -> tuple:
    """Where an op's arguments are, as its Autograd kernel reads them: (positions of its tensor
    arguments, of its tensor-list argument, of ``out`` or None, the argument names, (name,
    position) of each static argument)."""
    args_schema = schema.arguments
    tensor_pos = [i for i, a in enumerate(args_schema) if a.type.is_tensor_like and a.name != "out"
                  and not a.type.is_list]
    list_pos = [i for i, a in enumerate(args_schema) if a.type.is_list and a.type.is_tensor_like]
    out_pos = next((i for i, a in enumerate(args_schema) if a.name == "out"), None)
    names = [a.name for a in args_schema]
    statics = [(names[i], i) for i, a in enumerate(args_schema) if not a.type.is_tensor_like]
    return tensor_pos, list_pos, out_pos, names, statics


_DENSE_KS = key_bits(DispatchKey.CPU, DispatchKey.CUDA, DispatchKey.Batched)   # Batched: vmap's per-example view
_AG_KS = key_bits(DispatchKey.AutogradCPU, DispatchKey.AutogradCUDA)


def meta_requires_grad(meta) -> bool:
    """A plain (dense) tensor argument whose signature carries an Autograd key: it requires grad."""
    return meta.kind == "tensor" and bool(meta.keyset & _AG_KS) and bool(meta.keyset & _DENSE_KS)
