"""Reduction operators: schemas, and their argument handling for the CPU and CUDA kernels.

Every op that takes an axis spells it ``axis=`` (the array API's name); the
dispatcher also accepts ``dim=`` and ``keepdim=`` for PyTorch users.  The
public ``max``/``min`` are PyTorch's (``PY_FUNCTIONS`` below); the reductions
``aten::max``/``aten::min`` are public as ``amax``/``amin``.
"""

from __future__ import annotations


from dispatch_jit import return_types
from dispatch_jit.dtypes import as_dtype
from dispatch_jit.entry import errors_name
from dispatch_jit.errors import DispatchJitError, SchemaError
from dispatch_jit.tensor import Tensor, trace_of, wrap

from .table import result_dtype
from ..shape.op import normalize_axes, normalize_axis

__all__ = ["SCHEMAS", "EXTRA", "Reduction", "kernels", "METHODS", "VAR_STD", "VarStd", "correction_of", "PY_FUNCTIONS",
           "RETURN_TYPES", "equal"]

_AXES = "int[]? axis=None, bool keepdims=False"
_VAR_ARGS = "int[]? axis=None, bool? unbiased=None, bool keepdims=False, *, float? correction=None"
SCHEMAS = [
    f"sum(Tensor self, {_AXES}, *, ScalarType? dtype=None) -> Tensor",
    f"prod(Tensor self, {_AXES}, *, ScalarType? dtype=None) -> Tensor",
    f"mean(Tensor self, {_AXES}, *, ScalarType? dtype=None) -> Tensor",
    # amax/amin: PyTorch's default dim=[] is every dim, and (unlike None, what max(x) passes) its
    # gradient is scale_grad_by_count's, so the derivative table tells the two apart (derivatives._extreme)
    "max(Tensor self, int[]? axis=[], bool keepdims=False) -> Tensor",
    "min(Tensor self, int[]? axis=[], bool keepdims=False) -> Tensor",
    "argmax(Tensor self, int? axis=None, bool keepdims=False) -> Tensor",
    "argmin(Tensor self, int? axis=None, bool keepdims=False) -> Tensor",
    # PyTorch's var/std: the third positional is ``unbiased`` (not keepdim), and the default is
    # the unbiased estimate (correction=1); ``correction=`` (torch >= 2.0) takes any float
    f"var(Tensor self, {_VAR_ARGS}) -> Tensor",
    f"std(Tensor self, {_VAR_ARGS}) -> Tensor",
    f"all(Tensor self, {_AXES}) -> Tensor",
    f"any(Tensor self, {_AXES}) -> Tensor",
    f"logsumexp(Tensor self, {_AXES}) -> Tensor",
]
METHODS = ["sum", "prod", "mean", "argmax", "argmin", "var", "std", "all", "any", "logsumexp"]


# op -> the keyword arguments its kernel takes after keepdims, on every backend
EXTRA = {"sum": ("dtype",), "prod": ("dtype",), "mean": ("dtype",), "max": (), "min": (), "argmax": (), "argmin": (),
         "var": ("correction",), "std": ("correction",), "all": (), "any": (), "logsumexp": ()}


