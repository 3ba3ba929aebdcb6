"""Compiled mode on CUDA tensors (dispatch_jit/compiler/cuda.py).

A fused region on CUDA tensors is one ``numba.cuda.jit`` grid-stride kernel.
These tests run under Numba's CUDA simulator on machines without a GPU (a
launch runs one Python thread per CUDA thread), so arrays are tiny (<= 64
elements) and each test launches a few kernels.  Compiled results are
compared with eager CUDA and with NumPy.
"""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.cuda import CudaFusedStep
from dispatch_jit.compiler.run.steps import FusedStep
from dispatch_jit.compiler.run.steps import EagerStep
from dispatch_jit.cuda.codegen import compiled_cuda_kernels

pytestmark = [pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device or simulator"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]   # the simulator computes with NumPy scalars


def _f(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def _ref(a, b, c):
    a, b, c = (np.asarray(x, np.float32) for x in (a, b, c))
    return np.maximum((a * b + c) * np.float32(2.0) - a, np.float32(0.0)) * np.exp(-b)


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _cuda(x):
    return dj.tensor(x).cuda()


def _plan(f):
    return f._entry().plan


@pytest.fixture
def launches(monkeypatch):
    """Counts kernel launches (not device-function calls) under the simulator."""
    if not dj.cuda.is_simulator():
        pytest.skip("counts launches through the simulator's kernel class")
    from numba.cuda.simulator import kernel as sim
    count = [0]
    orig = sim.FakeCUDAKernel.__call__

    def counting(self, *args):
        if not self._device and not sim._kernel_context:
            count[0] += 1
        return orig(self, *args)

    monkeypatch.setattr(sim.FakeCUDAKernel, "__call__", counting)
    return count


def test_issue_function_matches_eager_and_numpy():
    f = dj.compile(_f)
    x, y, z = _data(4, 8), _data(4, 8, seed=1), _data(8, seed=2)
    a, b, c = _cuda(x), _cuda(y), _cuda(z)
    out = f(a, b, c)
    assert out.is_cuda and out.dtype == dj.float32 and tuple(out.shape) == (4, 8)
    np.testing.assert_allclose(out.numpy(), _f(a, b, c).numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out.numpy(), _ref(x, y, z), rtol=1e-6, atol=1e-7)
    plan = _plan(f)
    assert len(plan.fused) == 1 and isinstance(plan.fused[0], CudaFusedStep)
    assert not any(isinstance(s, EagerStep) for s in plan.steps)
    src = f.code()
    assert "cuda.grid(1)" in src and "while i < total:" in src and "prange" not in src
    text = str(f.explain())
    assert "device cuda" in text and "numba.cuda.jit" in text
    assert "@cuda" in str(f.graph())


def test_one_kernel_launch_per_region(launches):
    f = dj.compile(_f)
    a, b, c = _cuda(_data(2, 8)), _cuda(_data(2, 8, seed=1)), _cuda(_data(2, 8, seed=2))
    f(a, b, c)                                   # trace + first launch
    before = launches[0]
    out = f(a, b, c)
    assert launches[0] - before == 1             # the whole chain: one kernel, no intermediates
    assert _plan(f).fused[0].launches == 2
    out.numpy()


def test_broadcasting_and_strided_kernel():
    f = dj.compile(lambda a, b: (a + b) * 3.0 - a * b)
    x, y = _data(4, 1), _data(1, 6, seed=1)
    out = f(_cuda(x), _cuda(y))
    np.testing.assert_allclose(out.numpy(), (x + y) * np.float32(3.0) - x * y, rtol=1e-6)
    step = _plan(f).fused[0]
    assert list(step.kernels) == [False]         # inputs not of the output's shape: the strided kernel
    assert "_r % n1" in f.code(flat=False)


def test_python_scalar_argument_reuses_the_kernel():
    f = dj.compile(lambda a, s: a * s + s * 0.5)
    x = _data(10)
    a = _cuda(x)
    np.testing.assert_allclose(f(a, 2.0).numpy(), x * np.float32(2.0) + np.float32(1.0), rtol=1e-6)
    n = compiled_cuda_kernels()
    np.testing.assert_allclose(f(a, -3.0).numpy(), x * np.float32(-3.0) - np.float32(1.5), rtol=1e-6)
    # a new scalar value is a new key (scalars are keyed by value) but the same kernel source
    assert compiled_cuda_kernels() == n
    assert f.cache_info().traces == 2


def test_non_contiguous_input():
    f = dj.compile(_f)
    x, y, z = _data(6, 4), _data(4, 6, seed=1), _data(6, seed=2)
    a = _cuda(x).T                                # (4, 6), transposed strides
    b, c = _cuda(y), _cuda(z)
    assert not a.is_contiguous()
    out = f(a, b, c)
    np.testing.assert_allclose(out.numpy(), _ref(x.T, y, z), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out.numpy(), _f(a, b, c).numpy(), rtol=1e-6, atol=1e-7)
    assert list(_plan(f).fused[0].kernels) == [False]


def test_sliced_input():
    f = dj.compile(lambda a, b: dj.exp(a) * b + 1.0)
    x, y = _data(4, 8), _data(4, 4, seed=1)
    a = _cuda(x)[:, ::2]
    out = f(a, _cuda(y))
    np.testing.assert_allclose(out.numpy(), np.exp(x[:, ::2]) * y + np.float32(1.0), rtol=1e-6)


def test_chain_ending_in_sum(launches):
    f = dj.compile(lambda a, b: (a * b + 1.0).relu().sum())
    x, y = _data(4, 8), _data(4, 8, seed=1)
    a, b = _cuda(x), _cuda(y)
    f(a, b)
    before = launches[0]
    out = f(a, b)
    assert launches[0] - before == 2              # the fused kernel (block partials), then their merge
    assert out.is_cuda and out.dtype == dj.float32 and out.ndim == 0
    np.testing.assert_allclose(out.numpy(), ((x * y + np.float32(1.0)).clip(0)).sum(dtype=np.float64),
                               rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), f.fn(a, b).numpy(), rtol=1e-6)
    plan = _plan(f)
    assert len(plan.fused) == 1 and plan.fused[0].region.reduce is not None
    assert not any(isinstance(s, EagerStep) for s in plan.steps)
    assert "cuda.shared.array" in f.code() and "fused_0_final" in f.code()


@pytest.mark.parametrize("kind", ["mean", "max", "min", "prod"])
def test_full_reduction_epilogues(kind):
    f = dj.compile(lambda a, b: getattr(a * b - 0.25, kind)())
    x, y = _data(5, 7), _data(5, 7, seed=1)
    a, b = _cuda(x), _cuda(y)
    out, ref = f(a, b), f.fn(a, b)
    assert out.dtype == ref.dtype and out.ndim == ref.ndim == 0
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5)
    assert _plan(f).fused[0].region.reduce is not None


