"""The backward engine and the Tensor side of autograd: accumulation, long
chains, freed graphs, autograd.grad, higher-order gradients, hooks,
retain_grad, detach, and the errors a user meets first."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError, DTypeError
from helpers import run_threads

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None


def T(values, requires_grad=True):
    return dj.tensor(values, dtype=dj.float64, requires_grad=requires_grad)


# -- the tensor side -------------------------------------------------------------------------------
def test_leaf_and_grad_fn_and_keys():
    x = T([1.0, 2.0])
    c = T([3.0, 4.0], requires_grad=False)
    y = x * c
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    assert not y.is_leaf and y.requires_grad
    assert repr(y.grad_fn) == "<MulBackward>" and "grad_fn=<MulBackward>" in repr(y)
    assert "AutogradCPU" in str(dj.dispatch_keys(x)) and "AutogradCPU" in str(dj.dispatch_keys(y))
    assert "AutogradCPU" not in str(dj.dispatch_keys(c))
    assert not (c * c).requires_grad and (c * c).grad_fn is None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    assert c.grad is None and not x.grad.requires_grad


def test_requires_grad_only_for_floating_and_complex():
    for make in (lambda: dj.tensor([1, 2], requires_grad=True),
                 lambda: dj.tensor([1, 2]).requires_grad_(),
                 lambda: dj.tensor([True]).requires_grad_(),
                 lambda: dj.ones(2, dtype=dj.int32, requires_grad=True)):
        with pytest.raises(DTypeError, match="only floating point and complex tensors can require gradients"):
            make()
    assert dj.tensor([1.0], dtype=dj.float32, requires_grad=True).requires_grad
    assert dj.tensor([1j], dtype=dj.complex64).requires_grad_().requires_grad
    # requires_grad_(False) on a leaf takes the autograd key off again
    x = T([1.0]).requires_grad_(False)
    assert not x.requires_grad and "AutogradCPU" not in str(dj.dispatch_keys(x))


def test_integer_results_do_not_require_grad():
    x = T([1.5, -2.5])
    assert not (x > 0).requires_grad and not x.argmax().requires_grad


def test_backward_errors():
    x = T([1.0, 2.0])
    with pytest.raises(AutogradError, match=r"grad can be implicitly created only for scalar outputs.*\(2,\)"):
        (x * 2).backward()
    with pytest.raises(AutogradError, match="does not require grad"):
        T([1.0], requires_grad=False).backward()
    with pytest.raises(AutogradError, match=r"gradient has shape \(3,\) but the output has shape \(2,\)"):
        (x * 2).backward(dj.ones(3, dtype=dj.float64))
    (x * 2).backward(dj.tensor([1.0, 10.0], dtype=dj.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])


# -- accumulation ----------------------------------------------------------------------------------
def test_accumulates_when_a_tensor_is_used_several_times():
    x = T([1.0, 2.0, 3.0])
    y = x * x + x * 3.0 + x            # d/dx = 2x + 4
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0, 3.0]) + 4)
    # two branches meeting again (a diamond), and the same tensor on both sides of an op
    x = T([0.5, -1.0])
    a = x.sin()
    (a * a + a.exp()).sum().backward()
    xs = np.array([0.5, -1.0])
    np.testing.assert_allclose(x.grad.numpy(), np.cos(xs) * (2 * np.sin(xs) + np.exp(np.sin(xs))))


def test_grad_accumulates_across_backward_calls():
    x = T([1.0, 2.0])
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])
    x.grad = None
    (x * 4).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])


def test_broadcasting_is_summed_back():
    x = T([[1.0], [2.0]])            # (2, 1)
    b = T([1.0, 2.0, 3.0])           # (3,)
    (x * b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[6.0], [6.0]])
    np.testing.assert_array_equal(b.grad.numpy(), [3.0, 3.0, 3.0])
    s = T(2.0)                       # 0-d against (2, 1)
    (x * s).sum().backward()
    assert s.grad.shape == () and s.grad.item() == 3.0


def test_long_chain_does_not_recurse():
    """100,000 recorded ops: counting, ordering and freeing are iterative."""
    n = 100_000
    x = dj.tensor([1.5], dtype=dj.float64, requires_grad=True)
    y = x * 1.0                      # compile outside the timed loop
    t0 = time.perf_counter()
    y = x
    for _ in range(n):
        y = y * 1.0
    t1 = time.perf_counter()
    y.backward()
    t2 = time.perf_counter()
    assert x.grad.item() == 1.0
    del y                            # freeing the chain must not recurse either
    print(f"100,000-op chain: forward {(t1 - t0) / n * 1e6:.1f} us/op, backward {(t2 - t1) / n * 1e6:.1f} us/op "
          f"(recursion limit {sys.getrecursionlimit()})")


def test_a_long_chain_keeps_few_objects_for_the_cycle_collector():
    """A chain of ``y = y * 1.0`` keeps, per op, its node and its edge tuples alive, and not
    the op's output nor its input (which the gradient does not read): full GC passes,
    which traverse every tracked object, were most of the time of the 100,000-op chain."""
    import gc

    def tracked_after(y, n):
        for _ in range(n):
            y = y * 1.0
        gc.collect()
        return y, len(gc.get_objects())
    y, first = tracked_after(T([1.5]), 1000)
    y, second = tracked_after(y, 1000)           # the growth per op, without one-off allocations
    per_op = (second - first) / 1000
    assert per_op < 3.05, f"{per_op:.2f} GC-tracked objects per recorded op"   # the node, 2 edge tuples


# -- freed graphs ------------------------------------------------------------------------------------
def test_second_backward_through_freed_graph_raises():
    x = T([1.0, 2.0])
    z = (x.sin() * 2).sum()
    z.backward()
    with pytest.raises(AutogradError, match=r"backward through the graph a second time.*retain_graph=True"):
        z.backward()


def test_retain_graph_allows_a_second_backward():
    x = T([1.0, 2.0])
    z = (x.sin() * 2).sum()
    z.backward(retain_graph=True)
    z.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.cos([1.0, 2.0]))
    (g,) = dj.autograd.grad((x.exp() * x).sum(), x, retain_graph=False)
    np.testing.assert_allclose(g.numpy(), np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))


def test_second_backward_through_a_graph_that_saved_nothing():
    """As PyTorch: only nodes whose saved tensors were freed refuse a second backward."""
    x = T([1.0, 2.0])
    y = (x + 1.0).sum()
    y.backward()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    z = ((x - 1.0).neg().reshape((2, 1)).expand((2, 3))[1:].to(dj.float32) * 1).sum()
    assert z.grad_fn.saved is not None
    z.backward()
    with pytest.raises(AutogradError, match=r"backward through the graph a second time.*MulBackward"):
        z.backward()                  # * 1 saved its scalar (PyTorch saves it as a tensor)


def test_second_backward_raises_only_where_saved_tensors_were_freed():
    x = T([1.0, 2.0])
    y = x + 1.0
    z = (y * y).sum()                 # MulBackward saves y; AddBackward and SumBackward save nothing
    z.backward()
    with pytest.raises(AutogradError, match=r"second time.*in MulBackward.*retain_graph=True"):
        z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0])   # the failed pass accumulated nothing
    y.sum().backward()                # the part of the graph that saved nothing still runs
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])


def test_autograd_grad_twice_without_retain_graph():
    x = T([1.0, 2.0])
    y = (x + x).sum()
    assert [g.item() for g in dj.autograd.grad(y, x)[0]] == [2.0, 2.0]
    assert [g.item() for g in dj.autograd.grad(y, x)[0]] == [2.0, 2.0]
    z = x.exp().sum()
    dj.autograd.grad(z, x)
    with pytest.raises(AutogradError, match=r"second time.*ExpBackward"):
        dj.autograd.grad(z, x)


class _Scale(dj.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


class _SavesAndReads(dj.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        assert len(ctx.saved_tensors) == 1        # reading them is what a freed graph refuses
        return g * 2.0


def _setitem_scalar(M, x):
    y = x + 0.0
    y[0] = 5.0
    return y


def _add_into_a_view_of_a_constant(M, x):
    b = M.zeros(4, dtype=x.dtype)
    b[1:].add_(x)
    return b


# (what, fn(M, x) with M dispatch_jit or torch, whether PyTorch refuses a second backward): the answers
# are PyTorch's (test_second_backward_table_matches_torch checks them against it)
SECOND_BACKWARD = [
    ("slice", lambda M, x: x[1:], False),
    ("advanced index (saves the index)", lambda M, x: x[M.tensor([0, 2])], True),
    ("reshape, expand, sum", lambda M, x: x.reshape((3, 1)).expand((3, 2)).sum(), False),
    ("sub, neg, cast", lambda M, x: (x - 1).neg().to(M.float32), False),
    ("mean", lambda M, x: x.mean(), False),
    ("cat", lambda M, x: M.cat([x, x]), False),
    ("mul by a number (saves it)", lambda M, x: x * 2.0, True),
    ("mul by a constant tensor (saves it)", lambda M, x: x * M.ones(3, dtype=x.dtype), True),
    ("div by a number", lambda M, x: x / 2.0, True),
    ("exp (saves its result)", lambda M, x: x.exp(), True),
    ("item assignment (CopySlices)", _setitem_scalar, True),
    ("in-place add into a view of a constant (CopySlices)", _add_into_a_view_of_a_constant, True),
    ("Function saving nothing", lambda M, x: (_Scale if M is dj else _TorchFunctions.Scale).apply(x), False),
    ("Function saving, reading", lambda M, x: (_SavesAndReads if M is dj else _TorchFunctions.Saves).apply(x), True),
]


def _second_backward_raises(M, fn, error) -> bool:
    x = M.tensor([1.0, 2.0, 3.0], dtype=M.float64, requires_grad=True)
    y = fn(M, x).sum()
    y.backward()
    try:
        y.backward()
    except error:
        return True
    np.testing.assert_allclose(np.asarray(x.grad.detach()), 2 * np.asarray(_first_grad(M, fn).detach()))
    return False


def _first_grad(M, fn):
    x = M.tensor([1.0, 2.0, 3.0], dtype=M.float64, requires_grad=True)
    fn(M, x).sum().backward()
    return x.grad


@pytest.mark.parametrize("what, fn, raises", SECOND_BACKWARD, ids=[c[0] for c in SECOND_BACKWARD])
def test_second_backward_table(what, fn, raises):
    assert _second_backward_raises(dj, fn, AutogradError) == raises


class _TorchFunctions:
    """The torch twins of the Functions above (made on first use: torch is optional)."""

    @classmethod
    def make(cls):
        if hasattr(cls, "Scale"):
            return

        class Scale(torch.autograd.Function):
            forward = staticmethod(lambda ctx, x: x * 2.0)
            backward = staticmethod(lambda ctx, g: g * 2.0)

        class Saves(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2.0

            @staticmethod
            def backward(ctx, g):
                assert len(ctx.saved_tensors) == 1
                return g * 2.0
        cls.Scale, cls.Saves = Scale, Saves


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("what, fn, raises", SECOND_BACKWARD, ids=[c[0] for c in SECOND_BACKWARD])
def test_second_backward_table_matches_torch(what, fn, raises):
    _TorchFunctions.make()
    assert _second_backward_raises(torch, fn, RuntimeError) == raises


def test_a_function_node_is_freed_without_the_cycle_collector():
    """The ctx holds its node weakly: a Function's graph goes away by reference counting."""
    import gc
    import weakref
    x = T([1.0, 2.0])
    y = _SavesAndReads.apply(x)
    node = weakref.ref(y.grad_fn)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del y
        assert node() is None
    finally:
        if enabled:
            gc.enable()


