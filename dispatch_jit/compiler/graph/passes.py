"""Graph passes: small and pure (each returns a new graph).

* ``dce``: drop elementwise and constant nodes whose values nobody reads
  (other ops are kept: they may consume random numbers or raise).
* ``cse``: one node for identical elementwise computations and views; with
  ``distinct_outputs`` (``dj.compile``), not for values whose memory the
  outputs hold, which eager mode keeps apart (``returned_memory``).
* ``merge_padded_cats`` (padded_cats.py): the sum of zero-padded gradients of disjoint
  slices (a ``split``'s backward) becomes one ``cat``, with eager's bits.
* ``sink_views`` (views.py): a view of a single-use elementwise chain moves
  onto the chain's leaves, so the chain fuses with what reads the view;
  views of inputs go first, as zero-copy steps the fused loop reads.
* ``fuse``: replace each maximal run of fusible elementwise nodes with one
  "fused" node holding a ``Region``; codegen turns a region into one loop.
  A reduction that reads a value of the run ends it as the region's
  epilogue: the loop folds that value into accumulators instead of storing
  it, so only the reduction's result is materialized (plus whatever the rest
  of the graph reads).  The next run starts after the reduction.

Runs are taken in program order, so a region's inputs are all defined before
it and its outputs used only after it: no cycles by construction.  All
outputs of one loop share its iteration shape, so a region whose outputs
have fewer dimensions than its deepest node is split by ndim (an
elementwise node never has fewer dimensions than its inputs, so ascending
ndim is a valid order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...broadcast import broadcast_shapes
from ..elementwise import Elementwise, Reduction, elementwise_info, reduction_info, scalar_op_of
from .ir import Graph, Node, Var, rename_vars, vars_in
from .padded_cats import merge_padded_cats
from .views import ViewOp, is_view, sink_views

__all__ = ["Region", "dce", "cse", "fuse", "lone_region", "optimize", "returned_memory", "same_graph"]


def _pure(n: Node) -> bool:
    return n.op == "const" or scalar_op_of(n.op) is not None or is_view(n)


def dce(g: Graph) -> Graph:
    g = g.copy()
    live = {v.id for v in vars_in(g.outputs)}
    kept = []
    for n in reversed(g.nodes):
        if _pure(n) and not any(v in live for v in n.outs):
            continue
        kept.append(n)
        live.update(n.inputs())
    g.nodes = kept[::-1]
    return g.check()


def _const_key(x):
    if isinstance(x, Var):
        return ("var", x.id)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_const_key(y) for y in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _const_key(v)) for k, v in x.items())
    return (type(x).__name__, repr(x))   # 2 and 2.0 (and True) stay apart


def returned_memory(g: Graph) -> set[int]:
    """The values whose memory the outputs hold: each output, and what each returned view
    views (transitively).  Eager mode gives two such values of different nodes different
    memory, or different view tensors, so merging them would alias outputs."""
    keep = {v.id for v in vars_in(g.outputs)}
    for n in reversed(g.nodes):
        if is_view(n) and any(v in keep for v in n.outs):
            keep.update(n.inputs())
    return keep


def cse(g: Graph, distinct_outputs: bool = False) -> Graph:
    """``distinct_outputs``: never merge a node defining a value of ``returned_memory``
    into another (``dj.compile`` returns what the function returned; lazy mode copies
    the merged values it hands out instead)."""
    g = g.copy()
    seen: dict = {}
    rename: dict[int, int] = {}
    nodes = []
    keep = returned_memory(g) if distinct_outputs else set()
    claimed = set()      # ids of nodes whose value the outputs now hold
    for n in g.nodes:
        n.args, n.kwargs = rename_vars(n.args, rename), rename_vars(n.kwargs, rename)
        if scalar_op_of(n.op) is not None or is_view(n):
            op = n.op.key if isinstance(n.op, ViewOp) else n.name
            key = (op, _const_key(n.args), _const_key(n.kwargs))
            prev = seen.get(key)
            if prev is not None:
                returned = keep and not keep.isdisjoint(n.outs)
                # a returned value may take over one value nobody returns, never a second one
                if not returned or (id(prev) not in claimed and keep.isdisjoint(prev.outs)):
                    if returned:
                        claimed.add(id(prev))
                    rename.update(zip(n.outs, prev.outs))
                    continue
            else:
                seen[key] = n
        nodes.append(n)
    g.nodes = nodes
    g.outputs = rename_vars(g.outputs, rename)
    return g.check()


def same_graph(a: Graph, b: Graph) -> bool:
    """Whether two traces recorded the same thing: the same ops on the same values with the
    same constants (runtime scalars compare by index), captured tensors of equal data, the
    same outputs.  Two traces with different runtime scalar values must be the same graph,
    or the value reached the trace some other way (``dj.compile``'s check)."""
    if a.inputs != b.inputs or len(a.nodes) != len(b.nodes) or a.types != b.types:
        return False
    if [id(t) for t in a.lifted] != [id(t) for t in b.lifted]:
        return False
    for m, n in zip(a.nodes, b.nodes):
        if m.op is not n.op and m.op != n.op or m.outs != n.outs:
            return False
        if (_const_key(m.args), _const_key(m.kwargs)) != (_const_key(n.args), _const_key(n.kwargs)):
            return False
        if m.op == "const" and m.value is not n.value and not _same_data(m.value, n.value):
            return False
    return _const_key(a.outputs) == _const_key(b.outputs)


def _same_data(x, y) -> bool:
    if x.dtype != y.dtype or x.shape != y.shape or x.is_cuda or y.is_cuda:
        return False
    return bool(np.array_equal(x._data, y._data, equal_nan=x.dtype.category >= 2))


@dataclass
class Region:
    """A fused loop: elementwise nodes, the tensors it reads (``inputs``) and
    the values it writes (``outputs``), all of ``ndim`` dimensions; and
    optionally a ``reduce`` epilogue over one of its values, whose result is
    the fused node's last output."""

    nodes: list[Node]
    infos: list[Elementwise]
    inputs: list[int]
    outputs: list[int]
    ndim: int
    index: int = 0
    deps: dict = field(default_factory=dict)   # output -> indices of the inputs it depends on
    reduce: Reduction | None = None
    reduce_deps: list = field(default_factory=list)   # indices of the inputs the reduced value reads

    @property
    def all_outputs(self) -> list[int]:
        """The values the fused node defines: the stored outputs, then the reduction's."""
        return self.outputs + ([self.reduce.out] if self.reduce else [])


def _region(nodes, infos, used_after: set[int], g: Graph, red: Reduction | None = None) -> Region:
    defined = {v for n in nodes for v in n.outs}
    inputs: list[int] = []
    deps: dict[int, set] = {}
    for n in nodes:
        d = set()
        for v in n.inputs():
            if v in defined:
                d |= deps[v]
            else:
                if v not in inputs:
                    inputs.append(v)
                d.add(inputs.index(v))
        for v in n.outs:
            deps[v] = d
    outputs = [v for n in nodes for v in n.outs if v in used_after]
    ndim = max(g.types[v].ndim for n in nodes for v in n.outs)
    r = Region(nodes, infos, inputs, outputs, ndim, deps={v: sorted(deps[v]) for v in outputs})
    if red is not None:
        r.reduce, r.reduce_deps = red, sorted(deps[red.src])
    return r


def lone_region(n: Node, g: Graph) -> Region | None:
    """The one-node loop of elementwise node ``n`` (a plan function's call for an op the
    interpreted plan leaves to its eager kernel, run/function.py), or None if it is not elementwise."""
    info, _ = elementwise_info(n, g.types)
    return None if info is None else _region([n], [info], set(n.outs), g)


def lone_reduction(n: Node, g: Graph) -> Region | None:
    """The loop of reduction node ``n`` alone (a region without elementwise nodes whose epilogue
    reads its input), for a plan function, or None if it cannot end a fused region."""
    red, _ = reduction_info(n, g.types)
    if red is None:
        return None
    return Region([], [], [red.src], [], red.ndim, deps={}, reduce=red, reduce_deps=[0])


def _components(rn, g: Graph) -> list[list[int]]:
    """The positions in ``rn`` (a run of nodes) grouped by the chains they form: two nodes are in
    one group where one reads what the other defines, directly or through others of the run.  A
    0-d value read by a chain does not join it to the chain that made it (a clipping coefficient
    read by every parameter's update would make one loop of all of them): the 0-d chains come first
    (an elementwise node's inputs have no more dimensions than it, so they read only 0-d values)."""
    parent = list(range(len(rn)))
    scalar = [all(g.types[v].ndim == 0 for v in n.outs) for n in rn]

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k
    owner = {}
    for k, n in enumerate(rn):
        for v in n.inputs():
            if v in owner and scalar[owner[v]] == scalar[k]:
                parent[find(k)] = find(owner[v])
        for v in n.outs:
            owner[v] = k
    groups: dict = {}
    for k in range(len(rn)):
        groups.setdefault(find(k), []).append(k)
    return sorted(groups.values(), key=lambda grp: not scalar[grp[0]])


def _smaller(grp, used, nodes, shapes) -> list:
    """The nodes of ``grp`` (positions in ``nodes``) that compute an output of the run (``used``)
    whose known sizes are fewer elements than the run's largest value, with the nodes of ``grp``
    they read, in order; [] when there is none or every node would be one of them."""
    sizes = {v: int(np.prod(shapes[v])) for i in grp for v in nodes[i].outs if v in shapes}
    if not sizes:
        return []
    top = max(sizes.values())
    want = {v for v, n in sizes.items() if n < top and v in used}
    by_out = {v: i for i in grp for v in nodes[i].outs}
    keep: set = set()
    while want:
        i = by_out.get(want.pop())
        if i is not None and i not in keep:
            keep.add(i)
            want.update(v for v in nodes[i].inputs() if v in by_out)
    return [] if len(keep) in (0, len(grp)) else [i for i in grp if i in keep]


def _shape_groups(grp, nodes, shapes) -> list:
    """``grp`` (positions in ``nodes``, a run of elementwise nodes) as groups whose values all
    broadcast to one loop shape, where the sizes are known (a sized trace's graph, a joint graph's
    forward and backward): independent chains of different shapes (two parameters' gradients of
    different sizes, written one after the other) would not broadcast in one loop, which would
    then run its ops one by one at every call.  A node's value has at least its inputs' sizes, so
    the groups in ascending number of elements (then shape) read only groups before them."""
    known = {}

    def shape_of(v):
        return known[v] if v in known else shapes.get(v)
    for i in grp:
        n = nodes[i]
        for v in n.outs:
            s = shapes.get(v)
            if s is None:
                ins = [shape_of(u) for u in n.inputs()]
                if None in ins:
                    return [grp]
                try:
                    s = broadcast_shapes(*ins)
                except ValueError:
                    return [grp]
            known[v] = tuple(s)
    try:
        broadcast_shapes(*known.values())
        return [grp]
    except ValueError:
        pass
    by_shape: dict = {}
    for i in grp:
        by_shape.setdefault(known[nodes[i].outs[0]], []).append(i)
    return [by_shape[s] for s in sorted(by_shape, key=lambda s: (int(np.prod(s)), len(s), s))]


def fuse(g: Graph, split_chains: bool = False) -> tuple[Graph, list[tuple[str, str]]]:
    """Returns the graph with "fused" nodes and, per node left unfused, (op, why).  ``split_chains``:
    a run of independent chains (a whole step's updates of parameters of different sizes, which
    would not broadcast in one loop) becomes one region per chain."""
    g = g.copy()
    # constants have no inputs: hoist them so they never split a run
    nodes = [n for n in g.nodes if n.op == "const"] + [n for n in g.nodes if n.op != "const"]
    infos = [elementwise_info(n, g.types) for n in nodes]
    reads_after: list[set[int]] = [set() for _ in nodes]
    acc = {v.id for v in vars_in(g.outputs)}
    for i in range(len(nodes) - 1, -1, -1):
        reads_after[i] = set(acc)
        acc.update(nodes[i].inputs())
    out_nodes, notes, run = [], [], []
    sources = set(g.inputs) | {v for n in nodes if n.op == "const" for v in n.outs}
    regions = 0

    def flush(end: int, red: Reduction | None = None):
        """Close the run before node ``end``; ``red`` (node ``end``) ends it as its epilogue."""
        if not run:
            return
        # the epilogue's own read of its input does not make that input an output
        used = reads_after[end] if red is not None else reads_after[end - 1]
        groups = [run]
        if split_chains and red is None:
            groups = [[run[k] for k in c] for c in _components([nodes[i] for i in run], g)]
        if g.shapes:
            groups = [part for grp in groups for part in _shape_groups(grp, nodes, g.shapes)]
        for grp in groups:
            # a 0-d chain's values that later chains of the run read are outputs of its loop
            others = {v for k in run if k not in grp for v in nodes[k].inputs()} if len(groups) > 1 else set()
            # the reduction is the epilogue of the group that makes what it reads
            mine = red if red is None or any(red.src in nodes[k].outs for k in grp) else None
            if red is not None and mine is None:
                others |= {red.src}
            emit(grp, used | others, mine)
        run.clear()

    def emit(grp, used, red):
        nonlocal regions
        pre = _smaller(grp, used, nodes, g.shapes) if red is None and g.shapes else []
        if pre:
            # a value smaller than the loop (a layer norm's saved 1/std, a mask kept for the
            # backward) cannot be stored by it: its chain is a loop of its own, first
            rest = [i for i in grp if i not in pre]
            emit(pre, used | {v for i in rest for v in nodes[i].inputs()}, None)
            emit(rest, used, None)
            return
        rn, ri = [nodes[i] for i in grp], [infos[i][0] for i in grp]
        if len(rn) == 1 and red is None:
            out_nodes.append(rn[0])
            notes.append((rn[0].name, "a lone elementwise op: its eager kernel is already one loop"))
            return
        whole = _region(rn, ri, used, g, red)
        parts = [whole]
        if any(g.types[v].ndim < whole.ndim for v in whole.outputs) or \
                (red is not None and red.ndim < whole.ndim):
            parts = []
            defined_later = set()
            for nd in sorted({g.types[n.outs[0]].ndim for n in rn}, reverse=True):
                sel = [k for k, n in enumerate(rn) if g.types[n.outs[0]].ndim == nd]
                parts.insert(0, _region([rn[k] for k in sel], [ri[k] for k in sel], used | defined_later, g,
                                        red if red is not None and red.ndim == nd else None))
                defined_later |= {v for k in sel for v in rn[k].inputs()}
        for r in parts:
            r.index = regions
            regions += 1
            out_nodes.append(Node("fused", tuple(Var(v) for v in r.inputs), {}, tuple(r.all_outputs), value=r))

    for i, (n, (info, why)) in enumerate(zip(nodes, infos)):
        if info is not None:
            run.append(i)
            continue
        if run:
            red, rwhy = reduction_info(n, g.types)
            if red is not None and any(red.src in nodes[k].outs for k in run):
                flush(i, red)
                continue
            if red is None and n.outs and g.types[n.outs[0]].device == "cuda" and rwhy != "not a reduction":
                why = rwhy      # say why a CUDA reduction is not the region's epilogue
        flush(i)
        out_nodes.append(n)
        if is_view(n):
            if all(v in sources for v in n.inputs()):
                sources.update(n.outs)
                why = ("a view of an input: a zero-copy strided view per call, which the next loop reads in place"
                       if g.types[n.outs[0]].device == "cpu" else "a view (CUDA views are not sunk into regions)")
                if isinstance(n.op, ViewOp) and n.op.may_copy:
                    why += " (a reshape copies where the input's strides cannot express the new shape)"
            else:
                why = "a view of a computed value, not sunk into a region: " + \
                      g.notes.get(n.outs[0], "not a view of a single-use elementwise chain")
        if n.op != "const":
            notes.append((n.name, why))
    flush(len(nodes))
    g.nodes = out_nodes
    return g.check(), notes


def optimize(g: Graph, distinct_outputs: bool = False, split_chains: bool = False) -> tuple[Graph, list]:
    """``distinct_outputs``: see ``cse``; ``split_chains``: see ``fuse``."""
    g = merge_padded_cats(g)
    return fuse(dce(cse(sink_views(cse(g, distinct_outputs)), distinct_outputs)), split_chains)
