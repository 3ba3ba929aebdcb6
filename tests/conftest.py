"""Shared fixtures.  Numba compiles cost 0.1-0.5 s each, so tests share the
library's compiled kernels (module-level caches) and use tiny arrays.  Helpers many
test files call (bit-for-bit comparison, starting threads, a kernel compiled afresh
for inspection) are in helpers.py: ``from helpers import assert_same``."""

import itertools
import os

import pytest
from hypothesis import settings

# Deterministic examples (no flaky CI from a new random seed; a failure reproduces everywhere) and no
# per-example deadline (the first example of a test may pay a Numba compile).  Set
# HYPOTHESIS_PROFILE=explore locally to search with fresh random examples.
settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

# CUDA tests run everywhere: on a machine without an NVIDIA driver, Numba's CUDA simulator stands in
# (it must be chosen before numba.cuda is first imported).  DISPATCH_JIT_TEST_REAL_GPU=1 insists on hardware.
if not os.path.exists("/dev/nvidiactl") and os.environ.get("DISPATCH_JIT_TEST_REAL_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# The compiled mode's disk cache goes to a fresh directory per test session: tests count compiles, and the
# suite must not write into the user's ~/.cache, nor the cache's key (jit/trust.py) into ~/.config.
if "DISPATCH_JIT_CACHE_DIR" not in os.environ:
    import tempfile
    import atexit
    import shutil
    os.environ["DISPATCH_JIT_CACHE_DIR"] = _cache_dir = tempfile.mkdtemp(prefix="dispatch_jit_test_cache_")
    atexit.register(shutil.rmtree, _cache_dir, True)
    if "DISPATCH_JIT_CACHE_KEY_FILE" not in os.environ:
        _key_dir = tempfile.mkdtemp(prefix="dispatch_jit_test_key_")
        os.environ["DISPATCH_JIT_CACHE_KEY_FILE"] = os.path.join(_key_dir, "cache.key")
        atexit.register(shutil.rmtree, _key_dir, True)

import dispatch_jit as dj

ON_SIMULATOR = dj.cuda.is_available() and dj.cuda.is_simulator()
HAS_REAL_GPU = dj.cuda.is_available() and not dj.cuda.is_simulator()


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a real CUDA GPU (running on the Numba CUDA simulator or on a CPU)")
    for item in items:
        if "gpu" in item.keywords and not HAS_REAL_GPU:
            item.add_marker(skip_gpu)

_ns_counter = itertools.count()


@pytest.fixture
def lib():
    """A fresh DEF library in a unique namespace, destroyed after the test."""
    ns = f"test_ns{next(_ns_counter)}"
    library = dj.Library(ns, "DEF")
    yield library
    library._destroy()


@pytest.fixture
def fallback_lib():
    library = dj.Library("_", "IMPL")
    yield library
    library._destroy()
