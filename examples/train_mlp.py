"""Train a small MLP classifier with dj.nn and dj.optim, as one would with torch.nn.

Data: scikit-learn's handwritten digits (8x8 images, 10 classes) when scikit-learn
is installed, else a generated three-class problem of the same form (points around
three centres).  The loop is PyTorch's: zero_grad, forward, cross-entropy, backward,
step; then accuracy on held-out data in eval mode.
"""

from __future__ import annotations

import time

import numpy as np

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit import nn


def load_data():
    """(x_train, y_train, x_test, y_test, name): float32 features, int64 classes."""
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        x, y, name = d.data.astype(np.float32) / 16.0, d.target.astype(np.int64), "scikit-learn digits"
    except ImportError:
        rng = np.random.default_rng(0)
        centres = rng.standard_normal((3, 20)) * 0.6
        y = rng.integers(0, 3, 1500)
        x = (centres[y] + rng.standard_normal((1500, 20))).astype(np.float32)
        name = "generated 3-class data (scikit-learn is not installed)"
    idx = np.random.default_rng(1).permutation(len(y))
    cut = int(0.8 * len(y))
    tr, te = idx[:cut], idx[cut:]
    return x[tr], y[tr], x[te], y[te], name


def main(epochs: int = 15, batch: int = 128) -> float:
    xtr, ytr, xte, yte, name = load_data()
    nclass = int(ytr.max()) + 1
    dj.manual_seed(0)
    model = nn.Sequential(nn.Linear(xtr.shape[1], 64), nn.Tanh(), nn.Dropout(0.1), nn.Linear(64, nclass))
    opt = dj.optim.Adam(model.parameters(), lr=1e-2)
    print(f"data: {name}, {len(ytr)} train / {len(yte)} test, {xtr.shape[1]} features, {nclass} classes")
    print(model)
    rng = np.random.default_rng(2)
    t0 = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        order = rng.permutation(len(ytr))
        total = 0.0
        for s in range(0, len(order), batch):
            b = order[s:s + batch]
            opt.zero_grad()
            loss = F.cross_entropy(model(dj.tensor(xtr[b])), dj.tensor(ytr[b]))
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        if epoch % 5 == 4 or epoch == epochs - 1:
            print(f"epoch {epoch + 1:2d}: train loss {total / len(ytr):.4f}")
    model.eval()
    with dj.no_grad():
        pred = dj.argmax(model(dj.tensor(xte)), 1).numpy()
    acc = float((pred == yte).mean())
    print(f"test accuracy: {acc:.3f} ({time.perf_counter() - t0:.2f} s of training, first-use compiles included)")
    return acc


if __name__ == "__main__":
    main()
