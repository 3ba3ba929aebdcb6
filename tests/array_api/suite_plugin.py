"""A pytest plugin that suite.py loads into every run of the official suite (``-p suite_plugin``).

1. It drops hypothesis's *explain* phase.  On a failing test (an xfail-listed one included)
   that phase replays the shrunk example and formats each traceback through pytest's source
   lookup, which re-parses the suite's 2,000-line test file for every frame (cProfile:
   ``compile`` and ``ast.walk`` under ``shrinker.explain``): a warm run of the elementwise file
   took 46 s with it and 19 s without, for a report that ``--tb=line`` throws away.  Generation and
   shrinking are kept, so a new failure still shows its minimal example.
2. It prints one closing line, ``compiles: numba N, dispatch_jit {memory, disk, compiled}``:
   N counts Numba's ``numba:compile`` events, which fire only for a real compile (a disk-cache
   load skips them), so it covers every Numba function the process compiled, ours or not,
   callees included; the dict is ``dispatch_jit.jit.cache.totals()``, how dispatch_jit's own
   compile cache answered.  A second run of a file with the same ``DISPATCH_JIT_CACHE_DIR``
   and the same examples (``--derandomize``) prints ``numba 0``.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import Phase, settings
from numba.core import event

_compiles = [0]


class _Count(event.Listener):
    def on_start(self, ev):
        _compiles[0] += 1

    def on_end(self, ev):
        pass


@pytest.hookimpl(trylast=True)      # after the suite's conftest has loaded its "array-api-tests" profile
def pytest_configure(config):
    settings.register_profile("array-api-tests-no-explain", parent=settings.default,
                              phases=[p for p in settings.default.phases if p is not Phase.explain])
    settings.load_profile("array-api-tests-no-explain")
    event.register("numba:compile", _Count())


def pytest_terminal_summary(terminalreporter):
    cache = sys.modules.get("dispatch_jit.jit.cache")
    totals = cache.totals() if cache is not None else {}
    terminalreporter.write_line(f"compiles: numba {_compiles[0]}, dispatch_jit {totals}")
