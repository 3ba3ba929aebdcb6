"""Random numbers: ``rand``, ``randn``, ``randint``, ``randperm``, ``normal``, ``bernoulli``,
``multinomial`` and the ``*_like`` forms, with PyTorch's signatures and semantics.

Every sample comes from a ``Generator`` (NumPy's PCG64 underneath, creation.py): the one passed
as ``generator=``, else the default one that ``dj.manual_seed`` reseeds, so a seed fixes every
draw.  Samples are drawn on the host and placed on the device asked for (or the device of the
tensor they come from).  ``normal`` and ``bernoulli`` of parameters that require grad give
samples that require grad with a zero gradient, as PyTorch's (the samples are not
reparameterized: write ``mean + std * dj.randn(...)`` for that).
"""

from __future__ import annotations

import operator

import numpy as np

from .autograd.function import Function
from .autograd.grad_mode import is_grad_enabled
from .bf16 import astype as _astype
from .broadcast import broadcast_shapes
from .creation import Generator, _finish, _like, _shape, _size, default_generator, zeros
from .dtypes import DType, as_dtype, get_default_dtype, int64
from .errors import ArgumentTypeError, BroadcastError, DTypeError, InvalidArgumentError, SchemaError, ShapeError
from .tensor import Tensor

__all__ = ["rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "normal", "bernoulli",
           "multinomial"]


# vmap's randomness check (dispatch_jit/func/randomness.py sets it while a vmap runs): every draw asks it first
VMAP_RANDOM_HOOK: list = [None]


def _rng(generator, fname: str) -> np.random.Generator:
    if VMAP_RANDOM_HOOK[0] is not None:
        VMAP_RANDOM_HOOK[0](fname)
    if generator is None:
        return default_generator.rng
    if not isinstance(generator, Generator):
        raise ArgumentTypeError(f"{fname}(): generator must be a dj.Generator, not {type(generator).__name__}")
    return generator.rng


def _sample_dtype(dtype, fname: str) -> DType:
    """The floating or complex dtype of uniform and normal samples (the default dtype if None)."""
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    if not (dt.is_floating_point or dt.is_complex):
        raise DTypeError(f"{fname}(): random floats need a floating dtype (or a complex one), got {dt.name} (as "
                         f"PyTorch); for integers use dj.randint")
    return dt


def _real_of(dt: DType):
    """The NumPy dtype a sampler draws for ``dt``: float32 for float16/float32/complex64, else float64."""
    return np.float32 if dt.itemsize <= 4 or dt.np == np.complex64 else np.float64


def _size_of(size, named, fname: str) -> tuple:
    """``*size`` or ``size=``, not both (PyTorch's ``rand(2, 3)`` and ``rand(size=(2, 3))``)."""
    if named is not None:
        if size:
            raise SchemaError(f"{fname}(): got the size both positionally {size} and as size={named!r}; pass one")
        size = (named,)
    if not size:
        raise SchemaError(f"{fname}() missing its size: {fname}(2, 3) or {fname}((2, 3))")
    return _shape(size, fname)


def _draw(rng, kind: str, shape: tuple, dt: DType) -> np.ndarray:
    """Uniform [0, 1) or standard normal samples of ``dt``; a complex one has independent real and
    imaginary parts, each uniform, or each normal of variance 1/2 (PyTorch's complex randn)."""
    real = _real_of(dt)
    draw = rng.random if kind == "uniform" else rng.standard_normal
    if dt.is_complex:
        re, im = draw(shape, dtype=real), draw(shape, dtype=real)
        a = re + 1j * im if kind == "uniform" else (re + 1j * im) * np.sqrt(real(0.5))
    else:
        a = draw(shape, dtype=real)
    return _astype(a, dt)


