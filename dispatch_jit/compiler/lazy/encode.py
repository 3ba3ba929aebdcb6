"""The encoding of a recorded call: a record (layout.py: ``(spec, out vid, *slots)``) whose spec
(``Spec``, ``_ViewSpec``) says what each slot holds.  Records are also the plan cache key's nodes, so they hold only
hashable, canonical values (``canon``; ``_scalar_slots`` moves the runtime scalars out).
Plain tuples, unlike the pending states (tensor.Pending): a record's length varies with its op,
its slots are named by its spec, and building a tuple subclass costs about 65 ns more per
recorded op (measured; the Pending each op also makes pays that once already)."""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.broadcast import broadcast_shapes
from dispatch_jit.jit.source import define
from dispatch_jit.signature import DEVICE_MASK, decode, make_sig
from dispatch_jit.tensor import CPU_BITS, CUDA_BITS

from ..graph.ir import Node, TensorType, Var, runtime_scalar
from ..graph.views import GETITEM
from .layout import FIRST_SLOT, OUT
from .state import state
from .tensor import CUDA_SIG

SCALARS = frozenset([bool, int, float, type(None), np.float32, np.float64, np.int64, np.int32, np.bool_])
# a plain dense tensor's dispatch keys, per device: tensors with any other key (autograd, sparse,
# quantized, ...) are not recorded
DENSE_BITS = {"cpu": CPU_BITS, "cuda": CUDA_BITS}


def device_kind(device: str) -> str:
    """"cpu" or "cuda" (a TensorType's device) of an ArgMeta's "cpu" / "cuda:N"."""
    return "cpu" if device == "cpu" else "cuda"


def plain_dense(sig) -> bool:
    ok = state.sig_ok.get(sig)
    if ok is None:
        m = decode(sig)
        ok = state.sig_ok[sig] = (m.kind == "tensor" and m.keyset == DENSE_BITS[device_kind(m.device)])
    return ok


def sig_type(sig) -> TensorType:
    """The TensorType of a tensor with signature ``sig`` (cached: ``state.sig_type``)."""
    ty = state.sig_type.get(sig)
    if ty is None:
        m = decode(sig)
        ty = state.sig_type[sig] = TensorType(m.dtype, m.ndim, device_kind(m.device))
    return ty


def device_of(sigs: list):
    """The signature of the first tensor among ``sigs`` when all tensors there are on one device
    (cuda:N included), else None: eager mode raises on a mix."""
    first = dev = None
    for s in sigs:
        if s.__class__ is int:
            d = s & (DEVICE_MASK | CUDA_SIG)
            if first is None:
                first, dev = s, d
            elif d != dev:
                return None
    return first


def out_sig(like: int, ty: TensorType, contiguous: bool = True) -> int:
    """The signature of a recorded value of type ``ty`` made from a value with signature
    ``like`` (same device and device index)."""
    return make_sig(DENSE_BITS[ty.device], ty.dtype, ty.ndim, contiguous) | (like & DEVICE_MASK)


# -- the encoding of a recorded call --------------------------------------------------------
class _NegZero:
    """Stands for the constant -0.0 in a record: ``-0.0 == 0.0`` (and hashes alike), but
    ``x * -0.0`` and ``x * 0.0`` differ in sign, so the plan cache must tell them apart."""

    __slots__ = ()

    def __repr__(self):
        return "-0.0"


_NEG0 = _NegZero()


def canon(x):
    """A falsy constant as a record stores it (the records' fast path tests truth first)."""
    return _NEG0 if x.__class__ in _FLOATS and math.copysign(1.0, x) < 0 else x


_FLOATS = frozenset([float, np.float32, np.float64])


