"""Devices: ``dj.device`` and placing host data on one.

``device("cpu")``, ``device("cuda:1")``; ``place`` puts a host array where a
device says (itself for the CPU, a copy in device memory for CUDA, and for the
backend on ``DispatchKey.PrivateUse1``, whatever its device module makes of it).

A backend that is not built in names its device type with
``dj.utils.rename_privateuse1_backend`` and gives the engine a *device module*
(PyTorch's ``_register_device_module``): an object with ``from_host(array,
**options)`` and ``to_device(tensor, device, **options)``.  A package may
register its module lazily, by import path: it is imported, and its
``enable()`` called, the first time its device type is named.
"""

from __future__ import annotations

import importlib

import numpy as np

from .errors import ArgumentTypeError, InvalidArgumentError
from .keys import privateuse1_backend_name

__all__ = ["device", "CPU_DEVICE", "place", "register_device_module", "register_lazy_device_module",
           "device_module"]

_BUILTIN = ("cpu", "cuda", "meta")
_MODULES: dict = {}        # device type -> device module
_LAZY: dict = {}           # device type -> import path of the package that provides it


def register_device_module(name: str, module) -> None:
    """Make ``module`` the device module of device type ``name`` (the PrivateUse1 backend's name)."""
    if name in _BUILTIN:
        raise InvalidArgumentError(f"register_device_module: {name!r} is a built-in device type")
    _MODULES[name] = module


def register_lazy_device_module(name: str, import_path: str) -> None:
    """Import ``import_path`` and call its ``enable()`` (which registers the device module) when
    device type ``name`` is first named; nothing is imported before."""
    _LAZY[name] = import_path


def device_module(name: str):
    """The device module of a non-built-in device type ``name``, enabling a lazy one; None if unknown."""
    mod = _MODULES.get(name)
    if mod is None and name in _LAZY:
        importlib.import_module(_LAZY[name]).enable()
        mod = _MODULES.get(name)
    return mod


def is_backend_type(typ: str) -> bool:
    """Whether ``typ`` names the PrivateUse1 backend's devices (registered or registrable)."""
    return typ not in _BUILTIN and (typ in _MODULES or typ in _LAZY or typ == privateuse1_backend_name())


class device:
    """A device: ``device("cpu")``, ``device("cuda")``, ``device("cuda:1")``.

    >>> import dispatch_jit as dj
    >>> dj.device("cpu"), dj.device("cuda:1").index
    (device(type='cpu'), 1)
    """

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        if not isinstance(spec, str):
            raise ArgumentTypeError(f"device must be a string like 'cpu' or 'cuda:0', got {spec!r}")
        typ, _, idx = spec.partition(":")
        if typ not in _BUILTIN and not is_backend_type(typ):
            extra = "".join(f", {n!r}" for n in sorted(set(_MODULES) | set(_LAZY)))
            raise InvalidArgumentError(f"unknown device type {typ!r}: expected 'cpu', 'cuda', 'cuda:N', 'meta'{extra}")
        if idx:
            if not idx.isdigit():
                raise InvalidArgumentError(f"bad device index in {spec!r}: expected a non-negative integer after ':'")
            index = int(idx)
        self.type, self.index = typ, index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index or 0) == (other.type, other.index or 0)

    def __hash__(self):
        return hash((self.type, self.index or 0))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"


CPU_DEVICE = device("cpu")


def _check_cpu(dev) -> None:
    """Raise unless ``dev`` names a device tensors with data can live on."""
    if dev is None:
        return
    d = device(dev) if not isinstance(dev, device) else dev
    if d.type == "cuda":
        from .cuda.runtime import require
        require(d.index or 0)
    elif d.type != "cpu" and device_module(d.type) is None:
        raise InvalidArgumentError(f"device {d} is not supported for tensors with data; use 'cpu' or 'cuda'")


def place(a: np.ndarray, dev, **options):
    """The storage for host array ``a`` on device ``dev``: ``a`` itself for the CPU,
    a copy in device memory for CUDA.  For a backend's device, the tensor its device
    module makes of ``a`` (``options`` are its own, such as Dask's ``chunks``)."""
    if dev is None and not options:
        return a
    d = device(dev if dev is not None else "cpu") if not isinstance(dev, device) else dev
    if d.type not in _BUILTIN:
        return _backend_module(d.type).from_host(a, **options)
    if options:
        raise ArgumentTypeError(f"unexpected device options {sorted(options)} for device {d}: only a backend's "
                        f"device takes them")
    if d.type == "cpu":
        return a
    _check_cpu(d)
    from .cuda.array import from_host
    return from_host(a, d.index or 0)


def _backend_module(typ: str):
    mod = device_module(typ)
    if mod is None:
        raise InvalidArgumentError(f"device type {typ!r} has no device module: the PrivateUse1 backend registers one "
                         f"with dispatch_jit.devices.register_device_module({typ!r}, module)")
    return mod
