"""Views and basic indexing of pending values in the global compiled mode (compiler/lazy): recorded
into the pending graph (no flush, no eager op) with the right shape and dtype, fused by
sink_views at the flush, and equal to eager mode bit for bit, aliasing included.  Compiles
cost 0.1-0.5 s: tiny arrays, and the cases share shapes and dtypes."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler import lazy
from dispatch_jit.compiler.lazy import LazyTensor, lazy_info, mode, set_mode

rng = np.random.default_rng(7)


def T(*shape, dtype=np.float32):
    x = rng.uniform(-4.0, 4.0, size=shape)
    return dj.from_numpy((x * 10 if np.dtype(dtype).kind == "i" else x).astype(dtype))


@pytest.fixture(autouse=True)
def _eager_after():
    yield
    set_mode("eager")


def _counts():
    i = lazy_info()
    return {k: i[k] for k in ("flushes", "eager_ops", "plans", "plan_hits")}


def _delta(before):
    now = _counts()
    return {k: now[k] - before[k] for k in now}


def recorded(fn, *inputs):
    """``fn(*inputs)`` (a tuple of tensors) in compiled mode: asserts that nothing was flushed or
    run eagerly while it recorded, and that shapes and dtypes were right before the flush; then
    compares the values with eager mode's, bit for bit.  Returns the compiled results."""
    want = fn(*inputs)
    with mode("compiled"):
        before = _counts()
        got = fn(*inputs)
        assert _delta(before)["flushes"] == 0 and _delta(before)["eager_ops"] == 0
        assert all(type(g) is LazyTensor for g in got)
        assert [(g.shape, g.dtype, g.ndim) for g in got] == [(w.shape, w.dtype, w.ndim) for w in want]
    for g, w in zip(got, want):
        assert type(g) is dj.Tensor and g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    return got


