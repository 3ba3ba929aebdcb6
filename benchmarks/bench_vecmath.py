"""Vectorized float32 math (issue 26, part 3): float32 exp, log, tanh, sigmoid, sin (and the
other vecmath rows) against NumPy and torch, at 3e4 and 1e6 elements.

Each parameter set times the three in turn, interleaved (``ROUNDS`` rounds of ``REPS``
calls each, the same input), and reports ratios of minima (the least disturbed runs on a
shared machine):

* ``track_dj_over_numpy``: dj / NumPy (the ufunc; sigmoid as 1 / (1 + exp(-x)), erf SciPy's
  ``scipy.special.erf`` where SciPy is installed).
  Target <= 1.0.
* ``track_dj_over_torch``: dj / torch (2 threads), when torch is installed.  Target <= 1.2.
* ``time_dj``: dj alone.

Before support/vecmath (libm per element; quiet machine, interleaved, min of 7): log 9.5x
NumPy and 14.8x torch at 3e4, tanh 3.5x / 4.1x, sin 3.7x / 5.0x, exp 1.8x / 3.3x.
At 1e6 elements (over the parallel threshold, 2**18) with torch imported, torch's OpenMP
workers and Numba's contend for the cores: medians there swing by an order of magnitude
while minima stay steady; read the minima (issue 26 part 1 owns the thread policy).

Measured 2026-11-29 on the 2-core x86-64 development machine (AVX-512, rocketlake) under a load of
11-12 (min of 9 interleaved rounds, torch imported, 3e4 elements), dj / NumPy: exp 1.54, log 1.38, log2 2.49 (was 3.6 with widened.py's float64 form), log1p
1.55 (was 6.1), tanh 3.8, sigmoid 0.54, sin 1.47, cos 1.4.  The njit loop alone (no dispatch):
log 1.26, exp 1.51, log2 2.74, log1p 1.58, tanh 3.5, sin 1.27.  LLVM vectorizes these loops
with 8-lane ymm registers on this AVX-512 CPU (rocketlake; its tuning prefers 256 bits) where
NumPy's loops use 16 lanes: with ``-prefer-256-bit`` added to NUMBA_CPU_FEATURES the same loops
measured log 1.00, exp 1.03, log2 2.24, log1p 1.33, tanh 2.6 (sin's float64 loop already uses
zmm: 1.27 either way).  At 1e6 elements the parallel kernels' minima swing with the load.

Since dispatch_jit/jit/vectors.py every generated loop is compiled for 512-bit vectors where the
CPU has AVX-512 (the function attribute, not the process-wide switch).  Measured 2026-11-29, same
machine, load 6.0-6.2 (1-min), dj through dispatch / NumPy and / torch, Numba and torch at 1
thread, each ratio of interleaved minima (9 rounds) in one process, the better of two processes
per column; before = the same kernels unmarked:

    op       n      /NumPy before -> after   /torch before -> after
    exp      3e4    1.55 -> 1.07             3.26 -> 2.27
    log      3e4    1.33 -> 1.06             1.84 -> 1.42
    tanh     3e4    3.54 -> 2.68             3.12 -> 2.44
    sigmoid  3e4    0.61 -> 0.50             1.34 -> 1.07
    sin      3e4    1.52 -> 1.46             1.68 -> 1.60
    exp      1e6    1.41 -> 1.17             2.00 -> 1.35
    log      1e6    1.25 -> 1.11             1.43 -> 1.29
    tanh     1e6    3.08 -> 2.81             2.28 -> 1.97
    sin      1e6    1.46 -> 1.37             1.79 -> 1.59

(sigmoid at 1e6: NumPy's three passes swing too much under this load to read.)  sum of 1e6
float32 150 us either way; a fused ``tanh(a * 0.5 + b) * a`` of 1e6 under ``dj.compile`` 1.20 ->
0.98 ms.  Every output of these ops, of sum/mean/prod/var/std/logsumexp/softmax/layer_norm (rows,
columns, full, 1e3 to 1e6) and of fused reductions compared bit for bit before and after: identical.
"""

from __future__ import annotations

import time

import numpy as np

OPS = ["exp", "log", "tanh", "sigmoid", "sin", "cos", "log1p", "expm1", "log2", "erf"]
SIZES = [30_000, 1_000_000]


def _numpy(op):
    if op == "sigmoid":
        return lambda a: 1.0 / (1.0 + np.exp(-a))
    if op == "erf":
        try:
            from scipy.special import erf
        except ImportError:
            return None
        return erf
    return getattr(np, op, None)