class Spec:
    """How the records of one call signature encode it: a record is the tuple
    ``(spec, out vid, *slots)`` and the spec says which slots are tensor value
    ids (``tpos``), which are constants, which are runtime scalars (``rt``), and
    where the node's arguments come from.  Specs compare by identity, so a record
    is also the node's part of the plan cache key (once ``_scalar_slots`` has
    taken the runtime scalars' values out of it), and a cache hit builds no Graph
    at all.

    ``args``/``kwargs``: per argument ``("v", i)`` (Var of slot i), ``("c", i)``
    (the constant in slot i), ``("s", i)`` (a runtime scalar: slot i holds the
    Python float/int as recorded, its index in the flush's scalars in the key) or
    ``("k", value)`` (fixed by the signature)."""

    __slots__ = ("op", "args", "kwargs", "tpos", "rt", "keyer", "ty")
    view = False       # a _ViewSpec's records are views (flush makes some from the values they view)

    def __init__(self, op, args: tuple, kwargs: tuple, ty=None):
        self.op, self.args, self.kwargs, self.ty = op, args, kwargs, ty    # ty: the output's, if the spec fixes it
        self.tpos = tuple(i for kind, i in list(args) + [a for _, a in kwargs] if kind == "v")
        self.rt = tuple(i for kind, i in args if kind == "s")
        slots = [i for kind, i in list(args) + [a for _, a in kwargs] if kind != "k"]
        self.keyer = _keyer(max(slots, default=1) + 1, self.rt) if self.rt else None

    @staticmethod
    def _value(rec, kind, x, scalars):
        if kind == "v":
            return Var(rec[x])
        if kind == "c":
            v = rec[x]
            return -0.0 if v is _NEG0 else v
        if kind == "s":
            i = rec[x]
            return i[1] if i.__class__ is tuple else runtime_scalar(scalars[i], i)
        return x

    def node(self, rec, scalars) -> Node:
        val = self._value
        return Node(self.op, tuple([val(rec, *a, scalars) for a in self.args]),
                    {name: val(rec, *a, scalars) for name, a in self.kwargs}, (rec[OUT],))


# Runtime scalars.  A Python float or int operand of an elementwise op on CPU tensors is a value
# of the plan, not part of its key: its slot holds the number as recorded (so recording costs no
# more than for a constant), and the flush moves it into the list the plan reads its runtime
# scalars from (``Plan.run(tensors, scalars)``), leaving its index in the key.  Its type stays in
# the key (the spec is per signature, whose memo key has the type): int and float promote
# differently.  Keyed by value still: bools and NumPy scalars (as ``dj.compile`` does), ints
# beyond int64 (the loops take int64; eager mode raises OverflowError, and so does the plan),
# keyword statics (alpha=), and every operand of a CUDA op (compiler/cuda.py's kernels take
# scalars as constants).  -0.0 and NaN then need nothing special: the key never holds them.
RUNTIME_TYPES = (float, int)
I64 = (-(1 << 63), (1 << 63) - 1)


def _scalar_slots(rec: tuple, rt: tuple, scalars: list) -> tuple:
    """``rec`` as the plan key holds it: each runtime scalar's value moved to ``scalars``, its
    index left in its slot; an int beyond int64 stays, as ``("c", value)``, a constant.
    (Each spec's ``keyer`` does this for its layout, straight-line; this is its slow path.)"""
    rec = list(rec)
    for p in rt:
        x = rec[p]
        if x.__class__ is not float and x.__class__ is not int:    # a subclass (IntEnum): the number
            x = float(x) if isinstance(x, float) else int(x)
        if x.__class__ is int and not I64[0] <= x <= I64[1]:
            rec[p] = ("c", x)
        else:
            rec[p] = len(scalars)
            scalars.append(x)
    return tuple(rec)




def _keyer(n: int, rt: tuple):
    """``_scalar_slots`` for records of ``n`` slots with runtime scalars at ``rt``, generated:
    a flush runs it per record (measured, 2 records: 0.5 us as a loop, 0.25 us generated)."""
    f = state.keyers.get((n, rt))
    if f is None:
        xs = [f"x{k}" for k in range(len(rt))]
        ok = " and ".join(f"({x}.__class__ is float or {x}.__class__ is int and _LO <= {x} <= _HI)" for x in xs)
        index = {p: f"i + {k}" if k else "i" for k, p in enumerate(rt)}
        items = [index.get(j, f"r[{j}]") for j in range(n)]
        lines = ["def keyer(r, sc):"]
        lines += [f"    {x} = r[{p}]" for x, p in zip(xs, rt)]
        lines += [f"    if {ok}:", "        i = len(sc)"]
        lines += [f"        sc.append({x})" for x in xs]
        lines += [f"        return ({', '.join(items)},)", "    return _slow(r, _RT, sc)"]
        g = {"_LO": I64[0], "_HI": I64[1], "_slow": _scalar_slots, "_RT": rt}
        f = state.keyers[(n, rt)] = define("\n".join(lines), "keyer", g, "<dispatch_jit lazy scalar slots>")
    return f


