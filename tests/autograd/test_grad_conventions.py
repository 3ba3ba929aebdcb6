"""Gradient conventions at the edges (issue 12): ties, NaN, infinities, zero variance, N ==
correction.  One table; each row is (name, function of the module M, inputs, upstream gradient,
the gradients PyTorch gives, written out by hand).  Every row runs twice: against the hand-written
gradients (no torch needed) and against torch itself.  Adding a case is one line."""

import math
import warnings

import numpy as np
import pytest

import dispatch_jit as dj

inf, nan = math.inf, math.nan

# (name, fn(M, *xs), inputs, upstream gradient, expected gradient per input)
CASES = [
    # full max/min share ties evenly; a NaN maximum sends the gradient to the NaN elements
    ("max_ties", lambda M, x: M.max(x), [[1.0, 3.0, 3.0]], 1.0, [[0.0, 0.5, 0.5]]),
    ("max_nan", lambda M, x: M.max(x), [[1.0, nan, 3.0]], 1.0, [[0.0, 1.0, 0.0]]),
    ("max_nan_ties", lambda M, x: M.max(x), [[nan, nan, 1.0]], 1.0, [[0.5, 0.5, 0.0]]),
    ("min_ties", lambda M, x: M.min(x), [[1.0, 1.0, 3.0]], 1.0, [[0.5, 0.5, 0.0]]),
    # max/min along a dim: the gradient goes to the index returned, not shared
    ("max_dim_ties", lambda M, x: M.max(x, 0).values, [[1.0, 3.0, 3.0]], 1.0, [[0.0, 1.0, 0.0]]),
    ("min_dim_ties", lambda M, x: M.min(x, 0).values, [[1.0, 1.0, 3.0]], 1.0, [[1.0, 0.0, 0.0]]),
    ("max_dim_inf_up", lambda M, x: M.max(x, 1).values, [[[1.0, 2.0]]], [inf], [[[0.0, inf]]]),
    # amax along a dim: ties share; a NaN slice gets NaN (no element equals NaN)
    ("amax_ties", lambda M, x: M.amax(x, 0), [[1.0, 3.0, 3.0]], 1.0, [[0.0, 0.5, 0.5]]),
    ("amax_nan", lambda M, x: M.amax(x, 1), [[[1.0, nan]]], [1.0], [[[nan, nan]]]),
    # amax/amin over every element (no dim) are scale_grad_by_count too, not max(x)'s evenly
    # distribute: a NaN result gives NaN to every element; ties share
    ("amax_all_nan", lambda M, x: M.amax(x), [[1.0, nan, 3.0, nan]], 1.0, [[nan, nan, nan, nan]]),
    ("amin_all_nan", lambda M, x: M.amin(x), [[1.0, nan, 3.0]], 1.0, [[nan, nan, nan]]),
    ("amax_all_ties", lambda M, x: M.amax(x), [[3.0, 1.0, 3.0, 2.0]], 2.0, [[1.0, 0.0, 1.0, 0.0]]),
    ("amin_all_ties_2d", lambda M, x: M.amin(x), [[[1.0, 4.0], [1.0, 1.0]]], 3.0, [[[1.0, 0.0], [1.0, 1.0]]]),
    ("amax_method_nan", lambda M, x: x.amax(), [[nan, 2.0]], 1.0, [[nan, nan]]),
    ("min_nan_ties", lambda M, x: M.min(x), [[1.0, nan, 3.0, nan]], 1.0, [[0.0, 0.5, 0.0, 0.5]]),
    ("max_method_nan", lambda M, x: x.max(), [[nan, 2.0]], 1.0, [[1.0, 0.0]]),
    # var/std: zero variance, and N <= correction (NaN or inf, never ZeroDivisionError)
    ("std_zero_var", lambda M, x: M.std(x), [[2.0, 2.0, 2.0]], 1.0, [[0.0, 0.0, 0.0]]),
    ("var_zero_var", lambda M, x: M.var(x), [[2.0, 2.0, 2.0]], 1.0, [[0.0, 0.0, 0.0]]),
    ("var_n_eq_corr", lambda M, x: M.var(x), [[2.0]], 1.0, [[nan]]),
    ("std_n_eq_corr", lambda M, x: M.std(x), [[2.0]], 1.0, [[nan]]),
    ("var_n_lt_corr", lambda M, x: M.var(x, correction=3), [[2.0, 3.0]], 1.0, [[inf, inf]]),
    ("std_n_lt_corr", lambda M, x: M.std(x, correction=3), [[2.0, 3.0]], 1.0, [[nan, nan]]),
    ("var_dim_n_eq_corr", lambda M, x: M.var(x, 1), [[[2.0], [3.0]]], [1.0, 1.0], [[[nan], [nan]]]),
    ("var_dim_dof0", lambda M, x: M.var(x, 1, correction=2), [[[2.0, 3.0]]], [1.0], [[[-inf, inf]]]),
    ("var_dim_dof_neg", lambda M, x: M.var(x, 1, correction=3), [[[2.0, 3.0]]], [1.0], [[[1.0, -1.0]]]),
    ("std_dim_zero_var", lambda M, x: M.std(x, 1), [[[2.0, 2.0]]], [1.0], [[[0.0, 0.0]]]),
    ("var_0d_biased", lambda M, x: M.var(x, correction=0), [5.0], 1.0, [0.0]),
    # relu: a select, so an infinite upstream gradient gives 0 (not nan) where x <= 0
    ("relu_inf_up", lambda M, x: M.relu(x), [[-1.0, 0.0, 2.0]], [inf, inf, inf], [[0.0, 0.0, inf]]),
    ("relu_nan_up", lambda M, x: M.relu(x), [[-1.0, 0.0, 2.0]], [nan, nan, nan], [[0.0, 0.0, nan]]),
    ("relu_nan_in", lambda M, x: M.relu(x), [[nan]], [1.0], [[1.0]]),
    # atan2: gradient 0 at (0, 0); inf upstream
    ("atan2_origin", lambda M, y, x: M.atan2(y, x), [[0.0], [0.0]], [1.0], [[0.0], [-0.0]]),
    ("atan2_inf_up", lambda M, y, x: M.atan2(y, x), [[1.0, 0.0], [2.0, 0.0]], [inf, inf],
     [[inf, nan], [-inf, nan]]),
    # maximum/minimum: ties split evenly; NaN compares false both ways: both get all of g
    ("maximum_ties", lambda M, a, b: M.maximum(a, b), [[1.0, 2.0], [1.0, 3.0]], [1.0, 1.0],
     [[0.5, 0.0], [0.5, 1.0]]),
    ("maximum_nan", lambda M, a, b: M.maximum(a, b), [[nan, 1.0, nan], [1.0, nan, nan]], [1.0] * 3,
     [[1.0] * 3, [1.0] * 3]),
    ("minimum_nan", lambda M, a, b: M.minimum(a, b), [[nan, 1.0], [1.0, nan]], [1.0, 1.0],
     [[1.0, 1.0], [1.0, 1.0]]),
    ("maximum_inf_up", lambda M, a, b: M.maximum(a, b), [[1.0, 2.0], [1.0, 3.0]], [inf, inf],
     [[inf, 0.0], [inf, inf]]),
    # abs at 0, sign/floor with an infinite upstream gradient (zeros, not inf * 0)
    ("abs_zero", lambda M, x: M.abs(x), [[0.0, -0.0, 1.0, -2.0]], [1.0] * 4, [[0.0, 0.0, 1.0, -1.0]]),
    ("sign_inf_up", lambda M, x: M.sign(x), [[0.0, 1.0]], [inf, inf], [[0.0, 0.0]]),
    ("floor_inf_up", lambda M, x: M.floor(x), [[0.5]], [inf], [[0.0]]),
    # clamp: the bounds themselves pass the gradient; NaN gets none; min > max: max takes all
    ("clamp_bounds", lambda M, x: M.clamp(x, -1.0, 1.0), [[-1.0, 1.0, 0.0, 2.0, -2.0]], [1.0] * 5,
     [[1.0, 1.0, 1.0, 0.0, 0.0]]),
    ("clamp_nan", lambda M, x: M.clamp(x, -1.0, 1.0), [[nan]], [1.0], [[0.0]]),
    ("clamp_inf_up", lambda M, x: M.clamp(x, -1.0, 1.0), [[-2.0, 0.0]], [inf, inf], [[0.0, inf]]),
    ("clamp_tensor_bounds", lambda M, x, lo, hi: M.clamp(x, lo, hi),
     [[-1.0, 1.0, 0.0, 2.0, -2.0], [-1.0] * 5, [1.0] * 5], [1.0] * 5,
     [[1.0, 1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0, 0.0]]),
    ("clamp_min_gt_max", lambda M, x, lo, hi: M.clamp(x, lo, hi), [[0.0, 5.0, -5.0], [2.0] * 3, [1.0] * 3],
     [1.0] * 3, [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]),
    # sqrt/rsqrt/log at 0
    ("sqrt_zero", lambda M, x: M.sqrt(x), [[0.0]], [1.0], [[inf]]),
    ("sqrt_zero_zero_up", lambda M, x: M.sqrt(x), [[0.0]], [0.0], [[nan]]),
    ("rsqrt_zero", lambda M, x: M.rsqrt(x), [[0.0]], [1.0], [[-inf]]),
    ("log_zero", lambda M, x: M.log(x), [[0.0]], [1.0], [[inf]]),
    # pow: d/dx at 0; d/dy is 0 where x == 0 and y >= 0, as g * 0 (so an infinite g gives nan)
    ("pow_half_at_zero", lambda M, x: x ** 0.5, [[0.0]], [1.0], [[inf]]),
    ("pow_tensor", lambda M, x, y: x ** y, [[0.0, 0.0, 2.0], [0.0, -1.0, 0.0]], [1.0] * 3,
     [[0.0, -inf, 0.0], [0.0, -inf, math.log(2.0)]]),
    ("pow_exp_inf_up", lambda M, x, y: x ** y, [[0.0], [2.0]], [inf], [[nan], [nan]]),
    # division by 0, and by a huge divisor with a huge upstream gradient (torch's product order)
    ("div_zero", lambda M, x, y: x / y, [[1.0], [0.0]], [1.0], [[inf], [-inf]]),
    ("div_huge", lambda M, x, y: x / y, [[1e20], [1e10]], [1e300], [[1e290], [-1e300]]),
    # where: the unselected branch gets 0 even from an infinite gradient
    ("where_inf_up", lambda M, x: M.where(x > 0, x, 0.0), [[1.0, -1.0]], [inf, inf], [[inf, 0.0]]),
    ("prod_zero", lambda M, x: M.prod(x), [[0.0, 2.0, 3.0]], 1.0, [[6.0, 0.0, 0.0]]),
    ("logsumexp_all_neg_inf", lambda M, x: M.logsumexp(x, 0), [[-inf, -inf]], 1.0, [[nan, nan]]),
]


