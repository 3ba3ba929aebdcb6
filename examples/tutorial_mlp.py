"""An MLP classifier written as a PyTorch tutorial writes one, run on PyTorch or on dispatch_jit.

The training code below is plain PyTorch; only the imports at the top of ``run`` differ between
the two backends (``import torch`` or ``import dispatch_jit as torch``).  Data: scikit-learn's
handwritten digits (8x8 images, 10 classes) when scikit-learn is installed, else points around
ten centres of the same form.  Minibatches come from ``torch.randperm``, gradients are clipped
with ``nn.utils.clip_grad_norm_``, the learning rate follows a ``StepLR`` schedule.

    python examples/tutorial_mlp.py                 # dispatch_jit
    python examples/tutorial_mlp.py --backend torch # the same program on PyTorch
"""

from __future__ import annotations

import argparse

import numpy as np


def load_digits_arrays():
    """(x_train, y_train, x_test, y_test): float32 features in [0, 1], int64 classes."""
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        x, y = d.data.astype(np.float32) / 16.0, d.target.astype(np.int64)
    except ImportError:
        rng = np.random.default_rng(0)
        centres = rng.uniform(0, 1, (10, 64))
        y = rng.integers(0, 10, 1797)
        x = np.clip(centres[y] + 0.25 * rng.standard_normal((1797, 64)), 0, 1).astype(np.float32)
    idx = np.random.default_rng(1).permutation(len(y))
    cut = int(0.8 * len(y))
    return x[idx[:cut]], y[idx[:cut]], x[idx[cut:]], y[idx[cut:]]


def run(backend: str = "dj", epochs: int = 10, batch_size: int = 64, seed: int = 0, verbose: bool = True) -> dict:
    """Train and evaluate; returns {"losses": per-epoch mean training loss, "accuracy": test accuracy}."""
    if backend == "torch":
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    else:
        import dispatch_jit as torch
        import dispatch_jit.nn as nn
        import dispatch_jit.nn.functional as F

    # ---- from here on, the program is the same on both backends ----
    torch.manual_seed(seed)
    xtr, ytr, xte, yte = (torch.tensor(a) for a in load_digits_arrays())

    model = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)

    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(xtr.shape[0])
        total, batches = 0.0, 0
        for i in range(0, xtr.shape[0], batch_size):
            idx = perm[i:i + batch_size]
            xb, yb = xtr[idx], ytr[idx]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            total += loss.item()
            batches += 1
        scheduler.step()
        losses.append(total / batches)
        if verbose:
            print(f"epoch {epoch:2d}  loss {losses[-1]:.4f}  lr {scheduler.get_last_lr()[0]:.4f}")

    model.eval()
    with torch.no_grad():
        accuracy = (model(xte).argmax(dim=1) == yte).float().mean().item()
    if verbose:
        print(f"test accuracy {accuracy:.3f}")
    return {"losses": losses, "accuracy": accuracy}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A tutorial-style MLP on PyTorch or dispatch_jit.")
    parser.add_argument("--backend", choices=("dj", "torch"), default="dj", help="which library runs it")
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training set")
    args = parser.parse_args()
    run(args.backend, args.epochs)
