"""Tensor creation: ``tensor``, ``asarray``, ``zeros``, ``arange``, ``linspace``, ..., and the
``Generator`` that random numbers (random.py) come from.

Creation functions take the array API's keywords (``dtype=``, ``device=``)
plus PyTorch's ``requires_grad=``.  A ``Generator`` is NumPy's PCG64
underneath; ``manual_seed`` reseeds the default one.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .bf16 import astype as _astype, cast, from_float32, to_float32
from .dtypes import (BF16_STORAGE, DType, as_dtype, bfloat16, bool_, default_complex_dtype, float32,
                     from_numpy_dtype, get_default_dtype, int64)
from .errors import (ArgumentTypeError, DTypeError, InvalidArgumentError, SchemaError, ShapeError,
                     ValueOverflowError)
from .signature import MAX_NDIM
from .tensor import Tensor, _check_cpu, place, wrap

__all__ = ["tensor", "asarray", "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "zeros_like",
           "ones_like", "empty_like", "full_like", "as_tensor", "manual_seed", "Generator", "from_numpy"]


def _finish(a: np.ndarray, device, requires_grad: bool, options: dict | None = None) -> Tensor:
    """Wrap host array ``a``, copied to ``device`` when that is a GPU; on a backend's device
    (PrivateUse1), the tensor its device module makes (``options``: its own, e.g. ``chunks``)."""
    s = place(a, device, **options) if options else place(a, device)
    if isinstance(s, Tensor):
        return s.requires_grad_(True) if requires_grad else s
    return wrap(s, requires_grad=requires_grad)


def _is_cuda(dev) -> bool:
    return dev is not None and str(dev).startswith("cuda")


def _filled(shape: tuple, dt: DType, value, device, requires_grad: bool) -> Tensor:
    """A new tensor of ``value`` (None: uninitialized); on CUDA filled by a kernel, never via the host."""
    if not _is_cuda(device):
        if value is not None and dt is bfloat16:
            a = from_float32(np.full(shape, value, np.float32))
        else:
            a = np.empty(shape, dt.np) if value is None else np.full(shape, value, dt.np)
        return _finish(a, device, requires_grad)
    from .cuda import array as cuda_array
    from .cuda.copy import fill
    from .tensor import device as _device
    _check_cpu(device)
    d = cuda_array.empty(shape, dt.np, _device(device).index or 0)
    if value is not None:
        fill(d, value)
    return wrap(d, requires_grad=requires_grad)


def _size(n, fname: str, what: str = "size", pos: int = 0) -> int:
    """One int of a size, as PyTorch: a float (3.5, or even 2.0) or a bool is a TypeError, never
    truncated; ints, NumPy ints and one-element integer tensors pass (``operator.index``)."""
    if not isinstance(n, (bool, np.bool_)):
        try:
            return operator.index(n)
        except TypeError:
            pass
    where = (f"must be a tuple of ints, but found element of type {type(n).__name__} at pos {pos}"
             if what == "size" else f"must be an int, not {type(n).__name__}")
    raise SchemaError(f"{fname}(): argument '{what}' {where} ({n!r}); pass whole numbers (int({n!r}) if "
                      f"you mean it)")


def _shape(size, fname: str = "tensor") -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(_size(s, fname, "size", i) for i, s in enumerate(size))
    if any(s < 0 for s in shape):
        raise ShapeError(f"{fname}(): negative dimensions are not allowed, got shape {shape}")
    if len(shape) > MAX_NDIM:
        raise ShapeError(f"{fname}(): tensors have at most {MAX_NDIM} dimensions (as PyTorch), got {len(shape)}")
    return shape


def _one_shape(size, fname: str) -> tuple:
    """A ``size`` given as one int or one sequence (full, randint)."""
    return _shape((tuple(size),) if isinstance(size, (tuple, list)) else (size,), fname)


def _to_numpy(data, dt: DType | None):
    if isinstance(data, Tensor):
        return data._host_values()
    if isinstance(data, np.ndarray) and data.dtype == BF16_STORAGE:     # bfloat16's words: their values
        return to_float32(data)
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in data):
        data = [_to_numpy(v, dt) for v in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor that copies ``data`` (nested lists, scalars, arrays, tensors).

    >>> import dispatch_jit as dj
    >>> dj.tensor([[1, 2], [3, 4]]).dtype, dj.tensor(2.5).shape
    (dispatch_jit.int64, ())
    """
    dt = as_dtype(dtype) if dtype is not None else (data.dtype if isinstance(data, Tensor) else infer_dtype(data))
    if device is None and isinstance(data, Tensor):
        device = data.device
    try:
        a = np.array(_to_numpy(data, dt), dtype=np.float32 if dt is bfloat16 else dt.np, copy=True)
    except (ValueError, TypeError) as e:
        raise ShapeError(f"tensor(): cannot build a {dt.name} tensor from {type(data).__name__}: {e}") from None
    if a.dtype == object:
        raise DTypeError(f"tensor(): data of type {type(data).__name__} has no numeric dtype")
    if dt is bfloat16:      # Python numbers and NumPy arrays round to float32, then to bfloat16, as PyTorch's
        a = from_float32(a)
    return _finish(a, device, requires_grad)


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None) -> Tensor:
    """Like ``tensor`` but shares memory with NumPy arrays and tensors when it can (array API).

    >>> import numpy as np, dispatch_jit as dj
    >>> a = np.zeros(3, np.float32); t = dj.asarray(a); a[0] = 5; t[0].item()
    5.0
    """
    if isinstance(obj, Tensor) and dtype is None and not copy and (device is None or obj.device == device):
        return obj
    if not isinstance(obj, Tensor) and hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array(obj, dtype, device, copy)
    if isinstance(obj, (np.ndarray, np.generic)) or hasattr(obj, "__array_interface__"):
        a = np.asarray(obj)
        dt = as_dtype(dtype) if dtype is not None else None
        if dt is not None and a.dtype != dt.np:
            if copy is False:
                raise InvalidArgumentError("asarray(copy=False) would need a copy to change the dtype")
            a = cast(a, dt)
        elif copy:
            a = a.copy()
        return _finish(a, device, False)
    return tensor(obj, dtype=dtype, device=device)


