"""The generated per-signature backward (autograd/codegen.py) against the generic one, and the
shortcuts the backward takes when it records nothing: same gradients, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.autograd.graph import Node
from dispatch_jit.errors import AutogradError

RNG = np.random.default_rng(0)


def _t(shape, dtype=np.float64, requires_grad=True):
    return dj.tensor(RNG.standard_normal(shape).astype(dtype) + 2.0, requires_grad=requires_grad)


# (name, inputs, the op): broadcasting (sum_to), mixed dtypes (the cast back), a number for a Tensor
# argument, static arguments in ctx, per-input Grad rows, one-formula rows, a saved result
CASES = [
    ("mul", lambda: (_t((3, 4)), _t((4,))), lambda a, b: a * b),
    ("mul_one_needs", lambda: (_t((3, 4)), _t((3, 1), requires_grad=False)), lambda a, b: a * b),
    ("div_mixed", lambda: (_t((2, 3), np.float32), _t((2, 3))), lambda a, b: a / b),
    ("add_alpha", lambda: (_t((2, 3)), _t((1, 3))), lambda a, b: dj.add(a, b, alpha=2.5)),
    ("sub_number", lambda: (_t((5,)),), lambda a: dj.sub(a, 3.0)),
    ("pow", lambda: (_t((4,)), _t((4,))), lambda a, b: dj.pow(a, b)),
    ("exp", lambda: (_t((6,), np.float32),), lambda a: dj.exp(a)),
    ("sum_axis", lambda: (_t((3, 4)),), lambda a: a.sum(axis=1)),
    ("mean_keep", lambda: (_t((3, 4)),), lambda a: a.mean(axis=0, keepdims=True)),
    ("amax", lambda: (_t((3, 4)),), lambda a: dj.amax(a, axis=1)),
    ("matmul", lambda: (_t((3, 4)), _t((4, 2))), lambda a, b: dj.matmul(a, b)),
]


@pytest.mark.parametrize("name,make,fn", CASES, ids=[c[0] for c in CASES])
def test_generated_apply_equals_generic(name, make, fn):
    inputs = make()
    out = fn(*inputs)
    node = out.grad_fn
    assert type(node).apply is not Node.apply      # the signature's own, generated apply
    g = dj.tensor(RNG.standard_normal(out.shape).astype(out.numpy().dtype))
    with dj.no_grad():
        fast = node.apply((g,))
        slow = Node.apply(node, (g,))
    n = len(node.next_functions)
    assert len(fast) == n and len(slow) <= n
    for i in range(n):
        a, b = fast[i], slow[i] if i < len(slow) else None
        assert (a is None) == (b is None), (name, i)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_generated_apply_refuses_a_freed_graph():
    x = _t((3,))
    y = (x * x).sum()
    y.backward()
    with pytest.raises(AutogradError, match="backward through the graph a second time"):
        y.backward()


def test_generated_apply_sees_in_place_writes():
    x = _t((3,))
    e = dj.exp(x)
    y = e * 2.0
    e.add_(1.0)
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("reduce", [lambda a: a.sum(), lambda a: a.sum(axis=(0, 2)), lambda a: a.mean(axis=1),
                                    lambda a: a.sum(axis=-1, keepdims=True), lambda a: dj.amax(a)],
                         ids=["sum", "sum_axes", "mean_axis", "sum_keepdims", "amax"])
def test_unrecorded_reduction_backward_equals_the_recorded_one(reduce):
    """Without create_graph a reduction's gradient is a NumPy copy, with it an expand view:
    the same values, and only the recorded one is differentiable."""
    x = _t((2, 3, 4))
    reduce(x * x).sum().backward()
    plain = x.grad.numpy().copy()
    x.grad = None
    reduce(x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    np.testing.assert_array_equal(plain, x.grad.numpy())


def test_unrecorded_reduction_backward_is_seen_by_modes():
    """A dispatch mode watches every op: the backward then dispatches expand, not NumPy."""
    seen = []

    class Log(dj.DispatchMode):
        def __dispatch__(self, op, types, args, kwargs):
            seen.append(op.name())
            return op(*args, **kwargs)

    x = _t((4,))
    y = (x * 2.0).sum()
    with Log():
        y.backward()
    assert "aten::expand" in seen
    np.testing.assert_array_equal(x.grad.numpy(), [2.0] * 4)


def test_accumulation_into_grad_with_a_gradient_that_requires_grad():
    """gradient= may require grad; without create_graph, .grad still records nothing."""
    x = _t((3,))
    v = _t((3,))
    (x * 1.0).backward(v)
    (x * 1.0).backward(v)
    assert not x.grad.requires_grad and x.grad.grad_fn is None
    np.testing.assert_array_equal(x.grad.numpy(), 2 * v.detach().numpy())
