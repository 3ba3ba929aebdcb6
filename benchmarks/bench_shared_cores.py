"""Parallel kernels on shared cores: the eager and compiled elementwise loops above the
parallel grain, while other processes hold the cores (dispatch_jit/jit/threads.py).

``Loaded`` starts two busy processes in ``setup`` (after compiling) and kills them in
``teardown``; ``Quiet`` is the same without them.  Each ``track_`` is a ratio of
medians, dispatch_jit / NumPy, of calls interleaved in one run (a median, not a minimum:
a collapse shows in the typical call, which a minimum hides):

* ``Loaded.track_add_1e6_dj_over_numpy``: ``dj.add``, 1e6 float32.  Target <= 2.0
  (it was 8-60x before the threads' watch and spin count).
* ``Loaded.track_exp_1e6_dj_over_numpy``, ``track_add_2p18_dj_over_numpy`` (the
  smallest parallel size, where launch latency matters) and
  ``track_chain_1e6_dj_over_numpy`` (a ``dj.compile``'d fused chain against NumPy's
  eager chain): no targets of their own; they must not collapse either.
* ``Quiet.*``: the same ratios without the load; they must not get worse than
  without the watch (run with ``DISPATCH_JIT_WATCH_THREADS=0`` to compare).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np

import dispatch_jit as dj

N = 1_000_000
N_SMALL = 1 << 18
BUSY = "while True: pass"


def _chain(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def _np_chain(a, b, c):
    return np.maximum((a * b + c) * 2.0 - a, 0.0) * np.exp(-b)


class _Ratios:
    unit = "ratio"
    timeout = 300
    samples = 201        # interleaved samples per side
    busy = 0             # background processes

    def setup(self):
        rng = np.random.default_rng(0)
        self.a, self.b, self.c = (rng.standard_normal(N).astype(np.float32) for _ in range(3))
        self.x, self.y, self.z = (dj.from_numpy(v) for v in (self.a, self.b, self.c))
        self.small = self.a[:N_SMALL].copy(), self.b[:N_SMALL].copy()
        self.xs, self.ys = dj.from_numpy(self.small[0]), dj.from_numpy(self.small[1])
        self.chain = dj.compile(_chain)
        # compile before the load starts: a compile is not what is measured
        for f in (lambda: dj.add(self.x, self.y), lambda: dj.exp(self.x), lambda: dj.add(self.xs, self.ys),
                  lambda: self.chain(self.x, self.y, self.z)):
            f()
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(self.busy)]
        time.sleep(0.2 if self.busy else 0)

    def teardown(self):
        for p in getattr(self, "procs", ()):
            p.kill()
            p.wait()

    def _ratio(self, dj_call, np_call, number: int) -> float:
        """Median seconds per call of dj_call / NumPy's, samples of ``number`` calls taken in turn."""
        ts, refs = [], []
        for _ in range(self.samples):
            for f, out in ((dj_call, ts), (np_call, refs)):
                t0 = time.perf_counter()
                for _ in range(number):
                    f()
                out.append((time.perf_counter() - t0) / number)
        return statistics.median(ts) / statistics.median(refs)

    def track_add_1e6_dj_over_numpy(self):
        return self._ratio(lambda: dj.add(self.x, self.y), lambda: np.add(self.a, self.b), 5)

    def track_exp_1e6_dj_over_numpy(self):
        return self._ratio(lambda: dj.exp(self.x), lambda: np.exp(self.a), 3)

    def track_add_2p18_dj_over_numpy(self):
        a, b = self.small
        return self._ratio(lambda: dj.add(self.xs, self.ys), lambda: np.add(a, b), 20)

    def track_chain_1e6_dj_over_numpy(self):
        return self._ratio(lambda: self.chain(self.x, self.y, self.z), lambda: _np_chain(self.a, self.b, self.c), 2)


class Quiet(_Ratios):
    """No background load."""


class Loaded(_Ratios):
    """Two busy processes (on the 2-core machines: every core taken) while it runs."""

    busy = 2
