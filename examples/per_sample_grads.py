"""Per-sample gradients of an MLP (784-128-10) with ``dj.func``: ``vmap(grad(loss))``, eagerly and as
one compiled plan (``dj.compile``), against a Python loop of ``grad`` per example and ``torch.func``.

Eagerly, vmap's batching rules run each op once for the whole batch; under ``dj.compile`` the
trace runs them too and ``grad`` runs the autograd engine on the traced values, so the forward,
its backward and the batch are one plan (compiled once per set of sizes), equal to the eager
result bit for bit.  The timings are the minimum and median of interleaved rounds.

    python examples/per_sample_grads.py [--batch 256] [--rounds 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dispatch_jit as dj
from dispatch_jit.func import grad, vmap

F = dj.nn.functional


def loss(p, xi, yi):
    """The loss of one example (xi: 784 features, yi: its class)."""
    h = F.relu(F.linear(xi.unsqueeze(0), p["w1"], p["b1"]))
    return F.cross_entropy(F.linear(h, p["w2"], p["b2"]), yi.unsqueeze(0))


def make(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    arrays = {"w1": rng.standard_normal((128, 784)).astype(np.float32) * 0.03,
              "b1": np.zeros(128, np.float32),
              "w2": rng.standard_normal((10, 128)).astype(np.float32) * 0.09,
              "b2": np.zeros(10, np.float32)}
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    return arrays, x, y


def torch_runner(arrays, x, y):
    try:
        import torch
    except ImportError:
        return None, None
    tp = {k: torch.from_numpy(v) for k, v in arrays.items()}
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    tF = torch.nn.functional

    def tloss(p, xi, yi):
        h = tF.relu(tF.linear(xi.unsqueeze(0), p["w1"], p["b1"]))
        return tF.cross_entropy(tF.linear(h, p["w2"], p["b2"]), yi.unsqueeze(0))
    tper = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))
    return (lambda: tper(tp, tx, ty)), torch


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    arrays, x, y = make(args.batch)
    p = {k: dj.asarray(v) for k, v in arrays.items()}
    dx, dy = dj.asarray(x), dj.asarray(y)

    per = vmap(grad(loss), in_dims=(None, 0, 0))
    compiled = dj.compile(per)
    one = grad(loss)
    eager_g = per(p, dx, dy)
    comp_g = compiled(p, dx, dy)
    print("== check ==")
    same = all(np.array_equal(comp_g[k].numpy(), eager_g[k].numpy()) for k in p)
    print(f"compiled == eager, bit for bit: {same}")
    print(f"compiled: {str(compiled.explain()).splitlines()[0]}")
    worst = 0.0
    for i in range(min(4, args.batch)):
        g = one(p, dx[i], dy[i])
        worst = max(worst, max(float(np.abs(g[k].numpy() - eager_g[k].numpy()[i]).max()) for k in p))
    print(f"vmap(grad) vs grad per example, max |difference|: {worst:.1e}")
    runs = {"eager vmap(grad)": lambda: per(p, dx, dy),
            "dj.compile(vmap(grad))": lambda: compiled(p, dx, dy),
            "Python loop of grad": lambda: [one(p, dx[i], dy[i]) for i in range(args.batch)]}
    trun, torch = torch_runner(arrays, x, y)
    if trun is not None:
        want = trun()
        diff = max(float(np.abs(eager_g[k].numpy() - want[k].numpy()).max()) for k in p)
        print(f"vs torch.func, max |difference|: {diff:.1e}")
        runs["torch.func"] = trun
    times = {k: [] for k in runs}
    for _ in range(args.rounds):
        for k, f in runs.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    print(f"== time, batch {args.batch}: ms, min / median of {args.rounds} interleaved rounds ==")
    for k, ts in times.items():
        print(f"{k:>24}: {1e3 * min(ts):9.2f} / {1e3 * float(np.median(ts)):9.2f}")
    if trun is not None:
        ref = min(times["torch.func"])
        for k in ("eager vmap(grad)", "dj.compile(vmap(grad))"):
            print(f"{k} / torch.func (min): {min(times[k]) / ref:.2f}")


if __name__ == "__main__":
    main()
