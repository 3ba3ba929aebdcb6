"""The replayed backward (lazy/backward.py): the first ``loss.backward()`` of a pending graph's
structure walks the engine and keeps what it recorded; the next ones append those records again.
Each test runs the same steps in eager mode and compares bit for bit (values, ``.grad``, errors),
and checks which path ran (``backward_captures``/``backward_replays``): the replay, and each of
its fall-backs to the engine's walk."""

import threading

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.compiler.lazy import LazyTensor, lazy_info, mode
from dispatch_jit.errors import AutogradError

_RNG = np.random.default_rng(7)
_X = _RNG.standard_normal((6, 4)).astype(np.float32)
_W = _RNG.standard_normal((3, 4)).astype(np.float32)
_B = _RNG.standard_normal(3).astype(np.float32)
_T = np.array([0, 1, 2, 0, 1, 2])


def _leaves():
    return dj.tensor(_W, requires_grad=True), dj.tensor(_B, requires_grad=True)


def _loss(x, w, b, t, act=dj.tanh, scale=None):
    h = act(F.linear(x, w, b))
    if scale is not None:
        h = h * scale
    return F.cross_entropy(h, t)


def _counts():
    i = lazy_info()
    return i["backward_captures"], i["backward_replays"]


def _delta(before):
    c, r = _counts()
    return c - before[0], r - before[1]


def _assert_replayed(before, n):
    """``n`` backwards: walked at most once (the structure may be known from an earlier test), replayed."""
    captures, replays = _delta(before)
    assert captures <= 1 and captures + replays == n


def _steps(run_mode, n=4, **kw):
    """Loss and .grad of w and b after each of ``n`` steps (SGD by hand, under no_grad)."""
    w, b = _leaves()
    x, t = dj.tensor(_X), dj.tensor(_T)
    out = []
    for i in range(n):
        with mode(run_mode):
            w.grad = b.grad = None
            loss = _loss(x, w, b, t, **{k: v(i) if callable(v) and k != "act" else v for k, v in kw.items()})
            loss.backward()
            with dj.no_grad():
                w.sub_(w.grad * 0.1)
                b.sub_(b.grad * 0.1)
            out.append((loss.item(), w.grad.numpy().copy(), b.grad.numpy().copy()))
    return out


def _grads(run_mode, losses):
    """Loss and .grad of w and b after the backward of each loss in ``losses`` (``fn(x, w, b, t)``),
    one step each, in ``run_mode``."""
    w, b = _leaves()
    x, t = dj.tensor(_X), dj.tensor(_T)
    out = []
    for loss_of in losses:
        with mode(run_mode):
            w.grad = b.grad = None
            loss = loss_of(x, w, b, t)
            loss.backward()
            out.append((loss.item(), w.grad.numpy().copy(), b.grad.numpy().copy()))
    return out


def _assert_same(want, got):
    assert len(want) == len(got)
    for (l0, gw0, gb0), (l1, gw1, gb1) in zip(want, got):
        assert l0 == l1
        np.testing.assert_array_equal(gw0, gw1)
        np.testing.assert_array_equal(gb0, gb1)


def test_replay_equals_eager_bit_for_bit_and_records_no_walk():
    want = _steps("eager", 5)
    before = _counts()
    got = _steps("compiled", 5)
    _assert_same(want, got)
    _assert_replayed(before, 5)


def test_replayed_grads_are_pending_plain_tensors_and_nodes_are_freed():
    w, b = _leaves()
    x, t = dj.tensor(_X), dj.tensor(_T)
    before = _counts()
    with mode("compiled"):
        for _ in range(2):
            w.grad = b.grad = None
            loss = _loss(x, w, b, t)
            flushes = lazy_info()["flushes"]
            loss.backward()
            assert lazy_info()["flushes"] == flushes      # nothing computed
            assert type(w.grad) is LazyTensor and w.grad.grad_fn is None and not w.grad.requires_grad
            loss.item()                                    # the next step records a graph of its own
        _assert_replayed(before, 2)
        # the engine's error for a second backward through freed nodes, as in eager mode
        with pytest.raises(AutogradError, match="backward through the graph a second time"):
            loss.backward()
    ew, eb = _leaves()
    eloss = _loss(dj.tensor(_X), ew, eb, dj.tensor(_T))
    eloss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), ew.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), eb.grad.numpy())


