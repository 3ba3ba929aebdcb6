"""Random short elementwise chains: compiled must equal eager bit for bit
(same scalar expressions, same per-op casts).  With views (transpose,
slicing with steps, integer indices, unsqueeze, expand, reshape) between the
ops, compiled == eager bit for bit and == NumPy up to rounding."""

import numpy as np
from hypothesis import given, settings, strategies as st

import dispatch_jit as dj
from dispatch_jit.compiler import compile

BINARY = [dj.add, dj.sub, dj.mul, dj.maximum, dj.minimum, dj.div]
UNARY = [dj.neg, dj.abs, dj.exp, dj.tanh, dj.sigmoid, lambda x: dj.sqrt(dj.abs(x))]
SHAPES = [(2, 3), (3,), (2, 1), (1, 3)]


@st.composite
def programs(draw):
    n_in = draw(st.integers(2, 3))
    dtypes = [draw(st.sampled_from([np.float32, np.float64])) for _ in range(n_in)]
    shapes = [(2, 3)] + [draw(st.sampled_from(SHAPES)) for _ in range(n_in - 1)]
    steps = []
    for k in range(draw(st.integers(1, 5))):
        n = n_in + k
        if draw(st.booleans()):
            other = draw(st.one_of(st.tuples(st.just("v"), st.integers(0, n - 1)),
                                   st.tuples(st.just("c"), st.sampled_from([0.5, 2.0, -1.5, 3]))))
            steps.append(("b", draw(st.integers(0, len(BINARY) - 1)), draw(st.integers(0, n - 1)), other))
        else:
            steps.append(("u", draw(st.integers(0, len(UNARY) - 1)), draw(st.integers(0, n - 1)), None))
    seed = draw(st.integers(0, 2**16))
    return dtypes, shapes, steps, seed


def run(steps, *inputs):
    vals = list(inputs)
    for kind, op, i, other in steps:
        if kind == "u":
            vals.append(UNARY[op](vals[i]))
        else:
            vals.append(BINARY[op](vals[i], vals[other[1]] if other[0] == "v" else other[1]))
    return vals[-1]


@settings(max_examples=25, deadline=None)
@given(programs())
def test_random_chain_compiled_equals_eager(prog):
    dtypes, shapes, steps, seed = prog
    rng = np.random.default_rng(seed)
    inputs = [dj.from_numpy(rng.uniform(-2, 2, size=s).astype(d)) for s, d in zip(shapes, dtypes)]
    f = compile(lambda *xs: run(steps, *xs))
    got, want = f(*inputs), run(steps, *inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# -- the same with views (compiler/views.py) between the ops, checked against NumPy too ------------
NP_BINARY = [np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.divide]
NP_UNARY = [np.negative, np.abs, np.exp, np.tanh, lambda x: 1 / (1 + np.exp(-x)), lambda x: np.sqrt(np.abs(x))]
# (applies to shape s, dj view of x, NumPy view of x, shape after); s is static (the trace never reads sizes)
VIEWS = [
    (lambda s: len(s) == 2, lambda x, s: x.T, lambda x, s: x.T, lambda s: s[::-1]),
    (lambda s: len(s) == 2, lambda x, s: x.transpose(0, 1), lambda x, s: x.T, lambda s: s[::-1]),
    (lambda s: len(s) >= 1, lambda x, s: x[::-1], lambda x, s: x[::-1], lambda s: s),
    (lambda s: len(s) >= 1, lambda x, s: x[..., ::-2], lambda x, s: x[..., ::-2],
     lambda s: s[:-1] + ((s[-1] + 1) // 2,)),
    (lambda s: len(s) >= 1 and s[0] >= 2, lambda x, s: x[1:], lambda x, s: x[1:], lambda s: (s[0] - 1,) + s[1:]),
    (lambda s: len(s) == 2, lambda x, s: x[-1], lambda x, s: x[-1], lambda s: s[1:]),
    (lambda s: len(s) == 1, lambda x, s: x.unsqueeze(0), lambda x, s: x[None], lambda s: (1,) + s),
    (lambda s: len(s) == 2 and s[0] == 1, lambda x, s: x.expand((2, -1)),
     lambda x, s: np.broadcast_to(x, (2, s[1])), lambda s: (2,) + s[1:]),
    (lambda s: len(s) == 2, lambda x, s: x.reshape((-1,)), lambda x, s: x.reshape(-1), lambda s: (s[0] * s[1],)),
    (lambda s: len(s) == 2, lambda x, s: x.reshape(s[::-1]), lambda x, s: x.reshape(s[::-1]), lambda s: s[::-1]),
]


def _broadcasts(s, t) -> bool:
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


@st.composite
def view_programs(draw):
    n_in = draw(st.integers(1, 3))
    dtypes = [draw(st.sampled_from([np.float32, np.float64])) for _ in range(n_in)]
    shapes = [(2, 3)] + [draw(st.sampled_from(SHAPES)) for _ in range(n_in - 1)]
    vshapes = list(shapes)
    steps = []
    for _ in range(draw(st.integers(2, 6))):
        i = draw(st.integers(0, len(vshapes) - 1))
        s = vshapes[i]
        kind = draw(st.sampled_from("vvbu"))
        if kind == "v":
            ok = [j for j, v in enumerate(VIEWS) if v[0](s)]
            if ok:
                j = draw(st.sampled_from(ok))
                steps.append(("v", j, i, s))
                vshapes.append(VIEWS[j][3](s))
                continue
            kind = "u"
        if kind == "b":
            partners = [j for j, t in enumerate(vshapes) if _broadcasts(s, t)]
            other = draw(st.one_of(st.tuples(st.just("v"), st.sampled_from(partners)),
                                   st.tuples(st.just("c"), st.sampled_from([0.5, 2.0, -1.5, 3]))))
            steps.append(("b", draw(st.integers(0, len(BINARY) - 1)), i, other))
            vshapes.append(np.broadcast_shapes(s, vshapes[other[1]]) if other[0] == "v" else s)
        else:
            steps.append(("u", draw(st.integers(0, len(UNARY) - 1)), i, None))
            vshapes.append(s)
    return dtypes, shapes, steps, draw(st.integers(0, 2**16))


def run_views(steps, inputs, numpy=False):
    unary, binary = (NP_UNARY, NP_BINARY) if numpy else (UNARY, BINARY)
    vals = list(inputs)
    for kind, op, i, other in steps:
        if kind == "v":
            vals.append(VIEWS[op][2 if numpy else 1](vals[i], other))
        elif kind == "u":
            vals.append(unary[op](vals[i]))
        else:
            vals.append(binary[op](vals[i], vals[other[1]] if other[0] == "v" else other[1]))
    return vals[-1]


@settings(max_examples=20, deadline=None)
@given(view_programs())
def test_random_view_chain_compiled_equals_eager_and_numpy(prog):
    dtypes, shapes, steps, seed = prog
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2, 2, size=s).astype(d) for s, d in zip(shapes, dtypes)]
    inputs = [dj.from_numpy(a) for a in arrays]
    f = compile(lambda *xs: run_views(steps, xs))
    got, want = f(*inputs), run_views(steps, inputs)
    assert f.cache_info().eager_calls == 0, f.explain()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with np.errstate(all="ignore"):
        ref = np.asarray(run_views(steps, arrays, numpy=True))
    assert ref.dtype == want.numpy().dtype
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)
