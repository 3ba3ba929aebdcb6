"""LazyTensor: a ``dj.Tensor`` whose data a pending graph has yet to compute, and forcing.

While pending, its ``_data`` slot holds the *pending state*, a ``Pending`` named tuple
``(recorder, vid, shape, type)``; ``z.__class__ is Pending`` tells it from the computed
array.  The generated recorders make one per recorded op with ``make_pending`` (the tuple
constructor called directly: a named tuple's own ``__new__`` is a Python function, which
would double the cost of building it)."""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np

from dispatch_jit.errors import TensorStateError
from dispatch_jit.signature import keyset_sig_bits, sig_device_index
from dispatch_jit.tensor import CUDA_BITS, CPU_DEVICE, Tensor, device as _device

from ..graph.ir import GraphError, TensorType
from ..trace.symbolic import _state


class Pending(NamedTuple):
    """A LazyTensor's state until its graph runs (held in its ``_data`` slot)."""
    recorder: object      # the LazyRecorder whose graph computes it (FAILED: that graph failed)
    vid: int              # its value id in that graph (FAILED: the error instead)
    shape: tuple
    type: TensorType


_tuple_new = tuple.__new__


def make_pending(recorder, vid, shape, ty) -> Pending:
    return _tuple_new(Pending, (recorder, vid, shape, ty))

SLOT_DATA = Tensor.__dict__["_data"]     # the slot descriptor
get_slot, set_slot = SLOT_DATA.__get__, SLOT_DATA.__set__
new = object.__new__
CUDA_SIG = keyset_sig_bits(CUDA_BITS)


class PendingGraph:
    """Base of a thread's pending graph (record.LazyRecorder): what a LazyTensor's indexing
    records into when it is the active tracer."""

    __slots__ = ()

    def record_getitem(self, t, index):
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError


class LazyTensor(Tensor):
    """A ``dj.Tensor`` whose data a pending graph has yet to compute.  Reading
    ``_data`` forces the graph; the tensor then becomes a plain ``Tensor``.

    While pending, its ``_data`` slot holds a ``Pending`` (recorder, value id, shape, type)
    instead of an array (no instance dict: a LazyTensor costs what a Tensor does).
    ``_lazy`` is that same slot under another name, read and written at C speed
    where ``_data`` is the forcing property."""

    __slots__ = ()
    _lazy = SLOT_DATA

    @property
    def _data(self):
        force(self)
        return get_slot(self, Tensor)

    @_data.setter
    def _data(self, value):
        force(self)
        set_slot(self, value)

    # metadata known without computing anything.  Another thread may compute the tensor at any
    # moment (its flush stores the array in the slot, then makes the tensor a plain Tensor), so
    # each read tests what the slot holds: the pending state, or already the array
    @property
    def shape(self) -> tuple:
        return get_slot(self, Tensor).shape      # Pending.shape, or the array's

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self):
        z = get_slot(self, Tensor)
        return z.type.dtype if z.__class__ is Pending else Tensor.dtype.fget(self)

    @property
    def device(self):
        # a plain tensor reads a CUDA device's index off its data; a pending one's is in its signature
        sig = self._sig
        return _device("cuda", sig_device_index(sig)) if sig & CUDA_SIG else CPU_DEVICE

    def size(self, dim: int | None = None):
        s = self.shape
        if dim is None:
            return s
        if not -len(s) <= dim < max(len(s), 1):
            return Tensor.size(self, dim)      # eager mode's error (it forces the graph)
        return s[dim]

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __getitem__(self, index):
        # basic indexing of a value pending in this thread's graph is recorded (a getitem node,
        # which sink_views can fuse); anything else reads _data, which forces the graph
        r = _state.tracer
        if isinstance(r, PendingGraph):
            t = r.record_getitem(self, index)
            if t is not None:
                return t
        return Tensor.__getitem__(self, index)

    def _saved_twin(self, box):
        """autograd's saved copy of this tensor as an op's output (graph._output_data): a tensor
        pending as the same value, which the flush gives the same array (no copy, and nothing is
        computed now), with ``box`` as its version counter.  None once computed."""
        z = get_slot(self, Tensor)
        if z.__class__ is not Pending or z.recorder is FAILED:
            return None
        with z.recorder.lock:
            if get_slot(self, Tensor) is not z:
                return None                  # computed meanwhile, by another thread
            t = new(LazyTensor)
            t._sig = self._sig
            t._lazy = z
            d = t.__dict__
            d["_vc"] = box
            d["requires_grad"] = self.requires_grad
            z.recorder.lazies.append(t)
            return t

    # copies and pickles are of the computed tensor (forcing turns self into a plain Tensor)
    def __copy__(self):
        force(self)
        return copy.copy(self)

    def __deepcopy__(self, memo):
        force(self)
        return copy.deepcopy(self, memo)

    def __reduce_ex__(self, protocol):
        force(self)
        return self.__reduce_ex__(protocol)


def force(t) -> None:
    """Compute ``t`` if it is pending: run its graph, under its recorder's lock, whichever
    thread recorded it."""
    z = get_slot(t, Tensor)
    if z.__class__ is Pending:
        z.recorder.flush()
        z = get_slot(t, Tensor)
        if z.__class__ is Pending:
            if z.recorder is FAILED:
                raise TensorStateError("a pending compiled-mode graph failed to run") from z.vid
            # never hand out the pending state as if it were the data
            raise GraphError(f"compiled mode: value %{z.vid} (shape {z.shape}, {z.type}) is still pending "
                             f"after its graph ran; this is a bug in dispatch_jit, please report it.  Run the "
                             f"code in eager mode (dj.set_mode('eager')) meanwhile")


def pending(t):
    """``(recorder, vid, shape, type)`` of a LazyTensor still pending, else None."""
    z = get_slot(t, Tensor)
    return z if z.__class__ is Pending else None


def reads_pending(args: tuple, kwargs: dict) -> bool:
    """Whether a call's arguments include a LazyTensor (or a list of them)."""
    for x in (*args, *kwargs.values()):
        if x.__class__ is LazyTensor or (x.__class__ in (list, tuple)
                                         and any(y.__class__ is LazyTensor for y in x)):
            return True
    return False


class _Failed:
    """The recorder of a tensor whose graph failed to run: ``Pending(FAILED, error, shape, type)``."""

    @staticmethod
    def flush():
        pass


FAILED = _Failed()
