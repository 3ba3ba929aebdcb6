"""DLPack: zero-copy both ways with NumPy and PyTorch (same data pointer), the protocol's arguments."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj


def _ptr(t) -> int:
    return t.numpy().ctypes.data


def test_numpy_to_dj_and_back_share_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dj.from_dlpack(a)
    assert _ptr(t) == a.ctypes.data
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0 and b[0, 0] == 42.0


def test_non_contiguous_views_keep_their_strides():
    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = dj.from_dlpack(a)
    assert t.strides == (4, 2) and _ptr(t) == a.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_protocol_arguments():
    t = dj.arange(4)
    assert t.__dlpack_device__() == (1, 0)
    assert type(t.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"
    copied = np.from_dlpack(t, copy=True)
    assert copied.ctypes.data != _ptr(t)
    with pytest.raises(BufferError, match="device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=1)
    assert _ptr(dj.from_dlpack(t, copy=True)) != _ptr(t)
    assert dj.from_dlpack(t) is t


def test_the_namespace_has_from_dlpack():
    from dispatch_jit import array_api as xp
    a = np.ones(3)
    assert _ptr(xp.from_dlpack(a)) == a.ctypes.data


def test_torch_round_trip_is_zero_copy():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    t = dj.from_dlpack(x)
    assert _ptr(t) == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr()
    x[1, 2] = -1.0
    assert t[1, 2].item() == -1.0 and y[1, 2].item() == -1.0
    assert t.dtype is dj.float64 and tuple(t.shape) == (2, 3)


def test_cuda_tensor_says_to_use_the_cuda_array_interface():
    if not dj.cuda.is_available():
        pytest.skip("no CUDA device (nor simulator)")
    t = dj.tensor([1.0, 2.0], device="cuda")
    assert t.__dlpack_device__()[0] == 2
    with pytest.raises(BufferError, match="__cuda_array_interface__"):
        t.__dlpack__()
    # a CUDA producer comes in through its __cuda_array_interface__, sharing device memory
    u = dj.from_dlpack(t._data)
    assert u.is_cuda
