import itertools
import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import CudaUnavailableError, DTypeError, ShapeError


@pytest.mark.parametrize("data,dtype", [
    ([1.0, 2.0], dj.float32), ([1, 2], dj.int64), ([True], dj.bool), ([1 + 2j], dj.complex64),
    (2.5, dj.float32), ([[1, 2.0]], dj.float32), (np.zeros(2, np.float64), dj.float64), ([], dj.float32),
    (np.int16(3), dj.int16),
])
def test_tensor_infers_dtype_like_pytorch(data, dtype):
    assert dj.tensor(data).dtype is dtype


def test_tensor_copies_asarray_shares():
    a = np.zeros(3, np.float32)
    t, s = dj.tensor(a), dj.asarray(a)
    a[0] = 7
    assert t[0].item() == 0 and s[0].item() == 7
    assert dj.asarray(s) is s
    assert dj.asarray([1, 2], dtype=dj.int8).dtype is dj.int8
    assert dj.from_numpy(a).numpy() is a or np.shares_memory(dj.from_numpy(a).numpy(), a)


def test_shapes_and_fills():
    assert dj.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert dj.ones((2,)).tolist() == [1.0, 1.0]
    assert dj.empty(4, dtype=dj.int32).dtype is dj.int32
    assert dj.full((2,), 7).dtype is dj.int64 and dj.full((2,), 7.0).dtype is dj.float32
    assert dj.full(2, True).dtype is dj.bool
    x = dj.ones(2, 2, dtype=dj.float64)
    for f in (dj.zeros_like, dj.ones_like, dj.empty_like):
        y = f(x)
        assert y.shape == (2, 2) and y.dtype is dj.float64
    assert dj.full_like(x, 3).tolist() == [[3.0, 3.0]] * 2
    assert dj.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]] and dj.eye(2, 3).shape == (2, 3)
    with pytest.raises(ShapeError, match="negative"):
        dj.zeros(-1)


def test_ranges():
    assert dj.arange(3).tolist() == [0, 1, 2] and dj.arange(3).dtype is dj.int64
    assert dj.arange(0.0, 1.0, 0.5).tolist() == [0.0, 0.5] and dj.arange(0.0, 1.0, 0.5).dtype is dj.float32
    assert dj.arange(1, 7, 2).tolist() == [1, 3, 5]
    assert dj.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match="step must be nonzero"):
        dj.arange(0, 1, 0)


def test_random_is_seeded_and_reproducible():
    dj.manual_seed(123)
    a = dj.rand(5)
    dj.manual_seed(123)
    assert dj.rand(5).tolist() == a.tolist()
    assert a.dtype is dj.float32 and 0 <= a.numpy().min() and a.numpy().max() < 1
    g = dj.Generator(7)
    n = dj.randn(1000, generator=g, dtype=dj.float64)
    assert n.dtype is dj.float64 and abs(float(n.mean())) < 0.2
    r = dj.randint(0, 10, (4,))
    assert r.dtype is dj.int64 and r.shape == (4,)
    with pytest.raises(DTypeError, match="floating dtype"):
        dj.rand(2, dtype=dj.int32)


def test_device_argument():
    assert dj.zeros(1, device="cpu").device == "cpu"
    if dj.cuda.is_available():        # a GPU or the simulator (tests/conftest.py)
        assert dj.zeros(1, device="cuda").device == "cuda:0"
    else:
        with pytest.raises(CudaUnavailableError, match="no CUDA device is available"):
            dj.zeros(1, device="cuda")
    with pytest.raises(ValueError, match="unknown device type"):
        dj.zeros(1, device="tpu")


# -- arange / linspace: PyTorch's, not NumPy's -------------------------------------------
# Hard cases written out: an integer dtype truncates start, end and step first (issue 25), and
# linspace counts its first half up from start, its second half down from end.
RANGES = [
    ("arange", (0.1, -7.9, -4.0), dj.int64, [0, -4]),
    ("arange", (0.0, -8.000001, -4.0), dj.int64, [0, -4]),
    ("arange", (0.0, -8.000001, -4.0), dj.int32, [0, -4, -8]),   # PyTorch counts int32 with the floats
    ("arange", (-0.5, 2, 1), dj.int64, [0, 1]),
    ("arange", (-0.5, 2, 1), dj.int32, [0, 1, 2]),
    ("arange", (0.5,), dj.int64, []),
    ("arange", (-1, 3), dj.uint8, [255, 0, 1, 2]),
    ("arange", (0.1, -7.9, -4.0), dj.float64, [0.1, 0.1 - 4.0]),
    ("linspace", (4.3, -3, 8), dj.int64, [4, 3, 2, 1, 0, -1, -2, -3]),
    ("linspace", (-1.5, 1.5, 5), dj.int8, [-1, 0, 0, 0, 1]),
    ("linspace", (0, 10, 4), dj.int32, [0, 3, 6, 10]),
    ("linspace", (-1, 3, 3), dj.uint8, [255, 129, 3]),
    ("linspace", (2.7, 2.7, 3), dj.int64, [2, 2, 2]),
    ("linspace", (0, 1, 1), dj.int64, [0]),
    ("linspace", (0, 1, 0), dj.float32, []),
]


@pytest.mark.parametrize("fname,args,dtype,want", RANGES)
def test_ranges_follow_pytorch(fname, args, dtype, want):
    got = getattr(dj, fname)(*args, dtype=dtype)
    assert got.dtype is dtype and got.tolist() == want


