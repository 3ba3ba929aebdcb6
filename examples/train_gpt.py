"""Train a small character-level GPT on the Zen of Python with dispatch_jit, the way a
PyTorch tutorial trains one, eagerly and compiled.

The model is nanoGPT's, written once in dispatch_jit/tools/gpt.py against a ``torch``
namespace: ``build(dj)`` gives it on dispatch_jit, ``build(torch)`` the same source on
PyTorch.  Token and position embeddings, causal self-attention from view/transpose/@/
masked_fill/softmax, a GELU MLP, LayerNorm, cross-entropy over the (B*T, V) logits,
AdamW and gradient clipping; batches are random windows of the text (``torch.randint``).

Each mode trains a fresh model from the same seed on the same batches:

* ``eager``: every op runs as it is called;
* ``step``: the whole training step under ``@dj.compile``;
* ``lazy``: the step under ``dj.execution_mode("compiled")`` (ops recorded, run as one graph).

It prints the loss falling, the step times, whether each compiled mode's parameters equal
eager's bit for bit, and a string sampled from the trained model.

    python examples/train_gpt.py --steps 200 --modes eager,step,lazy
    python examples/train_gpt.py --size gpt-tiny     # a 2-block width-16 model: quick to compile
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dispatch_jit as dj
from dispatch_jit.tools.gpt import SIZES, build, corpus, decode, encode

MODES = ("eager", "step", "lazy")


def train(g, cfg, data, mode: str, steps: int, batch_size: int, log_every: int):
    """Train a fresh model in ``mode``: (model, losses, step times in seconds)."""
    dj.manual_seed(0)                      # the same weights and the same batches in every mode
    model = g.GPT(cfg)
    optimizer = g.make_optimizer(model)
    if mode == "step":
        step = dj.compile(lambda x, y: g.train_step(model, optimizer, x, y))
    elif mode == "lazy":
        def step(x, y):
            with dj.execution_mode("compiled"):
                return g.train_step(model, optimizer, x, y)
    else:
        def step(x, y):
            return g.train_step(model, optimizer, x, y)
    losses, times = [], []
    for it in range(steps):
        x, y = g.get_batch(data, cfg.block_size, batch_size)
        t0 = time.perf_counter()
        loss = step(x, y).item()
        times.append(time.perf_counter() - t0)
        losses.append(loss)
        if it % log_every == 0 or it == steps - 1:
            print(f"  step {it:4d}: loss {loss:.4f}")
    return model, losses, times


def main(steps: int = 60, modes=MODES, batch_size: int | None = None, sample: int = 120,
         size: str = "gpt") -> dict:
    g = build(dj)
    text = corpus()
    ids, stoi, itos = encode(text)
    overrides, default_batch = SIZES[size]
    batch_size = batch_size or default_batch
    cfg = g.GPTConfig(vocab_size=len(stoi), **overrides)
    data = dj.tensor(ids)
    print(f"text: the Zen of Python, {len(text)} characters, {len(stoi)} distinct")
    print(f"model: {cfg.n_layer} blocks, width {cfg.n_embd}, {cfg.n_head} heads, block {cfg.block_size}, "
          f"{sum(p.numel() for p in g.GPT(cfg).parameters()):,} parameters; batch {batch_size}, AdamW")
    results = {}
    for mode in modes:
        print(f"== {mode} ==")
        model, losses, times = train(g, cfg, data, mode, steps, batch_size, max(steps // 4, 1))
        steady = times[2:] or times
        print(f"  first step {times[0]:.2f} s (compiles included), then {statistics.median(steady) * 1e3:.1f} ms "
              f"per step (median)")
        params = [p.detach().numpy().copy() for p in model.parameters()]
        if "eager" in results:
            same = all(np.array_equal(a, b) for a, b in zip(params, results["eager"][1]))
            print(f"  parameters equal eager's bit for bit: {same}")
        results[mode] = (model, params, losses)
    model = results[modes[0]][0]
    model.eval()
    dj.manual_seed(1)
    start = dj.tensor([[stoi["B"]]])
    out = g.generate(model, start, sample)
    print(f"== sample ({modes[0]} model) ==")
    print(decode(out[0].tolist(), itos))
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60, help="training steps per mode (default 60)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated, of eager, step, lazy")
    p.add_argument("--size", choices=sorted(SIZES), default="gpt",
                   help="the model: gpt (block 32, width 64, 4 heads; the default) or gpt-tiny (block 8, width 16)")
    p.add_argument("--batch-size", type=int, default=None, help="default: 16 for gpt, 4 for gpt-tiny")
    p.add_argument("--sample", type=int, default=120, help="characters to sample after training")
    a = p.parse_args()
    main(a.steps, tuple(a.modes.split(",")), a.batch_size, a.sample, a.size)
