"""The derivative table, row by row: finite differences and PyTorch as oracles.

One table (``CASES``) maps every row of ``kernels.derivatives.DERIVATIVES``
to one or more cases: input specs and the call, written once against a
module ``M`` that is either ``dispatch_jit`` or ``torch`` (dj accepts
PyTorch's ``dim=``/``keepdim=`` spellings).  Each case is checked twice:

* ``dj.autograd.gradcheck`` in float64 on tiny shapes;
* ``.grad`` of every input against PyTorch's for the same expression and
  the same output gradient, when torch is importable: in float32 for the
  first case of each row, in float64 for the others.

The first case of every binary row broadcasts (a (2, 3) against a (3,)) and
the first input of most rows is non-contiguous (a transposed buffer), so one
case covers both; the per-dtype Numba compiles are what the time goes on.
A row of DERIVATIVES without a case here fails ``test_every_row_is_covered``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.kernels.derivatives import DERIVATIVES

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None


@dataclass(frozen=True)
class In:
    """One input: shape, value range, non-contiguous (a transposed buffer), kind."""

    shape: tuple
    lo: float = -1.0
    hi: float = 1.0
    nc: bool = False
    kind: str = "float"          # "float" (requires grad), "const" (float, no grad), "bool"
    values: tuple | None = None  # exact values (ties), reshaped to ``shape``

    def build(self, rng) -> np.ndarray:
        if self.kind == "bool":
            return rng.random(self.shape) < 0.5
        shape = tuple(reversed(self.shape)) if self.nc else self.shape
        if self.values is not None:
            a = np.array(self.values, dtype=np.float64).reshape(shape)
        else:
            a = rng.uniform(self.lo, self.hi, shape)
        return a.T if self.nc else a


@dataclass(frozen=True)
class Case:
    fn: Callable                       # fn(M, *tensors)
    inputs: tuple
    torch_fn: Callable | None = None   # where torch spells it differently
    oracle: bool = True                # False: torch has no derivative for it
    check: dict = field(default_factory=dict)   # gradcheck keyword arguments


def x2(nc=True, lo=-1.0, hi=1.0):
    return In((2, 3), lo, hi, nc=nc)


def unary(f, lo=-1.0, hi=1.0, **kw):
    return [Case(f, (x2(lo=lo, hi=hi),), **kw)]


def binary(f, lx=(-1.0, 1.0), ly=(-1.0, 1.0), **kw):
    # (2, 3) non-contiguous against a broadcast (3,), and a (2, 1) against a (3,)
    return [Case(f, (In((2, 3), *lx, nc=True), In((3,), *ly)), **kw),
            Case(f, (In((2, 1), *lx), In((3,), *ly)), **kw)]


# positive values, away from 0
POS = dict(lo=0.5, hi=2.0)
TIES = (1.0, 3.0, 3.0, -2.0, -2.0, 0.5)
CLAMP_X = (-0.9, -0.3, 0.1, 0.4, 0.7, 0.2)       # away from the bounds below

CASES: dict[str, list[Case]] = {
    # -- arithmetic ----------------------------------------------------------------------------
    "add.Tensor": binary(lambda M, x, y: M.add(x, y, alpha=2.0)) + [
        Case(lambda M, x: x + 1.5, (x2(),))],
    "sub.Tensor": binary(lambda M, x, y: M.sub(x, y, alpha=0.5)) + [
        Case(lambda M, x: 1.5 - x, (x2(),))],
    "mul.Tensor": binary(lambda M, x, y: x * y) + [
        Case(lambda M, x: x * x, (x2(),)), Case(lambda M, x: 3.0 * x, (x2(),))],
    "div.Tensor": binary(lambda M, x, y: x / y, ly=(0.5, 2.0)) + [
        Case(lambda M, x: 2.0 / x, (x2(**POS),)), Case(lambda M, x: x / 4.0, (x2(),))],
    "neg": unary(lambda M, x: -x),
    "abs": unary(lambda M, x: M.abs(x), lo=0.2) + [Case(lambda M, x: M.abs(x), (x2(lo=-1.0, hi=-0.2),))],
    "square": unary(lambda M, x: M.square(x)),
    "reciprocal": unary(lambda M, x: M.reciprocal(x), **POS),
    "pow.Tensor": binary(lambda M, x, y: M.pow(x, y), lx=(0.5, 2.0)) + [
        Case(lambda M, x: x ** 3.0, (x2(),)), Case(lambda M, x: 2.0 ** x, (x2(),)),
        # PyTorch's masks: 0 ** y (no gradient to y for y >= 0) and x ** 0 (none to x)
        Case(lambda M, x, y: M.pow(x, y), (In((2,), values=(0.0, 1.5)), In((2,), values=(2.0, 0.0)))),
        Case(lambda M, y: 0.0 ** y, (In((2,), values=(2.0, 0.5)),))],
    "maximum.Tensor": binary(lambda M, x, y: M.maximum(x, y)) + [
        Case(lambda M, x: M.maximum(x, 0.25), (x2(),),
             torch_fn=lambda x: torch.maximum(x, torch.tensor(0.25, dtype=x.dtype))),
        Case(lambda M, x, y: M.maximum(x, y), (In((6,), values=TIES), In((6,), values=(0.0, 3.0, 1.0, -2.0, 0.0, 0.5))),
             check=dict(skip=True))],   # ties: not differentiable, PyTorch splits evenly
    "minimum.Tensor": binary(lambda M, x, y: M.minimum(x, y)) + [
        Case(lambda M, x, y: M.minimum(x, y), (In((6,), values=TIES), In((6,), values=(0.0, 3.0, 1.0, -2.0, 0.0, 0.5))),
             check=dict(skip=True))],
    "atan2.Tensor": binary(lambda M, x, y: M.atan2(x, y), ly=(0.5, 2.0)),
    # x / y in (2.1, 2.8): away from the jumps of floor
    "remainder.Tensor": binary(lambda M, x, y: M.remainder(x, y), lx=(2.2, 2.8), ly=(1.0, 1.05)),
    "floor_divide.Tensor": binary(lambda M, x, y: M.floor_divide(x, y), lx=(2.2, 2.8), ly=(1.0, 1.05),
                                  oracle=False, check=dict(skip=True)),   # torch and dj: "derivative not
                                  # implemented" (tests/autograd/test_grad_conventions.py)
    "copysign.Tensor": binary(lambda M, x, y: M.copysign(x, y), lx=(0.2, 1.0)) + [
        Case(lambda M, x, y: M.copysign(x, y), (In((3,), values=(0.0, 1.5, -2.0)), In((3,), values=(-1.0, -1.0, 2.0))),
             check=dict(skip=True))],    # 0 where x is 0, as PyTorch (not differentiable there)
    "hypot.Tensor": binary(lambda M, x, y: M.hypot(x, y), lx=(0.2, 1.0), ly=(0.2, 1.0)),
    "logaddexp.Tensor": binary(lambda M, x, y: M.logaddexp(x, y)),
    # a real input: conj and real are the identity, imag a constant 0 (complex inputs: test_complex_grads.py)
    "conj": unary(lambda M, x: M.conj(x) * x, torch_fn=lambda x: x.conj() * x),
    "real": unary(lambda M, x: M.real(x) * x),
    "imag": unary(lambda M, x: M.imag(x) + x, oracle=False),    # torch refuses imag of a real tensor
    # -- transcendental -------------------------------------------------------------------------
    "exp": unary(lambda M, x: M.exp(x)),
    "expm1": unary(lambda M, x: M.expm1(x)),
    "log": unary(lambda M, x: M.log(x), **POS),
    "log1p": unary(lambda M, x: M.log1p(x), lo=-0.5),
    "log2": unary(lambda M, x: M.log2(x), **POS),
    "log10": unary(lambda M, x: M.log10(x), **POS),
    "sqrt": unary(lambda M, x: M.sqrt(x), **POS),
    "rsqrt": unary(lambda M, x: M.rsqrt(x), **POS),
    "sin": unary(lambda M, x: M.sin(x)),
    "cos": unary(lambda M, x: M.cos(x)),
    "tan": unary(lambda M, x: M.tan(x)),
    "asin": unary(lambda M, x: M.asin(x), lo=-0.9, hi=0.9),
    "acos": unary(lambda M, x: M.acos(x), lo=-0.9, hi=0.9),
    "atan": unary(lambda M, x: M.atan(x), lo=-2.0, hi=2.0),
    "asinh": unary(lambda M, x: M.asinh(x)),
    "acosh": unary(lambda M, x: M.acosh(x), lo=1.2, hi=3.0),
    "atanh": unary(lambda M, x: M.atanh(x), lo=-0.9, hi=0.9),
    "sinh": unary(lambda M, x: M.sinh(x)),
    "cosh": unary(lambda M, x: M.cosh(x)),
    "tanh": unary(lambda M, x: M.tanh(x)),
    "sigmoid": unary(lambda M, x: M.sigmoid(x), lo=-3.0, hi=3.0),
    # the derivatives' own ops (x the gradient, y the forward's result): second derivatives of tanh/sigmoid
    "tanh_backward.Tensor": binary(lambda M, g, y: M.tanh_backward(g, y),
                                   torch_fn=lambda g, y: torch.ops.aten.tanh_backward(g, y)),
    "sigmoid_backward.Tensor": binary(lambda M, g, y: M.sigmoid_backward(g, y),
                                      torch_fn=lambda g, y: torch.ops.aten.sigmoid_backward(g, y)),
    "relu": unary(lambda M, x: M.relu(x)) + [Case(lambda M, x: M.relu(x), (In((4,), values=(-1.0, 0.5, -0.25, 2.0)),))],
    "erf": unary(lambda M, x: M.erf(x)),
    # piecewise constant: gradient 0 away from the jumps
    "sign": unary(lambda M, x: M.sign(x), lo=0.1, hi=0.9) + [Case(lambda M, x: M.sign(x), (In((2,), -0.9, -0.1),))],
    "floor": unary(lambda M, x: M.floor(x), lo=0.1, hi=0.9),
    "ceil": unary(lambda M, x: M.ceil(x), lo=0.1, hi=0.9),
    "round": unary(lambda M, x: M.round(x), lo=0.1, hi=0.4),
    "trunc": unary(lambda M, x: M.trunc(x), lo=1.1, hi=1.9),
    # -- selection -------------------------------------------------------------------------------
    "where.self": [Case(lambda M, c, x, y: M.where(c, x, y), (In((2, 3), kind="bool"), x2(), In((3,)))),
                   Case(lambda M, c, x: M.where(c, x, 0.0), (In((2, 3), kind="bool"), x2()))],
    "clamp": [Case(lambda M, x: M.clamp(x, min=-0.5, max=0.5), (In((2, 3), values=CLAMP_X, nc=True),)),
              Case(lambda M, x: M.clamp(x, min=-0.5), (In((2, 3), values=CLAMP_X),)),
              Case(lambda M, x, lo, hi: M.clamp(x, min=lo, max=hi),
                   (In((2, 3), values=CLAMP_X), In((3,), values=(-0.5, -0.5, 0.0)), In((2, 1), values=(0.3, 0.5))))],
    # -- reductions ------------------------------------------------------------------------------
    "sum": [Case(lambda M, x: M.sum(x), (x2(),)),
            Case(lambda M, x: M.sum(x, dim=1), (x2(),)),
            Case(lambda M, x: M.sum(x, dim=(0, 1), keepdim=True), (x2(),)),
            Case(lambda M, x: M.sum(x, dim=-2, keepdim=True), (x2(),)),
            Case(lambda M, x: M.sum(x, dim=0), (In((), values=(0.5,)),))],
    "mean": [Case(lambda M, x: M.mean(x), (x2(),)),
             Case(lambda M, x: M.mean(x, dim=0), (x2(),)),
             Case(lambda M, x: M.mean(x, dim=1, keepdim=True), (x2(),)),
             Case(lambda M, x: M.mean(x, dim=-1), (In((), values=(0.5,)),))],
    "prod": [Case(lambda M, x: M.prod(x), (x2(**POS),), torch_fn=lambda x: torch.prod(x)),
             Case(lambda M, x: M.prod(x, dim=1), (x2(**POS),), torch_fn=lambda x: torch.prod(x, dim=1)),
             # zeros: one zero gets the product of the others (no 0 / 0)
             Case(lambda M, x: M.prod(x), (In((2, 3), values=(0.0, 2.0, 3.0, 1.0, 2.0, 3.0)),),
                  torch_fn=lambda x: torch.prod(x)),
             Case(lambda M, x: M.prod(x, dim=1), (In((2, 3), values=(0.0, 0.0, 3.0, 0.0, 2.0, 3.0)),),
                  torch_fn=lambda x: torch.prod(x, dim=1))],
    "max": [Case(lambda M, x: M.max(x), (x2(),)),
            Case(lambda M, x: M.amax(x, dim=1), (x2(),)),
            Case(lambda M, x: M.amax(x, dim=0, keepdim=True), (x2(),)),
            # max along a dim is (values, indices): the gradient goes to the index
            Case(lambda M, x: M.max(x, dim=1).values, (x2(),)),
            # ties share the gradient evenly, as PyTorch's amax / full max
            Case(lambda M, x: M.max(x), (In((6,), values=TIES),), check=dict(skip=True)),
            Case(lambda M, x: M.amax(x, dim=1), (In((2, 3), values=TIES),), check=dict(skip=True))],
    "min": [Case(lambda M, x: M.min(x), (x2(),)),
            Case(lambda M, x: M.amin(x, dim=1), (x2(),)),
            Case(lambda M, x: M.min(x, dim=0, keepdim=True).values, (x2(),)),
            Case(lambda M, x: M.min(x), (In((6,), values=TIES),), check=dict(skip=True)),
            Case(lambda M, x: M.amin(x, dim=1), (In((2, 3), values=TIES),), check=dict(skip=True))],
    "var": [Case(lambda M, x: M.var(x, correction=0), (x2(),)),
            Case(lambda M, x: M.var(x, dim=1, correction=1), (x2(),)),
            Case(lambda M, x: M.var(x, dim=0, keepdim=True, correction=1), (x2(),))],
    "std": [Case(lambda M, x: M.std(x, correction=0), (x2(),)),
            Case(lambda M, x: M.std(x, dim=1, correction=1), (x2(),)),
            Case(lambda M, x: M.std(x, dim=0, keepdim=True, correction=0), (x2(),))],
    "logsumexp": [Case(lambda M, x: M.logsumexp(x, dim=(0, 1)), (x2(),)),
                  Case(lambda M, x: M.logsumexp(x, dim=1), (x2(),)),
                  Case(lambda M, x: M.logsumexp(x, dim=0, keepdim=True), (x2(),))],
    # -- linear algebra --------------------------------------------------------------------------
    "matmul": [Case(lambda M, a, b: a @ b, (x2(), In((3, 2), nc=True))),
               Case(lambda M, a, b: M.matmul(a, b), (In((3,)), In((3,)))),
               Case(lambda M, a, b: M.matmul(a, b), (x2(), In((3,)))),
               Case(lambda M, a, b: M.matmul(a, b), (In((2,)), x2())),
               # batched, with broadcasting of the batch and of a 2-D operand
               Case(lambda M, a, b: M.matmul(a, b), (In((2, 2, 3)), In((3, 2)))),
               Case(lambda M, a, b: M.matmul(a, b), (In((1, 2, 3)), In((2, 3, 1)))),
               Case(lambda M, a, b: M.matmul(a, b), (In((3,)), In((2, 3, 2))))],
    "dot": [Case(lambda M, a, b: M.dot(a, b), (In((3,)), In((3,))))],
    # -- views and shape ops ---------------------------------------------------------------------
    "reshape": [Case(lambda M, x: M.reshape(x, (3, 2)), (x2(),)),
                Case(lambda M, x: x.reshape((6,)) * x.reshape((6,)), (x2(nc=False),))],
    "view": [Case(lambda M, x: x.view((3, 2)), (x2(nc=False),))],
    "flatten": [Case(lambda M, x: M.flatten(x), (x2(),))],
    "squeeze": [Case(lambda M, x: M.squeeze(x), (In((2, 1, 3)),)),
                Case(lambda M, x: M.squeeze(x, 1), (In((2, 1)),))],
    "unsqueeze": [Case(lambda M, x: M.unsqueeze(x, 1), (x2(),))],
    "permute": [Case(lambda M, x: M.permute(x, (1, 0)), (x2(),)),
                Case(lambda M, x: M.permute(x, (2, 0, 1)), (In((2, 1, 3)),))],
    "transpose.int": [Case(lambda M, x: M.transpose(x, 0, 1), (x2(),)),
                      Case(lambda M, x: x.T * 2.0, (x2(nc=False),)),
                      Case(lambda M, x: M.transpose(x, -1, -3), (In((2, 1, 3)),))],
    "expand": [Case(lambda M, x: x.expand((2, 3)), (In((1, 3)),)),
               Case(lambda M, x: x.expand((2, 2, 3)), (In((2, 1, 3)),))],
    "narrow": [Case(lambda M, x: M.narrow(x, 1, 1, 1), (x2(),)),
               Case(lambda M, x: M.narrow(x, 0, 0, 1), (x2(),)),
               Case(lambda M, x: M.narrow(x, 1, -2, 2), (x2(),))],
    "cat": [Case(lambda M, x, y: M.cat([x, y], dim=1), (x2(), In((2, 2)))),
            Case(lambda M, x, y: M.cat([x, y, x]), (In((2,)), In((3,))))],
    "stack": [Case(lambda M, x, y: M.stack([x, y], dim=1), (x2(), In((2, 3)))),
              Case(lambda M, x, y: M.stack([x, y]), (In((3,)), In((3,))))],
    "clone": [Case(lambda M, x: x.clone(), (x2(),))],
    # float64 -> float32 -> float64: finite differences see float32 rounding, so a coarser eps
    "to.dtype": [Case(lambda M, x: x.to(M.float32).to(M.float64) * x, (x2(),),
                      check=dict(eps=1e-3, atol=1e-4, rtol=1e-3))],
}

# -- the math, special-function and activation rows (kernels/derivatives_elementwise.py) ----------------
# values away from every kink of the piecewise rows (0, +-0.5, +-1, +-3 and threshold's 0.1)
KINK = (-0.9, -0.35, 0.3, 0.7, -0.2, 0.8)


def act(name, *args, **kw):
    """F.<name>(x, *args, **kw) on the kink-free values, both modules' nn.functional."""
    return [Case(lambda M, x: getattr(M.nn.functional, name)(x, *args, **kw), (In((2, 3), values=KINK, nc=True),))]


