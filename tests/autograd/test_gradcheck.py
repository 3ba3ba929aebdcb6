"""``dj.autograd.gradcheck``: passes on correct formulas, reports the worst element on wrong ones."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError


class WrongAtOne(dj.autograd.Function):
    """y = 2 x, with a backward that is wrong at element 2 (by 0.5) and at element 0 (by 1e-7)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        err = dj.tensor([1e-7, 0.0, 0.5, 0.0], dtype=dj.float64)
        return g * 2.0 + g * err


def _x():
    return dj.tensor([0.1, 0.2, 0.3, 0.4], dtype=dj.float64, requires_grad=True)


def test_gradcheck_reports_the_worst_element():
    with pytest.raises(AutogradError) as e:
        dj.autograd.gradcheck(WrongAtOne.apply, (_x(),))
    msg = str(e.value)
    assert "Jacobian mismatch for output 0 with respect to input 0" in msg
    assert "at input element 2, output element 2" in msg and "analytical 2.5 vs numerical 2" in msg


def test_gradcheck_without_raising_and_tolerances():
    assert dj.autograd.gradcheck(WrongAtOne.apply, (_x(),), raise_exception=False) is False
    assert dj.autograd.gradcheck(WrongAtOne.apply, (_x(),), atol=0.6) is True


def test_gradcheck_multiple_inputs_and_outputs():
    a = dj.tensor([[0.5, -1.0], [2.0, 0.3]], dtype=dj.float64, requires_grad=True)
    b = dj.tensor([1.5, -0.5], dtype=dj.float64, requires_grad=True)
    c = dj.tensor([3.0, 4.0], dtype=dj.float64)                       # not differentiated
    assert dj.autograd.gradcheck(lambda a, b, c: (a @ b, (a * c).sum() + b.exp().sum()), (a, b, c))


def test_gradcheck_needs_an_input_that_requires_grad_and_warns_on_float32():
    with pytest.raises(AutogradError, match="no input requires grad"):
        dj.autograd.gradcheck(lambda t: t * 2, (dj.tensor([1.0]),))
    x32 = dj.tensor([0.5, 1.0], dtype=dj.float32, requires_grad=True)
    with pytest.warns(UserWarning, match="not float64"):
        dj.autograd.gradcheck(lambda t: t * 2, (x32,), eps=1e-2, atol=1e-3)


def test_gradcheck_leaves_inputs_unchanged():
    x = _x()
    before = x.detach().numpy().copy()
    dj.autograd.gradcheck(lambda t: (t * t).sin(), (x,))
    np.testing.assert_array_equal(x.detach().numpy(), before)
    assert x.grad is None
