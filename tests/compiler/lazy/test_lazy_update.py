"""An optimizer's step in compiled mode (lazy/update.py): the update recorded into the pending graph
of the forward and backward, run with them as one flush at the end of ``step()``, and the cases that
take eager mode's path instead (first step, other dtypes, non-contiguous, view or exported
parameters, hand-written updates), each compared with eager mode bit for bit: values, ``.grad``,
optimizer state, version counters, errors."""

import threading

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.lazy import LazyTensor, lazy_info, mode
from dispatch_jit.compiler.lazy.state import state
from dispatch_jit.tensor import version_of

A = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)


def _steps(run_mode, make, n=4, dtype=np.float32, prepare=None, read_after=None):
    """``n`` steps of ``loss = sum(tanh(w * x) * w)`` over parameters made by ``make`` in ``run_mode``:
    the parameters, their .grad, the state, the versions and whatever ``read_after`` read per step."""
    w = make(A.astype(dtype))
    w = w if w.requires_grad else dj.nn.Parameter(w)
    b = dj.nn.Parameter(dj.tensor(np.arange(3, dtype=dtype) / 4))
    opt = dj.optim.SGD([w, b], lr=0.1, momentum=0.9, weight_decay=0.01)
    held = prepare(w) if prepare else None
    seen = []
    for _ in range(n):
        with mode(run_mode):
            opt.zero_grad()
            (dj.tanh(w * 0.5) * w + b).sum().backward()
            opt.step()
            if read_after:
                seen.append(read_after(w, held))
    out = [w.detach().numpy().copy(), b.detach().numpy().copy(), w.grad.numpy().copy(), b.grad.numpy().copy()]
    out += [opt.state[p]["momentum_buffer"].numpy().copy() for p in (w, b)]
    return out, [version_of(w), version_of(b)], seen


