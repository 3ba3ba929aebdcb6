"""The elementwise table's activation rows: ``torch.nn.functional``'s pointwise activations.

Each is PyTorch's scalar formula (aten's CPU kernels), with its parameters as statics
(``leaky_relu``'s negative_slope, ``elu``'s alpha/scale/input_scale, ...).  Most are aten ops
without a ``torch.<name>``: those rows are neither top-level functions nor methods, and
``dj.nn.functional`` (nn/functional_activation.py) calls them as PyTorch's functional API does.
Literals are float64, so a float32 input's result is computed in float64 and rounded once.
"""

from __future__ import annotations

from .scalar_op import FLT, REAL, ScalarOp

__all__ = ["ROWS"]

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _act(name, expr, cats=FLT, statics=(), top=False, rule="promote", method=False):
    # top: torch.<name> exists (torch.selu); method: Tensor.<name> does (hardshrink)
    return ScalarOp(name, 1, expr, rule=rule, cats=cats, statics=statics, function=top, method=method)


def _internal(name, arity, expr, f32):
    """A row no torch function names (a composite's one pass): no method, no in-place form."""
    return ScalarOp(name, arity, expr, cats=FLT, by_cat={"float32": f32}, inplace=False, method=False,
                    function=False)


ROWS = [
    _act("hardswish", "x * _minimum(_maximum(x + 3.0, 0.0), 6.0) / 6.0"),
    _act("hardsigmoid", "_minimum(_maximum(x + 3.0, 0.0), 6.0) / 6.0"),
    _act("hardtanh", "_minimum(_maximum(x, min_val), max_val)", REAL, ("Scalar min_val=-1", "Scalar max_val=1")),
    _act("leaky_relu", "x if x > _zero else x * negative_slope", statics=("Scalar negative_slope=0.01",)),
    _act("elu", "x * scale if x > _zero else math.expm1(x * input_scale) * (alpha * scale)",
         statics=("Scalar alpha=1", "Scalar scale=1", "Scalar input_scale=1")),
    _act("selu", f"x * {_SELU_SCALE!r} if x > _zero else math.expm1(x) * {_SELU_ALPHA * _SELU_SCALE!r}", top=True),
    _act("celu", "x if x > _zero else math.expm1(x / alpha) * alpha", statics=("Scalar alpha=1",), top=True),
    _act("softplus", "x if x * beta > threshold else math.log1p(math.exp(x * beta)) / beta",
         statics=("Scalar beta=1", "Scalar threshold=20")),
    # NaN stays NaN (x * 0), as PyTorch's softshrink
    _act("softshrink", "x - lambd if x > lambd else (x + lambd if x < -lambd else x * _zero)",
         statics=("Scalar lambd=0.5",)),
    _act("hardshrink", "_zero if (x >= -lambd and x <= lambd) else x", statics=("Scalar lambd=0.5",), top=True,
         method=True),
    _act("threshold", "value if x <= threshold else x", REAL, ("Scalar threshold", "Scalar value"), top=True),
    _act("softsign", "x / (1.0 + abs(x))", rule="float"),
    _act("tanhshrink", "x - math.tanh(x)", rule="float"),
    _act("mish", "x * math.tanh(math.log1p(math.exp(x)))"),
    _act("log_sigmoid", "_minimum(x, _zero) - math.log1p(math.exp(-abs(x)))"),
    # gelu's two forms and their derivatives (x the output's gradient, y the input), one pass each:
    # F.gelu's approximate is a str, no static of a row, so composite.py's gelu picks the row.
    # float32: support/vecmath's forms (erf_f32.py's exact form in float32 arithmetic; gelu.py's
    # tanh form, one float64 evaluation rounded once); float64:
    # torch's formulas with libm
    _internal("_gelu_erf", 1, "_gelu_erf_libm(x)", "_gelu_erf_f32(x)"),
    _internal("_gelu_tanh", 1, "_gelu_tanh_libm(x)", "_gelu_tanh_f32(x)"),
    _internal("_gelu_erf_backward", 2, "_gelu_erf_backward_libm(x, y)", "_gelu_erf_backward_f32(x, y)"),
    _internal("_gelu_tanh_backward", 2, "_gelu_tanh_backward_libm(x, y)", "_gelu_tanh_backward_f32(x, y)"),
    # prelu's weight, broadcast by F.prelu to the channel dim: PyTorch's _prelu_kernel
    ScalarOp("_prelu_kernel", 2, "x if x > _zero else y * x", cats=FLT, inplace=False, method=False, function=False),
]
