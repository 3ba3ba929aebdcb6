"""PyTorch's selecting keyword arguments (kernels/torch_kwargs.py): div(rounding_mode=), round(decimals=),
nonzero(as_tuple=), scatter(reduce=) and scatter_(reduce=), searchsorted(sorter=), roll with an int
shift; against PyTorch when installed and explicit values always; errors."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, InvalidArgumentError

IDX = [[0, 0], [2, 1]]

CASES = {
    "div-trunc-int": (lambda m, t: m.div(t([-7, 7, 6, -6, 0]), t([2, -2, 3, 4, 5]), rounding_mode="trunc"),
                      [-3, -3, 2, -1, 0]),
    "div-floor-int": (lambda m, t: m.div(t([-7, 7, 6, -6]), t([2, -2, 3, 4]), rounding_mode="floor"),
                      [-4, -4, 2, -2]),
    "div-trunc-float": (lambda m, t: t([-7.5, 7.5, 1e10]).div(t([2.0, -2.0, 3.0]), rounding_mode="trunc"),
                        [-3.0, -3.0, 3333333333.0]),
    "div-floor-scalar": (lambda m, t: m.div(t([-7.0, 7.0]), 2, rounding_mode="floor"), [-4.0, 3.0]),
    "div-none": (lambda m, t: m.divide(t([-7, 7]), 2, rounding_mode=None), [-3.5, 3.5]),
    "round-2": (lambda m, t: m.round(t([1.2345, 2.5, -12.5, 0.125]), decimals=2), [1.23, 2.5, -12.5, 0.12]),
    "round-neg": (lambda m, t: t([1234.5, 2.5, -1250.0, 150.0]).round(decimals=-2), [1200.0, 0.0, -1200.0, 200.0]),
    "round-0": (lambda m, t: m.round(t([0.5, 1.5]), decimals=0), [0.0, 2.0]),
    "nonzero-tuple": (lambda m, t: m.nonzero(t([[0, 1], [1, 0]]), as_tuple=True), ([0, 1], [1, 0])),
    "nonzero-0d": (lambda m, t: m.nonzero(t(5), as_tuple=True), ([0],)),
    "nonzero-0d-zero": (lambda m, t: t(0).nonzero(as_tuple=True), ([],)),
    "nonzero-rows": (lambda m, t: t([0, 3, 4]).nonzero(as_tuple=False), [[1], [2]]),
    "scatter-mul": (lambda m, t: m.ones(2, 3).scatter(1, t(IDX), 3.0, reduce="multiply"),
                    [[9.0, 1.0, 1.0], [1.0, 3.0, 3.0]]),
    "scatter-mul-src": (lambda m, t: m.full((2, 3), 2.0).scatter(1, t(IDX), t([[3.0, 5.0], [7.0, 0.5]]),
                                                                 reduce="multiply"),
                        [[30.0, 2.0, 2.0], [2.0, 1.0, 14.0]]),
    "scatter-add": (lambda m, t: m.ones(2, 3).scatter(1, t(IDX), 3.0, reduce="add"),
                    [[7.0, 1.0, 1.0], [1.0, 4.0, 4.0]]),
    "scatter-plain": (lambda m, t: m.zeros(2, 3).scatter(1, t(IDX), 3.0), [[3.0, 0.0, 0.0], [0.0, 3.0, 3.0]]),
    "searchsorted-sorter": (lambda m, t: m.searchsorted(t([3, 1, 2]), t([2, 5, 0]), sorter=t([1, 2, 0])),
                            [1, 3, 0]),
    "searchsorted-sorter-right": (lambda m, t: m.searchsorted(t([3.0, 1.0, 2.0]), t([2.0]), right=True,
                                                              sorter=t([1, 2, 0])), [2]),
    "roll-int": (lambda m, t: m.roll(t([[1, 2, 3], [4, 5, 6]]), 1), [[6, 1, 2], [3, 4, 5]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values(name):
    call, want = CASES[name]
    got = call(dj, dj.tensor)
    gs, ws = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(gs, ws, strict=True):
        a = g.numpy()
        # the expected values rounded once to the result's dtype (float32: 1.23 -> 1.2300000190734863)
        np.testing.assert_array_equal(a, np.asarray(w, dtype=np.float64).astype(a.dtype))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    call, _ = CASES[name]
    got, want = call(dj, dj.tensor), call(torch, torch.tensor)
    gs, ws = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(gs, ws, strict=True):
        assert g.dtype.name == str(w.dtype).split(".")[1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_in_place_scatter_reduce():
    x = dj.ones(2, 3)
    assert x.scatter_(1, dj.tensor(IDX), 3.0, reduce="add") is x
    assert x.tolist() == [[7.0, 1.0, 1.0], [1.0, 4.0, 4.0]]
    x.scatter_(1, dj.tensor(IDX), dj.full((2, 2), 2.0), reduce="multiply")
    assert x.tolist() == [[28.0, 1.0, 1.0], [1.0, 8.0, 8.0]]


def test_rounding_mode_keeps_gradients():
    x = dj.tensor([3.7, -2.2], requires_grad=True)
    dj.round(x * 2, decimals=1).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]        # as round's
    y = dj.tensor([3.0, 4.0], requires_grad=True)
    (dj.div(y, 2.0, rounding_mode=None) * 1).sum().backward()
    assert y.grad.tolist() == [0.5, 0.5]


def test_errors():
    with pytest.raises(InvalidArgumentError, match="rounding_mode to be one of None, 'trunc', or 'floor'"):
        dj.div(dj.ones(2), 2, rounding_mode="x")
    with pytest.raises(DTypeError, match="round_cpu\" not implemented for 'int64'"):
        dj.round(dj.tensor([12, 15]), decimals=-1)
    with pytest.raises(InvalidArgumentError, match="reduce argument must be either add or multiply"):
        dj.ones(2).scatter(0, dj.tensor([0]), 3.0, reduce="max")
    with pytest.raises(InvalidArgumentError, match="reduce argument must be either add or multiply"):
        dj.ones(2).scatter_(0, dj.tensor([0]), 3.0, reduce="max")
    with pytest.raises(IndexError, match="out of bounds"):
        dj.ones(2).scatter(0, dj.tensor([5]), 3.0, reduce="multiply")
    with pytest.raises(TypeError, match="sorter must be an integer tensor"):
        dj.searchsorted(dj.tensor([1, 2]), dj.tensor([1]), sorter=dj.tensor([0.0, 1.0]))


def test_narrow_takes_a_0d_integer_tensor_start():
    # torch.narrow's start may be a 0-d integer tensor (narrow.Tensor); dj's schema takes an int only
    x = dj.arange(6).reshape(2, 3)
    assert dj.narrow(x, 1, dj.tensor(1), 2).tolist() == [[1, 2], [4, 5]]
    assert x.narrow(1, dj.tensor(-2), 2).tolist() == [[1, 2], [4, 5]]
    assert dj.narrow(x, dim=0, start=dj.tensor(1, dtype=dj.int32), length=1).tolist() == [[3, 4, 5]]
    assert dj.narrow(x, 1, 0, 1).tolist() == [[0], [3]]
    for bad in (dj.tensor([1]), dj.tensor(1.0), dj.tensor(True)):
        with pytest.raises(InvalidArgumentError, match="start must be an 0-dim integral Tensor"):
            dj.narrow(x, 1, bad, 1)
    f = dj.compile(lambda t, s: t.narrow(1, s, 2))
    assert f(x, dj.tensor(1)).tolist() == [[1, 2], [4, 5]]
    assert f(x, dj.tensor(0)).tolist() == [[0, 1], [3, 4]]  # the start's value, not a stale one
