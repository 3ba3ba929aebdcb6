"""Custom operators from Python functions, as ``torch.library.custom_op``.

``custom_op`` reads a function's type hints, writes the schema, defines the
operator in a FRAGMENT library of its namespace and registers the function
as its kernel.  The returned ``CustomOpDef`` is the operator: calling it goes
through the dispatcher, and its methods add what the seed tutorial registers
by hand (kernels per device, an Autograd kernel, a fake kernel).  Every
registration keeps its handle, so ``_destroy()`` undoes the lot.

``opcheck`` (opcheck.py) then tests what the registrations promise; the schema comes
from ``infer_schema`` (infer_schema.py).
"""

from __future__ import annotations

import inspect
from typing import Callable, Iterable

from .. import registry
from ..autograd.function import FunctionCtx, record_node
from ..autograd.grad_mode import AUTOGRAD_BITS
from ..autograd.graph import SavedTensor, edge_of, node_class
from ..autograd.kernel import grad_to_shape
from ..dispatcher import ExcludeDispatchKeyGuard, _unboxed, tls
from ..errors import ArgumentTypeError, AutogradError, InvalidArgumentError, RegistrationError, SchemaInferenceError
from ..keys import DispatchKey, DispatchKeySet
from ..ops import OpOverload, overload_of
from ..registry import RegistrationHandle
from ..schema import FunctionSchema, parse_schema
from ..tensor import Tensor
from .infer_schema import infer_schema
from .registration import Library, fallthrough_kernel

__all__ = ["custom_op", "CustomOpDef", "register_fake", "infer_schema", "SchemaInferenceError",
           "NON_DIFFERENTIABLE"]   # infer_schema and SchemaInferenceError: re-exported from infer_schema.py

NON_DIFFERENTIABLE = "non_differentiable"   # tag: outputs never require grad (Autograd falls through)
_RESERVED_NAMESPACES = {"aten", "_"}
_DEVICE_KEYS = {"cpu": DispatchKey.CPU, "cuda": DispatchKey.CUDA}


# -- kernels ---------------------------------------------------------------------------------------
_AUTOGRAD_KEYS = DispatchKeySet.from_bits(AUTOGRAD_BITS)


def _below_autograd(fn, args):
    """Run ``fn`` with the autograd keys excluded, as PyTorch's
    AutoDispatchBelowAutograd: ops called inside a kernel do not record."""
    # a backend kernel reached from the Autograd kernel's run is below autograd already; a guard
    # (two updates of the thread state) would cost ~2 us of a ~7 us call there (measured)
    if tls.exclude & AUTOGRAD_BITS == AUTOGRAD_BITS:
        return fn(*args)
    with ExcludeDispatchKeyGuard(_AUTOGRAD_KEYS):
        return fn(*args)


def _requires_grad(meta) -> bool:
    if meta is None:
        return False
    if meta.kind == "list":
        return any(_requires_grad(m) for m in meta.items)
    return meta.kind == "tensor" and bool(meta.keyset & AUTOGRAD_BITS)


class _BackendKernel:
    """A custom op's kernel at a backend key.  A call can only reach it with
    inputs that require grad from an autograd kernel (or the autograd
    fallback) above; those signatures run the function below autograd, so
    the dj ops it calls do not record a graph of their own.  Other
    signatures call the function directly."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__wrapped__ = fn

    def specialize(self, call):
        kern = _unboxed(call.op, self.fn)
        if not any(_requires_grad(m) for m in call.metas):
            return kern
        return lambda *args: _below_autograd(kern, args)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class _Ctx(FunctionCtx):
    """``ctx`` of setup_context/backward.  Outputs are saved without their
    grad_fn (no cycle output -> node -> ctx -> output); the node is held
    weakly, as by every FunctionCtx."""

    def __init__(self, needs_input_grad: tuple, outputs: tuple):
        super().__init__(needs_input_grad)
        self._outputs = outputs

    def save_for_backward(self, *tensors) -> None:
        outs = self._outputs or ()
        self._saved = tuple(None if t is None else
                            SavedTensor(t, is_output=any(t is o for o in outs), name=f"saved tensor {i}")
                            for i, t in enumerate(tensors))

    def set_materialize_grads(self, value: bool) -> None:
        """False: backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)


