"""The IR and the passes on hand-made and traced graphs."""

import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.ir import Graph, GraphError, Node, TensorType, Var
from dispatch_jit.compiler.passes import cse, dce, fuse
from dispatch_jit.compiler.trace import trace


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
