"""An optimizer's update in compiled mode: the fused update ops (``_fused_sgd_``, ``_fused_adam_``,
``_fused_adamw_``: kernels/optim/, which dj.optim's ``step()`` calls once per group) recorded as
one step of the pending graph that holds the forward and the backward, and run with them as one
plan.

``install`` registers their kernels at the Tracer key (the compiler's key): while the thread
records in compiled mode (else they are any op's, ``tracer_fallback``), ``StepRecorder.run``
decides whether the call can be recorded: exactly where the eager kernel would run its
multi-tensor loop (foreach.py) and nothing could observe a difference (C-contiguous CPU
float32/float64 parameters of one dtype, gradients of that dtype and shape, state likewise, none
of them a view of another tensor, no storage handed out to NumPy, distinct storages, not the
step that creates the state).  Views of a parameter (``w.view(...)``, ``w.t()`` in the forward)
are no reason to fall back: the loop writes the parameter's own memory, as eager mode's does,
after every step of the plan that reads them.  An exported storage is: the graph reads such an
input from a snapshot (watch.py).  Then the call becomes one record ``(spec, out, *tensors,
*numbers)`` whose node runs that loop (``_Loop``):

* its numbers (the learning rate, momentum, betas, Adam's bias corrections per parameter, ...)
  are runtime scalars of the plan (``Spec``'s ``("s", i)`` slots), so a learning-rate schedule
  reuses one plan; its flags (nesterov, maximize, amsgrad, ...) are part of the op, so of the key;
* its one value is a 0-d placeholder, held until the flush: that keeps the record live (a flush
  computes only what is referenced) and orders nothing else: the loop writes the parameters and
  the state in place, as eager mode's loop does, after every other step of the plan has read
  them (it is recorded last, and reads the gradients);
* interpreted, the plan runs it through ``foreach.step`` itself; the plan function (run/function.py)
  calls the same njit loop inside its one compiled function (``_rule``: the tuples of flat
  arrays, padded as foreach pads them, and each number cast to the dtype as foreach casts it),
  so the bits are eager mode's either way.

Before the loop is recorded, the pending graphs of other threads that read what it writes run
(as the eager kernel's ``written()`` runs them; the kernel is marked ``runs_write_observers``, so
the dispatcher does not run this thread's graph first).  The update is the sync point, as
``xm.mark_step()`` is torch_xla's: right after the record, this thread's graph runs once (forward
tail, backward, ``.grad``, the update: one plan, one compiled function after a few steps) and each
written tensor gets one version bump, as from eager mode's loop.  A call that cannot be recorded
first runs the graph, then the eager kernel; ``lazy_info()`` counts recorded updates and
fallbacks (``steps_recorded``, ``step_fallbacks``), with the last fallback's reason.
"""

from __future__ import annotations

import math

import numpy as np

from dispatch_jit.kernels.optim import KERNELS, foreach
from dispatch_jit.keys import DispatchKey
from dispatch_jit.ops import overload_of
from dispatch_jit.registry import lookup
from dispatch_jit.tensor import Tensor, bump_version, wrap

from ..graph.ir import TensorType, is_runtime_scalar
from ..run.call_rules import HELPERS, RULES, RUNTIME_READERS
from ..trace.fallback import tracer_fallback
from ..trace.symbolic import _state
from .encode import I64, Spec, out_sig, sig_type
from .layout import FIRST_SLOT
from .record import LazyRecorder
from .state import state as state_
from .tensor import SLOT_DATA, LazyTensor, Pending, get_slot
from .watch import exported_storages, is_exported, pending_readers, storage_root

__all__ = ["StepRecorder", "STEP", "install"]

_LOOP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NAME = "optim::foreach_"       # + the loop's name: the node's op name (planops.RULES)


class _Loop:
    """The op of one recorded multi-tensor loop: ``foreach.step(loop, ...)`` over ``n`` tensors
    per list (``lists``: each list's length, n or 0: an absent list, padded with empty arrays),
    its numbers as arguments after the tensors, its flags fixed.  Called by the plan's eager
    step (interpreted runs) with the tensors and numbers; returns the 0-d placeholder."""

    def __init__(self, loop: str, n: int, dtype, lists: tuple, flags: tuple):
        self.loop, self.n, self.dtype, self.lists, self.flags = loop, n, dtype, lists, flags
        self.kinds = foreach.SCALARS[loop]

    def name(self) -> str:
        return _NAME + self.loop

    def __repr__(self) -> str:
        return f"{self.name()}[{self.n} x {self.dtype}]"

    def scalars(self, numbers) -> tuple:
        """foreach.step's scalars from the record's numbers (per-tensor numbers as lists)."""
        out, k, flags = [], 0, iter(self.flags)
        for kind in self.kinds:
            if kind == "l":
                out.append(list(numbers[k:k + self.n]))
                k += self.n
            elif kind == "n":
                out.append(numbers[k])
                k += 1
            else:
                out.append(next(flags))
        return tuple(out)

    def __call__(self, *args):
        nt = sum(self.lists)
        tensors, empty = args[:nt], np.empty(0, self.dtype)
        lists, k = [], 0
        for m in self.lists:
            lists.append([t._data.reshape(-1) for t in tensors[k:k + m]] or [empty] * self.n)
            k += m
        foreach.step(self.loop, *lists, self.dtype, self.scalars(args[nt:]))
        return wrap(np.zeros((), self.dtype))


