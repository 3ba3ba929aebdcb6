"""``dj.nn.Module`` and ``dj.nn.Parameter``, as PyTorch's.

A Module registers what is assigned to it: a ``Parameter`` in ``_parameters``, a
Module in ``_modules``, a tensor given to ``register_buffer`` in ``_buffers``; the
walks go through them in registration order, depth first: ``named_parameters`` and
``named_modules`` meet each object once, ``state_dict`` lists every name it has (a
module used twice gives its tensors under both paths), as PyTorch's.

A ``Parameter`` is a plain ``dj.Tensor`` that requires grad and is marked as a
parameter (``isinstance(p, dj.nn.Parameter)`` is True): not a subclass, because
the dispatcher's hot path, autograd's saved-tensor checks and the compiled mode's
recorders test ``x.__class__ is Tensor`` and must keep treating parameters as the
tensors they are.

>>> import dispatch_jit as dj
>>> class Affine(dj.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.w = dj.nn.Parameter(dj.ones(2))
...         self.register_buffer("count", dj.zeros(()))
...     def forward(self, x):
...         return x * self.w
>>> m = Affine()
>>> [n for n, _ in m.named_parameters()], list(m.state_dict())
(['w'], ['w', 'count'])
>>> m(dj.tensor([1.0, 2.0]))
tensor([1., 2.], grad_fn=<MulBackward>)
"""

from __future__ import annotations

import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Iterator, NamedTuple

from ..autograd.grad_mode import no_grad
from ..autograd.methods import zero_grads
from ..creation import tensor as _tensor
from ..dtypes import as_dtype, float16, float32, float64
from ..errors import ArgumentTypeError, SchemaError, StateDictError
from ..tensor import Tensor
from .hooks import Registry, add_hook, call_with_hooks

__all__ = ["Module", "Parameter", "IncompatibleKeys"]


class _ParameterMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.__dict__.get("_is_param", False)


class Parameter(metaclass=_ParameterMeta):
    """``Parameter(data, requires_grad=True)``: ``data`` (its storage, not a copy), cut from
    any graph, marked as a parameter and requiring grad by default.

    >>> import dispatch_jit as dj
    >>> p = dj.nn.Parameter(dj.zeros(2))
    >>> p.requires_grad, isinstance(p, dj.nn.Parameter), isinstance(dj.zeros(2), dj.nn.Parameter)
    (True, True, False)
    """

    def __new__(cls, data=None, requires_grad: bool = True):
        t = (data if data is not None else _tensor([])).detach()
        t.__dict__["_is_param"] = True
        if requires_grad:
            t.requires_grad_(True)
        return t


def _floating_to(dtype):
    """A tensor cast to ``dtype`` if it is floating-point, else as it is (Module's casts)."""
    return lambda t: t.to(dtype) if t.is_floating_point() else t


class IncompatibleKeys(NamedTuple):
    missing_keys: list
    unexpected_keys: list


