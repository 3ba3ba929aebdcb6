"""SparseCsrCUDA: sparse CSR tensors with device arrays, against the SparseCsrCPU kernels.

Runs under Numba's CUDA simulator where there is no GPU (tests/conftest.py),
so every matrix is tiny (<= 64 elements).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, ShapeError

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")


def _dense(shape, seed, density=0.4, dtype=np.float32):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        d = rng.integers(-4, 5, size=shape).astype(dtype)
    else:
        d = rng.standard_normal(shape).astype(dtype)
    d[rng.random(shape) >= density] = 0
    return d


def _close(got, ref):
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(got, ref)
    else:
        tol = 1e-12 if ref.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def _same_csr(ac, a):
    assert ac.is_cuda and not a.is_cuda and ac.layout == dj.sparse_csr
    assert ac.shape == a.shape and ac.nnz == a.nnz and ac.dtype == a.dtype
    for comp in ("crow_indices", "col_indices", "values"):
        c = getattr(ac, comp)()
        assert c.is_cuda
        _close(c.numpy(), getattr(a, comp)().numpy())


def test_construction_on_device_and_keys():
    d = _dense((5, 7), 0)
    a = dj.tensor(d).to_sparse_csr()
    ac = a.cuda()
    _same_csr(ac, a)
    assert repr(dj.dispatch_keys(ac)) == "DispatchKeySet(SparseCsrCUDA)"
    assert ac.device == dj.device("cuda:0") and "device='cuda:0'" in repr(ac)
    _same_csr(dj.tensor(d).cuda().to_sparse_csr(), a)                  # device-side conversion
    strided = dj.tensor(np.ascontiguousarray(d.T)).cuda().permute((1, 0))
    assert not strided.is_contiguous()
    _same_csr(strided.to_sparse_csr(), a)
    b = dj.sparse_csr_tensor(a.crow_indices(), a.col_indices(), a.values(), (5, 7), device="cuda")
    _same_csr(b, a)
    c = dj.sparse_csr_tensor(a.crow_indices(), a.col_indices(), a.values().cuda(), (5, 7))   # inferred
    _same_csr(c, a)
    back = ac.cpu()
    assert repr(dj.dispatch_keys(back)) == "DispatchKeySet(SparseCsrCPU)"
    _close(back.to_dense().numpy(), d)
    assert ac.to("cpu").device.type == "cpu" and ac.cuda() is ac
    dense = ac.to_dense()
    assert dense.is_cuda
    _close(dense.numpy(), d)
    _close(np.asarray(ac), d)


def test_invalid_input_is_rejected_on_the_host():
    with pytest.raises(ValueError, match="unsorted"):
        dj.sparse_csr_tensor([0, 2], [1, 0], [1.0, 2.0], (1, 2), device="cuda")
    with pytest.raises(ValueError, match="out of range"):
        dj.sparse_csr_tensor(dj.tensor([0, 1]).cuda(), dj.tensor([5]).cuda(), [1.0], (1, 2))
    with pytest.raises(ShapeError, match="rows \\+ 1"):
        dj.sparse_csr_tensor([0, 1, 1], [0], [1.0], (1, 2), device="cuda")
    with pytest.raises(ShapeError, match="to_dense\\(\\)"):
        dj.tensor([[1.0]]).cuda().to_sparse_csr().numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_matmul_and_matvec_match_cpu(dtype):
    d = _dense((5, 7), 1, dtype=dtype)
    a, ac = dj.tensor(d).to_sparse_csr(), dj.tensor(d).to_sparse_csr().cuda()
    b = _dense((7, 3), 2, density=1.0, dtype=dtype)
    v = _dense((7,), 3, density=1.0, dtype=dtype)
    r = dj.matmul(ac, dj.tensor(b).cuda())
    assert r.is_cuda
    _close(r.numpy(), dj.matmul(a, dj.tensor(b)).numpy())
    _close(dj.matmul(ac, dj.tensor(v).cuda()).numpy(), dj.matmul(a, dj.tensor(v)).numpy())


def test_matmul_promotes_reads_strided_and_handles_empty_rows():
    d = _dense((4, 6), 4)
    d[1] = 0
    ac = dj.tensor(d).to_sparse_csr().cuda()
    b = _dense((3, 6), 5, density=1.0, dtype=np.float64)
    bt = dj.tensor(b).cuda().permute((1, 0))                  # (6, 3), non-contiguous, float64
    assert not bt.is_contiguous()
    r = dj.matmul(ac, bt)
    assert r.dtype is dj.float64
    _close(r.numpy(), d.astype(np.float64) @ b.T)
    empty = dj.sparse_csr_tensor([0, 0, 0], [], [], (2, 3), dtype=dj.float32, device="cuda")
    _close(dj.matmul(empty, dj.ones((3, 2), device="cuda")).numpy(), np.zeros((2, 2), np.float32))
    with pytest.raises(ShapeError, match="cannot multiply"):
        dj.matmul(ac, dj.ones((5, 2), device="cuda"))
    with pytest.raises(TypeError, match="CSR @ CSR"):
        dj.matmul(ac, ac)


def test_add_mul_sum_match_cpu():
    d1, d2 = _dense((4, 5), 6), _dense((4, 5), 7)
    a1, a2 = dj.tensor(d1).to_sparse_csr(), dj.tensor(d2).to_sparse_csr()
    c1, c2 = a1.cuda(), a2.cuda()
    _same_csr(dj.add(c1, c2), dj.add(a1, a2))
    _same_csr(dj.add(c1, c2, alpha=-2), dj.add(a1, a2, alpha=-2))
    _same_csr(c1 * 3.0, a1 * 3.0)
    _same_csr(2 * c1, 2 * a1)
    row = dj.tensor(np.arange(5, dtype=np.float32))
    col = dj.tensor(np.arange(4, dtype=np.float32).reshape(4, 1))
    _same_csr(c1 * row.cuda(), a1 * row)
    _same_csr(c1 * col.cuda(), a1 * col)
    with pytest.raises(ShapeError, match="does not broadcast"):
        c1 * dj.ones((3,), device="cuda")
    for kw in ({}, {"axis": 0}, {"axis": 1}, {"axis": 1, "keepdims": True}, {"axis": 0, "keepdims": True}):
        got = dj.sum(c1, **kw)
        assert got.is_cuda
        _close(got.numpy(), np.asarray(dj.sum(a1, **kw).numpy()))
    ai = dj.tensor(_dense((3, 4), 8, dtype=np.int32)).to_sparse_csr()
    for kw in ({}, {"axis": 0}, {"axis": 1}):
        got = dj.sum(ai.cuda(), **kw).numpy()
        assert got.dtype == np.int64
        _close(got, np.asarray(dj.sum(ai, **kw).numpy()))


def test_autograd_wrt_dense_and_values_matches_cpu():
    d = _dense((5, 7), 9)
    a = dj.tensor(d).to_sparse_csr()
    b = _dense((7, 3), 10, density=1.0)
    g = _dense((5, 3), 11, density=1.0)
    ref_a = dj.sparse_csr_tensor(a.crow_indices(), a.col_indices(), a.values().clone(), (5, 7), requires_grad=True)
    ref_b = dj.tensor(b, requires_grad=True)
    dj.matmul(ref_a, ref_b).backward(dj.tensor(g))
    ca = dj.sparse_csr_tensor(a.crow_indices(), a.col_indices(), a.values().clone(), (5, 7), device="cuda",
                              requires_grad=True)
    cb = dj.tensor(b).cuda().requires_grad_()
    assert repr(dj.dispatch_keys(ca)) == "DispatchKeySet(AutogradCUDA, SparseCsrCUDA)"
    out = dj.matmul(ca, cb)
    assert out.is_cuda and out.requires_grad
    out.backward(dj.tensor(g).cuda())
    assert cb.grad.is_cuda and ca.values().grad.is_cuda
    _close(cb.grad.numpy(), ref_b.grad.numpy())
    _close(ca.values().grad.numpy(), ref_a.values().grad.numpy())
    assert ca.grad.is_cuda and ca.grad.layout == dj.sparse_csr
    # CPU leaves moved to the device: gradients come back to them
    la = dj.sparse_csr_tensor(a.crow_indices(), a.col_indices(), a.values().clone(), (5, 7), requires_grad=True)
    lb = dj.tensor(b, requires_grad=True)
    dj.matmul(la.cuda(), lb.cuda()).backward(dj.tensor(g).cuda())
    _close(lb.grad.numpy(), ref_b.grad.numpy())
    _close(la.values().grad.numpy(), ref_a.values().grad.numpy())
    # matrix-vector product
    v = dj.tensor(b[:, 0].copy()).cuda().requires_grad_()
    dj.matmul(ca, v).sum().backward()
    _close(v.grad.numpy(), d.sum(0))


def test_dispatch_trace_and_table(capsys):
    ac = dj.tensor(_dense((3, 4), 12)).to_sparse_csr().cuda()
    with dj.show_dispatch_trace():
        dj.matmul(ac, dj.ones((4, 2), device="cuda"))
    assert "[call] op=[aten::matmul], key=[SparseCsrCUDA]" in capsys.readouterr().out
    text = dj.dump_table("aten::matmul")
    for key in ("SparseCsrCUDA", "AutogradCUDA"):
        line = next(l for l in text.splitlines() if l.strip().startswith(key + " "))
        assert "[missing]" not in line, line
    with pytest.raises(Exception, match="same device"):
        dj.matmul(ac, dj.ones((4, 2)))
    with pytest.raises(DTypeError):
        dj.matmul(dj.tensor([[True, False]]).to_sparse_csr().cuda(), dj.ones((2, 1), dtype=dj.bool, device="cuda"))


@st.composite
def _cases(draw):
    rows = draw(st.integers(0, 6))
    cols = draw(st.integers(1, 6))
    density = draw(st.sampled_from([0.0, 0.3, 1.0]))
    seed = draw(st.integers(0, 2 ** 16))
    return _dense((rows, cols), seed, density), _dense((cols, 2), seed + 1, 1.0)


@settings(max_examples=8)
@given(_cases())
def test_random_sparsity_patterns_against_dense(case):
    d, b = case
    ac = dj.tensor(d).cuda().to_sparse_csr()
    assert ac.nnz == int(np.count_nonzero(d))
    _close(ac.to_dense().numpy(), d)
    _close(dj.matmul(ac, dj.tensor(b).cuda()).numpy(), d @ b)
    _close(dj.add(ac, ac).to_dense().numpy(), d + d)
