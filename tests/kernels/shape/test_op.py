"""The view ops' shape rules (kernels/shape/op.py) against the eager kernels and NumPy, with
known sizes and with unknown ones (as dj.compile's tracer asks), and the rules' registration."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import registry
from dispatch_jit.errors import ShapeError, SizeDependentError
from dispatch_jit.kernels.shape.op import RULES

# (op, input shape, static arguments): valid calls
VALID = [
    ("reshape", (2, 3, 4), ((6, -1),)), ("reshape", (0, 3), ((-1, 3),)), ("reshape", (), ((1, 1),)),
    ("view", (2, 3, 4), ((4, 6),)), ("permute", (2, 3, 4), ((2, 0, 1),)), ("permute", (), ((),)),
    ("transpose.int", (2, 3), (0, 1)), ("transpose.int", (), (0, -1)), ("expand", (3, 1), ((2, 3, 4),)),
    ("expand", (3, 1), ((-1, 5),)), ("expand", (1,), ((0,),)), ("squeeze", (1, 3, 1), ()),
    ("squeeze", (1, 3, 1), ((0,),)), ("unsqueeze", (2, 3), (-1,)), ("unsqueeze", (), (0,)),
    ("flatten", (2, 3, 4), (1, -1)), ("flatten", (), (0, -1)), ("narrow", (5, 4), (0, 1, 3)),
    ("narrow", (5, 4), (-1, -2, 2)),
]
# invalid calls: the rule raises the eager kernel's ShapeError
INVALID = [
    ("reshape", (2, 3), ((4, -1),)), ("reshape", (2, 3), ((-1, -1),)), ("reshape", (2, 3), ((-2, -3),)),
    ("reshape", (0, 3), ((0, -1),)), ("view", (2, 3), ((5,),)), ("permute", (2, 3), ((0, 0),)),
    ("permute", (2, 3), ((0, 2),)), ("transpose.int", (2, 3), (0, 2)), ("expand", (3, 2), ((3, 4),)),
    ("expand", (3,), ((-1, 3),)), ("expand", (3, 2), ((2,),)), ("unsqueeze", (2,), (3,)),
    ("flatten", (2, 3, 4), (2, 1)), ("narrow", (5,), (0, 3, 3)), ("narrow", (), (0, 0, 0)),
]


def _eager(op, shape, statics):
    x = dj.tensor(np.zeros(shape, np.float32))
    return getattr(dj.ops.aten, op.split(".")[0])(x, *statics)


@pytest.mark.parametrize("op,shape,statics", VALID)
def test_rule_gives_the_eager_kernels_shape(op, shape, statics):
    assert RULES[op](shape, *statics) == tuple(_eager(op, shape, statics).shape)


@pytest.mark.parametrize("op,shape,statics", VALID)
def test_unknown_sizes_keep_the_rank_and_the_known_sizes(op, shape, statics):
    """As the tracer asks: every size unknown.  The rank is the eager one; a size the rule gives
    without the input's sizes is the eager one too."""
    if op == "squeeze":
        with pytest.raises(SizeDependentError, match="squeeze"):
            RULES[op]((None,) * len(shape), *statics)
        return
    got = RULES[op]((None,) * len(shape), *statics)
    want = tuple(_eager(op, shape, statics).shape)
    assert len(got) == len(want)
    assert all(g is None or g == w for g, w in zip(got, want))


@pytest.mark.parametrize("op,shape,statics", INVALID)
def test_rule_raises_the_eager_kernels_error(op, shape, statics):
    with pytest.raises(ShapeError) as rule_error:
        RULES[op](shape, *statics)
    with pytest.raises(ShapeError) as eager_error:
        _eager(op, shape, statics)
    assert str(rule_error.value) == str(eager_error.value)


def test_rules_are_the_registered_shape_fns():
    for op, rule in RULES.items():
        assert registry.lookup(f"aten::{op}").shape_fn is rule


def test_traced_views_are_typed_by_the_rules_without_running_them(monkeypatch):
    """dj.compile types each view from its rule: with the eager kernel unusable, the trace still
    knows the output's rank (the plan runs the kernels only at call time)."""
    seen = []
    real = RULES["permute"]

    def spy(shape, *statics):
        seen.append(shape)
        return real(shape, *statics)

    monkeypatch.setattr(registry.lookup("aten::permute"), "shape_fn", spy)

    @dj.compile
    def f(x):
        return (x * 2).permute(1, 0) + 1

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(dj.tensor(a)).numpy(), (a * 2).T + 1)
    assert (None, None) in seen
