"""Sparse COO tensors: construction and validation, coalescing, conversions, the SparseCPU kernels
against PyTorch (the oracle) and dense NumPy, dispatch, gradients, printing."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dispatch_jit as dj
from dispatch_jit.errors import ShapeError, SparseLayoutError
from dispatch_jit.sparse_coo import SparseCooTensor

torch = pytest.importorskip("torch")
# torch's one-time note about its own invariant checks, for the oracle tensors
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")


@st.composite
def coo_cases(draw):
    """(indices, values, size) with repeats and any order: an uncoalesced tensor in general."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    nnz = draw(st.integers(0, 8))
    idx = [[draw(st.integers(0, s - 1)) for _ in range(nnz)] for s in shape]
    vals = [float(draw(st.integers(-4, 4))) for _ in range(nnz)]
    return np.array(idx, dtype=np.int64).reshape(len(shape), nnz), np.array(vals), shape


def _pair(idx, vals, shape, dtype=np.float64):
    a = dj.sparse_coo_tensor(idx, dj.tensor(vals.astype(dtype)), shape)
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals.astype(dtype)), shape, check_invariants=True)
    return a, t


def _same(a, t, pattern=True):
    """dj result equals torch's: layout, shape, and values bit for bit (with ``pattern``, the
    coalesced positions too; torch's COO * COO may keep explicit zeros that dj's drops)."""
    if t.layout == torch.sparse_coo:
        assert isinstance(a, SparseCooTensor) and a.shape == tuple(t.shape)
        tc, ac = t.coalesce(), a.coalesce()
        if pattern:
            np.testing.assert_array_equal(ac.indices().numpy(), tc.indices().numpy())
            np.testing.assert_array_equal(ac.values().numpy(), tc.values().numpy())
        np.testing.assert_array_equal(a.to_dense().numpy(), t.to_dense().numpy())
    else:
        np.testing.assert_array_equal(np.asarray(a.numpy()), t.numpy())


# -- construction, validation, components ---------------------------------------------------------------
def test_constructor_components_and_layout():
    a = dj.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    assert a.layout == dj.sparse_coo and a.is_sparse and a.shape == (2, 3) and a._nnz() == 3
    assert a.dtype is dj.float32 and a.is_coalesced() and a.sparse_dim() == 2 and a.dense_dim() == 0
    assert a.indices().tolist() == [[0, 1, 1], [2, 0, 2]] and a.values().tolist() == [3.0, 4.0, 5.0]
    assert a.to_dense().tolist() == [[0.0, 0.0, 3.0], [4.0, 0.0, 5.0]]
    # size inferred as torch's
    assert dj.sparse_coo_tensor([[0, 3], [1, 0]], [1, 2]).shape == (4, 2)
    assert dj.sparse_coo_tensor([[0, 3]], [1, 2]).dtype is dj.int64
    assert dj.sparse_coo_tensor([[0]], [1], (2,), dtype=dj.float64).dtype is dj.float64


@pytest.mark.parametrize("idx,vals,size,err,match", [
    ([[0, 5]], [1.0, 2.0], (3,), ValueError, "size is inconsistent with indices: for dim 0, size is 3 but found index 5"),
    ([[0, -1]], [1.0, 2.0], (3,), ValueError, "found negative index -1 for dim 0"),
    ([[0, 1]], [1.0, 2.0, 3.0], (3,), ValueError, "must have same nnz, but got nnz from indices: 2, nnz from values: 3"),
    ([[0, 1]], [1.0, 2.0], (3, 4), ValueError, "len\\(size\\) == sparse_dim \\+ dense_dim"),
    ([0, 1], [1.0, 2.0], None, ValueError, "indices must be sparse_dim x nnz, but got: \\[2\\]"),
    ([[0.5, 1.0]], [1.0, 2.0], None, TypeError, "indices must be an int64 tensor"),
    ([[0, 1]], [[1.0], [2.0]], None, ValueError, "hybrid"),
])
def test_invalid_arguments_raise_clearly(idx, vals, size, err, match):
    with pytest.raises(err, match=match):
        dj.sparse_coo_tensor(np.asarray(idx), vals, size)