def test_structure_change_between_steps_keys_each_structure():
    acts = [dj.tanh, dj.relu, dj.tanh, dj.sigmoid, dj.relu, dj.tanh]
    losses = [lambda x, w, b, t, act=act: _loss(x, w, b, t, act=act) for act in acts]
    want = _grads("eager", losses)
    before = _counts()
    _assert_same(want, _grads("compiled", losses))
    captures, replays = _delta(before)
    assert replays >= 2 and captures + replays == len(acts)


@pytest.mark.parametrize("scales", [[2.0, 3.0, 2.0], [0.0, -0.0, 0.0, -0.0]])
def test_runtime_scalars_are_keyed_by_value_and_sign(scales):
    # x * s records s as a runtime scalar: the backward's g * s must use this step's s
    losses = [lambda x, w, b, t, s=s: (F.linear(x, w, b) * s).sum() for s in scales]
    want, got = _grads("eager", losses), _grads("compiled", losses)
    for (l0, gw0, gb0), (l1, gw1, gb1) in zip(want, got):
        assert l0 == l1
        assert gw0.tobytes() == gw1.tobytes() and gb0.tobytes() == gb1.tobytes()    # -0.0 too


def test_a_replayed_backward_reads_its_scalars_at_every_call():
    # std's backward scales by 2 / (n - correction) and the loss by w: runtime scalars of one shared backward
    # plan, which becomes one compiled function after its first replays; each call must use its own values
    # (a wrong binding gives e.g. exactly 1.5x eager's gradient: 2 / (3 - 1) against 2 / (3 - 0) / ...)
    arr = np.random.default_rng(0).uniform(0.5, 2.0, (2, 3, 4, 1))

    def loss(x, corr, w):
        v = dj.std(F.layer_norm(x, (4, 1)), dim=1, keepdim=True, correction=corr)
        return (dj.tril(v, -1) * w).sum()

    for corr, w in [(1, 0.5)] * 5 + [(0, 0.5), (1, 0.5), (0, 1.5), (1, 1.5), (0, 0.5)]:
        x = dj.tensor(arr.copy(), requires_grad=True)
        loss(x, corr, w).backward()
        y = dj.tensor(arr.copy(), requires_grad=True)
        with mode("compiled"):
            loss(y, corr, w).backward()
        assert y.grad.numpy().tobytes() == x.grad.numpy().tobytes(), (corr, w)


def test_hooks_fall_back_to_the_engine_walk():
    seen = []
    w, b = _leaves()
    x, t = dj.tensor(_X), dj.tensor(_T)
    w.register_hook(lambda g: seen.append(g.numpy().copy()))
    want = _steps("eager", 2)
    before = _counts()
    with mode("compiled"):
        for _ in range(3):
            w.grad = b.grad = None
            loss = _loss(x, w, b, t)
            h = loss.grad_fn            # a hook on an intermediate node too
            h.register_prehook(0, lambda g: None)
            loss.backward()
    assert _delta(before) == (0, 0) and len(seen) == 3
    np.testing.assert_array_equal(seen[0], want[0][1])
    np.testing.assert_array_equal(w.grad.numpy(), want[0][1])


def test_retain_graph_and_existing_grads_fall_back():
    want_w, want_b = _leaves()
    x, t = dj.tensor(_X), dj.tensor(_T)
    for _ in range(3):                      # .grad accumulates over the steps (no zero_grad)
        _loss(x, want_w, want_b, t).backward(retain_graph=True)
    w, b = _leaves()
    before = _counts()
    with mode("compiled"):
        for _ in range(3):
            _loss(x, w, b, t).backward(retain_graph=True)
    assert _delta(before) == (0, 0)
    np.testing.assert_array_equal(w.grad.numpy(), want_w.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), want_b.grad.numpy())
    w.grad = b.grad = None
    with mode("compiled"):
        for _ in range(3):                  # no retain_graph, but .grad is set after the first
            _loss(x, w, b, t).backward()
    assert _delta(before)[1] <= 1            # the first (no .grad yet) may replay, the others walk
    w2, b2 = _leaves()
    for _ in range(3):
        _loss(x, w2, b2, t).backward()
    np.testing.assert_array_equal(w.grad.numpy(), w2.grad.numpy())


