"""Ops with several named returns give one shared named tuple type in every mode (return_types.py)."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import return_types

CASES = {    # op name -> a call with several named returns
    "topk": lambda x: x.topk(2),
    "sort": lambda x: x.sort(descending=True),
    "max": lambda x: x.max(1),
    "min": lambda x: x.min(1),
}


@pytest.fixture(scope="module")
def x():
    return dj.tensor(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32))


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_returns_the_schemas_named_tuple(name, x):
    r = CASES[name](x)
    assert type(r) is getattr(return_types, name)
    assert r._fields == ("values", "indices") and r[0] is r.values


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_and_lazy_return_the_same_type(name, x):
    call = CASES[name]
    eager = call(x)
    compiled = dj.compile(lambda t: call(t))(x)
    with dj.execution_mode("compiled"):
        lazy = call(x)
        lazy_values, lazy_indices = lazy.values.numpy(), lazy.indices.numpy()
    for r in (compiled, lazy):
        assert type(r) is type(eager)
    np.testing.assert_array_equal(compiled.values.numpy(), eager.values.numpy())
    np.testing.assert_array_equal(compiled.indices.numpy(), eager.indices.numpy())
    np.testing.assert_array_equal(lazy_values, eager.values.numpy())
    np.testing.assert_array_equal(lazy_indices, eager.indices.numpy())


def test_compiled_function_reads_values_by_name(x):
    """``x.topk(k).values`` used to abort the trace (the tracer gave back a plain tuple)."""
    f = dj.compile(lambda t: t.topk(2).values * 2)
    np.testing.assert_array_equal(f(x).numpy(), (x.topk(2).values * 2).numpy())
    assert "eager calls" in f.explain() and f.cache_info().eager_calls == 0


def test_one_return_or_unnamed_returns_have_no_named_tuple():
    from dispatch_jit.schema import parse_schema
    assert return_types.of(parse_schema("f(Tensor x) -> Tensor")) is None
    assert return_types.of(parse_schema("g(Tensor x) -> (Tensor, Tensor)")) is None
    assert return_types.of(parse_schema("h(Tensor x) -> (Tensor a, Tensor b)"))._fields == ("a", "b")
