"""The traced backward of advanced indexing (compiler/graph/joint.py LIST_RULES): ``logp[arange(N),
y]`` in a compiled loss gets index's formula (g put, accumulating, into zeros), so the call is a
fused forward and backward plan instead of an eager replay, with eager's gradients bit for bit,
and the forward one compiled function (run/tensor_rules.py's ``index`` rule)."""

import numpy as np
import pytest

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
    # index (and its backward's index_put) are plan-function rules (run/tensor_rules.py)
    assert "forward: one compiled function" in text, text


def test_an_index_out_of_range_in_a_compiled_loss_raises_eagers_error():
    rng = np.random.default_rng(1)
    x = dj.tensor(rng.standard_normal((3, 5)).astype(np.float32))
    w = dj.tensor(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)
    f = dj.compile(_loss)
    for _ in range(2):                      # the second call runs the compiled function
        f(x, dj.tensor(np.array([0, 1, 2])), w).backward()
    bad = dj.tensor(np.array([0, 4, 1]))
    with pytest.raises(IndexError) as eager:
        _loss(x, bad, w)
    with pytest.raises(IndexError) as compiled:
        f(x, bad, w)
    assert str(compiled.value) == str(eager.value)