def test_uncoalesced_indices_and_values_raise_as_torch():
    a = dj.sparse_coo_tensor([[1, 0, 1]], [1.0, 2.0, 3.0], (2,))
    assert not a.is_coalesced()
    with pytest.raises(SparseLayoutError, match="Cannot get indices on an uncoalesced tensor"):
        a.indices()
    with pytest.raises(SparseLayoutError, match="Cannot get values on an uncoalesced tensor"):
        a.values()
    assert a._indices().tolist() == [[1, 0, 1]] and a._values().tolist() == [1.0, 2.0, 3.0]
    c = a.coalesce()
    assert c.is_coalesced() and c.indices().tolist() == [[0, 1]] and c.values().tolist() == [2.0, 4.0]
    assert a.to_dense().tolist() == [2.0, 4.0]       # duplicates add up


@settings(max_examples=40, deadline=None)
@given(coo_cases())
def test_coalesce_and_to_dense_match_torch(case):
    idx, vals, shape = case
    a, t = _pair(idx, vals, shape)
    _same(a.coalesce(), t.coalesce())
    _same(a.to_dense(), t.to_dense())
    assert a.coalesce().is_coalesced()


def test_dense_style_access_says_to_convert():
    a = dj.tensor([[0.0, 1.0]]).to_sparse()
    for f in (lambda: a.numpy(), lambda: a[0], lambda: a.tolist(), lambda: list(a), lambda: a.strides):
        with pytest.raises(SparseLayoutError, match="to_dense"):
            f()


def test_repr_matches_torch():
    d = [[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]]
    for dt, tdt in ((dj.float32, torch.float32), (dj.float64, torch.float64)):
        a, t = dj.tensor(d, dtype=dt).to_sparse(), torch.tensor(d, dtype=tdt).to_sparse()
        assert repr(a) == repr(t).replace("torch.", "dj.")
    e = dj.sparse_coo_tensor(np.zeros((2, 0), dtype=np.int64), dj.zeros(0), (2, 2))
    assert repr(e) == repr(torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (2, 2),
                                                   check_invariants=True)).replace("torch.", "dj.")


# -- conversions ----------------------------------------------------------------------------------------
def test_to_sparse_and_csr_round_trips():
    d = np.array([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0], [0.0, 0.0, 0.0]])
    a = dj.tensor(d).to_sparse()
    _same(a, torch.tensor(d).to_sparse())
    assert a.to_sparse() is a and a.to_sparse_coo() is a and dj.tensor(d).to_sparse_coo().is_coalesced()
    c = a.to_sparse_csr()
    assert c.layout == dj.sparse_csr and c.crow_indices().tolist() == [0, 1, 3, 3]
    assert c.col_indices().tolist() == [1, 0, 2]
    back = c.to_sparse()
    assert back.layout == dj.sparse_coo and back.is_coalesced() and c.to_sparse_coo().shape == (3, 3)
    np.testing.assert_array_equal(back.to_dense().numpy(), d)
    # an uncoalesced COO converts through coalesce
    u = dj.sparse_coo_tensor([[2, 0, 2], [1, 1, 1]], [1.0, 2.0, 3.0], (3, 2))
    np.testing.assert_array_equal(u.to_sparse_csr().to_dense().numpy(), [[0.0, 2.0], [0.0, 0.0], [0.0, 4.0]])
    with pytest.raises(SparseLayoutError, match="hybrid"):
        dj.tensor(d).to_sparse(1)
    with pytest.raises(ShapeError, match="2-D"):
        dj.tensor([1.0, 0.0]).to_sparse().to_sparse_csr()


