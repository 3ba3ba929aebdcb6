"""CUDA matmul and dot against the CPU kernels on the same data.

Runs under Numba's CUDA simulator where there is no GPU (tests/conftest.py),
so every array is tiny: the simulator runs one Python thread per CUDA thread.
The simulator's tile configuration (8x8 tiles, BK=4, 2x2 per thread) comes
from the same generator as the hardware one; one test forces the hardware
configuration (128x128, 8x8 per thread, 256 threads) on small problems.
"""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, ShapeError
from dispatch_jit.kernels.linalg import cuda as cuda_linalg
from dispatch_jit.tensor import wrap

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")

RNG = np.random.default_rng(0)
TOL = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12, np.complex64: 1e-5}


def _data(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return RNG.integers(-5 if dtype.kind == "i" else 0, 6, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _check(xc, yc, op="matmul"):
    """Run op on the CUDA tensors and on CPU copies of them; compare values, dtype and shape."""
    fn = getattr(dj, op)
    got = fn(xc, yc)
    assert got.device.type == "cuda"
    ref = fn(dj.tensor(xc.numpy()), dj.tensor(yc.numpy())).numpy()
    g = got.numpy()
    assert g.dtype == ref.dtype and g.shape == ref.shape
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(g, ref)
    else:
        tol = TOL[ref.dtype.type]
        np.testing.assert_allclose(g, ref, rtol=tol, atol=tol)
    return got


SHAPES = [
    ((7,), (7,)),               # dot-like: 0-d result
    ((5, 7), (7,)),             # matrix @ vector
    ((7,), (7, 3)),             # vector @ matrix
    ((5, 7), (7, 3)),           # one partial tile
    ((17, 9), (9, 12)),         # several tiles, interior tiles, a k remainder
    ((2, 5, 7), (7, 3)),        # batched @ matrix
    ((2, 1, 3, 4), (3, 4, 2)),  # batch dims broadcast both ways
    ((3,), (2, 3, 4)),          # vector @ batch
    ((2, 4, 3), (3,)),          # batch @ vector
]


@pytest.mark.parametrize("sa,sb", SHAPES, ids=[f"{a}@{b}" for a, b in SHAPES])
def test_matmul_shapes_float32(sa, sb):
    _check(dj.tensor(_data(sa, np.float32)).cuda(), dj.tensor(_data(sb, np.float32)).cuda())


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int8, np.uint8, np.complex64])
def test_matmul_dtypes(dtype):
    _check(dj.tensor(_data((2, 5, 6), dtype)).cuda(), dj.tensor(_data((6, 3), dtype)).cuda())


def test_int8_wraps_like_cpu():
    a = np.full((2, 9), 100, np.int8)
    b = np.full((9, 3), 3, np.int8)
    _check(dj.tensor(a).cuda(), dj.tensor(b).cuda())


@pytest.mark.parametrize("da,db", [(np.int32, np.float32), (np.float16, np.float32), (np.int8, np.int64)])
def test_matmul_mixed_dtypes_promote_like_cpu(da, db):
    _check(dj.tensor(_data((4, 5), da)).cuda(), dj.tensor(_data((5, 3), db)).cuda())


def _view(t, fn):
    return wrap(t._data.view_as(fn))


def test_matmul_transposed_and_strided_inputs():
    a = _view(dj.tensor(_data((7, 5), np.float32)).cuda(), lambda l: l.T)          # column-major (5, 7)
    b = _view(dj.tensor(_data((3, 14), np.float32)).cuda(), lambda l: l[:, ::2].T)  # strided (7, 3)
    assert not a._data.flags.c_contiguous and not b._data.flags.c_contiguous
    _check(a, b)
    # batched, transposed inner matrices and a broadcast (stride-0) batch
    ab = _view(dj.tensor(_data((2, 9, 10), np.float64)).cuda(), lambda l: l.transpose(0, 2, 1))
    bb = _view(dj.tensor(_data((9, 3), np.float64)).cuda(), lambda l: np.broadcast_to(l, (2, 9, 3)))
    _check(ab, bb)
    # negative strides
    _check(_view(dj.tensor(_data((5, 7), np.float32)).cuda(), lambda l: l[::-1, ::-1]),
           _view(dj.tensor(_data((7, 3), np.float32)).cuda(), lambda l: l[::-1]))
    # a vector with a stride
    v = _view(dj.tensor(_data((14,), np.float32)).cuda(), lambda l: l[::2])
    _check(_view(dj.tensor(_data((7, 4), np.float32)).cuda(), lambda l: l.T), v)


def test_matmul_empty():
    z = dj.matmul(dj.zeros(0, 3, device="cuda"), dj.zeros(3, 2, device="cuda"))
    assert z.shape == (0, 2)
    z = dj.matmul(dj.ones(2, 0, device="cuda"), dj.ones(0, 3, device="cuda"))
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), np.float32))


def _message(fn, *args):
    with pytest.raises(Exception) as e:
        fn(*args)
    return type(e.value), str(e.value)


@pytest.mark.parametrize("sa,sb", [((5, 7), (6, 3)), ((3,), (4,)), ((3,), (4, 2)), ((2, 3), (4,)),
                                   ((2, 3, 4), (3, 4, 2)), ((), (3,))])
