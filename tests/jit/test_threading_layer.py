"""dispatch_jit/jit/threads.py: the threading setup made at import (and what it leaves to the
user), and the watch that sends parallel elementwise loops to their serial twins while other
processes hold the cores, with the same bits either way."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.jit import threads
from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: import, one parallel eager kernel, then report.
_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import numba
import dispatch_jit as dj
from dispatch_jit.jit import threads
from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN
x = dj.ones(PARALLEL_MIN)
assert float((x + x).numpy()[-1]) == 2.0
info = threads.info()
print(json.dumps({"layer": numba.threading_layer(), "info_layer": info["layer"], "applied": info["applied"],
                  "kept": info["kept"], "parallel_calls": info["watch"]["parallel_calls"],
                  "env": {k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}}))
"""

_OURS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY",
         "DISPATCH_JIT_WATCH_THREADS", "OPENBLAS_THREAD_TIMEOUT")


def _probe(**env):
    clean = {k: v for k, v in os.environ.items() if k not in _OURS}
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT)], env={**clean, **env},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _setting(name):
    return next(value for _, n, value, _ in threads.SETTINGS if n == name)


def test_defaults_apply_and_the_chosen_layer_runs():
    r = _probe()
    assert r["layer"] == r["info_layer"] == "omp"          # first in the priority configure() sets
    assert r["applied"]["GOMP_SPINCOUNT"] == r["env"]["GOMP_SPINCOUNT"] == _setting("GOMP_SPINCOUNT")
    assert r["applied"]["THREADING_LAYER_PRIORITY"][0] == "omp"
    # the probe imports Numba (and so NumPy's OpenBLAS) first: too late for OpenBLAS's timeout
    assert list(r["kept"]) == ["OPENBLAS_THREAD_TIMEOUT"] and r["parallel_calls"] == 1


def test_the_users_settings_win():
    r = _probe(NUMBA_THREADING_LAYER="workqueue", GOMP_SPINCOUNT="1234")
    assert r["layer"] == "workqueue"
    assert r["env"]["GOMP_SPINCOUNT"] == "1234"
    assert r["applied"] == {}
    assert r["kept"]["GOMP_SPINCOUNT"] == {"GOMP_SPINCOUNT": "1234"}
    assert r["kept"]["THREADING_LAYER_PRIORITY"] == {"NUMBA_THREADING_LAYER": "workqueue"}