def _rule(node, site):
    """The plan function's call of the loop (planops.RULES): what ``foreach.step`` passes it, built
    in the function's source from the operands' arrays and the runtime scalars ``r<i>``."""
    op = node.op
    nt = sum(op.lists)
    tensors, numbers = node.args[:nt], node.args[nt:]
    views = getattr(site, "views", None) or {}
    for v in tensors:
        a = site.array(v)
        if a.dtype != op.dtype or not a.flags.c_contiguous or v.id in views:
            return f"{op.name()}: an operand of {a.dtype}, not a C-contiguous {op.dtype} array"
    size, dt = foreach.bucket(op.n), op.dtype.name
    pad = site.scratch((0,), op.dtype)
    args, k = [], 0
    for m in op.lists:
        flat = [f"{site.name(v)}.reshape(-1)" for v in tensors[k:k + m]]
        args.append("(" + ", ".join(flat + [pad] * (size - len(flat))) + ",)")
        k += m
    args.append(str(op.n))
    lines, k, flags = [], 0, iter(op.flags)

    def number(x) -> str:
        return f"r{x.index}" if is_runtime_scalar(x) else repr(x)
    for kind in op.kinds:
        if kind == "l":           # one number per tensor: an array of the dtype, as foreach fills it
            per = site.scratch((size,), op.dtype)
            lines += [f"{per}[{j}] = {number(x)}" for j, x in enumerate(numbers[k:k + op.n])]
            args.append(per)
            k += op.n
        elif kind == "n":
            args.append(f"np.{dt}({number(numbers[k])})")
            k += 1
        else:
            args.append(repr(bool(next(flags))))
    return lines + [f"_optim_{op.loop}({', '.join(args)})"]


def _plain_reason(t, what: str, dt, shape, written: bool = True) -> str:
    """Why the computed tensor ``t`` (a parameter, its state, a gradient) keeps the loop out of the
    graph, or "".  A gradient is only read (any layout: the loop reads a copy, as eager's does)."""
    if t.__class__ is not Tensor:
        return f"{what} is a {type(t).__name__}, not a plain dense tensor"
    a = SLOT_DATA.__get__(t, Tensor)
    if a.__class__ is not np.ndarray:
        return f"{what} is on {t.device} (the loop is recorded for CPU tensors)"
    if a.dtype not in _LOOP_DTYPES:
        return f"{what} is {a.dtype} (the loop is recorded for float32/float64)"
    if dt is not None and (a.dtype != dt or a.shape != shape):
        return f"{what} is {a.dtype} of shape {a.shape}, its parameter {dt} of shape {shape}"
    if not written:
        return ""
    if not a.flags.c_contiguous:
        return f"{what} is not C-contiguous"
    if t.__dict__.get("_base") is not None:
        return f"{what} is a view of another tensor"
    if is_exported(storage_root(a)):
        return f"{what}'s storage was handed out to NumPy (.numpy(), __array__)"
    return ""


def _written_ok(t, a, dt) -> bool:
    """The common case of a written tensor, in a few attribute reads (the layout is the signature's
    bit); False: look closely (``_plain_reason``)."""
    if a.__class__ is not np.ndarray or a.dtype is not dt and a.dtype != dt or not t._sig & 1:
        return False
    return t.__dict__.get("_base") is None


