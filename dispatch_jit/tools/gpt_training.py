"""The GPT training step (tools/gpt.py) per mode, from the same initial weights and the same
batches: the runners that the GPT section of ``dispatch-jit tradeoff``, the asv suite
``benchmarks/bench_gpt.py`` and the tests share.

Modes (``MODES``):

* ``eager``: dispatch_jit, every op dispatched as it is called;
* ``compile``: the model's forward under ``dj.compile`` (as nanoGPT's ``model =
  torch.compile(model)``: the forward and its fused backward; clipping and AdamW stay eager);
* ``step``: the whole step (zero_grad, forward, backward, clipping, AdamW) under
  ``@dj.compile``: AdamW's first step makes its state eagerly, the second traces;
* ``lazy``: the whole step under ``dj.execution_mode("compiled")``;
* ``torch eager`` and ``torch.compile`` (the model compiled), when torch is installed, with
  the dj model's initial weights loaded into the same source's torch model, at 2 threads.

Each runner takes one step per call on the next of ``N_BATCHES`` fixed batches (drawn with
NumPy from the encoded text, so both libraries see the same tokens) and returns the loss
tensor.  ``why_eager`` says, for the compiled modes, what ran eagerly instead (a graph
break), from the compiled function's ``explain()`` or ``lazy_info()``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..compiler import lazy_info
from ..errors import InvalidArgumentError
from .gpt import SIZES, build, corpus, encode

__all__ = ["MODES", "TORCH_MODES", "N_BATCHES", "setup", "dj_runner", "torch_runner", "why_eager"]

MODES = ("eager", "compile", "step", "lazy")
TORCH_MODES = ("torch eager", "torch.compile")
N_BATCHES = 4


def setup(size: str = "gpt", n_batches: int = N_BATCHES) -> SimpleNamespace:
    """The config, the batches (int64 arrays) and the initial weights (name -> array) of ``size``."""
    import dispatch_jit as dj
    data, stoi, itos = encode(corpus())
    over, batch = SIZES[size]
    g = build(dj)
    cfg = g.GPTConfig(vocab_size=len(stoi), **over)
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(n_batches):
        ix = rng.integers(0, len(data) - cfg.block_size, batch)
        batches.append((np.stack([data[i:i + cfg.block_size] for i in ix]),
                        np.stack([data[i + 1:i + 1 + cfg.block_size] for i in ix])))
    dj.manual_seed(0)
    init = {k: v.numpy().copy() for k, v in g.GPT(cfg).state_dict().items()}
    return SimpleNamespace(size=size, cfg=cfg, batch=batch, batches=batches, init=init, itos=itos, stoi=stoi)


def _cycle(step, batches):
    """A step function taking no arguments: each call runs ``step(x, y)`` on the next batch."""
    box = [0]

    def run():
        x, y = batches[box[0] % len(batches)]
        box[0] += 1
        return step(x, y)
    return run


def dj_runner(mode: str, s: SimpleNamespace):
    """(step function, model, the compiled function or None) for dispatch_jit in ``mode``."""
    import dispatch_jit as dj
    g = build(dj)
    model = g.GPT(s.cfg)
    model.load_state_dict({k: dj.tensor(v) for k, v in s.init.items()})
    opt = g.make_optimizer(model)
    batches = [(dj.tensor(x), dj.tensor(y)) for x, y in s.batches]
    compiled = None
    if mode == "eager":
        def step(x, y):
            return g.train_step(model, opt, x, y)
    elif mode == "compile":
        # torch.compile(model) returns a module (its parameters() reach the model's); dj.compile(model)
        # returns a function without the module's attributes, so the forward is compiled in place
        compiled = model.forward = dj.compile(model.forward)

        def step(x, y):
            return g.train_step(model, opt, x, y)
    elif mode == "step":
        compiled = dj.compile(lambda x, y: g.train_step(model, opt, x, y))
        compiled.__name__ = "train_step"
        step = compiled
    elif mode == "lazy":
        def step(x, y):
            with dj.execution_mode("compiled"):
                loss = g.train_step(model, opt, x, y)
            return loss
    else:
        raise InvalidArgumentError(f"unknown mode {mode!r}; one of {MODES}")
    return _cycle(step, batches), model, compiled


def torch_runner(compiled: bool, s: SimpleNamespace):
    """(step function, model) for PyTorch: the same source, dj's initial weights; raises ImportError
    without torch."""
    import torch
    torch.set_num_threads(2)
    g = build(torch)
    model = g.GPT(s.cfg)
    model.load_state_dict({k: torch.tensor(v) for k, v in s.init.items()})
    opt = g.make_optimizer(model)
    fwd = torch.compile(model) if compiled else model
    batches = [(torch.tensor(x), torch.tensor(y)) for x, y in s.batches]
    return _cycle(lambda x, y: g.train_step(fwd, opt, x, y), batches), model


def why_eager(mode: str, compiled, lazy_before: dict | None = None) -> str:
    """What ran eagerly in a compiled mode ("" when nothing did, as far as the counters say);
    ``lazy_before``: ``lazy_info()`` from where compiled mode's count starts (after the first
    step, whose AdamW update makes the state eagerly, as designed)."""
    if mode in ("compile", "step") and compiled is not None:
        for line in compiled.explain().splitlines():
            if "ran eagerly: " in line:
                return line.split("ran eagerly: ", 1)[1]
        return ""
    if mode == "lazy" and lazy_before is not None:
        info = lazy_info()
        falls = info["step_fallbacks"] - lazy_before["step_fallbacks"]
        if falls:
            return f"{falls} optimizer group step(s) took eager's update: {info['step_fallback_reason']}"
    return ""
