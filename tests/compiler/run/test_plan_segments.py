"""A large plan function compiled as segments (compiler/run/segments.py): where the cuts fall, and
that a split plan function gives the interpreted plan's results bit for bit and still refuses bad input
as eager mode does.  Oracle: the same plan run step by step from Python; eager mode's error."""

import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.run import segments
from helpers import fused_grad
from test_plan_function import X, Y, _check_plans, _mlp
from test_plan_function import test_a_target_out_of_range_raises_eager_modes_error as _refusal_raises_eager_modes_error

F = nn.functional

BODY = [
    "v1 = _as_strided(i0.reshape(-1)[0:], (4, 2), (8, 4))",    # a view of an input: made again
    "v2 = np.ascontiguousarray(v1).reshape((8,))",              # a copy: no cut until its last read
    "loop_2(v1, v3)",
    "loop_3(v2, v4)",
    "bad_4 = _take(v3, v4)",
    "if bad_4 >= 0:",
    "    return 4",
    "loop_5(v1, v5)",
]
STEPS = [(0, 1), (1, 1), (2, 1), (3, 1), (4, 3), (5, 1)]


def test_cuts_fall_at_step_ends_and_never_across_a_copy_made_inside():
    cuts = segments.split(BODY, STEPS, 1)
    assert cuts == [(0, 1), (1, 4), (4, 7), (7, 8)]
    src, idx = segments._segment_source(["@numba.njit\ndef loop_5(a, b):\n    pass"], BODY, 7, 8,
                                        ["i0", "v3", "v4", "v5"])
    # the view the last segment reads is made again there, of the input it views
    assert "    v1 = _as_strided(i0" in src and "def loop_5(" in src and idx == [0, 3]


@pytest.fixture
def small_segments(monkeypatch):
    monkeypatch.setattr(segments, "SEGMENT_LINES", 2)


def test_a_split_plan_function_equals_the_interpreted_plan_and_refuses_as_eager_mode(small_segments):
    model = _mlp()
    cf = dj.compile(lambda x, y: F.cross_entropy(model(x), y))
    for _ in range(2):
        model.zero_grad()
        cf(X, Y).backward()
    f = fused_grad(cf)
    assert f.forward.function.ep.segments >= 2 and f.backward.function.ep.segments >= 2
    _check_plans(f, [X, Y] + [p.detach() for p in model.parameters()])
    # a target out of range: the segment that refuses it stops the call, which reruns interpreted
    # and raises eager mode's error (the same model and plans: its segments come from memory)
    _refusal_raises_eager_modes_error()
