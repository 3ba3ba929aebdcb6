"""Kernel throughput per op family x dtype x size, against the NumPy equivalent.

Families: unary (exp, sqrt, abs), binary (add, mul, maximum, div),
comparison (gt, eq), where, reductions (sum, max, mean, var, argmax; over all
elements and along each axis of a 2-D input), matmul (square, 64/256/1024)
and cat.  Dtypes: float32, float64, and int64 where the op is defined for
integers by the array API (abs, add, mul, maximum, comparisons, where, sum,
max, argmax, cat); other int64 cases are skipped.  Sizes: 1e3, 1e5 and 1e7
elements; at 1e3 the dispatch overhead still shows, at 1e7 it is memory
bandwidth (and, for exp, libm calls: see DESIGN.md "Facts measured").

Each family has a dispatch_jit class (``Unary.time_dj``: the public API) and a
NumPy class on the same inputs (``UnaryNumpy.time_numpy``); both allocate
their output on every call.  Kernels are compiled in the dispatch_jit
class's ``setup`` by one call at the benchmark's size, so the parallel
(prange) variants that large outputs select are compiled too; the NumPy
classes compile nothing.

Targets, reported by the ``track_*`` benchmarks of ``Targets`` as ratios
measured in one process (min of interleaved repeats):

* elementwise add and exp, 1e7 float32, vs NumPy  <= 1.0
* sum, 1e7 float32, vs ``np.sum``                 <= 1.3
* matmul, 1024x1024 float32, vs ``np.matmul``     <= 1.2
* sin + cos, 1e6 float32, vs torch (no target of its own: the autograd chain's
  forward and backward use them); and sin where every 2048-element chunk holds
  one |x| >= 2**24 (the exact, table-reduced form), vs NumPy

Those use 1e7 elements or 1024x1024 matrices and are marked ``slow = True``,
which tests/test_benchmarks_import.py honours.
"""

from __future__ import annotations

import functools
import math
import timeit

import numpy as np

import dispatch_jit as dj

SIZES = [1_000, 100_000, 10_000_000]
DTYPES = ["float32", "float64", "int64"]
SHAPES_2D = {1_000: (20, 50), 100_000: (200, 500), 10_000_000: (2_000, 5_000)}   # reductions

# ops the array API defines for integer inputs (the rest are floating-only there)
INT_OK = {"abs", "add", "mul", "maximum", "gt", "eq", "where", "sum", "max", "argmax", "cat"}


def _check_valid(op: str, dtype: str) -> None:
    if dtype == "int64" and op not in INT_OK:
        raise NotImplementedError(f"{op} on int64 is not benchmarked (floating-only in the array API)")


@functools.cache
def _data(shape, dtype: str, seed: int = 0, kind: str = "normal") -> np.ndarray:
    """Deterministic input; cached so parameter sets that share an input build it once."""
    rng = np.random.default_rng(seed)
    if dtype == "int64":
        a = rng.integers(-1_000, 1_000, size=shape, dtype=np.int64)
        return np.abs(a) + 1 if kind == "positive" else a
    if kind == "positive":       # sqrt's domain and div's denominator: no NaNs, no zeros
        return rng.uniform(0.5, 2.0, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _interleaved_best(fns, number: int, repeat: int) -> list[float]:
    """Per-call seconds of each callable: min over ``repeat`` samples of ``number`` calls,
    the callables sampled in turn so that a burst of load from elsewhere hits all of them."""
    best = [math.inf] * len(fns)
    for _ in range(repeat):
        for i, f in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(f, number=number) / number)
    return best


# -- builders: (params) -> (dispatch_jit call, NumPy call), both zero-argument ------------------


def _unary(op, dtype, n):
    _check_valid(op, dtype)
    a = _data((n,), dtype, kind="positive" if op == "sqrt" else "normal")
    x, f, g = dj.from_numpy(a), getattr(dj, op), getattr(np, op)
    return (lambda: f(x)), (lambda: g(a))


_NP_BINARY = {"add": np.add, "mul": np.multiply, "maximum": np.maximum, "div": np.divide,
              "gt": np.greater, "eq": np.equal}


def _binary(op, dtype, n):
    _check_valid(op, dtype)
    a = _data((n,), dtype, seed=1)
    b = _data((n,), dtype, seed=2, kind="positive" if op == "div" else "normal")
    x, y, f, g = dj.from_numpy(a), dj.from_numpy(b), getattr(dj, op), _NP_BINARY[op]
    return (lambda: f(x, y)), (lambda: g(a, b))