def unrecordable(r, params: list, grads: list, tensors: list) -> str:
    """Why the loop over ``params`` (with their ``grads``) writing them and ``tensors`` (their
    optimizer state, list after list) cannot be recorded into ``r``'s graph, or "" (the common
    case costs a few attribute reads per tensor; whatever looks unusual is looked at closely)."""
    get = SLOT_DATA.__get__
    p0 = params[0]
    dt = get(p0, Tensor).dtype if p0.__class__ is Tensor and get(p0, Tensor).__class__ is np.ndarray else None
    if dt not in _LOOP_DTYPES:
        return _plain_reason(p0, "a parameter", None, None)
    arrays, owned, shapes = set(), True, []
    for p, g in zip(params, grads):
        a = get(p, Tensor) if p.__class__ is Tensor else None
        if not _written_ok(p, a, dt):
            why = _plain_reason(p, "a parameter", None, None)
            if why or a.dtype != dt:
                return why or "a group with parameters of several dtypes"
        if g.__class__ is LazyTensor:
            z = get(g, Tensor)
            if z.__class__ is not Pending or z.recorder is not r:
                return "a gradient is pending in another thread's graph (or its graph failed)"
            if z.type.dtype.np != dt or z.shape != a.shape:
                return f"a gradient of {z.type.dtype.np} of shape {z.shape}, its parameter {dt} of shape {a.shape}"
        else:
            why = _plain_reason(g, "a gradient", dt, a.shape, written=False)
            if why:
                return why
        owned = owned and a.base is None
        arrays.add(id(a))
        shapes.append(a.shape)
    k = len(params)
    for j, t in enumerate(tensors):
        a = get(t, Tensor) if t.__class__ is Tensor else None
        if not _written_ok(t, a, dt) or a.shape != shapes[j % k]:
            why = _plain_reason(t, "an optimizer state tensor", dt, shapes[j % k])
            if why:
                return why
        owned = owned and a.base is None
        arrays.add(id(a))
    ts = params + tensors
    if exported_storages:
        for t in ts:
            if is_exported(storage_root(get(t, Tensor))):
                return _plain_reason(t, "a parameter or its state", None, None)
    # arrays that own their memory overlap only if they are one; others: by the memory's owner
    if len(arrays) != len(ts) or not owned and len({id(storage_root(get(t, Tensor))) for t in ts}) != len(ts):
        return "parameters or optimizer state share memory"
    return ""


def _number(x):
    """A loop's number as a runtime scalar takes it (a Python float or int), or None."""
    if x.__class__ is float or x.__class__ is int:
        return x if x.__class__ is float or I64[0] <= x <= I64[1] else None
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (float, int, np.floating, np.integer)):
        return None
    return _number(float(x) if isinstance(x, (float, np.floating)) else int(x))


_SPECS: dict = {}     # (loop, n, dtype, list lengths, flags) -> its records' spec