def special(name, lo=-1.0, hi=1.0):
    return unary(lambda M, x: getattr(M.special, name)(x), lo=lo, hi=hi)


CASES.update({
    # gelu's rows (F.gelu picks one by approximate) and their backward ops (PyTorch's gelu_backward)
    "_gelu_erf": unary(lambda M, x: M.nn.functional.gelu(x), lo=-3.0, hi=3.0),
    "_gelu_tanh": unary(lambda M, x: M.nn.functional.gelu(x, approximate="tanh"), lo=-3.0, hi=3.0),
    "_gelu_erf_backward.Tensor": binary(lambda M, g, x: M.ops.aten._gelu_erf_backward(g, x), ly=(-3.0, 3.0),
                                        torch_fn=lambda g, x: torch.ops.aten.gelu_backward(*torch.broadcast_tensors(g, x))),
    "_gelu_tanh_backward.Tensor": binary(
        lambda M, g, x: M.ops.aten._gelu_tanh_backward(g, x), ly=(-3.0, 3.0),
        # torch's gelu_backward (oneDNN) refuses to broadcast: the operands broadcast first
        torch_fn=lambda g, x: torch.ops.aten.gelu_backward(*torch.broadcast_tensors(g, x), approximate="tanh")),
    "_prelu_kernel.Tensor": [Case(lambda M, x, w: M.nn.functional.prelu(x, w),
                                  (In((2, 3), values=KINK, nc=True), In((3,), 0.1, 0.5)))],
    "celu": act("celu", 0.7), "elu": act("elu", 1.3), "selu": act("selu"), "hardshrink": act("hardshrink"),
    "softshrink": act("softshrink"), "hardsigmoid": act("hardsigmoid"), "hardswish": act("hardswish"),
    "hardtanh": act("hardtanh"), "leaky_relu": act("leaky_relu", 0.1), "log_sigmoid": act("logsigmoid"),
    "mish": act("mish"), "softplus": act("softplus", beta=2.0), "softsign": act("softsign"),
    "tanhshrink": act("tanhshrink"), "threshold": act("threshold", 0.1, 20.0),
    "deg2rad": unary(lambda M, x: M.deg2rad(x)), "rad2deg": unary(lambda M, x: M.rad2deg(x)),
    "digamma": unary(lambda M, x: M.digamma(x), **POS), "lgamma": unary(lambda M, x: M.lgamma(x), **POS),
    "polygamma": unary(lambda M, x: M.polygamma(1, x), **POS),
    "erfc": unary(lambda M, x: M.erfc(x)), "erfinv": unary(lambda M, x: M.erfinv(x), lo=-0.8, hi=0.8),
    "exp2": unary(lambda M, x: M.exp2(x)), "i0": unary(lambda M, x: M.i0(x)),
    "frac": unary(lambda M, x: M.frac(x), lo=0.1, hi=0.9), "sinc": unary(lambda M, x: M.sinc(x), lo=0.2),
    "logit": unary(lambda M, x: M.logit(x), lo=0.2, hi=0.8), "nan_to_num": unary(lambda M, x: M.nan_to_num(x)),
    "positive": unary(lambda M, x: M.positive(x) * x),
    "sgn": [Case(lambda M, x: M.sgn(x) + x, (In((2, 3), values=KINK, nc=True),))],
    "float_power.Tensor": binary(lambda M, x, y: M.float_power(x, y), lx=(0.5, 2.0)),
    "fmax.Tensor": binary(lambda M, x, y: M.fmax(x, y)), "fmin.Tensor": binary(lambda M, x, y: M.fmin(x, y)),
    # x / y in (2.1, 2.8): away from fmod's jumps
    "fmod.Tensor": binary(lambda M, x, y: M.fmod(x, y), lx=(2.2, 2.8), ly=(1.0, 1.05)),
    "logaddexp2.Tensor": binary(lambda M, x, y: M.logaddexp2(x, y)),
    "ldexp.Tensor": [Case(lambda M, x, e: M.ldexp(x, e), (x2(), In((3,), 0.0, 3.0, kind="const")))],
    # torch and dj: "derivative not implemented"
    "heaviside.Tensor": binary(lambda M, x, y: M.heaviside(x, y), oracle=False, check=dict(skip=True)),
    "special_entr": special("entr", 0.2, 2.0), "special_erfcx": special("erfcx"), "special_i0e": special("i0e"),
    "special_i1": special("i1"), "special_i1e": special("i1e"), "special_log_ndtr": special("log_ndtr"),
    "special_ndtr": special("ndtr"), "special_ndtri": special("ndtri", 0.2, 0.8),
    "special_xlog1py.Tensor": binary(lambda M, x, y: M.special.xlog1py(x, y), ly=(0.5, 2.0)),
    # the derivative in q only (torch and dj: none in the exponent)
    "special_zeta.Tensor": [Case(lambda M, s, q: M.special.zeta(s, q),
                                 (In((3,), 2.0, 3.0, kind="const"), x2(lo=0.5, hi=2.0)))],
})

