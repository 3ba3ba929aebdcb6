"""A @dj.compile'd loss's gradients equal eager mode's bit for bit, also where a product is skinny
(kernels/linalg/product.py: a few rows times a wide matrix runs in the loop nest, not BLAS, in
eager mode and in the compiled plan functions alike). Oracle: eager mode, several SGD steps."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.run.cached import GradEntry
from dispatch_jit.kernels.linalg.product import skinny

F = nn.functional

# (batch, in, hidden, classes), and which products are skinny there
SHAPES = {
    "mlp 512x20-64-3: the weight gradient 3x512 @ 512x64": (512, 20, 64, 3),
    "batch of 2: the forward 2x64 @ 64x32 and input gradient 2x32 @ 32x64": (2, 40, 64, 32),
    "batch of 4: the first layer's forward 4x20 @ 20x64": (4, 20, 64, 3),
}


def _products(n, d, h, c):
    """(m, k, n) of every product of the MLP's forward and backward."""
    return [(n, d, h), (n, h, c), (n, c, h), (c, n, h), (h, n, d)]


@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_compiled_mlp_gradients_equal_eager_bit_for_bit(shape):
    n, d, h, c = shape
    assert any(skinny(*p) for p in _products(*shape))        # the case this test is about
    rng = np.random.default_rng(n)
    x = dj.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    y = dj.from_numpy(rng.integers(0, c, n))
    models = []
    for _ in range(2):
        dj.manual_seed(0)
        models.append(nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, c)))
    cm, em = models
    cf = dj.compile(lambda x, y: F.cross_entropy(cm(x), y))
    oc, oe = (dj.optim.SGD(m.parameters(), lr=0.1) for m in models)
    for step in range(3):
        for m, opt, loss_fn in ((cm, oc, cf), (em, oe, lambda x, y: F.cross_entropy(em(x), y))):
            opt.zero_grad()
            loss = loss_fn(x, y)
            loss.backward()
            m.last = loss.item()
            m.grads = [p.grad.numpy().copy() for p in m.parameters()]
            opt.step()
        assert cm.last == em.last, step
        for a, b in zip(cm.grads, em.grads):
            np.testing.assert_array_equal(a, b)
    e = cf._last
    assert isinstance(e, GradEntry), cf.explain()
    (f,) = e.fused.values()
    # the plan functions ran (run/call_rules.py's products), not only the interpreted steps
    assert f.forward.function is not None and f.forward.function.calls >= 1, f.forward.function_reason
    assert f.backward.function is not None and f.backward.function.calls >= 1, f.backward.function_reason
    assert "_product(" in f.backward.function.source
