"""A fused full reduction equals eager's sum bit for bit whatever the region's operands look like.

Known bug, found 2026-11-28 and not yet fixed: when an operand of the reduced chain is broadcast
(a (1, 1) tensor times a (3, 4) one, the shape of a bias gradient), the region runs a strided nest
whose float accumulation LLVM reassociates differently from the flat loop the eager ``sum`` of the
materialized product runs, and about half of random inputs differ in the last bit (in dj.compile,
in the global compiled mode and in the joint backward of a broadcast input).  The strict xfail
below turns into a failure the day the fold order is made explicit, so it cannot be forgotten."""

import numpy as np
import pytest

import dispatch_jit as dj


@pytest.mark.xfail(strict=True, reason="fused full reduction over a broadcast operand reassociates unlike eager's flat sum")
def test_full_reduction_over_a_broadcast_operand_equals_eager():
    rng = np.random.default_rng(3)
    f = dj.compile(lambda a, b: (a * b).sum((0, 1), keepdim=True))
    differ = 0
    for _ in range(20):
        a = dj.from_numpy(rng.uniform(0.5, 2.0, (3, 4)))
        b = dj.from_numpy(np.full((1, 1), 0.5))
        differ += not np.array_equal(f(a, b).numpy(), (a * b).sum((0, 1), keepdim=True).numpy())
    assert differ == 0


def test_full_reduction_over_a_scalar_operand_equals_eager():
    rng = np.random.default_rng(3)
    f = dj.compile(lambda a: (a * 0.5).sum((0, 1), keepdim=True))
    for _ in range(20):
        a = dj.from_numpy(rng.uniform(0.5, 2.0, (3, 4)))
        np.testing.assert_array_equal(f(a).numpy(), (a * 0.5).sum((0, 1), keepdim=True).numpy())