# -- autograd.grad -----------------------------------------------------------------------------------
def test_autograd_grad_returns_without_accumulating():
    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    ga, gb = dj.autograd.grad((a * b).sum(), [a, b])
    np.testing.assert_array_equal(ga.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gb.numpy(), [1.0, 2.0])
    assert a.grad is None and b.grad is None
    (gy,) = dj.autograd.grad(a * 2, a, grad_outputs=dj.tensor([1.0, -1.0], dtype=dj.float64))
    np.testing.assert_array_equal(gy.numpy(), [2.0, -2.0])
    # a non-leaf input
    y = a * 3
    (g,) = dj.autograd.grad((y * y).sum(), y)
    np.testing.assert_array_equal(g.numpy(), 2 * y.detach().numpy())


def test_autograd_grad_allow_unused():
    a, b = T([1.0]), T([2.0])
    with pytest.raises(AutogradError, match=r"input 1\) appears to not have been used.*allow_unused=True"):
        dj.autograd.grad((a * 3).sum(), [a, b])
    ga, gb = dj.autograd.grad((a * 3).sum(), [a, b], allow_unused=True)
    assert ga.item() == 3.0 and gb is None
    with pytest.raises(AutogradError, match="input 0 of autograd.grad does not require grad"):
        dj.autograd.grad((a * 3).sum(), [T([1.0], requires_grad=False)])


