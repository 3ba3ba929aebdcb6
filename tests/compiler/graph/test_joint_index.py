"""The traced backward of advanced indexing (compiler/graph/joint.py LIST_RULES): ``logp[arange(N),
y]`` in a compiled loss gets index's formula (g put, accumulating, into zeros), so the call is a
fused forward and backward plan instead of an eager replay, with eager's gradients bit for bit."""

import numpy as np

import dispatch_jit as dj


def _loss(x, y, w):
    logp = (x @ w).log_softmax(dim=1)
    return -logp[dj.arange(x.shape[0]), y].mean()


def test_a_compiled_loss_that_indexes_its_log_probabilities_has_a_fused_backward():
    rng = np.random.default_rng(0)
    x = dj.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    y = dj.tensor(np.array([0, 2, 2, 1, 3, 2]))         # a repeated class: the accumulation counts
    w = dj.tensor(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    f = dj.compile(_loss)
    for _ in range(2):
        w.grad = None
        loss = f(x, y, w)
        loss.backward()
        got = w.grad.numpy().copy()
        w.grad = None
        ref = _loss(x, y, w)
        ref.backward()
        np.testing.assert_array_equal(loss.detach().numpy(), ref.detach().numpy())
        np.testing.assert_array_equal(got, w.grad.numpy())
    text = str(f.explain())
    assert "fused backward" in text and "replays the traced ops eagerly" not in text, text
