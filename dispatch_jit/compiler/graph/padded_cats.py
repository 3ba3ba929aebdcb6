"""``merge_padded_cats``: the sum of zero-padded gradients of disjoint slices becomes one ``cat``.

Eager autograd differentiates ``narrow`` (and so ``split``/``chunk``, whose pieces are narrows)
by padding the piece's gradient with zeros to the input's size (kernels/derivatives.py
``_narrow_grad``) and the engine adds the padded gradients of the pieces together.  For
``q, k, v = x.split(n, dim=2)`` that is three zero tensors of the input's size, three cats and
two full-size adds, where one cat of the three gradients says the same thing.

The pass rewrites ``add(cat(...), cat(...))``, each cat's pieces all-zero constants but for
pieces at disjoint places along the same axis, into one cat whose pieces are those gradients
and zeros where no piece covers.  Exactly eager's bits: each element of eager's sum is one
gradient value plus zeros, which is that value, except that ``-0.0 + 0.0`` is ``+0.0``; so each
gradient piece enters the cat as ``g + 0.0`` (an elementwise node, which fuses into the loop
that computes ``g``).  A chain of such adds merges one add at a time (the merged cat is
padded-with-zeros again); a piece that is already ``g + 0.0`` gets no second one.  Only where
every size is known (``Graph.shapes``: a joint or whole-step graph), the cats and adds are used
once (nobody else reads the padded tensors), and the add is a plain ``add`` of one dtype.
"""

from __future__ import annotations

import numpy as np

from .ir import Graph, Node, Var

__all__ = ["merge_padded_cats"]


def _zero_const(n: Node) -> bool:
    """A captured tensor of +0.0s (a -0.0 would not be the additive identity eager's add has)."""
    if n.op != "const" or getattr(n.value, "is_cuda", True):
        return False
    d = getattr(n.value, "_data", None)
    return isinstance(d, np.ndarray) and d.dtype.kind in "fc" and not np.any(d) and not np.any(np.signbit(d.real))


def _cat_parts(n: Node):
    """(pieces, axis) of a cat node with a static list of pieces, else None."""
    if n.name != "aten::cat":
        return None
    pieces = n.args[0] if n.args else n.kwargs.get("tensors")
    axis = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)
    if not isinstance(pieces, (list, tuple)) or not all(isinstance(p, Var) for p in pieces) or type(axis) is not int:
        return None
    return pieces, axis


def _segments(v: int, g: Graph, producer: dict):
    """(axis, shape, [(start, length, piece id)]) of the non-zero pieces of a padded cat ``v``."""
    n = producer.get(v)
    parts = _cat_parts(n) if n is not None else None
    shape = g.shapes.get(v)
    if parts is None or shape is None:
        return None
    pieces, axis = parts
    axis %= len(shape)
    segs, start = [], 0
    for p in pieces:
        ps = g.shapes.get(p.id)
        if ps is None or len(ps) != len(shape) or g.types[p.id] != g.types[v]:
            return None
        pn = producer.get(p.id)
        if not (pn is not None and _zero_const(pn)) and ps[axis]:
            segs.append((start, ps[axis], p.id))
        start += ps[axis]
    return axis, tuple(shape), segs


def merge_padded_cats(g: Graph) -> Graph:
    """``g`` with each add of zero-padded cats of disjoint pieces replaced by one cat (see above)."""
    from dispatch_jit.creation import zeros
    adds = [n for n in g.nodes if n.name == "aten::add.Tensor"]
    if not adds or not g.shapes:
        return g
    g = g.copy()
    g.shapes = dict(g.shapes)
    uses = g.uses()
    producer = {v: n for n in g.nodes for v in n.outs}
    canonical: set[int] = set()      # value ids that are some g + 0.0 already
    dropped: set[int] = set()        # id() of the cat nodes a merge replaced
    out_nodes = []
    for n in g.nodes:
        got = _merge(n, g, producer, uses, canonical, zeros) if n.name == "aten::add.Tensor" else None
        if got is None:
            out_nodes.append(n)
            continue
        new_nodes, cats = got
        dropped.update(id(c) for c in cats)
        for m in new_nodes:
            for v in m.outs:
                producer[v] = m
        out_nodes.extend(new_nodes)
    g.nodes = [n for n in out_nodes if id(n) not in dropped]
    return g.check()


def _merge(n: Node, g: Graph, producer: dict, uses: dict, canonical: set, zeros):
    if len(n.args) != 2 or any(v != {"alpha": 1}.get(k) for k, v in n.kwargs.items()):
        return None
    x, y = n.args
    out = n.outs[0]
    if not (isinstance(x, Var) and isinstance(y, Var)) or x.id == y.id:
        return None
    if uses.get(x.id) != 1 or uses.get(y.id) != 1 or g.shapes.get(out) is None:
        return None
    sx = _segments(x.id, g, producer)
    sy = _segments(y.id, g, producer)
    if sx is None or sy is None or sx[:2] != sy[:2] or tuple(g.shapes[out]) != sx[1]:
        return None
    if g.types[x.id] != g.types[out]:
        return None
    axis, shape, _ = sx
    segs = sorted(sx[2] + sy[2])
    if any(a[0] + a[1] > b[0] for a, b in zip(segs, segs[1:])):
        return None               # two gradients overlap: a real sum
    if not segs or (len(segs) == 1 and segs[0][1] == shape[axis]):
        return None               # nothing to merge, or one gradient covering the axis: no cat to save
    ty = g.types[out]
    if ty.device != "cpu":
        return None
    new_nodes, pieces, at = [], [], 0

    def value(shp):
        vid = g.new_value(ty)
        g.shapes[vid] = tuple(shp)
        return vid

    def zero_piece(length):
        shp = list(shape)
        shp[axis] = length
        vid = value(shp)
        new_nodes.append(Node("const", (), {}, (vid,), value=zeros(*shp, dtype=ty.dtype)))
        pieces.append(Var(vid))

    for start, length, p in segs:
        if start > at:
            zero_piece(start - at)
        if p in canonical:
            pieces.append(Var(p))
        else:
            vid = value(g.shapes[p])
            new_nodes.append(Node(n.op, (Var(p), 0.0), dict(n.kwargs), (vid,)))
            canonical.add(vid)
            pieces.append(Var(vid))
        at = start + length
    if at < shape[axis]:
        zero_piece(shape[axis] - at)
    cat_x, cat_y = producer[x.id], producer[y.id]
    new_nodes.append(Node(cat_x.op, (pieces, axis), {k: v for k, v in cat_x.kwargs.items() if k != "dim"}, (out,)))
    canonical.add(out)
    return new_nodes, (cat_x, cat_y)
