"""Autograd overhead and throughput, against PyTorch in the same process.

Targets (the autograd issue), reported as ratios by the ``track_*`` benchmarks
(min of interleaved repeats, see bench_dispatch):

* ``dj.add`` on 16 float32 with ``requires_grad=True``, forward only:
  < 1.0 x ``torch.add`` on the same data            (track_add16_grad_dj_over_torch)
* forward + backward of a 10-op elementwise chain on 1e6 float32:
  <= 1.5 x PyTorch eager                             (track_chain_fwd_bwd_dj_over_torch)
* forward + backward of a 20,000-op chain on one element (per-node overhead,
  the cycle collector's passes over the graph included), reported against
  PyTorch eager                                      (track_long_chain_dj_over_torch)
* ``(exp(x) * x).sum().backward()`` on 16 float32 (recording, the engine, the
  formulas' own dispatches: what a tiny training step pays per op), issue 14:
  <= 1.0 x PyTorch eager                             (track_fwd_bwd16_dj_over_torch)

Without torch these benchmarks are skipped (setup raises NotImplementedError).
"""

from __future__ import annotations

import math
import timeit

import numpy as np

import dispatch_jit as dj


def _interleaved_best(stmts: list[str], namespace: dict, number: int, repeat: int) -> list[float]:
    """As in bench_dispatch (each suite file stands alone: asv and the smoke test load them by path)."""
    timers = [timeit.Timer(s, globals=namespace) for s in stmts]
    best = [math.inf] * len(stmts)
    for _ in range(repeat):
        for i, t in enumerate(timers):
            best[i] = min(best[i], t.timeit(number) / number)
    return best


def _torch():
    try:
        import torch
    except ImportError:
        raise NotImplementedError("torch is not installed") from None
    return torch


def chain(M, x):
    """Ten elementwise ops, then a sum (M is dispatch_jit or torch)."""
    y = x * 2.0
    y = y + x
    y = M.sin(y)
    y = y * y
    y = y - 0.5
    y = M.exp(y)
    y = y / 3.0
    y = M.tanh(y)
    y = y * x
    return y.sum()


class AddGrad:
    """Forward only: the Autograd kernel records a node and redispatches to CPU."""

    unit = "ratio"

    def setup(self):
        torch = _torch()
        a = np.ones(16, np.float32)
        self.ns = {"dj": dj, "torch": torch, "x": dj.from_numpy(a), "w": dj.tensor(a, requires_grad=True),
                   "tx": torch.from_numpy(a), "tw": torch.ones(16, requires_grad=True)}
        dj.add(self.ns["x"], self.ns["w"])

    def time_dj_add_grad(self):
        dj.add(self.ns["x"], self.ns["w"])

    def track_add16_grad_dj_over_torch(self):
        ours, theirs = _interleaved_best(["dj.add(x, w)", "torch.add(tx, tw)"], self.ns, 2000, 7)
        return ours / theirs


class ChainForwardBackward:
    unit = "ratio"
    timeout = 120

    def setup(self):
        self.torch = _torch()
        self.a = np.random.default_rng(0).random(1_000_000, dtype=np.float32)
        self.run_dj()                      # compile every kernel outside the timing

    def run_dj(self):
        x = dj.tensor(self.a, requires_grad=True)
        chain(dj, x).backward()

    def run_torch(self):
        x = self.torch.tensor(self.a, requires_grad=True)
        chain(self.torch, x).backward()

    def time_dj(self):
        self.run_dj()

    def time_torch(self):
        self.run_torch()

    def track_chain_fwd_bwd_dj_over_torch(self):
        ours, theirs = _interleaved_best(["run_dj()", "run_torch()"],
                                         {"run_dj": self.run_dj, "run_torch": self.run_torch}, 1, 5)
        return ours / theirs

    track_chain_fwd_bwd_dj_over_torch.slow = True


class LongChain:
    """``y = y * 1.0`` 20,000 times, then backward: what one recorded node costs, in the
    forward (the node, and the full GC passes that traverse the growing graph) and in the
    engine's loop.  The tensors are one element, so the kernels cost nothing."""

    unit = "ratio"
    timeout = 300
    n = 20_000

    def setup(self):
        self.torch = _torch()
        self.run_dj()                      # compile outside the timing

    def _run(self, M, x):
        y = x
        for _ in range(self.n):
            y = y * 1.0
        y.backward()

    def run_dj(self):
        self._run(dj, dj.tensor([1.5], dtype=dj.float64, requires_grad=True))

    def run_torch(self):
        self._run(self.torch, self.torch.tensor([1.5], dtype=self.torch.float64, requires_grad=True))

    def time_dj(self):
        self.run_dj()

    def track_long_chain_dj_over_torch(self):
        ours, theirs = _interleaved_best(["run_dj()", "run_torch()"],
                                         {"run_dj": self.run_dj, "run_torch": self.run_torch}, 1, 5)
        return ours / theirs

    track_long_chain_dj_over_torch.slow = True


class TinyForwardBackward:
    """``(exp(x) * x).sum().backward()`` on 16 float32: three recorded ops, the seed, sum's
    backward broadcast, two muls and an exp's backward, a gradient summed from two paths and
    accumulated into ``.grad``; the kernels cost nothing at this size, so this is autograd's
    per-op overhead."""

    unit = "ratio"

    def setup(self):
        torch = _torch()
        a = np.random.default_rng(0).random(16, dtype=np.float32)
        self.ns = {"dj": dj, "torch": torch, "x": dj.tensor(a, requires_grad=True),
                   "tx": torch.tensor(a, requires_grad=True)}
        self.run_dj()                      # compile outside the timing

    def run_dj(self):
        x = self.ns["x"]
        (dj.exp(x) * x).sum().backward()

    def time_dj(self):
        self.run_dj()

    def track_fwd_bwd16_dj_over_torch(self):
        ours, theirs = _interleaved_best(["(dj.exp(x) * x).sum().backward()",
                                          "(torch.exp(tx) * tx).sum().backward()"], self.ns, 500, 15)
        return ours / theirs
