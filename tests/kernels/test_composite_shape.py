"""Composites, shape ops, reductions and matmul through the dispatcher, against NumPy
(and PyTorch, when importable, for the composites)."""

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, ShapeError

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


_ERF = np.vectorize(math.erf)
COMPOSITES = {
    "softmax": (lambda t: dj.softmax(t, axis=1), lambda a: _np_softmax(a, 1)),
    "log_softmax": (lambda t: dj.log_softmax(t, axis=0), lambda a: np.log(_np_softmax(a, 0))),
    "gelu": (lambda t: dj.gelu(t), lambda a: 0.5 * a * (1 + _ERF(a / math.sqrt(2)))),
    "gelu_tanh": (lambda t: dj.gelu(t, approximate="tanh"),
                  lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))),
    "silu": (lambda t: dj.silu(t), lambda a: a / (1 + np.exp(-a))),
    "mse_loss": (lambda t: dj.mse_loss(t, dj.zeros(3, 4)), lambda a: np.mean(a * a)),
    "linear": (lambda t: dj.linear(t, dj.asarray(X), dj.ones(3)), lambda a: a @ X.T.astype(np.float64) + 1),
}


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composites_match_numpy(name):
    ours, ref = COMPOSITES[name]
    out = ours(dj.asarray(X))
    np.testing.assert_allclose(out.numpy(), ref(X.astype(np.float64)), rtol=2e-5, atol=2e-6)
    assert out.dtype is dj.float32


def test_composites_registered_as_composite_implicit():
    for name in ("gelu", "silu", "mse_loss"):
        assert "CompositeImplicitAutograd" in dj.dump(f"aten::{name}")
    # softmax, log_softmax and linear are ops of their own (kernels/nn): a kernel per backend and a
    # derivative row, no decomposition
    for name in ("softmax", "log_softmax", "linear"):
        dump = dj.dump(f"aten::{name}")
        assert "CompositeImplicitAutograd" not in dump and "CPU" in dump and "Autograd" in dump


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_composites_match_torch():
    t = torch.from_numpy(X)
    d = dj.asarray(X)
    np.testing.assert_allclose(dj.softmax(d, axis=-1).numpy(), torch.softmax(t, -1).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dj.gelu(d).numpy(), torch.nn.functional.gelu(t).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dj.silu(d).numpy(), torch.nn.functional.silu(t).numpy(), rtol=1e-5, atol=1e-6)


def test_composite_argument_errors():
    with pytest.raises(dj.errors.SchemaError, match="approximate"):
        dj.gelu(dj.asarray(X), approximate="fast")
    with pytest.raises(dj.errors.SchemaError, match="reduction"):
        dj.mse_loss(dj.asarray(X), dj.asarray(X), "avg")


def test_cat_and_stack():
    a, b = dj.ones(2, 3), dj.zeros(1, 3)
    c = dj.cat([a, b])
    assert c.shape == (3, 3) and c.tolist()[2] == [0.0] * 3
    assert dj.cat([a, a], axis=1).shape == (2, 6) and dj.concat([a, a], dim=-1).shape == (2, 6)
    assert dj.cat([dj.tensor([1]), dj.tensor([2.5])]).dtype is dj.float32      # promotes
    assert dj.stack([a, a], axis=1).shape == (2, 2, 3)
    with pytest.raises(ShapeError, match="must match except in dimension 0"):
        dj.cat([a, dj.zeros(2, 2)])
    with pytest.raises(ShapeError, match="equal size"):
        dj.stack([a, b])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int16, np.complex128, np.bool_])
def test_cat_of_large_pieces_copies_each_row_run(dtype):
    """cat's compiled copy (kernels/shape/concat.py: each C-contiguous piece's rows as runs of
    1, 2, 4 or 8-byte words; complex128 as two words an element) on every axis, beside a
    non-contiguous piece (NumPy's assignment) and an empty one; the GPT's cats along the last
    axis of (16, 32, 64) pieces are this case."""
    from dispatch_jit.kernels.shape.concat import CAT_LOOP_MIN
    rng = np.random.default_rng(1)
    parts = [(rng.standard_normal((16, 32, 64)) * 50).astype(dtype) for _ in range(2)]
    for axis in range(3):
        strided = dj.tensor(parts[1]).permute(2, 1, 0).contiguous().permute(2, 1, 0)
        pieces = [dj.tensor(parts[0]), strided, dj.tensor(parts[0]).narrow(axis, 0, 0), dj.tensor(parts[1])]
        assert not pieces[1]._data.flags.c_contiguous
        ours = dj.cat(pieces, axis)
        assert ours.numel() >= CAT_LOOP_MIN
        np.testing.assert_array_equal(ours.numpy(), np.concatenate([p.numpy() for p in pieces], axis))


