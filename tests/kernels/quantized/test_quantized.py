"""Quantized tensors (dispatch_jit/quantized.py) and their QuantizedCPU kernels
(kernels/quantized/cpu.py), against the dequantize -> float -> quantize reference."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.kernels.quantized.cpu as K  # noqa: F401  (registers the QuantizedCPU kernels)
from dispatch_jit.kernels.quantized.op import MAX_K
from dispatch_jit import quantized as Q
from dispatch_jit.errors import DTypeError, NoKernelError, ShapeError
from helpers import fresh_dispatcher

QDTYPES = [(Q.qint8, 0.05, 3), (Q.quint8, 0.04, 128)]
OPS = dj.ops.aten


def _q(a, scale, zp, qd):
    return Q.quantize_per_tensor(dj.from_numpy(np.asarray(a, np.float32)), scale, zp, qd)


def _rand(shape, seed, spread=2.0):
    return (np.random.default_rng(seed).standard_normal(shape) * spread).astype(np.float32)


def _ints(q):
    return q.int_repr().numpy().astype(np.int64)


def _reference(real, scale, zp, qd):
    return Q.quantize_array(real, scale, zp, qd).astype(np.int64)


def _within_one_quantum(q, real_ref):
    ref = _reference(real_ref, q.q_scale(), q.q_zero_point(), q.dtype)
    diff = np.abs(_ints(q) - ref)
    assert diff.max(initial=0) <= 1, f"max difference {diff.max()} quanta"


# -- the tensor type --------------------------------------------------------------------------

@pytest.mark.parametrize("qd, scale, zp", QDTYPES)
def test_round_trip_within_half_a_quantum(qd, scale, zp):
    lo, hi = (qd.qmin - zp) * scale, (qd.qmax - zp) * scale
    x = np.linspace(lo, hi, 1001, dtype=np.float32)
    q = _q(x, scale, zp, qd)
    assert q.int_repr().numpy().dtype == qd.np and q.dtype is qd
    err = np.abs(q.dequantize().numpy() - x)
    assert err.max() <= scale / 2 * (1 + 1e-5)


@pytest.mark.parametrize("qd, scale, zp", QDTYPES)
def test_quantize_saturates_and_rounds_half_to_even(qd, scale, zp):
    q = _q([1e6, -1e6, 0.0], scale, zp, qd)
    assert _ints(q).tolist() == [qd.qmax, qd.qmin, zp]
    q = Q.quantize_per_tensor(dj.tensor([0.5, 1.5, 2.5, -0.5], dtype=dj.float64), 1.0, 0, Q.qint8)
    assert _ints(q).tolist() == [0, 2, 2, 0]


def test_accessors_keys_and_repr():
    q = Q.quantize_per_tensor(dj.tensor([-1.0, 0.0, 0.26]), 0.1, 0, Q.qint8)
    assert (q.q_scale(), q.q_zero_point(), q.qscheme(), q.is_quantized) == (0.1, 0, "per_tensor_affine", True)
    assert dj.dispatch_keys(q) == dj.DispatchKeySet(dj.DispatchKey.QuantizedCPU)
    assert q.shape == (3,) and q.dequantize().dtype == dj.float32
    assert repr(q) == ("tensor([-1.0000,  0.0000,  0.3000], size=(3,), dtype=dj.qint8, "
                       "quantization_scheme=per_tensor_affine, scale=0.1, zero_point=0)")
    assert repr(Q.qint8) == "dispatch_jit.qint8" and repr(Q.quint8) == "dispatch_jit.quint8"


@pytest.mark.parametrize("scale, zp, qd, err", [
    (0.0, 0, Q.qint8, ValueError), (-1.0, 0, Q.qint8, ValueError), (float("nan"), 0, Q.qint8, ValueError),
    (0.1, 128, Q.qint8, ValueError), (0.1, -1, Q.quint8, ValueError), (0.1, 256, Q.quint8, ValueError),
    (0.1, 0.5, Q.qint8, TypeError), ("0.1", 0, Q.qint8, TypeError), (0.1, 0, dj.int8, DTypeError),
])
def test_bad_quantization_parameters(scale, zp, qd, err):
    with pytest.raises(err):
        Q.quantize_per_tensor(dj.tensor([1.0]), scale, zp, qd)


def test_non_float_input_is_rejected():
    with pytest.raises(DTypeError, match="floating point"):
        Q.quantize_per_tensor(dj.tensor([1, 2]), 0.1, 0, Q.qint8)
    with pytest.raises(TypeError):
        Q.quantize_per_tensor(np.ones(2, np.float32), 0.1, 0, Q.qint8)
    q = Q.quantize_per_tensor(dj.tensor([1.0]), 0.1, 0, Q.qint8)
    with pytest.raises(DTypeError, match="already quantized"):
        Q.quantize_per_tensor(q, 0.1, 0, Q.qint8)


# -- kernels vs the reference -------------------------------------------------------------------

@pytest.mark.parametrize("qa, qb", [(QDTYPES[0], QDTYPES[0]), (QDTYPES[1], QDTYPES[1]), (QDTYPES[1], QDTYPES[0])])
@pytest.mark.parametrize("shape", [(7, 13, 5), (33, 130, 70), (300, 260, 200)])  # the last one runs prange
def test_quantized_matmul_explicit_output_params(qa, qb, shape):
    m, k, n = shape
    a, b = _q(_rand((m, k), 1), qa[1], qa[2], qa[0]), _q(_rand((k, n), 2, 0.5), qb[1], qb[2], qb[0])
    real = a.dequantize().numpy() @ b.dequantize().numpy()
    so = float(np.abs(real).max()) / 100
    zo = qa[0].qmin + 100
    r = OPS.quantized_matmul(a, b, so, zo)
    assert (r.dtype, r.q_scale(), r.q_zero_point(), r.shape) == (qa[0], so, zo, (m, n))
    _within_one_quantum(r, real)


@pytest.mark.parametrize("qd, scale, zp", QDTYPES)
def test_plain_matmul_picks_minmax_output_params(qd, scale, zp):
    a, b = _q(_rand((20, 30), 3), scale, zp, qd), _q(_rand((30, 10), 4), scale, zp, qd)
    real = a.dequantize().numpy() @ b.dequantize().numpy()
    r = a @ b
    assert (r.q_scale(), r.q_zero_point()) == pytest.approx(K.minmax_qparams(real.min(), real.max(), qd), rel=1e-5)
    _within_one_quantum(r, real)
    # 1-D right operand and batched left operand
    v = _q(_rand((30,), 5), scale, zp, qd)
    _within_one_quantum(dj.matmul(a, v), a.dequantize().numpy() @ v.dequantize().numpy())
    a3 = _q(_rand((2, 5, 30), 6), scale, zp, qd)
    r3 = OPS.quantized_matmul(a3, b, 0.2, zp)
    assert r3.shape == (2, 5, 10)
    _within_one_quantum(r3, a3.dequantize().numpy() @ b.dequantize().numpy())


@pytest.mark.parametrize("qd, scale, zp", QDTYPES)
def test_quantized_linear_with_and_without_bias(qd, scale, zp):
    x, w = _q(_rand((9, 40), 7), scale, zp, qd), _q(_rand((12, 40), 8, 0.3), 0.01, 0, Q.qint8)
    bias = _rand((12,), 9)
    real = x.dequantize().numpy() @ w.dequantize().numpy().T
    r = OPS.quantized_linear(x, w, None, 0.1, zp)
    _within_one_quantum(r, real)
    r = OPS.quantized_linear(x, w, dj.from_numpy(bias), 0.1, zp)
    _within_one_quantum(r, real + bias)
    with pytest.raises(ShapeError):
        OPS.quantized_linear(x, w, dj.from_numpy(bias[:5]), 0.1, zp)


@pytest.mark.parametrize("qd, scale, zp", QDTYPES)
def test_quantized_add_and_relu(qd, scale, zp):
    a, b = _q(_rand((4, 50), 10), scale, zp, qd), _q(_rand((4, 50), 11), 0.07, zp, qd)
    real = a.dequantize().numpy() + b.dequantize().numpy()
    r = OPS.quantized_add(a, b, 0.1, zp)
    assert (r.q_scale(), r.q_zero_point()) == (0.1, zp)
    _within_one_quantum(r, real)
    r = a + b                               # plain add: min/max output parameters
    assert r.q_scale() == pytest.approx(K.minmax_qparams(real.min(), real.max(), qd)[0], rel=1e-5)
    _within_one_quantum(r, real)
    row = _q(_rand((50,), 12), scale, zp, qd)  # broadcasting
    _within_one_quantum(OPS.quantized_add(a, row, 0.1, zp), a.dequantize().numpy() + row.dequantize().numpy())
    rl = dj.relu(a)
    assert (rl.q_scale(), rl.q_zero_point(), rl.dtype) == (scale, zp, qd)
    assert np.array_equal(_ints(rl), _reference(np.maximum(a.dequantize().numpy(), 0), scale, zp, qd))


def test_kernels_read_scale_at_call_time():
    """Same signature, different scales: one memo entry, two different results."""
    x = _rand((8, 8), 13)
    a1, a2 = _q(x, 0.05, 0, Q.qint8), _q(x, 0.1, 0, Q.qint8)
    r1, r2 = OPS.quantized_matmul(a1, a1, 0.5, 0), OPS.quantized_matmul(a2, a2, 0.5, 0)
    _within_one_quantum(r1, a1.dequantize().numpy() @ a1.dequantize().numpy())
    _within_one_quantum(r2, a2.dequantize().numpy() @ a2.dequantize().numpy())


# -- the int8 matmul kernel: exact against an int64 product -------------------------------------

def _exact(a, za, b, zb, mult, colbias, zo, qd):
    """The kernel's contract: exact int accumulation, then one float64 requantization."""
    acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    return np.clip(np.rint(acc * mult + colbias) + zo, qd.qmin, qd.qmax).astype(np.int64)


