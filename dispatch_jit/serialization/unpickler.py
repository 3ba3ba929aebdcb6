"""The unpicklers of ``dj.load``: tensor references resolved against the archive's storages, and,
under ``weights_only=True``, a pickle machine narrowed to building plain data.

A pickle is a program: besides building objects, its opcodes call ``obj[k] = v`` (SETITEM),
``obj.append`` (APPEND), ``obj.add`` (ADDITEMS) and ``obj.__setstate__`` or a raw update of
``obj.__dict__`` and slots (BUILD) on whatever object is on its stack, a tensor included: BUILD
on a tensor would overwrite its data or its dispatch signature, and make kernels compiled for
one dtype run on another's buffer.  So weights_only loading runs Python's own pure-Python
unpickler with those opcodes allowed only on the containers they exist for (as torch's
weights-only unpickler does), the classes ``find_class`` may return narrowed to a few builtins,
and ``bytearray(n)`` (n zeroed bytes from a few bytes of pickle) refused.  The pure-Python
machine also reads a declared length only as far as the data goes, where the C one allocates
what a length field claims before reading.
"""

from __future__ import annotations

import pickle
from collections import OrderedDict

import numpy as np

from ..errors import LoadError
from ..tensor import Tensor, wrap
from .archive import Archive
from .storage import check_ref, make_view

__all__ = ["TrustedUnpickler", "WeightsOnlyUnpickler"]


def _bytearray(*args):
    # bytearray(n) would allocate n zeroed bytes from a few bytes of pickle: only copies of bytes load
    if len(args) != 1 or not isinstance(args[0], (bytes, bytearray)):
        raise LoadError("load: the pickle calls bytearray() with other arguments than bytes (bytearray(n) "
                        "allocates n bytes); weights_only=True builds a bytearray only from bytes")
    return bytearray(args[0])


# what weights_only=True lets the unpickler build (builtins reduce to these names)
_SAFE = {("collections", "OrderedDict"): OrderedDict, ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
         ("builtins", "complex"): complex, ("builtins", "slice"): slice, ("builtins", "bytearray"): _bytearray}


class _Loader:
    """Tensor references (pickle's persistent ids) made into tensors: each storage read once,
    each tensor made once, every view of a storage on one buffer."""

    def __init__(self, f, archive: Archive, version: int, restore):
        super().__init__(f)
        self.archive, self.version, self.restore = archive, version, restore
        self.storages: dict = {}        # storage number -> (nbytes, location, host buffer, device)
        self.tensors: dict = {}         # tensor number -> (reference, tensor)
        self.device_copies: dict = {}   # (storage number, dtype) -> its CUDA copy
        self.in_map_location = False    # an error raised now is the caller's map_location's

    def _restore(self, buf, location: str) -> tuple:
        self.in_map_location = True
        out = self.restore(buf, location)
        self.in_map_location = False
        return out

    def persistent_load(self, pid):
        return self._load_v2(pid) if self.version == 2 else self._load_v1(pid)

    def _load_v2(self, pid):
        r = check_ref(pid)
        done = self.tensors.get(r.tensor)
        if done is not None:
            if done[0] != pid:
                raise LoadError(f"load: the pickle gives tensor {r.tensor} two different descriptions; the "
                                f"file is corrupt or forged")
            return done[1]
        st = self.storages.get(r.storage)
        if st is None:
            buf = self.archive.read_into(f"data/{r.storage}", r.nbytes)
            st = self.storages[r.storage] = (r.nbytes, r.location) + self._restore(buf, r.location)
        elif st[:2] != (r.nbytes, r.location):
            raise LoadError(f"load: two references describe storage {r.storage} differently ({st[:2]} and "
                            f"{(r.nbytes, r.location)}); the file is corrupt or forged")
        a = make_view(r, st[2])
        dev = st[3]
        if dev is not None and dev.type == "cuda":
            a, dev = self._on_device(r, st, a), None
        t = _finish(wrap(a), dev, r.requires_grad, r.is_param)
        self.tensors[r.tensor] = (pid, t)
        return t

    def _on_device(self, r, st, a):
        """Host view ``a`` of storage ``r.storage`` as the same view of one device copy of that
        storage (one per dtype: a device storage is typed), shared by every reference to it."""
        from ..cuda.array import from_host

        flat = self.device_copies.get((r.storage, r.dtype))
        if flat is None:
            host, d = st[2], st[3]
            n = host.nbytes // a.itemsize
            flat = self.device_copies[(r.storage, r.dtype)] = from_host(host[:n * a.itemsize].view(a.dtype),
                                                                         d.index or 0)
        return flat.view_as(lambda lay: np.lib.stride_tricks.as_strided(lay[r.offset:], a.shape, a.strides))

    def _load_v1(self, pid):
        """The first layout: a reference names one ``.npy`` member, the tensor's whole array."""
        if type(pid) is not tuple or len(pid) != 4 or pid[0] != "tensor" or type(pid[1]) is not int \
                or pid[1] < 0 or type(pid[2]) is not bool or type(pid[3]) is not bool:
            raise LoadError(f"load: malformed tensor reference {pid!r:.200} in the pickle")
        _, n, requires_grad, is_param = pid
        st = self.storages.get(n)
        if st is None:
            buf, shape, dtype, fortran = self.archive.read_npy(f"tensors/{n}.npy")
            host, dev = self._restore(buf, "cpu")
            a = np.ndarray(shape, dtype=dtype, buffer=host, order="F" if fortran else "C")
            if dev is not None and dev.type == "cuda":      # one device copy, however many references
                from ..cuda.array import from_host
                a, dev = from_host(a, dev.index or 0), None
            st = self.storages[n] = (a, dev)
        return _finish(wrap(st[0]), st[1], requires_grad, is_param)


