"""set_default_dtype (dispatch_jit/defaults.py) and its reach: creation, Python-float promotion,
complex, printing; restored after each test."""

from __future__ import annotations

import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError


@pytest.fixture(autouse=True)
def _restore():
    yield
    dj.set_default_dtype(dj.float32)


def test_creation_and_promotion_follow_the_default():
    assert dj.get_default_dtype() is dj.float32
    i = dj.tensor([1, 2])
    assert (i * 0.5).dtype is dj.float32
    dj.set_default_dtype(dj.float64)
    assert dj.get_default_dtype() is dj.float64
    assert dj.tensor([1.5]).dtype is dj.float64
    assert dj.zeros(2).dtype is dj.float64 and dj.rand(2).dtype is dj.float64 and dj.randn(2).dtype is dj.float64
    assert dj.arange(0.5, 2).dtype is dj.float64
    assert (i * 0.5).dtype is dj.float64          # the memo resolved float32 before: it was dropped
    assert (dj.tensor([1.0], dtype=dj.float32) * 0.5).dtype is dj.float32   # a float tensor keeps its dtype
    assert dj.tensor([1j]).dtype is dj.complex128
    assert repr(dj.tensor([1.5])) == "tensor([1.5000])"
    assert repr(dj.tensor([1.5], dtype=dj.float32)) == "tensor([1.5000], dtype=dj.float32)"


@pytest.mark.torch
def test_matches_torch():
    torch = pytest.importorskip("torch")
    try:
        for d, td in ((dj.float64, torch.float64), (dj.float16, torch.float16)):
            dj.set_default_dtype(d)
            torch.set_default_dtype(td)
            makes = [lambda m: m.tensor([1.0]), lambda m: m.tensor([1, 2]) * 0.5, lambda m: m.ones(2)]
            if d is dj.float64:   # under float16 PyTorch makes complex32, which dispatch_jit has not: complex64
                makes.append(lambda m: m.tensor([1j]))
            for make in makes:
                assert make(dj).dtype.name == str(make(torch).dtype).split(".")[1]
    finally:
        torch.set_default_dtype(torch.float32)


def test_only_floating_defaults():
    with pytest.raises(DTypeError, match="only floating-point types"):
        dj.set_default_dtype(dj.int64)
    assert dj.get_default_dtype() is dj.float32


def test_dtype_aliases():
    assert (dj.float, dj.double, dj.half, dj.int, dj.long) == (dj.float32, dj.float64, dj.float16, dj.int32,
                                                               dj.int64)
    assert dj.zeros(2, dtype=dj.long).dtype is dj.int64
