"""``dj.save`` / ``dj.load``: tensors, and dicts, lists and tuples of them (a state_dict), in one
file, as ``torch.save`` / ``torch.load``.

The file is a zip archive: ``data.pkl`` is the object pickled with every tensor replaced by a
reference (pickle's persistent id), and each tensor's values are ``tensors/<n>.npy``, written
by NumPy with ``allow_pickle=False`` (a plain array: dtype, shape, bytes).  The reference
carries what the array does not: ``requires_grad`` and whether it is an ``nn.Parameter``.
Tensors that share storage are saved once per tensor (no aliasing is kept), and a CUDA tensor
is saved from host memory and loads on the CPU (``map_location`` moves it).

Loading refuses arbitrary code by default, as ``torch.load(weights_only=True)``: the unpickler
builds only tensors, Python numbers, strings, bytes, None and the containers list, tuple,
dict, set and OrderedDict; anything else raises ``pickle.UnpicklingError`` naming the class.
``weights_only=False`` unpickles anything: only for files you trust.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np

from .tensor import Tensor, wrap

__all__ = ["save", "load"]

_MAGIC = "dispatch_jit.save/1"
# what weights_only=True lets the unpickler build (builtins reduce to these names)
_SAFE = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
         ("builtins", "slice"), ("builtins", "bytearray")}


class _Pickler(pickle.Pickler):
    def __init__(self, f, arrays: list):
        super().__init__(f, protocol=4)
        self.arrays = arrays

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            self.arrays.append(np.ascontiguousarray(obj.numpy() if obj.is_cuda else obj._data))
            return ("tensor", len(self.arrays) - 1, bool(obj.requires_grad), bool(obj.__dict__.get("_is_param")))
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, archive: zipfile.ZipFile, weights_only: bool, device):
        super().__init__(f)
        self.archive, self.weights_only, self.device = archive, weights_only, device

    def persistent_load(self, pid):
        kind, n, requires_grad, is_param = pid
        if kind != "tensor":
            raise pickle.UnpicklingError(f"load: unknown reference {kind!r} in the file")
        with self.archive.open(f"tensors/{n}.npy") as f:
            a = np.load(io.BytesIO(f.read()), allow_pickle=False)
        t = wrap(a)
        if self.device is not None and str(self.device) != "cpu":
            t = t.to(self.device)
        if is_param:
            t.__dict__["_is_param"] = True
        if requires_grad:
            t.requires_grad_(True)
        return t

    def find_class(self, module, name):
        if self.weights_only and (module, name) not in _SAFE:
            raise pickle.UnpicklingError(
                f"load: weights_only=True refuses to build {module}.{name} (only tensors, numbers, strings and "
                f"containers load by default); if you trust this file, pass weights_only=False")
        return super().find_class(module, name)


def save(obj, f) -> None:
    """Write ``obj`` (a tensor, or containers of tensors and Python values: a ``state_dict``) to
    ``f``, a path or a binary file object.

    >>> import dispatch_jit as dj, io
    >>> buf = io.BytesIO()
    >>> dj.save({"w": dj.tensor([1.0, 2.0], requires_grad=True), "step": 3}, buf)
    >>> _ = buf.seek(0); dj.load(buf)
    {'w': tensor([1., 2.], requires_grad=True), 'step': 3}
    """
    arrays: list = []
    pkl = io.BytesIO()
    _Pickler(pkl, arrays).dump(obj)
    with _open(f, "w") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
        z.writestr("format", _MAGIC)
        z.writestr("data.pkl", pkl.getvalue())
        for n, a in enumerate(arrays):
            buf = io.BytesIO()
            np.save(buf, a, allow_pickle=False)
            z.writestr(f"tensors/{n}.npy", buf.getvalue())


def load(f, map_location=None, *, weights_only: bool = True):
    """Read back what ``save`` wrote to ``f`` (a path or a binary file object); tensors load on
    the CPU, or on ``map_location`` (a device or its name).  ``weights_only=True`` (the
    default) builds only tensors, Python values and containers (module docstring)."""
    with _open(f, "r") as fh, zipfile.ZipFile(fh, "r") as z:
        names = set(z.namelist())
        if "format" not in names or z.read("format").decode() != _MAGIC:
            raise pickle.UnpicklingError(f"load: {_name(f)} is not a file written by dispatch_jit.save")
        with z.open("data.pkl") as p:
            return _Unpickler(io.BytesIO(p.read()), z, weights_only, map_location).load()


class _open:
    """A path opened (and closed after), or a file object used as it is."""

    def __init__(self, f, mode: str):
        self.f, self.mode, self.owned = f, mode, isinstance(f, (str, os.PathLike))

    def __enter__(self):
        self.fh = open(self.f, self.mode + "b") if self.owned else self.f
        return self.fh

    def __exit__(self, *exc):
        if self.owned:
            self.fh.close()


def _name(f) -> str:
    return repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else "the file object"