# -- higher order ------------------------------------------------------------------------------------
def test_second_derivative_of_cube():
    x = T(0.7)
    (g,) = dj.autograd.grad(x ** 3, x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    assert g.item() == pytest.approx(3 * 0.7 ** 2)
    (h,) = dj.autograd.grad(g, x, create_graph=True)
    assert h.item() == pytest.approx(6 * 0.7)
    (h3,) = dj.autograd.grad(h, x)
    assert h3.item() == pytest.approx(6.0)


def test_second_derivative_of_sin_and_exp():
    xs = np.array([0.3, 0.9, -1.2])
    x = T(xs)
    (g,) = dj.autograd.grad(x.sin().sum(), x, create_graph=True)
    (h,) = dj.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), -np.sin(xs))
    (g,) = dj.autograd.grad((x * x).exp().sum(), x, create_graph=True)
    (h,) = dj.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), (2 + 4 * xs ** 2) * np.exp(xs ** 2))


def test_backward_with_create_graph():
    x = T(0.5)
    (x ** 3).backward(create_graph=True)
    gx = x.grad
    assert gx.requires_grad and gx.item() == pytest.approx(0.75)
    x.grad = None
    gx.backward()
    assert x.grad.item() == pytest.approx(3.0)


def test_hessian_vector_product_through_matmul():
    """f(x) = 0.5 |A x|^2: grad = A^T A x, Hessian = A^T A."""
    rng = np.random.default_rng(0)
    A_np, x_np, v_np = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal(2)
    A, x = T(A_np, requires_grad=False), T(x_np)
    y = A @ x
    f = (y * y).sum() * 0.5
    (g,) = dj.autograd.grad(f, x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), A_np.T @ A_np @ x_np)
    (hv,) = dj.autograd.grad((g * T(v_np, requires_grad=False)).sum(), x)
    np.testing.assert_allclose(hv.numpy(), A_np.T @ A_np @ v_np)


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_second_derivatives_of_a_matmul_chain_match_torch():
    rng = np.random.default_rng(1)
    w1, w2, x0, v = rng.standard_normal((3, 2)), rng.standard_normal((2, 3)), rng.standard_normal(2), \
        rng.standard_normal(2)

    def run(M, mk):
        W1, W2, x, vv = mk(w1, False), mk(w2, True), mk(x0, True), mk(v, False)
        f = (W2 @ (W1 @ x).tanh()).sin().sum()
        gx, gw2 = M.autograd.grad(f, [x, W2], create_graph=True)
        (hx,) = M.autograd.grad((gx * vv).sum() + (gw2 * gw2).sum(), [x])
        return gx.detach().numpy(), gw2.detach().numpy(), hx.numpy()

    ours = run(dj, lambda a, g: dj.tensor(a, dtype=dj.float64, requires_grad=g))
    theirs = run(torch, lambda a, g: torch.tensor(a, dtype=torch.float64, requires_grad=g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


# -- hooks and retain_grad ---------------------------------------------------------------------------
def test_hook_on_leaf_replaces_the_gradient():
    x = T([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))      # returns None: observes only
    x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    np.testing.assert_array_equal(seen[0], [2.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 20.0])


def test_hook_on_non_leaf_replaces_the_gradient_flowing_on():
    x = T([1.0, 2.0])
    y = x * 2
    seen = []

    def hook(g):
        seen.append(g.numpy().copy())
        return g + 1
    y.register_hook(hook)
    (y * 3).sum().backward()
    np.testing.assert_array_equal(seen[0], [3.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 8.0])      # (3 + 1) * 2
    with pytest.warns(UserWarning, match="not a leaf"):
        assert y.grad is None                                      # non-leaf: not kept unless retained
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        T([1.0], requires_grad=False).register_hook(lambda g: g)


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = T([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [4.0, 8.0])
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 16.0])
    x.retain_grad()                                                # a leaf keeps its grad anyway: no-op
    assert x.grad is not None


# -- detach ---------------------------------------------------------------------------------------------
def test_detach_shares_memory_and_version_and_leaves_the_graph():
    x = T([1.0, 2.0])
    y = x * 3
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert "AutogradCPU" not in str(dj.dispatch_keys(d))
    assert np.shares_memory(d.numpy(), y.numpy())
    d.add_(1.0)                                                    # visible through y
    np.testing.assert_array_equal(y.detach().numpy(), [4.0, 7.0])
    dx = x.detach()
    assert np.shares_memory(dx.numpy(), x.numpy())
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        z = x.sin()                                                # saves x
        dx.mul_(2.0)                                               # same storage: x's version moves too
        z.sum().backward()


def test_grad_is_a_fresh_writable_tensor():
    """.grad may be modified in place (optimizer steps): never a broadcast view or an alias."""
    x, y = T([1.0, 2.0]), T([3.0, 4.0])
    (x + y).sum().backward()                     # the incoming gradient is a 0-stride expand of a scalar
    x.grad.mul_(0.0)
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])
    g = dj.tensor([1.0, 2.0], dtype=dj.float64)
    z = T([5.0, 6.0])
    z.backward(g)                                # a leaf root: its grad is not the caller's tensor
    assert not np.shares_memory(z.grad.numpy(), g.numpy())

    class Same(dj.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad                    # one tensor for both inputs

    a, b = T([1.0]), T([2.0])
    Same.apply(a, b).sum().backward()
    a.grad.mul_(5.0)
    assert a.grad.item() == 5.0 and b.grad.item() == 1.0


def test_backward_of_several_roots():
    x = T([1.0, 2.0])
    y1, y2 = x * 2, x * 3
    dj.autograd.backward([y1.sum(), y2], [None, dj.tensor([1.0, 10.0], dtype=dj.float64)])
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 32.0])


