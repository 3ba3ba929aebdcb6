"""The scalar helpers that replace libm calls, checked over their whole range."""

import numpy as np

import dispatch_jit as dj


def test_vectorizable_exp_f32_accuracy_and_specials():
    x = np.concatenate([np.linspace(-87.3, 88.7, 200_001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30], np.float32)])
    ours = dj.exp(dj.asarray(x)).numpy()
    ref = np.exp(x.astype(np.float64))
    rel = np.abs(ours - ref) / ref
    assert rel.max() < 3 * np.finfo(np.float32).eps      # within a few ulp everywhere in range
    special = dj.exp(dj.tensor([float("nan"), float("inf"), -float("inf"), 89.0, -88.0])).numpy()
    assert np.isnan(special[0]) and special[1] == np.inf and special[2] == 0.0 and special[3] == np.inf
    assert 0.0 <= special[4] < 1.2e-38                   # subnormal results flush to zero (documented)


def test_sigmoid_f32_uses_the_same_exp_and_saturates():
    x = dj.tensor([-200.0, -20.0, 0.0, 20.0, 200.0])
    np.testing.assert_allclose(dj.sigmoid(x).numpy(), 1 / (1 + np.exp(-x.numpy().astype(np.float64))), rtol=1e-6,
                               atol=1e-30)


def test_vectorizable_tanh_f32_accuracy_and_specials():
    x = np.concatenate([np.linspace(-12, 12, 200_001, dtype=np.float32),
                        np.array([1e-30, -1e-30, 1e-6, 0.6249, 0.625, 0.6251, 9.0, 50.0, -50.0], np.float32)])
    ours = dj.tanh(dj.asarray(x)).numpy()
    assert ours.dtype == np.float32
    ref = np.tanh(x.astype(np.float64))
    ulps = np.abs(ours - ref) / np.spacing(np.abs(ref).astype(np.float32))
    assert ulps.max() < 2.0                                # within 2 ulp, across the polynomial/exp seam
    special = dj.tanh(dj.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0])).numpy()
    assert np.isnan(special[0]) and special[1] == 1.0 and special[2] == -1.0
    assert special[3] == 0.0 and np.signbit(special[3]) and not np.signbit(special[4])