def _storage(shape, qd, seed):
    return np.random.default_rng(seed).integers(qd.qmin, qd.qmax + 1, shape).astype(qd.np)


# sizes around the 6 x 16 register tile and the 48-row block, odd k (a zero-padded last pair),
# k = 0, k over two blocks of 512, and b given transposed (linear's weight.T: packed without a copy)
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (5, 1, 17), (7, 33, 16), (49, 8, 31), (13, 0, 3), (3, 1031, 18)])
@pytest.mark.parametrize("qa, qb, zb", [(Q.qint8, Q.qint8, 0), (Q.quint8, Q.qint8, -7), (Q.qint8, Q.quint8, 255)])
@pytest.mark.parametrize("b_transposed", [False, True])
def test_int8_matmul_is_exact(m, k, n, qa, qb, zb, b_transposed):
    a, b = _storage((m, k), qa, m), _storage((k, n), qb, n)
    if b_transposed:
        b = np.asfortranarray(b)
    za, sa, sb, so, zo = qa.qmin + 3, 0.02, 0.03, 0.05, qa.qmin + 120
    bias = np.linspace(-1, 1, n)
    out, so_, zo_ = K.quantized_matmul_arrays(a, za, sa, b, zb, sb, qa, so, zo, bias)
    assert (so_, zo_, out.dtype, out.shape) == (so, zo, qa.np, (m, n))
    assert np.array_equal(out.astype(np.int64), _exact(a, za, b, zb, sa * sb / so, bias / so, zo, qa))
    out, so, zo = K.quantized_matmul_arrays(a, za, sa, b, zb, sb, qa)          # min/max output parameters
    assert np.array_equal(out.astype(np.int64), _exact(a, za, b, zb, sa * sb / so, 0.0, zo, qa))


