"""The recorded graph: nodes (``grad_fn``), edges, saved tensors.

A ``Node`` is created by the Autograd kernel for each differentiable call
whose inputs require grad.  It holds the backward formula from the
derivative table, the tensors the formula needs (as ``SavedTensor``, with the
version they had when saved), and one edge per differentiable input: the
input's own ``grad_fn`` or, for a leaf, its ``AccumulateGrad`` node.
"""

from __future__ import annotations

import threading
import types
import weakref

from ..errors import AutogradError
from ..keys import DispatchKey, key_bits
from ..signature import keyset_sig_bits
from ..tensor import Tensor, bump_version, version_box as _version_box, version_of
from .hooks import RemovableHandle, bump_epoch

__all__ = ["Node", "AccumulateGrad", "SavedTensor", "node_class", "edge_of", "mark_output", "version_of",
           "bump_version", "freed_error"]

_AG_CPU = keyset_sig_bits(key_bits(DispatchKey.AutogradCPU))     # in a tensor signature
_AG_CUDA = keyset_sig_bits(key_bits(DispatchKey.AutogradCUDA))
_CUDA_KS = keyset_sig_bits(key_bits(DispatchKey.CUDA))


class SavedTensor:
    """A tensor saved for backward, with the version it had then.

    An op's own output is saved without its grad_fn (that would be a cycle,
    output -> node -> output); unpacking re-attaches the node, as PyTorch's
    SavedVariable does."""

    __slots__ = ("data_tensor", "version", "box", "is_output", "name")

    def __init__(self, t, is_output: bool = False, name: str = ""):
        self.box = _version_box(t)
        self.version = self.box[0]
        self.is_output = is_output
        self.name = name
        self.data_tensor = _output_data(t, self.box) if is_output else t

    def unpack(self, node):
        if self.box[0] != self.version:
            t = self.data_tensor
            raise AutogradError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{t.dtype.name} {list(t.shape)}] ({self.name or 'a saved tensor'} of "
                f"{node.name()}) is at version {self.box[0]}; expected version {self.version} instead. "
                f"Clone the tensor before modifying it in place (x = x.clone()), or do the in-place "
                f"operation out of place.")
        t = self.data_tensor
        if self.is_output and t.requires_grad and t.grad_fn is None:
            t.grad_fn = node
        return t


def _output_data(t, box):
    """An op's output as saved: its data and version counter, without its grad_fn (no cycle).
    A tensor whose data is still to be computed (compiled mode's pending tensors) makes its own
    saved twin (``_saved_twin``), which gets the same data once it is computed."""
    if t.__class__ is not Tensor:
        twin = getattr(t, "_saved_twin", None)
        d = twin(box) if twin is not None else None
        if d is not None:
            return d
    d = _new(Tensor)
    d._data, d._sig = t._data, t._sig
    dd = d.__dict__
    dd["_vc"] = box
    dd["requires_grad"] = t.requires_grad
    return d


_new = object.__new__


def freed_error(node) -> AutogradError:
    """What running ``node`` after a backward freed what it saved raises."""
    return AutogradError(
        f"Trying to backward through the graph a second time (or directly access saved tensors "
        f"after they have already been freed) in {node.name()}. Saved intermediate values of the "
        f"graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True "
        f"if you need to backward through the graph a second time.")


