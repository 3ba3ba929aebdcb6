"""A training step, eager and compiled, against PyTorch eager (issue 14, parts 1 and 2).

The step: a 2-layer MLP (N=512, D=20, H=64, 3 classes, tanh), the loss
``-(log_softmax(h) * onehot).sum() / N`` with log_softmax written as
``h - logsumexp(h, 1, keepdim)`` (ops with derivative rows), its backward, and
plain SGD written with existing ops under ``dj.no_grad()``; float32.

* ``time_*``: one step per mode: dj eager, ``@dj.compile`` of the loss (the
  fused forward and the fused backward, compiler/joint.py), ``@dj.compile`` of
  the whole step (loss, backward and the update: one plan, compiler/training/whole_step.py),
  the global compiled mode; and torch eager with 2 threads.
* ``track_*_ratio_vs_torch``: per-step median of the mode over torch eager's,
  the two interleaved in one run (the machine is shared: medians of
  interleaved repeats, not a single timing, are what compare).

Targets (issue 14): compiled (either mode) <= 0.5x torch eager; dj eager
<= 1.0x.  Without torch the ratios are skipped (setup raises NotImplementedError).
"""

from __future__ import annotations

import time

import numpy as np

import dispatch_jit as dj

from ._common import torch_or_skip as _torch

N, D, H, C = 512, 20, 64, 3
LR = 0.1


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = np.eye(C, dtype=np.float32)[rng.integers(0, C, N)]
    params = [rng.standard_normal((D, H)).astype(np.float32) * 0.3, np.zeros(H, np.float32),
              rng.standard_normal((H, C)).astype(np.float32) * 0.3, np.zeros(C, np.float32)]
    return x, y, params


def loss_fn(x, y, w1, b1, w2, b2):
    h = dj.matmul(dj.tanh(dj.matmul(x, w1) + b1), w2) + b2
    return -((h - dj.logsumexp(h, 1, True)) * y).sum() / 512.0


compiled_loss = dj.compile(loss_fn)


def whole_step(x, y, w1, b1, w2, b2):
    loss = loss_fn(x, y, w1, b1, w2, b2)
    loss.backward()
    _sgd((w1, b1, w2, b2))
    return loss


compiled_step = dj.compile(whole_step)


def _sgd(params):
    with dj.no_grad():
        for p in params:
            p.sub_(p.grad * LR)
            p.grad = None


class _Training:
    """One MLP training step per mode (the benchmarks are the two classes below)."""

    timeout = 240
    needs_torch = False      # TrainingStepVsTorch: without torch, setup skips it (asv's skip)

    def setup(self):
        if self.needs_torch:
            _torch()
        x, y, params = _data()
        self.x, self.y = dj.from_numpy(x), dj.from_numpy(y)
        self.params = {m: [dj.from_numpy(p.copy()).requires_grad_(True) for p in params]
                       for m in ("eager", "compiled", "step", "lazy")}
        self.torch = None
        try:
            torch = _torch()
        except NotImplementedError:
            return
        self.torch = torch
        self.tx, self.ty = torch.from_numpy(x), torch.from_numpy(y)
        self.tparams = [torch.from_numpy(p.copy()).requires_grad_(True) for p in params]
        for _ in range(3):            # compiles (eager kernels, fused loops) happen here, not in the timings
            self.step_eager(), self.step_compiled(), self.step_whole(), self.step_lazy(), self.step_torch()

    def step_eager(self):
        ps = self.params["eager"]
        loss_fn(self.x, self.y, *ps).backward()
        _sgd(ps)

    def step_compiled(self):
        ps = self.params["compiled"]
        compiled_loss(self.x, self.y, *ps).backward()
        _sgd(ps)

    def step_whole(self):
        compiled_step(self.x, self.y, *self.params["step"])

    def step_lazy(self):
        ps = self.params["lazy"]
        with dj.execution_mode("compiled"):
            loss_fn(self.x, self.y, *ps).backward()
            _sgd(ps)
        ps[0].numpy()             # a read forces whatever is pending

    def step_torch(self):
        torch, ps = self.torch, self.tparams
        h = torch.tanh(self.tx @ ps[0] + ps[1]) @ ps[2] + ps[3]
        (-(torch.log_softmax(h, 1) * self.ty).sum() / N).backward()
        with torch.no_grad():
            for p in ps:
                p -= p.grad * LR
                p.grad = None


class TrainingStep(_Training):
    """Seconds per step in each dj mode (no torch needed)."""

    def time_dj_eager(self):
        self.step_eager()

    def time_dj_compiled_loss(self):
        self.step_compiled()

    def time_dj_compiled_step(self):
        self.step_whole()

    def time_dj_global_compiled_mode(self):
        self.step_lazy()


class TrainingStepVsTorch(_Training):
    """The same steps against torch eager, interleaved in one process."""

    needs_torch = True

    def time_torch_eager(self):
        if self.torch is None:
            raise NotImplementedError("torch is not installed")
        self.step_torch()

    def _ratio(self, step, repeat=60):
        if self.torch is None:
            raise NotImplementedError("torch is not installed")
        ours, theirs = [], []
        for _ in range(repeat):
            for fn, out in ((step, ours), (self.step_torch, theirs)):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
        return float(np.median(ours) / np.median(theirs))

    def track_eager_dj_over_torch(self):
        return self._ratio(self.step_eager)

    def track_compiled_loss_dj_over_torch(self):
        return self._ratio(self.step_compiled)

    def track_global_compiled_mode_dj_over_torch(self):
        return self._ratio(self.step_lazy)

    def track_compiled_step_dj_over_torch(self):
        return self._ratio(self.step_whole)

    track_eager_dj_over_torch.unit = track_compiled_loss_dj_over_torch.unit = "x torch eager"
    track_compiled_step_dj_over_torch.unit = "x torch eager"
    track_global_compiled_mode_dj_over_torch.unit = "x torch eager"
