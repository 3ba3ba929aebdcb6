"""What many test files need alike: bit-for-bit comparisons, starting threads, a kernel compiled
afresh for inspection.  ``import helpers`` (pytest puts tests/, the home of the root conftest.py,
on ``sys.path``).

>>> import numpy as np
>>> assert_same(np.array([0.0, np.nan]), np.array([0.0, np.nan]))
>>> run_threads(lambda i: i * i, 3)
[0, 1, 4]
"""

from __future__ import annotations

import threading

import numpy as np

import dispatch_jit as dj


def _bits(a: np.ndarray) -> np.ndarray:
    """The array's bits as unsigned integers of its item size (floats, complex), or the array."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind in "fc":
        return a.view(np.dtype(f"u{a.dtype.itemsize // (2 if a.dtype.kind == 'c' else 1)}"))
    return a


def _as_array(x) -> tuple[object, np.ndarray]:
    """(dtype, array) of a tensor (its dj dtype; bfloat16 as its 16-bit words) or of an array."""
    if isinstance(x, dj.Tensor):
        if x.dtype is dj.bfloat16:
            return x.dtype, np.ascontiguousarray(x._data).view(np.uint16).reshape(tuple(x.shape))
        return x.dtype, np.asarray(x.detach().cpu().numpy() if x.is_cuda else x.detach().numpy())
    a = np.asarray(x)
    return a.dtype, a


def assert_same(got, want, what: str = "") -> None:
    """``got`` is ``want`` bit for bit: the same dtype, the same shape, the same bits (the sign of
    a zero counts; any NaN equals any NaN, whatever its payload, as eager's kernels and the fused
    loops may carry different ones).  Tensors or arrays, alike or mixed.

    >>> assert_same(dj.tensor([1.0, -0.0]), np.array([1.0, -0.0], np.float32))
    >>> assert_same(np.array([0.0]), np.array([-0.0]))
    Traceback (most recent call last):
    AssertionError: bits differ at (0,): got 0.0, want -0.0
    """
    gd, g = _as_array(got)
    wd, w = _as_array(want)
    where = f"{what}: " if what else ""
    if isinstance(got, dj.Tensor) == isinstance(want, dj.Tensor):
        assert gd == wd, f"{where}dtype {gd} != {wd}"
    else:
        assert g.dtype == w.dtype, f"{where}dtype {g.dtype} != {w.dtype}"
    assert g.shape == w.shape, f"{where}shape {g.shape} != {w.shape}"
    eq = _bits(g) == _bits(w)
    if g.dtype.kind in "fc":
        nan = np.isnan(g) & np.isnan(w)
        eq = eq.reshape(*g.shape, -1).all(-1) | nan
    if not np.all(eq):
        i = tuple(int(k) for k in np.argwhere(~np.asarray(eq))[0])
        raise AssertionError(f"{where}bits differ at {i}: got {g[i].item()!r}, want {w[i].item()!r}")


def run_threads(target, n: int, timeout: float = 120.0) -> list:
    """Run ``target(i)`` for i in range(n), each in a thread of its own, all started before any is
    joined; return the results in order.  The first exception a thread raised is raised here, and
    a thread still alive after ``timeout`` seconds (a deadlock) fails the test instead of hanging
    the suite."""
    results, errors = [None] * n, []

    def run(i):
        try:
            results[i] = target(i)
        except BaseException as e:      # noqa: BLE001 - handed to the test's thread below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]
    return results


def fresh_dispatcher(disp):
    """A new Numba dispatcher of ``disp``'s Python function with ``disp``'s options, with no disk
    cache behind it: what it compiles is compiled in this process, so ``inspect_asm`` and
    ``inspect_llvm`` show the code (a kernel loaded from a warm ``DISPATCH_JIT_CACHE_DIR`` has
    none to show, and a caller loaded from it never compiles its callees)."""
    import numba
    return numba.jit(**{"nopython": True, **disp.targetoptions})(disp.py_func)


def fused_grad(cf):
    """The fused forward+backward of compiled function ``cf``'s last call (a GradEntry's one
    entry), failing with ``explain()`` where the call did not get one."""
    from dispatch_jit.compiler.run.cached import GradEntry
    e = cf._last
    assert isinstance(e, GradEntry), cf.explain()
    (f,) = e.fused.values()
    assert not isinstance(f, str), f
    return f
