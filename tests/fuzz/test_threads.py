"""Threads: first-use compile races, thread-local dispatch state, shared compiled functions.

(Lazy mode across threads is tests/compiler's; here a thread's dj.execution_mode only has to stay in that thread.)
"""

import threading

import numpy as np
import pytest

import dispatch_jit as dj
from helpers import run_threads

N_THREADS = 4


def _unused_signature(candidates):
    """The first (op name, dtype, np function) whose dtype this process has not compiled for the op yet."""
    for name, dt, ref in candidates:
        info = dj.cache_info(f"aten::{name}")
        compiled = info.get("compiled", {})
        seen = {d for v in compiled.values() for d in (v if isinstance(v, (list, tuple)) else [v])}
        if not any(dt in str(s) for s in seen):
            return name, dt, ref
    return candidates[-1]


# ops and dtypes that the rest of the suite seldom uses, so that the first call here compiles
_RARE = [("atan2", "int16", lambda a, b: np.arctan2(a.astype(np.float32), b.astype(np.float32))),
         ("remainder", "int16", np.remainder), ("bitwise_xor", "uint8", np.bitwise_xor),
         ("log10", "int16", lambda a, b: np.log10(a.astype(np.float32))),
         ("atan2", "uint8", lambda a, b: np.arctan2(a.astype(np.float32), b.astype(np.float32))),
         ("floor_divide", "uint8", np.floor_divide), ("hypot_absent", "int16", None)]


def test_first_use_compile_race_eager_op():
    name, dt, ref = _unused_signature([c for c in _RARE if c[2] is not None])
    op = getattr(dj, name)
    barrier = threading.Barrier(N_THREADS)

    def work(i):
        rng = np.random.default_rng(i)
        a = rng.integers(1, 50, size=(7, 5)).astype(dt)
        b = rng.integers(1, 9, size=(7, 5)).astype(dt)
        barrier.wait()
        r = op(dj.from_numpy(a), dj.from_numpy(b)) if name != "log10" else op(dj.from_numpy(a))
        want = ref(a, b)
        got = r.numpy()
        assert got.dtype == np.asarray(want).dtype, (name, dt, got.dtype, np.asarray(want).dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name} {dt} thread {i}")
        return True
    assert all(run_threads(work, N_THREADS))


def test_first_use_compile_race_compiled_function():
    # a new function: its first calls trace and compile, all threads at once, several signatures
    def f(a, b):
        return dj.maximum(a * b - 1.25, a) * dj.exp(-dj.abs(b))
    fc = dj.compile(f)
    barrier = threading.Barrier(N_THREADS)

    def work(i):
        dt = [np.float32, np.float64][i % 2]
        rng = np.random.default_rng(100 + i)
        a = rng.standard_normal((5, 3 + i)).astype(dt)
        b = rng.standard_normal((5, 3 + i)).astype(dt)
        ta, tb = dj.from_numpy(a), dj.from_numpy(b)
        barrier.wait()
        got = fc(ta, tb).numpy().copy()
        want = f(ta, tb).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"thread {i}")
        return got
    run_threads(work, N_THREADS)
    assert fc.cache_info().entries >= 2


def run_pair(a, b):
    """a(0) and b(1) at once, in two threads (an error in either is raised here)."""
    run_threads(lambda i: (a, b)[i](i), 2, timeout=60)


def test_grad_mode_is_thread_local():
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def a(_):
        with dj.no_grad():
            entered.set()
            checked.wait(30)
            x = dj.tensor([1.0, 2.0], requires_grad=True)
            seen["a_requires_grad"] = (x * 2).requires_grad
            seen["a_enabled"] = dj.is_grad_enabled()

    def b(_):
        entered.wait(30)
        x = dj.tensor([1.0, 2.0], requires_grad=True)
        seen["b_requires_grad"] = (x * 2).requires_grad
        seen["b_enabled"] = dj.is_grad_enabled()
        checked.set()
    run_pair(a, b)
    assert seen == {"a_requires_grad": False, "a_enabled": False, "b_requires_grad": True, "b_enabled": True}


def test_autocast_is_thread_local():
    entered, checked = threading.Event(), threading.Event()
    seen = {}
    x = dj.ones((4, 4))

    def a(_):
        with dj.autocast("cpu", dtype=dj.float16):
            entered.set()
            checked.wait(30)
            seen["a"] = (dj.is_autocast_enabled("cpu"), (x @ x).dtype.name)

    def b(_):
        entered.wait(30)
        seen["b"] = (dj.is_autocast_enabled("cpu"), (x @ x).dtype.name)
        checked.set()
    run_pair(a, b)
    assert seen == {"a": (True, "float16"), "b": (False, "float32")}


