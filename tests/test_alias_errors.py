"""Errors name the function the user called (issue 12), not the op underneath: ``dj.amax`` is
``aten::max``, ``dj.concat`` is ``aten::cat``, ``dj.clip`` is ``aten::clamp``; each public
alias is its own generated entry (entry.make_entry(as_alias=True)) over the same memo."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import BroadcastError, DTypeError, SchemaError, ShapeError


def _x():
    return dj.tensor([[1.0, 2.0]])


# (call, exception type, how the message starts)
CASES = {
    "amax_axis": (lambda: dj.amax(_x(), 5), ShapeError, "amax: axis 5 is out of range"),
    "amin_repeat": (lambda: dj.amin(_x(), (0, 0)), ShapeError, "amin: axis (0, 0) repeats"),
    "amax_empty": (lambda: dj.amax(dj.tensor([], dtype=dj.float32)), ShapeError, "amax(): cannot reduce"),
    "amax_complex": (lambda: dj.amax(dj.tensor([1 + 2j])), DTypeError, "amax() does not support dtype complex64: amax()"),
    "amax_both": (lambda: dj.amax(_x(), dim=1, axis=1), SchemaError, "amax() got both"),
    "amax_kwarg": (lambda: dj.amax(_x(), foo=1), TypeError, "amax() got an unexpected keyword argument"),
    "method_amax": (lambda: _x().amax(7), ShapeError, "amax: axis 7"),
    "max_empty": (lambda: dj.max(dj.tensor([], dtype=dj.float32)), ShapeError, "max(): cannot reduce"),
    "max_dim_complex": (lambda: dj.max(dj.tensor([1 + 2j]), 0), DTypeError, "max() does not support"),
    "min_dim_complex": (lambda: dj.min(dj.tensor([1 + 2j]), 0), DTypeError, "min() does not support"),
    "concat_sizes": (lambda: dj.concat([_x(), dj.tensor([1.0])]), ShapeError, "concat: sizes of tensors"),
    "concat_axis": (lambda: dj.concat([_x(), _x()], 5), ShapeError, "concat: axis 5"),
    "permute_dims": (lambda: dj.permute_dims(_x(), (0,)), ShapeError, "permute_dims: dims [0]"),
    "expand_dims": (lambda: dj.expand_dims(_x(), 9), ShapeError, "expand_dims: axis 9"),
    "clip": (lambda: dj.clip(_x()), SchemaError, "clip: at least one of 'min' or 'max'"),
    "method_clip_": (lambda: _x().clip_(), SchemaError, "clip: at least one of 'min' or 'max'"),
    "subtract": (lambda: dj.subtract(_x(), dj.tensor([1.0, 2.0, 3.0])), BroadcastError, "subtract(): aten::sub"),
    "absolute": (lambda: dj.absolute(dj.tensor([True])), DTypeError, "absolute() does not support bool"),
    "bitwise_invert": (lambda: dj.bitwise_invert(_x()), DTypeError, "bitwise_invert() does not support"),
    "arctan2": (lambda: dj.arctan2(_x()), SchemaError, "arctan2(): aten::atan2.Tensor("),
    "softmax_complex": (lambda: dj.softmax(dj.tensor([1 + 2j]), 0), DTypeError, "softmax: complex inputs"),
}


@pytest.mark.parametrize("name", CASES)
def test_error_names_the_function_called(name):
    call, exc, start = CASES[name]
    with pytest.raises(exc) as info:
        call()
    assert str(info.value).startswith(start), str(info.value)


def test_other_words_are_left_alone():
    # "'min' or 'max'" in clamp's message, and the canonical names, are not rewritten
    with pytest.raises(SchemaError, match=r"^clamp: at least one of 'min' or 'max'"):
        dj.clamp(_x())
    with pytest.raises(ShapeError, match=r"^cat: axis 5"):
        dj.cat([_x(), _x()], 5)


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_empty_reduction_names_as_torch(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as want:
        getattr(torch, name)(torch.tensor([]))
    with pytest.raises(ShapeError) as got:
        getattr(dj, name)(dj.tensor([], dtype=dj.float32))
    assert str(want.value).startswith(f"{name}():") and str(got.value).startswith(f"{name}():")


def test_aliases_share_the_memo_and_answers():
    a, b = dj.tensor([3.0, 5.0]), dj.tensor([1.0, 2.0])
    dj.sub(a, b)
    hits = dj.cache_info("aten::sub.Tensor")["hits"]
    np.testing.assert_array_equal(dj.subtract(a, b).numpy(), [2.0, 3.0])
    assert dj.cache_info("aten::sub.Tensor")["hits"] == hits + 1     # the same resolved kernel
    np.testing.assert_array_equal(dj.amax(dj.tensor([[1.0, 4.0], [3.0, 2.0]]), 1).numpy(), [4.0, 3.0])
