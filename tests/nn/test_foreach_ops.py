"""``_foreach_norm`` and ``_foreach_mul_`` (kernels/nn/foreach.py): eager per-tensor bits, the
cases that take the per-tensor ops inside the call, in-place bookkeeping, PyTorch's values, and
clip_grad_norm_ as two multi-tensor calls where it was four dispatches per gradient."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.tensor import version_of

A = dj.ops.aten
RNG = np.random.default_rng(13)


def _bits(t):
    return t.numpy().tobytes(), t.dtype


def test_foreach_norm_has_each_tensors_norm_bits():
    """float32/float64, a transposed view, a scalar, an empty tensor, one past the sum's
    parallel threshold (2**18 elements): each equals ``t.norm()`` bit for bit."""
    ts = [dj.tensor(RNG.standard_normal(s).astype(dt) * 1e-2) for s, dt in
          [((65, 64), np.float32), ((64,), np.float32), ((), np.float32), ((0, 3), np.float32),
           ((7, 5), np.float64), ((2 ** 18 + 5,), np.float32)]]
    ts.append(dj.tensor(RNG.standard_normal((6, 4)).astype(np.float32)).t())
    for a, t in zip(A._foreach_norm(ts), ts):
        assert _bits(a) == _bits(t.norm(2))


@pytest.mark.parametrize("ord", [1.0, 3.0, math.inf])
def test_foreach_norm_other_orders_and_dtypes_take_the_ops(ord):
    ts = [dj.tensor(RNG.standard_normal(5).astype(np.float32)), dj.tensor([1.0, -3.0], dtype=dj.float16)]
    for a, t in zip(A._foreach_norm(ts, ord), ts):
        assert _bits(a) == _bits(t.norm(ord))
    out = A._foreach_norm(ts, 2, dtype=dj.float64)
    assert [o.dtype for o in out] == [dj.float64, dj.float64]
    assert _bits(out[1]) == _bits(ts[1].norm(2, dtype=dj.float64))


def test_foreach_norm_matches_torch():
    torch = pytest.importorskip("torch")
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in [(3, 4), (7,), ()]]
    ours = A._foreach_norm([dj.tensor(a) for a in arrays])
    theirs = torch._foreach_norm([torch.tensor(a) for a in arrays])
    np.testing.assert_allclose([o.item() for o in ours], [t.item() for t in theirs], rtol=1e-6)


def test_foreach_mul_scales_in_place_as_mul_():
    """Bits of ``mul_``, views write through to their base, version counters bump once; a tensor
    of another dtype than the factor takes ``mul_`` itself (its promotion)."""
    base = dj.tensor(RNG.standard_normal((4, 6)).astype(np.float32))
    ts = [dj.tensor(RNG.standard_normal(s).astype(np.float32)) for s in [(3, 5), (9,)]]
    ts += [base[:, ::2], dj.tensor(RNG.standard_normal(3))]          # a strided view, a float64 tensor
    coef = dj.tensor(np.float32(0.37))
    refs = [t.clone() for t in ts]
    base_ref = base.clone()
    versions = [version_of(t) for t in ts]
    A._foreach_mul_(ts, coef)
    base_ref[:, ::2].mul_(coef)
    for t, r, v in zip(ts, refs, versions):
        assert _bits(t) == _bits(r.mul_(coef))
        assert version_of(t) == v + 1
    assert _bits(base) == _bits(base_ref)


def test_foreach_mul_of_a_tensor_that_requires_grad_is_refused():
    """A leaf as ``mul_`` refuses it; the op records no gradient, so a non-leaf too (under
    no_grad both scale)."""
    w = dj.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad is being used in an in-place"):
        A._foreach_mul_([w], dj.tensor(2.0))
    with pytest.raises(RuntimeError, match="records no gradient.*no_grad"):
        A._foreach_mul_([dj.ones(2)], dj.tensor(2.0, requires_grad=True))
    with dj.no_grad():
        A._foreach_mul_([w], dj.tensor(2.0))
    assert w.tolist() == [2.0, 2.0, 2.0]


class _Ops(dj.DispatchMode):
    def __init__(self):
        self.seen = []

    def __dispatch__(self, op, types, args, kwargs):
        self.seen.append(op.name())
        return op(*args, **kwargs)


def test_clip_grad_norm_is_two_multi_tensor_calls():
    """Twelve gradients: one norm call and one scaling call, not four ops and a mul_ apiece; the
    clipped gradients equal the per-tensor ops' bits."""
    ps = [dj.nn.Parameter(dj.zeros(3, 2)) for _ in range(12)]
    for p in ps:
        p.grad = dj.tensor(RNG.standard_normal((3, 2)).astype(np.float32))
    grads = [p.grad.clone() for p in ps]
    with _Ops() as mode:
        total = dj.nn.utils.clip_grad_norm_(ps, 0.5)
    assert mode.seen.count("aten::_foreach_norm.Scalar") == 1 and mode.seen.count("aten::_foreach_mul_.Tensor") == 1, mode.seen
    assert len(mode.seen) < 12, mode.seen
    ref_total = dj.stack([g.norm() for g in grads]).norm()
    assert _bits(total) == _bits(ref_total)
    coef = dj.clamp(0.5 / (ref_total + 1e-6), max=1.0)
    for p, g in zip(ps, grads):
        assert _bits(p.grad) == _bits(g.mul_(coef))


def test_foreach_mul_takes_a_zero_dim_factor():
    t = dj.ones(3)
    with pytest.raises(ValueError, match="scalar tensor expected to be 0 dim but it has 1 dimensions"):
        A._foreach_mul_([t], dj.tensor([2.0, 2.0, 2.0]))
    assert t.tolist() == [1.0, 1.0, 1.0]