def test_compiled_mode_is_thread_local():
    entered, checked = threading.Event(), threading.Event()
    seen = {}
    x = dj.from_numpy(np.arange(6.0).reshape(2, 3))

    def a(_):
        with dj.execution_mode("compiled"):
            entered.set()
            checked.wait(30)
            seen["a_mode"] = dj.get_mode()
            seen["a_value"] = ((x * 2.0) + 1.0).numpy().tolist()

    def b(_):
        entered.wait(30)
        seen["b_mode"] = dj.get_mode()
        y = (x * 2.0) + 1.0
        seen["b_plain"] = type(y) is dj.Tensor and y._data is not None and isinstance(y._data, np.ndarray)
        seen["b_value"] = y.numpy().tolist()
        checked.set()
    run_pair(a, b)
    want = (np.arange(6.0).reshape(2, 3) * 2 + 1).tolist()
    assert seen == {"a_mode": "compiled", "a_value": want, "b_mode": "eager", "b_plain": True, "b_value": want}


def test_exclude_guard_is_thread_local():
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def a(_):
        with dj.ExcludeDispatchKeyGuard(dj.DispatchKey.AutogradCPU):
            entered.set()
            checked.wait(30)
            x = dj.tensor([1.0], requires_grad=True)
            seen["a"] = (x + 1.0).requires_grad

    def b(_):
        entered.wait(30)
        x = dj.tensor([1.0], requires_grad=True)
        y = (x * 3.0).sum()
        y.backward()
        seen["b"] = (y.requires_grad, x.grad.tolist())
        checked.set()
    run_pair(a, b)
    assert seen == {"a": False, "b": (True, [3.0])}


@pytest.mark.parametrize("signatures", ["same", "different"])
def test_shared_compiled_function_across_threads(signatures):
    def f(a, b):
        return (a * 2.0 + b).sum(axis=0), dj.tanh(a - b) * 0.5
    fc = dj.compile(f)
    barrier = threading.Barrier(N_THREADS)
    iters = 15

    def work(i):
        out = []
        for k in range(iters):
            if signatures == "same":
                dt, shape = np.float64, (6, 5)
            else:
                dt = [np.float32, np.float64][i % 2]
                shape = [(6, 5), (4, 7), (3, 2), (2, 3)][i] if k % 3 else (5,)
            rng = np.random.default_rng(i * 1000 + k)
            a = (rng.standard_normal(shape) * 4).astype(dt)
            b = (rng.standard_normal(shape) * 4).astype(dt)
            ta, tb = dj.from_numpy(a), dj.from_numpy(b)
            if k % 4 == 3 and a.ndim >= 2:
                ta = dj.from_numpy(np.ascontiguousarray(a.T)).T
            if k == 0:
                barrier.wait()
            got = fc(ta, tb)
            want = f(ta, tb)
            for g_, w_ in zip(got, want):
                np.testing.assert_array_equal(g_.numpy(), w_.numpy(), err_msg=f"thread {i} call {k}")
            out.append((got, [w.numpy().copy() for w in want]))
        return out
    results = run_threads(work, N_THREADS)
    # nothing a thread got back was overwritten by another thread's later calls (output buffers)
    for i, res in enumerate(results):
        for k, (got, want) in enumerate(res):
            for g_, w_ in zip(got, want):
                np.testing.assert_array_equal(g_.numpy(), w_, err_msg=f"thread {i} call {k}, checked afterwards")


def test_shared_compiled_function_large_outputs_across_threads():
    # 4 MiB outputs come from the output pool: buffers must not be handed to two threads at once
    def f(a):
        return a * 3.0 + 1.0
    fc = dj.compile(f)
    barrier = threading.Barrier(N_THREADS)
    n = 1 << 20

    def work(i):
        a = np.full(n, float(i), dtype=np.float32)
        ta = dj.from_numpy(a)
        barrier.wait()
        outs = [fc(ta) for _ in range(3)]
        return [(o, float(i) * 3.0 + 1.0) for o in outs]
    results = run_threads(work, N_THREADS)
    for i, res in enumerate(results):
        for o, v in res:
            arr = o.numpy()
            assert arr.min() == v and arr.max() == v, f"thread {i}: output holds {arr.min()}..{arr.max()}, not {v}"
