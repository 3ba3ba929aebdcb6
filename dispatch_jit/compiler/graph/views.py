"""Views in compiled mode: how they are traced, and the pass that sinks them
out of fused chains so that one loop computes the whole chain.

A view (an op tagged ``dj.Tag.view``: permute, transpose, expand, squeeze,
unsqueeze, reshape, view, flatten, narrow, a user's view op with a shape
rule; basic indexing ``t[1:, ::2, None, 0]``) moves no data: it is new
strides over the same buffer.  Elementwise ops commute with views: for an
elementwise tree ``y = E(x1, ..., xk)`` whose output shape is ``S`` (the
broadcast of the leaves' shapes),

    V(E(x1, ..., xk)) == E(V(expand(x1, S)), ..., V(expand(xk, S)))

exactly, for every view ``V``: ``expand`` is itself a view (stride 0), and
an elementwise op computes each element from the same-position elements of
its operands.  ``sink_views`` applies that identity to a view of a
single-use elementwise chain whose result feeds more elementwise work (or a
reduction): the view moves onto the chain's leaves, which are inputs,
constants or materialized values, and the chain becomes part of the same
fused region as its consumers.  At call time a ``ViewOp`` step builds the
leaves' views as zero-copy NumPy strided views, and the region's loop reads
them with their strides (the "index arithmetic"); the common shape ``S`` is
only computed when the leaves' shapes differ, and a broadcast leaf becomes a
stride-0 view.  Only views tagged ``view_may_copy`` (``reshape``/``flatten``) copy, where NumPy must
(strides that cannot express the new shape: a non-contiguous or broadcast
leaf); the step counts that and ``explain()`` says so.

What does not sink: a view of a value that other nodes also read (the value
is materialized anyway), a view whose result is only returned (materializing
the chain in its own layout and returning a view of it is the cheaper
order), views on CUDA values, a rewrite that would change a dtype (a view
to 0-d turns "dimensioned" operands into 0-d ones, which promote
differently): those stay eager steps, as before.

Tracing and the global compiled mode type a view without running it: each
view op's shape rule (kernels/shape/op.py, the registry's ``shape_fn``; the
same rule checks the eager kernel's arguments) gives its output shape.  The
tracer asks with every size unknown (sizes are not part of a trace) and
reads the rank; a view whose rank depends on the sizes (``squeeze``) aborts
the trace.  Basic indexing is recorded as a ``getitem`` node, typed by its
own rule (``getitem`` in kernels/shape/op.py), which lazy mode asks too.

The global compiled mode (compiler/lazy) records views and basic indexing of
pending values as the same nodes, so its flushes go through this pass too.
It knows sizes, so it asks the rule for each view's output shape
(``view_shape``; ``index_shape`` for indexing), or None where eager mode
would raise; such a call runs eagerly instead and raises there.
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.errors import BroadcastError, OutOfBoundsError, ShapeError, SizeDependentError
from dispatch_jit.kernels.shape.op import getitem
from dispatch_jit.registry import Tag
from dispatch_jit.tensor import wrap_view

from ..elementwise import elementwise_info, reduction_info, result_of
from .ir import Graph, Node, TensorType, Var, rename_vars, vars_in

__all__ = ["GETITEM", "is_view_op", "may_copy", "ViewOp", "is_view", "view_type", "normalize_index", "index_type", "view_shape",
           "index_shape", "sink_views", "hoist_input_views", "view_copies"]


class _GetItem:
    """The pseudo-op of basic indexing in a graph: ``getitem(t, index)`` is ``t[index]``."""

    tags = frozenset([Tag.view])

    def name(self) -> str:
        return "getitem"

    def __call__(self, t, index):
        return t[index]

    def __repr__(self):
        return "<getitem>"


GETITEM = _GetItem()

def is_view_op(op) -> bool:
    """Whether ``op`` (an OpOverload, GETITEM, or another pseudo-op of a graph) is a view: its
    ``dj.Tag.view``."""
    return Tag.view in getattr(op, "tags", ())


def may_copy(op) -> bool:
    """Whether view ``op`` may copy (``dj.Tag.view_may_copy``: NumPy's reshape copies when the
    strides cannot express the new shape)."""
    return Tag.view_may_copy in getattr(op, "tags", ())


def is_view(n: Node) -> bool:
    """A node that only re-describes memory (an op tagged ``view``, or a ViewOp group)."""
    op = n.op
    return not isinstance(op, str) and (isinstance(op, ViewOp) or is_view_op(op))


def _fmt_index_item(i) -> str:
    if isinstance(i, slice):
        s = f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}"
        return s + ("" if i.step is None else f":{i.step}")
    return "..." if i is Ellipsis else repr(i)


def fmt_index(index) -> str:
    items = index if isinstance(index, tuple) else (index,)
    return "[" + ", ".join(_fmt_index_item(i) for i in items) + "]"


class ViewOp:
    """One view applied to k tensors at once: the leaves of an elementwise chain
    the view was sunk through (k >= 1).  Leaves of different shapes are first
    expanded to their common (broadcast) shape, so each view sees the shape
    the chain's result had.  ``copies`` counts the calls where reshape had to
    copy (see the module docstring)."""

    def __init__(self, op, statics: tuple, kwargs: dict):
        self.op, self.statics, self.kwargs = op, tuple(statics), dict(kwargs)
        self.may_copy = may_copy(op)
        self.copies = 0
        self.key = (op.name(), repr(self.statics), repr(sorted(self.kwargs.items())))

    def name(self) -> str:
        if self.op is GETITEM:
            return f"view{fmt_index(self.statics[0])}"
        args = [repr(s) for s in self.statics] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"view[{self.op.name()}({', '.join(args)})]"

    def __repr__(self):
        return f"<ViewOp {self.name()}>"

    def __call__(self, *xs):
        if len(xs) > 1:
            shape = xs[0]._data.shape
            for x in xs:
                if x._data.shape != shape:
                    xs = _expand_all(xs)
                    break
        op, statics, kwargs = self.op, self.statics, self.kwargs
        outs = [op(x, *statics, **kwargs) for x in xs]
        if self.may_copy:
            for x, o in zip(xs, outs):
                if o._data.size and not np.may_share_memory(o._data, x._data):
                    self.copies += 1
        return outs[0] if len(outs) == 1 else tuple(outs)


def _expand_all(xs):
    shapes = [x._data.shape for x in xs]
    try:
        shape = broadcast_shapes(*shapes)
    except ValueError:
        raise BroadcastError(f"shapes {', '.join(str(s) for s in shapes)} cannot be broadcast together") from None
    return [x if x._data.shape == shape else wrap_view(x, np.broadcast_to(x._data, shape)) for x in xs]


# -- tracing: output types from the ops' shape rules (kernels/shape/op.py) -------------------------
def _int_list(x) -> bool:
    return isinstance(x, (list, tuple)) and all(isinstance(s, (int, np.integer)) and not isinstance(s, bool)
                                                for s in x)


def _static(x) -> bool:
    return _int_list(x) or x is None or isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def view_type(op, args: tuple, kwargs: dict, types: dict) -> TensorType | str | None:
    """The output type of a traced view, from its shape rule asked with every size unknown;
    a string: why the trace must abort (the rank depends on the sizes: ``squeeze``); None: not
    a view with a rule, or arguments the rule cannot judge without the sizes (the eager kernel,
    run on the placeholders, raises its error)."""
    rule = op._entry.shape_fn
    if rule is None or not args or not isinstance(args[0], Var):
        return None
    statics = args[1:]
    if not all(_static(x) for x in statics) or not all(_static(x) for x in kwargs.values()):
        return None
    t = types[args[0].id]
    try:
        shape = rule((None,) * t.ndim, *statics, **kwargs)
    except SizeDependentError as e:
        return str(e)
    except (ShapeError, TypeError):
        return None
    return TensorType(t.dtype, len(shape), t.device)


def normalize_index(index, ndim: int) -> tuple[tuple | None, str]:
    """Basic indexing (ints, slices of ints, None, one ``...``) as (the normalized index
    tuple, ""), or (None, why it is not traced or recorded)."""
    items = index if isinstance(index, tuple) else (index,)
    out, used, ell = [], 0, 0
    for i in items:
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            out.append(int(i))
            used += 1
        elif isinstance(i, slice):
            parts = (i.start, i.stop, i.step)
            if not all(p is None or (isinstance(p, (int, np.integer)) and not isinstance(p, bool)) for p in parts):
                return None, "a slice with non-integer bounds is not traced"
            out.append(slice(*(None if p is None else int(p) for p in parts)))
            used += 1
        elif i is None:
            out.append(None)
        elif i is Ellipsis:
            out.append(Ellipsis)
            ell += 1
        else:
            return None, f"indexing with {type(i).__name__} (advanced indexing) is not traced yet"
    if ell > 1 or used > ndim:
        return None, "an invalid index (eager mode raises)"
    return tuple(out), ""


def index_type(index, ty: TensorType) -> tuple[tuple | None, TensorType | str]:
    """Basic indexing as (normalized index tuple, output type, from basic indexing's rule asked
    with every size unknown), or (None, why it is not traced)."""
    norm, why = normalize_index(index, ty.ndim)
    if norm is None:
        return None, why
    try:
        shape = getitem((None,) * ty.ndim, norm)
    except ShapeError:            # a slice step of 0: the eager call raises eager mode's error
        return None, "an invalid index (eager mode raises)"
    return norm, TensorType(ty.dtype, len(shape), ty.device)


# -- compiled mode (compiler/lazy): output shapes of views of pending values, without data --------
def view_shape(op, shape: tuple, statics: tuple) -> tuple | None:
    """The shape of view ``op`` applied to a tensor of ``shape`` with the static arguments
    ``statics``, from the op's shape rule, or None where eager mode raises.  ``view`` is
    answered as ``reshape``: whether the strides allow it is the caller's to know."""
    try:
        return op._entry.shape_fn(shape, *statics)
    except (ShapeError, OutOfBoundsError):     # (select's index out of range: PyTorch's IndexError)
        return None


