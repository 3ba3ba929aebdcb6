"""Compiled mode records training: generic records (lazy/generic.py: linear, the losses, their
backward ops, clone) and autograd on pending values (lazy/grad.py).  Everything is compared with
eager mode bit for bit: parameters, gradients, optimizer state and version counters after N
training steps (every option of SGD, Adam and AdamW, whose updates compiled mode records into the
step's graph: lazy/update.py; two parameter groups, a schedule; small, and large enough for the
parallel loops), gradients, hooks, retain_graph, create_graph, the
version-counter error, and threads."""

import threading

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit import nn
from dispatch_jit.compiler.lazy import LazyTensor, lazy_info, mode
from dispatch_jit.compiler.lazy.state import state
from dispatch_jit.errors import AutogradError
from dispatch_jit.tensor import version_of


def _train(run_mode, opt_name, kw, n=16, d=5, h=7, c=3, steps=6, groups=False, schedule=False):
    """Parameters, their .grad, the losses, the optimizer's state and the parameters' version
    counters after ``steps`` steps of an MLP in ``run_mode``; ``groups``: each layer its own
    parameter group (the second with a halved learning rate); ``schedule``: every float option
    changes before every step (a learning-rate schedule, ...)."""
    rng = np.random.default_rng(0)
    x = dj.tensor(rng.standard_normal((n, d)).astype(np.float32))
    y = dj.tensor(rng.integers(0, c, n))
    model = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, c))
    with dj.no_grad():
        for p in model.parameters():
            p.copy_(dj.tensor((rng.standard_normal(tuple(p.shape)) * 0.3).astype(np.float32)))
    params = list(model.parameters())
    if groups:
        params = [{"params": params[:2]}, {"params": params[2:], "lr": kw["lr"] / 2}]
    opt = getattr(dj.optim, opt_name)(params, **kw)
    losses = []
    for k in range(steps):
        if schedule:
            for g in opt.param_groups:
                for key, v in g.items():
                    if v.__class__ is float and v:
                        g[key] = v * 0.9
        with mode(run_mode):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    params = list(model.parameters())
    state = [{k: v.numpy().copy() if isinstance(v, dj.Tensor) else v for k, v in opt.state[p].items()}
             for p in params]
    return ([p.detach().numpy().copy() for p in params], [p.grad.numpy().copy() for p in params], losses, state,
            [version_of(p) for p in params])


def _assert_same(want, got):
    for a, b in zip(want[0] + want[1], got[0] + got[1]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert want[2] == got[2] and want[4] == got[4]
    for sa, sb in zip(want[3], got[3]):
        assert sorted(sa) == sorted(sb)
        for k in sa:
            np.testing.assert_array_equal(sa[k], sb[k])


# every option of the three optimizers whose update compiled mode records (optim/sgd.py, adam.py)
OPTIMIZERS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "dampening": 0.1, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "maximize": True}),
    ("Adam", {"lr": 1e-2}),
    ("Adam", {"lr": 1e-2, "weight_decay": 0.05, "amsgrad": True, "maximize": True}),
    ("AdamW", {"lr": 1e-2, "betas": (0.8, 0.9), "amsgrad": True}),
]


@pytest.mark.parametrize("opt_name, kw", OPTIMIZERS)
@pytest.mark.parametrize("groups, schedule", [(False, False), (True, True)])
def test_training_steps_equal_eager_bit_for_bit(opt_name, kw, groups, schedule):
    want = _train("eager", opt_name, kw, groups=groups, schedule=schedule)
    before = lazy_info()
    got = _train("compiled", opt_name, kw, groups=groups, schedule=schedule)
    after = lazy_info()
    _assert_same(want, got)
    # every step after the first (which makes the state, eagerly) recorded its update into the graph
    first = opt_name != "SGD" or kw.get("momentum")
    assert after["steps_recorded"] - before["steps_recorded"] == (5 if first else 6) * (2 if groups else 1)
    assert after["step_fallbacks"] - before["step_fallbacks"] == ((2 if groups else 1) if first else 0)
    # a schedule's new numbers are runtime scalars: no plan per step
    assert after["plans"] - before["plans"] <= 4


@pytest.mark.parametrize("opt_name, kw", [OPTIMIZERS[1], OPTIMIZERS[6]])
def test_parallel_sized_training_equals_eager_bit_for_bit(opt_name, kw):
    dims = {"n": 4096, "d": 8, "h": 64}    # 4096 * 64 = 2**18: parallel loops
    _assert_same(_train("eager", opt_name, kw, **dims), _train("compiled", opt_name, kw, **dims))
    # from the fourth step on, the step's plan ran as one compiled function (execute.py, run/function.py)
    assert any(p.describe_function().startswith("one compiled function") for p in state.plans.values())


