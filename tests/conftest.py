"""Shared fixtures.  Numba compiles cost 0.1-0.5 s each, so tests share the
library's compiled kernels (module-level caches) and use tiny arrays."""

import itertools

import pytest

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
