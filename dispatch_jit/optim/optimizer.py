"""``dj.optim.Optimizer``: param_groups, per-parameter state, zero_grad, state_dict, as PyTorch's.

SGD, Adam and AdamW update each group with one call of a fused update op (``_fused_sgd_``,
``_fused_adam_``, ``_fused_adamw_``: kernels/optim/), as PyTorch's ``fused=True`` does; its kernel
picks the multi-tensor loop or per-tensor ops.  Compiled mode (``dj.execution_mode("compiled")``)
records that op like any other (compiler/lazy/update.py: the loop becomes one step of the graph
that holds the forward and the backward, run at once).  A whole step compiled by ``dj.compile``
traces the per-tensor ops instead (``STEP_TRACE``), with every number as a runtime scalar.
Updates are made in place, under no_grad, and bump each written tensor's version counter, so
autograd still detects a saved tensor that an update overwrote.

>>> import dispatch_jit as dj
>>> w = dj.nn.Parameter(dj.ones(2))
>>> opt = dj.optim.SGD([w], lr=0.5)
>>> (w * w).sum().backward(); opt.step(); w
tensor([0., 0.], requires_grad=True)
>>> opt.zero_grad(); w.grad is None
True
"""

from __future__ import annotations

import copy

import numpy as np

from ..autograd.grad_mode import no_grad
from ..autograd.methods import zero_grads
from ..dispatcher import tls
from ..errors import AutogradError, DTypeError, SchemaError, ShapeError
from ..keys import DispatchKey, key_bits
from ..tensor import Tensor

__all__ = ["Optimizer", "required", "check_params", "read_only_error", "STEP_TRACE"]

_TRACER = key_bits(DispatchKey.Tracer)


# A whole training step compiled by ``dj.compile`` (compiler/steptrace.py) traces the optimizer: it
# plugs in here an object whose ``step(opt, closure, run)`` (which calls ``run(closure)``, the update),
# ``zero_grad(opt, set_to_none)`` and ``step_scalars(opt, group, params, values)`` (``values``: what
# ``step_values`` gave, returned as the trace's runtime scalars) see each step while its trace runs
# (the compiler sits above this layer, so it registers itself; issue 28: to become the Tracer key's
# capture of dispatcher ops, as the write observers and the Tracer fallback are)
STEP_TRACE: list = [None]


def _traced():
    """The step trace of this thread, if one is running (else None)."""
    hook = STEP_TRACE[0]
    return hook.active() if hook is not None and tls.include & _TRACER else None


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


def check_params(opt, group: dict, params: list, real_view: bool = False) -> None:
    """Before ``opt`` updates ``params`` (those of ``group`` with a gradient), in every mode: each
    parameter writeable (every other write path refuses a read-only tensor; a loop would write
    through NumPy's flag, into an immutable ``bytes`` or a read-only memmap), each gradient of its
    parameter's shape (``.grad =`` checks it, but ``p.data =`` can change the parameter's since,
    and the update would broadcast the gradient or read past it).  ``real_view``: the update takes
    a complex parameter as its real view, which is made of CPU tensors only.  A few attribute reads
    each: the sizes, not the data (a pending gradient stays pending)."""
    for p in params:
        a = p._data
        if a.__class__ is np.ndarray:
            if not a.flags.writeable:
                raise read_only_error(f"{type(opt).__name__}.step()", _which(opt, group, p), a.shape)
        elif real_view and p.is_complex():
            raise DTypeError(f"{type(opt).__name__}.step(): {_which(opt, group, p)} is complex, which the update "
                             f"takes as its real view (as PyTorch's), made for CPU tensors only; it is on "
                             f"{p.device}: keep complex parameters on the CPU, or optimize their real and "
                             f"imaginary parts as two real parameters")
        g = p.__dict__["_grad"]
        if tuple(g.shape) != a.shape:
            raise AutogradError(f"{type(opt).__name__}.step(): the gradient of {_which(opt, group, p)} has shape "
                                f"{tuple(g.shape)} but the parameter has shape {tuple(a.shape)} (its .data "
                                f"was replaced after the gradient was set); set .grad to a gradient of the "
                                f"parameter's shape, or to None")


