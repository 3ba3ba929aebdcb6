"""The multi-tensor optimizer steps: every parameter of one dtype updated by one Numba loop.

A group's parameters, gradients and state buffers go in as tuples of flat 1-D views
(no copy), so one call updates them all; the tuples are padded with an empty array to
the next power of two, so that a loop compiles once per (algorithm, bucket, dtype)
through the one compile cache (``dispatch_jit/jit/cache.py``, kind "optim"), not once
per parameter count.

Each update is written as the same sequence of roundings as the per-tensor form in
``fused.py`` (what a ``@dj.compile``d whole step records, and CUDA runs): every
scalar is cast to the parameter's dtype first and every intermediate is stored in it,
so that the two forms give the same bits (tests/optim check it).

>>> import numpy as np
>>> p, g = np.ones(3, np.float32), np.full(3, 2.0, np.float32)
>>> step("sgd", [p], [g], [p[:0]], np.float32, (0.5, 0.0, 0.0, 0.0, 0, 0, 0))
>>> p
array([0., 0., 0.], dtype=float32)
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types as nbt

from dispatch_jit.errors import ShapeError
from dispatch_jit.jit import cache

__all__ = ["step", "bucket", "compiled_signatures", "loop", "SCALARS"]

_KIND = "optim"
# the loops index every list by the parameter's size: anything else would read or write past an array
_MISMATCH = ("a multi-tensor optimizer loop got a gradient or state array whose size is not its "
             "parameter's; give each parameter a gradient and state of its own shape")


@numba.njit(boundscheck=False)
def _sgd(params, grads, bufs, n, lr, momentum, damp1, wd, nesterov, maximize, first):
    """PyTorch's SGD: d = g (+ wd * p); buf = momentum * buf + (1 - dampening) * d (d itself at
    the first step); d = d + momentum * buf (nesterov) or buf; p = p - lr * d."""
    for k in range(n):
        p, g, b = params[k], grads[k], bufs[k]
        if g.shape[0] != p.shape[0] or momentum != 0 and b.shape[0] != p.shape[0]:
            raise ShapeError(_MISMATCH)
        for i in range(p.shape[0]):
            d = -g[i] if maximize else g[i]
            if wd != 0:
                d = d + wd * p[i]
            if momentum != 0:
                if first:
                    b[i] = d
                else:
                    b[i] = b[i] * momentum + damp1 * d
                d = d + momentum * b[i] if nesterov else b[i]
            p[i] = p[i] - lr * d


@numba.njit(boundscheck=False)
def _adam(params, grads, avgs, sqs, maxs, n, step_size, bc2_sqrt, shrink, beta1c, beta2, beta2c, eps, wd, decoupled,
          amsgrad, maximize):
    """PyTorch's Adam (``decoupled``: AdamW, whose decay multiplies p by ``shrink = 1 - lr * wd``):
    per tensor k, ``step_size[k] = lr / (1 - beta1 ** t)`` and ``bc2_sqrt[k] = sqrt(1 - beta2 ** t)``."""
    for k in range(n):
        p, g, m, v, vm = params[k], grads[k], avgs[k], sqs[k], maxs[k]
        ss, bc = step_size[k], bc2_sqrt[k]
        size = p.shape[0]
        if g.shape[0] != size or m.shape[0] != size or v.shape[0] != size or amsgrad and vm.shape[0] != size:
            raise ShapeError(_MISMATCH)
        for i in range(size):
            gi = -g[i] if maximize else g[i]
            if decoupled:
                if wd != 0:
                    p[i] = p[i] * shrink
            elif wd != 0:
                gi = gi + wd * p[i]
            m[i] = m[i] + (gi - m[i]) * beta1c
            v[i] = v[i] * beta2 + (gi * gi) * beta2c
            if amsgrad:
                if v[i] > vm[i] or v[i] != v[i]:
                    vm[i] = v[i]
                denom = np.sqrt(vm[i]) / bc + eps
            else:
                denom = np.sqrt(v[i]) / bc + eps
            p[i] = p[i] - ss * (m[i] / denom)


_LOOPS = {"sgd": (_sgd, 3), "adam": (_adam, 5)}
# per loop, what ``step`` takes after the lists and the dtype, in order: "n" a number (cast to the
# dtype), "l" a number per tensor (the loop reads them as an array of the dtype), "f" a flag
SCALARS = {"sgd": "nnnnfff", "adam": "llnnnnnnfff"}
_ENTRY = cache.entries(_KIND)


def loop(name: str):
    """The njit function of loop ``name`` and how many lists it takes (compiled mode's plan
    functions call it inside their own compiled code: compiler/lazy/update.py)."""
    return _LOOPS[name]


def bucket(n: int) -> int:
    """The tuple length ``n`` arrays are padded to: the next power of two."""
    return 1 << max(n - 1, 0).bit_length()


def _sig(name: str, size: int, dt) -> tuple:
    f = numba.from_dtype(dt)
    arrs = nbt.UniTuple(nbt.Array(f, 1, "C"), size)
    b, i = nbt.boolean, nbt.int64
    if name == "sgd":
        return (arrs,) * 3 + (i, f, f, f, f, b, b, b)
    per = nbt.Array(f, 1, "C")
    return (arrs,) * 5 + (i, per, per, f, f, f, f, f, f, b, b, b)


def step(name: str, *lists_and_scalars):
    """Run loop ``name`` ("sgd" or "adam") over lists of C-contiguous 1-D arrays of one dtype
    (written in place) and its scalars, given as Python numbers (cast to the dtype here;
    flags as ints), then per-tensor arrays where the loop takes them."""
    fn, nlists = _LOOPS[name]
    lists, dtype, scalars = lists_and_scalars[:nlists], np.dtype(lists_and_scalars[nlists]), \
        lists_and_scalars[nlists + 1]
    n = len(lists[0])
    size = bucket(n)
    key = (name, size, dtype)
    ep = _ENTRY.get(key)
    if ep is None:
        ep = cache.njit_function(_KIND, key, f"{name}_{size}", fn, _sig(name, size, dtype))
    pad = np.empty(0, dtype)
    tuples = [tuple(a) + (pad,) * (size - n) for a in lists]
    if name == "sgd":
        lr, momentum, damp1, wd, nesterov, maximize, first = scalars
        ep(*tuples, n, dtype.type(lr), dtype.type(momentum), dtype.type(damp1), dtype.type(wd), bool(nesterov),
           bool(maximize), bool(first))
    else:
        step_size, bc2_sqrt, shrink, beta1c, beta2, beta2c, eps, wd, decoupled, amsgrad, maximize = scalars
        per = [np.zeros(size, dtype) for _ in range(2)]
        per[0][:n], per[1][:n] = step_size, bc2_sqrt
        ep(*tuples, n, per[0], per[1], dtype.type(shrink), dtype.type(beta1c), dtype.type(beta2), dtype.type(beta2c),
           dtype.type(eps), dtype.type(wd), bool(decoupled), bool(amsgrad), bool(maximize))


def compiled_signatures() -> dict[str, list[str]]:
    """Loop name (with its bucket) -> the signatures compiled so far."""
    return cache.signatures(_KIND)
