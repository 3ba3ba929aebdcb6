"""Sparse CSR tensors: construction and validation, the SparseCsrCPU kernels
against dense NumPy (and scipy.sparse where importable), dispatch, gradients."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dispatch_jit as dj
import dispatch_jit.kernels.sparse.cpu as ksparse   # noqa: F401  (registers the kernels until kernels/__init__ does)
from dispatch_jit.errors import ShapeError
from dispatch_jit.sparse import SparseCsrTensor, sparse_csr, sparse_csr_tensor, to_sparse_csr


def _random_dense(rng, rows, cols, density, dtype=np.float64):
    a = rng.standard_normal((rows, cols)).astype(dtype)
    a[rng.random((rows, cols)) >= density] = 0
    return a


@st.composite
def sparse_cases(draw):
    rows = draw(st.integers(0, 7))
    cols = draw(st.integers(1, 7))
    n = draw(st.integers(0, 5))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    seed = draw(st.integers(0, 2 ** 16))
    return rows, cols, n, density, seed


# -- construction and validation --------------------------------------------------------------------
def test_round_trip_and_components():
    a = np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [3.0, 0.0, 4.0]], dtype=np.float32)
    c = dj.tensor(a).to_sparse_csr()
    assert isinstance(c, SparseCsrTensor)
    assert c.layout == sparse_csr == "sparse_csr"
    assert c.shape == (3, 3) and c.ndim == 2 and c.dtype == dj.float32 and c.nnz == 3
    assert c.crow_indices().tolist() == [0, 1, 1, 3]
    assert c.col_indices().tolist() == [1, 0, 2]
    assert c.values().tolist() == [2.0, 3.0, 4.0]
    assert c.crow_indices().dtype == dj.int64
    np.testing.assert_array_equal(c.to_dense().numpy(), a)
    d = dj.tensor(a)
    assert d.to_dense() is d
    assert to_sparse_csr(c) is c


def test_constructor_infers_size_and_converts():
    c = sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0])
    assert c.shape == (2, 3) and c.dtype == dj.float32
    c64 = sparse_csr_tensor(np.array([0, 1]), np.array([4]), np.array([1.5]), (1, 6), dtype=dj.float64)
    assert c64.shape == (1, 6) and c64.dtype == dj.float64
    empty = sparse_csr_tensor([0, 0, 0], [], np.zeros(0, np.float32), (2, 5))
    assert empty.nnz == 0 and empty.to_dense().numpy().tolist() == [[0.0] * 5] * 2


@pytest.mark.parametrize("crow, col, vals, size, err, match", [
    ([0, 1], [0], [1.0], (2, 2), ShapeError, "rows \\+ 1 = 3"),
    ([0, 1, 2], [0], [1.0, 2.0], (2, 2), ShapeError, "same length"),
    ([1, 1, 2], [0, 1], [1.0, 2.0], (2, 2), ValueError, "crow_indices\\[0\\] must be 0"),
    ([0, 2, 1], [0, 1], [1.0, 2.0], (2, 2), ValueError, "non-decreasing, but row 1"),
    ([0, 1, 1], [0, 1], [1.0, 2.0], (2, 2), ValueError, "must equal nnz = 2"),
    ([0, 1, 2], [0, 2], [1.0, 2.0], (2, 2), ValueError, "col_indices\\[1\\] = 2 \\(row 1\\) is out of range"),
    ([0, 1, 2], [-1, 0], [1.0, 2.0], (2, 2), ValueError, "col_indices\\[0\\] = -1"),
    ([0, 0, 2], [1, 0], [1.0, 2.0], (2, 2), ValueError, "unsorted column indices in row 1"),
    ([0, 2, 2], [1, 1], [1.0, 2.0], (2, 2), ValueError, "duplicate column indices in row 0"),
    ([0, 1, 2], [0.5, 1], [1.0, 2.0], (2, 2), TypeError, "must hold integers"),
    ([0, 1, 2], [0, 1], [[1.0], [2.0]], (2, 2), ShapeError, "values must be 1-D"),
])
def test_invalid_csr_raises_at_construction(crow, col, vals, size, err, match):
    with pytest.raises(err, match=match):
        sparse_csr_tensor(crow, col, vals, size)


def test_decreasing_column_at_row_boundary_is_valid():
    c = sparse_csr_tensor([0, 1, 2], [1, 0], [1.0, 2.0], (2, 2))
    assert c.to_dense().tolist() == [[0.0, 1.0], [2.0, 0.0]]


def test_dense_style_access_says_to_convert():
    c = dj.tensor([[1.0, 0.0]]).to_sparse_csr()
    for f in (lambda: c.numpy(), lambda: c[0], lambda: c.tolist(), lambda: list(c), lambda: c.strides):
        with pytest.raises(ShapeError, match="to_dense\\(\\)"):
            f()
    assert "layout=dj.sparse_csr" in repr(c)
    np.testing.assert_array_equal(np.asarray(c), [[1.0, 0.0]])


# -- dispatch -------------------------------------------------------------------------------------------
def test_keys_and_dispatch_trace(capsys):
    c = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr()
    assert dj.dispatch_keys(c) == dj.DispatchKeySet(dj.DispatchKey.SparseCsrCPU)
    assert dj.has_kernel("aten::matmul", "SparseCsrCPU")
    with dj.show_dispatch_trace():
        dj.matmul(c, dj.tensor([[1.0], [1.0]]))
    assert "[call] op=[aten::matmul], key=[SparseCsrCPU]" in capsys.readouterr().out
    c.requires_grad_()
    assert dj.dispatch_keys(c) == dj.DispatchKeySet([dj.DispatchKey.SparseCsrCPU, dj.DispatchKey.AutogradCPU])


def test_unsupported_combinations_are_clear():
    c = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr()
    d = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match="CSR @ dense"):
        dj.matmul(d, c)
    with pytest.raises(TypeError, match="CSR @ CSR"):
        dj.matmul(c, c)
    with pytest.raises(TypeError, match="CSR \\+ CSR"):
        dj.add(c, d)
    with pytest.raises(ShapeError, match="cannot multiply"):
        dj.matmul(c, dj.tensor([[1.0, 2.0, 3.0]]))
    with pytest.raises(ShapeError, match="must match"):
        c + dj.tensor([[1.0, 0.0, 3.0]]).to_sparse_csr()


# -- kernels against dense NumPy ------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(sparse_cases(), st.sampled_from([np.float32, np.float64]))
def test_matmul_matches_dense(case, dtype):
    rows, cols, n, density, seed = case
    rng = np.random.default_rng(seed)
    a = _random_dense(rng, rows, cols, density, dtype)
    b = rng.standard_normal((cols, n)).astype(dtype)
    x = rng.standard_normal(cols).astype(dtype)
    c = dj.tensor(a).to_sparse_csr()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(dj.matmul(c, dj.tensor(b)).numpy(), a @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose((c @ dj.tensor(x)).numpy(), a @ x, rtol=tol, atol=tol)


@settings(max_examples=30, deadline=None)
@given(sparse_cases(), st.integers(0, 2 ** 16))
def test_add_mul_sum_match_dense(case, seed2):
    rows, cols, _, density, seed = case
    rng = np.random.default_rng(seed)
    a = _random_dense(rng, rows, cols, density)
    b = _random_dense(np.random.default_rng(seed2), rows, cols, 0.4)
    ca, cb = dj.tensor(a).to_sparse_csr(), dj.tensor(b).to_sparse_csr()
    s = ca + cb
    assert isinstance(s, SparseCsrTensor)
    np.testing.assert_allclose(s.to_dense().numpy(), a + b)
    np.testing.assert_allclose(dj.add(ca, cb, alpha=2).to_dense().numpy(), a + 2 * b)
    sparse_csr_tensor(s.crow_indices(), s.col_indices(), s.values(), s.shape)   # the result is valid CSR
    np.testing.assert_allclose((ca * 3.0).to_dense().numpy(), a * 3)
    np.testing.assert_allclose((3.0 * ca).to_dense().numpy(), a * 3)
    row = rng.standard_normal(cols)
    m = ca * dj.tensor(row)
    assert isinstance(m, SparseCsrTensor) and m.nnz == ca.nnz
    np.testing.assert_allclose(m.to_dense().numpy(), a * row)
    np.testing.assert_allclose((ca * dj.tensor(b)).to_dense().numpy(), a * b)
    np.testing.assert_allclose(ca.sum().numpy(), a.sum(), atol=1e-12)
    np.testing.assert_allclose(ca.sum(axis=0).numpy(), a.sum(axis=0), atol=1e-12)
    np.testing.assert_allclose(ca.sum(axis=1).numpy(), a.sum(axis=1), atol=1e-12)
    np.testing.assert_allclose(ca.sum(axis=-1, keepdims=True).numpy(), a.sum(axis=-1, keepdims=True), atol=1e-12)


def test_integer_and_mixed_dtypes():
    a = np.array([[0, 2], [3, 0]], dtype=np.int64)
    c = dj.tensor(a).to_sparse_csr()
    assert c.dtype == dj.int64
    np.testing.assert_array_equal(dj.matmul(c, dj.tensor(np.array([[1], [2]]))).numpy(), a @ [[1], [2]])
    assert (c * 2.5).dtype == dj.float32     # int tensor * float scalar -> default float, as dense
    assert c.sum().item() == 5
    f = dj.matmul(c, dj.tensor([[1.0], [2.0]]))
    assert f.dtype == dj.float32
    np.testing.assert_allclose(f.numpy(), a @ [[1.0], [2.0]])


def test_parallel_path_matches_scipy():
    sp = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(0)
    a = sp.random(300, 200, density=0.05, format="csr", dtype=np.float64, random_state=1)
    a.sort_indices()
    b = rng.standard_normal((200, 64))
    c = sparse_csr_tensor(a.indptr, a.indices, a.data, a.shape)
    assert c.nnz * 64 >= ksparse.PARALLEL_WORK
    np.testing.assert_allclose(dj.matmul(c, dj.tensor(b)).numpy(), a @ b, rtol=1e-12, atol=1e-12)
    x = rng.standard_normal(200)
    np.testing.assert_allclose((c @ dj.tensor(x)).numpy(), a @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((c + c).to_dense().numpy(), (a + a).toarray())


# -- autograd -------------------------------------------------------------------------------------------
def _csr_parts(rng, rows, cols, density):
    a = _random_dense(rng, rows, cols, density)
    c = dj.tensor(a).to_sparse_csr()
    return c.crow_indices(), c.col_indices(), c.values().numpy().copy(), (rows, cols)


@pytest.mark.parametrize("dense_shape", [(4, 3), (4,)])
def test_gradcheck_dense_and_values(dense_shape):
    rng = np.random.default_rng(3)
    crow, col, vals, size = _csr_parts(rng, 3, 4, 0.5)
    v = dj.tensor(vals, dtype=dj.float64, requires_grad=True)
    d = dj.tensor(rng.standard_normal(dense_shape), dtype=dj.float64, requires_grad=True)

    def f(v, d):
        return dj.matmul(sparse_csr_tensor(crow, col, v, size), d)
    assert dj.autograd.gradcheck(f, (v, d))


def test_backward_accumulates_into_values_and_dense():
    rng = np.random.default_rng(4)
    a = _random_dense(rng, 5, 4, 0.5)
    b = rng.standard_normal((4, 2))
    c = dj.tensor(a).to_sparse_csr().requires_grad_()
    assert c.requires_grad and c.values().requires_grad
    bt = dj.tensor(b, requires_grad=True)
    (c @ bt).sum().backward()
    g = np.ones((5, 2))
    np.testing.assert_allclose(bt.grad.numpy(), a.T @ g)
    dense_grad = g @ b.T
    rows, cols = np.nonzero(a)
    np.testing.assert_allclose(c.values().grad.numpy(), dense_grad[rows, cols])
    assert isinstance(c.grad, SparseCsrTensor)
    np.testing.assert_allclose(c.grad.to_dense().numpy(), np.where(a != 0, dense_grad, 0))


def test_grad_only_dense_requires_grad_and_dense_matmul_unchanged(capsys):
    c = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr()
    b = dj.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (c @ b).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), [[1.0, 1.0], [2.0, 2.0]])
    # the dense path still records the ordinary MatmulBackward
    w = dj.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = w @ dj.tensor([[1.0], [1.0]])
    assert type(y.grad_fn).__name__ == "MatmulBackward"
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[1.0, 1.0], [1.0, 1.0]])


def test_other_ops_on_tracked_csr_are_rejected_not_silent():
    c = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr()
    d = dj.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with pytest.raises(ShapeError, match="only dj.matmul"):
        c * d


def test_zero_grad_and_no_grad():
    c = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse_csr().requires_grad_()
    (c @ dj.tensor([1.0, 1.0])).sum().backward()
    assert c.grad.values().tolist() == [1.0, 1.0]
    c.grad = None
    assert c.grad is None and c.values().grad is None
    with dj.no_grad():
        y = c @ dj.tensor([1.0, 1.0])
    assert not y.requires_grad and y.tolist() == [1.0, 2.0]
