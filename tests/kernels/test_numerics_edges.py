"""Numerics at the edges, against NumPy (and torch where installed), eager and compiled (issue 12).

Integer MIN // -1 wraps to MIN (it gave 0); an integer power wraps as
repeated multiplication does (int64 gave INT64_MIN for large exponents);
float32 exp keeps subnormal results (it flushed them to 0, so
log(exp(-100)) was -inf); a fused full sum has the eager kernel's bits.
"""

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.kernels.reduction import cpu as reduction
from dispatch_jit.kernels.support.loops import PARALLEL_MIN, parallel as loops_parallel

SIGNED = [np.int8, np.int16, np.int32, np.int64]
INTS = SIGNED + [np.uint8, np.uint16, np.uint32, np.uint64]
FDIV = dj.compile(lambda a, b: (a * 1) // b)
FMOD = dj.compile(lambda a, b: (a * 1) % b)
FPOW = dj.compile(lambda a, b: (a * 1) ** b)
FEXP = dj.compile(lambda x: dj.exp(x * 1))


def _np(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("dt", SIGNED, ids=lambda d: d.__name__)
def test_min_floordiv_and_mod_minus_one(dt):
    info = np.iinfo(dt)
    a = np.array([info.min, info.min, info.max, -7, 7, 0, info.min + 1], dt)
    b = np.array([-1, 1, -1, -1, -1, -1, -1], dt)
    ta, tb = dj.from_numpy(a), dj.from_numpy(b)
    for got_div, got_mod in (((ta // tb).numpy(), (ta % tb).numpy()),
                             (FDIV(ta, tb).numpy(), FMOD(ta, tb).numpy())):
        np.testing.assert_array_equal(got_div, _np(np.floor_divide, a, b))
        np.testing.assert_array_equal(got_mod, _np(np.remainder, a, b))
    assert (ta // tb).numpy()[0] == info.min


def test_min_floordiv_matches_torch():
    torch = pytest.importorskip("torch")
    for dt in SIGNED:
        a = np.array([np.iinfo(dt).min, 9, -9], dt)
        b = np.array([-1, -1, 4], dt)
        want = torch.div(torch.from_numpy(a), torch.from_numpy(b), rounding_mode="floor").numpy()
        np.testing.assert_array_equal((dj.from_numpy(a) // dj.from_numpy(b)).numpy(), want)
        np.testing.assert_array_equal((dj.from_numpy(a) % dj.from_numpy(b)).numpy(),
                                      torch.remainder(torch.from_numpy(a), torch.from_numpy(b)).numpy())


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.__name__)
def test_integer_pow_wraps_as_numpy(dt):
    info = np.iinfo(dt)
    rng = np.random.default_rng(0)
    base = np.concatenate([np.array([0, 1, 2, 3, 7, info.max, info.min + (info.min < 0)], dt),
                           rng.integers(info.min, info.max, 57, dtype=dt, endpoint=True)])
    expo = np.concatenate([np.array([0, 1, 62, 63, 64, 65, 100], dt),
                           rng.integers(0, info.max, 57, dtype=dt, endpoint=True)])
    want = _np(np.power, base, expo)
    tb, te = dj.from_numpy(base), dj.from_numpy(expo)
    np.testing.assert_array_equal((tb ** te).numpy(), want)
    np.testing.assert_array_equal(FPOW(tb, te).numpy(), want)


def test_int64_pow_huge_exponent_matches_torch():
    torch = pytest.importorskip("torch")
    base = np.array([3, -3, 2, 7, 5], np.int64)
    expo = np.array([100, 101, 63, 2**62 + 1, 2**40], np.int64)
    want = torch.pow(torch.from_numpy(base), torch.from_numpy(expo)).numpy()
    np.testing.assert_array_equal((dj.from_numpy(base) ** dj.from_numpy(expo)).numpy(), want)
    assert (dj.from_numpy(base) ** dj.from_numpy(expo)).numpy()[3] == 7   # 7**odd wraps to 7 (mod 2**64)


def _within_one_ulp(got32, ref64):
    """float32 results within one float32 ulp of the float64 reference (or equal: inf, NaN)."""
    with np.errstate(all="ignore"):
        ref32 = ref64.astype(np.float32)
        same = (got32 == ref32) | (np.isnan(got32) & np.isnan(ref32))
        ulp = np.spacing(np.abs(ref32)).astype(np.float64)
        close = np.abs(got32.astype(np.float64) - ref64) <= ulp
    return same | (np.isfinite(ref32) & close)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_float32_exp_keeps_subnormals(compiled):
    x = np.concatenate([np.linspace(-110, -80, 4001, dtype=np.float32),
                        np.array([-103.97, -103.98, -87.34, -87.33, -100, -104], np.float32)])
    t = dj.from_numpy(x)
    got = (FEXP(t) if compiled else dj.exp(t)).numpy()
    ok = _within_one_ulp(got, np.exp(x.astype(np.float64)))
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5]))
    assert got[x == np.float32(-100)][0] > 0
    assert np.isclose(dj.log(dj.exp(dj.tensor([-100.0], dtype=dj.float32))).numpy()[0], -100.0, atol=0.05)


def test_float32_exp_subnormal_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.array([-100.0, -95.5, -90.0, -88.0, -103.9], np.float32)
    want = torch.log(torch.exp(torch.from_numpy(x))).numpy()
    got = dj.log(dj.exp(dj.from_numpy(x))).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-3)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38, 88.7, 89.0,
                     -87.0, -104.0, -150.0, 1e10, -1e10, 2.0**24, 0.625, -0.625, 9.0, -20.0], np.float32)
