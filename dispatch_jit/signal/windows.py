"""``dj.signal.windows``: PyTorch's window functions (``torch.signal.windows``), same names,
keyword-only arguments, defaults, checks and messages.

A window is a factory: its values are a closed formula of the index, computed here in float64
with NumPy and rounded once to the dtype asked for (PyTorch computes in that dtype; the two agree
within ``torch.testing``'s tolerances), then made a tensor on the device asked for.  ``sym=False``
gives the periodic window (the first ``M`` points of a symmetric one of length ``M + 1``).

>>> import dispatch_jit as dj
>>> dj.signal.windows.bartlett(5)
tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
>>> dj.signal.windows.general_cosine(3, a=[0.5, 0.5], sym=True).dtype
dispatch_jit.float32
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..creation import tensor
from ..dtypes import as_dtype, float32, float64, get_default_dtype
from ..errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _dtype(name: str, M: int, dtype):
    dt = get_default_dtype() if dtype is None else as_dtype(dtype)
    if M < 0:
        raise InvalidArgumentError(f"{name} requires non-negative window length, got M={M}")
    if dt is not float32 and dt is not float64:
        raise InvalidArgumentError(f"{name} expects float32 or float64 dtypes, got: {dt}")
    return dt


def _make(values, dt, device, requires_grad):
    return tensor(np.asarray(values, np.float64).astype(dt.np), dtype=dt, device=device,
                  requires_grad=requires_grad)


def _ramp(M: int, start: float, step: float) -> np.ndarray:
    """``M`` points from ``start`` by ``step`` (PyTorch's linspace from start to start + (M - 1) * step)."""
    return start + step * np.arange(M, dtype=np.float64)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True, dtype=None,
                device=None, requires_grad: bool = False):
    """``exp(-|n - center| / tau)``; ``center`` defaults to the middle, and only a periodic window
    (``sym=False``) may move it.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.exponential(3, tau=1.0)
    tensor([0.3679, 1.0000, 0.3679])
    """
    dt = _dtype("exponential", M, dtype)
    if tau <= 0:
        raise InvalidArgumentError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise InvalidArgumentError("Center must be None for symmetric windows")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    return _make(np.exp(-np.abs(_ramp(M, -center, 1.0) / tau)), dt, device, requires_grad)


def cosine(M: int, *, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """The sine window ``sin(pi * (n + 0.5) / M)``.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.cosine(2)
    tensor([0.7071, 0.7071])
    """
    dt = _dtype("cosine", M, dtype)
    step = math.pi / (M + 1 if not sym and M > 1 else M) if M else 0.0
    return _make(np.sin(_ramp(M, 0.5 * step, step)), dt, device, requires_grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, device=None,
             requires_grad: bool = False):
    """``exp(-(n - center)**2 / (2 * std**2))``, centred.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.gaussian(3, std=1.0)
    tensor([0.6065, 1.0000, 0.6065])
    """
    dt = _dtype("gaussian", M, dtype)
    if std <= 0:
        raise InvalidArgumentError(f"Standard deviation must be positive, got: {std} instead.")
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    k = _ramp(M, start, 1.0) / (std * math.sqrt(2))
    return _make(np.exp(-(k ** 2)), dt, device, requires_grad)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, device=None,
           requires_grad: bool = False):
    """``I0(beta * sqrt(1 - (2n / (M - 1) - 1)**2)) / I0(beta)`` (``I0``: the modified Bessel
    function of order 0).

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.kaiser(3, beta=0.0)
    tensor([1., 1., 1.])
    """
    dt = _dtype("kaiser", M, dtype)
    if beta < 0:
        raise InvalidArgumentError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _make(np.ones(M), dt, device, requires_grad)
    k = np.minimum(_ramp(M, -beta, 2.0 * beta / (M if not sym else M - 1)), beta)
    return _make(np.i0(np.sqrt(np.maximum(beta * beta - k * k, 0.0))) / np.i0(beta), dt, device, requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """The triangular window ``1 - |2n / (M - 1) - 1|``.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.bartlett(4, sym=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    dt = _dtype("bartlett", M, dtype)
    if M <= 1:
        return _make(np.ones(M), dt, device, requires_grad)
    return _make(1 - np.abs(_ramp(M, -1.0, 2 / (M if not sym else M - 1))), dt, device, requires_grad)


def general_cosine(M, *, a: Iterable, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """``sum_i (-1)**i * a[i] * cos(2 * pi * i * n / (M - 1))``: the family of hann, hamming,
    blackman and nuttall.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.general_cosine(3, a=[0.5, 0.5])
    tensor([0., 1., 0.])
    """
    dt = _dtype("general_cosine", M, dtype)
    if M <= 1:
        return _make(np.ones(M), dt, device, requires_grad)
    if not isinstance(a, Iterable):
        raise ArgumentTypeError("Coefficients must be a list/tuple")
    coeffs = list(a)
    if not coeffs:
        raise InvalidArgumentError("Coefficients cannot be empty")
    k = _ramp(M, 0.0, 2 * math.pi / (M if not sym else M - 1))
    return _make(sum((-1) ** i * w * np.cos(i * k) for i, w in enumerate(coeffs)), dt, device, requires_grad)


def general_hamming(M, *, alpha: float = 0.54, sym: bool = True, dtype=None, device=None,
                    requires_grad: bool = False):
    """``alpha - (1 - alpha) * cos(2 * pi * n / (M - 1))``.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.general_hamming(3, alpha=0.5)
    tensor([0., 1., 0.])
    """
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """The Hamming window, ``general_hamming`` with ``alpha=0.54``.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.hamming(3)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return general_hamming(M, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """The Hann window, ``general_hamming`` with ``alpha=0.5``.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.hann(3)
    tensor([0., 1., 0.])
    """
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """The Blackman window, ``general_cosine`` with ``a=[0.42, 0.5, 0.08]``.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.blackman(3)[1].item()
    1.0
    """
    _dtype("blackman", M, dtype)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, device=None, requires_grad: bool = False):
    """The minimum 4-term Blackman-Harris window of Nuttall.

    >>> import dispatch_jit as dj
    >>> dj.signal.windows.nuttall(3)
    tensor([3.6280e-04, 1.0000e+00, 3.6280e-04])
    """
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)