def index_shape(index: tuple, shape: tuple) -> tuple | None:
    """The shape of ``t[index]`` for a tensor of ``shape`` and an index normalized by
    ``index_type``, from basic indexing's rule (kernels/shape/op.py ``getitem``), or None
    where eager mode raises (an int out of range, a slice step of 0)."""
    try:
        return getitem(shape, index)
    except ShapeError:
        return None


# -- the pass ----------------------------------------------------------------------------------
def _consumers(g: Graph) -> dict[int, list[Node]]:
    cons: dict[int, list[Node]] = {}
    for n in g.nodes:
        for v in set(n.inputs()):
            cons.setdefault(v, []).append(n)
    return cons


def _feeds_fusion(v: int, g: Graph, cons: dict, depth: int = 0) -> bool:
    """Whether value ``v`` is read by a fusible elementwise node or reduction, directly or
    through further views: only then does sinking a view that defines it pay."""
    for n in cons.get(v, ()):
        if elementwise_info(n, g.types)[0] is not None:
            return True
        if reduction_info(n, g.types)[0] is not None:
            return True
        if depth < 16 and is_view(n) and not isinstance(n.op, ViewOp) and n.args[0] == Var(v) and \
                _feeds_fusion(n.outs[0], g, cons, depth + 1):
            return True
    return False


