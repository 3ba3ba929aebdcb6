"""Views inside compiled chains (compiler/views.py): traced, sunk onto the
chain's leaves, read by one fused loop with their strides; compiled == eager
(bit for bit) == NumPy.  Compiles cost 0.1-0.5 s: tiny arrays, and chains
share loop structures where they can."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler import compile

rng = np.random.default_rng(5)


def T(*shape, dtype=np.float32):
    return dj.from_numpy(rng.uniform(-2.0, 2.0, size=shape).astype(dtype))


def assert_same(got, want):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def loops_and_steps(f):
    line = next(ln for ln in f.explain().splitlines() if ln.startswith("compiled plan"))
    loops, steps = line.split(": ")[1].split(", ")
    return int(loops.split()[0]), int(steps.split()[0])


# (name, function, inputs, NumPy reference, fused loops expected)
CASES = [
    ("transpose_then_add", lambda a, b: (a * 2.0).T + b, lambda: [T(3, 4), T(4, 3)],
     lambda a, b: (a * np.float32(2)).T + b, 1),
    ("reshape_input_then_sum", lambda a, b: (a.reshape((4, 4)) * b).sum(), lambda: [T(16), T(4, 4)],
     lambda a, b: (a.reshape(4, 4) * b).sum(), 1),
    ("differences", lambda a: (a[1:] - a[:-1]) * 0.5, lambda: [T(9)], lambda a: (a[1:] - a[:-1]) * np.float32(0.5), 1),
    ("slice_of_broadcast_chain", lambda a, b, c: (a * b)[1:, ::2] - c, lambda: [T(3, 4), T(1, 4), T(2, 2)],
     lambda a, b, c: (a * b)[1:, ::2] - c, 1),
    ("transpose_of_lower_ndim_leaf", lambda a, b, c: (a * b).T + c, lambda: [T(3, 4), T(4), T(4, 3)],
     lambda a, b, c: (a * b).T + c, 1),
    ("reshape_of_broadcast_chain", lambda a, b, c: (a * b).reshape((-1, 2)) + c, lambda: [T(2, 3), T(2, 1), T(3, 2)],
     lambda a, b, c: (a * b).reshape(-1, 2) + c, 1),
    ("int_index_and_none", lambda a, b: (a - b)[None, 2, ::-1] * a[0], lambda: [T(3, 4), T(1, 4)],
     lambda a, b: (a - b)[None, 2, ::-1] * a[0], 1),
    ("expand_unsqueeze", lambda a, b: (a * 2.0).unsqueeze(0).expand((3, 4)) + b, lambda: [T(4), T(3, 4)],
     lambda a, b: np.broadcast_to(a * np.float32(2), (3, 4)) + b, 1),
    ("view_chain_transpose_slice", lambda a, b: dj.exp(a * 2.0).T[::2] + b, lambda: [T(3, 4), T(2, 3)],
     lambda a, b: np.exp(a * np.float32(2)).T[::2] + b, 1),
    ("permute3_narrow", lambda a, b: (a - b).permute((2, 0, 1)).narrow(0, 1, 2) * 3.0, lambda: [T(2, 3, 4), T(4)],
     lambda a, b: (a - b).transpose(2, 0, 1)[1:3] * np.float32(3), 1),
    ("transpose_then_axis_sum", lambda a, b: (a * b).T.sum(0), lambda: [T(3, 4), T(3, 4)],
     lambda a, b: (a * b).T.sum(0), 1),
    ("two_transposed_chains", lambda a, b: (a * 2.0).T + (b * 3.0).T, lambda: [T(3, 4), T(3, 4)],
     lambda a, b: (a * np.float32(2)).T + (b * np.float32(3)).T, 1),
    ("zero_dim_operand", lambda a, s: (a * s)[1] + a[0], lambda: [T(3, 4), dj.tensor(2.0, dtype=dj.float64)],
     lambda a, s: (a * np.float32(s))[1] + a[0], 1),
    ("int_and_float", lambda a, b: (a * b)[::-1] + 1, lambda: [T(5), dj.from_numpy(np.arange(5, dtype=np.int32))],
     lambda a, b: (a * b)[::-1] + 1, 1),
]


@pytest.mark.parametrize("name,fn,make,ref,loops", CASES, ids=[c[0] for c in CASES])
def test_view_chain_is_one_loop(name, fn, make, ref, loops):
    inputs = make()
    f = compile(fn)
    got = f(*inputs)
    assert_same(got, fn(*inputs))
    np.testing.assert_allclose(got.numpy(), ref(*[x.numpy() for x in inputs]), rtol=1e-6, atol=1e-6)
    info = f.cache_info()
    assert info.traces == 1 and info.eager_calls == 0, f.explain()
    assert loops_and_steps(f)[0] == loops, f.graph()
    # no view is left between two parts of the chain: every remaining view reads an input
    after = f.graph().split("-- after")[1]
    assert "fused regions run eagerly" not in f.explain()
    for line in after.splitlines()[1:]:
        if line.startswith("  %") and ("view" in line or "permute" in line or "getitem" in line):
            assert "fused" not in line


def test_graph_shows_the_view_moved_onto_the_input():
    f = compile(lambda a, b: (a * 2.0).T + b)
    f(T(2, 3), T(3, 2))
    after = f.graph().split("-- after dce, cse, fusion --\n")[1]
    lines = after.splitlines()
    assert lines[1].strip().startswith("%") and "aten::permute(%0, (1, 0))" in lines[1]
    assert "fused#0" in lines[2]


def test_sizes_do_not_recompile():
    # a loop structure of its own, so the compile count is exact; a.T is never contiguous here
    f = compile(lambda a, b: dj.atan(a * 3.0).T[1:] - dj.cos(b))
    for n in range(2, 102):
        a, b = T(n, n % 7 + 3), T(n % 7 + 2, n)
        assert_same(f(a, b), dj.atan(a * 3.0).T[1:] - dj.cos(b))
    info = f.cache_info()
    assert (info.calls, info.traces, info.compiles, info.entries, info.eager_calls) == (100, 1, 1, 1, 0)


def test_slicing_traces_instead_of_aborting():
    f = compile(lambda a: a[1:] - a[:-1])
    a = T(6)
    assert_same(f(a), a[1:] - a[:-1])
    assert f.cache_info().eager_calls == 0
    assert "getitem(%0, (1:,))" in f.graph()


def test_advanced_indexing_is_traced_as_the_index_op():
    f = compile(lambda a, i: a[i] * 2.0)
    a, i = T(5), dj.tensor([0, 3])
    assert_same(f(a, i), a[i] * 2.0)
    assert f.cache_info().eager_calls == 0
    assert "aten::index.Tensor" in f.explain()


def test_reshape_of_noncontiguous_input_copies_and_says_so():
    f = compile(lambda a, b: (a.reshape((-1,)) * b).sum())
    a = T(4, 3).T          # not contiguous: NumPy must copy to reshape it
    b = T(12)
    got = f(a, b)
    assert_same(got, (a.reshape((-1,)) * b).sum())
    text = f.explain()
    assert "copied its input 1 time(s)" in text
    assert f.cache_info().eager_calls == 0


def test_squeeze_aborts_the_trace():
    # which dims squeeze drops depends on sizes: typed on a size-1 placeholder it was 0-d, and the
    # fused chain promoted as if it were (float32 where eager gives float64)
    f = compile(lambda a, b: a * b.squeeze() + 1.0)
    a, b = T(4), T(4, 1, dtype=np.float64)
    got = f(a, b)
    assert_same(got, a * b.squeeze() + 1.0)
    assert got.dtype == dj.float64
    assert "squeeze" in f.explain()


def test_multi_use_chain_stays_materialized_and_explains():
    f = compile(lambda a, b: ((a * 2.0).T + b, a * 2.0))
    a, b = T(3, 4), T(4, 3)
    assert_same(f(a, b), ((a * 2.0).T + b, a * 2.0))
    assert "so it is materialized anyway" in f.explain()


def test_returned_view_is_not_sunk():
    # materializing the chain in its own layout and returning a view of it is the cheaper order
    f = compile(lambda a: (a * 2.0 + 1.0).T)
    a = T(3, 4)
    assert_same(f(a), (a * 2.0 + 1.0).T)
    assert "no elementwise op or reduction reads the view" in f.explain()


def test_broadcast_error_is_eager_modes():
    f = compile(lambda a, b, c: (a * b)[1:] + c)
    with pytest.raises(ValueError):
        f(T(3, 4), T(2, 4), T(2, 4))


def test_contiguity_flip_gives_right_answers():
    f = compile(lambda a, b: (a * b).T + 1.0)
    a, b = T(3, 4), T(3, 4)
    assert_same(f(a, b), (a * b).T + 1.0)
    at = T(4, 3).T
    assert_same(f(at, b), (at * b).T + 1.0)
    assert f.cache_info().traces == 2


def test_gradients_through_a_view_chain_match_eager():
    def fn(a, b):
        return ((a * 2.0).T[1:] * b).sum()
    f = compile(fn)
    a1, b1 = T(3, 4), T(3, 3)
    a1.requires_grad_(True), b1.requires_grad_(True)
    a2, b2 = a1.detach().requires_grad_(True), b1.detach().requires_grad_(True)
    f(a1, b1).backward()
    fn(a2, b2).backward()
    assert_same(a1.grad, a2.grad)
    assert_same(b1.grad, b2.grad)


def test_tiled_loop_for_transposed_reads():
    # a transposed input with a long inner dimension takes the tiled nest (codegen.crosswise);
    # sizes that are not multiples of the tile
    f = compile(lambda a, b: dj.maximum(a.T * 2.0, b) - a.T)
    a, b = T(2049, 19), T(19, 2049)
    assert_same(f(a, b), dj.maximum(a.T * 2.0, b) - a.T)
    step = f._entry().plan.fused[0]
    assert list(step.loops) == [(False, False, True)]
    assert "tiled" in f.explain()
    a, b = T(7, 5), T(5, 7)                # a short inner dimension: the plain strided nest
    assert_same(f(a, b), dj.maximum(a.T * 2.0, b) - a.T)
    assert (False, False) in step.loops
    a3, b3 = T(2049, 3, 2), T(2, 3, 2049)  # 3-D: the last two dims are tiled inside the outer loop
    g = compile(lambda a, b: dj.maximum(a.permute((2, 1, 0)) * 2.0, b) - b)
    assert_same(g(a3, b3), dj.maximum(a3.permute((2, 1, 0)) * 2.0, b3) - b3)
    assert any(len(k) == 3 for k in g._entry().plan.fused[0].loops)