# -- dispatch ----------------------------------------------------------------------------------------------
def test_keys_dispatch_trace_and_unsupported_op(capsys):
    a = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse()
    assert dj.dispatch_keys(a) == dj.DispatchKeySet(dj.DispatchKey.SparseCPU)
    assert dj.DispatchKey.CPU < dj.DispatchKey.SparseCPU < dj.DispatchKey.SparseCsrCPU
    with dj.show_dispatch_trace():
        dj.matmul(a, dj.tensor([[1.0], [1.0]]))
    assert "[call] op=[aten::matmul], key=[SparseCPU]" in capsys.readouterr().out
    a.requires_grad_()
    assert dj.dispatch_keys(a) == dj.DispatchKeySet([dj.DispatchKey.SparseCPU, dj.DispatchKey.AutogradCPU])
    with pytest.raises(dj.errors.NoKernelError, match="'SparseCPU' backend") as e:
        dj.exp(a.detach())
    assert ("The sparse COO layout has kernels only for: aten::add.Tensor, aten::matmul, aten::mul.Tensor, "
            "aten::sum, aten::t, aten::to_dense; convert with .to_dense() first") in str(e.value)
    with pytest.raises(dj.errors.NoKernelError, match="The sparse CSR layout has kernels only for: .*aten::matmul"):
        dj.exp(a.detach().to_sparse_csr())
    for op in ("matmul", "add.Tensor", "mul.Tensor", "sum", "to_dense", "t"):
        assert dj.has_kernel(f"aten::{op}", "SparseCPU")


def test_dense_signatures_unchanged_by_the_key():
    # AutogradCPU is bit 13 and the key set starts at bit 16 of a signature: a dense CPU tensor that
    # requires grad has a one-digit signature
    assert dj.DispatchKey.AutogradCPU == 13 and dj.DispatchKey.Undefined not in dj.DispatchKeySet(dj.DispatchKey.Meta)
    assert dj.tensor([1.0], requires_grad=True)._sig < 2 ** 30
    assert dj.DispatchKeySet(0).highest() is dj.DispatchKey.Undefined
    assert dj.DispatchKeySet(dj.DispatchKey.Meta).highest() is dj.DispatchKey.Meta


def test_unsupported_combinations_are_clear():
    a = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse()
    d = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match=r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\)"):
        a + d
    with pytest.raises(TypeError, match="COO @ COO"):
        a @ a
    with pytest.raises(ShapeError, match="cannot multiply"):
        a @ dj.tensor([[1.0, 2.0, 3.0]])
    with pytest.raises(ShapeError, match="same size"):
        a + dj.tensor([[1.0, 0.0, 3.0]]).to_sparse()
    with pytest.raises(ShapeError, match="does not broadcast"):
        a * dj.ones(3)
    with pytest.raises(ShapeError, match="<= 2 dimensions"):
        dj.zeros(1, 1, 1).to_sparse().t()


# -- the ops against torch --------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(coo_cases(), st.integers(0, 2 ** 16))
def test_add_mul_sum_match_torch(case, seed):
    idx, vals, shape = case
    rng = np.random.default_rng(seed)
    a, t = _pair(idx, vals, shape)
    idx2 = np.stack([rng.integers(0, s, 3) for s in shape])
    vals2 = rng.integers(-3, 4, 3).astype(np.float64)
    b, u = _pair(idx2, vals2, shape)
    dense = rng.integers(-3, 4, shape).astype(np.float64)
    _same(a + b, t + u)
    _same(dj.add(a, b, alpha=2), torch.add(t, u, alpha=2))
    _same(dj.tensor(dense) + a, torch.tensor(dense) + t)
    _same(a * 3, t * 3)
    _same(a * dj.tensor(2.0, dtype=dj.float64), t * torch.tensor(2.0, dtype=torch.float64))
    _same(a * b, t * u, pattern=False)
    _same(a * dj.tensor(dense), t * torch.tensor(dense))
    _same(dj.sparse.sum(a), torch.sparse.sum(t))
    for dim in range(len(shape)):
        _same(dj.sparse.sum(a, dim), torch.sparse.sum(t, dim))
        _same(a.sum(dim), t.sum(dim))
    _same(dj.sparse.sum(a, tuple(range(len(shape)))), torch.sparse.sum(t, tuple(range(len(shape)))))