def _sink_one(g: Graph, view: Node, producers: dict, uses: dict, outputs: set, cons: dict):
    """(the nodes replacing ``view`` and the chain under it, the chain's old nodes, the new
    types, the next free value id), or why the view stays where it is."""
    src = view.args[0]
    if not isinstance(src, Var):
        return "not a view of a tensor"
    if g.types[src.id].device != "cpu":
        return "views of CUDA values are not sunk into regions"
    root = producers.get(src.id)
    if root is None or elementwise_info(root, g.types)[0] is None:
        return "a view of a value no fused elementwise op computes"
    if src.id in outputs:
        return "the value it views is also returned, so it is materialized anyway"
    if uses.get(src.id, 0) != 1:
        return "the value it views is read elsewhere too, so it is materialized anyway"
    if not _feeds_fusion(view.outs[0], g, cons):
        return ("no elementwise op or reduction reads the view: the chain is computed in its own layout "
                "and viewed for free")
    # the single-use elementwise chain under the view, each node read once (by the chain)
    chain, stack = {id(root): root}, [root]
    while stack:
        n = stack.pop()
        for x in n.inputs():
            p = producers.get(x)
            if p is not None and id(p) not in chain and uses.get(x, 0) == 1 and x not in outputs and \
                    g.types[x].ndim > 0 and elementwise_info(p, g.types)[0] is not None:
                chain[id(p)] = p
                stack.append(p)
    defined = {v for n in chain.values() for v in n.outs}
    order = [n for n in g.nodes if id(n) in chain]
    leaves = []
    for n in order:
        for x in n.inputs():
            if x not in defined and x not in leaves:
                leaves.append(x)
    # 0-d leaves broadcast to any shape and keep their (lower) promotion rank: they stay as they are
    nd = g.types[src.id].ndim
    viewed = [x for x in leaves if nd == 0 or g.types[x].ndim > 0]
    if may_copy(view.op) or view.op.name() == "aten::view":
        # a reshape of a permuted or sliced leaf copies it: materializing the chain (contiguous) and
        # reshaping that for free is the cheaper order
        if any(_strided_view(producers.get(x)) for x in viewed):
            return ("a reshape of the chain's permuted or sliced leaves would copy them: the chain is "
                    "materialized and reshaped for free")
    out_ty = g.types[view.outs[0]]
    types = dict(g.types)
    new_nodes, rename = [], {}
    if viewed:
        op = view.op
        if op.name() == "aten::view":     # the chain's result was contiguous; a leaf may not be
            from dispatch_jit.ops import ops
            op = ops.aten.reshape.default
        outs = []
        for x in viewed:
            vid = g.next_id + len(outs)
            types[vid] = TensorType(g.types[x].dtype, out_ty.ndim, out_ty.device)
            outs.append(vid)
        if len(viewed) == 1 and not may_copy(op):
            new_nodes.append(Node(op, (Var(viewed[0]),) + tuple(view.args[1:]), dict(view.kwargs), tuple(outs)))
        else:
            new_nodes.append(Node(ViewOp(op, view.args[1:], view.kwargs), tuple(Var(x) for x in viewed), {},
                                  tuple(outs)))
        rename.update(zip(viewed, outs))
    next_id = g.next_id + len(viewed)
    for n in order:
        old = n.outs[0]
        new = view.outs[0] if n is root else next_id
        if n is not root:
            next_id += 1
        m = Node(n.op, rename_vars(n.args, rename), rename_vars(n.kwargs, rename), (new,))
        ty = result_of(m, types)
        if ty is None or ty.dtype is not g.types[old].dtype or ty.ndim != out_ty.ndim:
            return "sinking it would change a dtype (0-d operands promote differently)"
        types[new] = ty
        rename[old] = new
        new_nodes.append(m)
    return new_nodes, order, types, next_id