REDUCTIONS = [
    # NumPy's max/min are PyTorch's amax/amin (dj.max(x, dim) returns values and indices); NumPy's var/std
    # are the biased estimate (PyTorch's default is unbiased, correction=1)
    ("sum", np.sum, {}), ("prod", np.prod, {}), ("mean", np.mean, {}), ("amax", np.max, {}), ("amin", np.min, {}),
    ("var", np.var, {"correction": 0}), ("std", np.std, {"correction": 0}), ("all", np.all, {}), ("any", np.any, {}),
]


@pytest.mark.parametrize("name,ref,kw", REDUCTIONS)
@pytest.mark.parametrize("axis", [None, 0, (0, 1), -1])
def test_reductions_through_dispatcher(name, ref, kw, axis):
    a = X.astype(np.float64)
    ours = getattr(dj, name)(dj.asarray(a), axis=axis, keepdims=True, **kw)
    np.testing.assert_allclose(ours.numpy(), ref(a, axis=axis, keepdims=True), rtol=1e-10)
    # the method form and PyTorch's dim=/keepdim= spelling resolve the same way
    assert getattr(dj.asarray(a), name)(dim=axis, keepdim=False, **kw).shape == ref(a, axis=axis).shape


def test_reduction_dtypes_and_errors():
    i = dj.tensor([[1, 2], [3, 4]], dtype=dj.int32)
    assert i.sum().dtype is dj.int64 and i.sum().item() == 10
    assert dj.tensor([True, True]).sum().item() == 2
    assert i.max().dtype is dj.int32 and i.argmax().item() == 3 and i.argmax(axis=1).tolist() == [1, 1]
    assert dj.logsumexp(i).dtype is dj.float32
    assert i.sum(dtype=dj.float64).dtype is dj.float64
    with pytest.raises(DTypeError, match="mean"):
        i.mean()
    with pytest.raises(ShapeError, match="out of range"):
        i.sum(axis=2)
    x = dj.asarray(X)
    assert x.var(correction=1).item() == pytest.approx(float(np.var(X.astype(np.float64), ddof=1)), rel=1e-5)


def test_float32_sum_is_accurate():
    a = RNG.random(1_000_003, dtype=np.float32)
    exact = math.fsum(a.astype(np.float64))
    assert abs(dj.asarray(a).sum().item() - exact) <= max(abs(float(np.sum(a)) - exact), 1e-3 * 0 + 0.5)


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)),
                                   ((5, 2, 3), (3, 4)), ((1, 2, 3), (4, 3, 2))])
def test_matmul_shapes(sa, sb):
    a = RNG.standard_normal(sa).astype(np.float32)
    b = RNG.standard_normal(sb).astype(np.float32)
    ours = dj.asarray(a) @ dj.asarray(b)
    np.testing.assert_allclose(ours.numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert ours.shape == np.matmul(a, b).shape


def test_matmul_int_promotion_and_errors():
    a = dj.tensor([[1, 2], [3, 4]])
    assert (a @ a).tolist() == [[7, 10], [15, 22]] and (a @ a).dtype is dj.int64
    assert (a @ dj.ones(2)).dtype is dj.float32
    assert dj.dot(dj.tensor([1.0, 2.0]), dj.tensor([3.0, 4.0])).item() == 11.0
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        dj.ones(2, 3) @ dj.ones(2, 3)
    with pytest.raises(DTypeError):
        dj.tensor([True]) @ dj.tensor([True])


def test_seed_expression():
    x = dj.tensor([1.0, 2.0], dtype=dj.float32)
    w = dj.tensor([3.0, 4.0], dtype=dj.float32)
    z = x * 2 + w.exp() @ w
    ref = np.array([1.0, 2.0]) * 2 + np.exp(np.array([3.0, 4.0])) @ np.array([3.0, 4.0])
    np.testing.assert_allclose(z.numpy(), ref, rtol=1e-6)
    assert z.dtype is dj.float32


def test_device_mismatch_error():
    from dispatch_jit.keys import DispatchKey
    from dispatch_jit.signature import make_sig
    # a tensor that claims to live on cuda:0 (the CUDA backend is a separate piece of work):
    # the device check runs before any kernel is looked up
    fake = dj.tensor([1.0, 2.0])
    fake._sig = make_sig(1 << DispatchKey.CUDA.value, dj.float32, 1, True)
    with pytest.raises(dj.errors.DeviceMismatchError,
                       match="Expected all tensors to be on the same device, but found cpu and cuda:0"):
        dj.add(dj.tensor([1.0, 2.0]), fake)