def test_integer_dtypes_and_sum_dtype():
    a = dj.sparse_coo_tensor([[0, 1, 1]], dj.tensor([1, 2, 3], dtype=dj.int32), (2,))
    t = torch.sparse_coo_tensor([[0, 1, 1]], torch.tensor([1, 2, 3], dtype=torch.int32), (2,), check_invariants=True)
    assert (a * 2).dtype is dj.int32 and (a * 2.5).dtype is dj.float32
    _same(a * 2.5, t * 2.5)
    assert dj.sparse.sum(a).dtype is dj.int64 and dj.sparse.sum(a).item() == 6
    assert dj.sparse.sum(a, dtype=dj.float64).dtype is dj.float64
    _same(dj.sparse.sum(a.to(dj.float32), dtype=dj.float64), torch.sparse.sum(t.float(), dtype=torch.float64))


def test_t_matches_torch():
    a, t = _pair(np.array([[0, 1, 1], [2, 0, 2]]), np.array([3.0, 4.0, 5.0]), (2, 3))
    assert not a.t().is_coalesced() and a.t().shape == (3, 2)
    _same(a.t(), t.t())
    _same(dj.t(a), t.t())


# -- the product ---------------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 6), st.integers(1, 6), st.integers(0, 4), st.integers(0, 10), st.integers(0, 2 ** 16))
def test_matmul_matches_torch(rows, cols, n, nnz, seed):
    rng = np.random.default_rng(seed)
    if rows == 0:
        nnz = 0
    idx = np.stack([rng.integers(0, max(rows, 1), nnz), rng.integers(0, cols, nnz)])   # repeats, any order
    vals = rng.integers(-3, 4, nnz).astype(np.float64)
    a, t = _pair(idx, vals, (rows, cols))
    b = rng.integers(-3, 4, (cols, n)).astype(np.float64)
    x = rng.integers(-3, 4, cols).astype(np.float64)
    left = rng.integers(-3, 4, (n, rows)).astype(np.float64)
    _same(dj.matmul(a, dj.tensor(b)), torch.sparse.mm(t, torch.tensor(b)))
    _same(dj.sparse.mm(a, dj.tensor(b)), torch.sparse.mm(t, torch.tensor(b)))
    _same(a @ dj.tensor(x), t @ torch.tensor(x))
    _same(dj.tensor(left) @ a, torch.tensor(left) @ t)


def test_parallel_path_matches_dense():
    # nnz * columns crosses cpu.PARALLEL_WORK: the prange row loop
    rng = np.random.default_rng(0)
    rows, cols, nnz, n = 300, 200, 2000, 32
    idx = np.stack([rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)])
    vals = rng.standard_normal(nnz)
    a, t = _pair(idx, vals, (rows, cols))
    b = rng.standard_normal((cols, n))
    np.testing.assert_allclose(dj.sparse.mm(a, dj.tensor(b)).numpy(), torch.sparse.mm(t, torch.tensor(b)).numpy(),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dense_shape", [(4, 3), (4,)])
@pytest.mark.parametrize("coalesced", [True, False])
def test_gradcheck_values_and_dense(dense_shape, coalesced):
    idx = np.array([[0, 2, 1, 2], [1, 0, 3, 1]]) if coalesced else np.array([[2, 0, 2, 1, 2], [1, 1, 1, 3, 0]])
    rng = np.random.default_rng(3)
    v = dj.tensor(rng.standard_normal(idx.shape[1]), requires_grad=True)
    d = dj.tensor(rng.standard_normal(dense_shape), requires_grad=True)

    def f(v, d):
        return dj.sparse.mm(dj.sparse_coo_tensor(idx, v, (3, 4)), d) if len(dense_shape) == 2 else \
            dj.matmul(dj.sparse_coo_tensor(idx, v, (3, 4)), d)
    assert dj.autograd.gradcheck(f, (v, d))


def test_backward_matches_torch_sparse_mm():
    idx = np.array([[2, 0, 2, 1], [1, 1, 1, 3]])
    vals = np.array([1.0, -2.0, 3.0, 0.5])
    b = np.arange(8.0).reshape(4, 2)
    a = dj.sparse_coo_tensor(idx, vals, (3, 4), requires_grad=True)
    bt = dj.tensor(b, requires_grad=True)
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals), (3, 4)).coalesce().requires_grad_()
    tb = torch.tensor(b, requires_grad=True)
    (dj.sparse.mm(a, bt) ** 2).sum().backward()
    (torch.sparse.mm(t, tb) ** 2).sum().backward()
    np.testing.assert_allclose(bt.grad.numpy(), tb.grad.numpy(), rtol=1e-12)
    assert isinstance(a.grad, SparseCooTensor) and a.grad.shape == (3, 4)
    # each (repeated) entry's gradient is the coalesced entry's: d(sum of duplicates)/d(one of them) = 1
    tg = t.grad.to_dense().numpy()
    np.testing.assert_allclose(a._values().grad.numpy(), tg[idx[0], idx[1]], rtol=1e-12)
    # dense @ COO is differentiable too
    bt.grad = None
    (dj.tensor(b.T, requires_grad=False) @ a.t()).sum().backward()
    assert a.grad is not None