def _run(M, fn, inputs, upstream):
    xs = [M.tensor(x, dtype=M.float64, requires_grad=True) for x in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # torch warns about dof <= 0
        y = fn(M, *xs)
        y.backward(M.tensor(upstream, dtype=M.float64))
    return [np.asarray(x.grad.tolist() if x.grad is not None else np.nan) for x in xs]


def _same(got, want):
    # NaN equals NaN; the sign of a zero counts (atan2's -0.0)
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g.shape == w.shape, (g, w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, equal_nan=True)
        assert np.array_equal(np.signbit(g[g == 0]), np.signbit(w[w == 0])), (g, w)


@pytest.mark.parametrize("name,fn,inputs,upstream,expected", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_hand_written(name, fn, inputs, upstream, expected):
    _same(_run(dj, fn, inputs, upstream), expected)


@pytest.mark.parametrize("name,fn,inputs,upstream,expected", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_torch(name, fn, inputs, upstream, expected):
    torch = pytest.importorskip("torch")
    want = _run(torch, fn, inputs, upstream)
    _same(want, expected)                          # the table itself is right
    _same(_run(dj, fn, inputs, upstream), want)


# full max/min against amax/amin: the op is the same (aten::max), told apart by its axis (None from
# max(x), amax's default () is every dim), so the compiled modes' recorded graphs keep the difference
_FULL_EXTREMES = [c for c in CASES if c[0] in ("max_ties", "max_nan", "max_nan_ties", "min_nan_ties", "max_method_nan",
                                               "amax_all_nan", "amin_all_nan", "amax_all_ties", "amin_all_ties_2d",
                                               "amax_method_nan")]


@pytest.mark.parametrize("mode", ["compile", "lazy"])
@pytest.mark.parametrize("name,fn,inputs,upstream,expected", _FULL_EXTREMES, ids=[c[0] for c in _FULL_EXTREMES])
def test_full_extremes_in_compiled_modes(name, fn, inputs, upstream, expected, mode):
    x = dj.tensor(inputs[0], dtype=dj.float64, requires_grad=True)
    g = dj.tensor(upstream, dtype=dj.float64)
    if mode == "compile":
        dj.compile(lambda x: fn(dj, x * 1.0))(x).backward(g)
    else:
        with dj.execution_mode("compiled"):
            fn(dj, x * 1.0).backward(g)
    _same([np.asarray(x.grad.tolist())], expected)


def test_floor_divide_backward_raises_as_torch():
    # torch: "derivative for aten::floor_divide is not implemented"; a silent zero gradient was wrong
    x = dj.tensor([3.0, 4.0], requires_grad=True)
    with pytest.raises(dj.errors.AutogradError, match="floor_divide"):
        dj.floor_divide(x, dj.tensor([2.0, 2.0])).sum().backward()
