"""Random short elementwise chains: compiled must equal eager bit for bit
(same scalar expressions, same per-op casts)."""

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
