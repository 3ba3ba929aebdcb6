"""The examples in dj.func's docstrings run and print what they say."""

import doctest
import sys

import pytest

import dispatch_jit  # noqa: F401

MODULES = ["dispatch_jit.func", "dispatch_jit.func.vmap", "dispatch_jit.func.transforms",
           "dispatch_jit.func.functional_call", "dispatch_jit.func.batched"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    res = doctest.testmod(sys.modules[name], optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0