def test_saved_tensor_modified_in_place_raises_eager_modes_error():
    def run(run_mode):
        w, b = _leaves()
        x, t = dj.tensor(_X), dj.tensor(_T)
        with mode(run_mode):
            for _ in range(2):              # the second step's structure has been walked once
                w.grad = b.grad = None
                _loss(x, w, b, t).backward()
            w.grad = b.grad = None
            loss = _loss(x, w, b, t)
            with dj.no_grad():
                x.mul_(2.0)                 # linear saved x for w's gradient
            with pytest.raises(AutogradError) as e:
                loss.backward()
        return str(e.value)
    before = _counts()
    assert run("compiled") == run("eager")
    assert _delta(before)[1] == 1


def test_a_graph_partly_recorded_before_a_flush_walks():
    w, b = _leaves()
    x, t = dj.tensor(_X), dj.tensor(_T)
    want_w, want_b = _leaves()
    (dj.tanh(F.linear(dj.tensor(_X), want_w, want_b)) * 2.0).sum().backward()
    before = _counts()
    with mode("compiled"):
        for _ in range(2):
            w.grad = b.grad = None
            h = dj.tanh(F.linear(x, w, b))
            h.numpy()                       # the forward's first part is computed: not pending
            (h * 2.0).sum().backward()
    assert _delta(before) == (0, 0)
    np.testing.assert_array_equal(w.grad.numpy(), want_w.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), want_b.grad.numpy())


def test_replay_at_parallel_sizes():
    rng = np.random.default_rng(3)
    xa = rng.standard_normal((4096, 16)).astype(np.float32)
    wa = (rng.standard_normal((64, 16)) * 0.3).astype(np.float32)      # logits: 4096 * 64 = 2**18
    ta = rng.integers(0, 64, 4096)

    def run(run_mode):
        w = dj.tensor(wa, requires_grad=True)
        x, t = dj.tensor(xa), dj.tensor(ta)
        out = []
        for _ in range(3):
            with mode(run_mode):
                w.grad = None
                loss = F.cross_entropy(dj.tanh(F.linear(x, w)) * 3.0, t)
                loss.backward()
                out.append((loss.item(), w.grad.numpy().copy()))
        return out
    want = run("eager")
    before = _counts()
    got = run("compiled")
    _assert_replayed(before, 3)
    for (l0, g0), (l1, g1) in zip(want, got):
        assert l0 == l1
        np.testing.assert_array_equal(g0, g1)


def test_a_view_of_the_seed_is_walked_again_with_a_pending_seed_and_replayed():
    # sum's backward expands the seed: a view of a tensor that is not pending runs eagerly, and the
    # graph reads it as an input of its own; the second walk has the seed pending (a clone), the
    # view is recorded, and that walk is replayed
    losses = [lambda x, w, b, t: dj.tanh(F.linear(x, w, b)).sum()] * 3
    want = _grads("eager", losses)
    before = _counts()
    _assert_same(want, _grads("compiled", losses))
    assert _delta(before)[1] >= 1


def test_a_walk_that_reads_a_new_tensor_walks_every_time():
    # a constant made eagerly in the forward is an input; zeros made inside the graph's backward
    # are not what this checks: a hook-free graph whose backward reads a fresh tensor, through a
    # Function (its backward runs eagerly: its node is no node of this pending graph)
    class Double(dj.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * dj.tensor(np.float32(2.0))

    losses = [lambda x, w, b, t: F.cross_entropy(Double.apply(F.linear(x, w, b)), t)] * 3
    want = _grads("eager", losses)
    before = _counts()
    _assert_same(want, _grads("compiled", losses))
    assert _delta(before) == (0, 0)


def test_threads_replay_their_own_graphs():
    want = _steps("eager", 4)
    results, errors = {}, []

    def worker(k):
        try:
            results[k] = _steps("compiled", 4)
        except BaseException as e:       # reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for k in range(3):
        _assert_same(want, results[k])