def generic_spec(op, kinds: tuple, kwargs: tuple) -> Spec:
    """The spec of a record made by ``LazyRecorder.record``: ``kinds`` is "v" (a tensor)
    or the constant's type per positional slot, ``kwargs`` (name, type) per keyword slot.
    The types are part of the spec because ``1 == 1.0 == True`` in a key; a runtime scalar's
    kind is ``("s", its type)``."""
    key = ("generic", op, kinds, kwargs)
    s = state.specs.get(key)
    if s is None:
        s = state.specs[key] = Spec(op, tuple((k if k == "v" else k[0] if k.__class__ is tuple else "c", FIRST_SLOT + i)
                                          for i, k in enumerate(kinds)),
                                tuple((n, ("c", FIRST_SLOT + len(kinds) + j)) for j, (n, _) in enumerate(kwargs)))
    return s


class _ViewSpec(Spec):
    """The spec of a recorded view of a pending value: the record is ``(spec, out vid, source
    vid, *static arguments)``, the statics as the op takes them but hashable (records are plan
    cache keys): lists as tuples, and a getitem's index with each slice as a
    ``(start, stop, step)`` tuple (slices hash only from Python 3.12 on)."""

    __slots__ = ()
    view = True

    def __init__(self, op, n: int):
        super().__init__(op, (("v", FIRST_SLOT),) + tuple(("c", FIRST_SLOT + 1 + i) for i in range(n)), ())

    def statics(self, rec) -> tuple:
        if self.op is GETITEM:
            return (tuple([slice(*i) if i.__class__ is tuple else i for i in rec[FIRST_SLOT + 1]]),)
        return rec[FIRST_SLOT + 1:]

    def node(self, rec, scalars=None) -> Node:
        return Node(self.op, (Var(rec[FIRST_SLOT]),) + self.statics(rec), {}, (rec[OUT],))


def view_spec(op, n: int) -> _ViewSpec:
    key = ("view", op, n)
    s = state.specs.get(key)
    if s is None:
        s = state.specs[key] = _ViewSpec(op, n)
    return s


def encode_index(index: tuple) -> tuple:
    return tuple([(i.start, i.stop, i.step) if i.__class__ is slice else i for i in index])


def _static_int(x):
    """An int argument of a view as eager mode reads it, or None: not an int (bools included),
    so the call runs eagerly."""
    if x.__class__ is int:
        return x
    return int(x) if isinstance(x, np.integer) else None




def view_statics(op, rest: tuple) -> tuple | None:
    """A view's arguments after the tensor, hashable (int lists as tuples of ints), or None:
    something else (eager mode handles, or rejects, it)."""
    lists = state.view_lists.get(op)
    if lists is None:
        lists = state.view_lists[op] = tuple(a.type.is_list for a in op.schema.arguments[1:])
    if len(rest) != len(lists):
        return None
    out = []
    for x, is_list in zip(rest, lists):
        if is_list:
            if x.__class__ is not tuple and x.__class__ is not list:
                return None
            x = tuple([_static_int(i) for i in x])
            if None in x:
                return None
        else:
            x = _static_int(x)
            if x is None:
                return None
        out.append(x)
    return tuple(out)


# the layouts eager mode gives views, as far as the signature's contiguity bit must tell: ``view``
# raises where the strides cannot express the new shape (so it is recorded only of a value eager
# mode would hold contiguous), and these views of a contiguous value are contiguous.  Every other
# view claims non-contiguous until it is computed (a claim the eager fast paths can only underuse)
NEEDS_CONTIGUOUS = frozenset(["aten::view"])
KEEPS_CONTIGUOUS = frozenset(["aten::view", "aten::reshape", "aten::flatten", "aten::unsqueeze"])
BASIC_INDEX = frozenset([int, slice, type(None), type(Ellipsis)])   # eager mode's basic indexing: a view


def broadcast(*shapes):
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        return None

