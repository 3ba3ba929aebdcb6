"""One thread policy for the process (issue 26, part 1): a training step must not collapse
when torch is imported in the same process, nor under a background load of two busy
processes (dispatch_jit/jit/threads.py: ``dj.set_num_threads``, each BLAS product's thread
count from its sizes, OpenBLAS's and libgomp's wait settings).

Each class imports torch first when it is installed (the usual process of someone comparing
or migrating; its pool and its own libgomp are then loaded), builds the step of
``dispatch_jit/tools/training.py`` in each dj mode (the parameter: eager, the loss under
``@dj.compile``, the whole step compiled, the lazy mode) and torch eager, and times them
quiet and with two busy processes, in turn (``ROUNDS`` rounds of quiet then loaded,
``steps`` steps each), the medians over all rounds:

* ``track_dj_step_loaded_over_quiet``: median loaded step / median quiet step, dj's mode.
  Target <= 1.5 (before the policy, MLP, torch imported, load ~3 from other processes: every
  mode 12 ms quiet and 16 ms loaded, against 0.12-0.24 ms unloaded and uncontended).
* ``track_torch_step_loaded_over_quiet``: the same for torch eager (a reference: not ours).
* ``track_dj_over_torch_quiet`` / ``_loaded``: dj's mode / torch eager, each condition.

``MLP``: issue 14's MLP with SGD, products of ~1e6 flops (one BLAS thread each).  ``Wide``:
the wide MLP with Adam, products of ~4e9 flops (every thread): the threaded regime.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

BUSY = "while True: pass"


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    return torch


class _Step:
    params = [["eager", "compile", "step", "lazy"]]
    param_names = ["mode"]
    unit = "ratio"
    timeout = 600
    size = "mlp"
    steps = 60               # per round and condition
    ROUNDS = 3

    def setup(self, mode):
        self.torch = _torch()       # first: torch's pool and libgomp load before dispatch_jit's
        from dispatch_jit.tools import training
        x, y, init = training._data(self.size)
        self.dj_step, _ = training._dj_step(mode, x, y, init, training.SIZES[self.size][4])
        self.torch_step = None
        if self.torch is not None:
            self.torch_step, _ = training._torch_step(x, y, init, False, training.SIZES[self.size][4])
        for _ in range(3):
            self.dj_step()
            if self.torch_step:
                self.torch_step()
        self.times = {}

    def _measure(self):
        if self.times:
            return self.times
        runs = {"dj": self.dj_step, "torch": self.torch_step}
        t = {(k, c): [] for k in runs for c in ("quiet", "loaded")}
        for _ in range(self.ROUNDS):
            for cond in ("quiet", "loaded"):
                procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2 if cond == "loaded" else 0)]
                try:
                    time.sleep(0.2 if procs else 0)
                    for k, f in runs.items():
                        if f is None:
                            continue
                        for _ in range(self.steps):
                            t0 = time.perf_counter()
                            f()
                            t[k, cond].append(time.perf_counter() - t0)
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
        self.times = {key: statistics.median(v) for key, v in t.items() if v}
        return self.times

    def _ratio(self, a, b) -> float:
        t = self._measure()
        if a not in t or b not in t:
            raise NotImplementedError("torch is not installed")     # asv's skip
        return t[a] / t[b]

    def track_dj_step_loaded_over_quiet(self, mode):
        return self._ratio(("dj", "loaded"), ("dj", "quiet"))

    def track_torch_step_loaded_over_quiet(self, mode):
        return self._ratio(("torch", "loaded"), ("torch", "quiet"))

    def track_dj_over_torch_quiet(self, mode):
        return self._ratio(("dj", "quiet"), ("torch", "quiet"))

    def track_dj_over_torch_loaded(self, mode):
        return self._ratio(("dj", "loaded"), ("torch", "loaded"))


class MLP(_Step):
    """Issue 14's MLP (512 x 20 -> 64 -> 3, SGD)."""


class Wide(_Step):
    """The wide MLP (8192 x 256 -> 1024 -> 10, Adam), eager and the whole step compiled."""

    params = [["eager", "step"]]
    size = "wide"
    steps = 5
    slow = True
