"""The scalar special functions of kernels/support/special_fns.py: the accuracy their docstring
states, measured against SciPy in float64 over their domains (tails included), and PyTorch's
values at the edges (poles, infinities, the ends of the domain)."""

import numpy as np
import pytest
import scipy.special as sp

import dispatch_jit as dj

RNG = np.random.default_rng(7)
WIDE = np.concatenate([RNG.uniform(-20, 20, 400), RNG.uniform(-1, 1, 100), [-0.5, 0.5, 1.0, 2.0, 10.0, 29.9,
                                                                            30.1, 100.0, -100.0]])
UNIT = np.concatenate([RNG.uniform(-1, 1, 400), 1 - 10.0 ** -RNG.uniform(1, 15, 100),
                       -1 + 10.0 ** -RNG.uniform(1, 15, 100)])
PROB = np.concatenate([RNG.uniform(0, 1, 400), 10.0 ** -RNG.uniform(1, 300, 100), 1 - 10.0 ** -RNG.uniform(1, 15, 50)])
EPS = np.finfo(np.float64).eps

# the normal CDF's tails: PyTorch's formula, 0.5 erfc(-x / sqrt 2), whose argument's rounding costs
# about x^2 / 2 ulps of the result; digamma near the poles of x < 0: tan(pi x)'s argument's rounding
def _tail(x):
    return 8 + x * x


def _poles(x):
    return np.where(x > 0, 64, 512)


# function -> (dj function, SciPy reference, arguments, ulps allowed: a number or a function of x)
CASES = {
    "erfinv": (dj.erfinv, sp.erfinv, UNIT, 4),
    "ndtri": (dj.special.ndtri, sp.ndtri, PROB, 4),
    "digamma": (dj.digamma, sp.digamma, np.concatenate([RNG.uniform(0.1, 50, 300), RNG.uniform(-20, -0.1, 100)]),
                _poles),
    "erfcx": (dj.special.erfcx, sp.erfcx, np.concatenate([WIDE, RNG.uniform(20, 1e4, 50), RNG.uniform(-26, 0, 50)]), 8),
    "log_ndtr": (dj.special.log_ndtr, sp.log_ndtr, np.concatenate([WIDE, RNG.uniform(-1e3, -20, 50)]), _tail),
    "i0": (dj.i0, sp.i0, WIDE, 8),
    "i0e": (dj.special.i0e, sp.i0e, np.concatenate([WIDE, RNG.uniform(30, 1e5, 50)]), 8),
    "i1": (dj.special.i1, sp.i1, WIDE, 8),
    "i1e": (dj.special.i1e, sp.i1e, np.concatenate([WIDE, -RNG.uniform(30, 1e5, 50)]), 8),
    "ndtr": (dj.special.ndtr, sp.ndtr, WIDE, _tail),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_accuracy_against_scipy(name):
    fn, ref, x, ulps = CASES[name]
    got = fn(dj.tensor(x)).numpy()
    want = ref(x)
    # relative to the result, except where the function crosses 0 (digamma's root): there, to 1
    scale = np.maximum(np.abs(want), 1.0 if name == "digamma" else np.finfo(np.float64).tiny)
    err = np.abs(got - want) / scale / EPS / (ulps(x) if callable(ulps) else ulps)
    assert np.nanmax(err) <= 1, f"{name}: {np.nanmax(err):.2f} x the ulps allowed at x = {x[np.nanargmax(err)]!r}"
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_zeta_and_polygamma_against_scipy():
    x, q = RNG.uniform(1.1, 12, 200), RNG.uniform(0.1, 30, 200)
    np.testing.assert_allclose(dj.special.zeta(dj.tensor(x), dj.tensor(q)).numpy(), sp.zeta(x, q), rtol=32 * EPS)
    for n in range(4):
        v = RNG.uniform(0.2, 20, 100)
        np.testing.assert_allclose(dj.polygamma(n, dj.tensor(v)).numpy(), sp.polygamma(n, v), rtol=64 * EPS)


def test_edges_as_pytorch():
    torch = pytest.importorskip("torch")
    big = float(np.finfo(np.float32).max)
    x = np.array([-np.inf, -big, -3.0, -2.5, -0.0, 0.0, 0.5, 1.0, np.inf, np.nan, 1e30], np.float32)
    # (not sinc: PyTorch's float32 sinc forms pi * x in float32, which overflows to NaN at -big and
    # leaves ~1e-8 at the integers, where dj's float64 evaluation gives ~1e-17)
    for name in ("digamma", "lgamma", "erfinv", "i0", "erfc", "exp2", "logit", "frac", "sgn", "deg2rad"):
        got = getattr(dj, name)(dj.tensor(x)).numpy()
        want = getattr(torch, name)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-6, equal_nan=True, err_msg=name)
    for name in ("i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr"):
        got = getattr(dj.special, name)(dj.tensor(x)).numpy()
        want = getattr(torch.special, name)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-6, equal_nan=True, err_msg=name)