def _from_cuda_array(obj, dtype, device, copy) -> Tensor:
    """Device memory of CuPy, PyTorch or Numba, shared without a copy."""
    from .cuda.array import from_cuda_array_interface
    from .tensor import device as _device
    if device is not None and _device(device).type != "cuda":
        return tensor(np.asarray(obj.copy_to_host() if hasattr(obj, "copy_to_host") else obj.get()),
                      dtype=dtype, device=device)
    t = wrap(from_cuda_array_interface(obj, _device(device).index or 0 if device is not None else 0))
    if dtype is not None and as_dtype(dtype) is not t.dtype:
        if copy is False:
            raise InvalidArgumentError("asarray(copy=False) would need a copy to change the dtype")
        return t.to(as_dtype(dtype))
    return t.clone() if copy else t


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with a NumPy array."""
    return asarray(a)


def _dt(dtype, default: DType | None = None) -> DType:
    return as_dtype(dtype) if dtype is not None else (default or get_default_dtype())


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros; the shape may be given as ints or one tuple.

    >>> import dispatch_jit as dj
    >>> dj.zeros(2, 3).shape, dj.zeros((4,)).shape
    ((2, 3), (4,))
    """
    return _filled(_shape(size, "zeros"), _dt(dtype), 0, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(_shape(size, "ones"), _dt(dtype), 1, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(_shape(size, "empty"), _dt(dtype), None, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; its dtype follows the value (2 -> int64, 2.0 -> float32)."""
    dt = as_dtype(dtype) if dtype is not None else infer_dtype(fill_value)
    return _filled(_one_shape(size, "full"), dt, fill_value, device, requires_grad)


def _like(t: Tensor, dtype, device):
    if not isinstance(t, Tensor):
        raise ArgumentTypeError(f"expected a Tensor, got {type(t).__name__}")
    dev = device if device is not None else (t.device if t.is_cuda else None)
    return t.shape, (as_dtype(dtype) if dtype is not None else t.dtype), dev


def zeros_like(t, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt, dev = _like(t, dtype, device)
    return _filled(shape, dt, 0, dev, requires_grad)


def ones_like(t, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt, dev = _like(t, dtype, device)
    return _filled(shape, dt, 1, dev, requires_grad)


def empty_like(t, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt, dev = _like(t, dtype, device)
    return _filled(shape, dt, None, dev, requires_grad)


def full_like(t, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    shape, dt, dev = _like(t, dtype, device)
    return _filled(shape, dt, fill_value, dev, requires_grad)


def _number(v, fname: str, what: str, complex_ok: bool = False):
    """A range endpoint or step as a Python number: a 0-d tensor or NumPy scalar gives its value
    (a float32 one exactly, as PyTorch's ``Scalar``), a bool counts as an int."""
    if isinstance(v, Tensor):
        if v.ndim != 0:
            raise ShapeError(f"{fname}(): '{what}' must be a number or a 0-dimensional tensor, got a tensor of "
                             f"shape {tuple(v.shape)}")
        v = v.item()
    elif isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) or complex_ok and isinstance(v, complex):
        return v
    raise ArgumentTypeError(f"{fname}(): '{what}' must be a {'number' if complex_ok else 'real number'}, not "
                            f"{type(v).__name__} ({v!r:.40})")


def _to_int(v, dt: DType, fname: str) -> int:
    """PyTorch's ``Scalar.to<int>``, checked: a float truncates toward zero and must lie in the dtype's
    range; an int must too, except that a negative one down to -max wraps into an unsigned dtype."""
    info = np.iinfo(dt.np)
    if isinstance(v, float):
        fits = info.min <= v <= info.max    # NaN fails
    else:
        fits = info.min <= v <= info.max or not dt.is_signed and -info.max <= v < 0
    if not fits:
        raise ValueOverflowError(f"{fname}(): value {v!r} cannot be converted to type {dt.name} without overflow")
    return int(v)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; ints give int64, floats the default dtype.

    As PyTorch's: an integer dtype truncates ``start``, ``end`` and ``step`` first and counts in
    integers (``arange(0.1, -7.9, -4.0, dtype=int64)`` is ``[0, -4]``, where NumPy's cast of its float
    range gives ``[0, -3]``); a float dtype counts ``start + i * step`` in float64 (float32 for float16).

    >>> import dispatch_jit as dj; dj.arange(4), dj.arange(0.1, -7.9, -4.0, dtype=dj.int64)
    (tensor([0, 1, 2, 3]), tensor([ 0, -4]))
    """
    if (end is None and start.__class__ is int and step.__class__ is int and step == 1 and start >= 0
            and dtype is None and device is None and not requires_grad):
        # arange(n), the common call (an index of a batch, positions): what the checked path below
        # gives for it, int64 0 .. n-1, without its checks and conversions (most of its cost)
        return wrap(np.arange(start, dtype=np.int64))
    if end is None:
        start, end = 0, start
    start, end, step = (_number(v, "arange", w) for v, w in ((start, "start"), (end, "end"), (step, "step")))
    is_float = any(isinstance(v, float) for v in (start, end, step))
    dt = as_dtype(dtype) if dtype is not None else (get_default_dtype() if is_float else int64)
    return _finish(_arange_values(start, end, step, dt), device, requires_grad)


def _arange_values(start, end, step, dt: DType) -> np.ndarray:
    if step == 0:
        raise InvalidArgumentError("arange: step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise InvalidArgumentError(f"arange: unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise InvalidArgumentError(f"arange: upper bound and lower bound inconsistent with step sign (start={start}, "
                                   f"end={end}, step={step})")
    if dt.is_floating_point:
        acc = np.float32 if dt.itemsize < 4 else np.float64    # PyTorch's acc_type on the CPU
        n = math.ceil((float(end) - float(start)) / float(step))
        i = np.arange(n, dtype=acc)
        return _astype(acc(start) + acc(step) * i, dt)
    if not dt.is_integral:
        raise DTypeError(f"arange: not implemented for {dt.name} (as PyTorch); use an integer or floating dtype")
    s, e, st = int(start), int(end), int(step)      # truncated toward zero: PyTorch counts in int64
    if st == 0:
        raise InvalidArgumentError(f"arange: step {step} truncates to 0 in the integer dtype {dt.name}; pass a "
                                   f"whole step, or a floating dtype")
    if dt is int64:       # PyTorch's int64 count: ceil((e - s) / st) in integers
        q = e - s + st - (1 if st > 0 else -1)
        n = abs(q) // abs(st) if (q >= 0) == (st > 0) else 0
    else:                 # the other integer dtypes count with the untruncated floats, as PyTorch does
        n = max(math.ceil((float(end) - float(start)) / float(step)), 0)
    return _astype(s + st * np.arange(n, dtype=np.int64), dt)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` values from ``start`` to ``end``, both included, evenly spaced.

    As PyTorch's: the first half counts up from ``start`` and the second down from ``end``, in the
    dtype itself (an integer dtype truncates ``start`` and ``end`` first, then truncates each value of
    a float64 step); 0-d tensor endpoints count as their exact values.

    >>> import dispatch_jit as dj; dj.linspace(0, 1, 5), dj.linspace(4.3, -3, 8, dtype=dj.int64)
    (tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000]), tensor([ 4,  3,  2,  1,  0, -1, -2, -3]))
    """
    steps = _size(steps, "linspace", "steps")
    if steps < 0:
        raise InvalidArgumentError(f"linspace: number of steps must be non-negative, got {steps}")
    start, end = _number(start, "linspace", "start", True), _number(end, "linspace", "end", True)
    is_complex = isinstance(start, complex) or isinstance(end, complex)
    if dtype is not None:
        dt = as_dtype(dtype)
        if is_complex and not dt.is_complex:
            raise DTypeError(f"linspace: complex endpoints ({start}, {end}) need a complex dtype, not {dt.name}")
    else:
        dt = default_complex_dtype() if is_complex else get_default_dtype()
    return _finish(_linspace_values(start, end, steps, dt), device, requires_grad)


def _linspace_values(start, end, steps: int, dt: DType) -> np.ndarray:
    if dt is bfloat16:      # counted in float32, each value rounded once
        return from_float32(_linspace_values(start, end, steps, float32))
    if steps == 0:
        return np.empty(0, dt.np)
    if dt.is_integral:
        if steps == 1:      # start alone (PyTorch converts end only to step towards it)
            return np.array(_to_int(start, dt, "linspace")).astype(dt.np).reshape(1)
        s, e = (int(np.array(_to_int(v, dt, "linspace")).astype(dt.np)) for v in (start, end))  # wrapped
        step = (float(e) - float(s)) / (steps - 1)
        i, half = np.arange(steps), steps // 2
        v = np.concatenate([s + step * i[:half], e - step * (steps - 1 - i[half:])])
        return v.astype(dt.np)      # truncates toward zero; every value lies between s and e
    if not (dt.is_floating_point or dt.is_complex):
        if steps == 1:
            return np.array([start], dt.np)
        raise DTypeError(f"linspace: not implemented for {dt.name} (as PyTorch); use a numeric dtype")
    T = dt.np.type
    s, e = T(start), T(end)
    if steps == 1:
        return np.array([s], dt.np)
    with np.errstate(invalid="ignore", over="ignore"):     # inf endpoints give NaN, as PyTorch's
        step = (e - s) / T(steps - 1)
        i, half = np.arange(steps), steps // 2
        return np.concatenate([s + step * i[:half].astype(T), e - step * (steps - 1 - i[half:]).astype(T)])


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    n, m = _size(n, "eye", "n"), (None if m is None else _size(m, "eye", "m"))
    dt = _dt(dtype)
    return _finish(_astype(np.eye(n, m, dtype=dt.np if dt is not bfloat16 else np.float32), dt), device,
                   requires_grad)


class Generator:
    """A source of random numbers; ``dj.manual_seed`` reseeds the default one.

    >>> import dispatch_jit as dj
    >>> g = dj.Generator(0); a = dj.rand(3, generator=g); g.manual_seed(0)
    <dispatch_jit.Generator seed=0>
    >>> bool((dj.rand(3, generator=g) == a).all())
    True
    """

    def __init__(self, seed: int | None = None):
        self.manual_seed(seed if seed is not None else np.random.SeedSequence().entropy % (2**63))

    def manual_seed(self, seed: int) -> "Generator":
        self.seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        return self

    def initial_seed(self) -> int:
        return self.seed

    def __repr__(self) -> str:
        return f"<dispatch_jit.Generator seed={self.seed}>"


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator (every function of random.py, dropout, the init functions)."""
    return default_generator.manual_seed(seed)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, sharing memory with a NumPy array or tensor when dtype and device
    allow (else a copy), as ``torch.as_tensor``.

    >>> import numpy as np, dispatch_jit as dj
    >>> a = np.zeros(3); t = dj.as_tensor(a); a[1] = 7; t
    tensor([0., 7., 0.], dtype=dj.float64)
    >>> dj.as_tensor([1, 2], dtype=dj.float32)
    tensor([1., 2.])
    """
    return asarray(data, dtype=dtype, device=device)


def infer_dtype(data) -> DType:
    """The dtype dj.tensor(data) picks: NumPy arrays keep theirs; Python values
    follow PyTorch (float -> the default dtype, int -> int64, bool -> bool, complex -> complex64 or
    complex128 under a float64 default)."""
    if isinstance(data, (np.ndarray, np.generic)):
        return from_numpy_dtype(data.dtype)
    flat = _flatten(data)
    if not flat:
        return get_default_dtype()
    kinds = {type(v) for v in flat}
    if any(issubclass(k, complex) for k in kinds):
        return default_complex_dtype()
    if any(issubclass(k, float) or (issubclass(k, np.floating)) for k in kinds):
        return get_default_dtype()
    if kinds <= {bool, np.bool_}:
        return bool_
    return int64


def _flatten(data) -> list:
    out, stack = [], [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, Tensor):
            out.append(x.item() if x.numel() == 1 else 0.0)
        else:
            out.append(x)
    return out