def test_int8_matmul_parallel_blocks_are_exact(monkeypatch):
    """The prange variant (when there are 2+ threads): 3 blocks of rows taken from the shared
    counter, the last one partial, n and k not multiples of the tile."""
    monkeypatch.setattr(K, "_PARALLEL_MIN", 0)
    qd = Q.quint8
    a, b = _storage((2 * K._MCR + 5, 9), qd, 1), _storage((9, 19), qd, 2)
    out, _, _ = K.quantized_matmul_arrays(a, 128, 0.1, b, 120, 0.1, qd, 2.0, 100)
    assert np.array_equal(out.astype(np.int64), _exact(a, 128, b, 120, 0.1 * 0.1 / 2.0, 0.0, 100, qd))


def test_int8_matmul_extreme_values_do_not_overflow():
    """|q - zp| = 255 everywhere at the largest k: k * 255 * 255 = 2147385600 < 2**31."""
    k = MAX_K
    a = np.full((2, k), 255, np.uint8)
    b = np.full((k, 3), -128, np.int8)
    out, _, _ = K.quantized_matmul_arrays(a, 0, 1.0, b, 127, 1.0, Q.qint8, 1e8, 0)
    assert out.tolist() == [[-21] * 3] * 2
    with pytest.raises(ShapeError, match="overflow"):
        K.quantized_matmul_arrays(np.zeros((1, MAX_K + 1), np.int8), 0, 1.0,
                                  np.zeros((MAX_K + 1, 1), np.int8), 0, 1.0, Q.qint8, 1.0, 0)


