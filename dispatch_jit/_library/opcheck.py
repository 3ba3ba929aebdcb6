"""``opcheck``: test that an operator's registrations match its kernel's behaviour.

The checks, each reported by name: the call fits the schema and outputs do
not alias inputs the schema does not say they alias (test_schema); the fake
kernel agrees with the real kernel's outputs (test_faketensor); autograd is
registered, or the op is declared non-differentiable (test_autograd_registration);
and the kernel mutates exactly the arguments the schema marks as mutated
(test_mutation).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..autograd.grad_mode import no_grad
from ..autograd.graph import version_of
from .custom_op import NON_DIFFERENTIABLE, _entry_of
from ..errors import InvalidArgumentError, OpCheckError, SchemaError
from ..keys import DispatchKey
from ..schema import bind
from ..tensor import Tensor

__all__ = ["opcheck", "OpCheckError", "DEFAULT_TEST_UTILS"]


DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_mutation")
_ALL_TEST_UTILS = DEFAULT_TEST_UTILS + ("test_aot_dispatch_dynamic",)


def _map_tensors(fn, v):
    if isinstance(v, Tensor):
        return fn(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_map_tensors(fn, x) for x in v)
    return v


def _tensors(v) -> list[Tensor]:
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def _clone(t: Tensor) -> Tensor:
    with no_grad():
        c = t.detach().clone()
    return c.requires_grad_(True) if t.requires_grad else c


def _fresh_call(entry, args, kwargs):
    """Fresh copies of the inputs, so checks neither see nor leave each other's mutations."""
    args = tuple(_map_tensors(_clone, a) for a in args)
    kwargs = {k: _map_tensors(_clone, v) for k, v in kwargs.items()}
    return args, kwargs


def _bound(entry, args, kwargs) -> dict:
    return bind(entry.schema, args, kwargs, is_tensor=lambda v: isinstance(v, Tensor))


