"""``dj.save`` / ``dj.load``: tensors, and dicts, lists and tuples of them (a state_dict), in one
file, as ``torch.save`` / ``torch.load``.

The file is a zip archive: ``format`` names the layout, ``data.pkl`` is the object pickled with
every tensor replaced by a reference (pickle's persistent id), and ``data/<n>`` holds the raw
bytes of storage ``n``.  A reference says which storage a tensor views and how (dtype, shape,
strides, offset), plus its ``requires_grad``, whether it is an ``nn.Parameter``, and the device
it was saved from.  Tensors that viewed one buffer when saved (slices, transposes, a parameter
listed twice in a ``state_dict``) view one buffer after loading (storage.py).  Files of the first
layout (``tensors/<n>.npy``, one array a reference) still load.

What ``dj.load`` trusts, and what it refuses (``dj.errors.LoadError``, a
``pickle.UnpicklingError``):

* Code: none by default.  As ``torch.load(weights_only=True)``, the unpickler builds only
  tensors, Python numbers, strings, bytes, None and the containers list, tuple, dict, set,
  frozenset, OrderedDict (and slice, complex, a bytearray from bytes); any other class or
  function is refused by name, and the pickle's item-assignment, append and set-state opcodes
  act only on the containers they are for, never on a tensor (unpickler.py).  A damaged pickle
  is a LoadError too.  ``weights_only=False`` unpickles anything, which runs whatever code the
  file names: only for files you trust as you trust a program.
* Memory: no more than the file's bytes justify.  Each storage is read once, however many
  references name it; a member is read into a buffer of exactly the size the pickle declares
  for it, and no member may declare more than deflate can inflate from its compressed bytes,
  share bytes with another member, or share another's name (archive.py).  A reference whose
  view leaves its storage, or addresses an element twice, is refused.
* The file: a regular file, or a seekable file object; a FIFO, a device such as ``/dev/zero``,
  a directory or a socket is refused before anything is read.  Member names are looked up,
  never extracted, so a name such as ``../x`` reaches no path.  Dtypes are dispatch_jit's
  only: no object arrays.
* Devices: a tensor loads where it was saved (a CUDA tensor on its GPU, an error naming
  ``map_location`` where there is none), unless ``map_location`` says otherwise.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile

from ..devices import _check_cpu, device
from ..errors import ArgumentTypeError, CudaUnavailableError, DispatchJitError, LoadError
from ..tensor import Tensor, wrap
from .archive import Archive, open_for_reading
from .storage import StoragePlan
from .unpickler import TrustedUnpickler, WeightsOnlyUnpickler

__all__ = ["save", "load"]

_MAGIC = "dispatch_jit.save/2"
_MAGIC_V1 = "dispatch_jit.save/1"


class _Collector(pickle.Pickler):
    """The first pass of ``save``: meets every tensor the object holds, writes nothing."""

    class _Sink:
        def write(self, b):
            return len(b)

    def __init__(self, plan: StoragePlan):
        super().__init__(self._Sink(), protocol=4)
        self.plan = plan

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            self.plan.add(obj)
            return 0
        return None


class _Pickler(pickle.Pickler):
    def __init__(self, f, plan: StoragePlan):
        super().__init__(f, protocol=4)
        self.plan = plan

    def persistent_id(self, obj):
        return self.plan.ref(obj) if isinstance(obj, Tensor) else None


def _restorer(map_location):
    """``restore(buffer, location) -> (host buffer, device or None for the CPU)``, as torch.load's
    ``map_location``: None (where it was saved), a device or its name, a dict from saved location
    to location, or ``fn(storage, location)`` returning a storage (or None: where it was saved)."""
    if map_location is None:
        return lambda buf, loc: (buf, _device(loc, loc))
    if isinstance(map_location, (str, device)) or type(map_location).__name__ == "device":
        where = str(map_location)
        return lambda buf, loc: (buf, _device(where, loc))
    if isinstance(map_location, dict):
        mapping = {str(k): str(v) for k, v in map_location.items()}
        return lambda buf, loc: (buf, _device(mapping.get(loc, loc), loc))
    if callable(map_location):
        return lambda buf, loc: _call_map_location(map_location, buf, loc)
    raise ArgumentTypeError(f"load: map_location must be None, a device or its name, a dict (saved location -> "
                            f"location) or a callable (storage, location), got {type(map_location).__name__}")


def _call_map_location(fn, buf, location: str):
    out = fn(wrap(buf), location)
    if out is None:
        return buf, _device(location, location)
    if not isinstance(out, Tensor) or out.dtype.name != "uint8" or tuple(out.shape) != (buf.nbytes,) \
            or not out.is_contiguous():
        raise ArgumentTypeError(
            f"load: map_location(storage, {location!r}) must return the storage (a contiguous uint8 tensor "
            f"of {buf.nbytes} bytes, as given, or moved with .cuda()/.cpu()/.to()) or None, got {_describe(out)}")
    host = out.numpy()
    return host, (None if not out.is_cuda else out.device)


def _describe(x) -> str:
    return f"a {x.dtype.name} tensor of shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__


def _device(where: str, saved: str):
    """The device to load a storage saved on ``saved`` to (None for the CPU), checked usable here."""
    d = device(where)
    if d.type == "cpu":
        return None
    try:
        _check_cpu(d)
    except CudaUnavailableError as e:
        raise CudaUnavailableError(
            f"load: attempting to deserialize a tensor saved on {saved} onto {d}, but {e}. On a machine "
            f"without one, pass map_location='cpu' (or {{'{saved}': 'cpu'}}) to load it on the CPU") from None
    return d


def save(obj, f) -> None:
    """Write ``obj`` (a tensor, or containers of tensors and Python values: a ``state_dict``) to
    ``f``, a path or a binary file object.  Tensors that view one buffer are saved once, as views
    of it (module docstring).

    >>> import dispatch_jit as dj, io
    >>> buf = io.BytesIO()
    >>> dj.save({"w": dj.tensor([1.0, 2.0], requires_grad=True), "step": 3}, buf)
    >>> _ = buf.seek(0); dj.load(buf)
    {'w': tensor([1., 2.], requires_grad=True), 'step': 3}
    """
    plan = StoragePlan()
    _Collector(plan).dump(obj)
    plan.layout()
    pkl = io.BytesIO()
    _Pickler(pkl, plan).dump(obj)
    with _open_for_writing(f) as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
        z.writestr("format", _MAGIC)
        z.writestr("data.pkl", pkl.getvalue())
        for n, (data, _) in enumerate(plan.storages):
            z.writestr(f"data/{n}", data.data if data.nbytes else b"")


def load(f, map_location=None, *, weights_only: bool = True):
    """Read back what ``save`` wrote to ``f`` (a path or a binary file object), as ``torch.load``.

    Args:
        map_location: where tensors load: None (where they were saved), a device or its name
            (``"cpu"``), a dict from saved location to location (``{"cuda:0": "cpu"}``), or
            ``fn(storage, location)``, called once per storage with it (a 1-D uint8 CPU tensor
            of its bytes) and its saved location (``"cpu"``, ``"cuda:0"``), returning the storage
            where the tensors viewing it should live (``storage``, ``storage.cuda()``) or None.
        weights_only: True (the default) builds only tensors, Python values and containers;
            False runs whatever the pickle names: only for trusted files.

    What a file may ask for and what is refused is in the module docstring; a refusal raises
    ``dj.errors.LoadError`` (a ``pickle.UnpicklingError``) naming the file's fault.

    >>> import dispatch_jit as dj, io
    >>> buf = io.BytesIO()
    >>> x = dj.arange(6.0).reshape(2, 3)
    >>> dj.save({"x": x, "row": x[1]}, buf)
    >>> _ = buf.seek(0); back = dj.load(buf, map_location=lambda storage, location: storage)
    >>> back["x"][1, 0] = 9.0; back["row"]      # still a view of x's storage
    tensor([9., 4., 5.])
    """
    restore = _restorer(map_location)
    opened = open_for_reading(f)
    with opened as fh:
        name = opened.name
        archive = Archive(fh, name)
        if "format" not in archive.members or archive.members["format"].file_size > 64:
            raise LoadError(f"load: {name} is not a file written by dispatch_jit.save")
        version = {_MAGIC: 2, _MAGIC_V1: 1}.get(archive.read_bytes("format").decode("ascii", "replace"))
        if version is None:
            raise LoadError(f"load: {name} is not a file written by dispatch_jit.save (or by a newer version "
                            f"of it)")
        data = archive.read_bytes("data.pkl")
        unpickler = (WeightsOnlyUnpickler if weights_only else TrustedUnpickler)(io.BytesIO(data), archive,
                                                                                 version, restore)
        try:
            return unpickler.load()
        except DispatchJitError:
            raise
        except Exception as e:
            if not weights_only or unpickler.in_map_location:
                raise          # the file's own code, or the caller's map_location, failed: theirs to see
            raise LoadError(f"load: the pickle in {name} is damaged ({type(e).__name__}: {e}); the file was not "
                            f"written by dj.save, or was altered since") from e


class _open_for_writing:
    """A path opened for writing (and closed after), or a file object used as it is."""

    def __init__(self, f):
        self.f, self.owned = f, isinstance(f, (str, os.PathLike))

    def __enter__(self):
        self.fh = open(self.f, "wb") if self.owned else self.f
        return self.fh

    def __exit__(self, *exc):
        if self.owned:
            self.fh.close()