def read_only_error(who: str, what: str, shape) -> ShapeError:
    """The error of an update that would write ``what`` (of ``shape``), a read-only tensor."""
    return ShapeError(f"{who}: {what} of shape {tuple(shape)} is read-only (a read-only NumPy buffer, e.g. "
                      f"dj.from_numpy of a read-only array or of np.frombuffer(bytes), or an expand()ed view), "
                      f"and the update writes it in place; optimize a writeable copy of it "
                      f"(dj.nn.Parameter(t.clone()))")


def _which(opt, group: dict, p) -> str:
    gi = next(i for i, g in enumerate(opt.param_groups) if g is group)
    i = next(i for i, q in enumerate(group["params"]) if q is p)
    return f"parameter {i} of param group {gi}"


class Optimizer:
    """Base class: ``params`` is an iterable of tensors or of dicts (parameter groups, each with
    its own options); ``defaults`` fill the options a group does not set."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        self.param_groups: list = []
        if isinstance(params, Tensor):
            raise SchemaError(f"params argument given to the optimizer should be an iterable of Tensors or dicts, "
                              f"but got a Tensor of shape {tuple(params.shape)}; pass [tensor] or "
                              f"model.parameters()")
        groups = list(params)
        if not groups:
            raise SchemaError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        if isinstance(params, set):
            raise SchemaError("optimizer parameters need to be organized in ordered collections, but the ordering "
                              "of tensors in sets will change between runs; use a list")
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise SchemaError(f"optimizer can only optimize Tensors, but one of the params is "
                                  f"{type(p).__name__}")
            if p.grad_fn is not None:
                raise SchemaError("can't optimize a non-leaf Tensor (one computed by an op); optimize the leaf "
                                  "it was computed from, or .detach() it and requires_grad_()")
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise SchemaError(f"parameter group didn't specify a value of required optimization parameter {k}")
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]) or len({id(p) for p in group["params"]}) < len(group["params"]):
            raise SchemaError("some parameters appear in more than one parameter group (or twice in one)")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (the default), or to zeros in place."""
        if (tr := _traced()) is not None:
            return tr.zero_grad(self, set_to_none)
        zero_grads([p for g in self.param_groups for p in g["params"]], set_to_none)

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def step_values(self, group, params) -> tuple:
        """The numbers one update of ``params`` (those of ``group`` with a gradient) reads, as a tuple
        of lists, computed from the group's options (and per-step state) exactly as the update
        computes them.  The update reads every number of its options through these, and its form
        (which branches run) only from flags, so that a compiled whole step can pass the numbers
        per call as its plan's runtime scalars: a new learning rate does not retrace."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step_values()")

    def _closure_loss(self, closure):
        if closure is None:
            return None
        from ..autograd.grad_mode import enable_grad
        with enable_grad():
            return closure()

    # -- state -------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{options..., "params": [index, ...]}]}``,
        parameters numbered in group order, as PyTorch's."""
        index, groups = {}, []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (v.clone() if isinstance(v, Tensor) else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the options and state of ``state_dict`` (from an optimizer over parameters of the same
        shapes, in the same group layout); the state tensors are copied."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise SchemaError(f"loaded state dict has {len(groups)} parameter groups, this optimizer has "
                              f"{len(self.param_groups)}")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise SchemaError(f"loaded state dict contains a parameter group of {len(theirs['params'])} "
                                  f"parameters that doesn't match the size of this optimizer's group "
                                  f"({len(mine['params'])})")
        by_index = {i: p for mine, theirs in zip(self.param_groups, groups) for i, p in zip(theirs["params"], mine["params"])}
        self.state = {}
        for i, st in state_dict["state"].items():
            p = by_index[int(i)]
            new = {}
            for k, v in st.items():
                if isinstance(v, Tensor):
                    if k != "step" and tuple(v.shape) != tuple(p.shape):
                        raise SchemaError(f"loaded state '{k}' of shape {tuple(v.shape)} does not fit the parameter "
                                          f"of shape {tuple(p.shape)}")
                    with no_grad():
                        v = v.to(p.dtype).clone() if k != "step" else v.clone()
                new[k] = v
            self.state[p] = new
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines + [")"])
