"""``Conv1d`` and ``Conv2d``, with PyTorch's constructor arguments, defaults, initialization
(kaiming-uniform weight, bias uniform in +-1/sqrt(fan_in)), parameter names and
``padding_mode`` (a non-zero mode pads with ``F.pad`` first, as PyTorch's).

>>> import dispatch_jit as dj
>>> _ = dj.manual_seed(0)
>>> conv = dj.nn.Conv2d(3, 8, 3, padding=1)
>>> conv
Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
>>> conv(dj.ones(2, 3, 5, 5)).shape
(2, 8, 5, 5)
"""

from __future__ import annotations

import math

from ..creation import empty
from ..errors import SchemaError
from . import functional as F
from . import init
from .module import Module, Parameter

__all__ = ["Conv1d", "Conv2d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v, n: int) -> tuple:
    return tuple(v) * (n if len(tuple(v)) == 1 else 1) if isinstance(v, (list, tuple)) else (v,) * n


class _ConvNd(Module):
    _nd = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise SchemaError("groups must be a positive integer")
        if in_channels % groups:
            raise SchemaError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise SchemaError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise SchemaError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.kernel_size, self.stride, self.dilation = _tuple(kernel_size, nd), _tuple(stride, nd), _tuple(dilation, nd)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise SchemaError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise SchemaError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, nd)
        self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, padding_mode
        self.transposed, self.output_padding = False, (0,) * nd
        # F.pad's (left, right) pairs, last dim first: PyTorch's _reversed_padding_repeated_twice
        if isinstance(self.padding, str):
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            self._reversed_padding_repeated_twice = [v for t in reversed(total) for v in (t // 2, t - t // 2)]
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding) for _ in range(2)]
        self.weight = Parameter(empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dtype,
                                      device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.weight.shape[2:])
            if fan_in:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv_forward(self, input, weight, bias):
        fn = F.conv1d if self._nd == 1 else F.conv2d
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        nd = self._nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) or (C_in, L): weight (C_out, C_in / groups, k)."""
    _nd = 1


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W): weight (C_out, C_in / groups, kH, kW)."""
    _nd = 2
