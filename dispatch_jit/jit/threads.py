"""Threads for the parallel (``prange``) kernels and the BLAS products, on a machine whose
cores other processes may hold: one thread policy for the process.

``set_num_threads(n)`` / ``get_num_threads()`` (``dj.set_num_threads``, PyTorch's
intra-op threads): the most threads any parallel region or BLAS product of
dispatch_jit uses (default: Numba's ``NUMBA_NUM_THREADS``, the cores).  Each
product's own count is ``blas_threads(flops)``: one thread below ``BLAS_GRAIN``
flops per thread, more only where every thread gets that much work, up to the
cap; it depends only on the sizes and the cap, never on timing, so the same
inputs give the same bits (OpenBLAS's sgemm rounds differently with one and two
threads).  kernels/linalg/gemm.py applies it per call (OpenBLAS's
``openblas_set_num_threads_local``, ~0.2 us; in OpenBLAS 0.3.31's pthreads build it sets the
library's count, not the thread's: the set and the product that follows run in njit code
that holds the GIL, so no other dispatch_jit product comes between), reading the cap from a C global
(``NUM_THREADS_SYMBOL``) so that compiled kernels stay cacheable.  Small products
thus never wake an OpenBLAS worker, and the workers a large one woke sleep at
once where ``OPENBLAS_THREAD_TIMEOUT`` could still be set (see ``SETTINGS``).

Two more parts, both measured on the 2-core machines (numbers in docs/ARCHITECTURE.md,
"Threads"):

1. ``configure()``, at import, before Numba starts its thread pool: the
   threading layer (OpenMP first: ``workqueue`` aborts the process when two
   Python threads launch ``nogil`` parallel kernels at once, and was 2-5x
   slower on 2**18..1e6 elements) and how long an idle OpenMP worker spins
   before it sleeps.  GNU OpenMP's default spin (300000 rounds, ~7-20 ms
   here) kept the worker on a core that another process needed, and the next
   parallel call then waited a whole time slice for it; a short spin keeps
   back-to-back calls as fast and gives the core back soon after.  Nothing
   the user set is changed: a variable already in the environment (or a
   Numba setting already made) wins, and ``info()`` says what was applied.

2. ``Watch``: the spin alone does not stop the collapse (a parallel region
   still waits for a worker that is not on a core: 3-30x NumPy's time under
   two busy processes), so one parallel call in ``EVERY`` of an elementwise
   loop is timed, and one that took more than its size's best time could
   explain sends the following calls of every such loop to its serial twin
   for a while (20 times the stall, and at least a back-off of 10 ms that
   doubles per stall up to 1 s and halves per 2 s without one), after which
   the threads are tried again.  Both
   twins compute each element alone, so the results are the same bits
   whichever runs.  Loops whose result depends on how the work is split
   (reductions) are not watched: they keep the split the process started with.
   The watch is the one place where timing picks a path, and it cannot change
   a result; it stays because the BLAS rule does not stop this collapse (a 1e6
   add under two busy processes: 19-20x NumPy without the watch, 1.2-1.4x with).

>>> t = Watch()
>>> best, calls = {}, []
>>> par, ser = (lambda *a: calls.append("par")), (lambda *a: calls.append("ser"))
>>> t.run(best, 1 << 20, par, lambda: ser)            # timed: the loop's best so far
>>> t.until, t.untimed = float("inf"), 0               # as right after a stall
>>> t.run(best, 1 << 20, par, lambda: ser)
>>> calls, t.serial_calls
(['par', 'ser'], 1)
"""

from __future__ import annotations

import ctypes
import os
import sys
from time import perf_counter as _clock

# OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, when NumPy (imported by Numba, below) loads it
_TIMEOUT_SET_HERE = "OPENBLAS_THREAD_TIMEOUT" not in os.environ and "numpy" not in sys.modules
if _TIMEOUT_SET_HERE:
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"     # the value SETTINGS names

import llvmlite.binding as _llvm  # noqa: E402
import numba  # noqa: E402

from dispatch_jit.errors import DispatchJitError

__all__ = ["configure", "info", "Watch", "WATCH", "run", "set_num_threads", "get_num_threads", "blas_threads",
           "BLAS_GRAIN", "NUM_THREADS_SYMBOL"]