class Node:
    """One recorded call.  ``next_functions``: per differentiable input, the
    (node, output index) its gradient flows to, or None.  ``saved``: what the
    formula reads (SavedTensor, or a number passed for a Tensor argument);
    None once freed."""

    # A node is made on every differentiable call: keep construction to a few
    # stores (hooks and metadata are rare and default at class level).
    __slots__ = ("next_functions", "saved", "ctx", "_released", "__dict__", "__weakref__")
    # read-only defaults: assign a fresh dict to change them on one node
    pre_hooks = types.MappingProxyType({})
    metadata = types.MappingProxyType({})
    # per-op node classes (see node_class(..., formula=...)) carry these at class level
    formula = None
    op_name = ""

    def __init__(self, formula, next_functions, saved: dict, ctx: dict, op_name: str):
        self.formula = formula
        self.next_functions = next_functions
        self.saved = saved
        self.ctx = ctx
        self.op_name = op_name

    @property
    def released(self) -> bool:
        """True once a backward without retain_graph has run through the node (a slot set then,
        not a default: nodes are made without __init__)."""
        return getattr(self, "_released", False)

    @property
    def needs_input_grad(self) -> tuple:
        return tuple([e is not None for e in self.next_functions])

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: tuple) -> tuple:
        saved = self.saved
        if saved is None:
            raise freed_error(self)
        if saved:
            saved = {k: v.unpack(self) if isinstance(v, SavedTensor) else v for k, v in saved.items()}
        return self.formula(grads, saved, self.ctx, self.needs_input_grad)

    def release(self) -> None:
        """Free what the node saved for backward (a backward without retain_graph).

        As in PyTorch, only a node that saved something can no longer run: one
        that saved nothing (add, sum, a view) is run again by a second backward.
        (The engine inlines this.)"""
        self._released = True
        if self.saved:
            self.saved = None

    def register_prehook(self, output_nr: int, fn) -> RemovableHandle:
        """Call ``fn(grad)`` on the gradient of output ``output_nr`` before the node runs."""
        if "pre_hooks" not in self.__dict__:
            self.pre_hooks = {}
        hooks = self.pre_hooks
        hooks.setdefault(output_nr, []).append(fn)

        def undo():
            lst = hooks.get(output_nr, [])
            for i, h in enumerate(lst):
                if h is fn:
                    del lst[i]
                    break
            if not lst:
                hooks.pop(output_nr, None)     # no hooks left: the engine's fast paths apply again
        return RemovableHandle(undo)

    def __repr__(self) -> str:
        return f"<{self.name()}>"


class AccumulateGrad(Node):
    """The node that ends every path at a leaf: adds the gradient into ``.grad``.  Its ``lock``
    is held while it does (PyTorch's AccumulateGrad mutex): backward passes in several threads
    through one graph each read ``.grad`` and store the sum, and must not lose each other's."""

    __slots__ = ("variable", "lock")

    def __init__(self, variable):
        super().__init__(None, (), {}, {}, "AccumulateGrad")
        self.metadata = {"num_outputs": 1}
        # weak: the tensor owns its accumulator, not the other way round
        self.variable = weakref.ref(variable)
        self.lock = threading.Lock()

    def apply(self, grads: tuple) -> tuple:
        return ()

    def register_prehook(self, output_nr: int, fn) -> RemovableHandle:
        # a compiled training step accumulates into leaves itself: its plans must see this
        # (hooks.py: the epoch they are checked against)
        handle = super().register_prehook(output_nr, fn)
        bump_epoch()
        return handle


_NODE_CLASSES: dict[str, type] = {}


def node_class(name: str, formula=None, op_name: str = "") -> type:
    """A Node subclass named after the backward formula, so that ``grad_fn`` reads
    ``<MulBackward>``.  With ``formula``, a class of its own that carries the
    formula and op name, so making a node costs three stores."""
    if formula is not None:
        return type(name, (Node,), {"formula": staticmethod(formula), "op_name": op_name})
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (Node,), {})
    return cls


def edge_of(t):
    """Where the gradient of ``t`` goes: (its grad_fn, output index), or its leaf accumulator."""
    if t is None or not getattr(t, "requires_grad", False):
        return None
    fn = t.grad_fn
    d = t.__dict__
    if fn is not None:
        return (fn, d.get("_output_nr", 0))
    # a leaf's edge never changes: make its accumulator and the edge tuple once
    e = d.get("_leaf_edge")
    if e is None:
        # setdefault is atomic: threads recording at once share one accumulator (and its lock)
        e = d.setdefault("_leaf_edge", (AccumulateGrad(t), 0))
    return e


def mark_output(out, node, output_nr: int = 0):
    """Make ``out`` the ``output_nr``-th output of ``node``: it requires grad, and its
    signature carries the autograd key of its device."""
    out.__dict__["requires_grad"] = True
    out.grad_fn = node
    if output_nr:
        out.__dict__["_output_nr"] = output_nr
    out._sig |= _AG_CUDA if out._sig & _CUDA_KS else _AG_CPU
