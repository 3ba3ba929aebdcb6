"""Install the op library's public surface: ``dj.<op>`` functions, Tensor
methods and Python operators, all straight from the tables in kernels/surface.py;
and the Tensor methods that tensor.py, below autograd and creation, cannot
define: autograd's (autograd/methods.py) and the conversions and ``copy_`` here."""

from __future__ import annotations

from .autograd.methods import METHODS as AUTOGRAD_METHODS
from .broadcast import broadcast_shapes
from .creation import tensor
from .devices import device as _device, device_module, is_backend_type
from .entry import make_entry
from .dtypes import as_dtype, bfloat16, bool_, float16, float32, float64, int32, int64
from .errors import ArgumentTypeError, BroadcastError
from .dlpack import dlpack, dlpack_device
from .registry import lookup
from .tensor import Tensor
from .tensor_methods import METHODS as TORCH_METHODS

__all__ = ["install"]


def _reflected(entry):
    def op(self, other):
        return entry(other, self)
    op.__name__ = f"r{entry.__name__}"
    return op


def _to(self, *args, dtype=None, device=None, copy: bool = False, **device_options):
    """``x.to(dtype)``, ``x.to("cpu")``, ``x.to(other_tensor)``, ``x.to(device, dtype)``;
    ``device_options`` go to a backend's device (``x.to("dask", chunks=...)``)."""
    for a in args:
        if isinstance(a, Tensor):
            dtype = dtype or a.dtype
        elif isinstance(a, str) and _is_device_type(a.split(":")[0]) or type(a).__name__ == "device":
            device = a
        else:
            dtype = a
    t = self
    if device is not None and (t.device != device or device_options):
        t, copy = _to_device(t, _device(device), device_options), False
    if dtype is None:
        return t.clone() if copy else t
    return lookup("aten::to.dtype").entry(t, as_dtype(dtype), copy)


def _is_device_type(typ: str) -> bool:
    return typ in ("cpu", "cuda", "meta") or is_backend_type(typ)


def _to_device(t, d, options: dict):
    """A move between devices: the PrivateUse1 backend's device module handles its side of it."""
    backend = d.type if is_backend_type(d.type) else t.device.type if is_backend_type(t.device.type) else None
    if backend is not None:
        return device_module(backend).to_device(t, d, **options)
    if options:
        raise ArgumentTypeError(f"to(): unexpected device options {sorted(options)} for device {d}")
    from .cuda.transfer import to_device
    return to_device(t, d)


def _cuda(self, device=None):
    """This tensor on a CUDA device (``cuda:0`` by default); no copy if it is there already."""
    return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))


def _cpu(self):
    """This tensor in host memory (waits for pending kernels); no copy if it is there already."""
    return self.to("cpu")


def _copy_(self, src) -> Tensor:
    """Copy ``src`` into this tensor in place, broadcast to its shape and cast to its
    dtype and device (any cast, as PyTorch's ``copy_`` and item assignment).  Differentiable
    in ``src``.

    >>> import dispatch_jit as dj
    >>> t = dj.zeros(2, 3, dtype=dj.int32)
    >>> t.copy_(dj.tensor([1.7, -2.5, 3.0]))
    tensor([[ 1, -2,  3],
            [ 1, -2,  3]], dtype=dj.int32)
    """
    if not isinstance(src, Tensor):
        src = tensor(src)
    if src.shape != self.shape:
        # as PyTorch's: src broadcasts to self's shape; item assignment (NumPy's rule) would also
        # drop src's leading 1-sized dims, which copy_ refuses
        try:
            fits = broadcast_shapes(self.shape, src.shape) == self.shape
        except ValueError:
            fits = False
        if not fits:
            raise BroadcastError(f"copy_: the source of shape {tuple(src.shape)} does not broadcast to the "
                                 f"destination's shape {tuple(self.shape)}")
    if src.dtype != self.dtype or src.device != self.device:
        src = src.to(device=self.device, dtype=self.dtype)
    self[...] = src
    return self


def _contiguous(self):
    return self if self._data.flags.c_contiguous else self.clone()


def _T(self):
    return self.permute(tuple(range(self.ndim - 1, -1, -1)))


def _mT(self):
    """The matrices of this tensor transposed (its last two dimensions swapped), a view."""
    if self.ndim < 2:
        from .errors import ShapeError
        raise ShapeError(f"mT: expected a tensor of at least 2 dimensions, got shape {tuple(self.shape)}")
    return self.transpose(-2, -1)


# PyTorch's ``*size`` methods: ``x.reshape(2, 3)`` is ``x.reshape((2, 3))``, ``x.permute(1, 0)``
# is ``x.permute((1, 0))``, ``x.flip(0, 1)`` is ``x.flip((0, 1))``; the ops themselves
# (``dj.reshape``) take one int list, as their schemas say
SIZE_VARARG_METHODS = ("reshape", "view", "permute", "expand", "repeat", "flip")


