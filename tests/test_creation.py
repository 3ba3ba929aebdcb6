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
