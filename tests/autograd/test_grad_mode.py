"""Grad mode: no_grad / enable_grad / set_grad_enabled as context managers and
decorators, per thread, and its effect on dispatch (under no_grad a call on a
tensor that requires grad resolves straight to the backend kernel)."""

from __future__ import annotations

import threading

import pytest

import dispatch_jit as dj


@pytest.fixture
def w():
    return dj.tensor([1.0, 2.0], dtype=dj.float64, requires_grad=True)


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    assert dj.is_grad_enabled()
    yield
    assert dj.is_grad_enabled(), "a test leaked grad mode"


def test_no_grad_context(w):
    with dj.no_grad():
        assert not dj.is_grad_enabled()
        y = w * 2
        with dj.enable_grad():
            assert dj.is_grad_enabled()
            z = w * 2
        assert not dj.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    assert z.requires_grad and repr(z.grad_fn) == "<MulBackward>"


def test_no_grad_restores_on_exception():
    with pytest.raises(ValueError):
        with dj.no_grad():
            raise ValueError("boom")
    assert dj.is_grad_enabled()


def test_decorators(w):
    @dj.no_grad()
    def f(x):
        assert not dj.is_grad_enabled()
        return x * 2

    @dj.no_grad                       # bare, as torch allows
    def g(x):
        return x * 2

    @dj.enable_grad()
    def h(x):
        return x * 2

    @dj.enable_grad
    def h2(x):
        return x * 2

    assert f.__name__ == "f"
    assert not f(w).requires_grad and not g(w).requires_grad
    with dj.no_grad():
        assert h(w).requires_grad and h2(w).requires_grad
        assert not dj.is_grad_enabled()
    assert dj.is_grad_enabled()


def test_set_grad_enabled(w):
    dj.set_grad_enabled(False)         # as a function: takes effect now
    try:
        assert not dj.is_grad_enabled() and not (w * 2).requires_grad
    finally:
        dj.set_grad_enabled(True)
    with dj.set_grad_enabled(False):
        assert not (w * 2).requires_grad
        with dj.set_grad_enabled(True):
            assert (w * 2).requires_grad
        assert not dj.is_grad_enabled()
    assert dj.is_grad_enabled()


def test_set_grad_enabled_as_decorator(w):
    @dj.set_grad_enabled(False)
    def f(x):
        return x * 2

    assert dj.is_grad_enabled(), "decorating must not change the mode"
    assert not f(w).requires_grad
    assert dj.is_grad_enabled() and (w * 2).requires_grad


def test_grad_mode_is_thread_local(w):
    seen = {}

    def worker():
        seen["enabled"] = dj.is_grad_enabled()
        seen["requires_grad"] = (w * 2).requires_grad
        with dj.no_grad():
            barrier.wait()                 # main thread checks its mode while we are in no_grad
            barrier.wait()

    barrier = threading.Barrier(2, timeout=30)
    with dj.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        barrier.wait()
        assert not dj.is_grad_enabled()
    # the worker is still inside its own no_grad: ours is enabled again
    assert dj.is_grad_enabled() and (w * 2).requires_grad
    barrier.wait()
    t.join()
    assert seen == {"enabled": True, "requires_grad": True}


def test_no_grad_dispatches_straight_to_cpu(w, capsys):
    with dj.show_dispatch_trace():
        w * 2
    out = capsys.readouterr().out
    assert "op=[aten::mul.Tensor], key=[AutogradCPU]" in out and "[redispatch] op=[aten::mul.Tensor], key=[CPU]" in out
    with dj.no_grad(), dj.show_dispatch_trace():
        w * 2
        w * 2                              # the memoized hit: same resolution
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == ["[call] op=[aten::mul.Tensor], key=[CPU]"] * 2
    # a tensor that does not require grad pays nothing for autograd, grad mode on or off
    with dj.show_dispatch_trace():
        w.detach() * 2
    assert capsys.readouterr().out.strip() == "[call] op=[aten::mul.Tensor], key=[CPU]"


def test_no_grad_memo_does_not_leak_into_grad_mode(w):
    # same signature resolved under both modes: each mode keeps its own memo entry
    for _ in range(2):
        with dj.no_grad():
            assert not (w + 1.0).requires_grad
        assert (w + 1.0).requires_grad