def _size_varargs(entry):
    def method(self, *size, **kwargs):
        if len(size) > 1 or (size and not isinstance(size[0], (tuple, list))):
            size = (size,)
        return entry(self, *size, **kwargs)
    method.__name__ = entry.__name__
    method.__doc__ = entry.__doc__
    return method


def _cast(dt):
    def method(self):
        return self.to(dt)
    method.__name__ = dt.name
    return method


def _named(public: str, opname: str):
    """The op's entry, or, where the public name is not the op's (``amax`` is ``aten::max``,
    ``concat`` is ``aten::cat``), an alias entry whose errors name the function called."""
    op = lookup(f"aten::{opname}")
    if public == opname.split(".")[0]:
        return op.entry
    return _ALIASES.get((public, opname)) or _ALIASES.setdefault(
        (public, opname), make_entry(op, public, as_alias=True))


_ALIASES: dict = {}


def _bind(name: str, fn) -> None:
    """``fn``, defined outside the class, as the method ``Tensor.<name>`` (and named so)."""
    fn.__name__, fn.__qualname__ = name, f"Tensor.{name}"
    setattr(Tensor, name, fn)


def _document(namespace: dict, names: list, examples: dict) -> None:
    """Each generated op entry's docstring: its schema first, as ``help(dj.add)`` shows it, then
    the method spelling and the op library's example (kernels/op_examples.py).  Strings only:
    a few microseconds at import."""
    # the examples' names too: entries bound into the namespace before install (dj.quantized_add)
    for public in sorted(set(names) | {n for n in examples if n in namespace}):
        fn = namespace[public]
        op = getattr(fn, "_op", None)
        if op is None or fn.__doc__ is not None:
            continue
        example = examples.get(public)
        fn.__doc__ = (f"{op.schema}\n\n``dj.{public}``: the dispatcher op {op.schema.full_name}"
                      + (f", also the method ``Tensor.{public}``" if hasattr(Tensor, public) else "")
                      + ".\n" + (f"\n>>> import dispatch_jit as dj\n{example}\n" if example else ""))


def install(namespace: dict, surface) -> list[str]:
    """Bind the op library's public surface into ``namespace`` and onto Tensor.

    ``surface`` is the module (or any object) holding the op library's tables:
    FUNCTIONS, ARRAY_API_ALIASES, METHODS, PY_FUNCTIONS and OPERATORS
    (kernels/surface.py); dispatch_jit/__init__.py passes it, so the engine never
    imports kernels/.
    """
    FUNCTIONS, ARRAY_API_ALIASES, METHODS = surface.FUNCTIONS, surface.ARRAY_API_ALIASES, surface.METHODS
    PY_FUNCTIONS, OPERATORS = surface.PY_FUNCTIONS, surface.OPERATORS
    names = []
    for public, opname in FUNCTIONS.items():
        namespace[public] = _named(public, opname)
        names.append(public)
    for alias, real in ARRAY_API_ALIASES.items():
        namespace[alias] = _named(alias, FUNCTIONS[real])
        names.append(alias)
    for meth, opname in METHODS.items():
        entry = _named(meth, opname)
        setattr(Tensor, meth, _size_varargs(entry) if meth in SIZE_VARARG_METHODS else entry)
    for public, (fn, is_method) in PY_FUNCTIONS.items():
        namespace[public] = fn
        names.append(public)
        if is_method:
            setattr(Tensor, public, fn)
    for meth, fn in getattr(surface, "PY_METHODS", {}).items():
        setattr(Tensor, meth, fn)
    _document(namespace, names, getattr(surface, "EXAMPLES", {}))
    for dunder, (opname, reflected) in OPERATORS.items():
        entry = lookup(f"aten::{opname}").entry
        # the entry itself is the method (``x * y`` is ``mul(x, y)``, no wrapper frame); only
        # the reflected operators swap their operands
        setattr(Tensor, dunder, _reflected(entry) if reflected else entry)
    for name, fn in AUTOGRAD_METHODS.items():
        _bind(name, fn)
    for name, fn in TORCH_METHODS.items():
        if isinstance(fn, property):
            setattr(Tensor, name, fn)
        else:
            _bind(name, fn)
    _bind("copy_", _copy_)
    Tensor.__pos__ = lambda self: self
    Tensor.to = _to
    Tensor.cuda = _cuda
    Tensor.cpu = _cpu
    Tensor.contiguous = _contiguous
    Tensor.T = property(_T)
    Tensor.mT = property(_mT)
    Tensor.__dlpack__ = dlpack
    Tensor.__dlpack_device__ = dlpack_device
    for meth, dt in (("float", float32), ("double", float64), ("half", float16), ("int", int32),
                     ("long", int64), ("bool", bool_), ("bfloat16", bfloat16)):
        setattr(Tensor, meth, _cast(dt))
    return names


