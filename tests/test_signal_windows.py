"""dj.signal.windows (dispatch_jit/signal/windows.py) against torch.signal.windows where installed,
closed forms always, and PyTorch's argument checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import InvalidArgumentError

W = dj.signal.windows
CALLS = [("hamming", {}), ("hann", {}), ("bartlett", {}), ("blackman", {}), ("cosine", {}), ("nuttall", {}),
         ("exponential", {"tau": 2.5}), ("gaussian", {"std": 0.7}), ("kaiser", {"beta": 5.0}),
         ("general_cosine", {"a": [0.4, 0.3, 0.3]}), ("general_hamming", {"alpha": 0.6})]
SIZES = [0, 1, 2, 7, 8]


@pytest.mark.torch
@pytest.mark.parametrize("name,kw", CALLS, ids=[c[0] for c in CALLS])
def test_against_torch(name, kw):
    torch = pytest.importorskip("torch")
    for m in SIZES:
        for sym in (True, False):
            for dt in ("float32", "float64"):
                got = getattr(W, name)(m, sym=sym, dtype=getattr(dj, dt), **kw)
                want = getattr(torch.signal.windows, name)(m, sym=sym, dtype=getattr(torch, dt), **kw)
                assert got.dtype.name == dt and tuple(got.shape) == tuple(want.shape)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1.3e-6, atol=1e-6)


def test_closed_forms():
    n = np.arange(8)
    np.testing.assert_allclose(W.hann(8, dtype=dj.float64).numpy(), 0.5 - 0.5 * np.cos(2 * np.pi * n / 7))
    np.testing.assert_allclose(W.hamming(8, sym=False, dtype=dj.float64).numpy(), np.hamming(9)[:8])
    np.testing.assert_allclose(W.blackman(8, dtype=dj.float64).numpy(), np.blackman(8), atol=1e-15)
    np.testing.assert_allclose(W.bartlett(8, dtype=dj.float64).numpy(), np.bartlett(8))
    np.testing.assert_allclose(W.kaiser(8, beta=5.0, dtype=dj.float64).numpy(), np.kaiser(8, 5.0))
    np.testing.assert_allclose(W.exponential(5, dtype=dj.float64).numpy(), np.exp(-np.abs(np.arange(5) - 2.0)))
    assert W.hann(4).dtype is dj.get_default_dtype()
    assert W.cosine(3, requires_grad=True).requires_grad


def test_checks():
    with pytest.raises(InvalidArgumentError, match="non-negative window length"):
        W.hann(-1)
    with pytest.raises(InvalidArgumentError, match="float32 or float64"):
        W.hann(4, dtype=dj.int64)
    with pytest.raises(InvalidArgumentError, match="Tau must be positive"):
        W.exponential(4, tau=0.0)
    with pytest.raises(InvalidArgumentError, match="Center must be None"):
        W.exponential(4, center=1.0)
    assert W.exponential(4, center=1.0, sym=False)[1].item() == 1.0
    with pytest.raises(InvalidArgumentError, match="Standard deviation"):
        W.gaussian(4, std=-1.0)
    with pytest.raises(InvalidArgumentError, match="beta must be non-negative"):
        W.kaiser(4, beta=-1.0)
    with pytest.raises(InvalidArgumentError, match="cannot be empty"):
        W.general_cosine(4, a=[])
    with pytest.raises(TypeError, match="list/tuple"):
        W.general_cosine(4, a=0.5)
    assert math.isclose(W.general_cosine(3, a=[1.0]).sum().item(), 3.0)
