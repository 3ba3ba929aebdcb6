"""bfloat16 on CUDA: conversions (dispatch_jit/cuda/copy.py) and reductions (kernels/reduction/cuda.py)
against the CPU's bits.

Runs on Numba's CUDA simulator where there is no GPU (tests/conftest.py): tiny arrays, few
launches.  The `gpu`-marked test runs the long reductions (many blocks, warp shuffles) on hardware.
"""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import bf16
from dispatch_jit.errors import NoKernelError

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")

# edge words: zeros, a subnormal, ones and their neighbours, the largest finite, infinities, NaN
EDGE = [0x0000, 0x8000, 0x0001, 0x3F80, 0x3F81, 0xBFFF, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0xC2F7]


def words(t):
    return bf16.bits(t.cpu()._data)


def from_words(w):
    return dj.tensor(bf16.to_float32(bf16.words_to_storage(np.asarray(w, np.uint16))), dtype=dj.bfloat16)


def same(got, want):
    assert got.device.type == "cuda" and got.dtype is want.dtype and got.shape == want.shape
    assert got.cpu()._data.tobytes() == want._data.tobytes(), (got.cpu(), want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator converts NaN/inf with NumPy scalars
def test_conversions_to_and_from_bfloat16_round_as_the_cpu():
    x = from_words(EDGE)
    xc = x.cuda()
    for dt in (dj.float32, dj.float64, dj.float16, dj.bool):
        same(xc.to(dt), x.to(dt))
    same(xc.float(), x.float())
    # float32 ties (to even), values past bfloat16's max, NaN: the CPU's rounding, on the device
    f = np.array([1.00390625, 1.01171875, -1.00390625, 3.3, 3.4e38, 3.39e38, np.inf, np.nan, 1e-40],
                 np.float32)
    same(dj.tensor(f).cuda().to(dj.bfloat16), dj.tensor(f).to(dj.bfloat16))
    same(dj.tensor(f).cuda().bfloat16(), dj.tensor(f).bfloat16())
    # float64 and integers go through float32, as on the CPU (2**24 + 1 is not a float32)
    d = np.array([1.0 + 2 ** -8 + 2 ** -30, 16777217.0, -2.5], np.float64)
    same(dj.tensor(d).cuda().to(dj.bfloat16), dj.tensor(d).to(dj.bfloat16))
    i = np.array([0, 257, -259, 2 ** 24 + 1, 2 ** 40], np.int64)
    same(dj.tensor(i).cuda().to(dj.bfloat16), dj.tensor(i).to(dj.bfloat16))
    b = np.array([True, False])
    same(dj.tensor(b).cuda().to(dj.bfloat16), dj.tensor(b).to(dj.bfloat16))
    # copies keep the words: clone, a strided view made contiguous, cat, fill_
    same(xc.clone(), x.clone())
    same(xc.reshape(3, 4).t().contiguous(), x.reshape(3, 4).t().contiguous())
    same(dj.cat([xc[:2], xc[5:]]), dj.cat([x[:2], x[5:]]))
    same(xc.clone().fill_(2.7), x.clone().fill_(2.7))
    assert words(xc.cpu()).tolist() == EDGE and xc.cpu().device.type == "cpu"


def _data(shape, seed):
    g = np.random.default_rng(seed)
    return dj.tensor((g.standard_normal(shape) * 3).astype(np.float32)).bfloat16()


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "prod"])
def test_reductions_accumulate_as_float32_and_round_once(op):
    # (3, 40): rows of 40 take the tree kernel (32-thread blocks in the simulator, two blocks for the full
    # reduction), columns of 3 the one-thread-per-output kernel; the CPU's bits each time
    x = _data((3, 40), seed=1)
    if op == "prod":
        x = (x / 8.0 + 1.0)
    xc = x.cuda()
    f = getattr(dj, op)
    for kw in ({}, {"dim": 1}, {"dim": 0}, {"dim": 0, "keepdim": True}):
        same(f(xc, **kw), f(x, **kw))
    same(f(xc[:, ::3], dim=1), f(x[:, ::3], dim=1))          # strided