@pytest.mark.parametrize("call,error,match", [
    ("dj.arange(0, 5, -1)", ValueError, "inconsistent with step sign"),
    ("dj.arange(0, float('inf'))", ValueError, "unsupported range"),
    ("dj.arange(-2.5, 2.5, 0.5, dtype=dj.int32)", ValueError, "truncates to 0"),
    ("dj.arange(3, dtype=dj.bool)", TypeError, "not implemented for bool"),
    ("dj.linspace(-0.5, 3, 3, dtype=dj.uint8)", OverflowError, "without overflow"),
    ("dj.linspace(128, 3, 3, dtype=dj.int8)", OverflowError, "without overflow"),
    ("dj.linspace(0, 1, 3.0)", TypeError, "must be an int"),
    ("dj.linspace(1j, 3, 3, dtype=dj.float32)", TypeError, "complex dtype"),
    ("dj.linspace(dj.tensor([1.0]), 3, 3)", ValueError, "0-dimensional"),
])
def test_range_errors(call, error, match):
    with pytest.raises(error, match=match):
        eval(call)


def test_linspace_of_float32_tensor_endpoints_is_exact_in_float64():
    a, b = dj.tensor(0.1, dtype=dj.float32), dj.tensor(123.7, dtype=dj.float32)
    got = dj.linspace(a, b, 7, dtype=dj.float64).numpy()
    want = np.linspace(np.float64(np.float32(0.1)), np.float64(np.float32(123.7)), 7)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


_ENDS = [0, 0.1, -0.5, 1, 2.7, -7.9, -8.000001, 10, 1 / 3, -123.456]
_STEPS = [1, -1, 0.3, -4.0, 4.0, 0.7, -3, 1 / 3]
_GRID_DTYPES = ["int64", "int32", "int16", "uint8", "float32", "float64", "float16"]


def _agree(got, want, dtype, ends):
    """Integers: equal to torch's where torch takes its scalar loop (fewer than 8 values, on every
    CPU); longer outputs come from its SIMD loop, whose vectors start from a truncated value, so
    within 1 there.  Floats: within one unit in the last place of the endpoints, everywhere: torch's
    rounding depends on its build (FMA contraction of start + step * i) and the CPU's vector width."""
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        ulp = np.spacing(np.asarray(max(abs(float(e)) for e in ends), want.dtype))
        assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= ulp), (ends, got, want)
    elif len(want) < 8:
        np.testing.assert_array_equal(got, want)
    else:
        assert np.all(np.abs(got.astype(np.int64) - want.astype(np.int64)) <= 1), (ends, got, want)


@pytest.mark.parametrize("dtype", _GRID_DTYPES)
def test_arange_matches_torch_over_a_grid(dtype):
    torch = pytest.importorskip("torch")
    compared = 0
    for a, b, c in itertools.product(_ENDS, _ENDS, _STEPS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = torch.arange(a, b, c, dtype=getattr(torch, dtype)).numpy()
        except (RuntimeError, ValueError):
            with pytest.raises((ValueError, TypeError)):
                dj.arange(a, b, c, dtype=getattr(dj, dtype))
            continue
        if dtype != "int64" and dtype[0] in "iu" and int(c) == 0:
            continue        # torch repeats start; dj refuses a step that truncates to 0 (test_range_errors)
        _agree(dj.arange(a, b, c, dtype=getattr(dj, dtype)).numpy(), want, dtype, (a, b))
        compared += 1
    assert compared > 200


@pytest.mark.parametrize("dtype", _GRID_DTYPES + ["int8", "complex64"])
def test_linspace_matches_torch_over_a_grid(dtype):
    torch = pytest.importorskip("torch")
    compared = 0
    for a, b, n in itertools.product(_ENDS, _ENDS, [0, 1, 2, 3, 5, 7, 17, 50]):
        try:
            want = torch.linspace(a, b, n, dtype=getattr(torch, dtype)).numpy()
        except RuntimeError:
            with pytest.raises(OverflowError):
                dj.linspace(a, b, n, dtype=getattr(dj, dtype))
            continue
        got = dj.linspace(a, b, n, dtype=getattr(dj, dtype)).numpy()
        if dtype == "complex64":
            _agree(got.real, want.real, "float32", (a, b))
            assert not got.imag.any()
        else:
            _agree(got, want, dtype, (a, b))
        compared += 1
    assert compared > 300


@pytest.mark.parametrize("args", [(0,), (1,), (64,), (True,), (-3,), (5, 9), (np.int64(4),), (4.0,)])
def test_arange_of_one_int_is_the_checked_paths(args):
    """arange(n)'s shortcut (creation.arange) gives what the checked path gives: int64 0 .. n-1,
    a new writeable array; a bool, a negative n, a NumPy int or a float take the checked path."""
    from dispatch_jit.creation import _arange_values
    try:
        want = _arange_values(*((0,) + args if len(args) == 1 else args), 1,
                              dj.float32 if isinstance(args[0], float) else dj.int64)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)[:20]):
            dj.arange(*args)
        return
    got = dj.arange(*args)
    assert got.numpy().dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.numpy().flags.writeable and not got.requires_grad
    assert dj.arange(3, requires_grad=False).tolist() == [0, 1, 2]