def test_a_wait_policy_keeps_our_spin_count_out():
    # OMP_WAIT_POLICY implies its own spin count, which GOMP_SPINCOUNT would override
    r = _probe(OMP_WAIT_POLICY="PASSIVE")
    assert r["layer"] == "omp" and r["env"] == {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": "PASSIVE"}
    assert "GOMP_SPINCOUNT" not in r["applied"] and r["kept"]["GOMP_SPINCOUNT"] == {"OMP_WAIT_POLICY": "PASSIVE"}


# -- the watch ----------------------------------------------------------------------------------------


class _Clock:
    """A clock that only moves when told: the watch's decisions without wall-clock timing."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_watch_backs_off_after_a_stall_then_tries_the_threads_again(monkeypatch):
    monkeypatch.setattr(threads, "EVERY", 1)
    clock = _Clock()
    monkeypatch.setattr(threads, "_clock", clock)
    w, best, calls = threads.Watch(), {}, []
    n = 1 << 20

    def par(cost):
        def run():
            calls.append("par")
            clock.t += cost
        return run

    def ser():
        calls.append("ser")

    w.run(best, n, par(1e-3), lambda: ser)                   # the best this loop does: 1 ms
    w.run(best, n, par(1.5e-3), lambda: ser)                 # slower, not a stall
    assert w.stalls == 0 and w.until == 0.0
    w.run(best, n, par(20e-3), lambda: ser)                  # 20 ms: a stall, serial for 20 x 20 ms
    assert w.stalls == 1 and w.until == pytest.approx(clock.t + threads.STALL_SHARE * 20e-3)
    w.run(best, n, par(1e-3), lambda: ser)                   # backing off: the serial twin
    clock.t = w.until
    w.run(best, n, par(1e-3), lambda: ser)                   # the back-off is over: threads again
    assert calls == ["par", "par", "par", "ser", "par"]
    assert (w.stalls, w.serial_calls, w.parallel_calls) == (1, 1, 4)
    assert w.backoff == 2 * threads.BACKOFF_MIN             # a lucky call does not shorten the back-off
    clock.t += threads.CALM
    w.run(best, n, par(1e-3), lambda: ser)                   # a good call after a calm period halves it
    assert w.backoff == threads.BACKOFF_MIN


def test_watch_doubles_the_backoff_while_stalls_repeat(monkeypatch):
    monkeypatch.setattr(threads, "EVERY", 1)
    clock = _Clock()
    monkeypatch.setattr(threads, "_clock", clock)
    w, best, n = threads.Watch(), {}, 1 << 20

    def slow():
        clock.t += 2e-4           # a stall (best: 0 s), shorter than the back-off / STALL_SHARE

    w.run(best, n, lambda: None, lambda: None)               # best: 0 s per element
    backoffs = []
    for _ in range(9):
        clock.t = max(clock.t, w.until)
        w.run(best, n, slow, lambda: None)
        backoffs.append(w.until - clock.t)
    assert backoffs[:3] == pytest.approx([0.010, 0.020, 0.040])
    assert max(backoffs) == threads.BACKOFF_MAX


def test_watch_times_one_call_in_every(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(threads, "_clock", clock)
    w, best, n = threads.Watch(), {}, 1 << 20
    w.run(best, n, lambda: None, lambda: None)               # timed: best 0 s per element

    def slow():
        clock.t += 1.0
    for _ in range(threads.EVERY - 1):
        w.run(best, n, slow, lambda: None)                   # untimed: no clock read, no stall seen
    assert w.stalls == 0 and clock.t == 100.0 + threads.EVERY - 1
    w.run(best, n, slow, lambda: None)                       # the next timed one sees it
    assert w.stalls == 1 and w.untimed == 0                  # and the calls after a stall are timed


def test_disabled_watch_never_backs_off(monkeypatch):
    monkeypatch.setattr(threads, "EVERY", 1)
    clock = _Clock()
    monkeypatch.setattr(threads, "_clock", clock)
    w, best = threads.Watch(enabled=False), {}
    w.run(best, 1 << 20, lambda: None, lambda: None)

    def slow():
        clock.t += 1.0
    w.run(best, 1 << 20, slow, lambda: None)
    assert w.stalls == 0 and w.until == 0.0


def _bits(t):
    a = np.ascontiguousarray(t.numpy())
    return a.view(np.dtype(f"u{a.itemsize}")) if a.dtype.kind in "fc" else a


@dj.compile
def _chain(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


_N = PARALLEL_MIN + 7


def _cases():
    rng = np.random.default_rng(5)
    a = rng.standard_normal(_N).astype(np.float32) * 40
    a[::997], a[5::997] = np.inf, np.nan
    a[1::4001] = 3e30                   # sin's exact (table-reduced) form in some chunks only
    b, c = rng.standard_normal(_N).astype(np.float32), rng.standard_normal(_N)
    x, y, z = dj.from_numpy(a), dj.from_numpy(b), dj.from_numpy(c)
    m = dj.from_numpy(rng.standard_normal((_N // 7 + 1, 7)))
    return {
        "add": lambda: x + y,
        "sin (guarded chunks)": lambda: dj.sin(x),
        "exp float64": lambda: dj.exp(z),
        "strided broadcast": lambda: m.T * dj.from_numpy(np.arange(7.0)).reshape(7, 1),
        "compiled chain": lambda: _chain(x, y, dj.from_numpy(b[::-1].copy())),
        "compiled strided": lambda: _chain(m.T, m.T, 1.5 * m.T),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_serial_twin_gives_the_parallel_loops_bits(name):
    run = _cases()[name]
    w = threads.WATCH
    saved = (w.until, w.backoff, w.enabled)
    try:
        w.until = 0.0
        w.enabled = False                    # parallel for sure
        before = w.parallel_calls
        parallel = run()
        assert w.parallel_calls > before
        w.until, w.untimed = float("inf"), 0    # as right after a stall: serial twins
        before = w.serial_calls
        serial = run()
        assert w.serial_calls > before
    finally:
        w.until, w.backoff, w.enabled = saved
    np.testing.assert_array_equal(_bits(serial), _bits(parallel))
