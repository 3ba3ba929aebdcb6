"""Composite ops have no derivative row: their gradients come from the
decomposition (CompositeImplicitAutograd), checked by finite differences and,
when torch is importable, against torch.nn.functional."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the oracle is optional
    torch = None

# name -> (ours, torch's, input shapes); inputs are float64 in [-1.5, 1.5), the first non-contiguous
CASES = {
    "softmax": (lambda x: dj.softmax(x, -1), lambda x: F.softmax(x, -1), [(2, 3)]),
    "softmax-axis0": (lambda x: x.softmax(0), lambda x: F.softmax(x, 0), [(2, 3)]),
    "log_softmax": (lambda x: dj.log_softmax(x, 1), lambda x: F.log_softmax(x, 1), [(2, 3)]),
    "gelu": (lambda x: dj.gelu(x), lambda x: F.gelu(x), [(2, 3)]),
    "gelu-tanh": (lambda x: dj.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), [(2, 3)]),
    "silu": (lambda x: dj.silu(x), lambda x: F.silu(x), [(2, 3)]),
    "mse_loss": (lambda x, t: dj.mse_loss(x, t), lambda x, t: F.mse_loss(x, t), [(2, 3), (2, 3)]),
    "mse_loss-sum": (lambda x, t: dj.mse_loss(x, t, "sum"), lambda x, t: F.mse_loss(x, t, reduction="sum"),
                     [(2, 3), (2, 3)]),
    "mse_loss-none": (lambda x, t: dj.mse_loss(x, t, "none"), lambda x, t: F.mse_loss(x, t, reduction="none"),
                      [(2, 3), (2, 3)]),
    "linear": (lambda x, w, b: dj.linear(x, w, b), lambda x, w, b: F.linear(x, w, b), [(2, 3), (4, 3), (4,)]),
    "linear-nobias": (lambda x, w: dj.linear(x, w), lambda x, w: F.linear(x, w), [(2, 3), (4, 3)]),
    "linear-1d": (lambda x, w, b: dj.linear(x, w, b), lambda x, w, b: F.linear(x, w, b), [(3,), (2, 3), (2,)]),
}


def _arrays(name):
    rng = np.random.default_rng(len(name))
    out = []
    for k, shape in enumerate(CASES[name][2]):
        a = rng.uniform(-1.5, 1.5, tuple(reversed(shape)) if k == 0 else shape)
        out.append(a.T if k == 0 else a)      # the first input non-contiguous (for 2-D)
    return out


def _ours(name):
    return [dj.from_numpy(a.copy(order="K")).requires_grad_() for a in _arrays(name)]


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name):
    assert dj.autograd.gradcheck(CASES[name][0], tuple(_ours(name)))


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("name", list(CASES))
def test_grad_matches_torch(name):
    ours = _ours(name)
    theirs = [torch.from_numpy(np.ascontiguousarray(a)).requires_grad_() for a in _arrays(name)]
    out, ref = CASES[name][0](*ours), CASES[name][1](*theirs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    seed = np.random.default_rng(0).uniform(0.5, 1.5, tuple(out.shape))
    out.backward(dj.from_numpy(seed))
    ref.backward(torch.from_numpy(seed))
    for k, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name}: gradient of input {k}")


def test_composites_record_their_decomposition():
    x = dj.tensor([[1.0, 2.0, 3.0]], dtype=dj.float64, requires_grad=True)
    # softmax is an op with its own derivative row (kernels/nn), not a decomposition any more
    assert repr(dj.softmax(x, -1).grad_fn) == "<SoftmaxBackward>"
    assert repr(dj.silu(x).grad_fn) == "<MulBackward>"
