"""Global compiled mode (lazy recording): results equal eager mode's; every
data access path forces; the mode toggles, nests, and restores."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dispatch_jit as dj
from dispatch_jit.tensor import _AUTOGRAD_SIG_BITS
from dispatch_jit.compiler.lazy import (LazyTensor, flush, get_mode, lazy_info, max_pending, mode, set_max_pending,
                                        set_mode)

BINARY = [dj.add, dj.sub, dj.mul, dj.maximum, dj.minimum, dj.div]
UNARY = [dj.neg, dj.abs, dj.exp, dj.tanh, dj.sigmoid, lambda x: dj.sqrt(dj.abs(x))]
# ops that are not recorded: they force the pending graph, then run eagerly
BREAKS = [lambda x: x.sum(), lambda x: x.sum(-1, keepdim=True), lambda x: x[..., :1],
          lambda x: x.max(), lambda x: dj.matmul(x, dj.ones(x.shape[-1], dtype=x.dtype))]
SHAPES = [(2, 3), (3,), (2, 1), (1, 3)]


@pytest.fixture(autouse=True)
def _eager_after():
    yield
    set_mode("eager")


@st.composite
def programs(draw):
    n_in = draw(st.integers(1, 3))
    dtypes = [draw(st.sampled_from([np.float32, np.float64, np.int64])) for _ in range(n_in)]
    shapes = [(2, 3)] + [draw(st.sampled_from(SHAPES)) for _ in range(n_in - 1)]
    steps = []
    for k in range(draw(st.integers(1, 8))):
        n = n_in + k
        kind = draw(st.sampled_from("bbuuk"))
        if kind == "b":
            other = draw(st.one_of(st.tuples(st.just("v"), st.integers(0, n - 1)),
                                   st.tuples(st.just("c"), st.sampled_from([0.5, 2.0, -1.5, 3, True]))))
            steps.append(("b", draw(st.integers(0, len(BINARY) - 1)), draw(st.integers(0, n - 1)), other))
        elif kind == "u":
            steps.append(("u", draw(st.integers(0, len(UNARY) - 1)), draw(st.integers(0, n - 1)), None))
        else:
            steps.append(("k", draw(st.integers(0, len(BREAKS) - 1)), draw(st.integers(0, n - 1)), None))
    outs = draw(st.lists(st.integers(0, n_in + len(steps) - 1), min_size=1, max_size=3))
    return dtypes, shapes, steps, outs, draw(st.integers(0, 2**16))


def run(steps, outs, *inputs):
    vals = list(inputs)
    for kind, op, i, other in steps:
        if kind == "u":
            vals.append(UNARY[op](vals[i]))
        elif kind == "k":
            vals.append(BREAKS[op](vals[i]))
        else:
            vals.append(BINARY[op](vals[i], vals[other[1]] if other[0] == "v" else other[1]))
    return [vals[j] for j in outs]


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:      # eager and compiled must fail alike
        return "err", type(e)


@settings(max_examples=20, deadline=None)
@given(programs())
def test_random_programs_compiled_mode_equals_eager(prog):
    dtypes, shapes, steps, outs, seed = prog
    rng = np.random.default_rng(seed)
    inputs = [dj.from_numpy((rng.uniform(-2, 2, size=s) * (10 if d == np.int64 else 1)).astype(d))
              for s, d in zip(shapes, dtypes)]
    kind_e, want = _outcome(lambda: [(w.dtype, w.shape, w.numpy().copy()) for w in run(steps, outs, *inputs)])
    with np.errstate(all="ignore"):
        def compiled():
            with mode("compiled"):
                got = run(steps, outs, *inputs)
                meta = [(g.dtype, g.shape) for g in got]     # known without forcing
            return [(m[0], m[1], g.numpy().copy()) for m, g in zip(meta, got)]
        kind_c, got = _outcome(compiled)
    assert kind_c == kind_e, (got, want)
    if kind_e == "ok":
        for (gd, gs, ga), (wd, ws, wa) in zip(got, want):
            assert gd == wd and gs == ws
            np.testing.assert_array_equal(ga, wa)


def f(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def _abc(n=5, dtype=np.float32):
    rng = np.random.default_rng(0)
    return [dj.from_numpy(rng.uniform(-1, 1, n).astype(dtype)) for _ in range(3)]


def test_set_get_mode_and_context():
    assert get_mode() == "eager"
    with mode("compiled"):
        assert get_mode() == "compiled"
        with mode("eager"):
            assert get_mode() == "eager"
        assert get_mode() == "compiled"
    assert get_mode() == "eager"
    set_mode("compiled")
    assert get_mode() == "compiled"
    set_mode("eager")
    with pytest.raises(ValueError, match="unknown mode"):
        set_mode("fast")


def test_records_lazily_and_forces_on_leaving():
    a, b, c = _abc()
    want = f(a, b, c).numpy()
    with mode("compiled"):
        y = f(a, b, c)
        assert type(y) is LazyTensor
        assert y.shape == (5,) and y.dtype == dj.float32 and y.ndim == 1
    assert type(y) is dj.Tensor
    np.testing.assert_array_equal(y.numpy(), want)


# (views and basic indexing of a pending value are recorded: test_lazy_views.py; advanced indexing forces)
@pytest.mark.parametrize("access", [
    lambda t: t.numpy(), lambda t: np.asarray(t), lambda t: t.tolist(), repr, str,
    lambda t: t[[1, 3]], lambda t: t.detach(), lambda t: list(t), lambda t: t.contiguous(),
    lambda t: t[dj.tensor([0, 2])],
])
def test_every_access_path_forces(access):
    a, b, c = _abc()
    want = access(f(a, b, c))
    with mode("compiled"):
        y = f(a, b, c)
        got = access(y)
        assert type(y) is dj.Tensor      # materialized
    assert repr(got) == repr(want)


def test_clone_of_a_pending_value_is_recorded():
    # clone has a meta function (a fresh C-contiguous copy): a generic record (lazy/generic.py)
    a, b, c = _abc()
    want = f(a, b, c).T.clone()
    with mode("compiled"):
        y = f(a, b, c).T.clone()
        assert type(y) is LazyTensor
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    assert y.stride() == want.stride() and y.is_contiguous()


def test_a_reduction_of_a_pending_value_becomes_the_fused_epilogue():
    a, b, c = _abc()
    want = (a * b + c).relu().sum()
    with mode("compiled"):
        y = (a * b + c).relu().sum()
        assert type(y) is LazyTensor and y.shape == ()      # recorded, not forced
        got = y.item()
    assert got == pytest.approx(want.item(), rel=1e-6)


def test_copy_and_pickle_force():
    import copy
    import pickle
    x = dj.tensor([1.0, 2.0])
    with mode("compiled"):
        for fn in (copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))):
            y = x * 3.0
            z = fn(y)
            assert type(y) is dj.Tensor and type(z) is dj.Tensor
            np.testing.assert_array_equal(z.numpy(), [3.0, 6.0])


def test_scalar_access_paths_force():
    a = dj.tensor([1.5])
    with mode("compiled"):
        y = a * 2.0 + 1.0
        assert y.item() == 4.0
        assert bool(a * 0.0 + 1.0)
        assert float(a * 2.0) == 3.0
        assert int(dj.tensor([3]) * 2) == 6


def test_backward_through_forced_value():
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    x = dj.tensor([3.0, 4.0])
    with mode("compiled"):
        h = x * 2.0 + 1.0                # recorded
        y = (w * h).sum()                # w requires grad: eager, forces h
        y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [7.0, 9.0])


def test_requires_grad_inputs_are_recorded_with_their_nodes():
    # lazy/grad.py: the forward is recorded, the node is eager mode's, and backward records too
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    with mode("compiled"):
        y = w * 3.0
        assert type(y) is LazyTensor and y.requires_grad and y.grad_fn.name() == "MulBackward"
        (y * y).sum().backward()
        assert type(w.grad) is LazyTensor and type(y) is LazyTensor     # nothing computed yet
    np.testing.assert_array_equal(w.grad.numpy(), [18.0, 36.0])
    assert type(y) is dj.Tensor and y.requires_grad and y._sig & _AUTOGRAD_SIG_BITS


def test_inplace_and_setitem_see_the_pending_reads():
    a = dj.tensor([1.0, 2.0, 3.0])
    with mode("compiled"):
        y = a * 2.0                      # reads a
        a.add_(100.0)                    # in-place op: forces y first
        z = a + 1.0
        a[0] = -5.0                      # item assignment: forces z first
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(z.numpy(), [102.0, 103.0, 104.0])
    np.testing.assert_array_equal(a.numpy(), [-5.0, 102.0, 103.0])



def test_replacing_the_storage_with_data_sees_the_pending_reads():
    # x.data = y swaps the storage a pending graph reads through x: that graph runs first, as eager
    # mode read the old values when the op was called (it used to read the new storage at the flush)
    p = dj.tensor([1.0, 2.0, 3.0])
    with mode("compiled"):
        y = p * 2.0
        p.data = dj.zeros(3)
        z = p + 1.0
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(z.numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("owner", ["module", "optimizer"])
def test_zero_grad_in_place_sees_the_pending_reads(owner):
    # Module.zero_grad(set_to_none=False) zeroed .grad in place without running the pending graph
    # that read it (the optimizer's did): y computed from zeros.  Both share autograd.methods.zero_grads
    m = dj.nn.Linear(2, 1)
    (m(dj.ones(3, 2)) ** 2).sum().backward()
    want = (m.weight.grad * 2.0).numpy()
    zero = m.zero_grad if owner == "module" else dj.optim.SGD(m.parameters(), lr=0.1).zero_grad
    g = m.weight.grad
    with mode("compiled"):
        y = m.weight.grad * 2.0
        zero(set_to_none=False)
    np.testing.assert_array_equal(y.numpy(), want)
    assert m.weight.grad is g and not m.weight.grad.numpy().any()

def test_size_limit_flushes():
    old = max_pending()
    set_max_pending(8)
    try:
        before = lazy_info()["size_flushes"]
        x = dj.tensor([1.0, 2.0])
        with mode("compiled"):
            y = x
            for _ in range(20):
                y = y * 1.5 + 0.25
            assert lazy_info()["size_flushes"] - before >= 4
            want = x.numpy().copy()
            for _ in range(20):
                want = (want * np.float32(1.5)) + np.float32(0.25)
            np.testing.assert_array_equal(y.numpy(), want)
    finally:
        set_max_pending(old)


def test_loop_reuses_the_plan():
    a, b, c = _abc(7)
    want = f(a, b, c).numpy()
    with mode("compiled"):
        f(a, b, c).numpy()
        before = lazy_info()
        for _ in range(10):
            np.testing.assert_array_equal(f(a, b, c).numpy(), want)
        after = lazy_info()
    assert after["plans"] == before["plans"]
    assert after["plan_hits"] - before["plan_hits"] == 10
    assert after["loop_compiles"] == before["loop_compiles"]


def test_new_sizes_do_not_recompile():
    with mode("compiled"):
        a, b, c = _abc(3)
        f(a, b, c).numpy()
        before = lazy_info()["loop_compiles"]
        for n in range(4, 40):
            a, b, c = _abc(n)
            f(a, b, c).numpy()
    assert lazy_info()["loop_compiles"] == before


def test_dropped_intermediates_are_not_computed():
    a, b, c = _abc()
    before = lazy_info()["dead_values"]
    with mode("compiled"):
        y = f(a, b, c)
        unused = dj.exp(a) * 2.0
        del unused
        y.numpy()
    assert lazy_info()["dead_values"] - before == 2      # the two ops nothing live reads


def test_broadcast_error_matches_eager():
    a, b = dj.ones(3), dj.ones(4)
    with pytest.raises(Exception) as eager:
        a + b
    with mode("compiled"):
        with pytest.raises(type(eager.value)):
            a + b


def test_compiled_function_inside_compiled_mode():
    cf = dj.compile(f)
    a, b, c = _abc()
    want = f(a, b, c).numpy()
    with mode("compiled"):
        y = cf(a, b, c)
    np.testing.assert_array_equal(y.numpy(), want)


def test_mode_is_per_thread():
    seen = {}

    def worker():
        seen["mode"] = get_mode()
        seen["val"] = (dj.tensor([1.0]) * 2.0).numpy()[0]
    with mode("compiled"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == {"mode": "eager", "val": 2.0}


def test_flush_is_a_noop_in_eager_mode():
    flush()
    with mode("compiled"):
        y = dj.tensor([1.0]) + 1.0
        flush()
        assert type(y) is dj.Tensor


def test_environment_variable():
    code = ("import dispatch_jit as dj; from dispatch_jit.compiler.lazy import get_mode, init_mode_from_env; "
            "init_mode_from_env(); print(get_mode()); y = dj.tensor([1.0, 2.0]) * 2.0; "
            "print(type(y).__name__, y.numpy().tolist())")
    env = dict(os.environ, DISPATCH_JIT_MODE="compiled")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["compiled", "LazyTensor", "[2.0,", "4.0]"]


# -- the recording fast path (the Tracer fallback specialized per signature) -----------------
def test_constants_that_compare_equal_get_their_own_plans():
    # -0.0 == 0.0, 1 == 1.0 == True: the plan cache must not mix them up (results bit for bit)
    x = dj.tensor([1.0, -2.0, 3.0])
    xi = dj.tensor([1, 2, 3])
    for c in (0.0, -0.0, 0.0, -0.0):
        want = (x * c).numpy()
        with mode("compiled"):
            got = (x * c).numpy()
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    for c in (1, 1.0, True, 1, np.float32(1.0)):
        want = xi + c
        with mode("compiled"):
            got = xi + c
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    with mode("compiled"):
        assert np.isnan((x * float("nan")).numpy()).all()


def test_ops_that_do_not_fuse_for_a_signature_run_eagerly():
    h = dj.tensor([1.0, 2.0], dtype=dj.float16)
    i = dj.tensor([1, 2])
    with mode("compiled"):
        before = lazy_info()["eager_ops"]
        y = h + 1.0                                  # float16 is not fused: eager
        assert type(y) is dj.Tensor and y.dtype == dj.float16
        np.testing.assert_array_equal(y.numpy(), [2.0, 3.0])
        assert lazy_info()["eager_ops"] > before
        with pytest.raises(Exception) as rec:
            dj.add(i, 1, alpha=0.5)                  # eager mode's error, not a recorded node
    with pytest.raises(type(rec.value)):
        dj.add(i, 1, alpha=0.5)


def test_recording_threads_share_the_specialized_kernel():
    errors = []
    x = dj.from_numpy(np.arange(8, dtype=np.float32))

    def worker(k):
        try:
            with mode("compiled"):
                for j in range(50):
                    y = (x + float(k)) * 2.0 - j
                    if type(y) is not LazyTensor:
                        errors.append("not recorded")
                    np.testing.assert_array_equal(y.numpy(), (np.arange(8, dtype=np.float32) + k) * 2 - j)
        except Exception as e:        # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_lazy_tensor_metadata_and_a_tensor_of_another_thread():
    x = dj.tensor([[1.0, 2.0, 3.0]])
    box = {}
    with mode("compiled"):
        y = x * 2.0 + dj.tensor([1.0, 1.0, 1.0])
        assert (y.shape, y.ndim, y.dtype, y.size(-1), y.numel()) == ((1, 3), 2, dj.float32, 3, 3)

        def other():                                  # a pending value of this thread's graph
            with mode("compiled"):
                box["z"] = (y + 1.0).numpy().copy()
        t = threading.Thread(target=other)
        t.start()
        t.join()
    np.testing.assert_array_equal(box["z"], [[4.0, 6.0, 8.0]])
    np.testing.assert_array_equal(y.numpy(), [[3.0, 5.0, 7.0]])
