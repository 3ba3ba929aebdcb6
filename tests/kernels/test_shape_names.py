"""PyTorch's view, shape, split, product and creation names (kernels/shape_views.py, shape_splits.py,
products.py, composite_creation.py, array_api/torch_linalg_products.py) against PyTorch: values,
dtypes and shapes, which results are views, gradients, errors, and where each name lives (function,
Tensor method, property)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.kernels import composite_creation, products, shape_splits, shape_views

torch = pytest.importorskip("torch")

R = np.random.default_rng(0)
M23 = R.standard_normal((2, 3))
M234 = R.standard_normal((2, 3, 4))
V3 = R.standard_normal(3)
I23 = np.arange(6, dtype=np.int64).reshape(2, 3)


def _both(*arrays):
    return [dj.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


# name, call (with `m` the module: dj or torch, and the inputs), inputs
CASES = [
    ("movedim", lambda m, x: m.movedim(x, (0, 2), (2, 0)), [M234]),
    ("moveaxis", lambda m, x: x.moveaxis(-1, 0), [M234]),
    ("swapaxes", lambda m, x: m.swapaxes(x, 0, 2), [M234]),
    ("swapdims", lambda m, x: x.swapdims(1, -1), [M234]),
    ("adjoint", lambda m, x: m.adjoint(x), [M234]),
    ("select", lambda m, x: m.select(x, 1, -1), [M234]),
    ("unbind", lambda m, x: m.unbind(x, 1), [M23]),
    ("view_as", lambda m, x, y: x.view_as(y), [I23, np.zeros((3, 2))]),
    ("reshape_as", lambda m, x, y: x.t().reshape_as(y), [I23, np.zeros(6)]),
    ("expand_as", lambda m, x, y: x.expand_as(y), [V3, np.zeros((2, 3))]),
    ("broadcast_to", lambda m, x: m.broadcast_to(x, (2, 3)), [V3]),
    ("broadcast_tensors", lambda m, x, y: m.broadcast_tensors(x, y), [V3, np.zeros((2, 1))]),
    ("ravel", lambda m, x: m.ravel(x.t()), [M23]),
    ("unflatten", lambda m, x: m.unflatten(x, -1, (2, -1)), [M234]),
    ("atleast_1d", lambda m, x, y: m.atleast_1d(x, y), [np.float64(2.0), V3]),
    ("atleast_2d", lambda m, x: m.atleast_2d(x), [V3]),
    ("atleast_3d", lambda m, x, y: m.atleast_3d([x, y]), [V3, M23]),
    ("fliplr", lambda m, x: m.fliplr(x), [M23]),
    ("flipud", lambda m, x: m.flipud(x), [M23]),
    ("rot90", lambda m, x: [m.rot90(x, k, (2, 0)) for k in (-1, 0, 1, 2, 3, 5)], [M234]),
    ("tile", lambda m, x: m.tile(x, (2, 1, 2)), [I23]),
    ("msort", lambda m, x: m.msort(x), [M23]),
    ("split_with_sizes", lambda m, x: m.split_with_sizes(x, [1, 3], 2), [M234]),
    ("tensor_split", lambda m, x: [m.tensor_split(x, 3), m.tensor_split(x, [1, -1, 2], 2),
                                   m.tensor_split(x, m.tensor(2), 1)], [M234]),
    ("hsplit", lambda m, x: m.hsplit(x, 3), [M23]),
    ("vsplit", lambda m, x: m.vsplit(x, [1]), [M23]),
    ("dsplit", lambda m, x: m.dsplit(x, 2), [M234]),
    ("unsafe_chunk", lambda m, x: m.unsafe_chunk(x, 2, 2), [M234]),
    ("hstack", lambda m, x, y: m.hstack([x, y]), [M23, I23]),
    ("vstack", lambda m, x, y: m.vstack([x, y]), [V3, M23]),
    ("dstack", lambda m, x, y: m.dstack([x, y]), [M23, M23]),
    ("column_stack", lambda m, x, y: m.column_stack([x, y]), [np.arange(2.0), M23]),
    ("select_scatter", lambda m, x, y: m.select_scatter(x, y, 1, 0), [M23, np.ones(2)]),
    ("slice_scatter", lambda m, x, y: m.slice_scatter(x, y, 2, 1, None, 2), [M234, np.ones((2, 3, 2))]),
    ("diagonal_scatter", lambda m, x, y: m.diagonal_scatter(x, y, -1, 2, 0), [M234, R.standard_normal((3, 2))]),
    ("diag_embed", lambda m, x: [m.diag_embed(x, k, 0, 2) for k in (-1, 0, 2)], [M23]),
    ("diagflat", lambda m, x: m.diagflat(x, -1), [I23]),
    ("unfold_copy", lambda m, x: m.unfold_copy(x, 2, 2, 1), [M234]),
    ("unfold", lambda m, x: x.unfold(0, 2, 1), [I23]),
    ("mv", lambda m, x, y: m.mv(x, y), [M23, V3]),
    ("vdot", lambda m, x, y: m.vdot(x, y), [V3, V3[::-1].copy()]),
    ("inner", lambda m, x, y: m.inner(x, y), [M234, M234[0]]),
    ("tensordot", lambda m, x, y: [m.tensordot(x, y, ([0, 1], [1, 0])), m.tensordot(x, y, 0)], [M23, M23.T.copy()]),
    ("kron", lambda m, x, y: m.kron(x, y), [I23, np.arange(2)]),
    ("trace", lambda m, x: m.trace(x), [I23]),
    ("addr", lambda m, x, y, z: m.addr(x, y, z, beta=2, alpha=0.5), [M23, np.arange(2.0), V3]),
    ("addbmm", lambda m, x, y, z: m.addbmm(x, y, z, beta=0), [M23, M234[:, :2], M234.transpose(0, 2, 1)[:, :, :3]]),
    ("addcmul", lambda m, x, y, z: m.addcmul(x, y, z, value=-2), [M23, V3, M23]),
    ("addcdiv", lambda m, x, y, z: m.addcdiv(x, y, z, value=0.5), [M23, V3, M23 + 3]),
    ("dist", lambda m, x, y: [m.dist(x, y), m.dist(x, y, 1), m.dist(x, y, float("inf"))], [M23, V3]),
    ("cdist", lambda m, x, y: [m.cdist(x, y), m.cdist(x, y, 1.0)], [M234, M234[:, :2]]),
    ("cdist by matmul", lambda m, x, y: [m.cdist(x, y), m.cdist(x[:3], y[:3], compute_mode="use_mm_for_euclid_dist")],
     [R.standard_normal((30, 3)), R.standard_normal((27, 3))]),
    ("cartesian_prod", lambda m, x, y: m.cartesian_prod(x, y), [V3, np.arange(2.0)]),
    ("combinations", lambda m, x: [m.combinations(x), m.combinations(x, 3, True), m.combinations(x, 0)], [V3]),
    ("meshgrid", lambda m, x, y: [m.meshgrid(x, y, indexing="xy"), m.meshgrid([x, y], indexing="ij")],
     [V3, np.arange(2.0)]),
    ("block_diag", lambda m, x, y, z: m.block_diag(x, y, z), [I23, V3, np.float64(7.0)]),
    ("expand_copy", lambda m, x: m.expand_copy(x, (2, 3)), [V3]),
    ("permute_copy", lambda m, x: m.permute_copy(x, (2, 0, 1)), [M234]),
    ("view_copy", lambda m, x: m.view_copy(x, (3, 2)), [M23]),
    ("t_copy", lambda m, x: m.t_copy(x), [M23]),
    ("transpose_copy", lambda m, x: m.transpose_copy(x, 0, 2), [M234]),
    ("unsqueeze_copy", lambda m, x: m.unsqueeze_copy(x, -1), [M23]),
    ("squeeze_copy", lambda m, x: m.squeeze_copy(x[:, :1]), [M23]),
    ("narrow_copy", lambda m, x: x.narrow_copy(1, 1, 2), [M23]),
    ("diagonal_copy", lambda m, x: m.diagonal_copy(x, 1, 2, 0), [M234]),
    ("alias_copy", lambda m, x: m.alias_copy(x), [M23]),
    ("unbind_copy", lambda m, x: m.unbind_copy(x, 1), [M23]),
    ("split_with_sizes_copy", lambda m, x: m.split_with_sizes_copy(x, [2, 1], 1), [M23]),
    ("logspace", lambda m: [m.logspace(-1, 2, 7), m.logspace(0, 3, 4, base=2, dtype=m.int64),
                            m.logspace(m.tensor(1.0), 2, 1), m.logspace(2, 0, 0)], []),
    ("triu_indices", lambda m: [m.triu_indices(3, 4, -1), m.triu_indices(0, 2)], []),
    ("tril_indices", lambda m: [m.tril_indices(4, 3, 1, dtype=m.int32), m.tril_indices(2, 2, -5)], []),
    ("scalar_tensor", lambda m: [m.scalar_tensor(3), m.scalar_tensor(True), m.scalar_tensor(2.5, dtype=m.int64)], []),
    ("resolve_conj", lambda m, x: m.resolve_conj(x), [M23]),
    ("conj_physical", lambda m, x: [m.conj_physical(x), m.conj_physical(x + 1j)], [M23]),
    ("multi_dot", lambda m, x, y, z: [m.linalg.multi_dot([x, y, z]), m.linalg.multi_dot([z, x])], [V3, M23.T, M23]),
    ("vander", lambda m, x: [m.linalg.vander(x), m.linalg.vander(x.long(), N=4)], [V3]),
    ("H", lambda m, x: [x.H, x.mH], [M23]),
]


def _flat(r):
    if isinstance(r, (list, tuple)):
        return [y for x in r for y in _flat(x)]
    return [r]


@pytest.mark.parametrize("name,call,inputs", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, call, inputs):
    d, t = _both(*inputs)
    got, want = _flat(call(dj, *d)), _flat(call(torch, *t))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape), name
        assert g.dtype.name == str(w.dtype).split(".")[-1], name
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


def _shares(view, base) -> bool:
    """A write into ``base`` shows through ``view``."""
    before = view.numpy().copy()
    with dj.no_grad():
        base.add_(1)
    changed = not np.array_equal(view.numpy(), before)
    with dj.no_grad():
        base.sub_(1)
    return changed


VIEWS = {
    "movedim": lambda x: dj.movedim(x, 0, -1), "swapaxes": lambda x: x.swapaxes(0, 1),
    "select": lambda x: x.select(1, 2), "unbind": lambda x: dj.unbind(x)[1], "view_as": lambda x: x.view_as(x.t()),
    "expand_as": lambda x: x[:1].expand_as(x), "broadcast_to": lambda x: dj.broadcast_to(x[:, :1], (2, 5)),
    "broadcast_tensors": lambda x: dj.broadcast_tensors(x, dj.zeros(4, 1, 1))[0], "ravel": dj.ravel,
    "unflatten": lambda x: x.unflatten(1, (3, 1)), "atleast_3d": dj.atleast_3d, "adjoint": dj.adjoint,
    "H": lambda x: x.H, "mH": lambda x: x.mH, "tensor_split": lambda x: dj.tensor_split(x, [1], 1)[1],
    "hsplit": lambda x: dj.hsplit(x, 3)[2], "split_with_sizes": lambda x: x.split_with_sizes([1, 1])[1],
    "meshgrid": lambda x: dj.meshgrid(x[0], x[1], indexing="xy")[1], "resolve_neg": dj.resolve_neg,
}
COPIES = {
    "permute_copy": lambda x: dj.permute_copy(x, (1, 0)), "narrow_copy": lambda x: x.narrow_copy(1, 0, 2),
    "expand_copy": lambda x: dj.expand_copy(x, (2, 2, 3)), "alias_copy": dj.alias_copy, "tile": lambda x: x.tile(1),
    "unbind_copy": lambda x: dj.unbind_copy(x)[0], "fliplr": dj.fliplr, "unfold_copy": lambda x: dj.unfold_copy(x, 0, 1, 1),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_the_input_storage(name):
    x = dj.arange(6, dtype=dj.float64).reshape(2, 3)
    assert _shares(VIEWS[name](x), x)


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copies_do_not(name):
    x = dj.arange(6, dtype=dj.float64).reshape(2, 3)
    assert not _shares(COPIES[name](x), x)


GRADS = [
    ("select", lambda m, x: m.select(x, 1, 1)), ("movedim", lambda m, x: m.movedim(x, 0, 2)),
    ("tensor_split", lambda m, x: m.tensor_split(x, [1, 3], 2)[1]), ("unbind", lambda m, x: m.unbind(x, 2)[3]),
    ("diag_embed", lambda m, x: m.diag_embed(x, 1, 0, 3)),
    ("diagonal_scatter", lambda m, x: m.diagonal_scatter(x, x[0, :2].T * 2, 0, 0, 1)),
    ("select_scatter", lambda m, x: m.select_scatter(x, x[0] * 3, 0, 1)),
    ("slice_scatter", lambda m, x: m.slice_scatter(x, x[..., ::2] ** 2, 2, 0, None, 2)),
    ("rot90", lambda m, x: m.rot90(x, 1, (1, 2))), ("tile", lambda m, x: m.tile(x, (2, 1))),
    ("kron", lambda m, x: m.kron(x[0], x[1])), ("tensordot", lambda m, x: m.tensordot(x, x, ([1, 2], [1, 2]))),
    ("mv", lambda m, x: m.mv(x[0], x[1, 0])), ("addr", lambda m, x: m.addr(x[0], x[1, :, 0], x[0, 0], alpha=2)),
    ("addbmm", lambda m, x: m.addbmm(x[0, :, :2], x, x.transpose(1, 2)[:, :, :2], beta=3)),
    ("addcmul", lambda m, x: m.addcmul(x, x[0], x[1], value=3)),
    ("addcdiv", lambda m, x: m.addcdiv(x, x[0], x[1] + 5, value=3)),
    ("cdist", lambda m, x: m.cdist(x, x[:, :2] + 1)),
    # zero distances (x's rows against themselves): PyTorch's gradient there is 0, not NaN
    ("cdist zero", lambda m, x: m.cdist(x, x[:, :2])), ("cdist p=0.5", lambda m, x: m.cdist(x, x[:, :2], 0.5)),
    ("cdist by matmul", lambda m, x: m.cdist(x, x[:, :2] + 1, compute_mode="use_mm_for_euclid_dist")), ("dist", lambda m, x: m.dist(x[0], x[1], 3)),
    ("trace", lambda m, x: m.trace(x[1])), ("block_diag", lambda m, x: m.block_diag(x[0], x[1, 0])),
    ("cartesian_prod", lambda m, x: m.cartesian_prod(x[0, 0], x[1, 1])),
    ("unfold", lambda m, x: x.unfold(2, 2, 1)), ("vander", lambda m, x: m.linalg.vander(x[0, 0])),
    ("multi_dot", lambda m, x: m.linalg.multi_dot([x[0, 0], x[0].T, x[1]])),
]


@pytest.mark.parametrize("name,call", GRADS, ids=[g[0] for g in GRADS])
def test_gradients_match_torch(name, call):
    a = R.standard_normal((2, 3, 4))
    x, tx = dj.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = call(dj, x), call(torch, tx)
    w = R.standard_normal(tuple(ty.shape))
    (y * dj.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


ERRORS = [
    ("movedim", lambda m, x: m.movedim(x, (0, 1), 0), "movedim"),
    ("movedim repeated", lambda m, x: m.movedim(x, (0, 0), (1, 2)), "repeated dim"),
    ("select", lambda m, x: m.select(x, 0, 2), "out of range"),
    ("unflatten", lambda m, x: m.unflatten(x, 1, (2, 2)), "don't multiply up"),
    ("fliplr", lambda m, x: m.fliplr(x[0, 0]), "Input must be >= 2-d"),
    ("rot90", lambda m, x: m.rot90(x, 1, (0, 0)), "rotation dims to be different"),
    ("hsplit", lambda m, x: m.hsplit(x, 2), "not divisible by the split_size 2"),
    ("vsplit", lambda m, x: m.vsplit(x[0, 0], 1), "at least 2 dimension"),
    ("tensor_split 0-d", lambda m, x: m.tensor_split(x[0, 0, 0], 2), "at least a 1-dimensional"),
    ("tensor_split sections", lambda m, x: m.tensor_split(x, 0), "larger than 0"),
    ("split_with_sizes", lambda m, x: m.split_with_sizes(x, [1, 2]), "sum exactly to 2"),
    ("select_scatter", lambda m, x: m.select_scatter(x, x, 0, 0), "src"),
    ("diag_embed", lambda m, x: m.diag_embed(x, 0, 1, 1), "cannot be identical"),
    ("mv", lambda m, x: m.mv(x[0], x[0, 0, :3]), "size mismatch"),
    ("vdot", lambda m, x: m.vdot(x[0], x[0, 0]), "1D tensors expected"),
    ("tensordot", lambda m, x: m.tensordot(x, x[0], ([2], [0])), "contracted dimensions need to match"),
    ("trace", lambda m, x: m.trace(x), "matrix"),
    ("addcdiv", lambda m, x: m.addcdiv(x, x.long(), x.long()), "Integer division with addcdiv"),
    ("cdist", lambda m, x: m.cdist(x, x[..., :2]), "same number of columns"),
    ("combinations", lambda m, x: m.combinations(x), "1D vector"),
    ("meshgrid", lambda m, x: m.meshgrid(x, indexing="yx"), "indexing must be one of"),
    ("block_diag", lambda m, x: m.block_diag(x), "2 or fewer dimensions"),
    ("multi_dot", lambda m, x: m.linalg.multi_dot([x[0]]), "at least 2 tensors"),
    ("vander", lambda m, x: m.linalg.vander(x[0, 0], N=1), "N must be greater than 1"),
    ("H", lambda m, x: x.H, "only supported on matrices"),
    ("empty_strided", lambda m, x: m.empty_strided((2, 3), (1,)), "dimensionality of sizes"),
    ("empty_permuted", lambda m, x: m.empty_permuted((2, 3), (0, 0)), "Duplicate dim"),
]


@pytest.mark.parametrize("name,call,fragment", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_where_torch_raises_and_say_what(name, call, fragment):
    a = R.standard_normal((2, 3, 4))
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError)):
        call(torch, torch.tensor(a))
    with pytest.raises(dj.errors.DispatchJitError, match=fragment):
        call(dj, dj.tensor(a))


def test_unfold_is_a_read_only_copy():
    """PyTorch's Tensor.unfold is an overlapping view no view op here expresses: a write into the
    copy would be lost, so it raises."""
    y = dj.arange(4).unfold(0, 2, 1)
    with pytest.raises(dj.errors.ShapeError, match="read-only"):
        y[0, 0] = 7


def test_meshgrid_without_indexing_warns_as_torch():
    with pytest.warns(UserWarning, match="indexing argument"):
        a, _ = dj.meshgrid(dj.arange(2), dj.arange(3))
    assert a.shape == (2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dj.meshgrid(dj.arange(2), indexing="ij")


@pytest.mark.parametrize("make", [
    lambda m: m.empty_strided((2, 3, 0), (1, 2, 5)), lambda m: m.empty_strided((2, 3), (3, 1), dtype=m.int64),
    lambda m: m.empty_strided((4, 2), (0, 1)), lambda m: m.empty_permuted((2, 3, 4), (2, 0, 1)),
    lambda m: m.ones(2, dtype=m.float64).new_empty_strided((3, 2), (1, 3)),
])
def test_uninitialized_tensors_have_torchs_shape_strides_and_dtype(make):
    got, want = make(dj), make(torch)
    assert (got.shape, got.stride(), got.dtype.name) == (tuple(want.shape), want.stride(), str(want.dtype)[6:])


def test_resolve_and_conj_physical_of_real_tensors_are_the_input():
    x = dj.arange(3.0)
    assert dj.resolve_conj(x) is x and x.resolve_neg() is x and dj.conj_physical(x) is x


def test_compiled_equals_eager_bit_for_bit():
    def f(x, y):
        a = dj.movedim(x, 0, 1).select(0, 1)
        b = dj.tensor_split(x, 2, 1)[0].tile((1, 2))
        c = dj.diag_embed(a, 1) + dj.kron(a[:1], a[:1])[0]
        return a * 2 + b[:, :3].sum(), c.unflatten(0, (1, -1)), dj.addcmul(x, y, x, value=0.5)

    x, y = dj.tensor(M23), dj.tensor(V3)
    eager = f(x, y)
    for got in (dj.compile(f)(x, y), dj.compile(f)(x, y)):
        for e, g in zip(eager, got):
            assert np.array_equal(e.numpy(), g.numpy())


def test_names_live_where_torch_has_them():
    names = set(shape_views.PY_FUNCTIONS) | set(shape_splits.PY_FUNCTIONS) | set(products.PY_FUNCTIONS) \
        | set(composite_creation.PY_FUNCTIONS) | set(shape_views.METHODS_ONLY) | set(shape_splits.METHODS_ONLY) \
        | set(composite_creation.METHODS_ONLY)
    for n in sorted(names):
        assert hasattr(dj, n) == hasattr(torch, n), f"dj.{n}: torch.{n} exists: {hasattr(torch, n)}"
        assert hasattr(dj.Tensor, n) == hasattr(torch.Tensor, n), f"Tensor.{n}: torch has it: " \
                                                                  f"{hasattr(torch.Tensor, n)}"
    for n in ("multi_dot", "vander"):
        assert callable(getattr(dj.linalg, n))


DOCUMENTED = {**{n: f for n, f in {**shape_views.METHODS_ONLY, **shape_splits.METHODS_ONLY,
                                   **composite_creation.METHODS_ONLY}.items() if not isinstance(f, property)},
              "H": shape_views._h, "multi_dot": dj.linalg.multi_dot, "vander": dj.linalg.vander}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_method_and_linalg_docstring_examples_run(name):
    """tests/test_op_docstrings.py runs the dj.<name> functions' examples; these are Tensor-only
    methods and dj.linalg's."""
    import doctest
    fn = DOCUMENTED[name]
    test = doctest.DocTestParser().get_doctest(fn.__doc__, {"dj": dj}, name, None, 0)
    assert test.examples, f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{name}'s docstring example failed"
