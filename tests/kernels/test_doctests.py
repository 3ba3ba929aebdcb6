"""The docstring examples of kernels/ (installed as dispatch_jit.kernels).

pytest's ``--doctest-modules`` collects ``dispatch_jit/`` by path; kernels/ sits
beside it, and collecting its files by path would import them a second time
under other names (registering "aten" twice).  So they run here, through the
modules the package itself imported."""

import doctest
import importlib
import pkgutil

import pytest

import dispatch_jit.kernels as kernels

MODULES = sorted(m.name for m in pkgutil.walk_packages(kernels.__path__, "dispatch_jit.kernels."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (run doctest on it)"