# What configure() sets when the user has not: (where, name, value, unless any of these
# environment variables is set).  The spin count is GNU OpenMP's (libgomp reads it once,
# when it is loaded: Numba loads it with its pool); OMP_WAIT_POLICY set by the user implies
# a spin count of its own, so it also keeps ours out.
SETTINGS = (
    ("numba", "THREADING_LAYER_PRIORITY", ["omp", "tbb", "workqueue"],
     ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY")),
    ("env", "GOMP_SPINCOUNT", "30000", ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")),
    # an idle OpenBLAS worker sleeps at once instead of spinning ~0.1 s on a core others need
    # (read when the library is loaded: only where NumPy is imported after dispatch_jit)
    ("env", "OPENBLAS_THREAD_TIMEOUT", "4", ("OPENBLAS_THREAD_TIMEOUT",)),
)

# One thread per BLAS_GRAIN flops (2*m*n*k) of a product, at most get_num_threads(): on the
# 2-core machines a second thread paid from ~1.3e7 flops quiet (512x64 @ 64x192 sgemm 127 ->
# 77 us) and lost below (128**3: 44 -> 62 us), and a woken worker that waits for a core
# costs ms, so a thread gets at least 2**24 flops (~0.2 ms of sgemm).
BLAS_GRAIN = 1 << 24
NUM_THREADS_SYMBOL = "dispatch_jit_num_threads"
_NUM_THREADS = ctypes.c_int(max(int(numba.config.NUMBA_NUM_THREADS), 1))
_llvm.add_symbol(NUM_THREADS_SYMBOL, ctypes.addressof(_NUM_THREADS))


def blas_threads(flops: int, cap: int | None = None) -> int:
    """Threads for a product of ``flops`` (2*m*n*k) under ``cap`` (default ``get_num_threads()``):
    the rule gemm.py applies, in Python.

    >>> blas_threads(2 * 512 * 64 * 20, 2), blas_threads(2 * 1024 ** 3, 2), blas_threads(2 * 1024 ** 3, 1)
    (1, 2, 1)
    """
    cap = _NUM_THREADS.value if cap is None else cap
    return max(1, min(cap, flops // BLAS_GRAIN))


def get_num_threads() -> int:
    """The most threads a parallel region or BLAS product of dispatch_jit uses (``torch.get_num_threads``)."""
    return _NUM_THREADS.value


def set_num_threads(n: int) -> None:
    """Use at most ``n`` threads (``torch.set_num_threads``): for the BLAS products of every Python
    thread, and for Numba's parallel loops (``numba.set_num_threads``, capped at Numba's pool
    size, which is fixed when the pool starts: ``NUMBA_NUM_THREADS``) run from the calling thread.

    >>> old = get_num_threads(); set_num_threads(1); get_num_threads()
    1
    >>> set_num_threads(old)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DispatchJitError(f"set_num_threads: expected a positive int, got {n!r}")
    _NUM_THREADS.value = n
    numba.set_num_threads(min(n, int(numba.config.NUMBA_NUM_THREADS)))

_INFO: dict = {}


def _pool_started() -> bool:
    from numba.np.ufunc import parallel
    return bool(parallel._is_initialized)


def _loaded(name: str) -> bool:
    """Is a library ``name`` that reads its environment when loaded already mapped?  Copies that
    wheels bundle privately (site-packages/torch/lib/libgomp.so.1, loaded when torch is imported
    first) are other libraries than the one Numba's OpenMP layer loads, so they do not count for
    libgomp; NumPy's and SciPy's OpenBLAS (numpy.libs, scipy.libs) do for OpenBLAS."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if name in line}
    except OSError:
        return False
    if name == "libgomp":
        paths = {p for p in paths if "site-packages" not in p and "dist-packages" not in p}
    return bool(paths)


def _libgomp_loaded() -> bool:
    return _loaded("libgomp")


def configure() -> dict:
    """Apply ``SETTINGS`` where the user has not set them; once per process.  Returns ``info()``."""
    if _INFO:
        return info()
    started, gomp = _pool_started(), _libgomp_loaded()
    applied, kept = {}, {}
    for where, name, value, unless in SETTINGS:
        if name == "OPENBLAS_THREAD_TIMEOUT" and _TIMEOUT_SET_HERE:
            applied[name] = value       # set at this module's import, before NumPy loaded OpenBLAS
            continue
        users = {u: os.environ[u] for u in unless if u in os.environ}
        if where == "numba" and not users and numba.config.THREADING_LAYER != "default":
            users["numba.config.THREADING_LAYER"] = numba.config.THREADING_LAYER   # set in code, not in env
        if users:
            kept[name] = users
        elif name == "OPENBLAS_THREAD_TIMEOUT":
            kept[name] = "too late: NumPy (and its OpenBLAS) was imported before dispatch_jit"
        elif started or (where == "env" and gomp):
            kept[name] = "too late: Numba's pool or libgomp was started before dispatch_jit was imported"
        elif where == "numba":
            setattr(numba.config, name, list(value))
            applied[name] = value
        else:
            os.environ[name] = value
            applied[name] = value
    _INFO.update(applied=applied, kept=kept)
    return info()


def info() -> dict:
    """What ``configure()`` applied, what it left as the user (or an earlier import) had it,
    the layer Numba runs (None before the first parallel kernel), and the watch's counters."""
    layer = None
    if _pool_started():
        layer = numba.threading_layer()
    return {**_INFO, "layer": layer, "num_threads": get_num_threads(), "watch": WATCH.counters()}


# -- the run-time watch ----------------------------------------------------------------------------

# A parallel call is a stall when it took longer than SLOW times the best time per element
# seen for its loop and size (power of two) plus FLOOR: FLOOR covers waking a sleeping
# worker (~60 us here), which is not contention; a worker that waits for a core costs ms.
SLOW = 2.0
FLOOR = 100e-6
# After a stall of t seconds the serial twins run for at least STALL_SHARE * t (so stalls
# cost at most ~1/STALL_SHARE of the time: each is 1-40 ms under load) and at least the
# back-off, which doubles per stall up to its maximum and halves per CALM seconds without
# one: a lucky call between stalls must not bring them back every 10 ms.
STALL_SHARE = 20
BACKOFF_MIN, BACKOFF_MAX, CALM = 0.010, 1.0, 2.0
# One parallel call in EVERY is timed: a clock read costs ~0.4 us in these VMs, 5% of the
# smallest parallel call if every call took two; a stall still ends the threads' turn
# within EVERY calls.
EVERY = 4


class Watch:
    """Parallel or serial, per call of a watched loop (see the module docstring)."""

    __slots__ = ("until", "backoff", "calm_since", "untimed", "enabled", "stalls", "serial_calls",
                 "parallel_calls")

    def __init__(self, enabled: bool = True):
        self.until = self.calm_since = 0.0
        self.untimed = 0            # parallel calls to run before the next timed one
        self.backoff = BACKOFF_MIN
        self.enabled = enabled
        self.stalls = self.serial_calls = self.parallel_calls = 0

    def run(self, best: dict, n: int, par, serial_of, *args):
        """Run ``par(*args)`` (a parallel loop over ``n`` elements) or, while backing off,
        ``serial_of()(*args)``; ``best`` is the loop's own {size class: seconds per element}."""
        if self.untimed:
            self.untimed -= 1
            self.parallel_calls += 1
            return par(*args)
        now = _clock()
        if now < self.until:
            self.serial_calls += 1
            return serial_of()(*args)
        par(*args)
        dt = _clock() - now
        self.parallel_calls += 1
        self.untimed = EVERY - 1
        k = n.bit_length()
        b = best.get(k)
        if b is None or dt < b * n:
            best[k] = dt / n
        elif dt > SLOW * b * n + FLOOR and self.enabled:
            self.stalls += 1
            self.calm_since = end = now + dt
            self.until = end + max(self.backoff, STALL_SHARE * dt)
            self.backoff = min(2 * self.backoff, BACKOFF_MAX)
            self.untimed = 0
        elif now - self.calm_since > CALM:
            self.backoff = max(self.backoff / 2, BACKOFF_MIN)
            self.calm_since = now

    def counters(self) -> dict:
        return {"enabled": self.enabled, "stalls": self.stalls, "serial_calls": self.serial_calls,
                "parallel_calls": self.parallel_calls}

    def reset(self) -> None:
        self.until = self.calm_since = 0.0
        self.untimed = 0
        self.backoff = BACKOFF_MIN
        self.stalls = self.serial_calls = self.parallel_calls = 0


# DISPATCH_JIT_WATCH_THREADS=0: always the parallel loop above the grain (to measure the collapse)
WATCH = Watch(os.environ.get("DISPATCH_JIT_WATCH_THREADS", "1") != "0")
run = WATCH.run
