"""Global compiled mode: Python float and int operands of elementwise ops are
runtime values of the plan (compiler/lazy/encode.py: ``_scalar_slots``), not part of its key.
A loop that records the same chain with a new constant each time reuses one
plan; results equal eager mode's bit for bit (-0.0, NaN, inf, ints that wrap);
what stays keyed by value (bools, NumPy scalars, ints beyond int64, alpha=,
CUDA operands) still gives eager mode's result."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler import lazy
from dispatch_jit.compiler.lazy import lazy_info, mode

NAN = float("nan")
FLOATS = [2.0, -0.0, 0.0, NAN, -NAN, float("inf"), float("-inf"), 1e-320, 3.4e38, 1e300, -1.5, 0.1]
INTS = [0, 1, -1, 7, 300, -129, 2**31, 2**62, 2**63 - 1, -2**63]


@pytest.fixture(autouse=True)
def _eager_after():
    yield
    dj.set_mode("eager")


def _same(got, want):
    """Bit for bit: dtype, shape and bytes (NaN payloads and the sign of zero included)."""
    g, w = got.numpy(), want.numpy()
    assert g.dtype == w.dtype and g.shape == w.shape
    assert g.tobytes() == w.tobytes(), (g, w)


def _both(fn, *args):
    want = fn(*args)
    with mode("compiled"):
        got = fn(*args)
        got.numpy()          # forced inside the mode: the flush under test
    _same(got, want)


X = dj.tensor([1.0, -2.0, 0.0, -0.0, 3.5, float("inf"), NAN, 1e-40], dtype=dj.float32)
XD = dj.tensor([1.0, -2.0, 0.0, -0.0, 3.5, 1e300, NAN, 5e-324], dtype=dj.float64)
XI = dj.tensor([1, -2, 0, 3, 2**40, -2**62, 2**63 - 1, -2**63], dtype=dj.int64)
XI8 = dj.tensor([1, -2, 0, 3, 127, -128, 100, -100], dtype=dj.int8)
XI32 = dj.tensor([1, -2, 0, 3, 2**31 - 1, -2**31, 100, -100], dtype=dj.int32)

CHAINS = [
    lambda x, c: x * c + 1.0,
    lambda x, c: (x - c) * c,
    lambda x, c: dj.maximum(x, c) + dj.minimum(c, x),
    lambda x, c: c - x,
    lambda x, c: c * x,
    lambda x, c: x / c,
]


@pytest.mark.parametrize("chain", range(len(CHAINS)))
@pytest.mark.parametrize("x", [X, XD], ids=["float32", "float64"])
def test_float_constants_match_eager_bit_for_bit(chain, x):
    # (a NaN constant meets no NaN element: which of two NaN operands an instruction returns, with
    # its sign, is the hardware's choice, and the fused loop may order a product's operands otherwise)
    finite = x[:6]
    for c in FLOATS:
        _both(CHAINS[chain], x if c == c else finite, c)


@pytest.mark.parametrize("x", [X, XD, XI, XI8, XI32], ids=["float32", "float64", "int64", "int8", "int32"])
def test_int_constants_match_eager_bit_for_bit(x):
    # ints wrap as eager mode's do (int8 * 300); a float tensor times an int stays float
    for c in INTS:
        _both(lambda t, c: t * c + c, x, c)
        _both(lambda t, c: c - t, x, c)


def test_negative_zero_and_nan_share_a_plan_and_keep_their_bits():
    x = dj.tensor([1.0, -2.0, 0.0], dtype=dj.float32)
    with mode("compiled"):
        (x * 1.0).numpy()
        before = lazy_info()
        for c in (-0.0, 0.0, -0.0, NAN, -NAN, NAN):
            got = (x * c).numpy()
            want = np.asarray([1.0, -2.0, 0.0], np.float32) * np.float32(c)
            assert got.tobytes() == want.tobytes()
        after = lazy_info()
    assert after["plans"] == before["plans"]
    assert after["plan_hits"] - before["plan_hits"] == 6


def test_distinct_constants_do_not_grow_the_plan_cache():
    x = dj.tensor([1.0, 2.0, 3.0], dtype=dj.float32)
    xi = dj.tensor([1, 2, 3])
    with mode("compiled"):
        (x * 0.5 + 1.0).numpy()
        (xi * 5 + 1).numpy()
        before = lazy_info()
        for i in range(200):
            got = (x * float(i) + 1.0).numpy()
            np.testing.assert_array_equal(got, np.float32([1, 2, 3]) * np.float32(i) + np.float32(1))
            got = (xi * (i - 100) + 1).numpy()
            np.testing.assert_array_equal(got, np.int64([1, 2, 3]) * (i - 100) + 1)
        after = lazy_info()
    assert after["plans"] == before["plans"]
    assert after["plan_cache_size"] <= before["plan_cache_size"]
    assert after["plan_hits"] - before["plan_hits"] == 400
    assert after["loop_compiles"] == before["loop_compiles"]


def test_int_and_float_constants_get_their_own_plans():
    # 2 == 2.0 == True, but they promote differently: the type is in the key, the value is not
    xi = dj.tensor([1, 2, 3])
    for c in (2, 2.0, True, 3, 3.0, False, np.float32(2.0), np.int64(2)):
        _both(lambda t, c: t * c + c, xi, c)


def test_ints_beyond_int64_raise_as_in_eager_mode():
    xi = dj.tensor([1, 2, 3])
    x = dj.tensor([1.0, 2.0])
    for t in (xi, x):
        with pytest.raises(OverflowError):
            t * 2**70
        with pytest.raises(OverflowError):
            with mode("compiled"):
                (t * 2**70).numpy()
        # and the plan for in-range ints still takes the next value
        _both(lambda t, c: t * c, t, 2**62)


def test_keyword_and_numpy_scalars_stay_constants():
    x = dj.tensor([1.0, -2.0, 3.0], dtype=dj.float32)
    for a in (2.0, -0.0, 0.5, NAN):
        _both(lambda t, a: dj.add(t, 1.5, alpha=a), x, a)
    for c in (np.float32(-0.0), np.float64(2.5), np.float32(7.0), np.int32(3)):
        _both(lambda t, c: t * c + 1.0, x, c)


def test_an_int_subclass_is_read_as_its_number():
    import enum

    class K(enum.IntEnum):
        TWO = 2
        THREE = 3
    xi = dj.tensor([1, 2, 3])
    for c in (K.TWO, K.THREE):
        _both(lambda t, c: t * c + 1, xi, c)


def test_the_generic_recording_path_takes_runtime_scalars_too():
    # LazyRecorder.record (the boxed Tracer fallback) encodes a call as the fast path does
    x = dj.tensor([1.0, -2.0, 3.0], dtype=dj.float32)
    mul = dj.ops.aten.mul.Tensor
    with mode("compiled"):
        rec = lazy.switch._mstate.recorder
        (rec.record(mul, (x, 1.0), {})).numpy()
        before = lazy_info()
        for c in (2.0, -0.0, NAN, 4.0):
            got = rec.record(mul, (x, c), {})
            assert type(got) is lazy.LazyTensor
            assert got.numpy().tobytes() == (np.float32([1, -2, 3]) * np.float32(c)).tobytes()
        after = lazy_info()
    assert after["plans"] == before["plans"]


def test_dead_values_and_runtime_scalars():
    # a dropped value's scalar is in the flush's list but not in the plan; the live ones read theirs
    x = dj.tensor([1.0, 2.0], dtype=dj.float32)
    for i in range(3):
        with mode("compiled"):
            dead = x * (10.0 + i)
            del dead
            y = x * float(i) - float(2 * i)
            got = y.numpy()
        np.testing.assert_array_equal(got, np.float32([1, 2]) * np.float32(i) - np.float32(2 * i))


def test_two_scalar_operands_of_one_op():
    x = dj.tensor([1.0, -2.0, 0.5, -0.0], dtype=dj.float32)
    cond = dj.tensor([True, False, True, False])
    with mode("compiled"):
        (dj.clamp(x, 0.0, 1.0) + dj.where(cond, 0.0, 1.0)).numpy()
        before = lazy_info()["plans"]
    for a, b in ((-1.0, 2.0), (-0.0, NAN), (0.25, 0.5), (5.0, -5.0)):
        _both(lambda t, a, b: dj.clamp(t, a, b) + dj.where(cond, a, b), x, a, b)
    assert lazy_info()["plans"] == before


def test_same_constant_twice_in_one_graph():
    # two runtime scalars of equal value stay two values (cse must not need them equal)
    x = dj.tensor([1.0, 2.0, -0.0], dtype=dj.float32)
    for a, b in ((2.0, 2.0), (2.0, 3.0), (-0.0, 0.0)):
        _both(lambda t, a, b: (t * a) + (t * b), x, a, b)


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device or simulator")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # the simulator computes with NumPy scalars
def test_cuda_regions_keep_scalars_as_constants():
    # compiler/cuda.py's kernels take scalars as constants: each value gets its own plan and result
    x = dj.tensor([1.0, -2.0, 0.0, 4.0], dtype=dj.float32).cuda()
    for c in (2.0, 3.0, -0.0, NAN, 5):
        want = (x * c + 1.0).cpu().numpy()
        with mode("compiled"):
            got = (x * c + 1.0).cpu().numpy()
        assert got.tobytes() == want.tobytes(), (c, got, want)
