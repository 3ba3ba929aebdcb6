"""F.layer_norm as one op forward (``_layer_norm``) and one backward (``_layer_norm_backward``,
kernels/nn/norm.py): values and gradients against PyTorch, one autograd node, double backward,
the formulas' path (other dtypes, a weight that broadcasts), and compiled modes bit for bit."""

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import CompileWarning

F = dj.nn.functional
torch = pytest.importorskip("torch")


def _pair(a, grad=True):
    return (dj.asarray(a.copy()).requires_grad_(grad), torch.from_numpy(a.copy()).requires_grad_(grad))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("case", ["affine", "no_bias", "plain", "two_dims", "strided"])
def test_values_and_gradients_match_torch(dtype, tol, case):
    rng = np.random.default_rng(3)
    shape, norm = ((3, 4, 5), (4, 5)) if case == "two_dims" else ((4, 3, 6), (6,))
    x = rng.standard_normal(shape).astype(dtype) * 3 + 1
    if case == "strided":
        x = np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2)   # non-contiguous
    w, b = rng.standard_normal(norm).astype(dtype), rng.standard_normal(norm).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    (dx, tx), (dw, tw), (db, tb) = _pair(x), _pair(w), _pair(b)
    args = {"affine": ((dw, db), (tw, tb)), "no_bias": ((dw, None), (tw, None)), "plain": ((None, None), (None, None)),
            "two_dims": ((dw, db), (tw, tb)), "strided": ((dw, db), (tw, tb))}[case]
    y = F.layer_norm(dx, norm, *args[0])
    ty = torch.nn.functional.layer_norm(tx, norm, *args[1])
    assert y.grad_fn.name() == "NativeLayerNormBackward"     # one node, not the nine ops' chain
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    y.backward(dj.asarray(g))
    ty.backward(torch.from_numpy(g))
    for ours, theirs in zip((dx, *args[0]), (tx, *args[1])):
        if ours is not None:
            np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=10 * tol, atol=10 * tol)


def test_only_the_weight_needs_a_gradient_and_a_retained_graph_runs_twice():
    rng = np.random.default_rng(4)
    x = dj.asarray(rng.standard_normal((5, 8)).astype(np.float32))
    w = dj.asarray(rng.standard_normal(8).astype(np.float32)).requires_grad_()
    b = dj.asarray(rng.standard_normal(8).astype(np.float32)).requires_grad_()
    y = F.layer_norm(x, (8,), w, b)
    y.backward(dj.ones(5, 8), retain_graph=True)
    first = (w.grad.numpy().copy(), b.grad.numpy().copy())
    w.grad = b.grad = None
    y.backward(dj.full((5, 8), 2.0))
    np.testing.assert_allclose(w.grad.numpy(), 2 * first[0], rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), 2 * first[1], rtol=1e-6)


def test_second_derivatives_match_torch():
    rng = np.random.default_rng(5)
    (x, tx), (w, tw) = _pair(rng.standard_normal((3, 4))), _pair(rng.standard_normal(4))
    (gx,) = dj.autograd.grad((F.layer_norm(x, (4,), w) ** 3).sum(), [x], create_graph=True)
    (tgx,) = torch.autograd.grad((torch.nn.functional.layer_norm(tx, (4,), tw) ** 3).sum(), [tx], create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-12)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)


def test_other_dtypes_and_a_broadcast_weight_take_the_formulas():
    x = np.random.default_rng(6).standard_normal((2, 3)).astype(np.float32)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (3,)).numpy()
    half = F.layer_norm(dj.asarray(x).to(dj.float16), (3,))
    assert half.dtype == dj.float16
    np.testing.assert_allclose(half.float().numpy(), ref, atol=2e-3)
    assert F.layer_norm(dj.asarray(x).to(dj.bfloat16), (3,)).dtype == dj.bfloat16
    # a (1,) weight broadcasts over the normalized dim (the composition's rule)
    np.testing.assert_allclose(F.layer_norm(dj.asarray(x), (3,), dj.tensor([2.0])).numpy(), 2 * ref, rtol=1e-5)


