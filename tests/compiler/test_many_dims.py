"""The compiled mode past NumPy's 32 dimensions (issue 12): tensors go to 64, and the compiler's
own broadcasting used ``np.broadcast_shapes``, which raised NumPy's RuntimeError ("only supports
up to 32 dimensions") from inside the compiler.  It now uses dispatch_jit.broadcast; a fused
region deeper than the generated loop nest (kernels.support.loops.MAX_LOOP_NDIM) whose inputs are not all
contiguous runs eagerly and says so.  The reference is eager, and NumPy written by hand."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.broadcast import broadcast_shapes


def _operands(device="cpu"):
    a = np.arange(6.0).reshape((2, 3) + (1,) * 38)
    b = np.array([0.5, -1.0]).reshape((1,) * 39 + (2,))
    return a, b, dj.from_numpy(a).to(device), dj.from_numpy(b).to(device)


def _chain(x, y):
    return (x * y + 1.0) * 2.0 - x


def _want(a, b):
    return (a * b + 1.0) * 2.0 - a


def test_broadcast_shapes_past_32_dims():
    assert broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert broadcast_shapes((1,) * 40, (5,), (3, 1) + (1,) * 38) == (3,) + (1,) * 38 + (5,)
    with pytest.raises(ValueError):
        broadcast_shapes((2,) + (1,) * 39, (3,) + (1,) * 39)


@pytest.mark.parametrize("mode", ["compile", "lazy"])
def test_forty_dim_broadcast_chain_matches_eager(mode):
    a, b, x, y = _operands()
    want = _chain(x, y).numpy()
    np.testing.assert_array_equal(want, _want(a, b))
    if mode == "compile":
        f = dj.compile(_chain)
        for _ in range(2):                       # the trace, then the cached plan
            got = f(x, y).numpy()
        assert "40 dimensions" in f.explain()    # said, not silent
    else:
        with dj.execution_mode("compiled"):
            got = _chain(x, y).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["compile", "lazy"])
def test_forty_dim_contiguous_chain_with_reductions(mode):
    c = np.arange(12.0).reshape((2, 3, 2) + (1,) * 37)
    t = dj.from_numpy(c)

    def f(t):
        u = t * 2.0 + 1.0
        return u.sum(), u.sum(1), dj.exp(-u)

    if mode == "compile":
        got = [g.numpy() for g in dj.compile(f)(t)]
    else:
        with dj.execution_mode("compiled"):
            got = [g.numpy() for g in f(t)]
    u = c * 2.0 + 1.0
    assert got[0] == 144.0 and got[0] == u.sum()
    np.testing.assert_array_equal(got[1], u.sum(1))
    np.testing.assert_array_equal(got[2], np.exp(-u))


def test_forty_dim_chain_then_view_in_lazy_mode():
    # the view is sunk to the leaves of different shapes, which are expanded first (views._expand_all)
    a, b, x, y = _operands()
    want = np.swapaxes(_want(a, b), 0, 39)
    with dj.execution_mode("compiled"):
        got = _chain(x, y).transpose(0, 39).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device or simulator")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_forty_dim_chain_on_cuda():
    a, b, x, y = _operands("cuda")                # 12 elements: cheap under the simulator
    f = dj.compile(_chain)
    np.testing.assert_array_equal(f(x, y).cpu().numpy(), _want(a, b))
