"""The reductions, scans, counting and index-wise writes of kernels/reduction/{composite,counting,scans}.py
and kernels/indexing/{composite,reduce}.py: one table of calls run in dispatch_jit and in PyTorch 2.13
where installed (values, dtypes, shapes, named-tuple types), NumPy oracles always, gradients against
PyTorch's, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, InvalidArgumentError, OutOfBoundsError, ShapeError

RNG = np.random.default_rng(7)
X = np.round(RNG.standard_normal((3, 5)) * 3, 2)
XN = X.copy()
XN[0, 1] = XN[2, 2] = XN[2, 4] = np.nan
XK = XN.copy()        # one NaN a row at most: which of several NaNs kthvalue picks is PyTorch's quickselect's choice
XN[1, :] = np.nan
TIES = np.array([[1.0, 3.0, 2.0, 3.0, np.nan, 0.0], [5.0, 1.0, 1.0, 7.0, 0.0, 7.0]])
I = np.array([[0, 1, 0, 4], [2, 0, 3, 3]])
IDX = np.array([[0, 1, 0, 2], [2, 2, 1, 0]])
SRC = np.round(RNG.standard_normal((2, 4)), 2)
SELF = np.round(RNG.standard_normal((2, 3)), 2)
M = np.array([[True, False, True], [False, False, True]])
F = ["float32", "float64"]
FI = F + ["int64"]


def _t(m, a):
    return m.tensor(a)


CASES = {
    "nansum": (lambda m, a: m.nansum(a, 1), (XN,), F),
    "nansum-int": (lambda m, a: a.nansum(), (I,), ["int64"]),
    "nanmean": (lambda m, a: m.nanmean(a, (0, 1), keepdim=True), (XN,), F),
    "nanmean-dim": (lambda m, a: a.nanmean(1), (XN,), F),
    "count_nonzero": (lambda m, a: m.count_nonzero(a, 0), (I,), FI),
    "count_nonzero-all": (lambda m, a: a.count_nonzero(), (I,), FI),
    "aminmax": (lambda m, a: m.aminmax(a, dim=1), (X,), FI),
    "aminmax-keep": (lambda m, a: a.aminmax(keepdim=True), (X,), F),
    "var_mean": (lambda m, a: m.var_mean(a, 1), (X,), F),
    "std_mean": (lambda m, a: m.std_mean(a, 0, False, True), (X,), F),
    "std_mean-corr": (lambda m, a: m.std_mean(a, correction=0), (X,), F),
    "var_mean-unbiased": (lambda m, a: m.var_mean(a, False), (X,), F),
    "kthvalue": (lambda m, a: m.kthvalue(a, 2, 1), (XK,), FI),
    "kthvalue-keep": (lambda m, a: a.kthvalue(3, 0, True), (X,), F),
    "nanmedian": (lambda m, a: m.nanmedian(a), (XN,), F),
    "nanmedian-dim": (lambda m, a: m.nanmedian(a, 1), (XK,), F),
    "nanmedian-int": (lambda m, a: a.nanmedian(0, keepdim=True), (I,), ["int64"]),
    "quantile": (lambda m, a: m.quantile(a, 0.3), (X,), F),
    "quantile-q": (lambda m, a: a.quantile(m.tensor([0.1, 0.5, 0.77], dtype=a.dtype), 1, True), (X,), F),
    "quantile-lower": (lambda m, a: m.quantile(a, 0.3, 0, interpolation="lower"), (X,), F),
    "quantile-higher": (lambda m, a: m.quantile(a, 0.3, 0, interpolation="higher"), (X,), F),
    "quantile-mid": (lambda m, a: m.quantile(a, 0.3, 1, interpolation="midpoint"), (X,), F),
    "quantile-nearest": (lambda m, a: m.quantile(a, 0.5, 1, interpolation="nearest"), (X,), F),
    "quantile-nan": (lambda m, a: m.quantile(a, 0.5, 1), (XN,), F),
    "nanquantile": (lambda m, a: m.nanquantile(a, 0.4, 1), (XN,), F),
    "nanquantile-keep": (lambda m, a: a.nanquantile(m.tensor([0.2, 0.9], dtype=a.dtype), keepdim=True), (XN,), F),
    "cummax": (lambda m, a: m.cummax(a, 1), (TIES,), FI),
    "cummin": (lambda m, a: a.cummin(0), (TIES,), FI),
    "logcumsumexp": (lambda m, a: m.logcumsumexp(a, 1), (np.array([[1.0, -300.0, 2.0, 50.0]]),), F),
    "argwhere": (lambda m, a: m.argwhere(a), (I,), FI),
    "histc": (lambda m, a: m.histc(a, 4), (X,), F),
    "histc-range": (lambda m, a: a.histc(7, -1, 1), (X,), F),
    "histogram": (lambda m, a: m.histogram(a, 4), (X,), F),
    "histogram-edges": (lambda m, a: a.histogram(m.tensor([-1.0, 0.0, 0.5, 2.0], dtype=a.dtype), density=True), (X,), F),
    "histogram-range-w": (lambda m, a: m.histogram(a, 5, range=(-1.0, 1.0), weight=a.abs()), (X,), F),
    "bincount": (lambda m, a: m.bincount(a), (np.array([0, 3, 3, 1, 7]),), ["int64"]),
    "bincount-w": (lambda m, a: a.bincount(a * 2, minlength=10), (np.array([0, 3, 3, 1]),), ["int64"]),
    "bucketize": (lambda m, a: m.bucketize(a, m.tensor([0, 1, 3]), right=True), (I,), ["int64"]),
    "isin": (lambda m, a: m.isin(a, m.tensor([1, 3])), (I,), ["int64"]),
    "isin-invert": (lambda m, a: m.isin(a, 1, invert=True), (I,), ["int64"]),
    "unique_consecutive": (lambda m, a: m.unique_consecutive(a, True, True), (np.array([[1, 1, 2], [2, 2, 1]]),),
                           ["int64"]),
    "unique_consecutive-dim": (lambda m, a: a.unique_consecutive(return_counts=True, dim=0),
                               (np.array([[1, 2], [1, 2], [3, 3], [1, 2]]),), FI),
    "repeat_interleave": (lambda m, a: m.repeat_interleave(a, 2, dim=1), (X,), FI),
    "repeat_interleave-t": (lambda m, a: a.repeat_interleave(m.tensor([1, 0, 2]), dim=0), (X,), F),
    "repeat_interleave-counts": (lambda m, a: m.repeat_interleave(a), (np.array([1, 0, 2, 1]),), ["int64"]),
    "masked_select": (lambda m, a: m.masked_select(a, m.tensor(M)), (SELF,), FI),
    "masked_scatter": (lambda m, a, s: a.masked_scatter(m.tensor(M[:1]), s), (SELF, SRC), F),
    "index_add": (lambda m, a, s: m.index_add(a, 1, m.tensor([0, 2, 0, 1]), s, alpha=2), (SELF, SRC), F),
    "index_copy": (lambda m, a, s: a.index_copy(1, m.tensor([2, 0]), s[:, :2]), (SELF, SRC), F),
    "index_fill": (lambda m, a: m.index_fill(a, 1, m.tensor([2, -3]), -1.5), (SELF,), F),
    "index_put": (lambda m, a: m.index_put(a, (m.tensor([1, 0, 1]), m.tensor([2, 2, 2])), m.tensor([1.0, 2, 3],
                                            dtype=a.dtype), True), (SELF,), F),
    "index_put-mask": (lambda m, a: a.index_put((m.tensor(M),), m.tensor(5.0, dtype=a.dtype)), (SELF,), F),
    "put": (lambda m, a: m.put(a, m.tensor([1, -1, 1]), m.tensor([1.0, 2, 3], dtype=a.dtype), True), (SELF,), F),
}
for _r in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        CASES[f"scatter_reduce-{_r}-{_inc}"] = (
            lambda m, a, s, r=_r, inc=_inc: m.scatter_reduce(a, 1, m.tensor(IDX), s, r, include_self=inc),
            (SELF, SRC), ["float64"] + (["int64"] if _r == "mean" else []))
for _r in ("prod", "mean", "amax", "amin"):
    CASES[f"index_reduce-{_r}"] = (lambda m, a, s, r=_r: a.index_reduce(1, m.tensor([0, 2, 0, 0]), s, r,
                                                                        include_self=r != "mean"), (SELF, SRC),
                                   ["float64", "int64"])
PARAMS = [(name, dt) for name, (_, _, dts) in CASES.items() for dt in dts]


def _flat(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.torch
@pytest.mark.parametrize("name,dt", PARAMS)
def test_against_torch(name, dt):
    torch = pytest.importorskip("torch")
    call, arrays, _ = CASES[name]
    got = call(dj, *[dj.tensor(a.astype(dt)) for a in arrays])
    want = call(torch, *[torch.tensor(a.astype(dt)) for a in arrays])
    assert type(got).__name__ == type(want).__name__, name      # named tuples: torch.return_types'
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype.name == str(w.dtype).split(".")[1], name
        assert tuple(g.shape) == tuple(w.shape), name
        tol = 1e-6 if dt == "float32" else 1e-12
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=tol, atol=tol)


ORACLE = {
    "nansum": lambda a: np.nansum(a, 1),
    "nanmean-dim": lambda a: np.array([np.nanmean(r) if not np.isnan(r).all() else np.nan for r in a]),
    "count_nonzero": lambda a: np.count_nonzero(a, 0),
    "quantile": lambda a: np.quantile(a, 0.3), "nanquantile": lambda a: np.nanquantile(a, 0.4, 1),
    "logcumsumexp": lambda a: np.logaddexp.accumulate(a, 1),
    "cummax": lambda a: np.fmax.accumulate(a, 1) if False else np.maximum.accumulate(a, 1),
    "bincount": lambda a: np.bincount(a), "argwhere": lambda a: np.argwhere(a),
    "isin": lambda a: np.isin(a, [1, 3]), "repeat_interleave": lambda a: np.repeat(a, 2, 1),
    "masked_select": lambda a: a[M], "histogram": lambda a: np.histogram(a, 4)[0],
"histc-range": lambda a: np.histogram(a, 7, (-1, 1))[0],
}


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_against_numpy(name):
    call, arrays, _ = CASES[name]
    got = _flat(call(dj, *[dj.tensor(a) for a in arrays]))[0]
    np.testing.assert_allclose(got.numpy(), ORACLE[name](*arrays), rtol=1e-12)


GRAD = ["nansum", "nanmean", "aminmax", "var_mean", "std_mean", "kthvalue", "nanmedian-dim", "quantile-q",
        "nanquantile", "cummax", "cummin", "logcumsumexp", "repeat_interleave-t", "masked_select", "masked_scatter",
        "index_add", "index_copy", "index_fill", "index_put", "put", "index_reduce-amax", "index_reduce-mean"] + [f"scatter_reduce-{r}-{i}" for r in
                                                                       ("sum", "prod", "mean", "amax", "amin")
                                                                       for i in (True, False)]


@pytest.mark.torch
@pytest.mark.parametrize("name", GRAD)
def test_gradients_against_torch(name):
    torch = pytest.importorskip("torch")
    call, arrays, _ = CASES[name]
    arrays = [np.where(np.isnan(a), 0.5, a) if name == "cummax" else a for a in arrays]
    xs = [dj.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    got, want = _flat(call(dj, *xs)), _flat(call(torch, *ts))
    ws = [RNG.standard_normal(tuple(w.shape)) for w in want]
    sum(((g * dj.tensor(w)).nansum() for g, w in zip(got, ws) if g.dtype.name == "float64"), dj.tensor(0.0)).backward()
    sum(((g * torch.tensor(w)).nansum() for g, w in zip(want, ws) if g.dtype == torch.float64)).backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_running_extremes_follow_torchs_ties_and_nans():
    r = dj.cummax(dj.tensor(TIES), 1)
    assert type(r).__name__ == "cummax"
    assert r.indices.tolist() == [[0, 1, 1, 3, 4, 4], [0, 0, 0, 3, 3, 5]]   # ties go to the later element
    assert dj.cummin(dj.tensor([3.0]).reshape(()), 0).indices.tolist() == 0


def test_errors():
    x = dj.tensor(X)
    with pytest.raises(DTypeError, match="floating point"):
        dj.nanmean(dj.tensor(I))
    with pytest.raises(IndexError, match="out of range"):
        dj.kthvalue(x, 6, 1)
    with pytest.raises(InvalidArgumentError, match=r"range \[0, 1\]"):
        dj.quantile(x, 1.5)
    with pytest.raises(DTypeError, match="float or double"):
        dj.quantile(dj.tensor(I), 0.5)
    with pytest.raises(InvalidArgumentError, match="interpolation"):
        dj.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(ShapeError, match="non-negative integral"):
        dj.bincount(dj.tensor([1.0]))
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        dj.bincount(dj.tensor([-1, 2]))
    with pytest.raises(ShapeError, match="1 dimension"):
        dj.bucketize(dj.tensor([1]), dj.tensor([[1, 2]]))
    with pytest.raises(InvalidArgumentError, match="max must be larger than min"):
        dj.histc(x, 4, 2, 1)
    with pytest.raises(DTypeError, match="BoolTensor"):
        dj.masked_select(x, dj.tensor(I))
    with pytest.raises(ShapeError, match="Number of elements of source"):
        dj.masked_scatter(dj.zeros(3), dj.tensor([True, True, True]), dj.zeros(2))
    with pytest.raises(OutOfBoundsError, match="out of bounds"):
        dj.index_add(dj.zeros(3), 0, dj.tensor([3]), dj.ones(1))
    with pytest.raises(OutOfBoundsError, match="out of bounds"):
        dj.put(dj.zeros(3), dj.tensor([-4]), dj.ones(1))
    with pytest.raises(InvalidArgumentError, match="reduce argument"):
        dj.scatter_reduce(dj.zeros(3), 0, dj.tensor([0]), dj.ones(1), "max")
    with pytest.raises(InvalidArgumentError, match="negative"):
        dj.repeat_interleave(dj.tensor([1, 2]), dj.tensor([1, -1]))
    zero = dj.tensor([0.0, 2.0], dtype=dj.float64, requires_grad=True)
    out = dj.scatter_reduce(zero, 0, dj.tensor([1]), dj.tensor([3.0], dtype=dj.float64), "prod")
    with pytest.raises(RuntimeError, match="zero"):
        out.sum().backward()
    assert math.isnan(dj.nanmedian(dj.tensor([math.nan, math.nan])).item())


def test_scatter_reduce_traces_without_a_break_and_equals_eager():
    # its Meta kernel: a trace learns the result's shape and dtype without running the kernel on
    # placeholders (whose index held arbitrary memory: every call broke the graph)
    import warnings
    x = dj.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    idx, src = dj.tensor([[0, 1, 0], [1, 0, 1]]), dj.tensor(np.full((2, 3), 2.0), requires_grad=True)

    def f(x, i, s):
        return (x.scatter_reduce(0, i, s, "amax", include_self=False) * 3).sum()
    compiled = dj.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # a graph break warns
        for _ in range(2):
            got, want = compiled(x, idx, src), f(x, idx, src)
            assert got.item() == want.item()
    with pytest.raises(InvalidArgumentError, match="reduce argument"):
        dj.compile(lambda x, i, s: x.scatter_reduce(0, i, s, "median"))(x, idx, src)
