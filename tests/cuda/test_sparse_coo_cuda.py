"""Sparse COO on CUDA (the SparseCUDA key, kernels/sparse/coo_cuda.py), against the SparseCPU kernels.

Runs under Numba's CUDA simulator where there is no GPU (tests/conftest.py), so every tensor is tiny.
Coalescing, to_dense, add and sums over some dims add each position's entries in the CPU's order, so
they must give the CPU's bits; the product and the sum of everything may sum floats in another order.
"""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import NoKernelError, SchemaError, ShapeError

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")

K = dj.DispatchKey
# an uncoalesced 2x3 matrix: position (1, 2) three times, (0, 1) twice, out of order
IDX = [[1, 0, 1, 1, 0, 1], [2, 1, 2, 0, 1, 2]]


def _vals(dtype, n=6, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50, 50, n).astype(dtype)
    return rng.standard_normal(n).astype(dtype) * np.array(1e3, dtype)   # sums that round


def _same(got, want):
    """Bit-equal COO tensors or dense arrays: the device result brought back against the CPU's."""
    if isinstance(want, dj.SparseCooTensor):
        assert got.is_cuda and got.layout == dj.sparse_coo and got.shape == want.shape
        assert got.is_coalesced() == want.is_coalesced() and got.dtype == want.dtype
        got = got.cpu()
        np.testing.assert_array_equal(got._indices().numpy(), want._indices().numpy())
        got, want = got._values(), want._values()
    g, w = got.cpu().numpy(), want.numpy()
    assert g.dtype == w.dtype and g.shape == w.shape
    assert g.tobytes() == w.tobytes(), (g, w)


def _close(got, want, tol=1e-5):
    g, w = got.cpu().numpy(), want.numpy()
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_every_way_onto_cuda_and_back():
    d = np.array([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]], np.float32)
    a = dj.tensor(d).to_sparse()
    moved = [a.cuda(), a.to("cuda"), a.to("cuda:0", dj.float64), a.cuda(0),
             dj.sparse_coo_tensor(a.indices(), a.values(), (2, 3), device="cuda"),
             dj.sparse_coo_tensor(a.indices(), a.values().cuda(), (2, 3)),
             dj.sparse_coo_tensor(a.indices().cuda(), a.values(), (2, 3)),
             dj.tensor(d).to_sparse_csr().cuda().to_sparse(), dj.tensor(d).cuda().to_sparse()]
    for m in moved:
        assert m.is_cuda and str(m.device) == "cuda:0" and m.layout == dj.sparse_coo and m.is_coalesced()
        assert dj.DispatchKeySet.from_bits(m._sig >> 16).highest() is K.SparseCUDA
        back = m.cpu()
        assert not back.is_cuda and back.dtype == m.dtype
        np.testing.assert_array_equal(back.indices().numpy(), a.indices().numpy())
        np.testing.assert_array_equal(back.values().numpy(), d[d != 0].astype(m.dtype.np))
    assert a.cuda().indices().is_cuda and "device='cuda:0'" in repr(a.cuda())
    assert a.cuda().to("cpu").to_dense().numpy().tolist() == d.tolist()
    # dense CUDA tensors of other ranks, as the CPU's to_sparse
    for shape in ((), (5,), (2, 1, 3)):
        x = _vals(np.float32, int(np.prod(shape)), seed=1).reshape(shape)
        x[x > 0] = 0
        _same(dj.tensor(x).cuda().to_sparse(), dj.tensor(x).to_sparse())
    # a requires-grad leaf moves differentiably: the CPU values get the gradient
    v = dj.tensor([1.0, 2.0], requires_grad=True)
    m = dj.sparse_coo_tensor([[0, 1], [1, 0]], v, (2, 2), device="cuda")
    assert dj.DispatchKey.AutogradCUDA in dj.DispatchKeySet.from_bits(m._sig >> 16)
    dj.sparse.mm(m, dj.ones(2, 1, device="cuda")).sum().backward()
    assert v.grad.numpy().tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_coalesce_to_dense_add_and_partial_sums_give_the_cpus_bits(dtype):
    a = dj.sparse_coo_tensor(IDX, _vals(dtype), (2, 3))
    b = dj.sparse_coo_tensor([[0, 1, 0], [0, 2, 0]], _vals(dtype, 3, seed=2), (2, 3))
    ac, bc = a.cuda(), b.cuda()
    assert not ac.is_coalesced()
    _same(ac.coalesce(), a.coalesce())
    _same(ac.to_dense(), a.to_dense())
    _same(ac + bc, a + b)
    _same(dj.add(ac, bc, alpha=3), dj.add(a, b, alpha=3))
    d = dj.tensor(_vals(dtype, 6, seed=3).reshape(2, 3))
    _same(d.cuda() + ac, d + a)
    _same(dj.add(d.cuda(), ac, alpha=2), dj.add(d, a, alpha=2))
    for dim in (0, 1, (1,)):
        _same(dj.sparse.sum(ac, dim), dj.sparse.sum(a, dim))
    with pytest.raises(SchemaError, match=r"add\(sparse, dense\) is not supported"):
        ac + d.cuda()
    with pytest.raises(ShapeError, match="same size"):
        d.cuda()[:1] + ac


