"""``LRScheduler``: the base of ``dj.optim.lr_scheduler``'s schedulers, PyTorch's protocol step for step.

A scheduler reads each param group's ``"lr"`` and writes the next one there: ``step()`` adds one to
``last_epoch`` and sets every group's ``"lr"`` from ``get_lr()`` (the chainable form, which updates
the current value, so that two schedulers can be stacked), ``step(epoch)`` from the closed form
where the scheduler has one.  Construction records each group's ``"initial_lr"`` (kept if already
there) and makes the first step, to epoch 0.  ``state_dict()`` is every attribute but the optimizer.

>>> import dispatch_jit as dj
>>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
>>> sched = dj.optim.lr_scheduler.StepLR(opt, step_size=2)
>>> for _ in range(3):
...     opt.step(); sched.step()
>>> sched.get_last_lr(), opt.param_groups[0]["initial_lr"]
([0.1], 1.0)
"""

from __future__ import annotations

import warnings
from functools import wraps
from weakref import ref

from ..errors import ArgumentTypeError, InvalidArgumentError
from .optimizer import Optimizer

__all__ = ["LRScheduler", "format_param", "group_values", "EPOCH_DEPRECATION_WARNING"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. "
    "Please use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from "
    "None, the closed form is used instead of the new chainable form, where available.")


def check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise ArgumentTypeError(f"{type(optimizer).__name__} is not an Optimizer")


def format_param(name: str, optimizer, param) -> list:
    """``param`` once per param group: a list or tuple of one value per group, or one value for all."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise InvalidArgumentError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                                       f"{len(param)} values, param_groups has {len(optimizer.param_groups)}.")
        return list(param)
    return [param] * len(optimizer.param_groups)


def group_values(optimizer, key: str) -> list:
    """Each param group's ``key``."""
    return [g[key] for g in optimizer.param_groups]


class LRScheduler:
    """Base class: subclasses define ``get_lr()`` (the chainable form: from the groups' current
    ``"lr"``) and, where there is one, ``_get_closed_form_lr()`` (from ``base_lrs`` and the epoch)."""

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch: int = -1) -> None:
        check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise InvalidArgumentError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        f"last_epoch >= 0; load the optimizer's state_dict (which holds it) before making the "
                        f"scheduler, or start from last_epoch=-1")
        self.base_lrs = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_step_called(self.optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict:
        """Every attribute of the scheduler but the optimizer, as PyTorch's."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the attributes of ``state_dict`` (from ``state_dict()``)."""
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list:
        """The learning rate of each param group, as the last ``step()`` set it."""
        return self._last_lr

    def get_lr(self) -> list:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr()")

    def _warn_get_lr(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated as in PyTorch, to ``epoch``) and set each group's ``"lr"``."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn("Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                              "initialization. Please, make sure to call `optimizer.step()` before "
                              "`lr_scheduler.step()`.", UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 "
                              "and later, you should call them in the opposite order: `optimizer.step()` before "
                              "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                              "value of the learning rate schedule.", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = group_values(self.optimizer, "lr")


def _track_step_called(opt) -> None:
    """Wrap ``opt.step`` (once) so that it records being called: ``step()`` warns, as PyTorch's does,
    when the scheduler steps before the optimizer ever did (the first learning rate is then skipped)."""
    if hasattr(opt.step, "_wrapped_by_lr_sched"):
        return
    func, opt_ref = opt.step.__func__, ref(opt)

    @wraps(func)
    def wrapper(*args, **kwargs):
        o = opt_ref()
        o._opt_called = True
        return func.__get__(o, o.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    opt.step = wrapper
