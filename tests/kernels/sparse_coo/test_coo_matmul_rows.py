"""COO @ dense on the row-parallel path (nnz * columns above cpu.PARALLEL_WORK): results and
both gradients against a dense float64 reference and torch.sparse.mm (optional oracle), bits that do
not depend on the Numba thread count, uncoalesced input (sorted by the counting sort), the empty
matrix, and errors that name what was wrong.  float64, the dtype of test_sparse_coo.py's products, so
that the kernels compiled for one file serve the other (the code is the same for float32)."""

import numba
import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, ShapeError
from dispatch_jit.kernels.sparse import coo, cpu

ROWS, COLS, NNZ, N = 400, 300, 3000, 16      # NNZ * N = 48000 >= cpu.PARALLEL_WORK


def _case(seed=0, coalesced=True):
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(0, ROWS, NNZ), rng.integers(0, COLS, NNZ)])     # repeats, any order
    vals = rng.standard_normal(NNZ).astype(np.float64)
    a = dj.sparse_coo_tensor(idx, vals, (ROWS, COLS))
    if coalesced:
        a = a.coalesce()
    b = rng.standard_normal((COLS, N)).astype(np.float64)
    g = rng.standard_normal((ROWS, N)).astype(np.float64)
    return a, b, g


def _dense(a):
    return a.to_dense().numpy().astype(np.float64)


def _grads(a, b, g):
    v = a._values().detach().requires_grad_()
    bt = dj.tensor(b, requires_grad=True)
    out = dj.sparse.mm(dj.sparse_coo_tensor(a._indices(), v, a.shape), bt)
    out.backward(dj.tensor(g))
    return out.numpy(), v.grad.numpy(), bt.grad.numpy()


@pytest.mark.parametrize("coalesced", [True, False])
def test_forward_and_grads_match_dense_reference(coalesced):
    a, b, g = _case(coalesced=coalesced)
    assert a.is_coalesced() is coalesced and NNZ * N >= cpu.PARALLEL_WORK
    out, gv, gb = _grads(a, b, g)
    d, idx = _dense(a), a._indices().numpy()
    np.testing.assert_allclose(out, d @ b, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gb, d.T @ g, rtol=1e-10, atol=1e-10)
    # each (repeated) entry's gradient: g's row . b's row at its position
    np.testing.assert_allclose(gv, (g.astype(np.float64) @ b.T)[idx[0], idx[1]], rtol=1e-10, atol=1e-10)


def test_bits_do_not_depend_on_the_thread_count():
    a, b, g = _case(1, coalesced=False)
    before = numba.get_num_threads()
    try:
        runs = []
        for threads in (1, before):
            numba.set_num_threads(threads)
            runs.append(_grads(a, b, g))
    finally:
        numba.set_num_threads(before)
    for x, y in zip(*runs):
        np.testing.assert_array_equal(x, y)


def test_transposed_product_is_a_serial_scatter_split_by_output_rows():
    a, _, g = _case(2)
    crow, col, _ = coo.row_plan(a._indices().numpy(), ROWS)
    v = a._values().numpy()
    ref = np.zeros((COLS, N), np.float64)
    for i in range(ROWS):             # the order a serial scatter adds in: A's rows, then its entries
        for k in range(crow[i], crow[i + 1]):
            ref[col[k]] += v[k] * g[i]
    # (close, not equal: the kernel may fuse the multiply-add, NumPy does not)
    np.testing.assert_allclose(cpu.csr_matmul_t(crow, col, v, g, COLS), ref, rtol=1e-12, atol=1e-12)
    # the bands split the output rows only: 1 band and 7 give the same bits
    outs = []
    for parts in (1, 7):
        out = np.zeros((COLS, N), np.float64)
        cpu._mm_t(crow, col, v, g, out, parts)
        outs.append(out)
    np.testing.assert_array_equal(*outs)


def test_counting_sort_is_stable_as_argsort():
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 50, 1000)
    ptr, perm = cpu.bucket_sort(keys, 50)
    np.testing.assert_array_equal(perm, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(ptr, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=50))]))


def test_matches_torch_sparse_mm():
    torch = pytest.importorskip("torch")
    a, b, g = _case(4)
    out, gv, gb = _grads(a, b, g)
    idx = torch.from_numpy(a.indices().numpy())
    ta = torch.sparse_coo_tensor(idx, torch.from_numpy(a.values().numpy()), a.shape,
                                 check_invariants=False).coalesce().requires_grad_()
    tb = torch.from_numpy(b).requires_grad_()
    tout = torch.sparse.mm(ta, tb)
    tout.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out, tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gv, ta.grad.coalesce().values().numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape", [(5, 4), (0, 4), (5, 0)])
def test_empty_matrix(shape):
    idx = np.zeros((2, 0), np.int64)
    v = dj.tensor(np.zeros(0), requires_grad=True)
    b = dj.ones(shape[1], 3, dtype=dj.float64, requires_grad=True)
    out = dj.sparse.mm(dj.sparse_coo_tensor(idx, v, shape), b)
    assert out.shape == (shape[0], 3) and not out.numpy().any()
    out.sum().backward()
    assert v.grad.shape == (0,) and b.grad.shape == (shape[1], 3) and not b.grad.numpy().any()


def test_bad_inputs_name_what_was_wrong():
    a = dj.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]]).to_sparse()
    with pytest.raises(ShapeError, match=r"sparse COO matrix of shape \(2, 3\) cannot multiply a tensor of shape "
                                         r"\(2, 4\); expected \(3,\) or \(3, n\)"):
        dj.sparse.mm(a, dj.ones(2, 4))
    with pytest.raises(ShapeError, match=r"a tensor of shape \(4, 3\) cannot multiply a sparse COO matrix of "
                                         r"shape \(2, 3\); expected \(2,\) or \(n, 2\)"):
        dj.ones(4, 3) @ a
    with pytest.raises(DTypeError, match="sparse COO kernels support integer and floating dtypes, got bool"):
        a.to(dj.bool) @ dj.ones(3, 2, dtype=dj.bool)
    with pytest.raises(DTypeError, match="got complex64"):
        a @ dj.ones(3, 2, dtype=dj.complex64)


def test_backward_computes_only_the_gradients_needed(monkeypatch):
    a, b, g = _case(5)
    calls = []
    for name in ("_sddmm", "_mm_t"):
        fn = getattr(cpu, name)
        monkeypatch.setattr(cpu, name, lambda *args, _fn=fn, _name=name: calls.append(_name) or _fn(*args))
    bt = dj.tensor(b, requires_grad=True)
    dj.sparse.mm(a, bt).backward(dj.tensor(g))       # a fixed matrix: only A^T @ g
    assert calls == ["_mm_t"]
    np.testing.assert_allclose(bt.grad.numpy(), _dense(a).T @ g, rtol=1e-10, atol=1e-10)
    calls.clear()
    v = a.values().detach().requires_grad_()
    dj.sparse.mm(dj.sparse_coo_tensor(a.indices(), v, a.shape), dj.tensor(b)).backward(dj.tensor(g))
    assert calls == ["_sddmm"]