IDS = [(row, i) for row, cases in CASES.items() for i in range(len(cases))]


def test_every_row_is_covered():
    """A new row of the derivative table needs a case here."""
    missing = sorted(set(DERIVATIVES) - set(CASES))
    assert not missing, f"rows of DERIVATIVES without a test case: {missing}"
    stale = sorted(set(CASES) - set(DERIVATIVES))
    assert not stale, f"test cases for rows that are not in DERIVATIVES: {stale}"


def _arrays(row, i, case):
    rng = np.random.default_rng(zlib.crc32(f"{row}/{i}".encode()))
    return [spec.build(rng) for spec in case.inputs]


def _dj_inputs(arrays, case, dtype):
    out = []
    for a, spec in zip(arrays, case.inputs):
        if spec.kind == "bool":
            out.append(dj.from_numpy(a))
            continue
        # astype keeps the (transposed) memory layout: the tensor stays non-contiguous
        t = dj.from_numpy(a.astype(dtype.np, order="K"))
        if spec.kind == "float":
            t.requires_grad_()
        out.append(t)
    return out


@pytest.mark.parametrize("row,i", IDS, ids=[f"{r}-{i}" for r, i in IDS])
def test_gradcheck_float64(row, i):
    case = CASES[row][i]
    if case.check.get("skip"):
        pytest.skip("not differentiable at these inputs (checked against torch only)")
    ins = _dj_inputs(_arrays(row, i, case), case, dj.float64)
    assert all(not t.is_contiguous() for t, spec in zip(ins, case.inputs) if spec.nc)
    assert dj.autograd.gradcheck(lambda *ts: case.fn(dj, *ts), tuple(ins), **case.check)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("row,i", IDS, ids=[f"{r}-{i}" for r, i in IDS])
