"""The MLP training step as users write it (issue 26): ``log_softmax`` and
``-logp[arange(N), y].mean()`` as the loss, a manual SGD update ``p -= lr * p.grad``
under ``no_grad``, the same source on dispatch_jit (eager, and with the loss under
``dj.compile``) and on PyTorch eager.  784-128-10, batch 64, float32; torch at 2 threads.

Targets (issue 26):

* dj eager <= 1.0 x torch eager (``track_ratio_dj_eager_over_torch_eager``);
* the loss under ``dj.compile`` <= 0.7 x torch eager (``track_ratio_dj_compiled_over_torch_eager``).

Ratios are medians of interleaved steps in one process (the machine is shared: interleaved
medians compare, single timings do not).  Without torch the torch ratios and timings are
skipped (setup raises NotImplementedError); the dj timings still run.
"""

from __future__ import annotations

import functools

import numpy as np

from ._common import interleaved_ratio, torch_or_skip as _torch

N, D, H, K = 64, 784, 128, 10
MODES = ["dj eager", "dj compiled", "torch eager"]


@functools.cache
def _data():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((N, D)).astype(np.float32), rng.integers(0, K, N)
    w = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in ((D, H), (H,), (H, K), (K,))]
    return x, y, w


def _make(mode: str):
    """A step function for ``mode`` (the same source for both libraries), warmed up: three steps,
    so that the compiled loss's trace and its plan functions exist."""
    import dispatch_jit as dj
    lib = _torch() if mode == "torch eager" else dj
    x0, y0, w = _data()
    x, y = lib.tensor(x0), lib.tensor(y0)
    ps = [lib.tensor(a.copy(), requires_grad=True) for a in w]

    def loss_fn(x, y, w1, b1, w2, b2):
        h = (x @ w1 + b1).relu()
        logp = (h @ w2 + b2).log_softmax(dim=1)
        return -logp[lib.arange(N), y].mean()
    lf = dj.compile(loss_fn) if mode == "dj compiled" else loss_fn

    def step():
        loss = lf(x, y, *ps)
        loss.backward()
        with lib.no_grad():
            for p in ps:
                p -= 0.1 * p.grad
                p.grad = None
        return loss.item()
    for _ in range(3):
        step()
    return step


_RUNS: dict = {}    # mode -> its warmed-up step function, made once per process on first use


def _run(mode: str):
    if mode not in _RUNS:
        _RUNS[mode] = _make(mode)
    return _RUNS[mode]


class UserMLPStep:
    """Seconds per training step, per mode (torch eager skips without torch).  Target: see the
    ratios below (dj compiled <= 0.7 x torch eager, dj eager <= 1.0 x)."""

    params = MODES
    param_names = ["mode"]
    timeout = 120

    def setup(self, mode):
        if mode == "torch eager":
            _torch()
        self.run = _run(mode)

    def time_step(self, mode):
        self.run()


class UserMLPStepVsTorch:
    """Medians of ``samples`` interleaved steps of a dj mode over torch eager's (skipped without torch)."""

    unit = "ratio"
    samples = 100
    timeout = 120

    def setup(self):
        _torch()

    def _ratio(self, ours: str, theirs: str) -> float:
        return interleaved_ratio(_run(ours), _run(theirs), self.samples)

    def track_ratio_dj_eager_over_torch_eager(self):
        """Target: <= 1.0."""
        return self._ratio("dj eager", "torch eager")

    def track_ratio_dj_compiled_over_torch_eager(self):
        """Target: <= 0.7 (the loss under ``dj.compile``: one plan function forward, one backward)."""
        return self._ratio("dj compiled", "torch eager")
