"""``ModuleList`` and ``ModuleDict``: modules held in a list or a dict and registered as
children, as PyTorch's (their parameters are the model's, ``state_dict`` names them
``h.0.weight``, ``.to()`` and ``train()`` reach them).  Neither has a ``forward``: the
owning module calls the modules it holds.

>>> import dispatch_jit as dj
>>> class Stack(dj.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.h = dj.nn.ModuleList([dj.nn.Linear(2, 2) for _ in range(3)])
...     def forward(self, x):
...         for layer in self.h:
...             x = layer(x)
...         return x
>>> m = Stack()
>>> len(list(m.parameters())), [n for n, _ in m.named_parameters()][:2]
(6, ['h.0.weight', 'h.0.bias'])
>>> d = dj.nn.ModuleDict({"act": dj.nn.Tanh()})
>>> d["proj"] = dj.nn.Linear(2, 1)
>>> list(d.keys()), "act" in d
(['act', 'proj'], True)
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ..errors import ArgumentTypeError, OutOfBoundsError
from .module import Module

__all__ = ["ModuleList", "ModuleDict"]


def _put(owner: Module, name: str, module) -> None:
    """Register ``module`` under ``name``; a name already held keeps its place (as PyTorch's)."""
    if name in owner._modules:
        if module is not None and not isinstance(module, Module):
            raise ArgumentTypeError(f"{type(module).__name__} is not a Module subclass")
        owner._modules[name] = module
    else:
        owner.add_module(name, module)


class ModuleList(Module):
    """Modules in a list, registered under the names ``"0"``, ``"1"``, ...; indexed, sliced
    (a slice is a ``ModuleList`` of the same modules), appended to, extended, iterated."""

    def __init__(self, modules: Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx) -> str:
        i = operator.index(idx)
        n = len(self._modules)
        if not -n <= i < n:
            raise OutOfBoundsError(f"index {i} is out of range for a ModuleList of {n} modules")
        return str(i % n)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._index(idx)]

    def __setitem__(self, idx, module) -> None:
        _put(self, self._index(idx), module)

    def __delitem__(self, idx) -> None:
        names = list(self._modules)
        drop = names[idx] if isinstance(idx, slice) else [self._index(idx)]
        for name in drop:
            del self._modules[name]
        # renumber, so that the names stay "0" .. "n-1" as PyTorch's do
        kept = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(kept):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable) -> "ModuleList":
        return ModuleList([*self, *other])

    def append(self, module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable) -> "ModuleList":
        if not isinstance(modules, Iterable):
            raise ArgumentTypeError(f"ModuleList.extend should be called with an iterable of modules, "
                                    f"but got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module) -> None:
        mods = list(self._modules.values())
        mods.insert(operator.index(index), module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __repr__(self) -> str:
        if not self._modules:
            return "ModuleList()"
        return super().__repr__()


class ModuleDict(Module):
    """Modules in an ordered dict, registered under their keys; indexed by key, iterated over
    the keys, with ``keys``/``values``/``items``/``update``/``pop``/``clear``."""

    def __init__(self, modules: Mapping | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str):
        return self._modules[key]        # a missing key raises KeyError, as a dict (and PyTorch's) does

    def __setitem__(self, key: str, module) -> None:
        _put(self, key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str):
        return self._modules.pop(key)

    def update(self, modules: Mapping | Iterable) -> None:
        if isinstance(modules, (OrderedDict, ModuleDict, Mapping)):
            pairs = modules.items()
        elif isinstance(modules, Iterable):
            pairs = []
            for j, pair in enumerate(modules):
                if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                    raise ArgumentTypeError(f"ModuleDict update sequence element #{j} should be a (key, module) "
                                            f"pair, but got {type(pair).__name__}")
                pairs.append(pair)
        else:
            raise ArgumentTypeError(f"ModuleDict.update should be called with a mapping or an iterable of "
                                    f"(key, module) pairs, but got {type(modules).__name__}")
        for key, m in pairs:
            self[key] = m