UNARY = {"exp": np.exp, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_transcendentals_at_special_values(name):
    got = getattr(dj, name)(dj.from_numpy(SPECIALS)).numpy()
    ref = _np(UNARY[name], SPECIALS.astype(np.float64))
    ok = _within_one_ulp(got, ref)
    assert ok.all(), list(zip(SPECIALS[~ok], got[~ok], ref[~ok]))
    # signed zeros stay signed (sin, tanh are odd)
    zeros = (ref == 0) & (got == 0)
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(ref[zeros]))


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_fused_full_sum_is_bit_identical_to_eager(dt, parallel, monkeypatch):
    # eager splits a full reduction into chunks where threads pay (support/loops full_chunks); the fused
    # epilogue used its own split (n >> 16 chunks) and rounded float64 sums differently
    monkeypatch.setattr(loops_parallel, "PARALLEL", parallel)
    rng = np.random.default_rng(3)
    f_sum = dj.compile(lambda v: (v * 2).sum())
    f_mean = dj.compile(lambda v: (v * 2 + 1).mean())
    sizes = (1000, PARALLEL_MIN + 7) + ((reduction.PARALLEL_THRESHOLD + 9,) if parallel else ())
    for n in sizes:
        x = dj.from_numpy(rng.standard_normal(n).astype(dt))
        assert f_sum(x).numpy().tobytes() == (x * 2).sum().numpy().tobytes(), n
        assert f_mean(x).numpy().tobytes() == (x * 2 + 1).mean().numpy().tobytes(), n


def test_fused_int64_overflow_wraps_before_a_comparison():
    # Numba emits int64 adds and multiplies with LLVM's nsw flag (overflow undefined): in a fused
    # loop LLVM proved pow(non-negative, n) >= 0 and dropped the relu after it, so a power that
    # wrapped negative came back negative (found by the differential fuzzer).  uint64 bits wrap.
    a = np.array([[4, 1, 7], [5, 2, 7], [1, 6, 1]], dtype=np.uint32)
    u = dj.from_numpy(np.array([4000000000, 3, 0], np.uint32))
    z = dj.zeros(3, dtype=dj.int64)

    def f(x, u, z):
        w = u + z                        # int64, known non-negative inside the loop
        return (dj.pow(x, dj.prod(x, axis=None, keepdims=True)).relu(), (w * w * w).relu(),
                (w + 9223372036854775000).relu(), (-w - 9223372036854775000).relu(), dj.square(w * w).relu())

    want = [t.numpy() for t in f(dj.from_numpy(a), u, z)]
    assert want[0][0, 2] == 0 and want[1][0] == 0          # 7**11760 and 4e9**3 wrap negative
    with dj.execution_mode("compiled"):
        lazy = f(dj.from_numpy(a), u, z)
    for got in (dj.compile(f)(dj.from_numpy(a), u, z), lazy):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.__name__)
def test_shifts_by_the_width_or_more_match_numpy(dt):
    # counts past the width move every bit out (a right shift leaves the sign: 0 for any unsigned
    # value, a uint64 above 2**63 too); negative counts as NumPy's
    info = np.iinfo(dt)
    vals = np.array([info.min, info.max, 0, 1, 2, info.max // 3], dt)
    counts = [c for c in (0, 1, 7, 8, 31, 32, 62, 63, 64, 65, 200) if c <= info.max] + [info.max] + \
        ([-1, -64, info.min] if info.min < 0 else [])
    a, b = np.meshgrid(vals, np.array(counts, dt))
    for dj_fn, np_fn in ((dj.bitwise_right_shift, np.right_shift), (dj.bitwise_left_shift, np.left_shift)):
        got = dj_fn(dj.from_numpy(a), dj.from_numpy(b)).numpy()
        np.testing.assert_array_equal(got, _np(np_fn, a, b))
        assert got.dtype == dt
