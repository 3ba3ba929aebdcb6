"""Eager dispatch overhead: one op on 1- and 16-element float32 CPU tensors.

At these sizes the kernel does almost nothing, so the time is the cost of the
dispatcher itself: building the memo key, one dict lookup, the call into the
dtype-specialized Numba entry point and the output allocation (cache hit), or
the whole miss path: schema check, promotion, table walk, specialization
(cold miss; the Numba kernel is already compiled, compile time is in
bench_compile).  References timed in the same run: ``np.add`` on the same
arrays, a hand-written ``@numba.njit`` loop called directly into a
preallocated output, and ``torch.add`` where torch is importable.

Targets (DESIGN.md, "Measured, not assumed"), reported by the ``track_*``
benchmarks as ratios measured in one process with ``timeit`` (min of
repeats, interleaved so a load spike hits both sides alike):

* ``dj.add`` on 16 float32 <= 2.0 x ``np.add``   (track_add16_dj_over_numpy)
* ``dj.add`` on 16 float32 <  1.0 x ``torch.add`` (track_add16_dj_over_torch)
* ``x.add_(w)`` on 16 float32 <= 2.0 x ``np.add(a, b, out=a)`` (track_inplace_add16_dj_over_numpy, issue 26)
* ``x + row``, (4, 16) + (16,) float32, <= 2.0 x NumPy's (track_broadcast_add_dj_over_numpy, issue 26)
* ``dj.sum`` of 16 float32 <= 1.5 x ``torch.sum`` (track_sum16_dj_over_torch, issue 14)
* ``dj.matmul`` 64x64 float32 <= 1.1 x ``torch.matmul`` (track_matmul64_dj_over_torch, issue 14)

Why the cache-hit ``time_*`` benchmarks make 100 calls each (``...X100``:
divide by 100): the asv_runner installed here re-runs ``setup`` before every
timed call of a benchmark that has one (asv#966), so a sub-microsecond call
would be timed alone, after unrelated code, with two clock reads around it.
Measured that way ``np.add`` on 16 elements reads ~0.55 us against ~0.2 us
in a ``timeit`` loop, and every ratio is squeezed towards 1.  A loop of 100
calls inside the benchmark is timed the same way by any asv_runner.
"""

from __future__ import annotations

import functools
import math
import timeit

import numpy as np

import dispatch_jit as dj
from dispatch_jit.registry import lookup

SIZES = [1, 16]
LOOP = range(100)   # calls per timed call in the cache-hit benchmarks (see the module docstring)

# -- fixtures: cached per process, so re-running setup before each call is cheap --------------