class Reduction:
    """One reduction op at one backend key.  ``specialize`` checks the input dtype once per
    signature and lets the backend bind its per-signature state; ``run`` normalizes ``axis``
    and ``dtype=`` once per call, here, and the backend only reduces.

    A backend is an object with ``bind(name, call, kernel_name) -> reduce``, where
    ``reduce(a, axes, keepdims, to, kw)`` reduces array ``a`` (first cast to ``to`` when not
    None) over ``axes`` (None: all) with the static arguments ``kw`` and returns an array;
    ``reduce.full``, where not None, is ``reduce``'s shortcut for the whole (contiguous) data of
    a tensor of the signature (``axis=None``, no ``keepdims``, no ``dtype=``), whose result
    has the signature ``reduce.full_sig``."""

    def __init__(self, name: str, device: str, backend):
        self.name, self.extra, self.backend = name, EXTRA[name], backend
        self.__name__ = f"{name}_{device}"

    def specialize(self, call):
        name, extra = self.name, self.extra
        result_dtype(name, call.metas[0].dtype.np)   # raises DTypeError for unsupported dtypes
        reduce = self.backend.bind(name, call, self.__name__)
        single = name in ("argmax", "argmin")

        def run(self_, axis, keepdims, *rest):
            a = self_._data
            if single:
                axes = None if axis is None else (normalize_axis(axis, a.ndim, name),) if a.ndim else ()
            else:
                axes = None if axis is None else normalize_axes(axis, a.ndim, name)
            kw = dict(zip(extra, rest))
            dtype = kw.pop("dtype", None)
            to = None
            if dtype is not None:
                d = as_dtype(dtype)
                if d.np != a.dtype:
                    to = d.np
                r = reduce(a, axes, bool(keepdims), to, kw)
                # dtype= is the result's dtype too: sum(uint8, dtype=uint8) is uint8, as PyTorch's
                # (the kernels accumulate small integers in int64; the cast wraps as their sum would)
                return wrap(r if r.dtype == d.np else r.astype(d.np))
            return wrap(reduce(a, axes, bool(keepdims), to, kw))
        full = getattr(reduce, "full", None)
        if full is None or extra not in ((), ("dtype",)):
            return run
        # a reduction over everything (the common call: x.sum(), loss.mean()) goes straight to the
        # backend's full reduction of the data, which the signature says is contiguous
        osig, T = reduce.full_sig, Tensor
        if not extra:
            def run_full(self_, axis, keepdims):
                if axis is None and not keepdims:
                    t = _new(T)
                    t._data = full(self_._data)
                    t._sig = osig
                    return t
                return run(self_, axis, keepdims)
        else:
            def run_full(self_, axis, keepdims, dtype):
                if axis is None and not keepdims and dtype is None:
                    t = _new(T)
                    t._data = full(self_._data)
                    t._sig = osig
                    return t
                return run(self_, axis, keepdims, dtype)
        return run_full


_new = object.__new__


def correction_of(name: str, unbiased, correction) -> float:
    """The divisor offset of var/std from PyTorch's two spellings: ``unbiased`` (bool, default
    True: n - 1) or ``correction`` (any number); passing both is an error, as in torch."""
    if correction is None:
        return 0.0 if unbiased is False else 1.0
    if unbiased is not None:
        raise SchemaError(f"{name}(): got both unbiased={unbiased!r} and correction={correction!r}; pass one "
                          f"(unbiased=True is correction=1, unbiased=False is correction=0)")
    return float(correction)


class VarStd:
    """var/std in PyTorch's argument order ``(self, axis, unbiased, keepdims, *, correction)``
    over a reduction kernel taking ``(self, axis, keepdims, correction)``: resolves the
    correction and reorders.  Wraps either backend's ``Reduction``."""

    extra = ("correction",)       # what the wrapped kernel takes after keepdims

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.__name__ = inner.__name__

    def specialize(self, call):
        run, name = self.inner.specialize(call), self.name

        def var_std(self_, axis, unbiased, keepdims, correction):
            return run(self_, axis, keepdims, correction_of(name, unbiased, correction))
        return var_std


VAR_STD = ("var", "std")


def kernels(device: str, backend) -> dict:
    """op -> kernel at one backend key: every reduction of ``EXTRA``, var/std behind ``VarStd``."""
    return {name: VarStd(Reduction(name, device, backend)) if name in VAR_STD else Reduction(name, device, backend)
            for name in EXTRA}


# -- PyTorch's max/min and equal: Python functions over the ops ------------------------------------
# torch.max is three functions in one name: max(x) reduces everything to a 0-d tensor, max(x, dim)
# returns (values, indices), max(x, other) is maximum.  The ops underneath stay one reduction
# each (aten::max is amax: axis lists, keepdims, fused by the compiled mode), so these wrappers
# only pick which ops to call.


