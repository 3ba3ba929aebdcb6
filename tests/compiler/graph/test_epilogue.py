"""Reductions as fusion epilogues: a fused region may end in sum, mean, max,
min or prod (over all axes or some, keepdim or not), folded into the loop.
Compiled results equal eager mode's (dtype exactly, values within float
tolerance); the reduced intermediate is never stored; sizes do not
recompile.  Compiled functions are module-level so the Numba compiles
(0.1-0.5 s each) are shared by the tests."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler import compile
from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN

KINDS = ["sum", "mean", "max", "min", "prod"]
RNG = np.random.default_rng(0)


def T(shape, dtype=np.float32, lo=-2, hi=2):
    a = RNG.uniform(lo, hi, size=shape)
    return dj.from_numpy(np.round(a).astype(dtype) if np.dtype(dtype).kind in "iu" else a.astype(dtype))


def assert_close(got, want, rtol=None):
    assert type(got) is type(want)
    if isinstance(want, (tuple, list)):
        for g, w in zip(got, want):
            assert_close(g, w, rtol)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    g, w = got.numpy(), want.numpy()
    if g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        tol = rtol or (1e-5 if g.dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# the reductions max/min over axes are PyTorch's amax/amin (x.max(dim) returns values and indices)
METHOD = {"max": "amax", "min": "amin"}


def _chain(kind, **kw):
    return lambda a, b, c: getattr(a * b + c, METHOD.get(kind, kind))(**kw)


# one compiled function per (kind, axes): every test below shares them
FULL = {k: compile(_chain(k)) for k in KINDS}
AXES = [dict(axis=1), dict(axis=1, keepdims=True), dict(axis=0), dict(axis=(0, 2)), dict(axis=-1, keepdims=True)]
BY_AXES = {(k, i): compile(_chain(k, **kw)) for k in KINDS for i, kw in enumerate(AXES)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_full_reduction_of_broadcasting_chain_equals_eager(kind, dtype):
    if kind == "mean" and dtype == np.int32:
        pytest.skip("mean of ints raises in eager mode (and compiled mode runs that eagerly)")
    a, b, c = T((4, 5), dtype), T((4, 5), dtype), T((5,), dtype)     # c broadcasts: the strided loop
    hi = 1.2 if kind == "prod" else 2
    a2, b2, c2 = T((7, 9), dtype, -hi, hi), T((7, 9), dtype, -hi, hi), T((7, 9), dtype, -hi, hi)   # flat loop
    f = FULL[kind]
    for args in ((a, b, c), (a2, b2, c2)):
        assert_close(f(*args), _chain(kind)(*args))
    assert "0 eager step(s)" in f.explain()


@pytest.mark.parametrize("i", range(len(AXES)))
@pytest.mark.parametrize("kind", KINDS)
def test_reduction_over_axes_equals_eager(kind, i):
    a, b, c = T((3, 4, 5)), T((3, 4, 5)), T((4, 1))
    assert_close(BY_AXES[kind, i](a, b, c), _chain(kind, **AXES[i])(a, b, c))


SCALAR_AND_CASTS = compile(lambda a, b: ((a * 2.5 - b) > 0.0).sum(axis=1))        # bool -> int64
INTS = compile(lambda a, b: ((a * b + 3).sum(), (a - b).prod(axis=0), (a + b).amax(axis=1, keepdims=True)))
WHERE = compile(lambda a, b: dj.where(a > 0, a, b * 2.0).mean(axis=0))
MIXED = compile(lambda a, b: (a * b + 1).sum())                                   # int32 * float32


def test_scalars_comparisons_where_and_integer_dtype_rules():
    a, b = T((6, 7)), T((6, 7))
    assert_close(SCALAR_AND_CASTS(a, b), ((a * 2.5 - b) > 0.0).sum(axis=1))
    assert SCALAR_AND_CASTS(a, b).dtype == dj.int64
    assert_close(WHERE(a, b), dj.where(a > 0, a, b * 2.0).mean(axis=0))
    i, j = T((6, 7), np.int32, -5, 5), T((6, 7), np.int32, -5, 5)
    got, want = INTS(i, j), ((i * j + 3).sum(), (i - j).prod(axis=0), (i + j).amax(axis=1, keepdims=True))
    assert [g.dtype for g in got] == [dj.int64, dj.int64, dj.int32]
    assert_close(got, want)
    assert_close(MIXED(i, a), (i * a + 1).sum())


ONE = compile(lambda a, b, c: (a * b + c).sum())


def test_chain_then_sum_is_one_kernel_and_stores_nothing_else():
    a, b, c = T((8, 8)), T((8, 8)), T((8, 8))
    assert_close(ONE(a, b, c), (a * b + c).sum())
    plan = ONE._entry().plan
    assert len(plan.steps) == 1 and len(plan.fused) == 1
    region = plan.fused[0].region
    assert region.outputs == [] and region.reduce.kind == "sum"   # a * b + c is never materialized
    assert "epilogue" in ONE.graph()
    code = ONE.code()
    # the sum folds in the written lane order (support/loops/lanes.py), every step strict
    assert "prange" in code and "_sadd(ln[lu + u]" in code and "_radd" not in code.split("\n", 2)[2]


def test_new_sizes_do_not_recompile():
    f = compile(lambda a, b: (a * b - 1.0).amax(axis=1))
    compiles = None
    for n in (3, 40, 500):
        a, b = T((n, n + 1)), T((n, n + 1))
        assert_close(f(a, b), (a * b - 1.0).amax(axis=1))
        compiles = f.cache_info().compiles if compiles is None else compiles   # 0 if loaded from disk
    info = f.cache_info()
    assert info.traces == 1 and info.compiles == compiles


SHARED = compile(lambda a, b: ((a * b).sum(axis=0), (a * b) + 1.0))


def test_value_used_elementwise_and_reduced_is_stored_once():
    a, b = T((5, 6)), T((5, 6))
    assert_close(SHARED(a, b), ((a * b).sum(axis=0), (a * b) + 1.0))
    regions = [f.region for f in SHARED._entry().plan.fused]
    assert regions[0].reduce is not None and len(regions[0].outputs) == 1


def test_nan_propagates_and_empty_inputs_behave_as_eager():
    x = np.ones((3, 4), np.float32)
    x[1, 2] = np.nan
    a, b = dj.from_numpy(x), T((3, 4))
    for kind in ("max", "min"):
        assert_close(FULL[kind](a, b, b), _chain(kind)(a, b, b))
        assert_close(BY_AXES[kind, 0](*(dj.from_numpy(x[None].repeat(2, 0)),) * 3),
                     _chain(kind, **AXES[0])(*(dj.from_numpy(x[None].repeat(2, 0)),) * 3))
    e = T((0, 3))
    assert_close(FULL["sum"](e, e, e), _chain("sum")(e, e, e))
    assert_close(FULL["mean"](e, e, e), _chain("mean")(e, e, e))
    with pytest.raises(Exception) as want:
        _chain("max")(e, e, e)
    with pytest.raises(type(want.value)):
        FULL["max"](e, e, e)


def test_large_inputs_take_the_parallel_chunked_loops():
    n = PARALLEL_MIN + 12345
    a, b, c = T((n,)), T((n,)), T((n,))
    assert_close(FULL["sum"](a, b, c), _chain("sum")(a, b, c), rtol=1e-6)
    assert_close(FULL["max"](a, b, c), _chain("max")(a, b, c))
    m = T((2, n // 2)), T((2, n // 2)), T((n // 2,))           # strided full, and rows/cols over axes
    f = compile(lambda a, b, c: ((a * b + c).sum(), (a * b - c).mean(axis=0), (a + b * c).sum(axis=1)))
    assert_close(f(*m), ((m[0] * m[1] + m[2]).sum(), (m[0] * m[1] - m[2]).mean(axis=0),
                         (m[0] + m[1] * m[2]).sum(axis=1)), rtol=1e-5)
