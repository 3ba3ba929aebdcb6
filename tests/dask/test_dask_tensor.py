"""Dask tensors (dispatch_jit/dask/tensor.py) and the kernels at the Dask key (kernels.py): ops build
graphs and never compute; computed results equal eager CPU mode's (on Dask's default threaded
scheduler; test_schedulers.py runs the same kernels on processes and a LocalCluster)."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError, DeviceMismatchError, NoKernelError, ShapeError


def _pair(shape, chunks, dtype=np.float32, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return dj.from_dask(da.from_array(a, chunks=chunks)), dj.tensor(a)


def test_metadata_only_and_repr_does_not_compute():
    calls = []

    def counted(b):
        calls.append(1)
        return b
    x = dj.from_dask(da.ones((6, 4), chunks=(3, 2), dtype="float32").map_blocks(counted, dtype=np.float32))
    calls.clear()
    y = dj.exp(x) * 2.0 + x
    assert (y.shape, y.dtype, y.ndim) == ((6, 4), dj.float32, 2)
    assert dj.dispatch_keys(y) == dj.DispatchKeySet(dj.DispatchKey.PrivateUse1)
    assert str(y.device) == "dask" and dj.utils.privateuse1_backend_name() == "dask"
    r = repr(y)
    assert "shape=(6, 4)" in r and "chunks=(3, 2)" in r and "device='dask'" in r
    assert calls == []                                 # nothing ran: no block was touched
    c = dj.ones(6, 4)
    np.testing.assert_array_equal(y.numpy(), (dj.exp(c) * 2.0 + c).numpy())
    assert len(calls) == 4


def test_creation_and_moves():
    x = dj.rand(5, 6, device="dask", chunks=(2, 3))
    assert x.chunks == ((2, 2, 1), (3, 3)) and x.dtype == dj.float32
    c = dj.tensor(np.arange(12.0).reshape(3, 4))
    d = c.to("dask", chunks=2)
    assert d.chunks == ((2, 1), (2, 2))
    back = d.to("cpu")
    assert type(back) is dj.Tensor and np.array_equal(back.numpy(), c.numpy())
    assert np.array_equal(d.compute().numpy(), c.numpy())
    assert d.to("dask", chunks=3).chunks == ((3,), (3, 1))
    with pytest.raises(TypeError, match="dask.array.Array"):
        dj.from_dask(np.ones(3))
    with pytest.raises(TypeError, match="chunks"):
        d.to("cpu", chunks=2)


def test_chunks_that_give_no_blocks_are_clear_errors():
    # Dask took chunks=-5 as blocks of size -5 (a tensor of shape (-1, -1)) and chunks=0 raised a
    # bare ZeroDivisionError: every way onto the device checks them first
    c = dj.tensor(np.arange(12.0).reshape(3, 4))
    d = c.to("dask", chunks=2)
    for make in (lambda ch: c.to("dask", chunks=ch), lambda ch: d.to("dask", chunks=ch),
                 lambda ch: dj.rand(3, 4, device="dask", chunks=ch)):
        for bad, why in ((-5, "blocks of size -5"), (0, "blocks of size 0"), ((2, 0), "blocks of size 0"),
                         ({1: -3}, "blocks of size -3"), (True, "is a bool"), (2.5, "only contain integers"),
                         (((1, 1), (4,)), "do not add up")):
            with pytest.raises(ValueError, match=f"chunks=.*{why}.*shape \\(3, 4\\); give a positive"):
                make(bad)
    assert c.to("dask", chunks=(2, -1)).chunks == ((2, 1), (4,))        # -1 and None: a whole dimension
    assert c.to("dask", chunks={0: 1}).chunks == ((1, 1, 1), (4,))
    assert dj.zeros(0, 3).to("dask", chunks=2).chunks == ((0,), (2, 1))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_elementwise_with_broadcasting_and_promotion(dtype):
    x, cx = _pair((6, 5), (4, 2), dtype)
    y, cy = _pair((5,), (3,), np.float32, seed=1)
    z, cz = _pair((6, 1), (2, 1), np.int64, seed=2)
    got = dj.maximum((x * y + z) * 2 - x, 0) * dj.exp(-y)
    want = dj.maximum((cx * cy + cz) * 2 - cx, 0) * dj.exp(-cy)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal((x + dj.tensor(3.0)).numpy(), (cx + dj.tensor(3.0)).numpy())  # 0-d CPU joins
    np.testing.assert_array_equal(dj.where(x > 0, x, y).numpy(), dj.where(cx > 0, cx, cy).numpy())


@pytest.mark.parametrize("op", ["sum", "prod", "mean", "amax", "amin", "argmax"])
def test_reductions_full_and_over_axes(op):
    x, cx = _pair((7, 6, 4), (3, 4, 2), np.float64)
    for axis in (None, 0, 2, -2, (0, 2)):
        if op == "argmax" and isinstance(axis, tuple):
            continue
        for keepdims in (False, True):
            kw = {} if axis is None else {"axis": axis}
            got = getattr(dj, op)(x, keepdims=keepdims, **kw)
            want = getattr(dj, op)(cx, keepdims=keepdims, **kw)
            assert got.shape == want.shape and got.dtype == want.dtype, (axis, keepdims)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    i, ci = _pair((9, 4), (4, 3), np.int32)
    assert dj.sum(i).numpy() == dj.sum(ci).numpy() and dj.sum(i).dtype == dj.sum(ci).dtype


def test_matmul_is_a_blockwise_contraction():
    a, ca = _pair((6, 8), (3, 3), np.float64)
    b, cb = _pair((8, 5), (3, 2), np.float64, seed=3)
    v, cv = _pair((8,), (3,), np.float64, seed=4)
    np.testing.assert_allclose((a @ b).numpy(), (ca @ cb).numpy(), rtol=1e-12)
    np.testing.assert_allclose((a @ v).numpy(), (ca @ cv).numpy(), rtol=1e-12)
    np.testing.assert_allclose((v @ b).numpy(), (cv @ cb).numpy(), rtol=1e-12)
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        a @ a
    with pytest.raises(DeviceMismatchError, match="dask and cpu"):
        a @ cb


def test_views_slicing_and_reshape_use_dasks_own():
    x, cx = _pair((6, 8), (4, 3))
    for f in (lambda t: t[1:5, ::2], lambda t: t.T, lambda t: t.reshape(4, 12), lambda t: t.reshape(-1),
              lambda t: t.permute(1, 0), lambda t: t.unsqueeze(1).squeeze(1), lambda t: t[None].expand(3, 6, 8),
              lambda t: t.transpose(0, 1) + 1):
        np.testing.assert_array_equal(f(x).numpy(), f(cx).numpy())
    with pytest.raises(ShapeError, match="invalid for a tensor of shape"):
        x.reshape(5, 5)
    with pytest.raises(TypeError, match="immutable"):
        x[0] = 1.0


def test_unsupported_op_autograd_and_mixed_devices_are_clear_errors():
    x, cx = _pair((4, 4), 2)
    with pytest.raises(NoKernelError, match=r"aten::cumsum.*PrivateUse1"):
        dj.cumsum(x, 0)
    with pytest.raises(AutogradError, match="not supported on Dask tensors"):
        x.requires_grad_()
    with pytest.raises(AutogradError):
        dj.rand(3, device="dask", chunks=2, requires_grad=True)
    with pytest.raises(AutogradError, match="not supported on Dask tensors"):
        x * dj.tensor(2.0, requires_grad=True)       # a CPU scalar that requires grad would record
    with dj.no_grad():
        np.testing.assert_array_equal((x * dj.tensor(2.0, requires_grad=True)).numpy(), (cx * 2.0).numpy())
    with pytest.raises(DeviceMismatchError, match="dask and cpu"):
        x + cx
    with pytest.raises(TypeError, match="out="):
        dj.add(x, x, out=x)
