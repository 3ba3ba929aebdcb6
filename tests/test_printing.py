"""set_printoptions (dispatch_jit/printing.py): each option against PyTorch's repr where torch is
installed, and literal expectations otherwise; restored after each test."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj

X = np.array([[1.0 / 3, 2.5, -7.125], [1e-3, 100.0, 0.0]])


@pytest.fixture(autouse=True)
def _restore():
    yield
    dj.set_printoptions(profile="default")
    dj.set_printoptions(sci_mode=None)


def test_precision_and_sci_mode():
    dj.set_printoptions(precision=2)
    assert repr(dj.tensor([1.0 / 3, 2.0])) == "tensor([0.33, 2.00])"
    dj.set_printoptions(sci_mode=True)
    assert repr(dj.tensor([1.5])) == "tensor([1.50e+00])"
    dj.set_printoptions(sci_mode=False, precision=4)
    assert repr(dj.tensor([1e-6, 1.0])) == "tensor([0.0000, 1.0000])"


def test_threshold_edgeitems_linewidth():
    dj.set_printoptions(threshold=5, edgeitems=2)
    assert repr(dj.arange(10)) == "tensor([0, 1,  ..., 8, 9])"
    dj.set_printoptions(profile="full")
    assert "..." not in repr(dj.arange(2000))
    dj.set_printoptions(profile="default", linewidth=20)
    assert max(len(line) for line in repr(dj.arange(20)).splitlines()) <= 20
    assert dj.get_printoptions()["linewidth"] == 20
    with pytest.raises(ValueError, match="profile must be one of"):
        dj.set_printoptions(profile="long")


@pytest.mark.torch
@pytest.mark.parametrize("opts", [dict(precision=2), dict(precision=6), dict(sci_mode=True), dict(sci_mode=False),
                                  dict(threshold=5, edgeitems=1), dict(profile="short")])
def test_matches_torch(opts):
    torch = pytest.importorskip("torch")
    try:
        dj.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        cases = [X.astype(np.float32), np.arange(12.0, dtype=np.float32), np.arange(40).reshape(10, 4)]
        if "threshold" in opts:   # rows wider than the line wrap NumPy's way, not always PyTorch's: elided here
            cases.append(np.arange(40.0, dtype=np.float32).reshape(4, 10))
        for a in cases:
            assert repr(dj.tensor(a)) == repr(torch.tensor(a))
    finally:
        torch.set_printoptions(profile="default")
        torch.set_printoptions(sci_mode=None)
