"""The training step of issue 14, in dj eager and both compiled modes, against PyTorch eager.

Targets:

* The MLP step (N=512, D=20, H=64, 3 classes, tanh, ``F.cross_entropy``, ``dj.optim.SGD``):
  dj eager <= 1.0 x torch eager (``track_mlp_eager_dj_over_torch``); dj compiled, either mode,
  <= 0.5 x (``track_mlp_compile_dj_over_torch``, ``track_mlp_lazy_dj_over_torch``: the
  forward under ``@dj.compile``, and the whole step under ``dj.execution_mode("compiled")``, as they are
  today, so that a fused backward shows up here).
* The wide MLP (N=8192, D=256, H=1024, 10 classes, ``dj.optim.Adam``): the same three ratios
  (``slow``); the compiled target is <= 0.7 x torch eager.

Ratios are min-of-interleaved-repeats in one process, torch at 2 threads.  Without torch the
``track_*`` ratios are skipped (setup raises NotImplementedError) and the ``time_*`` benchmarks
still run.
"""

from __future__ import annotations

import math
import timeit

import numpy as np

import dispatch_jit as dj
import dispatch_jit.nn.functional as F

from ._common import torch_or_skip as _torch

SIZES = {"mlp": (512, 20, 64, 3, "SGD"), "wide": (8192, 256, 1024, 10, "Adam")}


def _interleaved_best(stmts: list[str], namespace: dict, number: int, repeat: int) -> list[float]:
    """As in bench_dispatch (each suite file stands alone: asv and the smoke test load them by path)."""
    timers = [timeit.Timer(s, globals=namespace) for s in stmts]
    best = [math.inf] * len(stmts)
    for _ in range(repeat):
        for i, t in enumerate(timers):
            best[i] = min(best[i], t.timeit(number) / number)
    return best


def _data(n, d, c):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, c, n)


def _forward(x, y, w1, b1, w2, b2):
    return F.cross_entropy(F.linear(F.tanh(F.linear(x, w1, b1)), w2, b2), y)


class _Steps:
    """The step in each mode over one model size; ``size`` picks it."""

    size = "mlp"
    number, repeat = 20, 7
    needs_torch = False      # the ratio classes: without torch, setup skips them (asv's skip)

    def setup(self):
        if self.needs_torch:
            _torch()
        n, d, h, c, opt = SIZES[self.size]
        xa, ya = _data(n, d, c)
        self.x, self.y = dj.tensor(xa), dj.tensor(ya)
        dj.manual_seed(0)
        self.model = dj.nn.Sequential(dj.nn.Linear(d, h), dj.nn.Tanh(), dj.nn.Linear(h, c))
        self.params = list(self.model.parameters())
        kw = {"lr": 0.1} if opt == "SGD" else {"lr": 1e-3}
        self.opt = getattr(dj.optim, opt)(self.params, **kw)
        self.compiled_forward = dj.compile(_forward)
        self.torch_step = None
        try:
            torch = _torch()
        except NotImplementedError:
            torch = None
        if torch is not None:
            tm = torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.Tanh(), torch.nn.Linear(h, c))
            topt = getattr(torch.optim, opt)(tm.parameters(), **kw)
            tx, ty = torch.tensor(xa), torch.tensor(ya)

            def torch_step():
                topt.zero_grad()
                torch.nn.functional.cross_entropy(tm(tx), ty).backward()
                topt.step()
            self.torch_step = torch_step
        for run in (self.step_eager, self.step_compile, self.step_lazy):   # compile outside the timing
            run()
            run()

    def step_eager(self):
        self.opt.zero_grad()
        F.cross_entropy(self.model(self.x), self.y).backward()
        self.opt.step()

    def step_compile(self):
        self.opt.zero_grad()
        self.compiled_forward(self.x, self.y, *self.params).backward()
        self.opt.step()

    def step_lazy(self):
        with dj.execution_mode("compiled"):
            self.opt.zero_grad()
            F.cross_entropy(self.model(self.x), self.y).backward()
            self.opt.step()

    def _ratio(self, stmt: str) -> float:
        if self.torch_step is None:
            raise NotImplementedError("torch is not installed")
        ns = {"ours": getattr(self, stmt), "theirs": self.torch_step}
        ours, theirs = _interleaved_best(["ours()", "theirs()"], ns, self.number, self.repeat)
        return ours / theirs


