"""``__array_namespace_info__``: what this namespace supports (devices, dtypes, defaults)."""

from __future__ import annotations

from dispatch_jit.devices import CPU_DEVICE, device
from dispatch_jit.dtypes import default_complex_dtype, get_default_dtype, int64

from ._dtypes import DTYPES, isdtype

__all__ = ["__array_namespace_info__"]


class __array_namespace_info__:  # noqa: N801  (the standard's name)
    """The standard's inspection object.  Its default floating dtypes are dispatch_jit's
    (``dj.get_default_dtype()``, which ``dj.set_default_dtype`` changes; the complex one follows).

    >>> from dispatch_jit import array_api as xp
    >>> info = xp.__array_namespace_info__()
    >>> info.default_dtypes()["real floating"], info.devices()[0]
    (dispatch_jit.float32, device(type='cpu'))
    """

    def capabilities(self) -> dict:
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return CPU_DEVICE

    def devices(self) -> tuple:
        # a tuple: the 2025.12 standard's type (__array_api_version__); the versions before it said a list
        from dispatch_jit.cuda import runtime
        if not runtime.is_available():
            return (CPU_DEVICE,)
        return (CPU_DEVICE,) + tuple(device("cuda", i) for i in range(runtime.device_count()))

    def default_dtypes(self, *, device=None) -> dict:
        return {"real floating": get_default_dtype(), "complex floating": default_complex_dtype(), "integral": int64,
                "indexing": int64}

    def dtypes(self, *, device=None, kind=None) -> dict:
        return {d.name: d for d in DTYPES if kind is None or isdtype(d, kind)}