def test_grad_matches_torch(row, i):
    """The first case of every row in float32; the others in float64, which
    reuses the kernels gradcheck compiled (a float32 compile per op and
    layout is what this file spends its time on)."""
    case = CASES[row][i]
    if not case.oracle:
        pytest.skip("torch has no derivative for this op")
    dt, tol = (dj.float32, dict(rtol=1e-4, atol=1e-5)) if i == 0 else (dj.float64, dict(rtol=1e-10, atol=1e-12))
    arrays = _arrays(row, i, case)
    ours = _dj_inputs(arrays, case, dt)
    theirs = [torch.from_numpy(np.ascontiguousarray(a) if a.dtype == bool else a.astype(dt.np)) for a in arrays]
    for t, spec in zip(theirs, case.inputs):
        if spec.kind == "float":
            t.requires_grad_()
    out = case.fn(dj, *ours)
    ref = case.torch_fn(*theirs) if case.torch_fn else case.fn(torch, *theirs)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), **tol)
    seed = np.random.default_rng(0).uniform(0.5, 1.5, tuple(out.shape)).astype(out.dtype.np)
    out.backward(dj.from_numpy(seed))
    ref.backward(torch.from_numpy(seed))
    for k, (a, b, spec) in enumerate(zip(ours, theirs, case.inputs)):
        if spec.kind != "float":
            continue
        assert a.grad is not None, f"input {k}: no gradient"
        assert a.grad.dtype is dt and tuple(a.grad.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol,
                                   err_msg=f"{row} case {i}: gradient of input {k}")