@functools.cache
def _arrays(n: int):
    """Two float32 arrays of ``n`` elements and the tensors that wrap them; the first
    request also resolves (and compiles) every dispatch_jit call the suite times."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x, w = dj.from_numpy(a), dj.from_numpy(b)
    dj.add(x, w)
    x + w
    x * 2.0
    return a, b, x, w


@functools.cache
def _njit_add():
    """The hand-written reference, compiled: one loop, output preallocated by the caller."""
    import numba

    @numba.njit(nogil=True)
    def add_into(a, b, out):
        for i in range(a.shape[0]):
            out[i] = a[i] + b[i]

    a = np.zeros(1, np.float32)
    add_into(a, a, a)
    return add_into


@functools.cache
def _out(n: int) -> np.ndarray:
    return np.empty(n, np.float32)


def _torch():
    """torch, or NotImplementedError (asv's documented way to skip a benchmark)."""
    try:
        import torch
    except ImportError as e:
        raise NotImplementedError(f"torch is not importable ({e}); torch benchmarks skipped") from None
    return torch


@functools.cache
def _torch_inputs(n: int):
    """torch.add and two tensors sharing memory with _arrays(n), warmed up."""
    torch = _torch()
    a, b, _, _ = _arrays(n)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    torch.add(ta, tb)
    ta * 2.0
    return torch.add, ta, tb


def _interleaved_best(stmts: list[str], namespace: dict, number: int, repeat: int) -> list[float]:
    """Per-call seconds of each statement: min over ``repeat`` samples of ``number`` calls,
    the statements sampled in turn so that a burst of load from elsewhere hits all of them."""
    timers = [timeit.Timer(s, globals=namespace) for s in stmts]
    best = [math.inf] * len(stmts)
    for _ in range(repeat):
        for i, t in enumerate(timers):
            best[i] = min(best[i], t.timeit(number) / number)
    return best


# -- time_: cache hit --------------------------------------------------------------------------


class AddCacheHitX100:
    """100 already-resolved calls per timed call (divide by 100 for one call); every
    dispatch_jit call allocates a new output."""

    params = SIZES
    param_names = ["n"]

    def setup(self, n):
        # cheap after the first call: asv_runner may re-run it before every timed call
        self.a, self.b, self.x, self.w = _arrays(n)
        self.out = _out(n)
        self.kernel = _njit_add()

    def time_dj_add(self, n):
        f, x, w = dj.add, self.x, self.w
        for _ in LOOP:
            f(x, w)

    def time_dj_operator_add(self, n):
        x, w = self.x, self.w
        for _ in LOOP:
            x + w

    def time_dj_scalar_mul(self, n):
        x = self.x
        for _ in LOOP:
            x * 2.0

    def time_numpy_add(self, n):
        f, a, b = np.add, self.a, self.b
        for _ in LOOP:
            f(a, b)

    def time_numpy_scalar_mul(self, n):
        a = self.a
        for _ in LOOP:
            a * 2.0

    def time_njit_add_into_preallocated(self, n):
        f, a, b, out = self.kernel, self.a, self.b, self.out
        for _ in LOOP:
            f(a, b, out)


class TorchAddX100:
    """100 ``torch.add`` calls per timed call on the same sizes (skipped when torch is
    not importable)."""

    params = SIZES
    param_names = ["n"]

    def setup(self, n):
        self.add, self.ta, self.tb = _torch_inputs(n)

    def time_torch_add(self, n):
        f, a, b = self.add, self.ta, self.tb
        for _ in LOOP:
            f(a, b)

    def time_torch_scalar_mul(self, n):
        a = self.ta
        for _ in LOOP:
            a * 2.0


# -- time_: cold miss --------------------------------------------------------------------------


class AddColdMiss:
    """The first ``dj.add`` call after the op's memo is cleared: the whole miss path
    (the Numba kernel itself stays compiled).  ``number = 1`` and a fresh clear in
    ``setup`` make every sample exactly one miss, with either asv_runner behaviour."""

    params = SIZES
    param_names = ["n"]
    number = 1
    repeat = (20, 100, 5.0)     # (min samples, max samples, max seconds)
    warmup_time = 0.0

    def setup(self, n):
        self.a, self.b, self.x, self.w = _arrays(n)     # compiled there; the miss must not include it
        lookup("aten::add.Tensor").memo.clear()

    def time_dj_add_cold_miss(self, n):
        dj.add(self.x, self.w)


# -- track_: the targets, as ratios measured in one process ------------------------------------


class _RatioBase:
    """Shared setup for the ratio benchmarks: per-call times on 16 float32 elements,
    min of interleaved repeats."""

    unit = "ratio"
    calls_per_sample = 20_000   # ~40 ms per sample for dj.add
    samples = 7

    def setup(self):
        a, b, x, w = _arrays(16)
        out = _out(16)
        kernel = _njit_add()
        self.ns = {"dj_add": dj.add, "np_add": np.add, "kernel": kernel,
                   "a": a, "b": b, "x": x, "w": w, "out": out}

    def _ratio(self, stmt, reference):
        t, ref = _interleaved_best([stmt, reference], self.ns, self.calls_per_sample, self.samples)
        return t / ref


class Ratios(_RatioBase):
    """dispatch_jit against NumPy and the hand-written Numba loop."""

    def track_add16_dj_over_numpy(self):
        """dj.add / np.add, 16 float32, cache hit.  Target: <= 2.0."""
        return self._ratio("dj_add(x, w)", "np_add(a, b)")

    def track_add16_dj_over_njit(self):
        """dj.add / a direct call of a hand-written njit loop into a preallocated
        output: the dispatcher's whole cost over the bare kernel call.  No target."""
        return self._ratio("dj_add(x, w)", "kernel(a, b, out)")

    def track_operator_add16_dj_over_numpy(self):
        """``x + w`` / ``a + b``, 16 float32.  Same target as dj.add: <= 2.0."""
        return self._ratio("x + w", "a + b")

    def track_inplace_add16_dj_over_numpy(self):
        """``x.add_(w)`` / ``np.add(a, b, out=a)``, 16 float32, on copies (the in-place fast
        path; ~25x before it, issue 26).  Target: <= 2.0."""
        a, b, x, w = _arrays(16)
        self.ns.update(xi=dj.from_numpy(a.copy()), ai=a.copy())
        return self._ratio("xi.add_(w)", "np_add(ai, b, out=ai)")

    def track_broadcast_add_dj_over_numpy(self):
        """``m + row`` / NumPy's, (4, 16) + (16,) float32 (the broadcast path, a bias add; ~25x
        before it, issue 26).  Target: <= 2.0."""
        rng = np.random.default_rng(4)
        m, row = rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
        self.ns.update(m=m, row=row, tm=dj.from_numpy(m), trow=dj.from_numpy(row))
        self.ns["tm"] + self.ns["trow"]
        return self._ratio("tm + trow", "np_add(m, row)")


class TorchRatios(_RatioBase):
    """dispatch_jit against torch.add in the same process (skipped without torch)."""

    def setup(self):
        torch_add, ta, tb = _torch_inputs(16)
        _RatioBase.setup(self)
        self.ns.update(torch_add=torch_add, ta=ta, tb=tb)

    def track_add16_dj_over_torch(self):
        """dj.add / torch.add, 16 float32, cache hit.  Target: < 1.0."""
        return self._ratio("dj_add(x, w)", "torch_add(ta, tb)")


class SmallOpsVsTorch(_RatioBase):
    """The per-call path of the small ops a training step is made of, against torch in the same
    process (skipped without torch): a full reduction of 16 float32 (the 0-d output, the axis and
    dtype handling) and a 64x64 float32 matmul (the BLAS call and what surrounds it)."""

    # short samples, many of them: torch's two-thread pool stalls for whole samples when another
    # process holds a core, and the min must find the quiet ones
    calls_per_sample = 200
    samples = 40

    def setup(self):
        torch = _torch()
        _RatioBase.setup(self)
        rng = np.random.default_rng(0)
        v, m = rng.random(16, dtype=np.float32), rng.random((64, 64), dtype=np.float32)
        self.ns.update(dj=dj, torch=torch, s=dj.tensor(v), ts=torch.tensor(v), m=dj.tensor(m), tm=torch.tensor(m))
        dj.sum(self.ns["s"]), dj.matmul(self.ns["m"], self.ns["m"])      # compile outside the timing

    def time_dj_sum16(self):
        for _ in LOOP:
            dj.sum(self.ns["s"])

    def time_dj_matmul64(self):
        dj.matmul(self.ns["m"], self.ns["m"])

    def track_sum16_dj_over_torch(self):
        """dj.sum / torch.sum, 16 float32.  Target: <= 1.5."""
        return self._ratio("dj.sum(s)", "torch.sum(ts)")

    def track_matmul64_dj_over_torch(self):
        """dj.matmul / torch.matmul, 64x64 float32.  Target: <= 1.1."""
        return self._ratio("dj.matmul(m, m)", "torch.matmul(tm, tm)")