def test_out_argument_is_refused_under_autograd():
    x = T([1.0, 2.0])
    with pytest.raises(AutogradError, match=r"out=\.\.\. arguments don't support automatic differentiation"):
        dj.add(x, x, out=dj.zeros(2, dtype=dj.float64))
    with dj.no_grad():
        np.testing.assert_array_equal(dj.add(x, x, out=dj.zeros(2, dtype=dj.float64)).numpy(), [2.0, 4.0])


def test_to_same_dtype_returns_the_input_and_records_nothing():
    x = T([1.0, 2.0])
    assert x.to(dj.float64) is x and x.is_leaf and x.grad_fn is None
    y = x * 2
    fn = y.grad_fn
    assert y.to(dj.float64) is y and y.grad_fn is fn
    (y.to(dj.float32) * 1.0).sum().backward()
    assert x.grad.dtype is dj.float64
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])



def _grad_function(keep: list, strong: bool):
    """A Function whose backward returns a fresh gradient (2 * g) and appends it to ``keep``:
    itself (``strong``: something besides the engine holds it) or a weak reference to it."""
    import weakref

    class Double(dj.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            r = g * 2.0
            keep.append(r if strong else weakref.ref(r))
            return r
    return Double


def test_a_fresh_leaf_gradient_becomes_grad_without_a_copy(monkeypatch):
    x = dj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    kept = []
    _grad_function(kept, strong=False).apply(x).sum().backward()     # passed to the leaf directly
    assert x.grad is kept[0]() and x.grad.numpy().tolist() == [2.0, 2.0, 2.0]
    x.grad.numpy()[...] = 0.0              # .grad stays the user's to modify (writeable)
    assert x.grad.numpy().tolist() == [0.0, 0.0, 0.0]
    # through the ready list (a leaf used twice: the sum of its gradients), the engine's own count
    from dispatch_jit.autograd import engine
    owned, accumulate = [], engine._accumulate_into_leaf
    monkeypatch.setattr(engine, "_accumulate_into_leaf", lambda n, g, o=False: (owned.append(o), accumulate(n, g, o)))
    z = dj.tensor([1.0, 2.0], requires_grad=True)
    (z * 2.0 + z * 3.0).sum().backward()
    (z * 2.0).sum().backward()             # accumulated into an existing .grad: a sum, not a steal
    assert owned == [True, True] and z.grad.numpy().tolist() == [7.0, 7.0]


@pytest.mark.parametrize("uses", [1, 2])     # 1: passed to the leaf directly; 2: through the ready list
def test_a_gradient_held_elsewhere_is_copied_into_grad(uses):
    x = dj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    kept = []
    f = _grad_function(kept, strong=True)
    y = f.apply(x) if uses == 1 else f.apply(x) + x * 0.0
    y.sum().backward()
    assert x.grad is not kept[0]
    kept[0].numpy()[...] = 0.0
    assert x.grad.numpy().tolist() == [2.0, 2.0, 2.0]
    # a user's gradient for a leaf root, and a view's gradient, are copied too
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    g = dj.tensor([5.0, 6.0])
    w.backward(g)
    assert w.grad is not g and not np.shares_memory(w.grad.numpy(), g.numpy())
    v = dj.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    v[1:3].sum().backward()
    assert v.grad.numpy().tolist() == [0.0, 1.0, 1.0, 0.0]


# -- backward in several threads --------------------------------------------------------------------
def test_backward_from_several_threads_into_one_graph_loses_no_gradient():
    """Four threads each run ``backward(retain_graph=True)`` on one shared graph: every one of their
    gradients must reach ``x.grad`` and a retained non-leaf's ``.grad`` (PyTorch locks the
    accumulation; here each leaf's accumulator and each retain_grad hook holds a lock).  Without,
    a thread switch between reading ``.grad`` and storing the sum lost gradients (28-39 of 40)."""
    import threading
    threads, calls = 4, 50
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)       # switch threads as often as CPython allows: races show at once
    try:
        for _ in range(3):
            x = dj.tensor([1.0, 2.0], requires_grad=True)
            h = x * x
            h.retain_grad()
            y = (h * 3.0).sum()
            barrier = threading.Barrier(threads)

            def work():
                barrier.wait()
                for _ in range(calls):
                    y.backward(retain_graph=True)
            run_threads(lambda _: work(), threads)
            n = threads * calls
            np.testing.assert_array_equal(x.grad.numpy(), n * np.array([6.0, 12.0], np.float32))
            np.testing.assert_array_equal(h.grad.numpy(), np.full(2, 3.0 * n, np.float32))
    finally:
        sys.setswitchinterval(old)


def test_a_copy_of_a_leaf_gets_its_own_gradients():
    """A leaf's accumulator (where backward puts its gradient) stays with it: a deepcopy or a pickle
    of it, of a model after a backward, accumulates into the copy's ``.grad``, not the original's
    (its accumulator was copied with it, pointing back at the original; and it holds a lock now)."""
    import copy
    import pickle
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    (w * 2.0).sum().backward()
    for c in (copy.deepcopy(w), pickle.loads(pickle.dumps(w))):
        np.testing.assert_array_equal(c.grad.numpy(), [2.0, 2.0])
        c.grad = None
        (c * 3.0).sum().backward()
        np.testing.assert_array_equal(c.grad.numpy(), [3.0, 3.0])
        np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])
    m = dj.nn.Linear(2, 1)
    m(dj.ones(1, 2)).sum().backward()
    m2 = copy.deepcopy(m)
    m2.zero_grad()
    m2(dj.ones(1, 2)).sum().backward()
    np.testing.assert_array_equal(m.weight.grad.numpy(), m2.weight.grad.numpy())