# -- what a node saves: per-input formulas (Grad rows) -------------------------------------------
def test_a_node_saves_only_what_the_gradients_it_will_compute_read():
    """As PyTorch: ``x * 2.0`` saves the 2.0, ``c * x`` saves c, and only ``x * x`` saves both."""
    x = dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)
    c = dj.tensor([3.0, 4.0], dtype=dj.float64)
    m, k = x.reshape((1, 2)), c.reshape((2, 1))
    saved = {
        "x * 2.0": (x * 2.0, {"other"}), "c * x": (c * x, {"self"}), "x * x": (x * x, {"self", "other"}),
        "x + c": (x + c, set()), "x / c": (x / c, {"other"}), "c / x": (c / x, {"result", "other"}),
        "x ** 2.0": (x ** 2.0, {"self", "other"}), "2.0 ** x": (2.0 ** x, {"self", "other", "result"}),
        "m @ k": (m @ k, {"other"}), "k @ m": (k @ m, {"self"}),
    }
    for what, (y, names) in saved.items():
        assert set(y.grad_fn.saved) == names, what


def test_backward_computes_only_the_gradients_that_are_needed():
    seen = []

    class Record(dj.DispatchMode):
        def __dispatch__(self, op, types, args, kwargs):
            seen.append(op.name())
            return op(*args, **kwargs)
    x = dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)
    y = (x * 2.0 + 1.0).sum()
    with Record():
        y.backward()
    assert seen.count("aten::mul.Tensor") == 1          # g * 2.0; not g * x for the number
    assert "aten::add.Tensor" not in seen               # nor g * alpha for it
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def _modify_an_operand_that_was_not_saved(M, mk):
    x = mk([1.0, 2.0])
    h = x * 1.0
    y = h * M.tensor([3.0, 4.0], dtype=M.float64)      # h's gradient reads the constant, not h
    h.add_(10.0)
    y.sum().backward()
    return x.grad.numpy().copy()


