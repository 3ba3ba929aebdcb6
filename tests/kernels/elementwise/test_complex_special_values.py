"""Complex sinh, cosh and tanh at infinities, NaNs, signed zeros and past overflow: C99's special
values (the array API's special cases), as NumPy gives them; Numba's cmath functions do not."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj

_PARTS = [0.0, -0.0, 1.0, -2.5, 30.0, -800.0, 800.0, math.inf, -math.inf, math.nan]
GRID = np.array([complex(a, b) for a in _PARTS for b in _PARTS])


def _same(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    if want == 0:
        return got == 0          # the sign of a zero part is unspecified in most of these cases
    return got == want or abs(got - want) <= 1e-5 * abs(want)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
@pytest.mark.parametrize("name,ref", [("sinh", np.sinh), ("cosh", np.cosh), ("tanh", np.tanh)])
def test_special_values_match_numpy(name, ref, dt):
    z = GRID.astype(dt)
    with np.errstate(all="ignore"):
        want = ref(z)
    got = getattr(dj, name)(dj.from_numpy(z)).numpy()
    bad = [(v, g, w) for v, g, w in zip(z, got, want)
           if not (_same(g.real, w.real) and _same(g.imag, w.imag))]
    assert not bad, bad[:5]


def test_the_standards_named_cases():
    inf, nan = math.inf, math.nan
    c = dj.cosh(dj.tensor([complex(0, inf), complex(inf, inf), complex(inf, 0)], dtype=dj.complex128)).numpy()
    assert math.isnan(c[0].real) and c[0].imag == 0
    assert c[1].real == inf and math.isnan(c[1].imag)
    assert c[2] == complex(inf, 0)
    t = dj.tanh(dj.tensor([complex(0, inf), complex(inf, 1.0)], dtype=dj.complex128)).numpy()
    assert t[0].real == 0 and math.isnan(t[0].imag)
    assert t[1] == complex(1, 0)
    assert math.isnan(dj.sinh(dj.tensor([complex(nan, 1.0)])).numpy()[0].imag)


def test_inverse_functions_at_nan():
    inf, nan = math.inf, math.nan

    def one(name, z):
        return complex(getattr(dj, name)(dj.tensor([z], dtype=dj.complex128)).numpy()[0])

    a = one("acos", complex(0.0, nan))
    assert a.real == pytest.approx(math.pi / 2) and math.isnan(a.imag)
    a = one("acosh", complex(0.0, nan))
    assert math.isnan(a.real) and abs(a.imag) == pytest.approx(math.pi / 2)
    a = one("asinh", complex(nan, 0.0))
    assert math.isnan(a.real) and a.imag == 0
    a = one("atanh", complex(0.0, nan))
    assert a.real == 0 and math.isnan(a.imag)
    a = one("atanh", complex(nan, 1.0))
    assert math.isnan(a.real) and math.isnan(a.imag)
    assert one("acos", complex(0.5, 0.5)) == pytest.approx(np.arccos(0.5 + 0.5j))     # finite: cmath's
    assert one("atanh", complex(0.5, inf)) == pytest.approx(np.arctanh(complex(0.5, inf)))


@pytest.mark.parametrize("dt", [dj.complex64, dj.complex128])
def test_expm1_of_a_signed_zero_is_plus_zero(dt):
    # the standard: expm1(+-0 + 0j) is 0 + 0j (exp(z) - 1 rounds -0 + 1 - 1 to +0), although the
    # real expm1(-0) is -0; the conjugate keeps its sign in the imaginary part
    got = dj.expm1(dj.tensor([complex(-0.0, 0.0), complex(0.0, 0.0), complex(-0.0, -0.0)], dtype=dt)).numpy()
    assert not np.signbit(got.real).any()
    assert list(np.signbit(got.imag)) == [False, False, True]


def test_imag_of_a_real_tensor_is_zero_even_for_nan_and_inf():
    # zeros, as NumPy's np.imag: not x - x, which is NaN at NaN and inf
    for dt in (dj.float16, dj.float32, dj.float64):
        got = dj.imag(dj.tensor([1.0, math.nan, math.inf, -math.inf], dtype=dt))
        assert got.dtype is dt
        np.testing.assert_array_equal(got.numpy(), np.zeros(4))
