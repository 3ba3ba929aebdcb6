"""The standard's ``fft`` extension over the lapack family's ``fft_*`` ops (``scipy.fft`` at
the CPU key); ``fftfreq`` and ``rfftfreq`` are creation functions.

>>> from dispatch_jit import array_api as xp
>>> xp.fft.fft(xp.asarray([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import creation
from dispatch_jit.dtypes import as_dtype, get_default_dtype
from dispatch_jit.ops import entries

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

A = entries("aten")


def _one(opname: str):
    op = getattr(A, opname)

    def fn(x, /, *, n=None, axis=-1, norm="backward"):
        return op(x, n, axis, norm)
    fn.__name__ = fn.__qualname__ = opname[4:]
    return fn


def _many(opname: str):
    op = getattr(A, opname)

    def fn(x, /, *, s=None, axes=None, norm="backward"):
        return op(x, None if s is None else list(s), None if axes is None else list(axes), norm)
    fn.__name__ = fn.__qualname__ = opname[4:]
    return fn


fft, ifft, rfft, irfft, hfft, ihfft = (_one(f"fft_{n}") for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"))
fftn, ifftn, rfftn, irfftn = (_many(f"fft_{n}") for n in ("fftn", "ifftn", "rfftn", "irfftn"))


def fftshift(x, /, *, axes=None):
    return A.fft_fftshift(x, None if axes is None else ([axes] if isinstance(axes, int) else list(axes)))


def ifftshift(x, /, *, axes=None):
    return A.fft_ifftshift(x, None if axes is None else ([axes] if isinstance(axes, int) else list(axes)))


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    return creation.asarray(np.fft.fftfreq(n, d).astype(dt.np), device=device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    return creation.asarray(np.fft.rfftfreq(n, d).astype(dt.np), device=device)