def test_matmul_shape_errors_match_cpu(sa, sb):
    a, b = dj.ones(*sa), dj.ones(*sb)
    cpu = _message(dj.matmul, a, b)
    assert cpu[0] is ShapeError
    assert _message(dj.matmul, dj.ones(*sa, device="cuda"), dj.ones(*sb, device="cuda")) == cpu


def test_dtype_errors_match_cpu():
    x = dj.tensor(np.ones((2, 2), bool))
    cpu = _message(dj.matmul, x, x)
    assert cpu[0] is DTypeError
    assert _message(dj.matmul, x.cuda(), x.cuda()) == cpu
    v = dj.tensor(np.ones(3, bool))
    assert _message(dj.dot, v.cuda(), v.cuda()) == _message(dj.dot, v, v)


def test_dot():
    got = _check(dj.tensor(_data((6,), np.float32)).cuda(), dj.tensor(_data((6,), np.float32)).cuda(), "dot")
    assert got.shape == ()
    _check(dj.tensor(_data((5,), np.int64)).cuda(), dj.tensor(_data((5,), np.int64)).cuda(), "dot")
    for sa, sb in [((3,), (4,)), ((2, 3), (3,))]:
        a, b = dj.ones(*sa), dj.ones(*sb)
        cpu = _message(dj.dot, a, b)
        assert cpu[0] is ShapeError
        assert _message(dj.dot, a.cuda(), b.cuda()) == cpu


def test_matmul_operator_and_method():
    a, b = dj.tensor(_data((3, 4), np.float32)).cuda(), dj.tensor(_data((4, 2), np.float32)).cuda()
    np.testing.assert_allclose((a @ b).numpy(), a.matmul(b).numpy())
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy(), rtol=1e-5)


def test_batch_larger_than_grid_z(monkeypatch):
    monkeypatch.setattr(cuda_linalg, "MAX_GRID_Z", 2)
    monkeypatch.setattr(cuda_linalg, "_PLANS", {})
    _check(dj.tensor(_data((5, 3, 4), np.float32)).cuda(), dj.tensor(_data((5, 4, 2), np.float32)).cuda())


def test_hardware_tile_configuration_in_simulator(monkeypatch):
    """The hardware configurations: 128x128 / 8x8 per thread on one partial tile and one full
    interior tile; 64x64 / 4x4 per thread on a batch of partial tiles."""
    monkeypatch.setattr(cuda_linalg, "_override", [cuda_linalg.HARDWARE_CONFIG])
    _check(dj.tensor(_data((5, 7), np.float32)).cuda(), dj.tensor(_data((7, 3), np.float32)).cuda())
    a = _view(dj.tensor(_data((8, 128), np.float32)).cuda(), lambda l: l.T)   # rows-fast tile loads
    _check(a, dj.tensor(_data((8, 128), np.float32)).cuda())
    # the configuration for 8- and 16-byte accumulators: 64x64 tiles, 4x4 per thread
    monkeypatch.setattr(cuda_linalg, "_override", [cuda_linalg.HARDWARE_CONFIG_WIDE])
    _check(dj.tensor(_data((2, 5, 9), np.float64)).cuda(), dj.tensor(_data((9, 3), np.float64)).cuda())


def test_generated_source_shapes():
    src = cuda_linalg._source(cuda_linalg.HARDWARE_CONFIG, 2, False, True)
    assert "cuda.shared.array(1056," in src                   # BK x (BM + PAD), flat
    assert src.count(" += a") == 8 * 64                     # 8x8 register block, BK=8 unrolled
    with pytest.raises(ValueError):
        cuda_linalg._source(cuda_linalg.TileConfig(8, 8, 3, 2, 2, 0), 0, False, False)


def test_autograd_matmul_on_cuda():
    try:
        dj.transpose(dj.ones(2, 2, device="cuda"), 0, 1)
    except Exception as e:   # the backward formula needs transpose on CUDA
        pytest.skip(f"transpose has no CUDA kernel yet: {type(e).__name__}")
    an, bn = _data((3, 4), np.float32), _data((4, 2), np.float32)
    a = dj.tensor(an).cuda().requires_grad_(True)
    b = dj.tensor(bn).cuda().requires_grad_(True)
    out = a @ b
    out.backward(dj.ones_like(out))
    ac, bc = dj.tensor(an, requires_grad=True), dj.tensor(bn, requires_grad=True)
    oc = ac @ bc
    oc.backward(dj.ones_like(oc))
    assert a.grad.device.type == "cuda" and b.grad.device.type == "cuda"
    np.testing.assert_allclose(a.grad.numpy(), ac.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), bc.grad.numpy(), rtol=1e-5)


def test_autograd_matrix_vector_on_cuda():
    try:
        dj.transpose(dj.ones(2, 2, device="cuda"), 0, 1)
        dj.squeeze(dj.ones(2, 1, device="cuda"), -1)
    except Exception as e:
        pytest.skip(f"transpose/squeeze have no CUDA kernel yet: {type(e).__name__}")
    an, vn = _data((3, 4), np.float64), _data((4,), np.float64)
    a = dj.tensor(an).cuda().requires_grad_(True)
    v = dj.tensor(vn).cuda().requires_grad_(True)
    out = a @ v
    out.backward(dj.ones_like(out))
    ac, vc = dj.tensor(an, requires_grad=True), dj.tensor(vn, requires_grad=True)
    oc = ac @ vc
    oc.backward(dj.ones_like(oc))
    np.testing.assert_allclose(a.grad.numpy(), ac.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), vc.grad.numpy(), rtol=1e-12)
