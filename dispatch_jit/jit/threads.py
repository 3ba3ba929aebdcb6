"""Threads for the parallel (``prange``) kernels, on a machine whose cores other
processes may hold.

Two parts, both measured on the 2-core machines (numbers in docs/ARCHITECTURE.md,
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

import os
from time import perf_counter as _clock

import numba

__all__ = ["configure", "info", "Watch", "WATCH", "run"]

# What configure() sets when the user has not: (where, name, value, unless any of these
# environment variables is set).  The spin count is GNU OpenMP's (libgomp reads it once,
# when it is loaded: Numba loads it with its pool); OMP_WAIT_POLICY set by the user implies
# a spin count of its own, so it also keeps ours out.
SETTINGS = (
    ("numba", "THREADING_LAYER_PRIORITY", ["omp", "tbb", "workqueue"],
     ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY")),
    ("env", "GOMP_SPINCOUNT", "30000", ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")),
)

_INFO: dict = {}


def _pool_started() -> bool:
    from numba.np.ufunc import parallel
    return bool(parallel._is_initialized)


def _libgomp_loaded() -> bool:
    """libgomp reads its environment when it is loaded; torch, imported first, loads it too."""
    try:
        with open("/proc/self/maps") as f:
            return "libgomp" in f.read()
    except OSError:
        return False


def configure() -> dict:
    """Apply ``SETTINGS`` where the user has not set them; once per process.  Returns ``info()``."""
    if _INFO:
        return info()
    started, gomp = _pool_started(), _libgomp_loaded()
    applied, kept = {}, {}
    for where, name, value, unless in SETTINGS:
        users = {u: os.environ[u] for u in unless if u in os.environ}
        if where == "numba" and not users and numba.config.THREADING_LAYER != "default":
            users["numba.config.THREADING_LAYER"] = numba.config.THREADING_LAYER   # set in code, not in env
        if users:
            kept[name] = users
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
    return {**_INFO, "layer": layer, "watch": WATCH.counters()}


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
