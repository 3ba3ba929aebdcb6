"""Gradients of complex inputs, PyTorch's convention: ``backward(g)`` of a complex output gives each
input the conjugate Wirtinger gradient, ``dL/dx + i dL/dy`` of ``L = Re(sum(conj(g) * out))``; for a
holomorphic f that is ``g * conj(f'(z))`` (derivatives.yaml writes the ``.conj()``).  The rows used to
compute ``g * f'(z)``, a silently wrong gradient for every holomorphic op.

Oracle: central differences of L in each real and imaginary component (no torch needed), and
PyTorch's own gradients when it is installed.  One table; a case is one line."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj

CASES = {
    # holomorphic elementwise ops (and their inputs' ranges: away from branch cuts and poles)
    "exp": lambda M, z: M.exp(z), "expm1": lambda M, z: M.expm1(z), "log": lambda M, z: M.log(z + 2),
    "log1p": lambda M, z: M.log1p(z), "log2": lambda M, z: M.log2(z + 2), "log10": lambda M, z: M.log10(z + 2),
    "sqrt": lambda M, z: M.sqrt(z + 2), "rsqrt": lambda M, z: M.rsqrt(z + 2),
    "reciprocal": lambda M, z: M.reciprocal(z + 2), "square": lambda M, z: M.square(z),
    "sin": lambda M, z: M.sin(z), "cos": lambda M, z: M.cos(z), "tan": lambda M, z: M.tan(z),
    "sinh": lambda M, z: M.sinh(z), "cosh": lambda M, z: M.cosh(z), "tanh": lambda M, z: M.tanh(z),
    "asin": lambda M, z: M.asin(z * 0.5), "acos": lambda M, z: M.acos(z * 0.5), "atan": lambda M, z: M.atan(z * 0.5),
    "asinh": lambda M, z: M.asinh(z * 0.5), "acosh": lambda M, z: M.acosh(z + 3), "atanh": lambda M, z: M.atanh(z * 0.5),
    # not holomorphic: their rows are written in the convention already
    "abs": lambda M, z: M.abs(z + 2), "neg": lambda M, z: -z, "conj": lambda M, z: M.conj(z) * z,
    "real": lambda M, z: M.real(z) * 2, "imag": lambda M, z: M.imag(z) * 2,
    # products, by tensors and by Python numbers, and quotients
    "mul": lambda M, z, w: z * w, "mul by a complex number": lambda M, z: z * (1 - 2j),
    "mul by itself": lambda M, z: z * z, "div": lambda M, z, w: z / (w + 3), "div of a number": lambda M, z: 2j / (z + 3),
    "add, sub": lambda M, z, w: M.sub(M.add(z, w, alpha=2), w),
    # reductions, scans, linear algebra, shape ops
    "sum": lambda M, z: M.sum(z * z, 1), "mean": lambda M, z: M.mean(M.exp(z)),
    "prod": lambda M, z: M.prod(z + 2, 1), "prod with a zero": lambda M, z: M.prod(M.cat([z, z * 0]), 0),
    "cumsum": lambda M, z: M.cumsum(z * z, 1), "cumprod": lambda M, z: M.cumprod(z + 1, 1),
    "matmul": lambda M, z, w: z @ w.T, "dot": lambda M, z, w: M.dot(z[0], w[1]),
    "flip, roll": lambda M, z: M.roll(M.flip(z * z, [1]), [1], [0]),
    "tanh_backward": lambda M, z, w: M.tanh(z * w),
}


def _args(name):
    rng = np.random.default_rng(len(name))
    n = CASES[name].__code__.co_argcount - 1
    return [(rng.uniform(-0.8, 0.8, (2, 3)) + 1j * rng.uniform(-0.8, 0.8, (2, 3))) for _ in range(n)]


def _loss_grad_fd(name, args, g, h=1e-6):
    """dL/dx + i dL/dy per element of each input, by central differences."""
    def loss(vals):
        out = CASES[name](dj, *[dj.tensor(v) for v in vals]).numpy()
        return float(np.sum((np.conj(g) * out).real))
    grads = []
    for k, a in enumerate(args):
        gr = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            for unit in (1.0, 1j):
                up = [v.copy() for v in args]
                dn = [v.copy() for v in args]
                up[k][idx] += h * unit
                dn[k][idx] -= h * unit
                gr[idx] += unit * (loss(up) - loss(dn)) / (2 * h)
        grads.append(gr)
    return grads


def _dj_grads(name, args, g):
    ts = [dj.tensor(a, requires_grad=True) for a in args]
    out = CASES[name](dj, *ts)
    out.backward(dj.tensor(g.astype(out.dtype.np)) if out.is_complex() else dj.tensor(g.real.copy()))
    return [t.grad.numpy() for t in ts]


def _seed(name, args):
    shape = CASES[name](dj, *[dj.tensor(a) for a in args]).shape
    rng = np.random.default_rng(7)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_gradient_is_the_conjugate_wirtinger_one(name):
    args = _args(name)
    g = _seed(name, args)
    out_is_complex = CASES[name](dj, *[dj.tensor(a) for a in args]).is_complex()
    if not out_is_complex:
        g = g.real
    for got, want in zip(_dj_grads(name, args, g), _loss_grad_fd(name, args, g)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_gradient_matches_torch(name):
    torch = pytest.importorskip("torch")
    args = _args(name)
    g = _seed(name, args)
    ts = [torch.tensor(a, requires_grad=True) for a in args]
    out = CASES[name](torch, *ts)
    if not out.is_complex():
        g = g.real
    out.backward(torch.tensor(g))
    for got, t in zip(_dj_grads(name, args, g), ts):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-10, atol=1e-12)
