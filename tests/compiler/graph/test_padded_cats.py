"""merge_padded_cats (compiler/graph/padded_cats.py): a split's backward in a compiled plan is one
cat of the pieces' gradients, not a sum of zero-padded cats, with eager's bits (signed zeros too)."""

import numpy as np

import dispatch_jit as dj


def _qkv(x):
    q, k, v = x.split(2, dim=1)
    return (q * k * v).sum()


def _q_and_v(x):          # the middle piece gets no gradient: zeros between the two
    q, _, v = dj.chunk(x, 3, 1)
    return (q * v).sum()


def _overlap(x):          # overlapping narrows: a real sum, left as eager computes it
    return (dj.narrow(x, 1, 0, 4) * dj.narrow(x, 1, 2, 4)).sum()


def _only_q(x):           # one piece: eager adds nothing, its padded cat keeps -0.0
    q, _, _ = x.split(2, dim=1)
    return (q * q * -1.0 * 0.0).sum()


COMPILED = {f: dj.compile(f) for f in (_qkv, _q_and_v, _overlap, _only_q)}


def _x():
    # q = 1, k = 0, v = -1 in the first row: d/dq (q*k*v) = k*v = -0.0, which eager's
    # padded sum turns into +0.0 (-0.0 + 0.0)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    x[0] = [1.0, 1.0, 0.0, 0.0, -1.0, -1.0]
    x[1, 2:4] = -0.0
    return x


def _grad(fn, x):
    t = dj.from_numpy(x.copy()).requires_grad_(True)
    fn(t).backward()
    return t.grad.numpy().copy()


def _backward_graph(cf):
    (entry,) = cf._last.fused.values()
    return entry.backward.graph


def _ops(graph) -> list:
    return [n.name for n in graph.nodes]


def _check_bits(fn):
    x = _x()
    want = _grad(fn, x)
    for _ in range(3):              # interpreted, then the plan function
        got = _grad(COMPILED[fn], x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    return want


def test_split_backward_is_one_cat_with_eagers_signed_zeros():
    want = _check_bits(_qkv)
    assert (want[0, :2] == 0).all() and not np.signbit(want[0, :2]).any()   # the +0.0 eager gives
    ops = _ops(_backward_graph(COMPILED[_qkv]))
    assert ops.count("aten::cat") == 1 and "aten::add.Tensor" not in ops and "const" not in ops, ops


def test_gap_between_gradients_is_one_zero_piece():
    _check_bits(_q_and_v)
    g = _backward_graph(COMPILED[_q_and_v])
    ops = _ops(g)
    assert ops.count("aten::cat") == 1 and ops.count("const") == 1 and "aten::add.Tensor" not in ops, ops
    (cat,) = [n for n in g.nodes if n.name == "aten::cat"]
    assert len(cat.args[0]) == 3


def test_overlapping_gradients_still_add():
    _check_bits(_overlap)
    assert "aten::add.Tensor" in _ops(_backward_graph(COMPILED[_overlap]))


def test_one_piece_keeps_its_negative_zero():
    want = _check_bits(_only_q)
    assert np.signbit(want[:, :2]).any()
