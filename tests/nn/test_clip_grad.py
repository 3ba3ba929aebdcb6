"""dj.nn.utils: clip_grad_norm_ / clip_grad_value_ / get_total_norm against torch.nn.utils
(the same gradients in both, the same total norm and the same clipped gradients)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.nn.utils import clip_grad_norm_, clip_grad_value_, get_total_norm


def _params(lib, grads):
    ps = []
    for g in grads:
        p = lib.zeros(g.shape, requires_grad=True) if lib is not dj else dj.nn.Parameter(dj.zeros(g.shape))
        if g is not None:
            p.grad = lib.tensor(g)
        ps.append(p)
    return ps


GRADS = [np.array([[3.0, -4.0], [1.0, 2.0]], np.float32), np.array([0.5, -12.0, 7.0], np.float32),
         np.array(2.5, np.float32)]


@pytest.mark.parametrize("max_norm", [1.0, 100.0])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    torch = pytest.importorskip("torch")
    ours, theirs = _params(dj, GRADS), _params(torch, GRADS)
    total = clip_grad_norm_(ours, max_norm, norm_type)
    ref = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert total.shape == () and total.dtype == dj.float32
    np.testing.assert_allclose(total.item(), ref.item(), rtol=1e-6)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_scales_in_place_and_skips_missing_grads():
    ps = _params(dj, GRADS)
    ps.append(dj.nn.Parameter(dj.ones(2)))           # no grad: skipped, stays None
    before = [p.grad for p in ps[:3]]
    total = clip_grad_norm_(iter(ps), 1.0)            # a generator, as model.parameters()
    expected = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in GRADS))
    assert total.item() == pytest.approx(expected, rel=1e-6)
    assert all(p.grad is g for p, g in zip(ps, before)) and ps[3].grad is None    # in place
    clipped = math.sqrt(sum(float((p.grad.numpy().astype(np.float64) ** 2).sum()) for p in ps[:3]))
    assert clipped == pytest.approx(1.0, rel=1e-5)
    # below max_norm: the factor clamps to 1, the gradients keep their values
    w = dj.nn.Parameter(dj.tensor([0.3, 0.4]))
    w.grad = dj.tensor([0.3, 0.4])
    assert clip_grad_norm_(w, 1.0).item() == pytest.approx(0.5) and w.grad.tolist() == pytest.approx([0.3, 0.4])


def test_no_grads_and_nonfinite():
    assert clip_grad_norm_([dj.nn.Parameter(dj.ones(2))], 1.0).item() == 0.0
    p = dj.nn.Parameter(dj.ones(2))
    p.grad = dj.tensor([1.0, math.inf])
    assert math.isinf(clip_grad_norm_([p], 1.0).item())        # as torch: no error unless asked
    p.grad = dj.tensor([1.0, math.nan])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_get_total_norm_and_clip_grad_value_match_torch():
    torch = pytest.importorskip("torch")
    tensors = [np.array([1.0, -2.0, 3.0], np.float32), np.array([[4.0]], np.float32)]
    ours = get_total_norm([dj.tensor(t) for t in tensors], 3.0)
    theirs = torch.nn.utils.get_total_norm([torch.tensor(t) for t in tensors], 3.0)
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-6)
    a, b = _params(dj, GRADS), _params(torch, GRADS)
    clip_grad_value_(a, 2.0)
    torch.nn.utils.clip_grad_value_(b, 2.0)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_clip_inside_compiled_step_equals_eager():
    """The clipping is ops with no Python branch on the norm: a step under dj.execution_mode("compiled")
    gives eager mode's bits."""
    def run(lazy):
        dj.manual_seed(0)
        model = dj.nn.Linear(3, 2)
        opt = dj.optim.SGD(model.parameters(), lr=0.5)
        x = dj.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
        norms = []
        for _ in range(3):
            with dj.execution_mode("compiled" if lazy else "eager"):
                opt.zero_grad()
                (model(x) ** 2).sum().backward()
                norms.append(clip_grad_norm_(model.parameters(), 0.1))
                opt.step()
        return [n.item() for n in norms], [p.detach().numpy().copy() for p in model.parameters()]
    (n0, p0), (n1, p1) = run(False), run(True)
    assert n0 == n1 and n0[0] > 0.1
    for a, b in zip(p0, p1):
        np.testing.assert_array_equal(a, b)