def test_backward_records_and_one_flush_runs_forward_and_backward():
    rng = np.random.default_rng(1)
    x = dj.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    w = dj.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = dj.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    t = dj.tensor([0, 1, 2, 0, 1, 2])
    want_loss = F.cross_entropy(dj.tanh(F.linear(x, w, b)), t)
    want_loss.backward()
    want = [w.grad.numpy().copy(), b.grad.numpy().copy()]
    w.grad = b.grad = None
    with mode("compiled"):
        loss = F.cross_entropy(dj.tanh(F.linear(x, w, b)), t)
        assert type(loss) is LazyTensor and loss.grad_fn.name() == "CrossEntropyLossBackward"
        before = lazy_info()
        loss.backward()
        assert type(w.grad) is LazyTensor and type(b.grad) is LazyTensor and type(loss) is LazyTensor
        assert lazy_info()["flushes"] == before["flushes"]          # backward computed nothing
        got = [w.grad.numpy(), b.grad.numpy()]
        assert lazy_info()["flushes"] == before["flushes"] + 1      # one plan: forward and backward
        assert lazy_info()["eager_ops"] == before["eager_ops"]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert loss.item() == want_loss.item()
    assert w.grad.stride() == (4, 1) and b.grad.is_contiguous()


def _chain(x, w):
    y = dj.tanh(x * w) * 2.0 + w
    return y, (y * y).sum()


def _leaf(a):
    return dj.tensor(a, requires_grad=True)


def test_hooks_see_and_replace_pending_gradients():
    a = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    seen = {}

    def run(m):
        x, w = _leaf(a), _leaf(a[::-1].copy())
        with mode(m):
            y, loss = _chain(x, w)
            y.register_hook(lambda g: g * 3.0)
            w.register_hook(lambda g: seen.__setitem__(m, g.numpy().copy()))     # reads it: forces
            loss.backward()
        return x.grad.numpy(), w.grad.numpy()

    want, got = run("eager"), run("compiled")
    for p, q in zip(want, got):
        np.testing.assert_array_equal(p, q)
    np.testing.assert_array_equal(seen["eager"], seen["compiled"])


def test_retain_graph_and_a_second_backward_behave_as_in_eager_mode():
    a = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    out = {}
    for m in ("eager", "compiled"):
        x, w = _leaf(a), _leaf(a + 0.5)
        with mode(m):
            _, loss = _chain(x, w)
            loss.backward(retain_graph=True)
            loss.backward()
            with pytest.raises(AutogradError, match="backward through the graph a second time"):
                loss.backward()
        out[m] = (x.grad.numpy(), w.grad.numpy())
    for p, q in zip(out["eager"], out["compiled"]):
        np.testing.assert_array_equal(p, q)


def test_create_graph_double_backward_equals_eager():
    a = np.linspace(0.1, 1.0, 5)
    out = {}
    for m in ("eager", "compiled"):
        x = _leaf(a)
        with mode(m):
            y = (dj.tanh(x) * x).sum()
            (g,) = dj.autograd.grad(y, x, create_graph=True)
            (g * g).sum().backward()
        out[m] = (g.detach().numpy(), x.grad.numpy())
    for p, q in zip(out["eager"], out["compiled"]):
        np.testing.assert_array_equal(p, q)


def test_modifying_a_saved_tensor_raises_eager_modes_error():
    a = np.linspace(0.1, 1.0, 4)
    msgs = {}
    for m in ("eager", "compiled"):
        x = _leaf(a)
        with mode(m):
            y = x * 2.0
            z = dj.exp(y)          # saves its result
            with dj.no_grad():
                z.mul_(2.0)        # in place: not recorded, bumps the version the node checks
            with pytest.raises(AutogradError, match="modified by an inplace operation") as e:
                z.sum().backward()
        msgs[m] = str(e.value)
    assert msgs["eager"] == msgs["compiled"]


def test_a_bad_target_raises_eager_modes_error_class():
    x = dj.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    t = dj.tensor([0, 7])
    with pytest.raises(Exception) as eager:
        F.cross_entropy(x, t)
    with pytest.raises(type(eager.value)):
        with mode("compiled"):
            F.cross_entropy(x, t).item()


@pytest.mark.parametrize("opt_name, kw", [OPTIMIZERS[2], OPTIMIZERS[5]])
def test_threads_train_their_own_models_as_eager_mode_does(opt_name, kw):
    want = _train("eager", opt_name, kw, groups=True, schedule=True)
    results, errors = [None] * 3, []

    def work(i):
        try:
            results[i] = _train("compiled", opt_name, kw, groups=True, schedule=True)
        except BaseException as e:      # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for got in results:
        _assert_same(want, got)


