"""Compiled calls allocate large outputs from the output pool: a previous
output's memory comes back only when nothing (tensor, view, NumPy array,
autograd's saved tensors, a pending lazy value) can read it, and results equal
eager mode's."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import bufferpool
from dispatch_jit.compiler import compile
from dispatch_jit.compiler.lazy import mode

N = 4096          # 16 KiB of float32: pooled once min_bytes is lowered below it


@pytest.fixture(autouse=True)
def small_pool():
    p = bufferpool.pool
    old = (p.max_bytes, p.min_bytes)
    p.set_limits(max_bytes=1 << 24, min_bytes=4096)
    p.clear()
    yield p
    p.set_limits(*old)
    p.clear()


def addr(t) -> int:
    return t.numpy().__array_interface__["data"][0]


def chain(x):
    return x * 2.0 + 1.0


cf = compile(chain)


def x_(n=N, seed=0):
    return dj.from_numpy(np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32))


def test_output_memory_is_reused_once_dropped(small_pool):
    x = x_()
    want = chain(x).numpy()
    y = cf(x)
    first = addr(y)
    y2 = cf(x)                                   # y alive: other memory
    assert addr(y2) != first
    del y
    before = small_pool.info().hits
    y3 = cf(x)
    assert addr(y3) == first and small_pool.info().hits == before + 1
    np.testing.assert_array_equal(y3.numpy(), want)
    np.testing.assert_array_equal(y2.numpy(), want)


@pytest.mark.parametrize("keep", [
    lambda y: y[5:],                              # a tensor view
    lambda y: y.numpy(),                          # the NumPy array itself
    lambda y: y.numpy()[::2],                     # a NumPy view
    lambda y: y.reshape((64, -1)),                # a reshaped tensor
    lambda y: np.asarray(y),                      # __array__
    lambda y: dj.from_numpy(y.numpy()),           # another tensor over the same memory
], ids=["view", "numpy", "numpy-view", "reshape", "asarray", "from_numpy"])
def test_live_views_keep_the_memory(keep):
    x = x_()
    y = cf(x)
    kept = keep(y)
    snapshot = np.array(kept, copy=True)
    del y
    zs = [cf(x_(seed=s)) for s in range(1, 4)]   # would overwrite a reused block
    for z in zs:
        assert not np.shares_memory(np.asarray(kept), z.numpy())
    np.testing.assert_array_equal(np.asarray(kept), snapshot)


def test_tensor_saved_for_autograd_is_not_overwritten():
    x = x_()
    w = dj.from_numpy(np.ones(N, np.float32)).requires_grad_(True)
    y = cf(x)
    loss = (w * y).sum()                         # MulBackward saves y
    del y
    for s in range(1, 4):
        cf(x_(seed=s))
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), chain(x).numpy())


def test_grad_inputs_through_compiled_function():
    x = x_().requires_grad_(True)
    y = cf(x)
    (y * y).sum().backward()
    cf(x_(seed=5))
    want = 2 * (x.detach().numpy() * 2 + 1) * 2
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


def test_out_argument_of_a_live_output():
    x = x_()
    y = cf(x)
    dj.add(x, 1.0, out=y)                        # eager writes into the pooled output
    z = cf(x)
    assert not np.shares_memory(y.numpy(), z.numpy())
    np.testing.assert_array_equal(y.numpy(), (x + 1.0).numpy())


def test_multi_output_and_strided_paths():
    def two(a, b):
        return a * b, a - b
    f2 = compile(two)
    a = x_()
    b = x_(seed=1)
    bt = dj.from_numpy(np.random.default_rng(2).uniform(-1, 1, (2 * N,)).astype(np.float32))[::2]
    for bb in (b, bt):                            # flat, then strided (non-contiguous b)
        p, m = f2(a, bb)
        assert not np.shares_memory(p.numpy(), m.numpy())
        np.testing.assert_array_equal(p.numpy(), (a * bb).numpy())
        np.testing.assert_array_equal(m.numpy(), (a - bb).numpy())
        del p
        p2, m2 = f2(a, bb)
        assert not np.shares_memory(m.numpy(), p2.numpy()) and not np.shares_memory(m.numpy(), m2.numpy())
        np.testing.assert_array_equal(m.numpy(), (a - bb).numpy())


def test_lazy_mode_outputs_come_from_the_pool(small_pool):
    x = x_()
    want = chain(x).numpy()
    with mode("compiled"):
        y = chain(x)
        y.numpy()
        first = addr(y)
        del y
        before = small_pool.info().hits
        z = chain(x)
        held = chain(x)
        np.testing.assert_array_equal(z.numpy(), want)
        np.testing.assert_array_equal(held.numpy(), want)
    assert small_pool.info().hits > before
    assert first in (addr(z), addr(held))
    assert not np.shares_memory(z.numpy(), held.numpy())


def test_small_outputs_bypass_the_pool(small_pool):
    x = x_(16)
    before = small_pool.info()
    cf(x)
    after = small_pool.info()
    assert (after.hits, after.misses) == (before.hits, before.misses)


def test_outputs_cse_merged_are_still_separate_memory():
    # x * 2 twice is one value after cse; eager mode returns two tensors with their own memory
    f = compile(lambda x: (x * 2.0, x * 2.0, x.reshape((2, -1)), x.reshape((2, -1))))
    x = x_(8)
    a, b, v, w = f(x)
    assert a is not b and not np.shares_memory(a.numpy(), b.numpy())
    assert v is not w and np.shares_memory(v.numpy(), w.numpy())     # views of x, as in eager mode
    a[0] = 100.0
    assert b[0].item() == (x[0] * 2.0).item()
    with mode("compiled"):
        c, d = x * 3.0, x * 3.0
        c[0] = -1.0
        assert d[0].item() == (x[0] * 3.0).item()
