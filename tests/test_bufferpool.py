"""The output buffer pool: a block is handed out again only when nothing can
observe it (no array, view, memoryview or weak reference reaches it); counts,
size classes, the cap, emptying, threads."""

import weakref

import numpy as np
import pytest

from dispatch_jit.bufferpool import BufferPool, size_class
from helpers import run_threads

KB = 1024


def addr(a) -> int:
    return a.__array_interface__["data"][0]


def pool(**kw):
    kw.setdefault("max_bytes", 1 << 20)
    kw.setdefault("min_bytes", 4 * KB)
    return BufferPool(**kw)


def test_reuses_a_block_once_its_array_is_gone():
    p = pool()
    a = p.empty((2048,), np.float32)
    first = addr(a)
    b = p.empty((2048,), np.float32)
    assert addr(b) != first                       # a is alive: a new block
    del a
    c = p.empty((2048,), np.float32)
    assert addr(c) == first
    info = p.info()
    assert (info.hits, info.misses, info.blocks) == (1, 2, 2)


@pytest.mark.parametrize("keep", [
    lambda a: a[3:],                              # a view
    lambda a: a.reshape(2, -1),                   # a reshape (a view of the block)
    lambda a: a.view(np.int32),                   # a reinterpretation
    lambda a: memoryview(a),                      # a buffer export
    lambda a: np.frombuffer(a, np.uint8),         # a foreign array over the same memory
    lambda a: weakref.ref(a.base),                # a weak reference could bring the block back
    lambda a: [a],                                # the array itself, somewhere else
], ids=["slice", "reshape", "view", "memoryview", "frombuffer", "weakref", "list"])
def test_a_block_stays_busy_while_anything_reaches_it(keep):
    p = pool()
    a = p.empty((2048,), np.float32)
    a[:] = 7.0
    first = addr(a)
    kept = keep(a)
    del a
    b = p.empty((2048,), np.float32)
    assert addr(b) != first
    b[:] = -1.0
    assert p.info().hits == 0
    if isinstance(kept, (np.ndarray, memoryview)):
        assert (np.asarray(kept).view(np.uint8) != 0).any()
        assert not np.shares_memory(np.asarray(kept), b)
    del kept
    c = p.empty((2048,), np.float32)
    assert addr(c) == first and p.info().hits == 1


def test_small_requests_are_plain_arrays():
    p = pool(min_bytes=64 * KB)
    a = p.empty((16,), np.float32)
    assert a.base is None and p.info().misses == 0


def test_size_classes_share_blocks_of_nearby_sizes():
    assert size_class(5000) >= 5000
    assert size_class(5000) == size_class(4200)
    assert size_class(40_000_000) == 40 << 20      # a 1e7 float32 output: one class of 40 MiB
    assert size_class(40_000_000) < 1.25 * 40_000_000
    p = pool()
    a = p.empty((5000,), np.uint8)
    first = addr(a)
    del a
    b = p.empty((4200,), np.uint8)                # same class
    assert addr(b) == first
    c = p.empty((1000,), np.float64)              # 8000 bytes: another class
    assert addr(c) != first


def test_dtype_shape_and_contents_layout():
    p = pool()
    a = p.empty((8, 16, 4), np.float64)
    assert a.dtype == np.float64 and a.shape == (8, 16, 4) and a.flags.c_contiguous and a.flags.writeable
    assert a.flags.aligned
    a[...] = np.arange(a.size).reshape(a.shape)
    assert a[7, 15, 3] == a.size - 1


def test_cap_releases_free_blocks_then_stops_tracking():
    p = pool(max_bytes=64 * KB)
    a = p.empty((8 * KB,), np.float32)            # 32 KiB
    b = p.empty((8 * KB,), np.float32)            # 64 KiB tracked
    c = p.empty((8 * KB,), np.float32)            # over the cap, nothing free: untracked
    assert p.info().untracked == 1 and c.base is None
    assert p.info().bytes == 64 * KB
    del a
    d = p.empty((4 * KB, 3), np.float32)          # 48 KiB: another class; a's block is released for it
    assert p.info().bytes <= 64 * KB
    del b, c, d


def test_clear_releases_free_blocks_only():
    p = pool()
    a = p.empty((2048,), np.float32)
    b = p.empty((2048,), np.float32)
    del b
    info = p.info()
    assert info.blocks == 2 and info.free_blocks == 1
    released = p.clear()
    assert released == size_class(8192)
    assert p.info().blocks == 1 and p.info().free_blocks == 0
    first = addr(a)
    del a
    assert addr(p.empty((2048,), np.float32)) == first


def test_set_limits_shrinks():
    p = pool()
    for _ in range(3):
        p.empty((2048,), np.float32)              # dropped at once: one block, reused
    a = p.empty((4096,), np.float32)
    del a
    assert p.info().blocks == 2
    p.set_limits(max_bytes=0)
    assert p.info().blocks == 0
    with pytest.raises(ValueError, match="max_bytes"):
        p.set_limits(max_bytes=-1)
    with pytest.raises(ValueError, match="min_bytes"):
        p.set_limits(min_bytes=0)


def test_limit_environment_variables_are_numbers_of_bytes(monkeypatch):
    from dispatch_jit.bufferpool import _env_bytes
    monkeypatch.setenv("DISPATCH_JIT_POOL_MAX_BYTES", "1048576")
    assert _env_bytes("DISPATCH_JIT_POOL_MAX_BYTES", 7) == 1 << 20
    monkeypatch.setenv("DISPATCH_JIT_POOL_MAX_BYTES", " ")
    assert _env_bytes("DISPATCH_JIT_POOL_MAX_BYTES", 7) == 7
    monkeypatch.setenv("DISPATCH_JIT_POOL_MAX_BYTES", "256MB")
    with pytest.raises(ValueError, match=r"DISPATCH_JIT_POOL_MAX_BYTES='256MB': expected a number of bytes"):
        _env_bytes("DISPATCH_JIT_POOL_MAX_BYTES", 7)


def test_threads_never_share_a_live_block():
    p = pool(max_bytes=1 << 22)
    errors = []

    def work(tid):
        for _ in range(200):
            a = p.empty((1024 + tid,), np.int32)
            a[:] = tid
            b = p.empty((1024 + tid,), np.int32)
            b[:] = -tid
            if not (a == tid).all() or np.shares_memory(a, b):
                errors.append(tid)
    run_threads(work, 6)
    assert not errors
    assert p.info().hits > 0


def test_eager_large_outputs_use_the_process_pool():
    import dispatch_jit as dj
    from dispatch_jit import bufferpool
    from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN
    p = bufferpool.pool
    old = (p.max_bytes, p.min_bytes)
    p.set_limits(min_bytes=64 * KB)
    p.clear()
    try:
        x = dj.from_numpy(np.arange(PARALLEL_MIN, dtype=np.float32))
        y = x + 1.0
        first = addr(y.numpy())
        v = y[10:]                                # a live view of y's memory
        del y
        z = x * 3.0
        assert addr(z.numpy()) != first and not np.shares_memory(z.numpy(), v.numpy())
        np.testing.assert_array_equal(v.numpy(), np.arange(10, PARALLEL_MIN, dtype=np.float32) + 1)
        del v
        hits = p.info().hits
        w = x - 1.0
        assert addr(w.numpy()) == first and p.info().hits == hits + 1
        np.testing.assert_array_equal(w.numpy(), np.arange(PARALLEL_MIN, dtype=np.float32) - 1)
        small = dj.ones(16) + 1.0                  # below PARALLEL_MIN: plain np.empty
        assert small.numpy().base is None
    finally:
        p.set_limits(*old)
        p.clear()