def test_other_ops_on_tracked_coo_are_rejected_not_silent():
    a = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse()
    d = dj.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with pytest.raises(SparseLayoutError, match="only dj.sparse.mm"):
        a * d


def test_zero_grad_and_no_grad():
    a = dj.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse().requires_grad_()
    (a @ dj.tensor([1.0, 1.0])).sum().backward()
    assert a.grad.values().tolist() == [1.0, 1.0]
    a.grad = None
    assert a.grad is None and a.values().grad is None
    with dj.no_grad():
        y = a @ dj.tensor([1.0, 1.0])
    assert not y.requires_grad


def test_save_of_a_sparse_tensor_is_an_error_not_its_values(tmp_path):
    # dj.save does not know the sparse layouts: it raises rather than write the values alone
    for t in (dj.tensor([[0.0, 1.0]]).to_sparse(), dj.tensor([[0.0, 1.0]]).to_sparse_csr()):
        with pytest.raises(SparseLayoutError, match="cannot be saved; save t.to_dense()"):
            dj.save({"w": t}, tmp_path / "t.pt")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_every_op_per_dtype_matches_torch(dtype):
    idx = np.array([[0, 2, 1, 2], [1, 0, 3, 1]])
    vals = np.array([1, -2, 3, 4], dtype=dtype)
    a, t = _pair(idx, vals, (3, 4), dtype)
    b, u = _pair(np.array([[2, 1], [1, 1]]), np.array([5, 6], dtype=dtype), (3, 4), dtype)
    dense = np.arange(12, dtype=dtype).reshape(3, 4)
    rhs = np.arange(8, dtype=dtype).reshape(4, 2)
    _same(a.coalesce(), t.coalesce())
    _same(a.to_dense(), t.to_dense())
    _same(a + b, t + u)
    _same(dj.tensor(dense) + a, torch.tensor(dense) + t)
    _same(a * 3, t * 3)
    _same(a * b, t * u, pattern=False)
    _same(a * dj.tensor(dense), t * torch.tensor(dense))
    _same(dj.sparse.sum(a), torch.sparse.sum(t))
    _same(dj.sparse.sum(a, 1), torch.sparse.sum(t, 1))
    _same(a.t(), t.t())
    if dtype.startswith("float"):        # torch.sparse.mm has no integer kernel
        _same(dj.sparse.mm(a, dj.tensor(rhs)), torch.sparse.mm(t, torch.tensor(rhs)))
    else:
        np.testing.assert_array_equal(dj.sparse.mm(a, dj.tensor(rhs)).numpy(), t.to_dense().numpy() @ rhs)
    assert (a + b).dtype.name == dtype and dj.sparse.mm(a, dj.tensor(rhs)).dtype.name == dtype