class Module:
    """Base class of every layer and model: assign Parameters and Modules as attributes in
    ``__init__``, write ``forward``, call the module."""

    training: bool
    # read-only defaults: the first registration gives the module a dict of its own (hooks.py)
    _forward_pre_hooks = types.MappingProxyType({})
    _forward_hooks = types.MappingProxyType({})

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        # Registry: every change bumps the epoch that compiled functions check (nn/hooks.py)
        d["_parameters"] = Registry()
        d["_buffers"] = Registry()
        d["_non_persistent"] = set()
        d["_modules"] = Registry()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks:
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # -- hooks -----------------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook):
        """Call ``hook(module, args)`` before each ``forward``; a non-None result replaces the
        positional arguments (a single value is wrapped in a tuple).  Returns a handle whose
        ``remove()`` unregisters it.  A compiled function that calls the module retraces when a
        hook is registered or removed.

        >>> import dispatch_jit as dj
        >>> m = dj.nn.Identity()
        >>> h = m.register_forward_pre_hook(lambda mod, args: args[0] * 2)
        >>> m(dj.tensor([1.0, 2.0]))
        tensor([2., 4.])
        >>> h.remove(); m(dj.tensor([1.0, 2.0]))
        tensor([1., 2.])
        """
        return add_hook(self, "_forward_pre_hooks", hook, "register_forward_pre_hook")

    def register_forward_hook(self, hook):
        """Call ``hook(module, args, output)`` after each ``forward``; a non-None result replaces
        the output.  Returns a handle whose ``remove()`` unregisters it.

        >>> import dispatch_jit as dj
        >>> m = dj.nn.Identity()
        >>> h = m.register_forward_hook(lambda mod, args, out: out + 1)
        >>> m(dj.tensor([1.0, 2.0]))
        tensor([2., 3.])
        """
        return add_hook(self, "_forward_hooks", hook, "register_forward_hook")

    # -- registration ----------------------------------------------------------------------------------
    def _registries(self) -> tuple:
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(f"cannot assign to {type(self).__name__} before Module.__init__() call")
        return d["_parameters"], d["_buffers"], d["_modules"]

    def __setattr__(self, name: str, value) -> None:
        params, buffers, modules = self._registries()
        if isinstance(value, Parameter):
            self._forget(name)
            params[name] = value
        elif isinstance(value, Module):
            self._forget(name)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise SchemaError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                  f"(dj.nn.Parameter or None expected)")
            params[name] = None
        elif name in modules:
            if value is not None:
                raise SchemaError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                  f"(dj.nn.Module or None expected)")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise SchemaError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                  f"(dj.Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        self.__dict__.pop(name, None)
        for reg in self._registries():
            reg.pop(name, None)
        self._non_persistent.discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for reg in self._registries():
            if name in reg:
                del reg[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        """Add ``param`` (a Parameter, or None) under ``name``."""
        if param is not None and not isinstance(param, Parameter):
            raise SchemaError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                              f"(dj.nn.Parameter or None required)")
        self._forget(name)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (in ``state_dict`` unless not ``persistent``)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise SchemaError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                              f"(dj.Tensor or None required)")
        self._forget(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module) -> None:
        if module is not None and not isinstance(module, Module):
            raise SchemaError(f"{type(module).__name__} is not a Module subclass")
        self._forget(name)
        self._modules[name] = module

    register_module = add_module

    # -- walks -----------------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True) -> Iterator:
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator:
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator:
        for _, m in self.named_children():
            yield m

    def _named(self, reg: str, prefix: str, recurse: bool, remove_duplicate: bool = True) -> Iterator:
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, v in getattr(m, reg).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield (f"{mp}.{name}" if mp else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator:
        return self._named("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator:
        return self._named("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes and gradients ---------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise SchemaError(f"train: mode is expected to be a bool, got {type(mode).__name__}")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's ``.grad``: to None (the default, as PyTorch), or to zeros in place
        (the same tensor, as PyTorch's grad.zero_())."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- conversion ------------------------------------------------------------------------------------
    def to(self, *args, **kwargs) -> "Module":
        """Move and/or cast every parameter and buffer in place, as PyTorch's: ``m.to(dj.float64)``,
        ``m.to("cuda")``, ``m.to("cuda", dj.float16)``, ``m.to(tensor)`` (its device and dtype).
        A dtype applies to floating-point tensors only (integer buffers keep theirs).  Each
        parameter stays the same object (its storage is replaced, as ``param.data = ...``), so an
        optimizer made before still updates it; its ``.grad`` is converted too.

        >>> import dispatch_jit as dj
        >>> m = dj.nn.Linear(2, 1)
        >>> opt = dj.optim.SGD(m.parameters(), lr=0.1)
        >>> m.to(dj.float64).weight.dtype == dj.float64, opt.param_groups[0]["params"][0] is m.weight
        (True, True)
        """
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        if kwargs:
            raise SchemaError(f"Module.to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, str) or type(a).__name__ == "device":
                device = a
            else:
                dtype = a
        if dtype is not None and not as_dtype(dtype).is_floating_point:
            raise SchemaError(f"Module.to() only accepts floating point dtypes, but got {dtype}; integer "
                              f"tensors keep their dtype")

        cast = (lambda t: t) if dtype is None else _floating_to(dtype)
        return self._apply(cast if device is None else lambda t: cast(t.to(device)))

    def float(self) -> "Module":
        """Cast floating-point parameters and buffers to float32."""
        return self._apply(_floating_to(float32))

    def double(self) -> "Module":
        """Cast floating-point parameters and buffers to float64."""
        return self._apply(_floating_to(float64))

    def half(self) -> "Module":
        """Cast floating-point parameters and buffers to float16."""
        return self._apply(_floating_to(float16))

    def cpu(self) -> "Module":
        """Move every parameter and buffer to host memory."""
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> "Module":
        """Move every parameter and buffer to a CUDA device (``cuda:0`` by default)."""
        return self._apply(lambda t: t.cuda(device))

    def _apply(self, fn) -> "Module":
        """Convert each parameter (in place: its storage, then its ``.grad``'s) and each buffer
        (replaced) of every module with ``fn``."""
        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is None:
                        continue
                    new = fn(p)
                    if new is not p:
                        p.data = new
                    g = p.grad
                    if g is not None and (new_g := fn(g)) is not g:
                        p.grad = new_g
                bufs = m._buffers
                for name, b in bufs.items():
                    if b is not None:
                        bufs[name] = fn(b)
        return self

    # -- state -----------------------------------------------------------------------------------------
    def _state_items(self, prefix: str) -> Iterator:
        """``(key, module, registry, name, tensor)`` for each parameter and persistent buffer, by every
        path: a module reachable twice (``Sequential(lin, lin)``) is listed under both, as PyTorch's."""
        for reg in ("_parameters", "_buffers"):
            for name, v in getattr(self, reg).items():
                if v is not None and not (reg == "_buffers" and name in self._non_persistent):
                    yield prefix + name, self, reg, name, v
        for name, m in self._modules.items():
            if m is not None:
                yield from m._state_items(prefix + name + ".")

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (detached unless ``keep_vars``), each
        path of a shared module listed, as PyTorch's: ``parameters()`` yields a tensor once,
        ``state_dict()`` once per name it has.

        >>> import dispatch_jit as dj
        >>> lin = dj.nn.Linear(2, 2)
        >>> list(dj.nn.Sequential(lin, lin).state_dict()), len(list(dj.nn.Sequential(lin, lin).parameters()))
        (['0.weight', '0.bias', '1.weight', '1.bias'], 2)
        """
        out = OrderedDict() if destination is None else destination
        for key, _, _, _, v in self._state_items(prefix):
            out[key] = v if keep_vars else v.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
        """Load ``state_dict``'s tensors into the parameters and buffers of the same names, as
        PyTorch's.  By default they are copied in place (under no_grad, cast to each parameter's
        dtype: optimizers keep their references); with ``assign=True`` the module takes the given
        tensors themselves (their dtype and device; a parameter stays a ``Parameter`` and keeps
        its ``requires_grad``), so an optimizer should be made after.  With ``strict`` a missing or
        unexpected key is an error listing them; a shape mismatch always is.

        >>> import dispatch_jit as dj
        >>> m = dj.nn.Linear(2, 1)
        >>> w = dj.ones(1, 2, dtype=dj.float64)
        >>> _ = m.load_state_dict({"weight": w, "bias": dj.zeros(1)}, assign=True)
        >>> m.weight.dtype, m.weight.requires_grad, isinstance(m.weight, dj.nn.Parameter)
        (dispatch_jit.float64, True, True)
        """
        if not isinstance(state_dict, Mapping):
            raise ArgumentTypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        own = list(self._state_items(""))
        keys = {item[0] for item in own}
        missing = [k for k, *_ in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in keys]
        errors = []
        for k, _, _, _, v in own:
            if k in state_dict:
                src = state_dict[k]
                if not isinstance(src, Tensor):
                    errors.append(f'While copying the parameter named "{k}", expected a dj.Tensor, got '
                                  f'{type(src).__name__}.')
                elif tuple(src.shape) != tuple(v.shape):
                    errors.append(f"size mismatch for {k}: copying a param with shape {tuple(src.shape)} from "
                                  f"checkpoint, the shape in current model is {tuple(v.shape)}.")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for k, m, reg, name, v in own:
                if k not in state_dict:
                    continue
                src = state_dict[k]
                if not assign:
                    v.copy_(src)
                elif reg == "_parameters":
                    if isinstance(src, Parameter):
                        src.requires_grad_(v.requires_grad)
                    else:
                        src = Parameter(src, requires_grad=v.requires_grad)
                    m._parameters[name] = src
                else:
                    m._buffers[name] = src
        return IncompatibleKeys(missing, unexpected)

    # -- printing --------------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

