"""Shared fixtures.  Numba compiles cost 0.1-0.5 s each, so tests share the
library's compiled kernels (module-level caches) and use tiny arrays."""

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

import dispatch_jit as dj

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