def _same(want, got):
    for a, b in zip(want[0], got[0]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert want[1] == got[1]
    for a, b in zip(want[2], got[2]):
        np.testing.assert_array_equal(a, b)


def test_a_step_is_one_flush_and_later_reads_compute_nothing():
    w = dj.nn.Parameter(dj.tensor(A))
    opt = dj.optim.Adam([w], lr=0.1)
    for k in range(4):
        with mode("compiled"):
            opt.zero_grad()
            loss = (dj.tanh(w * 0.5) * w).sum()
            loss.backward()
            before = lazy_info()
            opt.step()
            after = lazy_info()
            assert after["flushes"] == before["flushes"] + 1          # the step is the sync point
            assert type(loss) is not LazyTensor and type(w.grad) is not LazyTensor
            loss.item(), w.grad.numpy(), opt.state_dict()
            assert lazy_info()["flushes"] == after["flushes"]
            assert after["steps_recorded"] - before["steps_recorded"] == (k > 0)   # the first makes the state
    if k:
        assert lazy_info()["step_fallback_reason"] == "the first step creates the state"


@pytest.mark.parametrize("case, make, prepare, reason", [
    ("recorded", dj.tensor, None, None),
    ("float64", dj.tensor, None, None),
    ("float16", lambda a: dj.tensor(a.astype(np.float16)), None, "float16"),
    ("non-contiguous", lambda a: dj.tensor(np.ascontiguousarray(a.T)).T, None, "not C-contiguous"),
    ("viewed", dj.tensor, lambda w: w[1], None),          # the loop writes in place: the view sees it
    ("a view", lambda a: dj.tensor(np.concatenate([a, a]))[4:].requires_grad_(), None, "a view of another tensor"),
    ("exported", dj.tensor, lambda w: w.detach().numpy(), "handed out to NumPy"),
])
def test_recorded_and_fallback_steps_equal_eager(case, make, prepare, reason):
    dtype = np.float64 if case == "float64" else np.float32

    def read(w, held):       # a view or an exported array sees each update, as in eager mode
        return None if held is None else np.array(held.tolist() if isinstance(held, dj.Tensor) else held)
    want = _steps("eager", make, dtype=dtype, prepare=prepare, read_after=read)
    before = lazy_info()
    got = _steps("compiled", make, dtype=dtype, prepare=prepare, read_after=read)
    after = lazy_info()
    _same(want, got)
    if reason is None:
        assert after["steps_recorded"] - before["steps_recorded"] == 3      # all but the first
    else:
        assert after["steps_recorded"] == before["steps_recorded"]
        assert reason in after["step_fallback_reason"], after["step_fallback_reason"]


def test_the_plan_function_calls_the_loop_which_writes_in_place():
    # after a few steps the step's plan is one compiled function, which calls the multi-tensor loop
    # itself (update.py's rule); the loop writes the parameter and its momentum buffer in place
    w = dj.nn.Parameter(dj.tensor(np.eye(3, dtype=np.float32)))
    opt = dj.optim.SGD([w], lr=0.1, momentum=0.9)
    x, t = dj.tensor(A), dj.tensor([0, 1, 2, 0])
    known = set(map(id, state.plans.values()))
    arrays = w._data
    for _ in range(6):
        with mode("compiled"):
            opt.zero_grad()
            dj.nn.functional.cross_entropy(dj.nn.functional.linear(x, w), t).backward()
            opt.step()
    assert w._data is arrays          # the parameter's own memory
    mine = [p for p in state.plans.values() if id(p) not in known]
    fns = [p.function for p in mine if p.function is not None]
    assert any("_optim_sgd(" in f.source and f.calls for f in fns), [p.describe_function() for p in mine]


def test_parameters_without_grad_and_two_dtypes():
    out = {}
    for m in ("eager", "compiled"):
        w32 = dj.nn.Parameter(dj.tensor(A))
        w64 = dj.nn.Parameter(dj.tensor(A.astype(np.float64)))
        idle = dj.nn.Parameter(dj.tensor(A))           # never gets a gradient
        opt = dj.optim.AdamW([{"params": [w32, idle]}, {"params": [w64], "lr": 0.05}], lr=0.1, amsgrad=True)
        for _ in range(3):
            with mode(m):
                opt.zero_grad()
                ((w32 * w32).sum() + (w64 * 2.0).sum()).backward()
                opt.step()
        out[m] = [t.detach().numpy().copy() for t in (w32, w64, idle)] + [version_of(t) for t in (w32, w64, idle)]
    for a, b in zip(out["eager"], out["compiled"]):
        np.testing.assert_array_equal(a, b)


def test_hand_written_update_and_zero_grad_in_place():
    out = {}
    for m in ("eager", "compiled"):
        w = dj.nn.Parameter(dj.tensor(A))
        opt = dj.optim.SGD([w], lr=0.1)
        got = []
        for _ in range(3):
            with mode(m):
                (w * w).sum().backward()
                with dj.no_grad():
                    w -= 0.05 * w.grad             # in place: runs the graph, then eagerly
                w.grad.numpy()                     # computed: a plain tensor from here on
                doubled = w.grad * 2.0             # pending in compiled mode, reading the gradient
                opt.zero_grad(set_to_none=False)   # must not change what ``doubled`` reads
                got += [doubled.numpy().copy(), w.grad.numpy().copy(), version_of(w.grad)]
        out[m] = got + [w.detach().numpy().copy(), version_of(w)]
    for a, b in zip(out["eager"], out["compiled"]):
        np.testing.assert_array_equal(a, b)


def test_a_bad_target_raises_at_the_step_and_leaves_the_parameters():
    x = dj.tensor(A)
    t = dj.tensor([0, 7, 1, 2])                    # 7: out of range
    w = dj.nn.Parameter(dj.tensor(np.eye(3, dtype=np.float32)))
    opt = dj.optim.SGD([w], lr=0.1)
    with pytest.raises(Exception) as eager:
        dj.nn.functional.cross_entropy(dj.nn.functional.linear(x, w), t)
    for _ in range(2):
        opt.zero_grad()
        dj.nn.functional.linear(x, w).sum().backward()
        opt.step()
    before = w.detach().clone(), version_of(w)      # a clone: .numpy() would hand the storage out
    fallbacks = lazy_info()["step_fallbacks"]
    with mode("compiled"):
        opt.zero_grad()
        loss = dj.nn.functional.cross_entropy(dj.nn.functional.linear(x, w), t)
        loss.backward()
        with pytest.raises(type(eager.value)):
            opt.step()                             # the step's flush raises eager mode's error class
    assert lazy_info()["step_fallbacks"] == fallbacks     # the update was recorded, then never written
    np.testing.assert_array_equal(w.detach().numpy(), before[0].numpy())
    assert version_of(w) == before[1]


def test_another_threads_pending_read_of_a_parameter_runs_before_the_step_writes_it():
    w = dj.nn.Parameter(dj.tensor(A))
    opt = dj.optim.SGD([w], lr=0.5)
    for _ in range(2):        # past the first step
        with mode("compiled"):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
    want = w.detach().numpy() * 3.0
    recorded, stepped, got = threading.Event(), threading.Event(), []

    def reader():
        with mode("compiled"):
            z = w * 3.0                              # pending in this thread's graph
            recorded.set()
            stepped.wait()
            got.append(z.numpy().copy())
    th = threading.Thread(target=reader)
    th.start()
    recorded.wait()
    with mode("compiled"):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
    stepped.set()
    th.join()
    np.testing.assert_array_equal(got[0], want)


def test_parameters_used_through_views_are_recorded_and_equal_eager():
    # w.view(...) and v.t() in the forward: the gradients come back through views (pending views,
    # a transposed product), and the parameters have views while the step runs
    def run(m):
        w = dj.nn.Parameter(dj.tensor(np.arange(6, dtype=np.float32) / 7))
        v = dj.nn.Parameter(dj.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 9))
        x = dj.tensor(A)
        opt = dj.optim.Adam([w, v], lr=0.1, amsgrad=True)
        out = []
        for _ in range(5):
            with mode(m):
                opt.zero_grad()
                loss = dj.tanh(w.view(2, 3)).sum() + (x @ v).sum() + (x * v.t()).sum()
                loss.backward()
                opt.step()
                out.append(loss.item())
        return out + [t.detach().numpy().copy() for t in (w, v, w.grad, v.grad)] + [version_of(w), version_of(v)]
    want = run("eager")
    before = lazy_info()["steps_recorded"]
    got = run("compiled")
    assert lazy_info()["steps_recorded"] - before == 4
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
