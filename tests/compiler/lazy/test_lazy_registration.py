"""Registrations reach compiled mode: every cache computed from them (compiled mode's
decompositions and record specializations, dj.compile's traces) is cleared by the mechanism
that clears the dispatch memo (registry.on_change), so after a kernel is registered, replaced
or removed, compiled mode and dj.compile run what eager mode runs."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import registry
from dispatch_jit.compiler.lazy import LazyTensor, mode, set_mode
from dispatch_jit.errors import NoKernelError


@pytest.fixture(autouse=True)
def _eager_after():
    yield
    set_mode("eager")


def _by(factor):
    """A CPU kernel: the op multiplies by ``factor`` (NumPy, so it is no composite)."""
    def kernel(x):
        return dj.tensor(np.asarray(x._data) * np.float32(factor))
    return kernel


def _composite(factor):
    def composite(x):
        return x * factor
    return composite


def _results(op, compiled, x):
    """(eager, compiled mode, dj.compile) results of ``op(x) + 1``, forced."""
    eager = (op(x) + 1.0).numpy().copy()
    with mode("compiled"):
        y = op(x) + 1.0
        recorded = type(y) is LazyTensor
    return eager, y.numpy().copy(), compiled(x).numpy().copy(), recorded


def test_replacing_a_composite_by_a_kernel_and_back(lib):
    lib.define("scale(Tensor x) -> Tensor")
    op = getattr(dj.ops, lib.ns).scale
    compiled = dj.compile(lambda t: op(t) + 1.0)
    x = dj.tensor([1.0, 2.0])
    steps = [("CompositeImplicitAutograd", _composite(2.0), [3.0, 5.0]),
             ("CPU", _by(3.0), [4.0, 7.0]),
             ("CompositeImplicitAutograd", _composite(4.0), [5.0, 9.0])]
    for key, fn, want in steps:
        h = lib.impl("scale", fn, key)
        for _ in range(2):          # the second time from the caches
            eager, lazy, comp, recorded = _results(op, compiled, x)
            np.testing.assert_array_equal(eager, want)
            np.testing.assert_array_equal(lazy, want)
            np.testing.assert_array_equal(comp, want)
            assert recorded      # op(x) recorded through the composite or run eagerly; + 1 recorded
        h.remove()
    # deregistered: no kernel left, in every mode
    with pytest.raises(NoKernelError):
        op(x)
    with pytest.raises(NoKernelError), mode("compiled"):
        (op(x) + 1.0).numpy()
    with pytest.raises(NoKernelError):
        compiled(x)


def test_a_backend_kernel_wins_over_a_composite_as_in_eager_mode(lib):
    """Eager mode runs a kernel registered at CPU before the CompositeImplicitAutograd one
    (registry.compute_table_entry); compiled mode records the composite only where eager
    mode would run it."""
    lib.define("scale(Tensor x) -> Tensor")
    op = getattr(dj.ops, lib.ns).scale
    compiled = dj.compile(lambda t: op(t) + 1.0)
    x = dj.tensor([1.0, 2.0])
    lib.impl("scale", _composite(2.0), "CompositeImplicitAutograd")
    h = lib.impl("scale", _by(3.0), "CPU")
    for got in _results(op, compiled, x)[:3]:
        np.testing.assert_array_equal(got, [4.0, 7.0])
    h.remove()                      # the composite again
    for got in _results(op, compiled, x)[:3]:
        np.testing.assert_array_equal(got, [3.0, 5.0])


def test_custom_op_kernel_replaced(lib):
    """custom_op's register_kernel replaces a kernel (a registration and a removal)."""
    qual = f"{lib.ns}::triple"
    cop = dj.library.custom_op(qual, _composite(3.0), mutates_args=(), schema="(Tensor x) -> Tensor",
                       device_types="cpu")
    try:
        impl = dj.Library(lib.ns, "IMPL")
        impl.impl("triple", _composite(5.0), "CompositeImplicitAutograd")     # the CPU kernel wins
        compiled = dj.compile(lambda t: cop(t) + 1.0)
        x = dj.tensor([1.0, 2.0])
        for got in _results(cop, compiled, x)[:3]:
            np.testing.assert_array_equal(got, [4.0, 7.0])
        cop.register_kernel("cpu", _by(10.0))
        for got in _results(cop, compiled, x)[:3]:
            np.testing.assert_array_equal(got, [11.0, 21.0])
        impl._destroy()
    finally:
        cop._destroy()


def test_on_change_listeners_are_called_and_removed(lib):
    seen = []
    h = registry.on_change(lambda: seen.append(1))
    lib.define("noop(Tensor x) -> Tensor")
    k = lib.impl("noop", _composite(1.0), "CompositeImplicitAutograd")
    k.remove()
    assert len(seen) == 3            # define, register, remove
    h.remove()
    lib.impl("noop", _composite(1.0), "CompositeImplicitAutograd")
    assert len(seen) == 3