class MLPStepTimes(_Steps):
    """The MLP step's seconds per mode (no torch needed)."""

    def time_eager(self):
        self.step_eager()

    def time_compile(self):
        self.step_compile()

    def time_lazy(self):
        self.step_lazy()


class MLPStep(_Steps):
    unit = "ratio"
    needs_torch = True

    def track_mlp_eager_dj_over_torch(self):
        return self._ratio("step_eager")

    def track_mlp_compile_dj_over_torch(self):
        return self._ratio("step_compile")

    def track_mlp_lazy_dj_over_torch(self):
        return self._ratio("step_lazy")


class WideMLPStep(_Steps):
    unit = "ratio"
    needs_torch = True
    size = "wide"
    number, repeat = 2, 5
    timeout = 300
    slow = True          # seconds per step at this size: asv runs it, the smoke test does not

    def track_wide_eager_dj_over_torch(self):
        return self._ratio("step_eager")

    def track_wide_compile_dj_over_torch(self):
        return self._ratio("step_compile")

    def track_wide_lazy_dj_over_torch(self):
        return self._ratio("step_lazy")


class MLPStepPartsVsTorch:
    """The eager MLP step's parts that each lost to torch's same call (issue 14's eager target),
    as ratios against torch in one process (skipped without torch): the head's loss with its
    backward (the fused cross-entropy kernels), and the head's linear with its backward (two
    products, one of them the skinny 3 x 512 @ 512 x 64 weight gradient, and the bias's column sum)."""

    unit = "ratio"
    number, repeat = 50, 15

    def setup(self):
        torch = _torch()
        n, _, h, c, _ = SIZES["mlp"]
        rng = np.random.default_rng(0)
        logits, a = rng.standard_normal((n, c)).astype(np.float32), rng.standard_normal((n, h)).astype(np.float32)
        w, b = (rng.standard_normal((c, h)) * 0.3).astype(np.float32), np.zeros(c, np.float32)
        y = rng.integers(0, c, n)
        ours = [dj.tensor(v, requires_grad=True) for v in (logits, w, b)]
        theirs = [torch.tensor(v, requires_grad=True) for v in (logits, w, b)]
        self.ns = {"F": F, "TF": torch.nn.functional, "y": dj.tensor(y), "ty": torch.tensor(y),
                   "x": ours[0], "w": ours[1], "b": ours[2], "a": dj.tensor(a),
                   "tx": theirs[0], "tw": theirs[1], "tb": theirs[2], "ta": torch.tensor(a)}
        for stmt in self._STMTS.values():       # compile outside the timing
            for s in stmt:
                eval(s, self.ns)

    _STMTS = {"loss": ("F.cross_entropy(x, y).backward()", "TF.cross_entropy(tx, ty).backward()"),
              "linear": ("F.linear(a, w, b).sum().backward()", "TF.linear(ta, tw, tb).sum().backward()")}

    def _ratio(self, part: str) -> float:
        ours, theirs = _interleaved_best(list(self._STMTS[part]), self.ns, self.number, self.repeat)
        return ours / theirs

    def track_loss_fwd_bwd_dj_over_torch(self):
        """F.cross_entropy on (512, 3) float32 logits, forward and backward, / torch's."""
        return self._ratio("loss")

    def track_head_linear_fwd_bwd_dj_over_torch(self):
        """F.linear (512 x 64 -> 3, with bias) and its backward (through a sum), / torch's."""
        return self._ratio("linear")