def test_three_dim_coalesce_and_sum_over_two_dims():
    idx = [[1, 0, 1, 1], [0, 2, 0, 1], [3, 1, 3, 0]]
    a = dj.sparse_coo_tensor(idx, _vals(np.float64, 4), (2, 3, 4))
    _same(a.cuda().coalesce(), a.coalesce())
    _same(a.cuda().to_dense(), a.to_dense())
    _same(dj.sparse.sum(a.cuda(), (0, 2)), dj.sparse.sum(a, (0, 2)))


def test_mul_and_sum_of_everything():
    a = dj.sparse_coo_tensor(IDX, _vals(np.float32), (2, 3))
    ac = a.cuda()
    _same(ac * 2.5, a * 2.5)
    _same(3 * ac, 3 * a)
    _same(ac * dj.tensor(0.5).cuda(), a * dj.tensor(0.5))
    b = dj.sparse_coo_tensor([[1, 0], [2, 2]], [2.0, 5.0], (2, 3))
    _same(ac * b.cuda(), a * b)
    row = dj.tensor([1.0, -2.0, 4.0])
    _same(ac * row.cuda(), a * row)
    i = dj.sparse_coo_tensor(IDX, _vals(np.int32), (2, 3))
    _same(dj.sparse.sum(i.cuda()), dj.sparse.sum(i))       # int64, exact
    _close(dj.sparse.sum(ac), dj.sparse.sum(a))            # a float sum in another order
    assert dj.sparse.sum(ac).is_cuda


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_and_their_gradients_match_the_cpu(dtype):
    tol = 1e-12 if dtype == np.float64 else 1e-5
    vals = _vals(dtype) / 1e3
    b = _vals(dtype, 6, seed=4).reshape(3, 2) / 1e3
    grads = {}
    for dev in ("cpu", "cuda"):
        v = dj.tensor(vals, requires_grad=True)
        bt = dj.tensor(b, requires_grad=True)
        a = dj.sparse_coo_tensor(IDX, v, (2, 3), device=dev)
        bd = bt.to(dev)
        out = dj.sparse.mm(a, bd)
        out2 = dj.matmul(dj.tensor(b.T).to(dev), a.detach().t())       # dense @ COO
        out3 = dj.matmul(a.detach(), dj.tensor(b[:, 0]).to(dev))        # COO @ vector
        # rows in order (coalesced; or sorted rows with a duplicate): the product's device-only path
        out4 = dj.matmul(a.detach().coalesce(), bd)
        rows_sorted = dj.sparse_coo_tensor([[0, 0, 1, 1, 1], [1, 1, 2, 0, 2]], vals[:5], (2, 3), device=dev)
        out5 = dj.matmul(rows_sorted, bd)
        w = dj.tensor(vals[:5], requires_grad=True)
        dj.sparse.mm(dj.sparse_coo_tensor(rows_sorted._indices(), w, (2, 3), device=dev), bd.detach()).sum().backward()
        (out * dj.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=out.dtype).to(dev)).sum().backward()
        assert out.is_cuda == (dev == "cuda")
        grads[dev] = (out.cpu(), out2.cpu(), out3.cpu(), out4.cpu(), out5.cpu(), v.grad, bt.grad, w.grad)
    for got, want in zip(grads["cuda"], grads["cpu"]):
        _close(got, want, tol)