def test_int8_matmul_inner_loop_is_vpmaddwd():
    """On an AVX2 host the microkernel's k loop is 12 vpmaddwd (VNNI: vpdpwssd), 6 rows x 2 vectors
    of 8 columns, not the vpmulld that LLVM's own vectorizer makes of an int16 dot product."""
    import llvmlite.binding as llvm
    if "+avx2" not in llvm.get_host_cpu_features().flatten():
        pytest.skip("the host has no AVX2")
    # compiled here, whatever the disk cache holds: a kernel loaded from it has no assembly to show
    qmm = fresh_dispatcher(K._qmm_serial)
    qmm.compile(K._QMM_SIG)
    asm = qmm.inspect_asm(qmm.signatures[0])
    assert asm.count("vpmaddwd") + asm.count("vpdpwssd") >= 12 and "vpmulld" not in asm


# -- errors and dispatch -----------------------------------------------------------------------

def test_op_without_quantized_kernel_raises_no_kernel_error():
    q = _q([1.0, 2.0], 0.1, 0, Q.qint8)
    with pytest.raises(NoKernelError, match=r"'aten::exp' with arguments from the 'QuantizedCPU' backend") as e:
        dj.exp(q)
    assert "registered only for: CPU" in str(e.value)
    assert dj.has_kernel("aten::matmul", "QuantizedCPU") and not dj.has_kernel("aten::exp", "QuantizedCPU")


def test_mixed_and_bad_arguments():
    q = _q(_rand((3, 3), 14), 0.1, 0, Q.qint8)
    with pytest.raises(DTypeError, match="must be a quantized tensor"):
        dj.matmul(q, dj.ones((3, 3)))
    with pytest.raises(DTypeError, match="must be a quantized tensor"):
        dj.add(q, 1.0)
    with pytest.raises(ShapeError):
        dj.matmul(q, _q(_rand((4, 3), 15), 0.1, 0, Q.qint8))
    with pytest.raises(ValueError, match="zero_point"):
        OPS.quantized_matmul(q, q, 0.1, 300)
    with pytest.raises(ValueError, match="scale"):
        OPS.quantized_add(q, q, -0.1, 0)
    with pytest.raises(NoKernelError):
        OPS.quantized_matmul(dj.ones((2, 2)), dj.ones((2, 2)), 0.1, 0)


def test_dispatch_trace_shows_quantized_key(capsys):
    q = _q(_rand((4, 4), 16), 0.1, 0, Q.qint8)
    with dj.show_dispatch_trace():
        dj.matmul(q, q)
        dj.relu(q)
    out = capsys.readouterr().out
    assert "[call] op=[aten::matmul], key=[QuantizedCPU]" in out
    assert "[call] op=[aten::relu], key=[QuantizedCPU]" in out
