"""Split a joint forward+backward graph (joint.py) into the forward and the backward plan.

The backward needs values the forward computed.  Each is either saved by the forward
(an extra output of its plan) or recomputed by the backward from values that are
saved.  The choice is a minimum cut, as AOTAutograd's partitioner makes it:

* one flow-network edge ``v_in -> v_out`` per value that does not depend on an
  incoming gradient, whose capacity is what saving ``v`` costs in memory traffic:
  its bytes once where the forward holds it anyway (an input or an output: the
  backward reads it), twice for an intermediate (the forward writes it, the
  backward reads it); ties go to the value computed last, so that equal traffic
  never buys a recomputation;
* the source feeds the forward's inputs, and every value the forward must compute
  itself whose op may not run twice (``_recomputable``: only fusible elementwise
  ops and views may; never a matmul or a reduction);
* the sink drains every value a backward node (one that depends on an incoming
  gradient) or an input's gradient reads;
* ``v_out -> u_in`` (infinite) for each use of ``v`` by the op defining ``u``.

The edges the minimum cut crosses are the values to save; the values on the sink
side that the backward reads are recomputed there, from saved ones (the edges from
a use are infinite, so a recomputed value's inputs are saved or recomputed too).
Constants (captured tensors) are in both plans for free.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ...errors import GraphError

from ..elementwise import elementwise_info
from .ir import Graph, Node, Var, vars_in
from .views import is_view

__all__ = ["Split", "partition", "min_cut"]

_INF = float("inf")


@dataclass
class Split:
    forward: Graph        # inputs: the forward's; outputs: (the function's outputs, extra saved values)
    backward: Graph       # inputs: the saved values, then the incoming gradients; outputs: input gradients
    saved: list           # per backward input before the gradients: ("input", i) | ("output", flat position)
                          # | ("extra", k): where the forward call finds it
    recomputed: int       # nodes the backward recomputes from saved values


def min_cut(edges: dict, source, sink) -> set:
    """The source side of a minimum ``source``-``sink`` cut of the network ``edges``
    ({(u, v): capacity}); Edmonds-Karp (shortest augmenting paths first)."""
    residual: dict = {}
    adj: dict = {}
    for (u, v), c in edges.items():
        residual[(u, v)] = residual.get((u, v), 0) + c
        residual.setdefault((v, u), 0)
        adj.setdefault(u, set()).add(v)
        adj.setdefault(v, set()).add(u)

    def reachable(stop_at_sink: bool):
        parent = {source: None}
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for v in adj.get(u, ()):
                if v not in parent and residual[(u, v)] > 0:
                    parent[v] = u
                    if stop_at_sink and v == sink:
                        return parent
                    queue.append(v)
        return parent

    while True:
        parent = reachable(True)
        if sink not in parent:
            return set(parent)
        path, v = [], sink
        while parent[v] is not None:
            path.append((parent[v], v))
            v = parent[v]
        flow = min(residual[e] for e in path)
        if flow == _INF:
            raise GraphError("the cut is infinite: a value the backward needs can be neither saved nor recomputed")
        for u, v in path:
            residual[(u, v)] -= flow
            residual[(v, u)] += flow


def _recomputable(n: Node, types) -> bool:
    return n.op == "const" or is_view(n) or elementwise_info(n, types)[0] is not None


def partition(joint) -> Split:
    """The forward and backward graphs of ``joint`` (a ``joint.Joint``)."""
    g = joint.graph
    fwd_out, in_grads = g.outputs
    n_in = joint.n_forward_inputs
    fwd_inputs, grad_inputs = g.inputs[:n_in], g.inputs[n_in:]
    producer = {v: n for n in g.nodes for v in n.outs}
    # values that depend on an incoming gradient: the backward's own
    tangent = set(grad_inputs)
    for n in g.nodes:
        if any(v in tangent for v in n.inputs()):
            tangent.update(n.outs)
    order = {v: i for i, v in enumerate(list(g.inputs) + [v for n in g.nodes for v in n.outs])}
    out_vars = {v.id for v in vars_in(fwd_out)}
    must_forward = _ancestors(out_vars, producer)
    size = {v: _nbytes(joint.shapes[v], g.types[v].dtype) for v in order if v not in tangent}
    big = len(order) + 1
    edges: dict = {}
    for v in size:
        n = producer.get(v)
        if n is not None and n.op == "const":
            cap = 0
        else:
            traffic = 1 if (v in fwd_inputs or v in out_vars) else 2
            cap = size[v] * traffic * big + (big - order[v])
        edges[(("in", v), ("out", v))] = cap
        if v in fwd_inputs or (n is not None and (n.op == "const" or (
                v in must_forward and not _recomputable(n, g.types)))):
            edges[("source", ("in", v))] = _INF
    for n in g.nodes:
        users = [u for u in n.outs]
        for v in set(n.inputs()):
            if v in tangent:
                continue
            for u in users:
                target = "sink" if u in tangent else ("in", u)
                edges[(("out", v), target)] = _INF
    for v in vars_in(in_grads):
        if v.id not in tangent:
            edges[(("out", v.id), "sink")] = _INF
    side = min_cut(edges, "source", "sink")
    saved = [v for v in size if ("in", v) in side and ("out", v) not in side
             and (producer.get(v) is None or producer[v].op != "const")]
    saved.sort(key=order.get)
    return _split(joint, producer, tangent, saved, out_vars)


def _split(joint, producer, tangent, saved, out_vars) -> Split:
    g = joint.graph
    fwd_out, in_grads = g.outputs
    n_in = joint.n_forward_inputs
    fwd_inputs, grad_inputs = g.inputs[:n_in], g.inputs[n_in:]
    flat_out = [v.id for v in vars_in(fwd_out)]
    where, extra = [], []
    for v in saved:
        if v in fwd_inputs:
            where.append(("input", fwd_inputs.index(v)))
        elif v in out_vars:
            where.append(("output", flat_out.index(v)))
        else:
            where.append(("extra", len(extra)))
            extra.append(v)
    # the forward: what its outputs and the extra saved values need
    keep = _ancestors(set(flat_out) | set(extra), producer)
    fnodes = [n for n in g.nodes if any(v in keep for v in n.outs)]
    forward = _graph(g, list(fwd_inputs), fnodes, (fwd_out, tuple(Var(v) for v in extra)))
    # the backward: from the input gradients back to saved values and incoming gradients
    stop = set(saved) | set(grad_inputs)
    need = _ancestors({v.id for v in vars_in(in_grads)}, producer, stop)
    bnodes = [n for n in g.nodes if any(v in need and v not in stop for v in n.outs)]
    for v in need - stop:
        if v not in producer:
            raise GraphError(f"the backward needs %{v}, which it neither gets nor computes")
    recomputed = sum(1 for n in bnodes if not any(v in tangent for v in n.outs) and n.op != "const")
    backward = _graph(g, saved + list(grad_inputs), bnodes, in_grads)
    return Split(forward.check(), backward.check(), where, recomputed)


def _graph(g: Graph, inputs, nodes, outputs) -> Graph:
    types = {v: g.types[v] for v in inputs}
    for n in nodes:
        for v in n.outs:
            types[v] = g.types[v]
    # the sizes of this call: fusion keeps values that do not broadcast together in separate loops
    shapes = {v: g.shapes[v] for v in types if v in g.shapes}
    return Graph(inputs, [Node(n.op, n.args, dict(n.kwargs), n.outs, n.value) for n in nodes], outputs,
                 types, g.next_id, shapes=shapes)


def _ancestors(roots: set, producer: dict, stop: set = frozenset()) -> set:
    seen, stack = set(), list(roots)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        n = producer.get(v)
        if n is not None and v not in stop:
            stack.extend(n.inputs())
    return seen


def _nbytes(shape, dtype) -> int:
    n = dtype.np.itemsize if hasattr(dtype, "np") else 8
    for d in shape:
        n *= d
    return n
