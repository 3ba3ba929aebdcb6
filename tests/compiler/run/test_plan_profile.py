"""compiler/run/profile.py: a plan function regenerated with a time stamp after each step, swapped in
for a ``with`` block.  Oracle: the plan's own function on the same inputs (the same bits), the plan's
steps (one row per step the function calls, in order), and the plan function restored afterwards."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.compiler.run.profile import cycles_per_second, profile
from dispatch_jit.errors import InvalidArgumentError
from helpers import fused_grad

F = nn.functional
RNG = np.random.default_rng(3)
X = dj.from_numpy(RNG.standard_normal((40, 6)).astype(np.float32))
Y = dj.from_numpy(RNG.integers(0, 3, 40))


def _mlp():
    dj.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _grads(model, cf):
    model.zero_grad()
    loss = cf(X, Y)
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in model.parameters()]


def test_profiled_calls_are_recorded_per_step_with_the_plan_functions_bits():
    model = _mlp()
    cf = dj.compile(lambda x, y: F.cross_entropy(model(x), y))
    for _ in range(2):
        want = _grads(model, cf)
    f = fused_grad(cf)
    own_fwd, own_bwd = f.forward.function, f.backward.function
    assert own_fwd is not None and own_bwd is not None, (f.forward.function_reason, f.backward.function_reason)
    with profile(f.forward) as pf, profile(f.backward) as pb:
        assert f.forward.function is not own_fwd
        for _ in range(3):
            got = _grads(model, cf)
    assert f.forward.function is own_fwd and f.backward.function is own_bwd
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a, b)
    assert pf.calls == 3 and pb.calls == 3
    for prof, plan in ((pf, f.forward), (pb, f.backward)):
        rows = prof.rows()
        called = [k for k, s in enumerate(plan.steps) if s.plan_kind != "const"]
        assert [r[0] for r in rows] == called
        assert all(r[2] >= 0 for r in rows) and abs(sum(r[3] for r in rows) - 1) < 1e-6
        assert str(prof.calls) in prof.report()
    assert [r[1] for r in pf.rows()][:1] == ["linear"]
    assert "linear_backward" in pb.report()
    assert cycles_per_second() > 0
    assert sum(r[2] for r in pf.rows()) > 0


def test_a_plan_without_a_function_is_refused_with_the_reason():
    model = _mlp()
    cf = dj.compile(lambda x, y: F.cross_entropy(model(x), y))
    cf(dj.from_numpy(np.asfortranarray(X.numpy())), Y).backward()
    with pytest.raises(InvalidArgumentError, match="no compiled plan function.*not C-contiguous"):
        profile(fused_grad(cf).forward)
