"""Lazy compile time per dtype, and import time, each in a fresh interpreter.

dispatch_jit compiles a kernel the first time an op meets a dtype signature
(one loop nest per signature; the serial variant for small outputs, the
prange variant once an output of ``PARALLEL_MIN`` = 2**16 elements or more
shows up).  The disk cache, which lets a later process load the kernel instead
(bench_coldstart.py), is turned off here: every sample compiles.

* ``timeraw_sqrt_first_dtype``: the first ``dj.sqrt`` call of the process
  (float32).  Includes Numba's one-time per-process setup (~0.27 s on the
  2-core machines) on top of the compile.
* ``timeraw_sqrt_second_dtype``: ``dj.sqrt`` on float64 after float32 was
  already compiled: the per-dtype compile alone.
  Both at 16 elements (serial kernel) and 2**20 elements (parallel kernel).
* ``track_import_time``: ``import dispatch_jit`` in a fresh interpreter
  (seconds, min of 3), and ``track_import_time_numpy_numba``, the part of it
  that is only NumPy and Numba importing.

Reference (DESIGN.md, "Facts measured"): ~0.1 s per dtype for a simple njit
kernel, ~0.3 s with parallel=True.  Targets: none stated; these track
regressions.
"""

from __future__ import annotations

import subprocess
import sys

SIZES = [16, 1 << 20]


def _attrs(**attrs):
    """Sets asv's benchmark attributes (params, timeout, ...) on a module-level benchmark."""
    def mark(fn):
        for k, v in attrs.items():
            setattr(fn, k, v)
        return fn
    return mark


# every sample is a fresh interpreter (~1-2 s): a few samples, no warm-up calls
_TIMERAW = dict(params=SIZES, param_names=["n"], repeat=(3, 5, 60.0), warmup_time=0.0, timeout=180)

_SETUP = """
import os
os.environ["DISPATCH_JIT_CACHE_DIR"] = "off"      # compile, not load from disk (bench_coldstart.py loads)
import numpy as np
import dispatch_jit as dj
x32 = dj.from_numpy(np.full({n}, 2.0, dtype=np.float32))
x64 = dj.from_numpy(np.full({n}, 2.0, dtype=np.float64))
"""


@_attrs(**_TIMERAW)
def timeraw_sqrt_first_dtype(n):
    """First dj.sqrt call in the process, float32 (compile + Numba's one-time setup)."""
    return "dj.sqrt(x32)", _SETUP.format(n=n)


@_attrs(**_TIMERAW)
def timeraw_sqrt_second_dtype(n):
    """dj.sqrt on float64 after float32 is compiled: one more dtype's compile."""
    return "dj.sqrt(x64)", _SETUP.format(n=n) + "dj.sqrt(x32)\n"


_IMPORT_TIMER = """
import time
t0 = time.perf_counter()
import {module}
print(time.perf_counter() - t0)
"""


IMPORT_RUNS = 3     # fresh interpreters per import-time sample; the quick test sets 1


def _fresh_import_seconds(module: str) -> float:
    """Min over IMPORT_RUNS fresh interpreters of the time ``import <module>`` takes."""
    best = float("inf")
    for _ in range(IMPORT_RUNS):
        out = subprocess.run([sys.executable, "-c", _IMPORT_TIMER.format(module=module)],
                             capture_output=True, text=True, check=True, timeout=120)
        best = min(best, float(out.stdout.strip().splitlines()[-1]))
    return best


@_attrs(unit="seconds", timeout=300)
def track_import_time():
    """Seconds for ``import dispatch_jit`` in a fresh interpreter (min of 3)."""
    return _fresh_import_seconds("dispatch_jit")


@_attrs(unit="seconds", timeout=300)
def track_import_time_numpy_numba():
    """Seconds for ``import numpy, numba`` in a fresh interpreter (min of 3): the floor
    under track_import_time."""
    return _fresh_import_seconds("numpy, numba")

