"""Compiled mode without a flush where eager mode's order does not need one: an in-place op on a
value pending in the graph (``g.mul_(coef)``: its out-of-place op recorded and the tensor rebound,
record.py ``_record_inplace``), ``stack``/``cat`` of pending values (generic.py ``record_list``) and
matmul in backward formulas (``SHAPE_TYPED``),
so that ``clip_grad_norm_`` between ``backward()`` and an optimizer's step forces nothing.  Each
compared with eager mode bit for bit, and the cases that must still run eagerly (a viewed value, a
saved tensor written) with eager mode's results and errors."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.lazy import LazyTensor, lazy_info, mode
from dispatch_jit.tensor import version_of

A = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)


def _flushes() -> int:
    return lazy_info()["flushes"]


def _train(run_mode, n=4):
    """``n`` steps of backward, clip_grad_norm_ and AdamW in ``run_mode``: parameters, grads, the
    total norms, the grads' versions, and per step the flushes from backward() to the end of step()."""
    w = dj.nn.Parameter(dj.tensor(A))
    b = dj.nn.Parameter(dj.tensor(np.arange(3, dtype=np.float32) / 4))
    opt = dj.optim.AdamW([w, b], lr=0.1)
    totals, flushes = [], []
    for _ in range(n):
        with mode(run_mode):
            opt.zero_grad(set_to_none=True)
            loss = (dj.tanh(w * 0.5) * w + b).sum() * 3.0      # a norm above max_norm: clipping scales
            before = _flushes()
            loss.backward()
            total = dj.nn.utils.clip_grad_norm_([w, b], 1.0)
            opt.step()
            flushes.append(_flushes() - before)
            totals.append(total.item())
    return ([w.detach().numpy().copy(), b.detach().numpy().copy(), w.grad.numpy().copy(), b.grad.numpy().copy()],
            totals, [version_of(w.grad), version_of(b.grad)], flushes)


def test_clip_grad_norm_between_backward_and_step_forces_nothing():
    got, totals, versions, flushes = _train("compiled")
    want, want_totals, want_versions, _ = _train("eager")
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g, e)
    assert totals == want_totals and versions == want_versions
    # the first step makes AdamW's state eagerly (one flush more); from then on backward, the
    # norms' stack, the grads' mul_ and the update run as the step's one flush
    assert flushes[1:] == [1] * (len(flushes) - 1)


def test_inplace_op_on_a_pending_value_is_recorded():
    def run(m):
        x = dj.tensor(A)
        with mode(m):
            y = x * 2.0
            before = _flushes()
            y.mul_(dj.tensor(3.0))
            y.add_(x, alpha=2)
            y.clamp_(max=1.5)
            held = y.__class__ is LazyTensor
            n = _flushes() - before
            return y.numpy().copy(), version_of(y), held, n
    got, want = run("compiled"), run("eager")
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1] == 3
    assert got[2] and got[3] == 0


def test_inplace_op_on_a_viewed_value_runs_eagerly():
    def run(m):
        x = dj.tensor(A)
        with mode(m):
            y = x * 2.0
            v = y.t()            # a pending view: eager mode's view sees the write
            u = (x + 1.0)[1:]     # the write into a view must reach its base
            y.mul_(3.0)
            u.mul_(2.0)
            base = u._base if u._base is not None else u
            return v.numpy().copy(), y.numpy().copy(), u.numpy().copy(), base.numpy().copy()
    for g, e in zip(run("compiled"), run("eager")):
        np.testing.assert_array_equal(g, e)


def test_inplace_op_on_a_saved_pending_value_raises_eager_error():
    def run(m):
        w = dj.nn.Parameter(dj.tensor(A))
        with mode(m):
            a = dj.tensor(A) * 2.0          # pending, saved by mul's backward
            out = (w * a).sum()
            a.mul_(2.0)
            with pytest.raises(RuntimeError) as e:
                out.backward()
            return type(e.value), str(e.value).split(";")[0]
    assert run("compiled") == run("eager")


@pytest.mark.parametrize("op", ["stack", "cat"])
def test_stack_and_cat_of_pending_values_are_recorded(op):
    def run(m):
        x = dj.tensor(A)
        with mode(m):
            parts = [x * 2.0, x, (x + 1.0).sum(0, keepdim=True)]   # pending, plain and a reduction
            before = _flushes()
            z = getattr(dj, op)(parts, dim=0) if op == "cat" else dj.stack([p.sum() for p in parts])
            y = z * 0.5
            n = _flushes() - before
            return y.numpy().copy(), y.shape, n
    got, want = run("compiled"), run("eager")
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1] and got[2] == 0


def test_stack_of_mismatched_shapes_raises_eager_error():
    x = dj.tensor(A)
    with pytest.raises(Exception) as want:
        dj.stack([x * 2.0, (x * 2.0)[1:]])
    with mode("compiled"):
        with pytest.raises(type(want.value)) as got:
            dj.stack([x * 2.0, (x * 2.0)[1:]])
    assert str(got.value) == str(want.value)


def test_matmul_in_a_backward_formula_is_recorded():
    """matmul has no meta function: its eager kernel on stand-ins types it (generic.SHAPE_TYPED),
    so the backward of ``x @ w`` records its products instead of forcing the pending gradient."""
    def run(m):
        w = dj.nn.Parameter(dj.tensor(A))
        x = dj.tensor(A.T[:2] * 0.5)
        with mode(m):
            loss = dj.tanh(x @ w).sum()
            before = _flushes()
            loss.backward()
            n = _flushes() - before
            return w.grad.numpy().copy(), loss.item(), n
    got, want = run("compiled"), run("eager")
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1] and got[2] == 0


def test_matmul_of_a_pending_value_with_grad_is_recorded():
    """matmul's AutogradCPU kernel routes sparse operands and gives dense ones the Autograd alias
    kernel: compiled mode records dense calls with that kernel's node (``att @ v`` of a pending
    softmax in attention) instead of forcing the pending operand."""
    def run(m):
        w = dj.nn.Parameter(dj.tensor(A))
        x = dj.tensor(A.T[:2] * 0.5)
        with mode(m):
            h = dj.tanh(x * 2.0)
            before = _flushes()
            y = h @ w
            n = _flushes() - before
            (y * y).sum().backward()
            return w.grad.numpy().copy(), y.detach().numpy().copy(), n
    got, want = run("compiled"), run("eager")
    for g, e in zip(got[:2], want[:2]):
        np.testing.assert_array_equal(g, e)
    assert got[2] == 0


def test_one_structure_of_two_sizes_gets_a_compiled_plan_each():
    """The plan cache's key holds the inputs' shapes: a plan with products becomes one compiled
    function for one run's sizes, so two flushes of one structure and other sizes alternating (a
    GPT's token and position embeddings) each get a plan whose function runs, none declining."""
    from dispatch_jit.compiler.lazy.state import state
    ws = [dj.tensor(A), dj.tensor(A[:2] * 0.5)]
    x = dj.tensor(A.T * 0.25)
    before = lazy_info()["plans"]
    with mode("compiled"):
        for _ in range(5):
            outs = [dj.tanh(dj.matmul(w, x)).numpy().copy() for w in ws]
    assert lazy_info()["plans"] - before == 2
    mine = [p for k, p in state.plans.items() if (A.shape, x.shape) in [k[3]] or (ws[1].shape, x.shape) in [k[3]]]
    assert len(mine) == 2 and all(p.function is not None for p in mine)
    for w, o in zip(ws, outs):
        np.testing.assert_array_equal(o, dj.tanh(dj.matmul(w, x)).numpy())
