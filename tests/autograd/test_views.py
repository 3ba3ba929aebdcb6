"""In-place ops on views (autograd/views.py): the tensor owning the storage
gets the history (CopySlices), whether or not it required grad before, and
the view becomes a view of that history (AsStridedBackward), as in PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None


def _mk(M):
    return lambda v: M.tensor(v, dtype=M.float64, requires_grad=True)


def _name(node) -> str:
    """A grad_fn's class name, PyTorch's version suffix dropped (AsStridedBackward0 -> AsStridedBackward)."""
    return type(node).__name__.rstrip("0123456789") if node is not None else "None"


def _weights(M, n):
    """Distinct weights, so that a gradient landing on the wrong element shows."""
    return M.arange(1.0, n + 1.0, dtype=M.float64)


# -- the case of the issue, without torch ---------------------------------------------------------------
def test_in_place_add_of_a_grad_tensor_into_a_view_of_a_constant():
    base = dj.zeros(4)
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    v = base[1:3]
    assert not base.requires_grad and v.grad_fn is None
    v.add_(w)
    np.testing.assert_array_equal(base.numpy(), [0.0, 1.0, 2.0, 0.0])
    assert base.requires_grad and not base.is_leaf and repr(base.grad_fn) == "<CopySlices>"
    assert repr(v.grad_fn) == "<AsStridedBackward>" and v.grad_fn.next_functions == ((base.grad_fn, 0),)
    base.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])


def test_the_view_carries_the_new_history():
    base = dj.zeros(4, dtype=dj.float64)
    w = dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)
    v = base[1:3]
    v.add_(w)
    (v * v).sum().backward()              # through AsStridedBackward -> CopySlices -> AddBackward
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_in_place_ops_without_grad_operands_record_nothing():
    base = dj.zeros(4)
    v = base[1:3]
    v.add_(1.0)
    v[0] = 5.0
    assert not base.requires_grad and base.grad_fn is None and v.grad_fn is None
    np.testing.assert_array_equal(base.numpy(), [0.0, 5.0, 1.0, 0.0])


# -- against PyTorch: ops, view chains, the base's and the view's histories ----------------------------
def _add(M, v, w):
    v.add_(w)


def _mul(M, v, w):
    v.add_(1.0)
    v.mul_(w)


def _sub_scaled(M, v, w):
    v.sub_(w, alpha=2.0)


def _copy(M, v, w):
    v[...] = w                            # dispatch_jit has no copy_: assignment is its copy


def _copy_part(M, v, w):
    v[0] = w[1]


INPLACE = [("add_", _add), ("mul_", _mul), ("sub_ alpha", _sub_scaled), ("copy (v[...] = w)", _copy),
           ("item assignment into the view", _copy_part)]

# (name, shape of base, view chain, shape of w)
VIEWS = [
    ("slice", (4,), lambda b: b[1:3], (2,)),
    ("view of a view", (2, 3), lambda b: b.T[1:][:, 0], (2,)),
    ("reshape then slice", (2, 3), lambda b: b.reshape((6,))[1:5:2], (2,)),
    ("narrow of a 2-d row", (3, 3), lambda b: b[1].narrow(0, 1, 2), (2,)),
    ("0-d element", (2, 2), lambda b: b[1, 0], ()),
]


# every op on every view chain (a 0-d view has no element to assign into)
CASES = [(op_name, op, view_name, base_shape, view, w_shape)
         for op_name, op in INPLACE for view_name, base_shape, view, w_shape in VIEWS
         if not (op is _copy_part and not w_shape)]
CASE_IDS = [f"{c[0]} on {c[2]}" for c in CASES]


def _run_inplace_on_view(M, base_shape, view, op, w_shape):
    base = M.zeros(base_shape, dtype=M.float64)
    w = _mk(M)(np.arange(2.0, 2.0 + max(1, int(np.prod(w_shape)))).reshape(w_shape).tolist())
    v = view(base)
    op(M, v, w)
    history = (_name(base.grad_fn), _name(v.grad_fn), base.requires_grad, v.requires_grad)
    loss = (base * _weights(M, base.numel()).reshape(base_shape)).sum() + (v * v).sum()
    loss.backward()
    return history, base.detach().numpy().copy(), w.grad.numpy().copy()


@pytest.mark.parametrize("op_name, op, view_name, base_shape, view, w_shape", CASES, ids=CASE_IDS)
def test_in_place_on_a_view_of_a_constant_gives_the_base_history(op_name, op, view_name, base_shape, view, w_shape):
    history, values, gw = _run_inplace_on_view(dj, base_shape, view, op, w_shape)
    assert history == ("CopySlices", "AsStridedBackward", True, True)
    assert values.any() and np.isfinite(gw).all() and gw.any()


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("op_name, op, view_name, base_shape, view, w_shape", CASES, ids=CASE_IDS)
def test_in_place_on_a_view_of_a_constant_matches_torch(op_name, op, view_name, base_shape, view, w_shape):
    ours = _run_inplace_on_view(dj, base_shape, view, op, w_shape)
    theirs = _run_inplace_on_view(torch, base_shape, view, op, w_shape)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1])
    np.testing.assert_allclose(ours[2], theirs[2])


def test_item_assignment_of_a_grad_tensor_into_a_constant():
    base = dj.zeros(4, dtype=dj.float64)
    w = dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)
    base[1:3] = w
    assert repr(base.grad_fn) == "<CopySlices>"
    (base * _weights(dj, 4)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 3.0])


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_item_assignment_into_a_constant_matches_torch():
    def run(M):
        base, w = M.zeros((2, 3), dtype=M.float64), _mk(M)([1.0, 2.0, 3.0])
        base[1] = w * 2.0                       # a basic index: CopySlices
        base[:, 1:] = base[:, 1:] * 1.5         # the base's own history, read and written back
        (base * _weights(M, 6).reshape((2, 3))).sum().backward()
        return _name(base.grad_fn), base.detach().numpy().copy(), w.grad.numpy().copy()
    ours, theirs = run(dj), run(torch)
    assert ours[0] == theirs[0] == "CopySlices"
    np.testing.assert_allclose(ours[1], theirs[1])
    np.testing.assert_allclose(ours[2], theirs[2])


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_views_of_a_base_with_history_match_torch_through_double_backward():
    def run(M):
        mk = _mk(M)
        x, w = mk([1.0, 2.0, 3.0]), mk([0.5, -1.0])
        y = x * 1.0
        y[1:].mul_(w)
        (gw,) = M.autograd.grad((y * y * y).sum(), w, create_graph=True)
        (gx,) = M.autograd.grad(gw.sum(), x)
        return gw.detach().numpy().copy(), gx.numpy().copy()
    for a, b in zip(run(dj), run(torch)):
        np.testing.assert_allclose(a, b)


# -- the walk to the storage's owner ------------------------------------------------------------------
def test_a_copying_reshape_owns_its_storage():
    """A reshape that had to copy is not a view: in-place ops on its views rebase the copy."""
    a = dj.zeros((2, 3), dtype=dj.float64)
    b = a.T.reshape((6,))                   # non-contiguous: a copy
    assert not np.shares_memory(a.numpy(), b.numpy())
    w = dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)
    b[0:2].add_(w)
    assert repr(b.grad_fn) == "<CopySlices>" and not a.requires_grad and a.grad_fn is None
    (b * _weights(dj, 6)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])


def test_a_non_contiguous_owner():
    """The positions of a view in a base that owns non-contiguous memory (from_numpy of a transpose)."""
    base = dj.from_numpy(np.zeros((3, 2)).T)
    assert not base.is_contiguous()
    w = dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)
    base[:, 1].add_(w)
    np.testing.assert_array_equal(base.numpy(), [[0.0, 1.0, 0.0], [0.0, 2.0, 0.0]])
    (base * _weights(dj, 6).reshape((2, 3))).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 5.0])


def test_a_view_of_a_leaf_that_requires_grad_still_refuses_in_place_ops():
    x = dj.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AutogradError, match="view of a leaf Variable that requires grad"):
        x[1:].add_(dj.tensor([1.0], requires_grad=True))
    with pytest.raises(AutogradError, match="view of a leaf Variable that requires grad"):
        x[1:][0] = dj.tensor(3.0, requires_grad=True)


# -- second derivatives through indexing, index_put and in-place writes into views ----------------
# (IndexBackward, IndexPutBackward and AsStridedBackward write their gradient with a scatter that is
# itself differentiable: its backward is the gather)
def _basic_slice(M):
    return lambda x: (x[1:4] ** 3).sum()


def _gather(M):
    return lambda x: (x[M.tensor([0, 2, 2])] ** 3).sum()


def _index_put(M):
    def f(x):
        y = x * 2
        y[M.tensor([1, 3])] = x[:2] ** 2
        return (y ** 3).sum()
    return f


def _write_into_a_view(M):
    def f(x):
        base = M.zeros(5, dtype=M.float64)
        v = base[1:4]
        v.add_(x[:3] ** 2)
        return (base ** 3).sum() + (v ** 2).sum()
    return f


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("build", [_basic_slice, _gather, _index_put, _write_into_a_view])
def test_double_backward_through_index_scatters_matches_torch(build):
    x0 = [1.0, 2.0, 3.0, 4.0, 5.0]
    out = []
    for M in (dj, torch):
        x = _mk(M)(x0)
        (g,) = M.autograd.grad(build(M)(x), x, create_graph=True)
        assert g.requires_grad
        (g * g).sum().backward()
        out.append((g.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12)


def test_double_backward_through_a_gather_by_hand():
    # y = sum(x[idx]**3), idx = [3, 0, 3]: g0 = 3 x0**2, g3 = 6 x3**2 (the repeat accumulates);
    # d/dx sum(g**2) = 2 g dg/dx: 36 x0**3 and 144 x3**3
    x = dj.tensor([0.5, -1.0, 2.0, 1.5], dtype=dj.float64, requires_grad=True)
    (g,) = dj.autograd.grad((x[dj.tensor([3, 0, 3])] ** 3).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [0.75, 0.0, 0.0, 13.5])
    (g * g).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [36 * 0.125, 0.0, 0.0, 144 * 3.375])


# -- other views of the storage see an in-place op's history (PyTorch regenerates their grad_fn) ---
def _sibling_through_a_view(M, w):
    base = w * 1.0
    a, b = base[0:3], base[2:5]
    a.mul_(2.0)                        # b[0] aliases a[2]: b's gradient must see the multiply
    return (b * b).sum()


def _view_then_in_place_on_the_base(M, w):
    base = w * 1.0
    h = base[1:]
    base.mul_(3.0)
    return (h ** 2).sum()


def _views_of_a_constant(M, w):
    base = M.zeros(5, dtype=M.float64)
    a, b = base[0:3], base[1:4]        # b did not require grad when it was made
    a.add_(w[:3] ** 2)
    return (b * b).sum()


def _item_assignment(M, w):
    base = w * 1.0
    b = base[::2]
    base[1:4] = w[:3] * 5.0
    return (b ** 3).sum()


def _a_view_of_a_view(M, w):
    base = w * 1.0
    b = base[1:].view(2, 2)
    base[0:2].mul_(7.0)
    return (b * b).sum()


SIBLINGS = [_sibling_through_a_view, _view_then_in_place_on_the_base, _views_of_a_constant, _item_assignment,
            _a_view_of_a_view]


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("build", SIBLINGS)
def test_views_made_before_an_in_place_op_get_its_history_as_in_torch(build):
    out = []
    for M in (dj, torch):
        w = _mk(M)([1.0, 2.0, 3.0, 4.0, 5.0])
        loss = build(M, w)
        loss.backward()
        out.append((loss.item(), w.grad.numpy()))
    assert out[0][0] == pytest.approx(out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12)


def test_a_sibling_view_sees_the_multiply_by_hand():
    w = dj.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=dj.float64, requires_grad=True)
    loss = _sibling_through_a_view(dj, w)     # b = [2*w2, w3, w4]: loss = 4 w2^2 + w3^2 + w4^2
    assert type(loss.grad_fn).__name__ == "SumBackward"
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [0.0, 0.0, 24.0, 8.0, 10.0])