def _node_name(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_")) + "Backward"


class _AutogradKernel:
    """The Autograd kernel of ``register_autograd``: run the op below autograd
    (``call.redispatch()``), then record one node whose formula calls the
    user's ``backward(ctx, *grads)``."""

    def __init__(self, opname: str, backward: Callable, setup_context: Callable | None):
        self.backward, self.setup_context = backward, setup_context
        self.opname = opname
        self.__name__ = f"autograd_{opname.split('::')[-1]}"
        self.node_cls = node_class(_node_name(opname.split("::")[-1]))
        self.pass_kwonly = setup_context is not None and "keyword_only_inputs" in inspect.signature(
            setup_context).parameters

    def specialize(self, call):
        below = call.redispatch()
        schema = call.op.schema
        npos = len(schema.positional)
        kwnames = [a.name for a in schema.kwarg_only]
        kinds = [("list" if a.type.is_list else "tensor") if a.type.is_tensor_like else None for a in schema.positional]
        posnames = [a.name for a in schema.positional]
        kw_tensors = [a.name for a in schema.kwarg_only if a.type.is_tensor_like]
        opname, node_cls, backward, setup = self.opname, self.node_cls, self.backward, self.setup_context
        pass_kwonly = self.pass_kwonly

        def run(*args):
            pos, kwonly = args[:npos], dict(zip(kwnames, args[npos:]))
            for n in kw_tensors:
                if getattr(kwonly[n], "requires_grad", False):
                    raise AutogradError(f"{opname}: keyword-only argument '{n}' requires grad, but register_autograd "
                                        f"differentiates positional inputs only; make '{n}' positional")
            flat, layout = [], []
            for v, kind in zip(pos, kinds):
                if kind == "tensor" and isinstance(v, Tensor):
                    layout.append(len(flat))
                    flat.append(v)
                elif kind == "list" and v is not None:
                    layout.append([len(flat) + j for j in range(len(v))])
                    flat.extend(v)
                else:
                    layout.append(None)
            edges = tuple(edge_of(t) if isinstance(t, Tensor) else None for t in flat)
            out = _below_autograd(below, args)
            if not any(edges):
                return out
            outs = out if isinstance(out, tuple) else (out,)
            if any(o is t for o in outs for t in flat):
                raise AutogradError(f"{opname}: the kernel returned one of its inputs as an output; outputs of an "
                                    f"op with register_autograd must be new tensors (return x.clone())")
            ctx = _Ctx(tuple(any(edges[j] is not None for j in ([s] if isinstance(s, int) else s))
                             if s is not None else False for s in layout), outs)
            in_meta = [(tuple(t.shape), t.dtype) if isinstance(t, Tensor) else None for t in flat]
            record_node(node_cls, opname, edges, outs, ctx, backward, _gather(opname, layout, posnames, in_meta))
            if setup is not None:       # after the outputs have their grad_fn: saving one marks it an output
                if pass_kwonly:
                    setup(ctx, pos, out, keyword_only_inputs=kwonly)
                else:
                    setup(ctx, pos, out)
            ctx._outputs = None
            return out
        return run


def _gather(opname, layout, posnames, in_meta):
    """``register_autograd``'s gradients: one per positional input (a list for a list input),
    each checked against its input's shape and cast to its dtype, flattened to one per edge."""
    def gather(res, needs):
        if len(layout) == 1 and not (isinstance(res, tuple) and len(res) == 1):
            res = (res,)
        if not isinstance(res, (tuple, list)) or len(res) != len(layout):
            n = len(res) if isinstance(res, (tuple, list)) else 1
            raise AutogradError(f"{opname}: backward returned {n} gradient{'s' * (n != 1)}, but the op has "
                                f"{len(layout)} positional input{'s' * (len(layout) != 1)} "
                                f"({', '.join(posnames)}); return one per input, None where there is none")
        out = [None] * len(in_meta)
        for name, slot, g in zip(posnames, layout, res):
            if slot is None or g is None:
                if g is not None:
                    raise AutogradError(f"{opname}: backward returned a gradient for '{name}', which is not a "
                                        f"Tensor input; return None in its place")
                continue
            if not isinstance(slot, int) and (not isinstance(g, (list, tuple)) or len(g) != len(slot)):
                raise AutogradError(f"{opname}: the gradient of the list input '{name}' must be a list of "
                                    f"{len(slot)} (a gradient or None per element), got {type(g).__name__}")
            items = [(slot, g)] if isinstance(slot, int) else list(zip(slot, g))
            for j, gj in items:
                out[j] = _check_grad(opname, name, gj, in_meta[j])
        return tuple(out)
    return gather


def _check_grad(opname, name, g, meta):
    if g is None or meta is None:
        return None
    if not isinstance(g, Tensor):
        raise AutogradError(f"{opname}: backward returned {type(g).__name__} as the gradient of '{name}'; "
                            f"return a dj.Tensor or None")
    shape, dt = meta
    g = grad_to_shape(g, shape, f"{opname}: backward", f"input '{name}'")
    return g if g.dtype is dt else g.to(dt)


# -- the operator object ---------------------------------------------------------------------------
_CUSTOM_OPS: dict[str, "CustomOpDef"] = {}


def _device_keys(device_types) -> list[DispatchKey]:
    if device_types is None:
        return [DispatchKey.CompositeExplicitAutograd]
    names = [device_types] if isinstance(device_types, str) else list(device_types)
    keys = []
    for d in names:
        if d not in _DEVICE_KEYS:
            raise InvalidArgumentError(f"unknown device type {d!r}; expected one of {sorted(_DEVICE_KEYS)} or None (all devices)")
        keys.append(_DEVICE_KEYS[d])
    return keys


class CustomOpDef:
    """An operator defined by ``custom_op``.  Calling it dispatches; ``.op`` is
    its ``OpOverload``; the ``register_*`` methods add kernels; ``_destroy()``
    undoes every registration and the definition."""

    def __init__(self, qualname: str, schema: str, fn: Callable, device_types, tags=()):
        ns, name = qualname.split("::")
        self._qualname, self._name, self._init_fn = qualname, name, fn
        self._lib = Library(ns, "FRAGMENT")
        self._handles: dict[object, RegistrationHandle] = {}
        try:
            self._lib.define(f"{name}{schema}", tags=tuple(tags))
            self._entry = registry.lookup(qualname)
            self.register_kernel(device_types, fn)
            if NON_DIFFERENTIABLE in self._entry.tags:
                self._register("Autograd", DispatchKey.Autograd, fallthrough_kernel, "non_differentiable")
        except BaseException:
            self._lib._destroy()
            raise
        _CUSTOM_OPS[qualname] = self
        self.__name__ = name
        self.__qualname__ = qualname
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    # -- calling and introspection
    def __call__(self, *args, **kwargs):
        return self._entry.entry(*args, **kwargs)

    @property
    def schema(self) -> FunctionSchema:
        return self._entry.schema

    @property
    def op(self) -> OpOverload:
        return overload_of(self._entry)

    _opoverload = op

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    # -- registrations
    def _register(self, slot, key: DispatchKey, fn, what: str) -> RegistrationHandle:
        old = self._handles.pop(slot, None)
        if old is not None:
            old.remove()
        h = self._entry.register(key, fn, debug=f"custom_op {self._qualname} {what}")
        self._handles[slot] = h
        return h

    def register_kernel(self, device_types, fn: Callable | None = None):
        """Register ``fn`` as the kernel for ``device_types`` ("cpu", "cuda", a
        list of them, or None for every backend), replacing an earlier one
        registered through this object.  Usable as a decorator; returns ``fn``."""
        if fn is None:
            return lambda f: self.register_kernel(device_types, f)
        if not callable(fn):
            raise ArgumentTypeError(f"register_kernel expects a callable, got {type(fn).__name__}")
        for key in _device_keys(device_types):
            self._register(key, key, _BackendKernel(fn), f"kernel {getattr(fn, '__name__', fn)}")
        return fn

    def register_autograd(self, backward: Callable, /, *, setup_context: Callable | None = None) -> None:
        """Make the op differentiable, with PyTorch's protocol:
        ``setup_context(ctx, inputs, output)`` runs after the forward (save
        what backward needs with ``ctx.save_for_backward``; ``inputs`` are the
        positional arguments), then ``backward(ctx, *grads)`` returns one
        gradient per positional input (None where there is none)."""
        if not callable(backward):
            raise ArgumentTypeError(f"register_autograd expects a backward function, got {type(backward).__name__}")
        if NON_DIFFERENTIABLE in self._entry.tags:
            raise RegistrationError(f"{self._qualname} is tagged {NON_DIFFERENTIABLE!r}; it cannot have an "
                                    f"autograd formula")
        if self.schema.is_mutable:
            raise RegistrationError(f"register_autograd does not support ops that mutate their inputs "
                                    f"({self.schema}); write a functional op (return a new Tensor)")
        if any(r.type.is_list for r in self.schema.returns):
            raise RegistrationError(f"register_autograd supports ops returning Tensors or tuples of Tensors, "
                                    f"not lists ({self.schema})")
        self._register("Autograd", DispatchKey.Autograd, _AutogradKernel(self._qualname, backward, setup_context),
                       "autograd")

    def register_autocast(self, device_type: str, cast_inputs) -> None:
        """Under ``dj.autocast(device_type)``, cast the op's floating-point tensor
        inputs to ``cast_inputs`` (a dtype) before running it."""
        from ..autocast import AutocastKernel
        from ..dtypes import as_dtype
        from ..keys import AUTOCAST_KEY_FOR_DEVICE
        if device_type not in AUTOCAST_KEY_FOR_DEVICE:
            raise InvalidArgumentError(f"register_autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        key = AUTOCAST_KEY_FOR_DEVICE[device_type]
        self._register(key, key, AutocastKernel.to_dtype(as_dtype(cast_inputs)), f"autocast to {cast_inputs}")

    def register_vmap(self, fn: Callable | None = None):
        """Register the op's batching rule (``torch.library.register_vmap``): under ``dj.func.vmap``,
        ``fn(info, in_dims, *args, **kwargs)`` gets the per-batch arguments (``in_dims``: each positional
        argument's batch dim, or None) and returns ``(output, out_dims)``.  Usable as a decorator."""
        if fn is None:
            return lambda f: self.register_vmap(f)
        from ..func.custom import CustomVmapKernel
        self._register("vmap", DispatchKey.Batched, CustomVmapKernel(self._qualname, fn), "vmap")
        return fn

    def register_fake(self, fn: Callable) -> Callable:
        """Register the fake (meta) kernel: same arguments as the kernel,
        returns tensors of the output's shape and dtype (small real tensors
        such as ``dj.empty(shape, dtype=...)`` will do).  It is the op's
        kernel at the Meta key, where ``dj.compile``'s tracer asks for output
        types (instead of running the kernel on placeholders) and ``opcheck``
        finds it.  A second call replaces it.  Usable as a decorator; returns
        ``fn``."""
        if not callable(fn):
            raise ArgumentTypeError(f"register_fake expects a callable, got {type(fn).__name__}")
        self._register("fake", DispatchKey.Meta, fn, f"fake {getattr(fn, '__name__', fn)}")
        return fn

    def _destroy(self) -> None:
        """Undo every registration, then the definition."""
        for h in reversed(list(self._handles.values())):
            h.remove()
        self._handles.clear()
        self._lib._destroy()
        if _CUSTOM_OPS.get(self._qualname) is self:
            del _CUSTOM_OPS[self._qualname]


def custom_op(qualname: str, fn: Callable | None = None, /, *, mutates_args: Iterable[str] | str,
              device_types: str | Iterable[str] | None = None, schema: str | None = None, tags=()):
    """Define an operator from a Python function, as ``torch.library.custom_op``.

    Args:
        qualname: "namespace::name"; the namespace may already exist.
        fn: the kernel (or use ``custom_op`` as a decorator).  Its type hints
            give the schema (see ``infer_schema``).
        mutates_args: names of the Tensor arguments the function writes to
            (``()`` for none; "unknown" for all).  ``opcheck`` verifies it.
        device_types: "cpu", "cuda", a list of them, or None (the kernel
            serves every backend: CompositeExplicitAutograd).
        schema: a schema string such as "(Tensor x) -> Tensor" instead of
            inferring one.
        tags: operator tags; ``"non_differentiable"`` makes autograd fall
            through (outputs never require grad).

    Without ``register_autograd`` the outputs of a call on inputs that
    require grad do not require grad, and a backward that needs them raises
    an error naming the op.

    >>> import dispatch_jit as dj
    >>> @dj.library.custom_op("doc_custom::scale", mutates_args=())
    ... def scale(x: dj.Tensor, factor: float = 2.0) -> dj.Tensor:
    ...     return x * factor
    >>> str(scale.schema)
    'doc_custom::scale(Tensor x, float factor=2.0) -> Tensor'
    >>> scale(dj.tensor([1.0, 2.0]))
    tensor([2., 4.])
    >>> scale.register_autograd(lambda ctx, g: (g * ctx.factor, None),
    ...                         setup_context=lambda ctx, inputs, output: setattr(ctx, "factor", inputs[1]))
    >>> x = dj.tensor([1.0, 2.0], requires_grad=True)
    >>> scale(x, 3.0).sum().backward(); x.grad
    tensor([3., 3.])
    >>> scale._destroy()
    """
    if fn is None:
        return lambda f: custom_op(qualname, f, mutates_args=mutates_args, device_types=device_types,
                                   schema=schema, tags=tags)
    if not isinstance(qualname, str) or qualname.count("::") != 1:
        raise InvalidArgumentError(f"custom_op expects a qualified name 'namespace::name', got {qualname!r}")
    ns, name = qualname.split("::")
    if not (ns.isidentifier() and name.isidentifier()):
        raise InvalidArgumentError(f"custom_op: {qualname!r}: namespace and name must be identifiers (no overload name)")
    if ns in _RESERVED_NAMESPACES:
        raise InvalidArgumentError(f"custom_op: the namespace '{ns}' is reserved for dispatch_jit's own operators; "
                         f"choose your own, e.g. 'myops::{name}'")
    if isinstance(mutates_args, str) and mutates_args != "unknown":
        raise SchemaInferenceError(f"custom_op {qualname}: mutates_args must be a collection of parameter names or "
                                   f"'unknown', not the string {mutates_args!r} (did you mean ({mutates_args!r},)?)")
    if schema is None:
        schema = infer_schema(fn, mutates_args=mutates_args)
    else:
        schema = schema[schema.index("("):] if "(" in schema else schema
        declared = {a.name for a in parse_schema(f"{name}{schema}").arguments if a.is_mutable}
        if mutates_args != "unknown" and declared != set(mutates_args):
            raise SchemaInferenceError(f"custom_op {qualname}: the schema {schema!r} mutates {sorted(declared)} "
                                       f"but mutates_args says {sorted(mutates_args)}")
    return CustomOpDef(qualname, schema, fn, device_types, tags)


_FAKES: dict[str, RegistrationHandle] = {}   # op name -> its register_fake registration (ops not made by custom_op)


def register_fake(op, fn: Callable | None = None):
    """Register ``fn`` as the fake (meta) kernel of ``op`` (a qualified name,
    an OpOverload or a CustomOpDef): its kernel at the Meta key, replacing one
    registered earlier through ``register_fake``.  Usable as a decorator;
    returns ``fn``."""
    if fn is None:
        return lambda f: register_fake(op, f)
    if isinstance(op, CustomOpDef):
        return op.register_fake(fn)
    entry = _entry_of(op)
    if entry.name in _CUSTOM_OPS:
        return _CUSTOM_OPS[entry.name].register_fake(fn)
    if not callable(fn):
        raise ArgumentTypeError(f"register_fake expects a callable, got {type(fn).__name__}")
    old = _FAKES.pop(entry.name, None)
    if old is not None:
        old.remove()
    _FAKES[entry.name] = entry.register(DispatchKey.Meta, fn, debug=f"register_fake {getattr(fn, '__name__', fn)}")
    return fn


def _entry_of(op) -> registry.OperatorEntry:
    from ..introspect import _op
    if isinstance(op, CustomOpDef):
        return op._entry
    return _op(op)
