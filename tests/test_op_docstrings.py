"""Every public op function's docstring (dispatch_jit/_install.py's _document over
kernels/op_examples.py): the schema first, then an example, which runs here as a doctest.  The
Python functions of the surface (split, einsum, where, ...) carry their own examples."""

from __future__ import annotations

import doctest

import pytest

import dispatch_jit as dj
from dispatch_jit.kernels import surface

OPS = sorted(n for n in dj.__all__ if getattr(getattr(dj, n), "_op", None) is not None and n != "ops")
PY = sorted(surface.PY_FUNCTIONS)


def test_every_op_is_documented_with_its_schema():
    missing = [n for n in OPS if n not in surface.EXAMPLES]
    assert not missing, f"public ops without an example in kernels/op_examples.py: {missing}"
    for n in OPS:
        fn = getattr(dj, n)
        assert fn.__doc__.splitlines()[0] == str(fn._op.schema), n


@pytest.mark.parametrize("name", OPS + PY)
def test_docstring_example_runs(name):
    fn = getattr(dj, name)
    test = doctest.DocTestParser().get_doctest(fn.__doc__, {"dj": dj}, name, None, 0)
    assert test.examples, f"dj.{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"dj.{name}'s docstring example failed"
