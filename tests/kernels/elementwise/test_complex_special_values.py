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


def _numpy_quotient(a, b):
    # NumPy's complex division (and PyTorch's tensor / tensor): at a zero divisor each part over +0
    with np.errstate(all="ignore"):
        return np.asarray(a) / np.asarray(b)


@pytest.mark.parametrize("dt", [dj.complex64, dj.complex128])
def test_division_by_a_complex_zero_is_inf_or_nan_never_an_exception(dt):
    # Numba's complex division raises Python's ZeroDivisionError: every path used to
    num = [1 + 1j, 1 + 0j, 0j, -1 + 0j, -1j, complex(math.inf, 0)]
    zeros = [0j, -0j, complex(-0.0, 0.0), complex(0.0, -0.0), 0j, 0j]
    x, z = dj.tensor(num, dtype=dt), dj.tensor(zeros, dtype=dt)
    want = _numpy_quotient(np.array(num, dt.np), np.array(zeros, dt.np))

    def check(got, want):
        got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
        want = np.broadcast_to(want, got.shape)
        bad = [(g, w) for g, w in zip(got.ravel(), want.ravel())
               if not (_same(g.real, w.real) and _same(g.imag, w.imag))]
        assert not bad, bad

    check(x / z, want)
    check(dj.div(x, z), want)
    for zero in (0j, 0, 0.0, dj.tensor(0j, dtype=dt)):          # Python scalars and a 0-d tensor
        check(x / zero, _numpy_quotient(np.array(num, dt.np), 0j))
    check(dj.tensor(1 + 1j, dtype=dt) / 0j, _numpy_quotient(np.complex128(1 + 1j), 0j))     # 0-d
    check((1 + 1j) / dj.tensor([0j], dtype=dt), _numpy_quotient(1 + 1j, np.zeros(1, dt.np)))   # __rtruediv__
    y = x.clone()
    y /= z
    check(y, want)
    check(dj.reciprocal(dj.tensor([0j], dtype=dt)), np.array([complex(math.inf, math.nan)]))   # as torch
    check(dj.rsqrt(dj.tensor([0j], dtype=dt)), np.array([complex(math.inf, math.nan)]))
    check(dj.tensor([2.0, 0.0]) / 0j, _numpy_quotient(np.array([2.0, 0.0], np.float32), np.complex64(0)))
    check(dj.compile(lambda a, b: a / b)(x, z), want)
    with dj.execution_mode("compiled"):
        check(x / z, want)
    big = 2 ** 18 + 3                                          # the parallel loop
    check(dj.from_numpy(np.full(big, 1 + 1j, dt.np)) / dj.from_numpy(np.zeros(big, dt.np)),
          np.array([complex(math.inf, math.inf)]))


def test_complex_division_by_zero_as_torch():
    torch = pytest.importorskip("torch")
    num, zero = [1 + 1j, 1 + 0j, 0j, -1j], [0j, -0j, 0j, 0j]
    for got, want in ((dj.tensor(num) / dj.tensor(zero), torch.tensor(num) / torch.tensor(zero)),
                      (dj.tensor(num) / 0j, torch.tensor(num) / 0j),
                      (dj.tensor(1 + 1j) / 0j, torch.tensor(1 + 1j) / 0j)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # a Python scalar over a zero tensor: torch multiplies by the reciprocal (nan + nanj), NumPy
    # divides (inf + infj); dispatch_jit's division is NumPy's. Both are non-finite
    assert not np.isfinite((2j / dj.tensor([0j])).numpy()).any()
