"""A fused reduction equals eager's bit for bit whatever the region's operands look like.

Float sums fold in the one explicit order of kernels/support/loops/lanes.py (lanes, a pairwise
merge, chunks in order), in eager kernels and fused epilogues alike, flat or strided, serial or
in chunks.  Before, a fused full reduction over a broadcast operand (a (1, 1) tensor times a
(3, 4) one, the shape of a bias gradient) ran a strided nest whose accumulation LLVM
reassociated unlike eager's flat loop over the stored product: about half of random inputs
differed in the last bit."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.kernels.support.loops import lanes
from dispatch_jit.kernels.support.loops import parallel as loops_parallel


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


def _lane_sum(x: np.ndarray, lo: int = 0, hi: int | None = None) -> float:
    """lanes.py's order, in Python: element g into lane g % nl, then the pairwise merge."""
    x = x.reshape(-1)[lo:hi].astype(np.float64)
    nl = lanes.TAIL
    while 4 * nl < x.size and nl < lanes.LANES:
        nl *= 2
    ln = [0.0] * nl
    for g, v in enumerate(x.tolist()):
        ln[g % nl] += v
    while nl > 1:
        nl //= 2
        ln = [ln[i] + ln[i + nl] for i in range(nl)]
    return ln[0]


@pytest.mark.parametrize("n", [1, 7, 128, 129, 1000, 40_000])
def test_eager_sum_folds_in_the_written_order(n):
    # the order is the definition, not whatever a compiler picks: eager's kernel gives its bits
    x = np.random.default_rng(n).uniform(-1.0, 2.0, n)
    assert dj.from_numpy(x).sum().item() == _lane_sum(x)
    # a strided input walks its runs in the same order
    y = np.random.default_rng(n).uniform(-1.0, 2.0, (n, 3))
    assert dj.from_numpy(y)[:, 1].sum().item() == _lane_sum(y[:, 1].copy())


# (shape of a, shape of the broadcast b, reduced dims): broadcast operands of every rank, full
# reductions and subsets with the innermost dimension reduced or kept
CASES = [((300,), (1,), None), ((3, 4), (1, 1), None), ((37, 41), (37, 1), None), ((5, 300), (5, 1), (1,)),
         ((200, 3), (1, 3), (0,)), ((4, 50, 30), (1, 50, 1), (0, 2)), ((20, 30, 40), (30, 1), (1, 2)),
         ((6, 5, 40), (5, 1), (0, 1)), ((3, 4, 5, 70), (1, 4, 1, 1), None), ((3, 4, 5, 70), (4, 1, 70), (0, 3)),
         ((3, 4, 5, 70), (1,), (1, 2)),
         # a size-1 last dimension: eager's kernel folds as the innermost dimension of size > 1 says
         ((200, 3, 1), (1, 3, 1), (0, 2)), ((200, 3, 1), (3, 1), (0, 1)), ((1, 200, 3), (1, 1, 3), (1,))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,bshape,dims", CASES)
def test_fused_sum_over_broadcast_operands_equals_eager(shape, bshape, dims, dtype):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    a = dj.from_numpy(rng.uniform(-1.0, 2.0, shape).astype(dtype))
    b = dj.from_numpy(rng.uniform(0.5, 2.0, bshape).astype(dtype))
    for keepdim in (False, True):
        if dims is None:
            fn = (lambda a, b: (a * b).sum((tuple(range(len(shape)))), keepdim=True)) if keepdim else \
                (lambda a, b: (a * b).sum())
        else:
            fn = lambda a, b: (a * b + 1).sum(dims, keepdim=keepdim)
        want, got = fn(a, b).numpy(), dj.compile(fn)(a, b).numpy()
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if dims is None:     # mean divides the same sum
        fn = lambda a, b: (a - b).mean()
        np.testing.assert_array_equal(dj.compile(fn)(a, b).numpy(), fn(a, b).numpy())


@pytest.fixture
def restore_threads():
    old = dj.get_num_threads()
    yield
    dj.set_num_threads(old)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [(1 << 18) - 3, (1 << 18) + 5, (1 << 20) + 77])
def test_fused_sum_around_the_parallel_thresholds_equals_eager(n, threads, restore_threads, monkeypatch):
    # 2**18: fused loops compile parallel; 2**20: a full reduction folds in chunks (forced on here,
    # whatever the probe says of this machine), as many as the thread count asks, in eager and fused
    monkeypatch.setattr(loops_parallel, "PARALLEL", True)
    dj.set_num_threads(threads)
    rng = np.random.default_rng(n)
    a = dj.from_numpy(rng.uniform(-1.0, 2.0, (n // 64, 64)).astype(np.float32))
    b = dj.from_numpy(rng.uniform(0.5, 2.0, (1, 64)).astype(np.float32))
    for fn in (lambda a, b: (a * b).sum(), lambda a, b: (a * a).sum(), lambda a, b: (a * b).sum(1)):
        np.testing.assert_array_equal(dj.compile(fn)(a, b).numpy(), fn(a, b).numpy())
    if n > 1 << 20:
        # two long outputs: eager folds each in chunks on threads, where it pays
        c = dj.from_numpy(rng.uniform(-1.0, 2.0, (2, n // 2)).astype(np.float32))
        fn = lambda c: (c * 2).sum(1)
        np.testing.assert_array_equal(dj.compile(fn)(c).numpy(), fn(c).numpy())
        x = (a * b).numpy()
        nc = loops_parallel.full_chunks(x.size)
        assert nc == -(-x.size // loops_parallel.chunk_length(x.size, 4 * threads)) > 1
        blk = -(-x.size // nc)
        parts = [_lane_sum(x, c * blk, min(x.size, c * blk + blk)) for c in range(nc)]
        total = 0.0
        for p in parts:
            total += p
        assert (a * b).sum().item() == np.float32(total)


@pytest.mark.parametrize("n", [(1 << 18) + 5, (1 << 20) + 77])
def test_fused_fold_after_exp_equals_eager(n, monkeypatch):
    # the flat fold of a contiguous chain (its lane slices vectorize on unsigned indices): from the
    # parallel compile's threshold on in one chunk (run serially), and in chunks on threads
    monkeypatch.setattr(loops_parallel, "PARALLEL", True)
    rng = np.random.default_rng(n)
    fns = {"float32": (lambda x, y: (x * y + 1).exp().sum(), lambda x, y: (x * y + 1).exp().mean()),
           "float64": (lambda x, y: (x * y + 1).exp().sum(),)}
    for dtype, chain in fns.items():
        x, y = (dj.from_numpy((rng.standard_normal(n) * 0.5).astype(dtype)) for _ in range(2))
        for fn in chain:
            want = fn(x, y).numpy()
            assert np.isfinite(want) and want != 0
            np.testing.assert_array_equal(dj.compile(fn)(x, y).numpy(), want)