def _where(dtype, n):
    a, b = _data((n,), dtype, seed=1), _data((n,), dtype, seed=2)
    c = a > b
    x, y, cond = dj.from_numpy(a), dj.from_numpy(b), dj.from_numpy(c)
    return (lambda: dj.where(cond, x, y)), (lambda: np.where(c, a, b))


def _reduce(op, dtype, n, axis):
    _check_valid(op, dtype)
    a = _data(SHAPES_2D[n], dtype)
    # NumPy's max is PyTorch's amax (dj.max(x, dim) also returns indices); NumPy's var is the biased one
    x, f, g = dj.from_numpy(a), getattr(dj, {"max": "amax"}.get(op, op)), getattr(np, op)
    kw = {"correction": 0} if op == "var" else {}
    return (lambda: f(x, axis=axis, **kw)), (lambda: g(a, axis=axis))


def _matmul(dtype, size):
    a, b = _data((size, size), dtype, seed=1), _data((size, size), dtype, seed=2)
    x, y = dj.from_numpy(a), dj.from_numpy(b)
    return (lambda: dj.matmul(x, y)), (lambda: np.matmul(a, b))


def _cat(dtype, n):
    arrays = [_data((n // 4,), dtype, seed=s) for s in range(4)]
    tensors = [dj.from_numpy(a) for a in arrays]
    return (lambda: dj.cat(tensors, axis=0)), (lambda: np.concatenate(arrays, axis=0))


# -- time_: one class per family and side ------------------------------------------------------
# The dispatch_jit side and the NumPy side are separate classes so that a NumPy
# benchmark's setup (run in its own process by asv) compiles nothing.


class _DJ:
    """``time_dj``: the op through dispatch_jit's public API, compiled in setup."""

    timeout = 300

    def setup(self, *params):
        self.dj_call, _ = self.build(*params)
        self.dj_call()

    def time_dj(self, *params):
        self.dj_call()


class _NumPy:
    """``time_numpy``: the NumPy equivalent on the same inputs."""

    timeout = 300

    def setup(self, *params):
        _, self.np_call = self.build(*params)

    def time_numpy(self, *params):
        self.np_call()


class _UnaryParams:
    params = [["exp", "sqrt", "abs", "sin"], DTYPES, SIZES]
    param_names = ["op", "dtype", "n"]
    build = staticmethod(_unary)


class Unary(_UnaryParams, _DJ):
    pass


class UnaryNumpy(_UnaryParams, _NumPy):
    pass


class _BinaryParams:
    params = [["add", "mul", "maximum", "div"], DTYPES, SIZES]
    param_names = ["op", "dtype", "n"]
    build = staticmethod(_binary)


class Binary(_BinaryParams, _DJ):
    pass


class BinaryNumpy(_BinaryParams, _NumPy):
    pass


class _CompareParams:
    params = [["gt", "eq"], DTYPES, SIZES]
    param_names = ["op", "dtype", "n"]
    build = staticmethod(_binary)


class Compare(_CompareParams, _DJ):
    pass


class CompareNumpy(_CompareParams, _NumPy):
    pass


class _WhereParams:
    params = [DTYPES, SIZES]
    param_names = ["dtype", "n"]
    build = staticmethod(_where)


class Where(_WhereParams, _DJ):
    pass


class WhereNumpy(_WhereParams, _NumPy):
    pass


class _ReduceParams:
    """Over all elements (axis=None) and along each axis of a 2-D C-contiguous input
    (axis 0: down the columns, strided; axis 1: along the rows, contiguous)."""

    params = [["sum", "max", "mean", "var", "argmax"], DTYPES, SIZES, [None, 0, 1]]
    param_names = ["op", "dtype", "n", "axis"]
    build = staticmethod(_reduce)


class Reduce(_ReduceParams, _DJ):
    pass


class ReduceNumpy(_ReduceParams, _NumPy):
    pass


class _MatmulParams:
    """Square matmul."""

    params = [["float32", "float64"], [64, 256, 1024]]
    param_names = ["dtype", "size"]
    build = staticmethod(_matmul)


class Matmul(_MatmulParams, _DJ):
    """``time_dj_operator`` is the same product through ``x @ y``."""

    def setup(self, dtype, size):
        _DJ.setup(self, dtype, size)
        a, b = _data((size, size), dtype, seed=1), _data((size, size), dtype, seed=2)
        self.x, self.y = dj.from_numpy(a), dj.from_numpy(b)
        self.x @ self.y

    def time_dj_operator(self, dtype, size):
        self.x @ self.y


class MatmulNumpy(_MatmulParams, _NumPy):
    pass


class _CatParams:
    """Four 1-D pieces of n/4 elements each, joined along axis 0."""

    params = [DTYPES, SIZES]
    param_names = ["dtype", "n"]
    build = staticmethod(_cat)


class Cat(_CatParams, _DJ):
    pass


class CatNumpy(_CatParams, _NumPy):
    pass


# -- track_: the targets, as ratios measured in one process ------------------------------------


def _slow(fn):
    """Marks a benchmark that inherently uses 1e7 elements or 1024x1024 matrices;
    tests/test_benchmarks_import.py skips those."""
    fn.slow = True
    return fn


class Targets:
    """dispatch_jit time / NumPy time for the cases the project's targets name.
    Each method builds its inputs, compiles with one call, then times both sides."""

    unit = "ratio"
    timeout = 300
    samples = 7

    def _ratio(self, dj_call, np_call, number):
        dj_call()
        np_call()
        t, ref = _interleaved_best([dj_call, np_call], number, self.samples)
        return t / ref

    def _vectors(self):
        a, b = _data((10_000_000,), "float32", seed=1), _data((10_000_000,), "float32", seed=2)
        return a, b, dj.from_numpy(a), dj.from_numpy(b)

    @_slow
    def track_add_1e7_float32_dj_over_numpy(self):
        """dj.add / np.add, 1e7 float32, new output each call.  Target: <= 1.0."""
        a, b, x, y = self._vectors()
        return self._ratio(lambda: dj.add(x, y), lambda: np.add(a, b), number=3)

    @_slow
    def track_exp_1e7_float32_dj_over_numpy(self):
        """dj.exp / np.exp, 1e7 float32, new output each call.  Target: <= 1.0."""
        a, _, x, _ = self._vectors()
        return self._ratio(lambda: dj.exp(x), lambda: np.exp(a), number=2)

    @_slow
    def track_sum_1e7_float32_dj_over_numpy(self):
        """dj.sum / np.sum over all 1e7 float32 elements.  Target: <= 1.3."""
        a, _, x, _ = self._vectors()
        return self._ratio(lambda: dj.sum(x), lambda: np.sum(a), number=3)

    @_slow
    def track_matmul_1024_float32_dj_over_numpy(self):
        """dj.matmul / np.matmul, 1024x1024 float32.  Target: <= 1.2."""
        a, b = _data((1024, 1024), "float32", seed=1), _data((1024, 1024), "float32", seed=2)
        x, y = dj.from_numpy(a), dj.from_numpy(b)
        return self._ratio(lambda: dj.matmul(x, y), lambda: np.matmul(a, b), number=1)

    def track_sin_huge_args_1e6_float32_dj_over_numpy(self):
        """dj.sin / np.sin, 1e6 float32 with one |x| = 1e30 in every 2048 elements: each chunk
        runs the exact form (Payne-Hanek table reduction for the large element)."""
        a = _data((1_000_000,), "float32", seed=3) * np.float32(3)     # a new array: _data is cached
        a[::2048] = np.float32(1e30)
        x = dj.from_numpy(a)
        return self._ratio(lambda: dj.sin(x), lambda: np.sin(a), number=5)


class SinCosVsTorch:
    """(dj.sin + dj.cos) / (torch.sin + torch.cos), 1e6 float32, standard normal times 3: the
    float32 forms that vectorize (kernels/support/sincos_f32.py) against PyTorch's SIMD ones."""

    unit = "ratio"
    timeout = 120

    def setup(self):
        try:
            import torch
        except ImportError:
            raise NotImplementedError("torch is not installed") from None     # asv's skip
        a = _data((1_000_000,), "float32", seed=3) * np.float32(3)
        self.x, self.tx, self.torch = dj.from_numpy(a), torch.from_numpy(a), torch

    def track_sincos_1e6_float32_dj_over_torch(self):
        x, tx, torch = self.x, self.tx, self.torch
        return Targets()._ratio(lambda: (dj.sin(x), dj.cos(x)), lambda: (torch.sin(tx), torch.cos(tx)), number=5)
