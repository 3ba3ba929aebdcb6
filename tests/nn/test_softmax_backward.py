"""softmax's backward (``_softmax_backward_data``, kernels/nn/rows_bwd.py): eight rows' dots
interleaved, each row's own add chain unchanged.  Against PyTorch as the oracle at float32 and
float64 tolerances (attention's causal -inf rows, a row count that is not a multiple of 8, rows
of length 1, empty), and the bits of every row equal to that row computed alone."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.kernels.nn import cpu as nn_cpu

try:
    import torch
except ImportError:
    torch = None

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}
SHAPES = [(2, 3, 13, 13), (19, 1), (0, 5), (4, 0), (1, 1)]


def _probs(shape, dtype, rng):
    """softmax over the last axis under a causal mask (-inf above the diagonal) where rows are square."""
    x = rng.standard_normal(shape) * 3
    if len(shape) > 1 and shape[-1] == shape[-2] and shape[-1] > 1:
        x[..., np.triu(np.ones(shape[-2:], bool), 1)] = -np.inf
    e = np.exp(x - x.max(-1, keepdims=True)) if x.size else x
    return (e / e.sum(-1, keepdims=True)).astype(dtype) if x.size else x.astype(dtype)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_backward_matches_torch(shape, dtype):
    rng = np.random.default_rng(3)
    y = _probs(shape, dtype, rng)
    g = rng.standard_normal(shape).astype(dtype)
    ours = dj.ops.aten._softmax_backward_data(dj.tensor(g), dj.tensor(y), len(shape) - 1).numpy()
    theirs = torch.ops.aten._softmax_backward_data(torch.tensor(g), torch.tensor(y), len(shape) - 1,
                                                  torch.tensor(y).dtype).numpy()
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_backward_rows_get_the_bits_of_one_row_alone(dtype):
    """The row dots run eight rows at a time; a row's result must not depend on its neighbours
    (rows in the group of 8 and in the tail alike, NaN and zero rows included)."""
    rng = np.random.default_rng(4)
    n, c = 21, 37
    y = _probs((n, c), dtype, rng)
    g = (rng.standard_normal((n, c)) * 5).astype(dtype)
    y[2, :] = 0.0
    g[5, 7] = np.nan
    kernel = nn_cpu.get("softmax_backward", dtype)
    whole = np.empty_like(y)
    kernel(g, y, whole)
    for i in range(n):
        alone = np.empty((1, c), dtype)
        kernel(g[i:i + 1], y[i:i + 1], alone)
        np.testing.assert_array_equal(whole[i:i + 1].view(np.uint8), alone.view(np.uint8))
    assert np.isnan(whole[5]).all() and not np.isnan(np.delete(whole, 5, 0)).any()
