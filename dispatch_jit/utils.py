"""``dj.utils``: helpers for backends that are not built in, as ``torch.utils``'s.

>>> import dispatch_jit as dj
>>> dj.utils.privateuse1_backend_name() in ("privateuseone", "dask")
True
"""

from __future__ import annotations

from .devices import register_device_module, register_lazy_device_module
from .keys import privateuse1_backend_name, rename_privateuse1_backend

__all__ = ["rename_privateuse1_backend", "privateuse1_backend_name", "register_device_module",
           "register_lazy_device_module"]
