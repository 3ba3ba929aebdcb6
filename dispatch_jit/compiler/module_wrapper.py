"""``dj.compile(module)``: an ``OptimizedModule``, as ``torch.compile(module)`` returns.

It is a ``dj.nn.Module`` holding the original as its submodule ``_orig_mod`` (so that, as PyTorch's,
``parameters()``, ``named_parameters()``, ``state_dict()`` and ``train()``/``eval()`` reach it, the
names prefixed with ``_orig_mod.``), whose call runs the compiled original (``dj.compile`` of the
module: its ``__call__``, hooks and all); reading or setting any other attribute goes to the
original, so ``model = dj.compile(model)`` keeps working as the model.  ``explain()`` and
``cache_info()`` are the compiled function's.

>>> import dispatch_jit as dj
>>> model = dj.compile(dj.nn.Linear(2, 1))
>>> type(model).__name__, model.in_features, len(list(model.parameters()))
('OptimizedModule', 2, 2)
>>> _ = model.eval(); model._orig_mod.training
False
"""

from __future__ import annotations

from dispatch_jit.nn.module import Module

__all__ = ["OptimizedModule", "compile_module"]

# attributes the wrapper keeps itself; every other one is the original module's
_OWN = {"_orig_mod", "_compiled", "training", "_parameters", "_buffers", "_modules", "_non_persistent",
        "_forward_pre_hooks", "_forward_hooks"}


class OptimizedModule(Module):
    """``dj.compile(module)``'s result: ``module`` (``_orig_mod``) with a compiled call."""

    def __init__(self, mod: Module, compiled) -> None:
        super().__init__()
        self._modules["_orig_mod"] = mod
        self.__dict__["_compiled"] = compiled
        self.__dict__["training"] = mod.training

    @property
    def _orig_mod(self) -> Module:
        return self._modules["_orig_mod"]

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str):
        d = self.__dict__
        if name in _OWN or "_modules" not in d:
            return super().__getattr__(name)
        orig = d["_modules"]["_orig_mod"]
        try:
            return getattr(orig, name)
        except AttributeError:
            if name in ("explain", "cache_info", "compiled_signatures"):
                return getattr(d["_compiled"], name)
            raise AttributeError(f"'OptimizedModule' object has no attribute '{name}' (nor has the compiled "
                                 f"'{type(orig).__name__}')") from None

    def __setattr__(self, name: str, value) -> None:
        if name in _OWN:
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in _OWN:
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))


def compile_module(fn, make):
    """``fn`` wrapped as an ``OptimizedModule`` when it is a ``dj.nn.Module`` (``make(fn)`` compiles
    it), else None: ``dj.compile`` returns its ``CompiledFunction`` then."""
    if isinstance(fn, Module):
        return OptimizedModule(fn, make(fn))
    return None