def test_autocast_regions_run_generic_ops_as_eager_mode_does():
    # linear's Autocast kernel casts to float16 first: compiled mode must not record it uncast
    x = dj.tensor(np.ones((4, 3), np.float32))
    w = dj.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    with dj.autocast("cpu", dtype=dj.float16):
        want = F.linear(x, w)
    with mode("compiled"), dj.autocast("cpu", dtype=dj.float16):
        got = F.linear(x, w)
    assert got.dtype == want.dtype == dj.float16
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def test_generic_records_equal_eager_softmax_family_and_topk():
    # softmax/log_softmax forward and backward (_softmax_backward_data), nll_loss, and topk's two
    # results (a multi-result record with a named tuple), all pending until read
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 4))
    t = dj.tensor([0, 3, 1, 2, 3])
    out = {}
    for m in ("eager", "compiled"):
        x = dj.tensor(a, requires_grad=True)
        with mode(m):
            s = dj.softmax(x, 1)
            ls = dj.log_softmax(x * 2.0, 0)
            loss = F.nll_loss(ls, t) + (s * s).sum()
            top = dj.topk(dj.tensor(a) * 3.0, 2)
            if m == "compiled":
                assert type(loss) is LazyTensor and type(top.values) is LazyTensor
            loss.backward()
            out[m] = [loss.detach().numpy(), top.values.numpy(), top.indices.numpy(), x.grad.numpy()]
    for p, q in zip(out["eager"], out["compiled"]):
        assert p.dtype == q.dtype
        np.testing.assert_array_equal(p, q)


def test_nodes_come_from_the_per_signature_recorder_and_equal_eager_modes():
    # specialize._grad_recorder: the Autograd kernel's generated recorder around the record; its
    # nodes are the signature's class (a generated apply), with eager mode's edges and saved tensors
    from dispatch_jit.autograd.graph import AccumulateGrad, Node
    rng = np.random.default_rng(4)
    xa, wa = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    w, ew = dj.tensor(wa, requires_grad=True), dj.tensor(wa, requires_grad=True)
    x = dj.tensor(xa)
    out_e = dj.tanh(F.linear(x, ew)) * 2.0
    before = lazy_info()["grad_nodes"]
    with mode("compiled"):
        out = dj.tanh(F.linear(x, w)) * 2.0
        assert type(out) is LazyTensor and lazy_info()["grad_nodes"] == before + 3
        node = out.grad_fn
        assert type(node).apply is not Node.apply           # the signature's generated apply
        chain = [node, node.next_functions[0][0], node.next_functions[0][0].next_functions[0][0]]
        assert [n.name() for n in chain] == [n.name() for n in
                                             [out_e.grad_fn, out_e.grad_fn.next_functions[0][0],
                                              out_e.grad_fn.next_functions[0][0].next_functions[0][0]]]
        leaf = chain[2].next_functions[1][0]
        assert type(leaf) is AccumulateGrad and leaf.variable() is w and chain[2].next_functions[0] is None
        assert type(chain[1].saved["result"].data_tensor) is LazyTensor      # tanh's output: its twin
        out.sum().backward()
    out_e.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), ew.grad.numpy())
    np.testing.assert_array_equal(out.numpy(), out_e.numpy())


def test_out_argument_with_grad_raises_eager_modes_error():
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    buf = dj.tensor([0.0, 0.0])
    with pytest.raises(AutogradError) as want:
        dj.tanh(w, out=buf)
    with mode("compiled"):
        with pytest.raises(AutogradError) as got:
            dj.tanh(w, out=buf)
    assert str(got.value) == str(want.value)


def test_an_op_on_a_value_pending_in_another_threads_graph_runs_eagerly_with_eager_modes_node():
    # the per-signature recorder records only values of this thread's graph: another's is forced
    # (that thread's graph runs, under its lock) and the op runs eagerly, with the eager node
    wa = np.array([0.5, -1.0, 2.0], np.float32)
    ew = dj.tensor(wa, requires_grad=True)
    dj.tanh(ew * 2.0).sum().backward()
    w = dj.tensor(wa, requires_grad=True)
    box, errors = {}, []
    with mode("compiled"):
        a = w * 2.0
        assert type(a) is LazyTensor

        def other():
            try:
                with mode("compiled"):
                    b = dj.tanh(a)
                    box["pending"] = type(b) is LazyTensor
                    b.sum().backward()
            except BaseException as e:      # reported below
                errors.append(e)
        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert not errors and box["pending"] is False
    np.testing.assert_array_equal(w.grad.numpy(), ew.grad.numpy())