def rand(*size, generator: Generator | None = None, dtype=None, device=None, requires_grad: bool = False,
         **device_options) -> Tensor:
    """Samples uniform on [0, 1); ``rand(2, 3)``, ``rand((2, 3))`` or ``rand(size=(2, 3))``.
    ``device_options`` go to a backend's device (Dask's ``chunks``).

    >>> import dispatch_jit as dj
    >>> g = dj.Generator(0); r = dj.rand(2, 3, generator=g); r.shape, bool(((r >= 0) & (r < 1)).all())
    ((2, 3), True)
    """
    shape = _size_of(size, device_options.pop("size", None), "rand")
    a = _draw(_rng(generator, "rand"), "uniform", shape, _sample_dtype(dtype, "rand"))
    return _finish(a, device, requires_grad, device_options)


def randn(*size, generator: Generator | None = None, dtype=None, device=None, requires_grad: bool = False,
          **device_options) -> Tensor:
    """Standard normal samples; sizes as ``rand``'s.  ``device_options`` go to a backend's device.

    >>> import dispatch_jit as dj
    >>> dj.randn(size=(1000,), generator=dj.Generator(0), dtype=dj.float64).std().item() > 0.9
    True
    """
    shape = _size_of(size, device_options.pop("size", None), "randn")
    a = _draw(_rng(generator, "randn"), "normal", shape, _sample_dtype(dtype, "randn"))
    return _finish(a, device, requires_grad, device_options)


def rand_like(input, *, generator: Generator | None = None, dtype=None, device=None,
              requires_grad: bool = False) -> Tensor:
    """Uniform samples on [0, 1) of ``input``'s shape, dtype and device (a floating dtype).

    >>> import dispatch_jit as dj
    >>> r = dj.rand_like(dj.zeros(2, 3, dtype=dj.float64)); r.shape, r.dtype
    ((2, 3), dispatch_jit.float64)
    """
    shape, dt, dev = _like(input, dtype, device)
    a = _draw(_rng(generator, "rand_like"), "uniform", shape, _sample_dtype(dt, "rand_like"))
    return _finish(a, dev, requires_grad)