def _finish(t: Tensor, dev, requires_grad: bool, is_param: bool) -> Tensor:
    if dev is not None:
        t = t.to(dev)
    if is_param:
        t.__dict__["_is_param"] = True
    if requires_grad:
        t.requires_grad_(True)
    return t


class TrustedUnpickler(_Loader, pickle.Unpickler):
    """``weights_only=False``: Python's unpickler, which builds whatever the file names."""


def _only_on(types: tuple, what: str, depth: int, handler):
    """Python's unpickler's ``handler`` of an opcode, run only when the object it acts on (``depth``
    from the top of the stack; 0: the top of the stack below the mark) is of one of ``types``."""
    def check(self):
        target = self.metastack[-1][-1] if depth == 0 else self.stack[-depth]
        if type(target) not in types:
            raise LoadError(f"load: the pickle {what} a {type(target).__name__}; weights_only=True does that "
                            f"only to {' and '.join(t.__name__ for t in types)} objects (a file dj.save wrote "
                            f"never asks otherwise)")
        return handler(self)
    return check


class WeightsOnlyUnpickler(_Loader, pickle._Unpickler):
    """``weights_only=True``: the opcodes that call methods of stack objects act only on the
    containers they are for (module docstring)."""

    dispatch = dict(pickle._Unpickler.dispatch)
    for _op, _types, _what, _depth in ((pickle.SETITEM, (dict, OrderedDict), "assigns an item of", 3),
                                       (pickle.SETITEMS, (dict, OrderedDict), "assigns items of", 0),
                                       (pickle.APPEND, (list,), "appends to", 2),
                                       (pickle.APPENDS, (list,), "appends to", 0),
                                       (pickle.ADDITEMS, (set,), "adds items to", 0),
                                       (pickle.BUILD, (OrderedDict,), "sets the state of", 2)):
        dispatch[_op[0]] = _only_on(_types, _what, _depth, dispatch[_op[0]])
    del _op, _types, _what, _depth

    def find_class(self, module, name):
        found = _SAFE.get((module, name))
        if found is None:
            raise LoadError(
                f"load: weights_only=True refuses to build {module}.{name} (only tensors, numbers, strings and "
                f"containers load by default); if you trust this file, pass weights_only=False")
        return found