from dispatch_jit.ops import entries  # noqa: E402

A = entries("aten")    # the ops are defined after this module is imported


RETURN_TYPES = {name: return_types.named(name, ("values", "indices")) for name in ("max", "min")}
_UNSET = object()


def _pick(fname: str, name: str, value, alias: str, alias_value):
    """A keyword given under its PyTorch name or its array API alias, not both."""
    if alias_value is _UNSET:
        return value
    if value is not _UNSET:
        raise SchemaError(f"{fname}(): got both {name}= and {alias}= (the same argument); pass one")
    return alias_value


def _value_selecting(fname: str):
    """The values of max/min along ``dim`` whose gradient goes to the selected index only (torch's
    value_selecting_reduction_backward), not shared among ties as amax's."""
    from dispatch_jit.autograd.function import Function
    from dispatch_jit.creation import arange

    def forward(ctx, x, indices, dim, keepdim):
        ctx.indices, ctx.dim, ctx.keepdim, ctx.ndim = indices, dim, keepdim, x.ndim
        # a traced tensor's sizes are not known (reading them aborts the trace); its backward never
        # runs from the trace (a signature that needs it runs eagerly), so it needs no n
        traced = trace_of(x) is not None
        ctx.n, ctx.device = (None if traced else x.shape[dim] if x.ndim else 1), x.device
        return getattr(A, fname)(x, (dim,), keepdim)

    def backward(ctx, g):
        if ctx.ndim == 0:
            return g, None, None, None
        dim, idx = ctx.dim % ctx.ndim, ctx.indices
        if not ctx.keepdim:
            g, idx = A.unsqueeze(g, dim), A.unsqueeze(idx, dim)
        iota = A.reshape(arange(ctx.n, device=ctx.device), tuple(ctx.n if d == dim else 1 for d in range(ctx.ndim)))
        return A.where(A.eq(iota, idx), g, 0.0), None, None, None

    return type(f"{fname.capitalize()}Dim", (Function,), {"forward": staticmethod(forward),
                                                          "backward": staticmethod(backward)})