def test_nan_propagates_through_fused_max():
    x = _data(40)
    x[17] = np.nan
    f = dj.compile(lambda a: (a * 2.0).max())
    assert np.isnan(f(_cuda(x)).numpy())


def test_integer_sum_and_keepdim():
    f = dj.compile(lambda i: (i * 3 - 1).sum())
    g = dj.compile(lambda a: (a + 1.0).sum(axis=(0, 1), keepdim=True))
    iv = np.arange(-10, 30, dtype=np.int32).reshape(5, 8)
    out = f(_cuda(iv))
    assert out.dtype == dj.int64 and int(out.numpy()) == int((iv.astype(np.int64) * 3 - 1).sum())
    x = _data(3, 4)
    r = g(_cuda(x))
    assert tuple(r.shape) == (1, 1)
    np.testing.assert_allclose(r.numpy(), (x + np.float32(1.0)).sum(keepdims=True), rtol=1e-6)


def test_reduction_over_axes_runs_the_eager_cuda_kernel():
    g = dj.compile(lambda a, b: (a * b - 0.5).sum(axis=1))
    x, y = _data(4, 8), _data(4, 8, seed=1)
    out = g(_cuda(x), _cuda(y))
    np.testing.assert_allclose(out.numpy(), (x * y - np.float32(0.5)).sum(axis=1), rtol=1e-5, atol=1e-6)
    plan = _plan(g)
    assert len(plan.fused) == 1 and plan.fused[0].region.reduce is None
    assert [s.op.name() for s in plan.steps if isinstance(s, EagerStep)] == ["aten::sum"]
    assert "eager CUDA reduction kernel" in str(g.explain())


def test_no_recompile_across_sizes():
    f = dj.compile(_f)
    for k, n in enumerate((3, 17, 40)):
        x, y, z = _data(n), _data(n, seed=1), _data(n, seed=2)
        out = f(_cuda(x), _cuda(y), _cuda(z))
        np.testing.assert_allclose(out.numpy(), _ref(x, y, z), rtol=1e-6, atol=1e-7)
        if k == 0:
            kernels = compiled_cuda_kernels()
    info = f.cache_info()
    assert info.traces == 1 and info.entries == 1 and info.hits == 2
    assert compiled_cuda_kernels() == kernels


