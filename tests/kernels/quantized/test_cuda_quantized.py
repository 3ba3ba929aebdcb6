"""QuantizedCUDA: quantized tensors with device storage, against the QuantizedCPU kernels.

Every CUDA result must equal the CPU kernel's bit for bit (same integers, same
output scale and zero point).  Runs under Numba's CUDA simulator where there
is no GPU (tests/conftest.py), so every array is tiny.
"""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import quantized as Q
from dispatch_jit.errors import DTypeError, NoKernelError, ShapeError

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")


def _rand(shape, seed, spread=2.0):
    return dj.tensor((np.random.default_rng(seed).standard_normal(shape) * spread).astype(np.float32))


def _pair(shape, seed, scale, zp, qd):
    """The same quantized tensor on the CPU and on CUDA (quantized on each device)."""
    x = _rand(shape, seed)
    return Q.quantize_per_tensor(x, scale, zp, qd), Q.quantize_per_tensor(x.cuda(), scale, zp, qd)


def _same(qc, q):
    assert qc.is_cuda and not q.is_cuda
    assert repr(dj.dispatch_keys(qc)) == "DispatchKeySet(QuantizedCUDA)"
    assert qc.dtype is q.dtype
    assert qc.q_scale() == q.q_scale() and qc.q_zero_point() == q.q_zero_point()
    ir = qc.int_repr()
    assert ir.is_cuda and ir.dtype == q.int_repr().dtype
    np.testing.assert_array_equal(ir.numpy(), q.int_repr().numpy())


@pytest.mark.parametrize("qd, scale, zp", [(Q.qint8, 0.05, 0), (Q.qint8, 0.02, -7), (Q.quint8, 0.03, 128)])
def test_quantize_dequantize_match_cpu_bit_for_bit(qd, scale, zp):
    q, qc = _pair((3, 5), 1, scale, zp, qd)
    _same(qc, q)
    dq = qc.dequantize()
    assert dq.is_cuda and dq.dtype is dj.float32
    np.testing.assert_array_equal(dq.numpy(), q.dequantize().numpy())
    # ties round half to even, values saturate, on both devices
    x = dj.tensor([0.25, 0.75, -0.25, -0.75, 1e9, -1e9, 0.0], dtype=dj.float64)
    a = Q.quantize_per_tensor(x, 0.5, 0, qd)
    b = Q.quantize_per_tensor(x.cuda(), 0.5, 0, qd)
    np.testing.assert_array_equal(b.int_repr().numpy(), a.int_repr().numpy())


def test_device_moves_accessors_and_repr():
    q, qc = _pair((2, 3), 2, 0.1, 3, Q.qint8)
    moved = q.cuda()
    assert moved.device.type == "cuda" and dj.dispatch_keys(moved) == dj.dispatch_keys(qc)
    assert "QuantizedCUDA" in repr(dj.dispatch_keys(moved))
    back = moved.cpu()
    assert back.device.type == "cpu" and "QuantizedCPU" in repr(dj.dispatch_keys(back))
    np.testing.assert_array_equal(back.int_repr().numpy(), q.int_repr().numpy())
    assert q.to("cuda").is_cuda and qc.to("cpu").device.type == "cpu"
    assert qc.cuda() is qc and q.cpu() is q
    assert qc.q_scale() == 0.1 and qc.q_zero_point() == 3 and qc.qscheme() == "per_tensor_affine"
    assert qc.is_quantized and qc.shape == (2, 3)
    r = repr(qc)
    assert "dtype=dj.qint8" in r and "device='cuda:0'" in r
    np.testing.assert_array_equal(qc.numpy(), q.numpy())


@pytest.mark.parametrize("qa, qb", [(Q.qint8, Q.qint8), (Q.quint8, Q.quint8)])
def test_matmul_auto_and_explicit_output_params(qa, qb):
    zpa, zpb = (3, -2) if qa is Q.qint8 else (120, 131)
    a, ac = _pair((5, 7), 3, 0.02, zpa, qa)
    b, bc = _pair((7, 3), 4, 0.03, zpb, qb)
    _same(dj.matmul(ac, bc), dj.matmul(a, b))                 # MinMaxObserver output parameters
    zo = 1 if qa is Q.qint8 else 130
    _same(dj.quantized_matmul(ac, bc, 0.05, zo), dj.quantized_matmul(a, b, 0.05, zo))


