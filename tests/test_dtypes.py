import numpy as np
import pytest
from hypothesis import given, strategies as st

import dispatch_jit as dj
from dispatch_jit.dtypes import ALL_DTYPES
from dispatch_jit.errors import DTypeError

try:
    import torch
except ImportError:  # torch is optional: the oracle test below skips
    torch = None


def test_dtype_objects():
    assert dj.float32.itemsize == 4 and dj.float32.is_floating_point
    assert dj.complex64.is_complex and dj.int8.is_signed and not dj.uint8.is_signed
    assert repr(dj.bool) == "dispatch_jit.bool"
    assert len(ALL_DTYPES) == 15


@pytest.mark.parametrize("a,b,expected", [
    (dj.int64, dj.float32, dj.float32), (dj.uint8, dj.int8, dj.int16), (dj.bool, dj.int8, dj.int8),
    (dj.float16, dj.float32, dj.float32), (dj.complex64, dj.float64, dj.complex128),
    (dj.int32, dj.float16, dj.float16), (dj.bool, dj.bool, dj.bool), (dj.int64, dj.complex64, dj.complex64),
])
def test_promote_types(a, b, expected):
    assert dj.promote_types(a, b) is expected
    assert dj.promote_types(b, a) is expected


def test_promote_uint64_with_signed_is_an_error():
    with pytest.raises(DTypeError, match="uint64 and int64|int64 and uint64"):
        dj.promote_types(dj.uint64, dj.int64)


@pytest.mark.parametrize("args,expected", [
    ((dj.tensor([1, 2]), 2.5), dj.float32),                       # int tensor, float scalar -> default float
    ((dj.tensor([1, 2], dtype=dj.int8), 1000), dj.int8),           # same category: the tensor wins
    ((dj.tensor([1.0], dtype=dj.float16), dj.tensor(1.0, dtype=dj.float64)), dj.float16),  # zero-dim lower tier
    ((dj.tensor([1], dtype=dj.int32), dj.tensor(1.0, dtype=dj.float64)), dj.float64),     # higher category wins
    ((dj.tensor([1.0]), 1j), dj.complex64),
    ((dj.tensor([1.0], dtype=dj.float64), 1j), dj.complex128),
    ((dj.tensor([True]), 1), dj.int64),
    ((dj.tensor(1, dtype=dj.int8), 5), dj.int8),
    ((3, 2.0), dj.float32),
])
def test_result_type(args, expected):
    assert dj.result_type(*args) is expected


def test_can_cast():
    assert dj.can_cast(dj.int32, dj.float32) and dj.can_cast(dj.float64, dj.float16)
    assert not dj.can_cast(dj.float32, dj.int64)
    assert not dj.can_cast(dj.complex64, dj.float64)
    assert not dj.can_cast(dj.int8, dj.bool) and dj.can_cast(dj.bool, dj.int8)


def test_as_dtype_errors():
    from dispatch_jit.dtypes import as_dtype
    assert as_dtype(np.float32) is dj.float32 and as_dtype(float) is dj.float32 and as_dtype("double") is dj.float64
    with pytest.raises(DTypeError, match="not a dtype"):
        as_dtype("float33")


_SIGNED_OR_FLOAT = [d for d in ALL_DTYPES if d.name not in ("uint16", "uint32", "uint64")]


@pytest.mark.skipif(torch is None, reason="torch not installed")
@given(st.sampled_from(_SIGNED_OR_FLOAT), st.sampled_from(_SIGNED_OR_FLOAT))
def test_promote_types_matches_torch(a, b):
    ta, tb = getattr(torch, a.name), getattr(torch, b.name)
    assert dj.promote_types(a, b).name == str(torch.promote_types(ta, tb)).replace("torch.", "")


@pytest.mark.skipif(torch is None, reason="torch not installed")
@given(st.sampled_from(_SIGNED_OR_FLOAT), st.sampled_from(_SIGNED_OR_FLOAT), st.booleans(),
       st.sampled_from([None, 2, 2.5, True, 1j]))
def test_result_type_matches_torch(a, b, b_zero_dim, scalar):
    x = dj.zeros(2, dtype=a)
    y = dj.zeros(() if b_zero_dim else (2,), dtype=b)
    tx = torch.zeros(2, dtype=getattr(torch, a.name))
    ty = torch.zeros(() if b_zero_dim else (2,), dtype=getattr(torch, b.name))
    ours = dj.result_type(x, y) if scalar is None else dj.result_type(x, y, scalar)
    # x is dimensioned, so (x + y) + scalar promotes exactly as result_type(x, y, scalar)
    theirs = (tx + ty).dtype if scalar is None else (tx + ty + scalar).dtype
    if theirs == torch.complex32:
        # no complex32 here: float16 + complex widens to complex64 (documented in dtypes.py)
        assert ours is dj.complex64
        return
    assert ours.name == str(theirs).replace("torch.", "")