# (name, function returning a tuple, input shapes): every view op and index kind, of a pending value
CASES = [
    ("permute", lambda a, b: ((a * 2.0).permute(1, 0) + b,), [(3, 4), (4, 3)]),
    ("transpose", lambda a, b: (b * (a - 1.0).transpose(0, 1),), [(3, 4), (4, 3)]),
    ("transpose_negative", lambda a, b: ((a - 1.0).transpose(-1, -2) - b,), [(3, 4), (4, 3)]),
    ("T_is_the_result", lambda a, b: ((a * b).T,), [(3, 4), (3, 4)]),
    ("expand_minus_one", lambda a, b: ((a * 2.0).unsqueeze(0).expand(2, -1, -1) + b,), [(3, 4), (4,)]),
    ("expand_size_one", lambda a, b: ((a * b).expand(3, 4) - a,), [(3, 4), (1, 4)]),
    ("unsqueeze_negative", lambda a, b: ((a + 1.0).unsqueeze(-1) * 2.0, (a * b).unsqueeze(-3)), [(3, 4), (4,)]),
    ("view", lambda a, b: ((a + b).view(12) - 1.0, (a + b).view((2, -1))), [(3, 4), (3, 4)]),
    ("reshape_then_sum", lambda a, b: ((a + b).reshape(-1, 4).sum(1),), [(3, 4), (3, 4)]),
    ("reshape_minus_one", lambda a, b: ((a * b).reshape(2, -1, 3) + 1.0,), [(3, 4), (4,)]),
    ("flatten", lambda a, b: ((a * b).unsqueeze(0).flatten() * 2.0, (a - b).unsqueeze(0).flatten(0, -2)),
     [(3, 4), (3, 4)]),
    ("narrow_negative", lambda a, b: ((a * 2.0).narrow(-1, -3, 2) + (b - 1.0).narrow(1, 0, 2),),
     [(3, 4), (3, 4)]),
    ("slices", lambda a, b: ((a * b)[1:, ::2] - 1.0, (a - b)[::-1, -1:0:-2]), [(3, 4), (3, 4)]),
    ("ints_none_ellipsis", lambda a, b: ((a * b)[0] + 1.0, (a + b)[None], (a - b)[..., 1], (a * 2.0)[-1, 2]),
     [(3, 4), (3, 4)]),
    ("views_of_views", lambda a, b: ((a * 2.0).T[1:].unsqueeze(0)[:, ::2] + b,), [(3, 4), (3,)]),
    ("view_of_broadcast_chain", lambda a, b: ((a * b).T[1:] - 1.0, (a - b)[:, None, 1:]), [(3, 4), (1, 4)]),
    ("reshape_must_copy", lambda a, b: ((a * 2.0).T.reshape(-1) + 1.0, (a - b).T.flatten()), [(3, 4), (3, 4)]),
    ("list_and_numpy_int_args", lambda a, b: (dj.reshape(a * b, [np.int64(6), -1]) + 1.0, dj.permute(a - b, [1, 0])),
     [(3, 4), (3, 4)]),
    ("zero_dim", lambda a, b: ((a * b)[1, 2].unsqueeze(0) + 1.0, (a + b)[2, 3][None, ...]), [(3, 4), (3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_views_are_recorded_and_equal_eager(name, fn, shapes):
    recorded(fn, *[T(*s) for s in shapes])


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_other_dtypes(dtype):
    a, b = T(3, 4, dtype=dtype), T(4, dtype=dtype)
    recorded(lambda a, b: ((a * 2).T[1:] + (b + 1)[:3], (a - b)[::-1, 1].unsqueeze(0).expand(2, -1),
                           (a + b).sum(0)[1:]), a, b)
    # mixed: a view of one dtype meets a chain of another (promotion as eager mode's)
    recorded(lambda a, c: ((a * 2).T + c, (c - 1.0)[:, 0] * (a + 1)[0]), a, T(4, 3))


def test_a_view_fuses_into_one_loop():
    a, b = T(3, 4), T(4, 3)
    with mode("compiled"):
        before = _counts()
        y = (a * 2.0 + 1.0).T - b
        y.numpy()
        assert _delta(before)["flushes"] == 1
    plan = _last_plan(before)
    assert len(plan.fused) == 1
    # the view was moved onto the input: what is not the loop is a view of an input
    for n in plan.graph.nodes:
        assert n.op == "fused" or all(v in plan.graph.inputs for v in n.inputs()), plan.graph


def _last_plan(before):
    if _counts()["plans"] > before["plans"]:
        return list(lazy.state.state.plans.values())[-1]
    raise AssertionError("no new plan was built")


def test_same_chain_reuses_the_plan_and_other_statics_do_not():
    a, b = T(3, 4), T(3, 4)

    def run(s):
        with mode("compiled"):
            return (a * b)[s] - 1.0, (a + b).permute(1, 0)[s]
    run(slice(1, None))[0].numpy()            # the first recording builds its plan
    before = _counts()
    for _ in range(3):
        got = run(slice(1, None))
    assert _delta(before)["plan_hits"] == 3 and _delta(before)["plans"] == 0
    got = run(slice(None, -1))                # same shapes, another slice: a plan of its own
    assert _delta(before)["plans"] == 1
    np.testing.assert_array_equal(got[0].numpy(), ((a * b)[:-1] - 1.0).numpy())
    np.testing.assert_array_equal(got[1].numpy(), (a + b).permute(1, 0)[:-1].numpy())


def test_view_read_by_an_op_that_does_not_fuse():
    a, b = T(3, 4), T(3, 4)
    want = dj.cumsum((a * 2.0).T, 1) + 1.0
    with mode("compiled"):
        z = (a * 2.0).T
        assert type(z) is LazyTensor
        before = _counts()
        got = dj.cumsum(z, 1) + 1.0               # cumsum: forces z, then runs eagerly
        assert _delta(before)["eager_ops"] == 1 and _delta(before)["flushes"] == 1
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(z.numpy(), (a * 2.0).T.numpy())


def test_viewed_value_dropped():
    a = T(3, 4)
    before = lazy_info()["dead_values"]
    with mode("compiled"):
        y = a * 2.0
        z = y.T[1:]
        del y
    assert lazy_info()["dead_values"] == before
    np.testing.assert_array_equal(z.numpy(), (a * 2.0).T[1:].numpy())


def test_views_share_memory_with_the_values_they_view():
    a = T(3, 4)

    def fn():
        y = a * 2.0
        z = y.T
        w = z[1:]
        e = y.expand(2, 3, 4)
        return y, z, w, e
    want = fn()
    with mode("compiled"):
        got = fn()
        assert all(type(g) is LazyTensor for g in got)
    y, z, w, e = got
    assert z._base is y and w._base is z              # eager mode's bases, after the flush
    assert np.shares_memory(z.numpy(), y.numpy()) and np.shares_memory(w.numpy(), y.numpy())
    for g, wt in zip(got, want):
        assert g.is_contiguous() == wt.is_contiguous()
    z.add_(1.0)                                       # an in-place op on a view: the others see it
    want[1].add_(1.0)
    for g, wt in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), wt.numpy())
    for t in (e, want[3]):                            # an expanded view is read-only, as in eager mode
        with pytest.raises(ValueError):
            t.numpy()[0, 0, 0] = 1.0


def test_a_wanted_view_has_eager_modes_layout():
    a = T(3, 4)

    def fn():
        z = (a * 2.0).expand(2, 3, 4)     # wanted, and read by a fused op too
        w = (a - 1.0).T[1:]
        return z, z + 1.0, w, w.reshape(-1)
    want = fn()
    with mode("compiled"):
        got = fn()
    for g, w in zip(got, want):
        ga, wa = g.numpy(), w.numpy()
        assert (ga.strides, ga.flags.writeable) == (wa.strides, wa.flags.writeable)
        np.testing.assert_array_equal(ga, wa)
    assert not np.shares_memory(got[3].numpy(), got[2].numpy())     # the reshape copied, as eager mode's


def test_inplace_on_the_source_after_recording():
    a = T(3, 4)
    with mode("compiled"):
        y = a + 1.0
        w = y[1:, ::2]
        y.mul_(2.0)                                   # forces y and w first: w sees the write
        got = w.numpy().copy()
    y2 = a + 1.0
    w2 = y2[1:, ::2]
    y2.mul_(2.0)
    np.testing.assert_array_equal(got, w2.numpy())


def test_values_merged_by_cse_keep_their_own_views():
    a = T(3, 4)
    with mode("compiled"):
        y1, y2 = a * 2.0, a * 2.0                     # one value after cse, two tensors in eager mode
        z1, z2 = y2.T, y2.T
        y2.add_(100.0)
    want = (a * 2.0).numpy()
    np.testing.assert_array_equal(y1.numpy(), want)
    np.testing.assert_array_equal(z1.numpy(), (want + 100.0).T)
    np.testing.assert_array_equal(z2.numpy(), (want + 100.0).T)
    assert not np.shares_memory(y1.numpy(), y2.numpy())
    with mode("compiled"):
        y = a * 3.0
        z = (a * 3.0).T                                # of a value nothing holds, merged with y
    y.add_(1.0)
    np.testing.assert_array_equal(z.numpy(), (a * 3.0).T.numpy())


BAD = [
    lambda y: y.permute(0, 0), lambda y: y.permute(1, 0, 2), lambda y: y.transpose(0, 2),
    lambda y: y.expand(4, 4), lambda y: y.expand(-1, 3, 4), lambda y: y.expand(4),
    lambda y: y.unsqueeze(3), lambda y: y.unsqueeze(-4), lambda y: y.view(5, -1), lambda y: y.reshape(-1, -1),
    lambda y: y.reshape(7), lambda y: y.T.view(12), lambda y: y.flatten(1, 0), lambda y: y.flatten(2),
    lambda y: y.narrow(0, 2, 2), lambda y: y.narrow(2, 0, 1), lambda y: y.narrow(1, -5, 1),
    lambda y: y[3], lambda y: y[0, -5], lambda y: y[::0],
]
# refused while the index is read, before any op runs: y stays pending
BAD_INDEX = [lambda y: y[0, 0, 0], lambda y: y[..., ...]]


@pytest.mark.parametrize("bad", BAD + BAD_INDEX)
def test_invalid_view_arguments_raise_as_in_eager_mode(bad):
    a = T(3, 4)
    with pytest.raises(Exception) as eager:
        bad(a * 2.0)
    with mode("compiled"):
        y = a * 2.0
        with pytest.raises(type(eager.value)):
            bad(y)                           # at the call: not recorded, but run (and rejected) eagerly
        assert (type(y) is dj.Tensor) == (bad in BAD)      # which forced y first (an op's error)


def test_advanced_indexing_forces():
    a = T(3, 4)
    with mode("compiled"):
        y = a * 2.0
        before = _counts()
        # (a NumPy integer is advanced indexing to eager mode too: a copy, not a view)
        got = (y[[0, 2]], y[dj.tensor([1])], y[y > 0.0], y[True], y[np.int64(1)])
        assert _delta(before)["flushes"] >= 1 and type(y) is dj.Tensor
    want = a * 2.0
    for g, w in zip(got, (want[[0, 2]], want[dj.tensor([1])], want[want > 0.0], want[True], want[np.int64(1)])):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert not np.shares_memory(got[-1].numpy(), y.numpy())


def test_views_of_tensors_that_are_not_pending_run_eagerly():
    a = T(3, 4)
    with mode("compiled"):
        before = _counts()
        z = a.T                      # a plain tensor: its view runs eagerly, as before
        assert type(z) is dj.Tensor and _delta(before)["eager_ops"] == 1
        assert np.shares_memory(z.numpy(), a.numpy())


# -- eager ops that neither read a pending value nor write: the graph stays pending ------------------
def test_a_view_of_an_input_does_not_force_the_pending_graph():
    a, b = T(3, 4), T(4, 3)
    with mode("compiled"):
        before = _counts()
        y = (a * 2.0) + b.T          # b.T runs eagerly (b is not pending), the add records
        d = _delta(before)
        assert d["flushes"] == 0 and d["eager_ops"] == 1 and type(y) is LazyTensor
    np.testing.assert_array_equal(y.numpy(), a.numpy() * 2.0 + b.numpy().T)


@pytest.mark.parametrize("write", [lambda x: x.add_(1.0), lambda x: dj.add(x, 1.0, out=x),
                                   lambda x: x.clamp_(0.0, 1.0)])
def test_an_eager_op_writing_into_an_input_of_the_graph_forces_it_first(write):
    x = dj.from_numpy(np.full(4, 2.0, np.float32))
    with mode("compiled"):
        y = x * 3.0                   # reads x: must see it before the write
        write(x)
        assert type(y) is dj.Tensor   # flushed before the write ran
    np.testing.assert_array_equal(y.numpy(), np.full(4, 6.0, np.float32))
