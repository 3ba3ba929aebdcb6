"""CUDA tensors: placement, transfers, views, indexing, the allocator and interop.

Runs on the Numba CUDA simulator where there is no GPU (tests/conftest.py),
so every test keeps to tiny arrays and few kernel launches.
"""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.cuda.allocator import CachingAllocator, round_size
from dispatch_jit.errors import CudaOutOfMemoryError, DeviceMismatchError, ShapeError

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")


def host(t):
    return np.asarray(t.numpy())


def test_creation_and_transfer_round_trip():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dj.tensor(x, device="cuda")
    assert t.is_cuda and t.device == dj.device("cuda:0") and str(t.device) == "cuda:0"
    assert dj.dispatch_keys(t) == dj.DispatchKeySet(dj.DispatchKey.CUDA)
    np.testing.assert_array_equal(t.numpy(), x)
    assert t.cpu().device == dj.device("cpu") and not t.cpu().is_cuda
    assert t.tolist() == x.tolist() and t[1, 2].item() == 5.0
    assert "device='cuda:0'" in repr(t)
    assert t.cuda() is t and t.to("cuda") is t
    np.testing.assert_array_equal(host(dj.zeros(2, 2, device="cuda", dtype=dj.int32)), np.zeros((2, 2), np.int32))
    np.testing.assert_array_equal(host(dj.full((3,), 2.5, device="cuda")), np.full(3, 2.5, np.float32))
    o = dj.ones_like(t)
    assert o.is_cuda and o.dtype is dj.float32
    np.testing.assert_array_equal(host(o), np.ones((2, 3), np.float32))
    assert dj.rand(4, device="cuda").is_cuda and dj.arange(3, device="cuda").tolist() == [0, 1, 2]


def test_bool_and_scalar_conversions_synchronize():
    t = dj.tensor([3.0], device="cuda")
    assert bool(t) and float(t) == 3.0 and int(t) == 3
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(dj.tensor([1.0, 2.0], device="cuda"))


def test_mixed_devices_raise_the_pytorch_message():
    a = dj.ones(3, device="cuda")
    with pytest.raises(DeviceMismatchError, match="Expected all tensors to be on the same device, but found "
                                                   "cuda:0 and cpu"):
        dj.add(a, dj.ones(3))


