"""A tutorial-style character-level GPT's training step (dispatch_jit/tools/gpt.py, issue 26)
in every mode, against PyTorch eager and ``torch.compile`` running the same source.

The model: token + position ``nn.Embedding``, 2 pre-LayerNorm blocks of causal
self-attention (``view``/``transpose``/``@``/``masked_fill``/``softmax``) and a GELU
MLP, width 64, 4 heads, block 32, batch 16, ``F.cross_entropy`` on the ``(B*T, V)``
logits, ``clip_grad_norm_``, ``AdamW``; the Zen of Python as text.  The step in each
mode comes from tools/gpt_training.py: ``eager``; ``compile`` (the model's forward under
``dj.compile``); ``step`` (the whole step under ``@dj.compile``); ``lazy`` (the step
under ``dj.execution_mode("compiled")``); ``torch eager`` and ``torch.compile`` (the model compiled)
from dj's initial weights, torch at 2 threads.

Targets (issue 26):

* dj eager <= 1.0 x torch eager (``track_ratio_dj_eager_over_torch_eager``);
* the whole step under ``@dj.compile`` <= 0.6 x torch eager
  (``track_ratio_dj_step_over_torch_eager``) and faster than torch.compile
  (``track_ratio_dj_step_over_torch_compile`` < 1);
* ``dj.execution_mode("compiled")`` <= dj eager (``track_ratio_dj_lazy_over_dj_eager``);
* the first step in a fresh process with a warm disk cache <= 1 s
  (``timeraw_first_step``, per mode).

Ratios are medians of interleaved steps in one process (the machine is shared: interleaved
medians compare, single timings do not).  Without torch the torch ratios and timings are
skipped (setup raises NotImplementedError); the dj timings still run.
"""

from __future__ import annotations

import functools

from ._common import interleaved_ratio, torch_or_skip as _torch

MODES = ["eager", "compile", "step", "lazy"]
TORCH = ["torch eager", "torch.compile"]


@functools.cache
def _setup():
    from dispatch_jit.tools.gpt_training import setup
    return setup("gpt")      # read only: each runner builds its own model from its initial weights


def _make(mode: str, s):
    """A step function for ``mode`` (each call: one step on the next batch, its loss read), warmed
    up: three steps, so that AdamW's state exists and the whole step's trace has run."""
    from dispatch_jit.tools import gpt_training as gt
    if mode in TORCH:
        _torch()
        step = gt.torch_runner(mode == "torch.compile", s)[0]
    else:
        step = gt.dj_runner(mode, s)[0]

    def run():
        step().item()
    for _ in range(3):
        run()
    return run


_RUNS: dict = {}    # mode -> its warmed-up step function, made once per process on first use


def _run(mode: str):
    """The step function of ``mode``.  asv runs each benchmark in a process of its own, so each
    builds only the modes it times; tests/test_benchmarks_import.py's many calls share them."""
    if mode not in _RUNS:
        _RUNS[mode] = _make(mode, _setup())
    return _RUNS[mode]


class GPTStep:
    """Seconds per training step, per mode (the torch modes skip without torch)."""

    params = MODES + TORCH
    param_names = ["mode"]
    timeout = 300

    def setup(self, mode):
        if mode in TORCH:
            _torch()
        self.run = _run(mode)

    def time_step(self, mode):
        self.run()


class _Ratios:
    """A median of ``samples`` interleaved steps of one mode over the same of another (the step
    functions from ``_run``)."""

    unit = "ratio"
    samples = 60
    timeout = 300

    def _ratio(self, ours: str, theirs: str) -> float:
        return interleaved_ratio(_run(ours), _run(theirs), self.samples)


class GPTStepRatios(_Ratios):
    """dj's compiled modes over dj eager (no torch needed)."""

    def track_ratio_dj_lazy_over_dj_eager(self):
        return self._ratio("lazy", "eager")

    def track_ratio_dj_step_over_dj_eager(self):
        return self._ratio("step", "eager")

    def track_ratio_dj_compile_over_dj_eager(self):
        return self._ratio("compile", "eager")


class GPTStepVsTorch(_Ratios):
    """dj's modes over torch eager and torch.compile on the same source (skipped without torch)."""

    def setup(self):
        _torch()

    def track_ratio_dj_eager_over_torch_eager(self):
        return self._ratio("eager", "torch eager")

    def track_ratio_dj_compile_over_torch_eager(self):
        return self._ratio("compile", "torch eager")

    def track_ratio_dj_step_over_torch_eager(self):
        return self._ratio("step", "torch eager")

    def track_ratio_dj_lazy_over_torch_eager(self):
        return self._ratio("lazy", "torch eager")

    def track_ratio_dj_step_over_torch_compile(self):
        return self._ratio("step", "torch.compile")

    def track_ratio_torch_compile_over_torch_eager(self):
        return self._ratio("torch.compile", "torch eager")

    # torch.compile's first step takes ~15 s: asv runs these, the smoke test does not
    track_ratio_dj_step_over_torch_compile.slow = True
    track_ratio_torch_compile_over_torch_eager.slow = True
    track_ratio_dj_step_over_torch_eager.slow = True
    track_ratio_dj_lazy_over_torch_eager.slow = True


# The whole step's and the lazy mode's first steps compile the GPT's plans (minutes on the 2-core CI
# machine): asv runs these, the smoke test does not.  Their runners are gpt_training.dj_runner's, which
# tests/tools/test_gpt.py trains for 100 steps against eager; the ratio code is the compile mode's.
GPTStepRatios.track_ratio_dj_step_over_dj_eager.slow = True
GPTStepRatios.track_ratio_dj_lazy_over_dj_eager.slow = True


def timeraw_first_step(mode):
    """The first training step in a fresh process, its model built and its kernels loaded (from the
    disk cache, once a run has filled it); for ``step``, the first two (AdamW's state, then the trace)."""
    n = 2 if mode == "step" else 1
    setup = f"""
import dispatch_jit as dj
from dispatch_jit.tools import gpt_training as gt
run = gt.dj_runner({mode!r}, gt.setup("gpt"))[0]
"""
    return f"for _ in range({n}): run().item()", setup


timeraw_first_step.params = MODES
timeraw_first_step.param_names = ["mode"]
timeraw_first_step.timeout = 300