def test_matmul_shapes_and_strided_operands():
    a, ac = _pair((2, 2, 4), 5, 0.05, 1, Q.qint8)              # batch dimensions are flattened
    b, bc = _pair((4, 3), 6, 0.05, -1, Q.qint8)
    _same(dj.matmul(ac, bc), dj.matmul(a, b))
    v, vc = _pair((4,), 7, 0.05, 0, Q.qint8)                    # (..., k) @ (k,)
    _same(dj.quantized_matmul(ac, vc, 0.1, 0), dj.quantized_matmul(a, v, 0.1, 0))
    # a transposed (non-contiguous) right operand is read in place
    w, wc = _pair((3, 4), 8, 0.05, 2, Q.qint8)
    wt = Q.make_quantized(w._data.T, w.scale, w.zero_point, w.qdtype)
    wtc = Q.make_quantized(wc._data.view_as(lambda l: l.T), wc.scale, wc.zero_point, wc.qdtype)
    assert not wtc._data.flags.c_contiguous
    _same(dj.quantized_matmul(ac, wtc, 0.1, 0), dj.quantized_matmul(a, wt, 0.1, 0))
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        dj.matmul(ac, wc)
    with pytest.raises(ShapeError, match="supports a"):
        dj.matmul(ac, ac)


def test_linear_with_and_without_bias():
    x, xc = _pair((4, 6), 9, 0.02, 0, Q.qint8)
    w, wc = _pair((3, 6), 10, 0.01, 0, Q.qint8)
    bias = dj.tensor([0.5, -1.0, 0.25])
    _same(dj.quantized_linear(xc, wc, bias.cuda(), 0.05, 2), dj.quantized_linear(x, w, bias, 0.05, 2))
    _same(dj.quantized_linear(xc, wc, None, 0.05, 2), dj.quantized_linear(x, w, None, 0.05, 2))
    with pytest.raises(ShapeError, match="bias has shape"):
        dj.quantized_linear(xc, wc, dj.tensor([1.0]).cuda(), 0.05, 2)


@pytest.mark.parametrize("qd, zp", [(Q.qint8, -3), (Q.quint8, 100)])
def test_add_and_relu(qd, zp):
    a, ac = _pair((3, 4), 11, 0.04, zp, qd)
    b, bc = _pair((4,), 12, 0.05, zp, qd)                       # broadcast
    _same(dj.add(ac, bc), dj.add(a, b))
    _same(dj.quantized_add(ac, bc, 0.1, zp), dj.quantized_add(a, b, 0.1, zp))
    _same(dj.relu(ac), dj.relu(a))
    with pytest.raises(DTypeError, match="alpha"):
        dj.add(ac, bc, alpha=2)


def test_missing_kernels_mixed_devices_and_dense_arguments(capsys):
    q, qc = _pair((2, 2), 13, 0.1, 0, Q.qint8)
    with pytest.raises(NoKernelError, match="QuantizedCUDA"):
        dj.exp(qc)
    with pytest.raises(Exception, match="same device"):
        dj.matmul(q, qc)
    with pytest.raises(DTypeError, match="must be a quantized tensor"):
        dj.quantized_matmul(qc, dj.ones((2, 2), device="cuda"), 0.1, 0)
    with dj.show_dispatch_trace():
        dj.matmul(qc, qc)
        dj.relu(qc)
    out = capsys.readouterr().out
    assert "[call] op=[aten::matmul], key=[QuantizedCUDA]" in out
    assert "[call] op=[aten::relu], key=[QuantizedCUDA]" in out
    line = next(l for l in dj.dump_table("aten::matmul").splitlines() if l.strip().startswith("QuantizedCUDA "))
    assert "[missing]" not in line


def test_inner_dimension_limit_checked_before_launch():
    a = Q.make_quantized(dj.zeros((1, 33025), dtype=dj.int8, device="cuda")._data, 0.1, 0, Q.qint8)
    b = Q.make_quantized(dj.zeros((33025, 1), dtype=dj.int8, device="cuda")._data, 0.1, 0, Q.qint8)
    with pytest.raises(ShapeError, match="int32"):
        dj.matmul(a, b)
