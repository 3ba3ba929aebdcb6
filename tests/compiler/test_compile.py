"""Compiled mode end to end: compiled == eager == NumPy over a table of chains,
cache behaviour, fallbacks.  Compiles cost 0.1-0.5 s: chains share structures
and use tiny arrays."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler import compile

rng = np.random.default_rng(0)


def T(shape, dtype=np.float32, lo=-2.0, hi=2.0):
    if np.dtype(dtype).kind in "iu":
        return dj.from_numpy(rng.integers(-5, 6, size=shape).astype(dtype))
    return dj.from_numpy(rng.uniform(lo, hi, size=shape).astype(dtype))


def headline(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def assert_same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_headline_matches_eager_and_numpy():
    f = compile(headline)
    a, b, c = T((5, 7)), T((5, 7)), T((5, 7))
    got = f(a, b, c)
    assert_same(got, headline(a, b, c))
    A, B, C = a.numpy(), b.numpy(), c.numpy()
    ref = np.maximum((A * B + C) * np.float32(2) - A, 0) * np.exp(-B)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-7)
    assert len(f.cache_info()) == 7 and f.cache_info().traces == 1


# (name, function, input builder, NumPy reference or None)
CHAINS = [
    ("scalars", lambda a: (a * 2 + 1) - 0.5 / (a * a + 1.0), lambda: [T((4, 3))],
     lambda a: (a * 2 + 1) - np.float32(0.5) / (a * a + 1)),
    ("broadcast", lambda a, b, c: a * b + c, lambda: [T((3, 4)), T((4,)), T((3, 1))], lambda a, b, c: a * b + c),
    ("int_promotion", lambda a, b: (a * b + 1) * 1.5 - a, lambda: [T((6,), np.int32), T((6,), np.int64)],
     lambda a, b: ((a.astype(np.int64) * b + 1) * np.float32(1.5)).astype(np.float32) - a),
    ("int_float_mix", lambda a, b: a + b * 3, lambda: [T((2, 5), np.int32), T((2, 5))],
     lambda a, b: a + b * np.float32(3)),
    ("compare_where", lambda a, b: dj.where(a > b, a - b, b * 2.0), lambda: [T((4, 4)), T((4, 4))],
     lambda a, b: np.where(a > b, a - b, b * np.float32(2))),
    ("logical", lambda a, b: dj.logical_and(a > 0, b < 0.5) | (a < -1), lambda: [T((9,)), T((9,))],
     lambda a, b: np.logical_and(a > 0, b < 0.5) | (a < -1)),
    ("noncontiguous", lambda a, b: dj.sqrt(dj.abs(a)) * b + a, lambda: [T((5, 3)).T, T((10, 3))[::2].T],
     lambda a, b: np.sqrt(np.abs(a)) * b + a),
    ("float64_unary", lambda a: dj.tanh(dj.sigmoid(a)) + dj.log1p(a * a), lambda: [T((3, 3), np.float64)],
     lambda a: np.tanh(1 / (1 + np.exp(-a))) + np.log1p(a * a)),
    ("zero_dim_promotion", lambda a, s: a * s + s, lambda: [T((4,)), dj.tensor(2.5, dtype=dj.float64)],
     lambda a, s: a * np.float32(s) + np.float32(s)),
    ("clamp", lambda a: dj.clamp(a * 3.0, -1.0, 1.0) + 1, lambda: [T((2, 3))],
     lambda a: np.clip(a * np.float32(3), -1, 1) + 1),
    ("matmul_between", lambda a, b, c: dj.relu((a * 2) @ b) * c + 1.0, lambda: [T((3, 4)), T((4, 2)), T((3, 2))],
     lambda a, b, c: np.maximum((a * 2) @ b, 0) * c + 1),
    ("reduction_then_scalar", lambda a: (a * a + 1).sum() * 2.0 + 1.0, lambda: [T((4, 5))],
     lambda a: (a * a + 1).sum() * 2 + 1),
    ("silu_decomposes", lambda a, b: dj.silu(a) * b - a, lambda: [T((3, 3)), T((3, 3))],
     lambda a, b: a / (1 + np.exp(-a)) * b - a),
    ("zero_dim_only", lambda a: a * 2.0 + a, lambda: [dj.tensor(1.5)], lambda a: a * 2 + a),
    ("multiple_outputs", lambda a, b: (a + b, (a + b) * a, {"d": a - b}), lambda: [T((3,)), T((3,))], None),
]


@pytest.mark.parametrize("name,fn,make,ref", CHAINS, ids=[c[0] for c in CHAINS])
def test_chain(name, fn, make, ref):
    inputs = make()
    f = compile(fn)
    got = f(*inputs)
    want = fn(*inputs)
    if isinstance(want, tuple):
        assert_same(list(got[:2]), list(want[:2]))
        assert_same(got[2]["d"], want[2]["d"])
    else:
        assert_same(got, want)
        if ref is not None:
            np.testing.assert_allclose(got.numpy(), ref(*[x.numpy() for x in inputs]), rtol=2e-6, atol=1e-6)
    assert f.cache_info().traces == 1
    assert f.cache_info().eager_calls == 0, f.explain()


def test_cse_and_one_loop():
    f = compile(lambda a, b: a * b + a * b + dj.exp(a * b))
    a, b = T((4,)), T((4,))
    assert_same(f(a, b), a * b + a * b + dj.exp(a * b))
    after = f.graph().split("-- after")[1]
    assert after.count("aten::mul.Tensor") == 1
    code = f.code()
    assert code.count("for ") == 1 and code.count("def fused_") == 1
    strided = f.code(flat=False)
    assert strided.count("for ") == 1   # 1-D: one loop in the strided nest too


def test_show_code_prints_one_loop(capsys):
    f = compile(headline)
    f(T((2, 3)), T((2, 3)), T((2, 3)))
    f.show_code()
    out = capsys.readouterr().out
    assert out.count("for i in prange") == 1 and "_exp_f32" in out and "def fused_0" in out


def test_sizes_do_not_recompile_dtype_does():
    # a structure of its own, so this test's compile count is exact
    f = compile(lambda a, b: dj.atan(a) * b - dj.cos(b))
    for n in range(1, 101):
        a, b = T((n,)), T((n,))
        assert_same(f(a, b), dj.atan(a) * b - dj.cos(b))
    info = f.cache_info()
    assert (info.calls, info.hits, info.traces, info.compiles, info.entries) == (100, 99, 1, 1, 1)
    a64, b64 = T((5,), np.float64), T((5,), np.float64)
    assert_same(f(a64, b64), dj.atan(a64) * b64 - dj.cos(b64))
    info = f.cache_info()
    assert (info.traces, info.compiles, info.entries) == (2, 2, 2)
    text = f.explain()
    assert "argument 'a': dtype float32 -> float64" in text
    assert "argument 'b': dtype float32 -> float64" in text


def test_contiguity_is_part_of_the_key():
    f = compile(headline)
    a = T((4, 3))
    f(a, a, a)
    at = T((3, 4)).T
    assert_same(f(at, a, a), headline(at, a, a))
    assert f.cache_info().traces == 2
    assert "contiguous True -> False" in f.explain()


@pytest.mark.parametrize("body,reason", [
    (lambda a: a * 2 if bool((a > 0).all()) else a, "bool()"),
    (lambda a: a * (a.sum().item()), "item()"),
    (lambda a: dj.from_numpy(a.numpy() * 2) + a, "numpy()"),
    (lambda a: a + len(a.tolist()), "tolist()"),
    (lambda a: a * 2 + sum(a), "iteration"),
])
def test_data_dependence_falls_back_to_eager(body, reason):
    f = compile(body)
    a = T((3,))
    assert_same(f(a), body(a))
    assert_same(f(a), body(a))
    info = f.cache_info()
    assert info.eager_calls == 2 and info.traces == 1 and info.compiles == 0
    assert reason in f.explain()


def test_a_size_read_specializes_on_sizes_instead_of_falling_back():
    body = lambda a: a.reshape((a.shape[0], -1)) * 2    # noqa: E731
    f = compile(body)
    for n in (3, 3, 4):
        a = T((n,))
        assert_same(f(a), body(a))
    info = f.cache_info()
    assert info.eager_calls == 0 and info.traces == 3 and info.entries == 2, info
    assert "keyed by input sizes" in f.explain()


def test_swallowed_abort_still_falls_back():
    def g(a):
        try:
            flag = bool(a.sum() > 0)
        except Exception:
            flag = True
        return a * 2 if flag else a
    f = compile(g)
    a = T((3,), lo=1, hi=2)
    assert_same(f(a), a * 2)
    assert f.cache_info().eager_calls == 1


def test_requires_grad_runs_eagerly_with_gradients():
    f = compile(lambda a, b: (a * b + 1.0).sum())
    a = dj.tensor([1.0, 2.0], requires_grad=True)
    b = dj.tensor([3.0, 4.0])
    f(a, b).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    assert "requires grad" in f.explain()
    with dj.no_grad():
        r = f(a.detach(), b)
    assert r.item() == 13.0


def test_captured_tensor_is_an_implicit_input():
    w = T((3,))
    f = compile(lambda a: a * w + 1.0)
    a = T((3,))
    assert_same(f(a), a * w + 1.0)
    assert "graph(%0: float32[1d], %1: float32[1d])" in f.graph()     # w is read at every call
    w = T((3,))
    assert_same(f(a), a * w + 1.0)
    assert f.cache_info().traces == 1


def test_recompile_limit_warns_then_runs_eagerly():
    f = compile(lambda a: a * 2.0 + 1.0, max_recompiles=2)
    f(T((2,)))
    f(T((2,), np.float64))
    with pytest.warns(RuntimeWarning, match="recompile limit"):
        r = f(T((2, 2)))
    assert r.shape == (2, 2)
    info = f.cache_info()
    assert info.traces == 2 and info.eager_calls == 1


def test_outputs_smaller_than_the_loop_run_eagerly():
    fn = lambda a, b: (a * 2.0 + 1.0, (a * 2.0 + 1.0) * b)   # noqa: E731
    f = compile(fn)
    a, b = T((3, 1)), T((1, 4))
    got, want = f(a, b), fn(a, b)
    assert_same(list(got), list(want))
    assert "smaller than the loop" in f.explain()
    a2, b2 = T((3, 4)), T((3, 4))
    assert_same(list(f(a2, b2)), list(fn(a2, b2)))


def test_broadcast_error_is_eagers():
    f = compile(lambda a, b: a * b + 1.0)
    with pytest.raises(dj.errors.BroadcastError):
        f(T((3,)), T((4,)))


def test_dtype_error_is_eagers():
    f = compile(lambda a: dj.bitwise_and(a, a) + 1)
    with pytest.raises(dj.errors.DTypeError):
        f(T((3,)))


def test_non_tensor_arguments_are_keyed_by_value():
    f = compile(lambda a, k, axis: (a * k).sum(axis=axis))
    a = T((3, 2))
    assert_same(f(a, 2.0, 0), (a * 2.0).sum(axis=0))
    assert_same(f(a, 2.0, 1), (a * 2.0).sum(axis=1))
    assert f.cache_info().entries == 2
    assert "argument 'axis': value 0 -> 1" in f.explain()


def test_large_parallel_matches_eager():
    f = compile(headline)
    n = 1 << 18
    a, b, c = T((n,)), T((n,)), T((n,))
    assert_same(f(a, b, c), headline(a, b, c))


def test_tracer_key_outside_a_trace_falls_through():
    a = T((3,))
    with dj.IncludeDispatchKeyGuard(dj.DispatchKey.Tracer):
        r = a * 2.0
    assert_same(r, a * 2.0)


def test_explain_names_requires_grad_of_a_cpu_tensor():
    # the recompile reason decodes the Autograd keys from the signature (AutogradCPU, not a
    # hand-spelled bit position that missed it)
    f = compile(lambda a: dj.exp(a) * 2.0)
    f(T((3,), np.float64))
    f(T((3,), np.float64).requires_grad_())
    assert "requires_grad False -> True" in f.explain()