def test_compiled_and_lazy_equal_eager_bit_for_bit():
    # a whole step (forward and backward), as @dj.compile traces a training step; no graph break
    def step(x, w, b):
        y = F.layer_norm(x * 2.0, (6,), w, b)
        loss = (y * y).sum()
        loss.backward()
        return loss

    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6,), (6,))]

    def run(fn, mode=None):
        xs = [dj.asarray(a.copy()).requires_grad_() for a in arrays]
        if mode:
            with dj.execution_mode(mode):
                loss = fn(*xs)
        else:
            loss = fn(*xs)
        return [loss.numpy()] + [x.grad.numpy() for x in xs]

    eager = run(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled = run(dj.compile(step))
    for got in (compiled, run(step, "compiled")):
        for a, b in zip(got, eager):
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_a_transposed_input_compiled_again_equals_eager_bit_for_bit():
    """The gradient fuzzer's seed 1316 (mode "again"): layer_norm of a transposed (3, 4) input, the
    second call of the same sizes running the plans as compiled functions.  The plan function's rule
    (compiler/run/tensor_rules.py) hands the backward loop the C-order copy that eager's ``_rows``
    makes, so each row's sums walk the same elements in the same order: the same bits."""
    a = np.random.default_rng(11).uniform(0.1, 2.0, (4, 3))
    for norm in ((4,), (3, 4)):
        def loss(x):
            return (F.layer_norm(x, norm) * 0.5).sum()

        def grad(fn):
            x = dj.asarray(a.copy().T).requires_grad_()     # strided: C order is (4, 3)
            fn(x).backward()
            return x.grad.numpy()

        eager, cf = grad(loss), dj.compile(loss)
        grad(cf)
        got = grad(cf)
        fused = next(iter(cf._last.fused.values()))
        assert fused.backward.function is not None and fused.backward.function.calls >= 1, cf.explain()
        np.testing.assert_array_equal(got.view(np.uint64), eager.view(np.uint64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_in_blocks_equal_each_row_alone(dtype):
    """The CPU loops take rows 16 at a time (statistics of a block, then its outputs): 37 rows
    cross two block edges and end in a partial block; every row's output and input gradient has
    the bits of that row normalized alone, and the summed weight/bias gradients match PyTorch."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((37, 24)).astype(dtype) * 3 + 1
    w, b, g = rng.standard_normal(24).astype(dtype), rng.standard_normal(24).astype(dtype), rng.standard_normal((37, 24)).astype(dtype)
    (dx, tx), (dw, tw), (db, tb) = _pair(x), _pair(w), _pair(b)
    y = F.layer_norm(dx, (24,), dw, db)
    y.backward(dj.asarray(g))
    for i in (0, 15, 16, 17, 31, 32, 36):
        xi = dj.asarray(x[i:i + 1].copy()).requires_grad_()
        yi = F.layer_norm(xi, (24,), dj.asarray(w), dj.asarray(b))
        yi.backward(dj.asarray(g[i:i + 1].copy()))
        assert np.array_equal(yi.detach().numpy()[0], y.detach().numpy()[i])
        assert np.array_equal(xi.grad.numpy()[0], dx.grad.numpy()[i])
    torch.nn.functional.layer_norm(tx, (24,), tw, tb).backward(torch.from_numpy(g))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for ours, theirs in ((dx, tx), (dw, tw), (db, tb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=tol, atol=tol)


def test_input_gradient_bits_do_not_depend_on_where_the_arrays_lie():
    """The backward loop's row sums must take one path whatever the operands' addresses: an
    absent weight is an empty array whose (unread) pointer may lie anywhere, and when it lay
    inside the weight-gradient sums the sums' loop ran unvectorized (LLVM's overlap check) and
    float64 input gradients changed in the last bits."""
    from dispatch_jit.kernels.nn import norm
    k = norm.get("layer_norm_backward", np.dtype(np.float64))
    rng = np.random.default_rng(4)
    x, g = rng.standard_normal((17, 65)) * 3 + 1, rng.standard_normal((17, 65))
    outs = []
    for where in ("apart", "in gw", "in gb", "in gi"):
        gi, sums = np.empty((17, 65)), np.zeros((2, 65))
        w = {"apart": np.empty(0), "in gw": sums[0, 3:3], "in gb": sums[1, 3:3], "in gi": gi.reshape(-1)[7:7]}[where]
        k(g, x, w, 1e-5, True, gi, sums[0], sums[1])
        outs.append(gi)
    for got in outs[1:]:
        np.testing.assert_array_equal(got.view(np.uint64), outs[0].view(np.uint64))
