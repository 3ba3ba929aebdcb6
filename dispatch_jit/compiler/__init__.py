"""Compiled mode: trace -> graph IR -> passes -> codegen -> cache.

Modules, in pipeline order: ``ir`` (the graph), ``elementwise`` (which ops
fuse, and their types), ``trace`` (the Tracer key's fallback), ``passes``
(dce, cse, fusion), ``codegen`` (one Numba loop per region), ``plan`` (the
executable steps), ``api`` (``compile`` and its cache).
"""

from .api import CacheInfo, CompiledFunction, compile
from .lazy import LazyTensor, flush, get_mode, init_mode_from_env, lazy_info, mode, set_mode

execution_mode = mode  # dj.execution_mode: dj.mode is torch.mode
from .trace.fallback import TraceAbort, is_tracing

__all__ = ["compile", "CompiledFunction", "CacheInfo", "TraceAbort", "is_tracing",
           "set_mode", "get_mode", "mode", "execution_mode", "flush", "lazy_info", "LazyTensor", "init_mode_from_env"]