def test_csr_conversions_on_cuda():
    a = dj.sparse_coo_tensor(IDX, _vals(np.float32), (2, 3))
    c = a.cuda().to_sparse_csr()
    assert c.is_cuda and c.layout == dj.sparse_csr
    want = a.to_sparse_csr()
    for got, ref in ((c.crow_indices(), want.crow_indices()), (c.col_indices(), want.col_indices()),
                     (c.values(), want.values())):
        _same(got, ref)
    _same(c.to_sparse(), want.to_sparse())
    _same(c.to_sparse_coo(), want.to_sparse())


def test_compiled_function_of_a_cuda_coo_argument():
    fn = lambda x, y: (x.to_dense() * 2 + 1, (x @ y) * 2)      # noqa: E731
    a = dj.sparse_coo_tensor(IDX, _vals(np.float32), (2, 3), device="cuda")
    y = dj.ones(3, 2, device="cuda")
    for got, want in zip(dj.compile(fn)(a, y), fn(a, y)):
        assert type(got) is dj.Tensor and got.is_cuda
        _same(got, want.cpu())


def test_an_op_without_a_sparse_cuda_kernel_names_the_ones_that_exist():
    ac = dj.tensor([[0.0, 1.0]]).to_sparse().cuda()
    with pytest.raises(NoKernelError, match="'SparseCUDA' backend") as e:
        dj.exp(ac)
    assert ("The sparse COO layout has kernels only for: aten::add.Tensor, aten::matmul, aten::mul.Tensor, "
            "aten::sum, aten::t, aten::to_dense; convert with .to_dense() first") in str(e.value)
    for op in ("matmul", "add.Tensor", "mul.Tensor", "sum", "to_dense", "t"):
        assert dj.has_kernel(f"aten::{op}", "SparseCUDA")


@pytest.mark.gpu
def test_real_gpu_coo_kernels_at_scale():
    # hardware: many blocks and threads.  Coalescing, to_dense and add sum each position's entries in
    # the CPU's order (bit-equal); the product and its gradients sum float32 in another order than the
    # CPU's loops (fastmath there), so they agree to a relative 1e-5
    rng = np.random.default_rng(7)
    rows, cols, nnz = 3000, 2000, 60_000
    idx = np.stack([rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)])
    v = dj.tensor(rng.standard_normal(nnz).astype(np.float32), requires_grad=True)
    vc = dj.tensor(v.numpy().copy(), requires_grad=True)
    b = rng.standard_normal((cols, 64)).astype(np.float32)
    a, ac = dj.sparse_coo_tensor(idx, v, (rows, cols)), dj.sparse_coo_tensor(idx, vc, (rows, cols), device="cuda")
    _same(ac.detach().coalesce(), a.detach().coalesce())
    _same(ac.detach().to_dense(), a.detach().to_dense())
    _same(ac.detach() + ac.detach().t().t(), a.detach() + a.detach().t().t())
    bt, bc = dj.tensor(b, requires_grad=True), dj.tensor(b, requires_grad=True)
    out, outc = dj.sparse.mm(a, bt), dj.sparse.mm(ac, bc.cuda())
    _close(outc, out, 1e-5)
    out.sum().backward()
    outc.sum().backward()
    _close(vc.grad, v.grad, 1e-5)
    _close(bc.grad, bt.grad, 1e-5)
