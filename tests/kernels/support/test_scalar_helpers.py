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


def _ulps(ours, x, ref_fn):
    ref = ref_fn(x.astype(np.float64))
    return np.abs(ours.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)


def _sincos_inputs():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2 ** 32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits)]                             # every exponent, both signs, subnormals
    near_pi = (np.arange(1, 20_001, dtype=np.float64) * (np.pi / 2)).astype(np.float32)
    around = np.concatenate([np.nextafter(near_pi, 0), near_pi, np.nextafter(near_pi, np.inf)])
    seam = np.float32(2.0 ** 24) * np.array([1 - 2 ** -24, 1.0, 1 + 2 ** -23, 2.0], np.float32)
    return np.concatenate([bits, around, seam, -seam, rng.uniform(-100, 100, 100_000).astype(np.float32),
                           np.array([16367173 * 2.0 ** 72, 3.4e38, 1e-45, 1e-30], np.float32)])


def test_vectorizable_sin_cos_f32_are_within_0_52_ulp_over_the_whole_range():
    # fast (Cody-Waite) chunks, table-reduced large arguments and the seam at 2**24 alike
    x = _sincos_inputs()
    for op, ref in ((dj.sin, np.sin), (dj.cos, np.cos)):
        ours = op(dj.asarray(x)).numpy()
        assert ours.dtype == np.float32
        assert _ulps(ours, x, ref).max() < 0.52, op


def test_sin_cos_f32_specials():
    x = dj.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-45, -1e-45])
    s, c = dj.sin(x).numpy(), dj.cos(x).numpy()
    assert np.isnan(s[:3]).all() and np.isnan(c[:3]).all()
    assert s[3] == 0.0 and np.signbit(s[3]) and not np.signbit(s[4])
    assert s[5] == np.float32(1e-45) and s[6] == -np.float32(1e-45)
    assert (c[3:] == 1.0).all()


def test_sin_f32_element_values_do_not_depend_on_their_neighbours():
    # A chunk holding one |x| >= 2**24 runs the exact form for all of its elements; the fast form
    # must give the same bits, or a value would change with what lies next to it
    from dispatch_jit.kernels.support.numba_types import JIT_HELPERS as _JIT_HELPERS
    rng = np.random.default_rng(3)
    x = rng.uniform(-3e4, 3e4, 50_000).astype(np.float32)
    mixed = x.copy()
    mixed[::4096] = np.float32(1e30)
    keep = np.ones(x.size, bool)
    keep[::4096] = False
    for op, name in ((dj.sin, "_sin_f32"), (dj.cos, "_cos_f32")):
        alone, with_big = op(dj.asarray(x)).numpy(), op(dj.asarray(mixed)).numpy()
        np.testing.assert_array_equal(alone[keep], with_big[keep])
        exact = _JIT_HELPERS[name]
        np.testing.assert_array_equal(alone[:300], [exact(v) for v in x[:300]])
        assert with_big[0] == exact(np.float32(1e30))