def test_views_share_storage_and_match_numpy():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    t = dj.tensor(x, device="cuda")
    cases = [
        (t.permute((2, 0, 1)), x.transpose(2, 0, 1)),
        (t.transpose(0, 2), x.swapaxes(0, 2)),
        (t.reshape((6, 4)), x.reshape(6, 4)),
        (t.unsqueeze(1).squeeze(1), x),
        (t.narrow(2, 1, 2), x[:, :, 1:3]),
        (t[1, :, ::2], x[1, :, ::2]),
        (t[..., ::-1], x[..., ::-1]),
        (t[:, None, 1], x[:, None, 1]),
        (t.flatten(), x.reshape(-1)),
    ]
    for v, ref in cases:
        # a size-1 dim's stride is never stepped (t[:, None] is unsqueeze, whose stride for it is not NumPy's)
        assert v.is_cuda and v.shape == ref.shape and [s for s, n in zip(v.strides, v.shape) if n > 1] == \
            [s // 8 for s, n in zip(ref.strides, ref.shape) if n > 1]
        np.testing.assert_array_equal(host(v), ref)
    e = dj.tensor([[1.0], [2.0]], device="cuda").expand((2, 3))
    assert e.strides == (1, 0)
    np.testing.assert_array_equal(host(e), [[1, 1, 1], [2, 2, 2]])


def test_reshape_copies_only_when_it_must():
    t = dj.arange(6.0, device="cuda").reshape((2, 3))
    assert t.reshape((3, 2))._data.storage is t._data.storage     # a view
    tt = t.T.reshape((6,))                                      # strides forbid a view: a device copy
    assert tt._data.storage is not t._data.storage
    np.testing.assert_array_equal(host(tt), np.arange(6.0).reshape(2, 3).T.reshape(6))
    with pytest.raises(ShapeError, match="view"):
        t.T.view((6,))
    with pytest.raises(ShapeError, match="invalid for input of size 6"):
        t.reshape((4, 2))


def test_cat_stack_cast_clone():
    a = dj.tensor([[1, 2]], device="cuda", dtype=dj.int32)
    b = dj.tensor([[3.5, 4.5]], device="cuda")
    c = dj.cat([a, b], 0)
    assert c.dtype is dj.float32 and c.is_cuda
    np.testing.assert_array_equal(host(c), [[1, 2], [3.5, 4.5]])
    np.testing.assert_array_equal(host(dj.stack([b, b], 1)), np.stack([[[3.5, 4.5]]] * 2, 1))
    assert b.to(dj.int64).tolist() == [[3, 4]] and b.to(dj.bool).dtype is dj.bool
    cl = b.T.clone()
    assert cl.is_contiguous() and cl.tolist() == [[3.5], [4.5]]
    with pytest.raises(ShapeError, match="sizes of tensors must match"):
        dj.cat([a, dj.ones(1, 3, device="cuda")], 0)


def test_indexing_basic_advanced_and_assignment():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dj.tensor(x, device="cuda")
    idx = dj.tensor([2, 0, 2], device="cuda")
    np.testing.assert_array_equal(host(t[idx]), x[[2, 0, 2]])
    np.testing.assert_array_equal(host(t[[0, 2], [1, 3]]), x[[0, 2], [1, 3]])
    np.testing.assert_array_equal(host(t[t.cpu() > 5]), x[x > 5])
    t[0] = 100.0
    t[:, 3] = dj.tensor([7.0, 8.0, 9.0], device="cuda")
    t[[1, 2], [0, 0]] = -1.0
    x[0] = 100.0
    x[:, 3] = [7, 8, 9]
    x[[1, 2], [0, 0]] = -1
    np.testing.assert_array_equal(host(t), x)


def test_gradients_through_views_and_indexing_stay_on_device():
    w = dj.tensor([1.0, 2.0, 3.0, 4.0], device="cuda", requires_grad=True)
    assert dj.DispatchKey.AutogradCUDA in dj.dispatch_keys(w)
    y = w[dj.tensor([0, 0, 3])]
    y.backward(dj.ones_like(y))
    assert w.grad.is_cuda
    np.testing.assert_array_equal(host(w.grad), [2.0, 0.0, 0.0, 1.0])
    c = dj.tensor([1.0, 2.0], requires_grad=True)          # a CPU leaf used on the GPU
    g = c.cuda()
    g.backward(dj.tensor([5.0, 6.0], device="cuda"))
    assert not c.grad.is_cuda and c.grad.tolist() == [5.0, 6.0]


def test_cuda_array_interface_round_trip_without_copy():
    t = dj.arange(6.0, device="cuda").reshape((2, 3))
    iface = t.__cuda_array_interface__
    assert iface["shape"] == (2, 3) and iface["typestr"] == "<f4" and iface["version"] == 3
    v = dj.asarray(t.T)          # a Tensor passes through; a foreign object is wrapped:

    class Foreign:
        __cuda_array_interface__ = t.T.__cuda_array_interface__
    f = dj.asarray(Foreign())
    assert f.is_cuda and f.shape == (3, 2)
    np.testing.assert_array_equal(host(f), host(v))
    t[0, 0] = 42.0                        # shared memory: the wrapper sees the write
    assert f[0, 0].item() == 42.0
    assert not hasattr(dj.ones(2), "__cuda_array_interface__")


def test_caching_allocator_reuses_blocks():
    gc.collect()            # tensors of earlier tests still held by reference cycles would be freed below
    a = dj.cuda.memory_stats()
    base = dj.cuda.memory_allocated()
    t = dj.empty(100, device="cuda")          # 400 bytes -> a 512-byte block
    assert dj.cuda.memory_allocated() == base + 512
    assert dj.cuda.max_memory_allocated() >= base + 512
    del t
    gc.collect()
    assert dj.cuda.memory_allocated() == base
    dj.empty(120, device="cuda")                 # same size class: no driver call
    b = dj.cuda.memory_stats()
    assert b["num_cache_hits"] > a["num_cache_hits"]
    dj.cuda.empty_cache()
    assert dj.cuda.memory_stats()["num_cached_blocks"] == 0
    assert round_size(1) == 512 and round_size(513) == 1024 and round_size((1 << 20) + 1) == 2 << 20


def test_out_of_memory_retries_once_then_reports_sizes():
    alloc = CachingAllocator()
    calls = []

    def fail(size):
        calls.append(size)
        raise MemoryError("CUDA_ERROR_OUT_OF_MEMORY")
    alloc.malloc_fn = fail
    with pytest.raises(CudaOutOfMemoryError, match=r"tried to allocate 1000 bytes .*already allocated"):
        alloc.malloc(1000)
    assert len(calls) == 2                       # the retry after emptying the cache


def test_no_device_gives_a_clear_error():
    # without a GPU and with the simulator off, CUDA is unavailable and says so
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has a GPU")
    code = ("import dispatch_jit as dj\n"
            "assert not dj.cuda.is_available()\n"
            "try:\n    dj.zeros(2, device='cuda')\nexcept dj.errors.CudaUnavailableError as e:\n    print(e)\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "no CUDA device is available" in r.stdout


@pytest.mark.gpu
def test_direct_launches_equal_the_dispatcher():
    # after a kernel's first launch through numba.cuda's dispatcher, later launches with the same
    # argument types pack the arguments themselves (dispatch_jit/cuda/launch.py)
    from dispatch_jit.cuda import launch
    x = np.linspace(-3, 3, 1001)
    a, b = dj.tensor(x, device="cuda"), dj.tensor(x[::-1].copy(), device="cuda", dtype=dj.float32)
    before = launch.direct_launches()
    for _ in range(3):
        r1 = dj.add(a, b, alpha=2.5)                   # float64 compute, a float static
        r2 = a[::3] * 2                                # strided, a Python scalar
        r3 = (b > 0).sum()                             # bool -> int64 reduction
        r4 = dj.tensor(np.arange(12).reshape(3, 4), device="cuda").sum(1)
    assert launch.direct_launches() > before
    # the CPU kernels' bits: a float product on CUDA is never contracted into an FMA
    ac, bc = a.cpu(), b.cpu()
    np.testing.assert_array_equal(host(r1), dj.add(ac, bc, alpha=2.5).numpy())
    np.testing.assert_array_equal(host(r2), x[::3] * 2)
    assert r3.item() == int((bc > 0).sum().item())
    np.testing.assert_array_equal(host(r4), np.arange(12).reshape(3, 4).sum(1))


def test_a_numba_cuda_that_cannot_compile_gives_one_clear_error(monkeypatch):
    # numba-cuda 0.30 with NumPy 2.5 fails deep inside Numba at every kernel compile (np.row_stack):
    # require() names both versions and the fix instead
    import importlib
    from dispatch_jit.cuda import runtime
    from dispatch_jit.errors import CudaUnavailableError
    real = importlib.import_module

    def broken(name, *a, **k):
        if name == "numba.cuda.np.arrayobj":
            raise AttributeError("module 'numpy' has no attribute 'row_stack'")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", broken)
    monkeypatch.setattr(runtime, "is_simulator", lambda: False)
    probe = runtime.compiler_problem
    probe.cache_clear()
    try:
        msg = probe()
        assert "cannot compile CUDA kernels with NumPy" in msg and "row_stack" in msg and "numpy<2.5" in msg
        monkeypatch.setattr(runtime, "compiler_problem", lambda: msg)
        with pytest.raises(CudaUnavailableError, match="cannot compile CUDA kernels"):
            runtime.require(0)
    finally:
        probe.cache_clear()      # the real answer again for the tests after this one
