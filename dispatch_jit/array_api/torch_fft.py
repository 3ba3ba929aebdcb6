"""``dj.fft``: ``torch.fft``'s functions, with PyTorch's names, signatures and defaults (``dim``,
``norm=None``), over the lapack family's ``fft_*`` ops.

>>> import dispatch_jit as dj
>>> dj.fft.rfft(dj.tensor([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j])

Integer and bool input is transformed in the default float dtype, as in PyTorch:

>>> dj.fft.fft(dj.tensor([1, 0])).dtype
dispatch_jit.complex64
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import creation
from dispatch_jit.dtypes import as_dtype, get_default_dtype
from dispatch_jit.errors import SchemaError
from dispatch_jit.ops import entries

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_ops = entries("aten")


def _no_out(name: str, out) -> None:
    if out is not None:
        raise SchemaError(f"fft.{name}: out= is not supported by dispatch_jit; assign the result instead")


def _promoted(input):  # noqa: A002
    """Integer and bool input in the default float dtype, as torch.fft does (the array API's fft, like the
    kernels, takes floating and complex input only)."""
    dt = getattr(input, "dtype", None)
    if dt is not None and not (dt.is_floating_point or dt.is_complex):
        return input.to(get_default_dtype())
    return input


def _one(name: str):
    def fn(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002  (PyTorch's argument name)
        _no_out(name, out)
        return getattr(_ops, f"fft_{name}")(_promoted(input), n, dim, norm)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.fft.{name}``: the one-dimensional transform along ``dim``, ``n`` points."
    return fn


def _many(name: str, default_dim):
    def fn(input, s=None, dim=default_dim, norm=None, *, out=None):  # noqa: A002
        _no_out(name, out)
        dims = None if dim is None else [dim] if isinstance(dim, int) else list(dim)
        return getattr(_ops, f"fft_{name.rstrip('2') + ('n' if name.endswith('2') else '')}")(
            _promoted(input), None if s is None else list(s), dims, norm)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.fft.{name}``: the transform over ``dim``, of sizes ``s``."
    return fn


fft, ifft, rfft, irfft, hfft, ihfft = (_one(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"))
fftn, ifftn, rfftn, irfftn = (_many(n, None) for n in ("fftn", "ifftn", "rfftn", "irfftn"))
fft2, ifft2, rfft2, irfft2 = (_many(n, (-2, -1)) for n in ("fft2", "ifft2", "rfft2", "irfft2"))


def fftshift(input, dim=None):  # noqa: A002
    """The zero frequency moved to the middle along ``dim`` (every dimension by default)."""
    return _ops.fft_fftshift(input, None if dim is None else [dim] if isinstance(dim, int) else list(dim))


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of ``fftshift``."""
    return _ops.fft_ifftshift(input, None if dim is None else [dim] if isinstance(dim, int) else list(dim))


def _freq(fn, name: str, n, d, out, dtype, device, requires_grad):
    _no_out(name, out)
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    # PyTorch: arange(n) in the result dtype, times 1 / (n * d) (rounded to it)
    k = fn(n, 1.0).astype(np.float64) * n            # the integer sample frequencies, exactly
    t = creation.tensor(k.astype(dt.np), device=device)
    out_t = t * dt.np.type(1.0 / (n * d)).item()
    return out_t.requires_grad_(True) if requires_grad else out_t


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``.

    >>> import dispatch_jit as dj
    >>> dj.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    return _freq(np.fft.fftfreq, "fftfreq", n, d, out, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point real transform (the non-negative ones)."""
    return _freq(np.fft.rfftfreq, "rfftfreq", n, d, out, dtype, device, requires_grad)
