"""The "aten" namespace's libraries: the handles its registrations are made through.

``aten`` defines every schema (``Library("aten", "DEF")``, as TORCH_LIBRARY);
``fallbacks`` holds the backend fallbacks every op gets (``Library("_",
"IMPL")``).  kernels/__init__.py makes the registrations through them, once.
"""

from __future__ import annotations

from dispatch_jit.library import Library

__all__ = ["aten", "fallbacks"]

aten = Library("aten", "DEF")
fallbacks = Library("_", "IMPL")