def _dj_leaf(values):
    return dj.tensor(values, dtype=dj.float64, requires_grad=True)


def test_an_operand_that_was_not_saved_may_be_modified_in_place():
    np.testing.assert_array_equal(_modify_an_operand_that_was_not_saved(dj, _dj_leaf), [3.0, 4.0])


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_an_operand_that_was_not_saved_may_be_modified_in_place_as_in_torch():
    ours = _modify_an_operand_that_was_not_saved(dj, _dj_leaf)
    theirs = _modify_an_operand_that_was_not_saved(
        torch, lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True))
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_second_derivatives_through_the_fused_backward_ops_match_torch(act):
    """tanh's and sigmoid's backward is one op (tanh_backward, sigmoid_backward) with its own row:
    the gradient of a gradient (create_graph=True) is PyTorch's, in float64."""
    a = np.random.default_rng(7).uniform(-2.0, 2.0, (2, 3))
    x, tx = dj.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    ys = [getattr(M, act)(t) for M, t in ((dj, x), (torch, tx))]
    assert ys[0].grad_fn.name().startswith(act.capitalize())
    (g,), (tg,) = dj.autograd.grad(ys[0].sum(), [x], create_graph=True), torch.autograd.grad(ys[1].sum(), [tx],
                                                                                              create_graph=True)
    np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), rtol=1e-12)
    (g * g).sum().backward()
    (tg * tg).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_second_derivatives_of_gelu_match_torch(approximate):
    """gelu's backward is one op with its own row (gelu''): the gradient of a gradient is PyTorch's."""
    a = np.random.default_rng(8).uniform(-3.0, 3.0, (2, 3))
    x, tx = dj.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    ys = [M.nn.functional.gelu(t, approximate=approximate) for M, t in ((dj, x), (torch, tx))]
    assert ys[0].grad_fn.name().startswith("GeluBackward")
    (g,), (tg,) = dj.autograd.grad(ys[0].sum(), [x], create_graph=True), torch.autograd.grad(ys[1].sum(), [tx],
                                                                                              create_graph=True)
    np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), rtol=1e-12)
    (g * g).sum().backward()
    (tg * tg).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