class VecMath:
    params = [OPS, SIZES]
    param_names = ["op", "n"]
    unit = "ratio"
    timeout = 300
    ROUNDS = 15

    def setup(self, op, n):
        import dispatch_jit as dj
        try:
            import torch
            torch.set_num_threads(2)
        except ImportError:
            torch = None
        x = np.random.default_rng(0).uniform(-4.0, 4.0, n).astype(np.float32)
        if op in ("log", "log2"):
            x = np.abs(x) + np.float32(0.01)
        if op == "log1p":
            x = np.abs(x)
        d = dj.asarray(x)
        dj_fn, np_fn = getattr(dj, op), _numpy(op)
        self.runs = {"dj": lambda: dj_fn(d)}
        if np_fn is not None:
            self.runs["numpy"] = lambda: np_fn(x)
        if torch is not None:
            t, t_fn = torch.from_numpy(x), getattr(torch, op)
            self.runs["torch"] = lambda: t_fn(t)
        self.reps = max(3, int(3e6 // n))
        for f in self.runs.values():
            f()
        self.best = None

    def _measure(self):
        if self.best is None:
            best = {k: float("inf") for k in self.runs}
            for _ in range(self.ROUNDS):
                for k, f in self.runs.items():
                    t0 = time.perf_counter()
                    for _ in range(self.reps):
                        f()
                    best[k] = min(best[k], (time.perf_counter() - t0) / self.reps)
            self.best = best
        return self.best

    def track_dj_over_numpy(self, op, n):
        b = self._measure()
        return b["dj"] / b["numpy"] if "numpy" in b else float("nan")

    def track_dj_over_torch(self, op, n):
        b = self._measure()
        return b["dj"] / b["torch"] if "torch" in b else float("nan")

    def time_dj(self, op, n):
        self.runs["dj"]()


class Gelu:
    """``F.gelu`` and its backward against torch's (2 threads), interleaved, ratio of minima, on a
    transformer MLP's activations ((16, 32, 256) float32, the GPT example's) and on 1e6 values.
    Target <= 1.2 (issue 26: gelu forward and backward were 19% of the GPT step).

    Measured (loaded machine, load 10-13; torch 1 thread; interleaved, minima) at (16, 32, 256),
    exact form: forward 385 us (9.6x torch) with gelu.py's float64 form, 155 us (4.1x torch's 38
    us) with erf_f32.py's float32 form; backward 400 us (5.4x) -> 188 us (2.7x torch's 70 us)."""

    params = [["none", "tanh"], ["forward", "backward"], [(16, 32, 256), (1_000_000,)]]
    param_names = ["approximate", "pass", "shape"]
    unit = "ratio"
    timeout = 300
    ROUNDS = 15

    def setup(self, approximate, pass_, shape):
        import dispatch_jit as dj
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape).astype(np.float32)
        g = rng.standard_normal(shape).astype(np.float32)
        d, dg = dj.asarray(x), dj.asarray(g)
        if pass_ == "forward":
            self.runs = {"dj": lambda: dj.nn.functional.gelu(d, approximate=approximate)}
        else:
            op = dj.ops.aten._gelu_erf_backward if approximate == "none" else dj.ops.aten._gelu_tanh_backward
            self.runs = {"dj": lambda: op(dg, d)}
        try:
            import torch
            torch.set_num_threads(2)
            t, tg = torch.from_numpy(x), torch.from_numpy(g)
            if pass_ == "forward":
                self.runs["torch"] = lambda: torch.nn.functional.gelu(t, approximate=approximate)
            else:
                self.runs["torch"] = lambda: torch.ops.aten.gelu_backward(tg, t, approximate=approximate)
        except ImportError:
            pass
        self.reps = max(3, int(2e6 // x.size))
        for f in self.runs.values():
            f()

    def track_dj_over_torch(self, approximate, pass_, shape):
        if "torch" not in self.runs:
            return float("nan")
        best = {k: float("inf") for k in self.runs}
        for _ in range(self.ROUNDS):
            for k, f in self.runs.items():
                t0 = time.perf_counter()
                for _ in range(self.reps):
                    f()
                best[k] = min(best[k], (time.perf_counter() - t0) / self.reps)
        return best["dj"] / best["torch"]

    def time_dj(self, approximate, pass_, shape):
        self.runs["dj"]()
