"""``dj.optim.lr_scheduler``: PyTorch's learning-rate schedulers, the same formulas in the same order of
float operations, so that the sequence of learning rates equals PyTorch's bit for bit.

Call ``scheduler.step()`` once per epoch, after ``optimizer.step()``:

>>> import dispatch_jit as dj
>>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=0.1)
>>> sched = dj.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
>>> lrs = []
>>> for epoch in range(4):
...     opt.step(); sched.step(); lrs.append(round(sched.get_last_lr()[0], 6))
>>> lrs
[0.085355, 0.05, 0.014645, 0.0]
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter

from ..errors import ArgumentTypeError, InvalidArgumentError
from .plateau import OneCycleLR, ReduceLROnPlateau
from .scheduler_base import LRScheduler, group_values

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "LinearLR", "CosineAnnealingLR",
           "SequentialLR", "OneCycleLR", "ReduceLROnPlateau"]


def _lambdas(optimizer, lr_lambda) -> list:
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise InvalidArgumentError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
    return list(lr_lambda)


class LambdaLR(LRScheduler):
    """Each group's learning rate is its initial one times ``lr_lambda(epoch)`` (one function, or a
    list of one per group).

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> sched = LambdaLR(opt, lambda epoch: 0.5 ** epoch)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        """As the base's, with ``lr_lambdas`` replaced by the ``__dict__`` of each callable object
        (None for a plain function or lambda, which cannot be saved), as PyTorch's."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Take ``state_dict``'s attributes; callable objects get their saved ``__dict__`` back."""
        sd = dict(state_dict)
        lr_lambdas = sd.pop("lr_lambdas")
        self.__dict__.update(sd)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self) -> list:
        self._warn_get_lr()
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> sched = StepLR(opt, step_size=1, gamma=0.5)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each epoch of ``milestones`` (a milestone given
    twice multiplies twice).

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> sched = MultiStepLR(opt, milestones=[1], gamma=0.25)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self.last_epoch not in self.milestones:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch.

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> sched = ExponentialLR(opt, gamma=0.5)
    >>> opt.step(); sched.step(); opt.step(); sched.step(); sched.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rate by a factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs (a warm-up), then keep it.

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> sched = LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> lrs = [sched.get_last_lr()[0]]
    >>> for _ in range(3):
    ...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise InvalidArgumentError("Starting multiplicative factor expected to be greater than 0 and less or "
                                       "equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise InvalidArgumentError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * (1.0 + (self.end_factor - self.start_factor)
                           / (self.total_iters * self.start_factor
                              + (self.last_epoch - 1) * (self.end_factor - self.start_factor)))
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneal the learning rate from its initial value to ``eta_min`` along half a cosine over
    ``T_max`` epochs (and back up over the next ``T_max``, as PyTorch's recursive form does).

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> sched = CosineAnnealingLR(opt, T_max=2)
    >>> opt.step(); sched.step(); [round(x, 6) for x in sched.get_last_lr()]
    [0.5]
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        self._warn_get_lr()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [g["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)) * (g["lr"] - self.eta_min)
                + self.eta_min for g in groups]

    def _get_closed_form_lr(self) -> list:
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at each epoch of ``milestones`` (one fewer
    than the schedulers), e.g. a linear warm-up then a cosine decay.

    >>> import dispatch_jit as dj
    >>> opt = dj.optim.SGD([dj.nn.Parameter(dj.ones(1))], lr=1.0)
    >>> warm = LinearLR(opt, start_factor=0.5, total_iters=1)
    >>> decay = ExponentialLR(opt, gamma=0.5)
    >>> sched = SequentialLR(opt, [warm, decay], milestones=[1])
    >>> lrs = [sched.get_last_lr()[0]]
    >>> for _ in range(2):
    ...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [0.5, 1.0, 0.5]
    """

    def __init__(self, optimizer, schedulers: list, milestones: list, last_epoch: int = -1) -> None:
        name = type(self).__name__
        if len(schedulers) < 1:
            raise InvalidArgumentError(f"{name} expects at least one scheduler, but got no scheduler.")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise ArgumentTypeError(f"{name} at index {i} should have `optimizer` as its attribute.")
            if isinstance(s, ReduceLROnPlateau):
                raise InvalidArgumentError(
                    f"{name} does not support `ReduceLROnPlateau` scheduler as it requires additional kwargs to be "
                    f"specified when calling `step`, but got one at index {i} in the given schedulers sequence.")
            if optimizer != s.optimizer:
                raise InvalidArgumentError(
                    f"{name} expects all schedulers to belong to the same optimizer, but got scheduler "
                    f"{type(s).__name__} at index {i} has {s.optimizer}, which is different from "
                    f"{type(optimizer).__name__}.")
        if len(milestones) != len(schedulers) - 1:
            raise InvalidArgumentError(
                f"Sequential Schedulers expects number of schedulers provided to be one more than the number of "
                f"milestone points, but got number of schedulers {len(schedulers)} and the number of milestones "
                f"to be equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:     # back to the initial rates: the schedulers' first steps undone
            g["lr"] = g["initial_lr"]
        for s in schedulers:
            _undo(s)
        idx = bisect_right(milestones, 0)
        schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def step(self) -> None:
        """Advance one epoch: the scheduler of this epoch steps (restarting at its milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        """As the base's, with each inner scheduler's own ``state_dict()``."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Take ``state_dict``'s attributes and hand each inner scheduler its own."""
        sd = dict(state_dict)
        inner = sd.pop("_schedulers")
        self.__dict__.update(sd)
        for s, st in zip(self._schedulers, inner):
            s.load_state_dict(st)


def _undo(sched) -> None:
    if hasattr(sched, "_schedulers"):
        for s in sched._schedulers:
            _undo(s)
    elif hasattr(sched, "last_epoch"):
        sched.last_epoch -= 1