def _strided_view(n: Node | None) -> bool:
    """Whether ``n`` is a view that is in general not contiguous (anything but a reshape)."""
    if n is None or not is_view(n):
        return False
    op = n.op.op if isinstance(n.op, ViewOp) else n.op
    return op.name() not in ("aten::reshape", "aten::view", "aten::flatten")


def sink_views(g: Graph) -> Graph:
    """Move each view of a single-use elementwise chain onto the chain's leaves
    (see the module docstring), then hoist views of inputs and constants to the
    front, so that they never split a run of fusible nodes."""
    if not any(is_view(n) for n in g.nodes):
        return g
    g = g.copy()
    i = 0
    while i < len(g.nodes):
        n = g.nodes[i]
        if is_view(n) and not isinstance(n.op, ViewOp):
            producers = {v: m for m in g.nodes for v in m.outs}
            res = _sink_one(g, n, producers, g.uses(), {v.id for v in vars_in(g.outputs)}, _consumers(g))
            if isinstance(res, str):
                g.notes[n.outs[0]] = res
            else:
                new_nodes, old, types, next_id = res
                gone = {id(m) for m in old}
                before = [m for m in g.nodes[:i] if id(m) not in gone]
                g.nodes = before + new_nodes + g.nodes[i + 1:]
                g.types, g.next_id = types, next_id
                i = len(before) + len(new_nodes)
                continue
        i += 1
    live = set(g.inputs) | {v for m in g.nodes for v in m.outs}
    g.types = {v: t for v, t in g.types.items() if v in live}   # drop the removed chain nodes' values
    return hoist_input_views(g).check()


def hoist_input_views(g: Graph) -> Graph:
    """Views whose sources are inputs, constants or such views go first (after the
    constants); a view of an input that may copy becomes a one-tensor ViewOp, so
    that its copies are counted."""
    base = set(g.inputs) | {v for n in g.nodes if n.op == "const" for v in n.outs}
    consts, hoisted, rest = [], [], []
    for n in g.nodes:
        if n.op == "const":
            consts.append(n)
        elif is_view(n) and all(v in base for v in n.inputs()) and \
                all(g.types[v].device == "cpu" for v in n.outs):
            if not isinstance(n.op, ViewOp) and may_copy(n.op):
                n = Node(ViewOp(n.op, n.args[1:], n.kwargs), n.args[:1], {}, n.outs)
            hoisted.append(n)
            base.update(n.outs)
        else:
            rest.append(n)
    g.nodes = consts + hoisted + rest
    return g


def view_copies(g: Graph) -> list[tuple[str, int]]:
    """(view, number of copies) for each view step of ``g`` that had to copy."""
    return [(n.op.name(), n.op.copies) for n in g.nodes if isinstance(n.op, ViewOp) and n.op.copies]