def _extreme_function(fname: str, argname: str, elementwise: str):
    ret, selecting = RETURN_TYPES[fname], []

    def with_dim(x, dim, keepdim):
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise SchemaError(f"{fname}(): dim must be an int, got {dim!r} ({type(dim).__name__}); to reduce over "
                              f"several dims use dj.a{fname}(x, dim={dim!r})")
        keepdim = False if keepdim is _UNSET else keepdim
        try:
            indices = getattr(A, argname)(x, dim, keepdim)
        except DispatchJitError as e:     # the user called max(x, dim), not argmax
            errors_name(e, argname, fname)
            raise
        # a tensor traced by dj.compile takes the Function too: the trace then knows a
        # backward of its grad-requiring signatures needs this Function's rule (it runs eagerly)
        if getattr(x, "requires_grad", False) and _grad_enabled() or trace_of(x) is not None:
            if not selecting:
                selecting.append(_value_selecting(fname))
            return ret(selecting[0].apply(x, indices, dim, keepdim), indices)
        return ret(getattr(A, fname)(x, (dim,), keepdim), indices)

    def fn(input, *args, **kwargs):
        if not args and not kwargs:
            # axis=None, not amax's default (): torch.max(x)'s gradient is evenly_distribute_backward
            return getattr(A, fname)(input, None)
        return _extreme_call(fname, elementwise, with_dim, input, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = fname
    fn.__doc__ = (f"PyTorch's ``{fname}``: ``{fname}(x)`` is a 0-d tensor; ``{fname}(x, dim, keepdim=False)`` "
                  f"returns ``(values, indices)``, and their gradient goes to the index selected;\n"
                  f"``{fname}(x, other)`` is ``{elementwise}(x, other)``.  Several dims: ``a{fname}``.\n\n"
                  f">>> import dispatch_jit as dj\n"
                  f">>> dj.{fname}(dj.tensor([[1.0, 5.0], [4.0, 2.0]]), 1).indices\n"
                  f"tensor([{1 if fname == 'max' else 0}, {0 if fname == 'max' else 1}])\n")
    return fn


def _extreme_call(fname, elementwise, with_dim, input, dim=_UNSET, keepdim=_UNSET, *, other=_UNSET,
                  axis=_UNSET, keepdims=_UNSET):
    dim = _pick(fname, "dim", dim, "axis", axis)
    keepdim = _pick(fname, "keepdim", keepdim, "keepdims", keepdims)
    if other is not _UNSET or hasattr(dim, "_sig"):
        other = dim if other is _UNSET else other
        if keepdim is not _UNSET:
            raise SchemaError(f"{fname}(input, other) takes no keepdim; did you mean {fname}(input, dim, keepdim)?")
        return getattr(A, elementwise)(input, other)
    if dim is _UNSET or dim is None:
        if keepdim is not _UNSET:
            raise SchemaError(f"{fname}(): keepdim needs a dim (as torch.{fname}); for all dims use "
                              f"dj.a{fname}(x, keepdim=True)")
        return getattr(A, fname)(input, None)
    return with_dim(input, dim, keepdim)


def _grad_enabled() -> bool:
    from dispatch_jit.autograd.grad_mode import is_grad_enabled
    return is_grad_enabled()


def equal(input, other) -> bool:
    """True if both tensors have the same shape and equal elements (PyTorch's ``torch.equal``;
    NaN is not equal to itself; dtypes may differ).

    >>> import dispatch_jit as dj
    >>> dj.equal(dj.tensor([1, 2]), dj.tensor([1.0, 2.0])), dj.equal(dj.tensor([1.0]), dj.tensor([1.0, 1.0]))
    (True, False)
    """
    for name, t in (("input", input), ("other", other)):
        if not hasattr(t, "_sig"):
            raise SchemaError(f"equal(): argument '{name}' must be a Tensor, not {type(t).__name__}")
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(A.all(A.eq(input, other)).item())


def _var_std_function(name: str):
    """PyTorch's ``var``/``std``: the op's ``(input, dim, unbiased, keepdim, *, correction)``, and
    the overload ``(input, unbiased)`` that the op's schema cannot take: a bool where ``dim`` goes
    is ``unbiased``, alone (as torch, ``std(x, False, True)`` is an error, not dim=False)."""
    shown = "tensor(2.), tensor(1.), tensor(2.)" if name == "var" else "tensor(1.4142), tensor(1.), tensor(1.4142)"

    def fn(input, *args, **kwargs):
        if args and args[0].__class__ is bool:
            if len(args) > 1 or kwargs:
                given = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
                raise SchemaError(f"{name}(input, {given}): a bool second argument is the overload "
                                  f"{name}(input, unbiased), which takes nothing more; for dims, pass "
                                  f"{name}(input, dim, unbiased, keepdim) with an int or a tuple of ints as dim")
            return getattr(A, name)(input, None, args[0])
        return getattr(A, name)(input, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"PyTorch's ``{name}``: ``{name}(x, dim=None, unbiased=True, keepdim=False, *, correction=None)`` "
                  f"(the op ``aten::{name}``),\nor ``{name}(x, unbiased)``.  ``unbiased=True`` divides by n - 1, "
                  f"``False`` by n; ``correction=c`` by n - c.\n\n"
                  f">>> import dispatch_jit as dj\n"
                  f">>> x = dj.tensor([1.0, 3.0])\n"
                  f">>> dj.{name}(x), dj.{name}(x, False), x.{name}(0, True)\n"
                  f"({shown})\n")
    return fn


# public name -> (function, also a Tensor method?)
PY_FUNCTIONS = {
    "var": (_var_std_function("var"), True),
    "std": (_var_std_function("std"), True),
    "max": (_extreme_function("max", "argmax", "maximum"), True),
    "min": (_extreme_function("min", "argmin", "minimum"), True),
    "equal": (equal, True),
}
