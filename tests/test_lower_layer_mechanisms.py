"""The general mechanisms the engine gives the layers above it (compiled mode plugs in through
them, tests/test_architecture.py forbids slots): write observers (writes.py) and a tensor
subclass's own ``__backward__`` (autograd/engine.py)."""

import numpy as np

import dispatch_jit as dj
from dispatch_jit.tensor import Tensor
from dispatch_jit.writes import before_write, observe_writes


def test_write_observer_runs_before_an_op_writes_and_only_while_watching():
    seen, watched = [], []
    x = dj.zeros(2)
    h = observe_writes(lambda t: seen.append((t, t.numpy().tolist())), watched)
    try:
        x.add_(1.0)
        assert seen == []                     # nothing watched: not asked
        watched.append(True)
        x.add_(1.0)
        dj.add(x, 1.0, out=x)
        before_write(x)                       # a write that is not an op call
        assert [(t is x, v) for t, v in seen] == [(True, [1.0, 1.0]), (True, [2.0, 2.0]), (True, [3.0, 3.0])]
        y = dj.add(x, 1.0)                    # no tensor written: not asked
        assert len(seen) == 3 and y.numpy().tolist() == [4.0, 4.0]
    finally:
        h.remove()
    x.add_(1.0)
    assert len(seen) == 3 and x.numpy().tolist() == [4.0, 4.0]


def test_two_write_observers_each_run():
    a, b = [], []
    x = dj.zeros(1)
    handles = [observe_writes(a.append, [1]), observe_writes(b.append, [1])]
    try:
        x.mul_(2.0)
    finally:
        for h in handles:
            h.remove()
    assert a == [x] and b == [x]


class _OwnBackward(Tensor):
    __slots__ = ()
    calls: list = []
    result = True

    @staticmethod
    def __backward__(root):
        _OwnBackward.calls.append(root)
        return _OwnBackward.result


def test_a_tensor_subclass_runs_its_own_backward():
    x = dj.tensor([1.0, 2.0], requires_grad=True)
    for result in (True, False):
        _OwnBackward.calls, _OwnBackward.result = [], result
        loss = (x * 3.0).sum()
        loss.__class__ = _OwnBackward
        loss.backward()
        assert _OwnBackward.calls == [loss]
        # True: the subclass did it (the engine walked nothing); False: the engine walks as always
        assert (x.grad is None) == result
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    _OwnBackward.calls = []
    (x * 3.0).sum().backward()                # a plain Tensor: never asked
    loss = (x * 3.0).sum()
    loss.__class__ = _OwnBackward
    loss.backward(retain_graph=True)          # not the plain case: never asked
    assert _OwnBackward.calls == []
    np.testing.assert_array_equal(x.grad.numpy(), [9.0, 9.0])
