"""Compiled mode, by stage: ``trace/`` (the function run on symbolic tensors, into a graph) ->
``graph/`` (the IR and its passes) -> ``run/`` (the plan); ``training/`` compiles a whole training
step, ``lazy/`` is the global compiled mode, ``api`` is ``dj.compile``.  docs/ARCHITECTURE.md maps them."""

from .api import CacheInfo, CompiledFunction, compile
from .lazy import LazyTensor, flush, get_mode, init_mode_from_env, lazy_info, mode, set_mode

execution_mode = mode  # dj.execution_mode: dj.mode is torch.mode
from .trace.fallback import TraceAbort, is_tracing

__all__ = ["compile", "CompiledFunction", "CacheInfo", "TraceAbort", "is_tracing",
           "set_mode", "get_mode", "mode", "execution_mode", "flush", "lazy_info", "LazyTensor", "init_mode_from_env"]