def _as_outputs(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _describe(t) -> str:
    if isinstance(t, Tensor):
        return f"Tensor(shape={tuple(t.shape)}, dtype={t.dtype.name}, device={t.device})"
    return f"{type(t).__name__}"


def _check_schema(entry, args, kwargs) -> None:
    try:
        _bound(entry, args, kwargs)
    except SchemaError as e:
        raise OpCheckError(f"test_schema: the call does not fit the schema of {entry.name}: {e}") from None
    a2, k2 = _fresh_call(entry, args, kwargs)
    with no_grad():
        out = entry.entry(*a2, **k2)
    rets = entry.schema.returns
    outs = () if not rets and out is None else (_as_outputs(out) if len(rets) > 1 else (out,))
    if len(outs) != len(rets):
        raise OpCheckError(f"test_schema: {entry.name} returned {len(outs)} value(s) "
                           f"({', '.join(map(_describe, outs)) or 'None'}) but its schema declares {len(rets)}: "
                           f"{entry.schema}")
    for i, (r, o) in enumerate(zip(rets, outs)):
        t = r.type
        if t.base == "Tensor":
            ok = (o is None and t.optional) or (isinstance(o, (list, tuple)) and all(isinstance(x, Tensor) for x in o)
                                              if t.is_list else isinstance(o, Tensor))
        elif t.base in ("int", "float", "bool", "Scalar") and not t.is_list:
            ok = isinstance(o, (int, float, bool, np.number)) or (o is None and t.optional)
        else:
            ok = True
        if not ok:
            raise OpCheckError(f"test_schema: output {i} of {entry.name} is {_describe(o)}, but the schema says "
                               f"{t}: {entry.schema}")
    # outputs may alias inputs (or each other) only where the schema says so, e.g. Tensor(a!) -> Tensor(a!)
    b2 = _bound(entry, a2, k2)
    in_t = [(a.name, t, a.type.alias) for a in entry.schema.arguments for t in _tensors(b2[a.name])]
    seen = []
    for i, (r, o) in enumerate(zip(rets, outs)):
        for t in _tensors(o):
            for name, it, alias in in_t:
                if _shares(t, it) and not (r.type.alias and alias and r.type.alias.set == alias.set):
                    raise OpCheckError(
                        f"test_schema: output {i} of {entry.name} shares memory with input '{name}', but the schema "
                        f"declares no alias ({entry.schema}); return a new tensor (e.g. {name}.clone())")
            for j, prev in seen:
                if _shares(t, prev):
                    raise OpCheckError(f"test_schema: outputs {j} and {i} of {entry.name} share memory; "
                                       f"return distinct tensors")
            seen.append((i, t))


def _shares(a: Tensor, b: Tensor) -> bool:
    da, db = a._data, b._data
    return isinstance(da, np.ndarray) and isinstance(db, np.ndarray) and np.shares_memory(da, db)


def _check_fake(entry, args, kwargs) -> None:
    meta = entry.kernels.get(DispatchKey.Meta)    # register_fake's function
    if meta is None:
        raise OpCheckError(f"test_faketensor: {entry.name} has no fake kernel; add one with "
                           f"register_fake (it returns tensors of the output's shape and dtype, e.g. "
                           f"dj.empty_like(x))")
    from ..creation import zeros_like
    a2, k2 = _fresh_call(entry, args, kwargs)
    with no_grad():
        real = entry.entry(*a2, **k2)
        # the kernel's calling convention: every argument, defaults filled in, keyword-only ones by keyword
        bound = _bound(entry, tuple(_map_tensors(zeros_like, a) for a in args),
                       {k: _map_tensors(zeros_like, v) for k, v in kwargs.items()})
        fa = [bound[a.name] for a in entry.schema.positional]
        fk = {a.name: bound[a.name] for a in entry.schema.kwarg_only}
        try:
            fake = meta.fn(*fa, **fk)
        except Exception as e:  # noqa: BLE001 - any failure of the user's fake kernel is the finding
            raise OpCheckError(f"test_faketensor: the fake kernel of {entry.name} raised "
                               f"{type(e).__name__}: {e}") from e
    ro, fo = _as_outputs(real), _as_outputs(fake)
    if len(ro) != len(fo):
        raise OpCheckError(f"test_faketensor: the fake kernel of {entry.name} returned {len(fo)} output(s), the real "
                           f"kernel {len(ro)}")
    for i, (r, f) in enumerate(zip(ro, fo)):
        rt, ft = _tensors(r), _tensors(f)
        same = len(rt) == len(ft) and all(tuple(x.shape) == tuple(y.shape) and x.dtype is y.dtype and
                                          x.device == y.device for x, y in zip(rt, ft))
        if not same or (r is None) != (f is None):
            raise OpCheckError(
                f"test_faketensor: output {i} of {entry.name}: the fake kernel returned {_describe(f)} but the real "
                f"kernel returned {_describe(r)}; fix the function given to register_fake")


def _check_autograd(entry, args, kwargs) -> None:
    kernels = entry.kernels
    ag = kernels.get(DispatchKey.Autograd)
    if ag is not None or NON_DIFFERENTIABLE in entry.tags:
        return   # a formula, or a fallthrough: declared non-differentiable
    if any(k in kernels for k in (DispatchKey.AutogradCPU, DispatchKey.AutogradCUDA, DispatchKey.AutogradOther,
                                  DispatchKey.CompositeImplicitAutograd)):
        return
    if not any(t.dtype.category >= 2 for v in list(args) + list(kwargs.values()) for t in _tensors(v)):
        return   # no input could require grad
    a2, k2 = _fresh_call(entry, args, kwargs)
    with no_grad():
        out = entry.entry(*a2, **k2)
    if not any(t.dtype.category >= 2 for t in _tensors(out)):
        return   # no output could carry a gradient (in-place only, or integer results)
    short = entry.schema.name
    raise OpCheckError(
        f"test_autograd_registration: {entry.name} maps floating-point tensors to floating-point tensors but has "
        f"no autograd kernel, so gradients cannot flow through it. Register one with "
        f".register_autograd(backward, setup_context=...) or Library.impl('{short}', fn, 'Autograd'); "
        f"or declare it non-differentiable with "
        f"tags=('{NON_DIFFERENTIABLE}',) or Library.impl('{short}', dj.library.fallthrough_kernel, 'Autograd')")


def _check_mutation(entry, args, kwargs) -> None:
    a2, k2 = _fresh_call(entry, args, kwargs)
    bound = _bound(entry, a2, k2)
    before = {a.name: [(t.numpy().copy(), version_of(t)) for t in _tensors(bound[a.name])]
              for a in entry.schema.arguments if a.type.is_tensor_like}
    with no_grad():
        entry.entry(*a2, **k2)
    mutated = set()
    for name, snaps in before.items():
        for t, (data, ver) in zip(_tensors(bound[name]), snaps):
            now = t.numpy()
            if version_of(t) != ver or now.shape != data.shape or not np.array_equal(now, data, equal_nan=True):
                mutated.add(name)
    declared = {a.name for a in entry.schema.arguments if a.is_mutable}
    if mutated - declared:
        names = ", ".join(f"'{n}'" for n in sorted(mutated - declared))
        raise OpCheckError(f"test_mutation: {entry.name} mutated {names}, but its schema does not declare it "
                           f"({entry.schema}); add {names} to mutates_args, or write to a copy instead")
    if declared - mutated:
        names = ", ".join(f"'{n}'" for n in sorted(declared - mutated))
        raise OpCheckError(f"test_mutation: the schema of {entry.name} declares {names} as mutated "
                           f"({entry.schema}), but the kernel left {'it' if len(declared - mutated) == 1 else 'them'} "
                           f"unchanged on these inputs; remove {names} from mutates_args, or pass inputs on which "
                           f"the mutation is visible")


_CHECKS = {"test_schema": _check_schema, "test_autograd_registration": _check_autograd,
           "test_faketensor": _check_fake, "test_mutation": _check_mutation}


def opcheck(op, args: tuple, kwargs: dict | None = None, *, test_utils: str | Iterable[str] = DEFAULT_TEST_UTILS,
            raise_exception: bool = True) -> dict[str, str]:
    """Check that an operator's registrations match what its kernel does.

    Args:
        op: a CustomOpDef, an OpOverload or a qualified name.
        args, kwargs: a sample call (small tensors; they are copied, never modified).
        test_utils: which checks to run: "test_schema" (the call fits the
            schema; the outputs match its returns and alias nothing
            undeclared), "test_faketensor" (the fake kernel's output shapes
            and dtypes equal the real kernel's), "test_autograd_registration"
            (an autograd kernel is registered, or the op is declared
            non-differentiable, or no input is floating point),
            "test_mutation" (the kernel mutates exactly the arguments the
            schema marks ``Tensor(a!)``); "test_aot_dispatch_dynamic" is
            accepted and skipped.
        raise_exception: False returns the ``OpCheckError`` in the dict
            instead of raising the first one.

    Returns:
        check name -> "SUCCESS" (or the error).

    >>> import dispatch_jit as dj
    >>> @dj.library.custom_op("doc_opcheck::double", mutates_args=())
    ... def double(x: dj.Tensor) -> dj.Tensor:
    ...     return x * 2
    >>> _ = double.register_fake(lambda x: dj.empty_like(x))
    >>> double.register_autograd(lambda ctx, g: g * 2)
    >>> for check, status in dj.library.opcheck(double, (dj.tensor([1.0, 2.0]),)).items():
    ...     print(check, status)
    test_schema SUCCESS
    test_autograd_registration SUCCESS
    test_faketensor SUCCESS
    test_mutation SUCCESS
    >>> _ = double.register_fake(lambda x: dj.empty(3))      # wrong: the output has 2 elements
    >>> dj.library.opcheck(double, (dj.tensor([1.0, 2.0]),))     # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    dispatch_jit.errors.OpCheckError: test_faketensor: ... the fake kernel returned Tensor(shape=(3,), ...
    >>> double._destroy()
    """
    entry = _entry_of(op)
    kwargs = dict(kwargs or {})
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    names = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    bad = [n for n in names if n not in _ALL_TEST_UTILS]
    if bad:
        raise InvalidArgumentError(f"opcheck: unknown test_utils {bad}; valid: {list(_ALL_TEST_UTILS)}")
    result: dict[str, object] = {}
    for name in names:
        if name == "test_aot_dispatch_dynamic":
            result[name] = "SKIPPED (no ahead-of-time tracing in dispatch_jit yet)"
            continue
        try:
            try:
                _CHECKS[name](entry, args, kwargs)
            except OpCheckError:
                raise
            except Exception as e:  # noqa: BLE001 - the op (or its kernel) failed on the sample call
                raise OpCheckError(f"{name}: calling {entry.name} on the sample inputs raised "
                                   f"{type(e).__name__}: {e}") from e
            result[name] = "SUCCESS"
        except OpCheckError as e:
            if raise_exception:
                raise
            result[name] = e
    return result