@pytest.mark.parametrize("fn", [
    lambda x, y: dj.sparse.mm(x.to_sparse(), y) + 1,
    lambda x, y: (x.to_sparse_csr() @ y) + 1,
    lambda x, y: dj.sparse_coo_tensor([[0, 1]], x[0], (2,)).to_dense() * y[0],
], ids=["to_sparse", "to_sparse_csr", "constructor"])
def test_conversions_inside_compile_read_real_data(fn):
    # a traced tensor's data is a placeholder: the conversions read it through the guarded
    # numpy()/shape, so the call runs eagerly instead of converting the placeholder
    f = dj.compile(fn)
    d = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    for x in (dj.tensor([[0.0, 1.0], [2.0, 0.0]]), dj.tensor([[5.0, 0.0], [0.0, 3.0]])):
        np.testing.assert_array_equal(f(x, d).numpy(), fn(x, d).numpy())


def test_matmul_dtype_rules_as_dense():
    a = dj.tensor([[0.0, 1.5], [2.0, 0.0]]).to_sparse()
    # float16: float32 sums rounded once (Numba has no float16 arithmetic)
    h = a.to(dj.float16) @ dj.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=dj.float16)
    assert h.dtype is dj.float16 and h.tolist() == [[4.5, 6.0], [2.0, 4.0]]
    with pytest.raises(TypeError, match="dtype uint16 is not supported"):
        a.to(dj.uint16) @ dj.ones(2, 2, dtype=dj.uint16)
    with pytest.raises(ShapeError, match="sparse.mm: expected two 2-D matrices"):
        dj.sparse.mm(a, dj.ones(2))
    assert (a @ dj.ones(2, dtype=dj.float64)).dtype is dj.float64       # promotion, as dense matmul


def test_torch_signatures_is_sparse_and_to_sparse_layout():
    x = dj.tensor([[0.0, 1.0], [2.0, 0.0]])
    assert (x.is_sparse, x.to_sparse().is_sparse, x.to_sparse_csr().is_sparse) == (False, True, False)
    assert x.to_sparse(layout=dj.sparse_csr).layout == dj.sparse_csr
    assert x.to_sparse(layout=dj.sparse_coo).layout == dj.sparse_coo
    assert x.to_sparse().to_sparse(layout=dj.sparse_csr).crow_indices().tolist() == [0, 1, 2]
    with pytest.raises(SparseLayoutError, match="blocksize"):
        x.to_sparse(layout=dj.sparse_csr, blocksize=(1, 1))
    a = dj.sparse_coo_tensor([[1, 0]], [1.0, 2.0], (2,), pin_memory=False, check_invariants=False, is_coalesced=None)
    assert not a.is_coalesced()
    with pytest.raises(ValueError, match="is_coalesced=True, but the indices are not sorted"):
        dj.sparse_coo_tensor([[1, 0]], [1.0, 2.0], (2,), check_invariants=True, is_coalesced=True)
    with pytest.raises(ValueError, match="pin_memory"):
        dj.sparse_coo_tensor([[1, 0]], [1.0, 2.0], (2,), pin_memory=True)


def test_zero_dim_to_sparse_as_torch():
    torch = pytest.importorskip("torch")
    for v in (2.0, 0.0):
        got, want = dj.tensor(v).to_sparse(), torch.tensor(v).to_sparse()
        assert got.shape == tuple(want.shape) and got._nnz() == want._nnz()
        assert tuple(got._indices().shape) == tuple(want._indices().shape)
        assert got._values().numpy().tolist() == want._values().tolist()
        assert got.to_dense().item() == v


def test_compiled_to_dense_of_a_sparse_argument_runs_the_conversion():
    # the trace sees a sparse argument as a shape and dtype: to_dense must be recorded (and run on
    # the real argument), not taken for a dense tensor's identity
    fn = lambda x: x.to_dense() * 2 + 1      # noqa: E731
    f = dj.compile(fn)
    a = dj.sparse_coo_tensor([[1, 0, 1], [2, 1, 2]], [1.0, 2.0, 3.0], (2, 3))
    for arg in (a, a.to_sparse_csr(), a.to_dense()):
        got = f(arg)
        assert type(got) is dj.Tensor and got.numpy().tolist() == fn(arg).numpy().tolist()
