"""The IR and the passes on hand-made and traced graphs."""

import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.graph.ir import Graph, GraphError, Node, TensorType, Var
from dispatch_jit.compiler.graph.passes import cse, dce, fuse
from dispatch_jit.compiler.trace.fallback import trace
from dispatch_jit.compiler.graph.views import ViewOp, sink_views


def _traced(fn, *shapes):
    return trace(fn, tuple(dj.zeros(s) for s in shapes), {})


def test_printout_is_typed_and_numbered():
    g = _traced(lambda a, b: a * b + 2.0, (2, 3), (3,))
    text = str(g)
    assert text.splitlines()[0] == "graph(%0: float32[2d], %1: float32[1d]):"
    assert "%2 = aten::mul.Tensor(%0, %1) : float32[2d]" in text
    assert "%3 = aten::add.Tensor(%2, 2.0, alpha=1) : float32[2d]" in text
    assert text.endswith("return %3")


def test_comparison_types_are_bool():
    g = _traced(lambda a: (a > 0) & (a < 1), (4,))
    assert [str(g.types[n.outs[0]]) for n in g.nodes] == ["bool[1d]"] * 3


def test_check_rejects_use_before_definition():
    g = Graph()
    v = g.new_value(TensorType(dj.float32, 1))
    g.inputs.append(v)
    out = g.new_value(TensorType(dj.float32, 1))
    g.nodes.append(Node(dj.ops.aten.neg.default, (Var(99),), {}, (out,)))
    g.outputs = Var(out)
    with pytest.raises(GraphError, match="reads %99 before"):
        g.check()


def test_dce_drops_unused_elementwise():
    def fn(a):
        _ = dj.exp(a)
        return a + 1.0
    g = dce(_traced(fn, (3,)))
    assert [n.name for n in g.nodes] == ["aten::add.Tensor"]


def test_cse_keeps_int_and_float_constants_apart():
    g = cse(_traced(lambda a: (a * 2) + (a * 2.0) + (a * 2), (3,)))
    assert sum(n.name == "aten::mul.Tensor" for n in g.nodes) == 2


def test_fusion_stops_at_matmul_and_explains():
    g, notes = fuse(_traced(lambda a, b: dj.exp(a * 2.0) @ b + 1.0 - b.sum(), (2, 2), (2, 2)))
    kinds = [n.name for n in g.nodes]
    assert kinds[0] == "fused" and "aten::matmul" in kinds
    assert ("aten::matmul", "not an elementwise op") in notes


def test_region_with_lower_ndim_output_is_split_by_ndim():
    g, _ = fuse(_traced(lambda a, b: (dj.exp(a) * 2.0, dj.exp(a) * 2.0 + b), (3,), (2, 3)))
    regions = [n.value for n in g.nodes if n.op == "fused"]
    assert [r.ndim for r in regions] == [1, 2]


# -- views (compiler/views.py) ---------------------------------------------------------------
def test_basic_indexing_is_a_getitem_node():
    g = _traced(lambda a: a[1:, ::2, None] * 2.0, (3, 4))
    assert "%1 = getitem(%0, (1:, ::2, None)) : float32[3d]" in str(g)


def test_reshape_traces_with_sizes_the_placeholders_lack():
    g = _traced(lambda a: a.reshape((4, -1)) + a.narrow(0, 2, 2).reshape((4, -1)), (8,))
    assert [str(g.types[n.outs[0]]) for n in g.nodes] == ["float32[2d]", "float32[1d]", "float32[2d]", "float32[2d]"]


def test_sink_views_moves_a_transpose_onto_the_leaves():
    g = sink_views(_traced(lambda a, b: (a * b).T + 1.0, (2, 3), (3,)))
    view, mul, add = g.nodes
    assert isinstance(view.op, ViewOp) and [v.id for v in view.args] == [0, 1]   # both leaves, one step
    assert view.op.name() == "view[aten::permute((1, 0))]"
    assert mul.inputs() == list(view.outs) and add.inputs() == list(mul.outs)
    assert g.types[view.outs[1]].ndim == 2          # the 1-D leaf is viewed as the 2-D chain was
    _, notes = fuse(g)
    assert notes == [("view[aten::permute((1, 0))]",
                      "a view of an input: a zero-copy strided view per call, which the next loop reads in place")]


def test_sink_views_hoists_views_of_inputs_so_they_never_split_a_run():
    g, _ = fuse(sink_views(_traced(lambda a, b: (a * 2.0).T + (b * 3.0).T, (2, 3), (2, 3))))
    assert [n.name for n in g.nodes] == ["aten::permute", "aten::permute", "fused"]


def test_a_view_of_a_multi_use_value_stays_and_says_why():
    g = sink_views(cse(_traced(lambda a: (a * 2.0).T + (a * 2.0).sum(), (2, 2))))
    assert "aten::permute" in [n.name for n in g.nodes if n.op != "fused"]
    assert any("materialized anyway" in why for why in g.notes.values())


def test_a_view_that_would_change_promotion_is_not_sunk():
    # f32[2d] * f64[0d] is float32; sunk to a 0-d view of the f32 leaf it would promote to float64
    g = trace(lambda a, s: (a * s)[0, 0] + 1.0, (dj.zeros((2, 3)), dj.tensor(2.0, dtype=dj.float64)), {})
    g2 = sink_views(g)
    assert [n.name for n in g2.nodes] == [n.name for n in g.nodes]
    assert "change a dtype" in next(iter(g2.notes.values()))


def test_cse_merges_identical_views_and_dce_drops_dead_ones():
    def fn(a):
        _ = a.T
        return a[1:] * a[1:]
    g = dce(cse(_traced(fn, (3, 3))))
    assert [n.name for n in g.nodes] == ["getitem", "aten::mul.Tensor"]


def test_fuse_split_chains_gives_each_independent_chain_its_region():
    """A whole step's updates of parameters of different sizes are independent chains of one run:
    with ``split_chains`` each is its own region (one loop of its own size), not one region whose
    outputs would not broadcast together."""
    g = trace(lambda a, b: (a * 2.0 + 1.0, b * 3.0 - 1.0), (dj.ones(3), dj.ones(4)), {})
    assert sum(n.op == "fused" for n in fuse(g)[0].nodes) == 1
    split = fuse(g, split_chains=True)[0]
    regions = [n.value for n in split.nodes if n.op == "fused"]
    assert len(regions) == 2 and {len(r.inputs) for r in regions} == {1}
