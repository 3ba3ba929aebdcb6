"""``custom_op(...).register_vmap(fn)``: a user op's batching rule, with torch.library's protocol.

``fn(info, in_dims, *args, **kwargs)`` gets the values of the innermost vmap level (``in_dims``:
one entry per positional argument, the batch dim or None) and returns ``(output, out_dims)``.
"""

from __future__ import annotations

from collections import namedtuple

from ..errors import VmapError
from ..tensor import Tensor
from .batched import level_info, max_level, unwrap_at, wrap_batched

__all__ = ["VmapInfo", "CustomVmapKernel"]

VmapInfo = namedtuple("VmapInfo", ["batch_size", "randomness"])


class CustomVmapKernel:
    """The Batched-key kernel of a custom op whose rule is ``fn`` (torch.library.register_vmap's)."""

    def __init__(self, opname: str, fn):
        self.opname, self.fn = opname, fn
        self.__name__ = self.__qualname__ = f"register_vmap({getattr(fn, '__name__', fn)})"

    def specialize(self, call):
        schema = call.op.schema
        kwnames = [a.name for a in schema.arguments if a.kwarg_only]
        npos = len(schema.arguments) - len(kwnames)
        fn, opname = self.fn, self.opname

        def run(*args):
            level = max_level(args)
            if level is None:
                raise VmapError(f"vmap: {opname} reached the Batched key with no batched tensor")
            vals, dims = [], []
            for a in args[:npos]:
                v, d = unwrap_at(a, level) if isinstance(a, Tensor) else (a, None)
                vals.append(v)
                dims.append(d)
            kw = {n: (unwrap_at(v, level)[0] if isinstance(v, Tensor) else v)
                  for n, v in zip(kwnames, args[npos:])}
            B = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
            info = level_info(level)
            res = fn(VmapInfo(B, info[2] if info else "error"), tuple(dims), *vals, **kw)
            if not (isinstance(res, tuple) and len(res) == 2):
                raise VmapError(f"{opname}: the register_vmap function must return (output, out_dims), got "
                                f"{type(res).__name__}")
            out, out_dims = res
            if isinstance(out, (tuple, list)):
                ods = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(out)
                return type(out)(o if d is None else wrap_batched(o, d, level) for o, d in zip(out, ods))
            return out if out_dims is None else wrap_batched(out, out_dims, level)
        return run

    def __call__(self, *args, **kwargs):
        raise VmapError(f"{self.__name__}: a batching rule runs through the dispatcher")
