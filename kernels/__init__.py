"""dispatch_jit's operator library (installed as ``dispatch_jit.kernels``).

Like TORCH_LIBRARY / TORCH_LIBRARY_IMPL, but written once, as a loop over
tables: each family (a folder, or a table module at the top) declares
``SCHEMAS``, the ops it defines (with ``TAGS``, ``{op: dj.Tag members}``, the
kinds every layer reads, and ``SHAPE_RULES``, the views' shape rules the
compiler types them with), and ``KERNELS``, ``{dispatch key: {op:
kernel}}``.  Importing this package defines every schema first (a kernel
may only be registered for a defined op), then registers every family's
kernels key by key, with the device conversions a family gives the engine
(``CONVERSIONS``, ``{device type: {name: function}}``: CUDA quantize,
dequantize, dense -> CSR, which the engine's tensor types call through
dispatch_jit/conversions.py), then the backend fallbacks every op gets and
the scalar helpers generated CUDA kernels call (dispatch_jit/cuda/codegen.py).
Nothing else in the library registers anything.  The engine imports it
once, from ``dispatch_jit/__init__.py``; surface.py then lists what the
package exposes (``dj.add``, ``x.add``, ``x + y``).
"""

from __future__ import annotations

from dispatch_jit.autograd.fallback import autograd_not_implemented
from dispatch_jit.conversions import register_conversion
from dispatch_jit.cuda.codegen import register_scalar_helpers
from dispatch_jit.library import Library, fallthrough_kernel

from . import (arrayops, autocast_policy, batching, composite, composite_math, composite_torch, derivatives, elementwise, indexing,
               lapack, linalg, nn, optim, quantized, reduction, shape, sparse, torch_kwargs, unique)
from .indexing import reduce as _scatter_reduce
from .reduction import scans as _scans
from .aten import aten as _aten_def, fallbacks as _fallbacks
from .support.scalar_helpers import HELPERS
from .support.vecmath import CUDA_FORMS

# definitions in this order; their kernels in the same order, key by key
FAMILIES = (elementwise, shape, reduction, linalg, nn, composite, derivatives, autocast_policy, sparse, quantized,
            arrayops, lapack, indexing, composite_torch, composite_math, unique, torch_kwargs, _scans, _scatter_reduce,
            optim, batching)

# backend fallbacks: the kernel at a key for every op, present and future, that has none there
FALLBACKS = {
    # ops with kernels but no derivative (custom ops): outputs do not require grad, and a
    # backward that needs them names the op
    "AutogradCPU": autograd_not_implemented,
    "AutogradCUDA": autograd_not_implemented,
    "AutogradOther": autograd_not_implemented,
    "AutogradPrivateUse1": autograd_not_implemented,
    # keys whose kernels arrive with later work fall through until then, at no cost
    "ADInplaceOrView": fallthrough_kernel,
    "AutocastCPU": fallthrough_kernel,
    "AutocastCUDA": fallthrough_kernel,
    # ops with no batching rule run once per example (vmap), with a one-time warning naming the op
    "Batched": batching.FALLBACK,
}

# one Library("aten", "IMPL", key) per dispatch key, holding that key's registrations
IMPL: dict[str, Library] = {}

for _family in FAMILIES:
    _tags = getattr(_family, "TAGS", {})
    for _schema in getattr(_family, "SCHEMAS", ()):
        _aten_def.define(_schema, tags=_tags.get(_schema.split("(")[0], ()))
    for _op, _rule in getattr(_family, "SHAPE_RULES", {}).items():
        _aten_def.impl_shape(_op, _rule)
for _family in FAMILIES:
    for _key, _table in _family.KERNELS.items():
        _lib = IMPL.get(_key) or IMPL.setdefault(_key, Library("aten", "IMPL", _key))
        for _op, _kernel in _table.items():
            _lib.impl(_op, _kernel)
    for _device, _table in getattr(_family, "CONVERSIONS", {}).items():
        for _name, _fn in _table.items():
            register_conversion(_name, _device, _fn)
for _key, _kernel in FALLBACKS.items():
    _fallbacks.fallback(_kernel, _key)
register_scalar_helpers({**HELPERS, **CUDA_FORMS})    # CUDA: libm in place of vecmath's CPU forms

from . import surface  # noqa: E402,F401  (the public names; quantized_* look their ops up)