def test_other_reductions_dtype_argument_and_empty_inputs():
    x = _data((2, 5), seed=2)
    xc = x.cuda()
    for f in (lambda t: t.argmax(1), lambda t: t.var(1), lambda t: t.std(), lambda t: (t > 0).any(1),
              lambda t: t.sum(1, dtype=dj.float32), lambda t: t.float().sum(0, dtype=dj.bfloat16),
              lambda t: dj.logsumexp(t, 1), lambda t: t[:, :0].sum(1), lambda t: t[:, :0].prod(1)):
        same(f(xc), f(x))
    assert "aten::sum" in bf16.supported_ops("CUDA") and "aten::to" in bf16.supported_ops("CUDA")
    assert ("sum", "bfloat16") in {k[:2] for k in dj.kernels.reduction.cuda.compiled_kernels()}


def test_gradients_through_reductions_and_casts_equal_the_cpus():
    v = _data((2, 5), seed=4)
    grads = []
    for dev in ("cpu", "cuda"):
        x = v.clone().to(dev).requires_grad_()
        ((x * x).sum() + x.mean(1).sum() + x.amax(1).sum() + x.float().sum()).backward()
        grads.append(x.grad)
    same(grads[1], grads[0])
    assert grads[1].dtype is dj.bfloat16


def test_ops_still_without_a_cuda_bfloat16_kernel_refuse_it():
    xc = from_words([0x3F80, 0x4020]).cuda()
    with pytest.raises(NoKernelError, match=r"'aten::matmul' has no bfloat16 kernel on CUDA.*\.cpu\(\)"):
        dj.matmul(xc, xc)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "prod"])
def test_real_gpu_long_bfloat16_reductions(op):
    # hardware: 256-thread blocks, warp shuffles, several blocks per output and the combine pass.
    # amax/amin are exact; sums fold float32 in float64 in another order than the CPU's, so the
    # float32 results may differ in their last bit and, rarely, the rounded bfloat16 by one ulp
    for shape, dim in (((300_000,), None), ((37, 5000), 1), ((5000, 37), 0)):
        x = _data(shape, seed=3)
        if op == "prod":
            x = (x / 1e4 + 1.0)
        kw = {} if dim is None else {"dim": dim}
        got, want = getattr(dj, op)(x.cuda(), **kw).cpu(), getattr(dj, op)(x, **kw)
        assert got.dtype is dj.bfloat16 and got.shape == want.shape
        if op in ("amax", "amin"):
            assert got._data.tobytes() == want._data.tobytes()
        else:
            np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 ** -7, atol=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_compiled_chain_on_cuda_is_one_fused_kernel_with_eagers_bits():
    # a transposed bfloat16 view, a broadcast row, an int32 operand (-> bfloat16), a float32 one (-> float32),
    # edge words (NaN, inf, ties): each node rounded where eager stores it; the sum after it is eager's step
    g = np.random.default_rng(5)
    a = dj.tensor(g.standard_normal((6, 4)).astype(np.float32)).bfloat16().t().cuda()
    b = from_words(EDGE[:6]).cuda()
    k = dj.tensor(g.integers(-3, 4, (4, 6)).astype(np.int32)).cuda()
    w = dj.tensor(g.standard_normal((4, 6)).astype(np.float32)).cuda()

    def chain(x, y, i, f):
        h = dj.exp(x * y + i) - 0.25
        return h * 3.0, h / f, (h * 2.0).sum()
    f = dj.compile(chain)
    got, want = f(a, b, k, w), chain(a, b, k, w)
    cpu = chain(a.cpu(), b.cpu(), k.cpu(), w.cpu())
    for x, y, z in zip(got, want, cpu):
        same(x, y.cpu())
        same(x, z)
    plan = f.explain()
    assert "compiled plan: 1 fused loop(s), 1 eager step(s)" in plan and "sum of bfloat16 on cuda" in plan, plan
