"""The optimizers' fused updates as ops, PyTorch's ``_fused_sgd_``, ``_fused_adam_`` and ``_fused_adamw_``:
one call updates lists of parameters and their state in place (tag ``inplace``).

Each kernel computes the numbers of the update from its arguments as dj.optim computed them
(Adam's bias corrections per parameter, ``1 - lr * weight_decay``, ...), then runs one of two forms
with the same bits: the multi-tensor Numba loop (foreach.py) where every parameter, gradient
and state tensor is a C-contiguous CPU float32/float64 array of one dtype (complex64/complex128
too: the loop updates their real views, as PyTorch does), else per tensor with dispatch_jit ops
(``sgd_ops``, ``adam_ops``: CUDA, float16, non-contiguous or mixed tensors), which is also what a
``@dj.compile``d whole step records.

The step counts are numbers (``float[] state_steps``), where PyTorch's are tensors: dj.optim
keeps them as Python ints in its state (``state_dict()`` unchanged).  ``grad_scale`` and
``found_inf`` (the AMP grad scaler's) are not supported: passing one raises.

>>> import dispatch_jit as dj
>>> p, g = dj.ones(3), dj.full((3,), 2.0)
>>> dj.ops.aten._fused_sgd_([p], [g], [], weight_decay=0.0, momentum=0.0, lr=0.5, dampening=0.0,
...                         nesterov=False, maximize=False, is_first_step=False)
>>> p
tensor([0., 0., 0.])
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.autograd.grad_mode import no_grad
from dispatch_jit.errors import InvalidArgumentError
from dispatch_jit.ops import entries
from dispatch_jit.tensor import bump_version, version_box, wrap
from dispatch_jit.writes import before_write

from . import foreach

__all__ = ["SCHEMAS", "KERNELS", "fast_path", "written", "sgd_ops", "adam_ops", "real_parts"]

_SCALE = "Tensor? grad_scale=None, Tensor? found_inf=None"
_ADAM = ("(Tensor(a!)[] self, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
         "Tensor(d!)[] max_exp_avg_sqs, float[] state_steps, *, float lr, float beta1, float beta2, "
         f"float weight_decay, float eps, bool amsgrad, bool maximize, {_SCALE}) -> ()")
SCHEMAS = [
    ("_fused_sgd_(Tensor(a!)[] self, Tensor[] grads, Tensor(b!)[] momentum_buffer_list, *, float weight_decay, "
     f"float momentum, float lr, float dampening, bool nesterov, bool maximize, bool is_first_step, {_SCALE}) -> ()"),
    "_fused_adam_" + _ADAM,
    "_fused_adamw_" + _ADAM,
]

A = entries("aten")    # the ops are defined after this module is imported
_LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# a complex tensor's real view (PyTorch's view_as_real): its parts, interleaved, as floats
_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def fast_path(params: list, grads: list, state: list = (), real_view: bool = False) -> bool:
    """Whether ``params`` with their ``grads`` (and the ``state`` tensors the loop also writes, list
    after list) can go through one multi-tensor loop: C-contiguous CPU float32/float64 parameters
    of one dtype whose gradients and state have it too, each of its parameter's shape, the state
    writeable (after ``model.double()`` the state keeps its old dtype: the per-tensor form then
    casts, as PyTorch's does).  ``real_view``: complex64/complex128 too, as their real views."""
    if not params:
        return False
    dt = params[0]._data.dtype
    if dt not in _LOOP_DTYPES and not (real_view and dt in _REAL):
        return False
    for p, g in zip(params, grads):
        a, b = p._data, g._data
        if a.__class__ is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous \
                or b.__class__ is not np.ndarray or b.dtype != dt or b.shape != a.shape:
            return False
    k = len(params)
    for j, t in enumerate(state):
        a = t._data
        if a.__class__ is not np.ndarray or a.dtype != dt or not a.flags.c_contiguous \
                or a.shape != params[j % k]._data.shape or not a.flags.writeable:
            return False
    return True


def _flat(t) -> np.ndarray:
    """``t``'s data as a 1-D array (a view for a C-contiguous tensor, a copy otherwise: gradients
    only), of a complex tensor its real view (parts interleaved, as floats)."""
    a = t._data.reshape(-1)
    return a.view(_REAL[a.dtype]) if a.dtype in _REAL else a


def written(tensors) -> None:
    """Before an in-place loop writes ``tensors``: run any pending compiled-mode graph that reads
    them (writes.py's observers); after: bump their version counters."""
    for t in tensors:
        before_write(t)
    for t in tensors:
        bump_version(t)


def _check(op: str, lists: dict, grad_scale, found_inf) -> None:
    if grad_scale is not None or found_inf is not None:
        raise InvalidArgumentError(f"{op}: grad_scale and found_inf (the AMP grad scaler's) are not supported; "
                                   f"unscale the gradients before the step and skip it where they are not finite")
    (first, n), *rest = [(k, len(v)) for k, v in lists.items()]
    for name, m in rest:
        if m != n and not (m == 0 and name in ("momentum_buffer_list", "max_exp_avg_sqs")):
            raise InvalidArgumentError(f"{op}: {name} has {m} tensors but {first} has {n}; pass one per "
                                       f"parameter (an empty list where the update keeps none)")


# -- SGD ------------------------------------------------------------------------------------------
def _fused_sgd_(params, grads, bufs, *, weight_decay, momentum, lr, dampening, nesterov, maximize, is_first_step,
                grad_scale=None, found_inf=None):
    _check("_fused_sgd_", {"self": params, "grads": grads, "momentum_buffer_list": bufs}, grad_scale, found_inf)
    if momentum != 0 and len(bufs) != len(params):
        raise InvalidArgumentError("_fused_sgd_: momentum != 0 updates a momentum buffer per parameter; pass "
                                   "momentum_buffer_list (allocated by the caller, written at the first step)")
    if not params:
        return
    params, grads, bufs = list(params), list(grads), list(bufs) if momentum != 0 else []
    numbers = (lr, momentum, 1.0 - dampening, weight_decay)
    if fast_path(params, grads, bufs):
        written(params + bufs)
        empty = _flat(params[0])[:0]
        foreach.step("sgd", [_flat(p) for p in params], [_flat(g) for g in grads],
                     [_flat(b) for b in bufs] if bufs else [empty] * len(params), params[0]._data.dtype,
                     numbers + (nesterov, maximize, is_first_step))
        return
    flags = (weight_decay != 0, momentum != 0, nesterov, maximize, is_first_step)
    with no_grad():
        for i, (p, g) in enumerate(zip(params, grads)):
            sgd_ops(p, g, bufs[i] if bufs else None, *numbers, *flags)


def sgd_ops(p, g, buf, lr, momentum, damp1, wd, decay, has_momentum, nesterov, maximize, first):
    """One parameter's update with dispatch_jit ops, in foreach._sgd's order of roundings, writing
    ``p`` and ``buf`` in place.  The flags (``decay``: wd != 0, ``has_momentum``: momentum != 0)
    are read apart from the numbers, which a compiled step passes as runtime scalars (never read
    in Python)."""
    d = A.neg(g) if maximize else g
    if decay:
        d = A.add(d, A.mul(p, wd))
    if has_momentum:
        if first:
            buf.copy_(d)
        else:
            buf.copy_(A.add(A.mul(buf, momentum), A.mul(d, damp1)))
        d = A.add(d, A.mul(buf, momentum)) if nesterov else buf
    p.copy_(A.sub(p, A.mul(d, lr)))


# -- Adam, AdamW ----------------------------------------------------------------------------------
def _adam_kernel(name: str, decoupled: bool):
    def kernel(params, grads, avgs, sqs, maxs, state_steps, *, lr, beta1, beta2, weight_decay, eps, amsgrad,
               maximize, grad_scale=None, found_inf=None):
        _check(name, {"self": params, "grads": grads, "exp_avgs": avgs, "exp_avg_sqs": sqs,
                      "max_exp_avg_sqs": maxs, "state_steps": state_steps}, grad_scale, found_inf)
        if amsgrad and len(maxs) != len(params):
            raise InvalidArgumentError(f"{name}: amsgrad=True updates max_exp_avg_sqs; pass one per parameter")
        if not params:
            return
        params, grads, avgs, sqs, maxs = list(params), list(grads), list(avgs), list(sqs), list(maxs) if amsgrad else []
        # the numbers as dj.optim's step_values computes them (Python floats, then the dtype's)
        step_size = [lr / (1 - beta1 ** t) for t in state_steps]
        bc2_sqrt = [math.sqrt(1 - beta2 ** t) for t in state_steps]
        shared = (1 - lr * weight_decay, 1 - beta1, beta2, 1 - beta2, eps, weight_decay)
        flags = (decoupled, amsgrad, maximize)
        if fast_path(params, grads, avgs + sqs + maxs, real_view=True):
            written(params + avgs + sqs + maxs)
            empty = _flat(params[0])[:0]
            dt = params[0]._data.dtype
            foreach.step("adam", [_flat(p) for p in params], [_flat(g) for g in grads], [_flat(t) for t in avgs],
                         [_flat(t) for t in sqs], [_flat(t) for t in maxs] if amsgrad else [empty] * len(params),
                         _REAL.get(dt, dt), (step_size, bc2_sqrt, *shared, *flags))
            return
        with no_grad():
            for i, (p, g) in enumerate(zip(params, grads)):
                state = [avgs[i], sqs[i]] + ([maxs[i]] if amsgrad else [])
                # a complex parameter is updated as its real view, as PyTorch's is (view_as_real): its
                # real and imaginary parts are two independent float parameters, not one complex number
                for part in (real_parts(p, g, state) if p.is_complex() else ((p, g, state),)):
                    adam_ops(*part, step_size[i], bc2_sqrt[i], *shared, weight_decay != 0, *flags)
    kernel.__name__ = kernel.__qualname__ = name
    return kernel


def adam_ops(p, g, state, step_size, bc2_sqrt, shrink, beta1c, beta2, beta2c, eps, wd, decay, decoupled, amsgrad,
             maximize):
    """One parameter's update with dispatch_jit ops, in foreach._adam's order of roundings; ``state``:
    ``[exp_avg, exp_avg_sq]`` (+ ``max_exp_avg_sq`` with amsgrad), written in place.  The flags
    (``decay``: wd != 0) are read apart from the numbers, which a compiled step passes as runtime
    scalars (never read in Python)."""
    if maximize:
        g = A.neg(g)
    if decoupled:
        if decay:
            p.copy_(A.mul(p, shrink))
    elif decay:
        g = A.add(g, A.mul(p, wd))
    m, v = state[0], state[1]
    m.copy_(A.add(m, A.mul(A.sub(g, m), beta1c)))
    v.copy_(A.add(A.mul(v, beta2), A.mul(A.mul(g, g), beta2c)))
    if amsgrad:
        vm = state[2]
        vm.copy_(A.maximum(vm, v))
        v = vm
    denom = A.add(A.div(A.sqrt(v), bc2_sqrt), eps)
    p.copy_(A.sub(p, A.mul(A.div(m, denom), step_size)))


def real_parts(p, g, state: list) -> tuple:
    """The real view of a complex CPU parameter ``p``, its gradient and its ``state`` tensors, as two
    float updates: ``(p, g, state)`` of the real parts, then of the imaginary parts, each a tensor
    over the complex tensor's own memory (a NumPy view, written in place) sharing its version
    counter."""
    ts = [p, g] + list(state)
    return tuple((views[0], views[1], views[2:]) for views in
                 ([_over(t, getattr(t._data, name)) for t in ts] for name in ("real", "imag")))


def _over(t, a):
    """A plain tensor over ``a``, a NumPy view of ``t``'s memory, sharing ``t``'s version counter."""
    v = wrap(a)
    v.__dict__["_vc"] = version_box(t)
    return v


_KERNELS = {"_fused_sgd_": _fused_sgd_, "_fused_adam_": _adam_kernel("_fused_adam_", False),
            "_fused_adamw_": _adam_kernel("_fused_adamw_", True)}
# CUDA: the per-tensor form (fast_path is False for device arrays), as the optimizers' CUDA path was
KERNELS = {"CPU": dict(_KERNELS), "CUDA": dict(_KERNELS)}
