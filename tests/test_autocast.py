"""Autocast as dispatch keys: policies, nesting, caching, gradients, custom ops."""

import re
import threading

import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError

K = dj.DispatchKey


@pytest.fixture
def mats():
    return dj.rand(3, 4, dtype=dj.float32), dj.rand(4, 2, dtype=dj.float32)


def test_policies(mats):
    a, b = mats
    with dj.autocast("cpu"):
        assert dj.is_autocast_enabled("cpu") and not dj.is_autocast_enabled("cuda")
        m = a @ b
        assert m.dtype is dj.bfloat16                        # lower precision: bfloat16, as PyTorch's CPU default
        assert m.sum().dtype is dj.float32                   # float32 policy
        assert dj.exp(m).dtype is dj.float32
        assert (m + a[:, :2]).dtype is dj.float32            # promote: widest input
        assert dj.relu(m).dtype is dj.bfloat16               # no policy: falls through
        assert dj.softmax(m, axis=-1).dtype is dj.float32
    assert (a @ b).dtype is dj.float32 and not dj.is_autocast_enabled("cpu")


def test_values_match_bfloat16_and_float16_references(mats):
    a, b = mats
    with dj.autocast("cpu"):
        m = a @ b
    # bfloat16 inputs, float32 products and sums, one rounding of the result
    assert m.tolist() == (a.bfloat16().float() @ b.bfloat16().float()).bfloat16().tolist()
    with dj.autocast("cpu", dtype=dj.float16):
        m = a @ b
    ref = (a.half().float() @ b.half().float()).numpy()
    assert m.dtype is dj.float16 and abs(m.float().numpy() - ref).max() < 1e-2


def test_nesting_disabling_and_dtype(mats):
    a, b = mats
    with dj.autocast("cpu"):
        with dj.autocast("cpu", enabled=False):
            assert (a @ b).dtype is dj.float32
        with dj.autocast("cpu", dtype=dj.float64):
            assert (a @ b).dtype is dj.float64 and dj.get_autocast_dtype("cpu") is dj.float64
        assert (a @ b).dtype is dj.bfloat16 and dj.get_autocast_dtype("cpu") is dj.bfloat16
    assert dj.get_autocast_dtype("cuda") is dj.float16                 # PyTorch's CUDA default
    with pytest.raises(DTypeError, match="floating dtype"):
        dj.autocast("cpu", dtype=dj.int32)
    with pytest.raises(ValueError, match="device_type"):
        dj.autocast("tpu")


def test_decorator_and_exclude_guard(mats):
    a, b = mats

    @dj.autocast("cpu")
    def f(x, y):
        return x @ y
    assert f(a, b).dtype is dj.bfloat16
    with dj.autocast("cpu"), dj.ExcludeDispatchKeyGuard(K.AutocastCPU):
        assert (a @ b).dtype is dj.float32                  # as in the seed


def test_thread_local(mats):
    a, b = mats
    seen = {}
    with dj.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.setdefault("dtype", (a @ b).dtype))
        t.start()
        t.join()
    assert seen["dtype"] is dj.float32


def test_weight_cast_cached_within_region_and_gradients_in_own_dtype(mats, capsys):
    a, _ = mats
    w = dj.rand(4, 2, requires_grad=True)
    with dj.autocast("cpu"):
        y1 = a @ w
        with dj.show_dispatch_trace():
            y2 = a @ w
    trace = capsys.readouterr().out
    assert trace.count("aten::to.dtype") == 1                # only `a`: the weight's cast was cached
    (y1.float().sum() + y2.float().sum()).backward()
    assert w.grad.dtype is dj.float32 and w.grad.shape == (4, 2)
    expected = 2 * a.bfloat16().float().sum(axis=0, keepdims=True).T.expand((4, 2))
    assert abs(w.grad.numpy() - expected.numpy()).max() < 4e-2        # bfloat16's sums of 3 values
    with dj.autocast("cpu"):
        dj.matmul(a, w)
    from dispatch_jit.autocast import _state
    assert _state.cache == {}                                  # cleared when the outermost region ends


def test_trace_shows_autocast_then_autograd(mats, capsys):
    a, _ = mats
    w = dj.rand(4, 2, requires_grad=True)
    with dj.autocast("cpu"), dj.show_dispatch_trace():
        a @ w
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[call] op=[aten::matmul], key=[AutocastCPU]"
    assert " [call] op=[aten::matmul], key=[AutogradCPU]" in lines


def test_custom_op_register_autocast():
    @dj.library.custom_op("autocast_test::scale2", mutates_args=())
    def scale2(x: dj.Tensor) -> dj.Tensor:
        return x * 2.0
    try:
        scale2.register_autocast("cpu", dj.float16)
        x = dj.ones(3)
        assert scale2(x).dtype is dj.float32
        with dj.autocast("cpu"):
            assert scale2(x).dtype is dj.float16
    finally:
        scale2._destroy()


def test_dump_table_lists_autocast_kernels():
    table = dj.dump_table("aten::matmul")
    # the key column is as wide as the longest key's name (AutogradPrivateUse1 since PrivateUse1)
    assert re.search(r"\n  AutocastCPU +autocast_lower_precision  \[kernel\]", table), table