class StepRecorder:
    """Compiled mode's kernel of the fused update ops at the Tracer key (see the module docstring)."""

    def run(self, name: str, kernel, args: tuple, kwargs: dict):
        """One call of op ``name`` (``kernel``: its eager kernel) while this thread records: its loop
        recorded and the graph run, or (what cannot be recorded) the graph run, then ``kernel``."""
        r = _state.tracer
        b = _bind(name, args, kwargs)
        params, grads = list(b["self"]), list(b["grads"])
        if not params or b["grad_scale"] is not None or b["found_inf"] is not None:
            return kernel(*args, **kwargs)       # nothing to do, or its error
        if name == "_fused_sgd_":
            state = list(b["momentum_buffer_list"]) if b["momentum"] != 0 else []
            why = "the first step creates the momentum buffers" if b["is_first_step"] and state else ""
            lists = [params, grads, state]
            scalars = (b["lr"], b["momentum"], 1.0 - b["dampening"], b["weight_decay"], b["nesterov"],
                       b["maximize"], False)
            loop = "sgd"
        else:
            amsgrad = b["amsgrad"]
            lists = [params, grads, list(b["exp_avgs"]), list(b["exp_avg_sqs"]), list(b["max_exp_avg_sqs"]) if amsgrad else []]
            state = [t for ts in lists[2:] for t in ts]
            steps, lr, beta1, beta2, wd = b["state_steps"], b["lr"], b["beta1"], b["beta2"], b["weight_decay"]
            why = "the first step creates the state" if any(t == 1 for t in steps) else ""
            # the numbers as the kernel computes them (Python floats)
            scalars = ([lr / (1 - beta1 ** t) for t in steps], [math.sqrt(1 - beta2 ** t) for t in steps],
                       1 - lr * wd, 1 - beta1, beta2, 1 - beta2, b["eps"], wd, name == "_fused_adamw_", amsgrad,
                       b["maximize"])
            loop = "adam"
        if len({len(ts) for ts in lists if ts}) > 1:
            return kernel(*args, **kwargs)       # its error
        why = why or unrecordable(r, params, grads, state)
        if not why:
            self._before(r, params + state)
            why = self.record(r, loop, lists, scalars)
        if why:
            state_.counters["step_fallbacks"] += 1
            state_.step_fallback_reason = why
            r.flush()
            return kernel(*args, **kwargs)
        state_.counters["steps_recorded"] += 1
        return None

    @staticmethod
    def _before(r, tensors: list) -> None:
        """Eager mode's ``written()``: other threads' graphs that read what the loop writes run first."""
        keys = None
        for ref in tuple(pending_readers):
            o = ref()
            if o is not None and o is not r:
                if keys is None:
                    keys = {id(storage_root(get_slot(t, Tensor))) for t in tensors}
                if not keys.isdisjoint(o.read_keys):
                    o.flush()

    @staticmethod
    def record(r, loop: str, lists: list, scalars: tuple) -> str:
        """Record ``foreach.step(loop, *lists, dtype, scalars)`` over tensors (``lists``: parameters,
        gradients, state; an empty list where the loop takes none) into ``r``, run the graph (the
        update is the sync point, as ``xm.mark_step()`` is torch_xla's), then bump the version of each
        tensor the loop wrote; or why not (a number that is not a Python float or int: nothing
        recorded)."""
        params = lists[0]
        flags, numbers = [], []
        for kind, x in zip(foreach.SCALARS[loop], scalars):
            if kind == "n":
                numbers.append(x)
            elif kind == "l":
                numbers += x
            else:
                flags.append(bool(x))
        for i, x in enumerate(numbers):
            if x.__class__ is not float:
                v = numbers[i] = _number(x)
                if v is None:
                    return f"a number of the update is a {type(x).__name__}"
        dtype = SLOT_DATA.__get__(params[0], Tensor).dtype
        lens = tuple(len(ts) for ts in lists)
        key = (loop, len(params), dtype, lens, tuple(flags))
        known = _SPECS.get(key)
        if known is None:
            nt = sum(lens)
            ty = TensorType(sig_type(params[0]._sig).dtype, 0, "cpu")
            slots = tuple(("v", FIRST_SLOT + i) for i in range(nt))
            slots += tuple(("s", FIRST_SLOT + nt + i) for i in range(len(numbers)))
            spec = Spec(_Loop(loop, len(params), dtype, lens, tuple(flags)), slots, (), ty)
            known = _SPECS[key] = (spec, ((ty, (), out_sig(params[0]._sig, ty)),))
        with r.lock:
            ids, vids = r.input_ids, []
            for ts in lists:
                for t in ts:
                    if t.__class__ is LazyTensor:
                        z = get_slot(t, Tensor)
                        if z.__class__ is Pending and z.recorder is r:      # a gradient pending here
                            r.types[z.vid] = z.type
                            vids.append(z.vid)
                            continue
                    vid = ids.get(t)
                    vids.append(r.add_input(t, sig_type(t._sig)) if vid is None else vid)
            held = r.append_values(known[0], vids + numbers, known[1])      # noqa: F841  live through the flush
        r.flush()
        for t in params + [t for ts in lists[2:] for t in ts]:
            bump_version(t)
        return ""


def _bind(name: str, args: tuple, kwargs: dict) -> dict:
    """The op's arguments by name (the schema's order, defaults filled in)."""
    out = {a.name: a.default for a in _OPS[name].schema.arguments if a.has_default}
    out.update(zip((a.name for a in _OPS[name].schema.arguments), args))
    out.update(kwargs)
    return out


STEP = StepRecorder()
_OPS: dict = {}
_HANDLES: list = []


def _tracer_kernel(name: str, kernel):
    op = overload_of(_OPS[name])

    def fused(*args, **kwargs):
        r = _state.tracer
        if r.__class__ is LazyRecorder:
            return STEP.run(name, kernel, args, kwargs)
        return tracer_fallback(op, None, args, kwargs)     # a trace: as any op
    fused.__name__ = fused.__qualname__ = name
    # the loop is recorded after every step of this graph that reads what it writes: only other
    # graphs run first (``_before``), and the eager kernel runs the observers where it writes
    fused.runs_write_observers = True
    return fused


def install() -> None:
    """Plug in (switch.py, when a thread first enters compiled mode): the fused update ops' kernels at
    the Tracer key record their loops, and plan functions call them (``_rule``, the njit loops)."""
    for loop in foreach.SCALARS:
        RULES[_NAME + loop] = _rule
        RUNTIME_READERS.add(_NAME + loop)
        HELPERS[f"_optim_{loop}"] = foreach.loop(loop)[0]
    for name, kernel in KERNELS["CPU"].items():
        _OPS[name] = lookup(f"aten::{name}")
        _HANDLES.append(_OPS[name].register(DispatchKey.Tracer, _tracer_kernel(name, kernel), "compiler/lazy/update.py"))
