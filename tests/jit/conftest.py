"""Fixtures of the compile-cache tests."""

import pytest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty disk cache directory for this test (DISPATCH_JIT_CACHE_DIR points at it)."""
    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(tmp_path))
    return tmp_path