def test_cpu_and_cuda_calls_keep_separate_entries():
    f = dj.compile(_f)
    x, y, z = _data(3, 5), _data(3, 5, seed=1), _data(5, seed=2)
    out_cpu = f(dj.tensor(x), dj.tensor(y), dj.tensor(z))
    out_cuda = f(_cuda(x), _cuda(y), _cuda(z))
    assert not out_cpu.is_cuda and out_cuda.is_cuda
    np.testing.assert_allclose(out_cuda.numpy(), out_cpu.numpy(), rtol=1e-6, atol=1e-7)
    info = f.cache_info()
    assert info.entries == 2 and info.traces == 2
    kinds = sorted(type(e.plan.fused[0]).__name__ for e in f._cache.values())
    assert kinds == ["CudaFusedStep", "FusedStep"]
    assert "device cpu -> cuda:0" in str(f.explain())
    out_cpu2 = f(dj.tensor(x), dj.tensor(y), dj.tensor(z))       # both entries still hit
    assert not out_cpu2.is_cuda and f.cache_info().traces == 2
    assert isinstance(f._last.plan.fused[0], FusedStep)


def test_multiple_outputs_and_mixed_dtypes():
    def h(i, a):
        s = i * 3 + 1                # int32
        m = dj.where(a > 0.0, a * s, -a)
        return s, m
    f = dj.compile(h)
    iv = np.arange(-4, 4, dtype=np.int32)
    x = _data(8)
    s, m = f(_cuda(iv), _cuda(x))
    es, em = h(_cuda(iv), _cuda(x))
    assert s.dtype == es.dtype == dj.int32 and m.dtype == em.dtype
    np.testing.assert_array_equal(s.numpy(), es.numpy())
    np.testing.assert_allclose(m.numpy(), em.numpy(), rtol=1e-6)
    assert len(_plan(f).fused) == 1


def test_device_move_inside_the_function_runs_eagerly():
    f = dj.compile(lambda a: (a * 2.0).cpu() + 1.0)
    x = _data(5)
    out = f(_cuda(x))
    assert not out.is_cuda
    np.testing.assert_allclose(out.numpy(), x * np.float32(2.0) + np.float32(1.0), rtol=1e-6)
    assert "moving a traced tensor to cpu" in str(f.explain())


def test_lazy_mode_keeps_cuda_tensors_eager_and_correct():
    x, y = _data(3, 4), _data(3, 4, seed=1)
    a, b = _cuda(x), _cuda(y)
    ref = (a * b + 1.0).relu().sum().numpy()
    with dj.execution_mode("compiled"):
        out = (a * b + 1.0).relu().sum()
        mixed = out.cpu() + dj.tensor(x).sum()
        assert out.is_cuda
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
        np.testing.assert_allclose(mixed.numpy(), ref + x.sum(dtype=np.float64), rtol=1e-5)


# -- the global compiled mode records CUDA ops too (compiler/lazy) ---------------------------------------
def test_global_compiled_mode_records_cuda_ops_and_fuses_them():
    from dispatch_jit.compiler.lazy import LazyTensor, lazy_info
    a0, b0, c0 = _data(4, 8, seed=1), _data(4, 8, seed=2), _data(8, seed=3)
    a, b, c = _cuda(a0), _cuda(b0), _cuda(c0)
    want = _f(a, b, c)
    with dj.execution_mode("compiled"):
        before = lazy_info()
        y = _f(a, b, c)
        s = y.sum()
        mid = lazy_info()
        assert type(y) is LazyTensor and type(s) is LazyTensor
        assert mid["flushes"] == before["flushes"] and mid["eager_ops"] == before["eager_ops"]
        assert y.device == a.device and y.is_cuda and y.shape == (4, 8) and s.shape == ()
        got, total = y.cpu().numpy(), s.item()
        after = lazy_info()
    assert after["flushes"] == before["flushes"] + 1          # one flush: the chain and its sum, fused
    np.testing.assert_array_equal(got, want.cpu().numpy())    # eager CUDA's bits
    np.testing.assert_allclose(got, _ref(a0, b0, c0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total, float(want.sum().item()), rtol=1e-5)


def test_global_compiled_mode_cuda_views_and_device_errors():
    from dispatch_jit.errors import DeviceMismatchError
    a = _cuda(_data(4, 8, seed=4))
    want = (a * 2.0).T[1:].cpu().numpy()
    with dj.execution_mode("compiled"):
        v = (a * 2.0).T[1:]                                    # recorded views of a pending CUDA value
        assert v.shape == (7, 4) and v.is_cuda
        np.testing.assert_array_equal(v.cpu().numpy(), want)
        with pytest.raises(DeviceMismatchError):
            dj.add(a * 2.0, dj.ones(4, 8))                     # eager mode's error, not a recorded mix