def randn_like(input, *, generator: Generator | None = None, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
    """Standard normal samples of ``input``'s shape, dtype and device (a floating dtype)."""
    shape, dt, dev = _like(input, dtype, device)
    a = _draw(_rng(generator, "randn_like"), "normal", shape, _sample_dtype(dt, "randn_like"))
    return _finish(a, dev, requires_grad)


# -- integers ----------------------------------------------------------------------------
def _int_arg(v, fname: str, what: str) -> int:
    if isinstance(v, (bool, np.bool_, float, np.floating)):
        raise SchemaError(f"{fname}(): argument '{what}' must be int, not {type(v).__name__} ({v!r})")
    try:
        return operator.index(v)
    except TypeError:
        raise SchemaError(f"{fname}(): argument '{what}' must be int, not {type(v).__name__}") from None


def _integers(rng, low: int, high: int, shape: tuple, dt: DType, fname: str) -> np.ndarray:
    """Uniform integers in [low, high) as ``dt``, with PyTorch's checks of the bounds."""
    if low >= high:
        raise InvalidArgumentError(f"{fname}(): expects 'low' to be less than 'high', but got low={low} >= high={high}")
    if dt.is_complex:
        raise DTypeError(f"{fname}(): random integers need an integer, bool or floating dtype, not {dt.name}")
    if dt.is_integral or dt.np == np.bool_:
        info = np.iinfo(dt.np) if dt.is_integral else np.iinfo(np.uint8)
        top = info.max if dt.is_integral else 1
        if low < info.min:
            raise InvalidArgumentError(f"{fname}(): low={low} is out of bounds for {dt.name}")
        if high - 1 > top:
            raise InvalidArgumentError(f"{fname}(): high - 1 = {high - 1} is out of bounds for {dt.name}")
    return _astype(rng.integers(low, high, shape, dtype=np.int64 if high <= 2**63 else np.uint64), dt)


def randint(low=0, high=None, size=None, *, generator: Generator | None = None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)`` (also as
    keywords), int64 unless ``dtype=`` says otherwise; ``size`` is a tuple of ints, as PyTorch's.

    >>> import dispatch_jit as dj
    >>> r = dj.randint(5, (100,), generator=dj.Generator(0)); r.shape, r.dtype, 0 <= r.min().item(), r.max().item() < 5
    ((100,), dispatch_jit.int64, True, True)
    >>> dj.randint(3, 5, size=(2, 2)).shape
    (2, 2)
    """
    if size is None and isinstance(high, (tuple, list)):     # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:                                       # randint(high, size=...)
        low, high = 0, low
    if size is None:
        got = f"randint({low!r}, {high!r})" if low != 0 else f"randint({high!r})"
        raise SchemaError(f"randint() missing argument 'size' (a tuple of ints), got {got}: write "
                          f"randint(high, size) or randint(low, high, size)")
    if not isinstance(size, (tuple, list)):
        raise SchemaError(f"randint(): argument 'size' must be a tuple of ints, not {type(size).__name__} "
                          f"({size!r}); write ({size!r},)")
    low, high = _int_arg(low, "randint", "low"), _int_arg(high, "randint", "high")
    dt = as_dtype(dtype) if dtype is not None else int64
    a = _integers(_rng(generator, "randint"), low, high, _shape((tuple(size),), "randint"), dt, "randint")
    return _finish(a, device, requires_grad)


def randint_like(input, low=0, high=None, *, generator: Generator | None = None, dtype=None, device=None,
                 requires_grad: bool = False) -> Tensor:
    """Integers uniform in [low, high) of ``input``'s shape, dtype and device:
    ``randint_like(x, high)`` or ``randint_like(x, low, high)``.

    >>> import dispatch_jit as dj
    >>> r = dj.randint_like(dj.zeros(3), 10); r.dtype, bool(((r >= 0) & (r < 10)).all())
    (dispatch_jit.float32, True)
    """
    if high is None:
        low, high = 0, low
    low, high = _int_arg(low, "randint_like", "low"), _int_arg(high, "randint_like", "high")
    shape, dt, dev = _like(input, dtype, device)
    return _finish(_integers(_rng(generator, "randint_like"), low, high, shape, dt, "randint_like"), dev,
                   requires_grad)


def randperm(n, *, generator: Generator | None = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype=`` says otherwise).

    >>> import dispatch_jit as dj
    >>> sorted(dj.randperm(5, generator=dj.Generator(0)).tolist())
    [0, 1, 2, 3, 4]
    """
    n = _size(n, "randperm", "n")
    if n < 0:
        raise ShapeError(f"randperm(): n must be non-negative, got {n}")
    dt = as_dtype(dtype) if dtype is not None else int64
    if not (dt.is_integral or dt.is_floating_point):
        raise DTypeError(f"randperm(): not implemented for {dt.name} (as PyTorch); use an integer or floating dtype")
    if dt.is_integral and n - 1 > np.iinfo(dt.np).max:
        raise InvalidArgumentError(f"randperm(): n={n} values do not fit {dt.name} (at most "
                                   f"{np.iinfo(dt.np).max + 1})")
    a = _astype(_rng(generator, "randperm").permutation(n), dt)
    return _finish(a, device, requires_grad)


# -- distributions with tensor parameters ---------------------------------------------------
class _Sampled(Function):
    """Samples of a distribution whose parameters require grad: they require grad too, and the
    gradient to each parameter is zero, as PyTorch's ``normal`` and ``bernoulli``.  One subclass
    per distribution names the node (``grad_fn=<NormalBackward>``)."""

    @staticmethod
    def forward(ctx, sample, *params):
        ctx.params = [(p.shape, p.dtype, p.device) if isinstance(p, Tensor) else None for p in params]
        return sample()

    @staticmethod
    def backward(ctx, grad):
        return (None,) + tuple(None if m is None else zeros(*m[0], dtype=m[1], device=_place(m[2]))
                               for m in ctx.params)


def _place(dev):
    """The ``device=`` that puts new samples where ``dev`` (a tensor's device) is."""
    return None if dev == "cpu" else dev


class Normal(_Sampled):
    pass


class Bernoulli(_Sampled):
    pass


def _with_grad(fn: type, sample, *params) -> Tensor:
    """``sample()``, tracked by autograd as ``fn`` (a ``_Sampled``) when a parameter requires grad."""
    if is_grad_enabled() and any(isinstance(p, Tensor) and p.requires_grad for p in params):
        return fn.apply(sample, *params)
    return sample()


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(t._host())


def normal(mean, std=1.0, size=None, *, generator: Generator | None = None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples, PyTorch's four overloads: ``normal(mean: Tensor, std: Tensor)`` (broadcast),
    ``normal(mean: Tensor, std=1.0)``, ``normal(mean: float, std: Tensor)``, and
    ``normal(mean: float, std: float, size, *, dtype, device, requires_grad)``.

    >>> import dispatch_jit as dj
    >>> g = dj.Generator(0)
    >>> dj.normal(dj.zeros(2, 3), dj.ones(3), generator=g).shape, dj.normal(2.0, 0.5, (4,), generator=g).shape
    ((2, 3), (4,))
    """
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    rng = _rng(generator, "normal")
    if not (mt or st):
        if size is None:
            raise SchemaError("normal(): with a float mean and std, pass a size: normal(mean, std, size), or make "
                              "mean or std a tensor")
        mean, std = _real(mean, "mean"), _real(std, "std")
        _check_std(std)
        if not isinstance(size, (tuple, list)):
            raise SchemaError(f"normal(): argument 'size' must be a tuple of ints, not {type(size).__name__}")
        dt = _sample_dtype(dtype, "normal")
        z = _draw(rng, "normal", _shape((tuple(size),), "normal"), dt)
        return _finish(_astype(z * std + mean, dt), device, requires_grad)
    if size is not None or dtype is not None or device is not None or requires_grad:
        raise SchemaError("normal(): size, dtype, device and requires_grad go with a float mean and std only; with a "
                          "tensor mean or std the samples take its shape, dtype and device")
    ref = mean if mt else std
    dt = ref.dtype
    if not (dt.is_floating_point or dt.is_complex):
        raise DTypeError(f"normal(): the {'mean' if mt else 'std'} tensor must be floating or complex, got {dt.name}")
    if mt and st:
        try:
            shape = broadcast_shapes(tuple(mean.shape), tuple(std.shape))
        except ValueError:
            raise BroadcastError(f"normal(): mean of shape {tuple(mean.shape)} and std of shape {tuple(std.shape)} "
                                 f"do not broadcast") from None
    else:
        shape = tuple(ref.shape)
    m = _host(mean) if mt else _real(mean, "mean")
    s = _host(std) if st else _real(std, "std")
    if st:
        if not np.all(s >= 0):     # NaN fails too
            raise InvalidArgumentError("normal(): expects all elements of std >= 0.0")
    else:
        _check_std(s)

    def sample():
        z = _draw(rng, "normal", shape, dt)
        return _finish(_astype(z * s + m, dt), _place(ref.device), False)
    return _with_grad(Normal, sample, mean, std)


def _real(v, what: str) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise SchemaError(f"normal(): argument '{what}' must be a float or a Tensor, not {type(v).__name__}")
    return float(v)


def _check_std(std: float) -> None:
    if not std >= 0:
        raise InvalidArgumentError(f"normal(): expects std >= 0.0, but found std {std}")


def bernoulli(input, p=None, *, generator: Generator | None = None) -> Tensor:
    """Samples 1 with probability ``input`` (elementwise), else 0, of ``input``'s shape, dtype and
    device; ``bernoulli(input, p)`` (or ``p=``) uses the one probability ``p`` and only ``input``'s
    shape, dtype and device.

    >>> import dispatch_jit as dj
    >>> dj.bernoulli(dj.tensor([0.0, 1.0, 1.0])), dj.bernoulli(dj.zeros(3, dtype=dj.int64), p=1.0)
    (tensor([0., 1., 1.]), tensor([1, 1, 1]))
    """
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"bernoulli(): argument 'input' must be a Tensor, not {type(input).__name__}")
    rng = _rng(generator, "bernoulli")
    shape, dt = tuple(input.shape), input.dtype
    if p is None:
        if not (dt.is_floating_point):
            raise DTypeError(f"bernoulli(): probabilities must be a floating tensor, got {dt.name}; for a fixed "
                             f"probability pass bernoulli(input, p)")
        prob = _host(input)
        if not np.all((prob >= 0) & (prob <= 1)):
            raise InvalidArgumentError("bernoulli(): expects all probabilities in [0, 1] (found a value outside, "
                                       "or NaN)")
    else:
        if isinstance(p, Tensor):
            raise SchemaError("bernoulli(input, p): p is one float; for a probability per element pass the "
                              "probabilities as input: bernoulli(probs)")
        prob = _real(p, "p")
        if not 0 <= prob <= 1:
            raise InvalidArgumentError(f"bernoulli(): expects p to be in [0, 1], but got p={p}")

    def sample():
        return _finish(_astype(rng.random(shape) < prob, dt), _place(input.device), False)
    return _with_grad(Bernoulli, sample, input)


def multinomial(input, num_samples, replacement: bool = False, *, generator: Generator | None = None) -> Tensor:
    """Indices drawn from the categorical distribution of each row of ``input`` (1-D: one row),
    whose non-negative weights need not sum to 1: ``num_samples`` per row, int64.  Without
    replacement, each draw removes its category (at most as many samples as categories of
    nonzero weight); with ``replacement=True``, draws are independent.

    >>> import dispatch_jit as dj
    >>> sorted(dj.multinomial(dj.tensor([1.0, 0.0, 3.0, 2.0]), 3, generator=dj.Generator(0)).tolist())
    [0, 2, 3]
    """
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"multinomial(): argument 'input' must be a Tensor, not {type(input).__name__}")
    k = _int_arg(num_samples, "multinomial", "num_samples")
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial(): input must be 1 or 2 dim (a row of weights, or one per row), got shape "
                         f"{tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"multinomial(): only supports floating-point dtypes for input, got {input.dtype.name}")
    if k <= 0:
        raise InvalidArgumentError(f"multinomial(): cannot sample num_samples={k} <= 0 samples")
    w = _host(input).astype(np.float64).reshape(-1, input.shape[-1])
    n = w.shape[1]
    if not replacement and k > n:
        raise InvalidArgumentError(f"multinomial(): cannot sample num_samples={k} > {n} categories without "
                                   f"replacement; pass replacement=True or fewer samples")
    if not np.all(np.isfinite(w) & (w >= 0)):
        raise InvalidArgumentError("multinomial(): probability tensor contains either `inf`, `nan` or element < 0")
    if w.shape[0] and not np.all(w.sum(axis=1) > 0):
        raise InvalidArgumentError("multinomial(): invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and w.shape[0] and np.min(np.count_nonzero(w, axis=1)) < k:
        raise InvalidArgumentError(f"multinomial(): a row has fewer than num_samples={k} categories of nonzero "
                                   f"weight, so without replacement it would draw categories of probability 0; "
                                   f"pass replacement=True or fewer samples")
    rng = _rng(generator, "multinomial")
    if replacement:
        cdf = np.cumsum(w, axis=1)
        cdf /= cdf[:, -1:]
        u = rng.random((w.shape[0], k))
        # category j is drawn where cdf[j-1] <= u < cdf[j]: never one of weight 0; cdf[-1] is 1 > u
        idx = np.stack([np.searchsorted(c, r, side="right") for c, r in zip(cdf, u)]) if w.shape[0] else u
    else:
        # exponential races: each category finishes at Exp(1) / weight; the first k to finish are k draws
        # without replacement, in draw order (PyTorch's CPU kernel does the same)
        with np.errstate(divide="ignore"):
            t = rng.standard_exponential(w.shape) / w
        idx = np.argsort(t, axis=1, kind="stable")[:, :k]
    out = idx.astype(np.int64).reshape(tuple(input.shape[:-1]) + (k,))
    return _finish(out, _place(input.device), False)


