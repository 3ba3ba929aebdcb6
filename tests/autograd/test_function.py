"""``dj.autograd.Function``: user-defined forward/backward recorded as one node."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError


def T(values, requires_grad=True):
    return dj.tensor(values, dtype=dj.float64, requires_grad=requires_grad)


class ScaledCube(dj.autograd.Function):
    """k * x**3 with a non-tensor argument k."""

    seen: list = []

    @staticmethod
    def forward(ctx, x, k):
        ScaledCube.seen.append((ctx.needs_input_grad, dj.is_grad_enabled()))
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x * x * (3.0 * ctx.k), None


class MulAdd(dj.autograd.Function):
    """Two outputs: (a * b, a + b)."""

    calls: list = []

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b, a + b

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        MulAdd.calls.append(ctx.needs_input_grad)
        a, b = ctx.saved_tensors
        ga = g_prod * b + g_sum if ctx.needs_input_grad[0] else None
        gb = g_prod * a + g_sum if ctx.needs_input_grad[1] else None
        return ga, gb


def test_save_for_backward_and_non_tensor_arguments():
    ScaledCube.seen.clear()
    x = T([1.0, 2.0])
    y = ScaledCube.apply(x, 2.0)
    assert ScaledCube.seen == [((True, False), False)]      # forward runs with grad recording off
    assert repr(y.grad_fn) == "<ScaledCubeBackward>" and not y.is_leaf
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 16.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 24.0])
    with pytest.raises(AutogradError, match="backward through the graph a second time"):
        y.sum().backward()


def test_gradcheck_through_a_function():
    assert dj.autograd.gradcheck(lambda t: ScaledCube.apply(t, 2.0), (T([0.5, -1.5]),))


def test_not_recorded_without_grad():
    assert not ScaledCube.apply(T([1.0], requires_grad=False), 1.0).requires_grad
    with dj.no_grad():
        assert not ScaledCube.apply(T([1.0]), 1.0).requires_grad


def test_needs_input_grad():
    MulAdd.calls.clear()
    a, b = T([1.0, 2.0]), T([3.0, 4.0], requires_grad=False)
    p, s = MulAdd.apply(a, b)
    (p * 2 + s * 3).sum().backward()
    assert MulAdd.calls == [(True, False)]
    np.testing.assert_array_equal(a.grad.numpy(), 2 * np.array([3.0, 4.0]) + 3)
    assert b.grad is None


def test_multiple_outputs_share_one_node():
    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    p, s = MulAdd.apply(a, b)
    assert p.grad_fn is s.grad_fn and repr(p.grad_fn) == "<MulAddBackward>"
    (p * s).sum().backward()                  # both outputs reach the node: gradients per output
    av, bv = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(a.grad.numpy(), bv * (av + bv) + av * bv)
    np.testing.assert_allclose(b.grad.numpy(), av * (av + bv) + av * bv)


def test_unused_output_gets_zeros():
    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    p, s = MulAdd.apply(a, b)
    p.sum().backward()                        # s took no part: its gradient is materialized as zeros
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 2.0])


def test_wrong_number_of_gradients_raises():
    class Bad(dj.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g                          # one gradient for two inputs

    with pytest.raises(AutogradError, match="Bad.backward returned 1 gradients, but forward took 2 arguments"):
        Bad.apply(T([1.0]), T([2.0])).sum().backward()


def test_wrong_gradient_shape_raises():
    class WrongShape(dj.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.sum()

        @staticmethod
        def backward(ctx, g):
            return dj.ones(5, dtype=dj.float64)

    with pytest.raises(AutogradError, match=r"invalid gradient for argument 0: shape \(5,\).*shape \(2,\)"):
        WrongShape.apply(T([1.0, 2.0])).backward()


def test_missing_backward_raises():
    class NoBackward(dj.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

    with pytest.raises(NotImplementedError, match="must define backward"):
        NoBackward.apply(T([1.0])).sum().backward()


def test_saved_tensor_modified_in_place_raises():
    x = T([1.0, 2.0])
    h = x * 1.0
    y = ScaledCube.apply(h, 1.0)
    h.add_(1.0)
    with pytest.raises(AutogradError, match="is at version 1; expected version 0"):
        y.sum().backward()


def test_double_backward_through_a_function():
    x = T(0.7)
    (g,) = dj.autograd.grad(ScaledCube.apply(x, 1.0), x, create_graph=True)
    assert g.item() == pytest.approx(3 * 0.7 ** 2) and g.requires_grad
    (h,) = dj.autograd.grad(g, x)
    assert h.item() == pytest.approx(6 * 0.7)
