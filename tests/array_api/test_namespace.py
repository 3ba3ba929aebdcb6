"""dispatch_jit.array_api: where the standard and PyTorch disagree, the namespace adapts over the
same ops; the top level keeps PyTorch's semantics.  (The official suite, tests/array_api/suite.py, is
the big test; this file covers the adaptation rules and the errors.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import array_api as xp
from dispatch_jit.errors import AxisError


def test_tensor_methods_of_the_standard():
    x = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.__array_namespace__() is xp and x.__array_namespace__(api_version="2024.12") is xp
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")
    assert x.mT.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert x.to_device("cpu") is x and x.device == xp.__array_namespace_info__().default_device()
    i = dj.tensor([1, 2], dtype=dj.int8)
    assert (i << 2).tolist() == [4, 8] and (i >> 1).tolist() == [0, 1] and (1 << i).tolist() == [2, 4]
    assert xp.__array_api_version__ == "2025.12"
    assert (xp.e, xp.pi, xp.newaxis) == (math.e, math.pi, None) and math.isnan(xp.nan) and xp.inf == math.inf


def test_zero_dim_promotion_by_dtype():
    a, b = xp.asarray(0, dtype=xp.uint16), xp.asarray([1, 2], dtype=xp.uint8)
    assert xp.bitwise_or(a, b).dtype is xp.uint16            # the standard
    assert dj.bitwise_or(a, b).dtype is dj.uint8              # PyTorch, at the top level
    assert xp.add(xp.asarray(1.0, dtype=xp.float64), xp.asarray([1.0])).dtype is xp.float64
    assert xp.add(xp.asarray([1], dtype=xp.int8), 3).dtype is xp.int8          # Python scalars stay weak
    assert xp.result_type(xp.int8, xp.uint8) is xp.int16


def test_reductions_take_the_standards_dtypes_and_correction():
    u8 = xp.asarray([200, 100], dtype=xp.uint8)
    assert xp.sum(u8).dtype is xp.uint64 and xp.sum(u8).item() == 300
    assert dj.sum(u8).dtype is dj.int64                        # PyTorch's
    assert xp.prod(xp.asarray([2, 3], dtype=xp.int8)).dtype is xp.int64
    x = xp.asarray([1.0, 2.0, 4.0])
    assert xp.var(x).item() == pytest.approx(np.var([1.0, 2.0, 4.0]))
    assert xp.std(x, correction=1).item() == pytest.approx(np.std([1.0, 2.0, 4.0], ddof=1), rel=1e-6)
    assert dj.var(x).item() == pytest.approx(np.var([1.0, 2.0, 4.0], ddof=1))   # PyTorch's default
    assert xp.max(xp.asarray([[1, 5], [7, 2]]), axis=0).tolist() == [7, 5]
    c = xp.cumulative_sum(xp.asarray([1, 2, 3], dtype=xp.uint8), include_initial=True)
    assert c.tolist() == [0, 1, 3, 6] and c.dtype is xp.uint64


def test_parameter_names_of_the_standard():
    assert xp.full((2,), 3).dtype is xp.int64 and xp.zeros(shape=(1, 2)).shape == (1, 2)
    assert xp.arange(0, stop=5, step=2).tolist() == [0, 2, 4]
    assert xp.linspace(0, 1, num=5, endpoint=False).tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])
    assert xp.eye(3, k=1).numpy().tolist() == np.eye(3, k=1).tolist()
    assert xp.permute_dims(xp.zeros((2, 3)), axes=(1, 0)).shape == (3, 2)
    assert xp.concat([xp.zeros((2, 2)), xp.ones((1, 2))], axis=None).shape == (6,)
    assert xp.clip(xp.asarray([1, 5])).tolist() == [1, 5]
    assert xp.clip(xp.asarray([1, 5], dtype=xp.int8), max=3).dtype is xp.int8


def test_errors_the_standard_names():
    x = xp.zeros((2, 3))
    with pytest.raises(IndexError):
        xp.expand_dims(x, axis=4)
    with pytest.raises(ValueError, match="not 1"):
        xp.squeeze(x, axis=0)
    assert isinstance(AxisError("x"), ValueError)       # also a ShapeError, as before
    with pytest.raises(ValueError):
        xp.reshape(x.mT, (6,), copy=False)                 # would need a copy


def test_asarray_copy_rules():
    x = xp.asarray([1.0, 2.0])
    assert xp.asarray(x, dtype=x.dtype, copy=False) is x
    assert xp.asarray(x, copy=True).numpy().ctypes.data != x.numpy().ctypes.data
    with pytest.raises(ValueError, match="copy"):
        xp.asarray(x, dtype=xp.float64, copy=False)
    a = np.zeros(3)
    assert xp.asarray(a, copy=False).numpy().ctypes.data == a.ctypes.data


def test_sorting_sets_and_searching_against_numpy():
    a = np.array([3.0, 1.0, np.nan, 1.0, 2.0, np.nan, 3.0], dtype=np.float32)
    x = xp.asarray(a)
    np.testing.assert_array_equal(xp.sort(x).numpy(), np.sort(a))
    np.testing.assert_array_equal(xp.argsort(x, descending=True).numpy(),
                                  len(a) - 1 - np.flip(np.argsort(np.flip(a), kind="stable")))
    u = xp.unique_all(x)
    vals, idx, inv, cnt = np.unique(a, return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    np.testing.assert_array_equal(u.values.numpy(), vals)
    np.testing.assert_array_equal(u.indices.numpy(), idx)
    np.testing.assert_array_equal(u.counts.numpy(), cnt)
    np.testing.assert_array_equal(u.inverse_indices.numpy(), inv)
    assert xp.unique_values(xp.asarray([2, 1, 2])).tolist() == [1, 2]
    assert xp.searchsorted(xp.asarray([1, 3, 5]), xp.asarray([3, 4]), side="right").tolist() == [2, 2]
    assert xp.isin(xp.asarray([1.0, 2.0, float("nan")]), xp.asarray([2.0, float("nan")])).tolist() == [False, True, False]
    assert [t.tolist() for t in xp.nonzero(xp.asarray([[0, 1], [1, 0]]))] == [[0, 1], [1, 0]]
    assert xp.count_nonzero(xp.asarray([[0, 1], [1, 1]]), axis=1).tolist() == [1, 2]


def test_manipulation_against_numpy():
    a = np.arange(6).reshape(2, 3)
    x = xp.asarray(a)
    for got, want in [(xp.flip(x), np.flip(a)), (xp.roll(x, 1, axis=1), np.roll(a, 1, 1)),
                      (xp.tile(x, (2, 1)), np.tile(a, (2, 1))), (xp.repeat(x, 2, axis=1), np.repeat(a, 2, 1)),
                      (xp.repeat(x, xp.asarray([1, 0, 2]), axis=1), np.repeat(a, [1, 0, 2], 1)),
                      (xp.moveaxis(x, 0, 1), np.moveaxis(a, 0, 1)), (xp.diff(x, axis=1), np.diff(a, axis=1)),
                      (xp.take(x, xp.asarray([2, 0]), axis=1), np.take(a, [2, 0], 1)),
                      (xp.tensordot(x, x.mT, axes=1), np.tensordot(a, a.T, 1)),
                      (xp.vecdot(x, x), np.sum(a * a, -1)), (xp.tril(x, k=0), np.tril(a))]:
        np.testing.assert_array_equal(got.numpy(), want)
    assert [t.tolist() for t in xp.unstack(x, axis=1)] == [[0, 3], [1, 4], [2, 5]]
    assert [t.shape for t in xp.meshgrid(xp.arange(2), xp.arange(3))] == [(3, 2), (3, 2)]
    assert xp.broadcast_shapes((2, 1), (3,)) == (2, 3)


def test_sign_keeps_nan_and_complex_sign():
    assert math.isnan(xp.sign(xp.asarray([float("nan")]))[0].item())
    z = xp.sign(xp.asarray([3 + 4j]))
    assert z[0].item() == pytest.approx(0.6 + 0.8j)


def test_data_type_functions():
    assert xp.finfo(xp.float64).eps == np.finfo(np.float64).eps and xp.iinfo(xp.int16).min == -32768
    assert xp.isdtype(xp.uint8, "unsigned integer") and not xp.isdtype(xp.uint8, "signed integer")
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.int16, xp.int8)
    assert not xp.can_cast(xp.float64, xp.float32) and xp.can_cast(xp.float32, xp.complex64)
    assert xp.astype(xp.asarray([1.5]), xp.int32).dtype is xp.int32
    info = xp.__array_namespace_info__()
    assert set(info.dtypes(kind="integral")) == {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                                "uint64"}
    assert info.default_dtypes()["indexing"] is xp.int64


def test_linalg_and_fft_extensions():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    x = xp.asarray(a, dtype=xp.float64)
    np.testing.assert_allclose(xp.linalg.inv(x).numpy(), np.linalg.inv(a))
    np.testing.assert_allclose(xp.linalg.eigh(x).eigenvalues.numpy(), np.linalg.eigvalsh(a))
    np.testing.assert_allclose(xp.linalg.matrix_norm(x, ord="nuc").numpy(), np.linalg.norm(a, "nuc"))
    np.testing.assert_allclose(xp.linalg.vector_norm(x, ord=3).numpy(), np.linalg.norm(a.ravel(), 3))
    np.testing.assert_allclose(xp.linalg.trace(x).numpy(), 7.0)
    # axis=() reduces nothing (the top level's sum reads () as all axes, PyTorch's way)
    assert xp.linalg.vector_norm(-x, axis=()).shape == (2, 2)
    np.testing.assert_allclose(xp.linalg.vector_norm(-x, axis=(), ord=0, keepdims=True).numpy(), np.ones((2, 2)))
    np.testing.assert_allclose(xp.linalg.cross(xp.asarray([1.0, 0, 0]), xp.asarray([0.0, 1, 0])).numpy(), [0, 0, 1])
    np.testing.assert_allclose(xp.fft.ifft(xp.fft.fft(xp.asarray([1.0, 2.0, 3.0]))).numpy().real, [1, 2, 3],
                               atol=1e-6)
    np.testing.assert_allclose(xp.fft.fftfreq(4, d=0.5).numpy(), np.fft.fftfreq(4, 0.5))


def test_an_empty_axis_tuple_reduces_nothing():
    x = xp.asarray([[1, 0], [3, 4]], dtype=xp.uint8)
    assert xp.sum(x, axis=()).tolist() == [[1, 0], [3, 4]] and xp.sum(x, axis=()).dtype is xp.uint64
    assert dj.sum(x, ()).shape == ()                     # PyTorch: dim=() is every dim
    assert xp.all(x, axis=()).tolist() == [[True, False], [True, True]]
    assert xp.all(x).dtype is xp.bool and dj.all(x).dtype is dj.uint8      # PyTorch keeps uint8
    f = xp.asarray([1.0, 2.0])
    assert xp.std(f, axis=()).tolist() == [0.0, 0.0] and xp.max(f, axis=()).tolist() == [1.0, 2.0]
    assert xp.count_nonzero(x, axis=()).tolist() == [[1, 0], [1, 1]]


def test_the_default_float_dtype_has_one_source():
    # dj.set_default_dtype reaches the namespace as it reaches dj.ones: Python floats (and complexes,
    # its twin), the float creation functions and the inspection object all read it
    info = xp.__array_namespace_info__()
    try:
        dj.set_default_dtype(dj.float64)
        made = {"asarray": xp.asarray([1.0]), "asarray scalar": xp.asarray(1.0), "ones": xp.ones(2),
                "full": xp.full(2, 0.5), "eye": xp.eye(2), "arange": xp.arange(0.5, 2.0),
                "linspace": xp.linspace(0, 1, 3), "fftfreq": xp.fft.fftfreq(4), "rfftfreq": xp.fft.rfftfreq(4)}
        assert {k: t.dtype for k, t in made.items()} == dict.fromkeys(made, xp.float64)
        assert xp.asarray([1j]).dtype is xp.complex128 and xp.full(2, 1j).dtype is xp.complex128
        assert xp.linspace(0, 1j, 3).dtype is xp.complex128
        assert xp.result_type(xp.int64, 1.0) is xp.float64 and xp.result_type(xp.int64, 1j) is xp.complex128
        assert xp.result_type(xp.float32, 1j) is xp.complex64          # a float array keeps its precision
        assert info.default_dtypes()["real floating"] is xp.float64
        assert info.default_dtypes()["complex floating"] is xp.complex128
        assert dj.sparse_csr_tensor([0, 1], [0], [1.5]).values().dtype is dj.float64
    finally:
        dj.set_default_dtype(dj.float32)
    assert xp.asarray([1.0]).dtype is xp.float32 and xp.asarray([1j]).dtype is xp.complex64
    assert info.default_dtypes()["real floating"] is xp.float32
    assert info.default_dtypes()["complex floating"] is xp.complex64


def test_devices_is_the_type_of_the_version_implemented():
    # the 2025.12 standard (the version this namespace declares) returns a tuple; 2024.12 and
    # earlier a list (the official suite checks the same, by the declared version)
    devices = xp.__array_namespace_info__().devices()
    assert xp.__array_api_version__ == "2025.12"
    assert type(devices) is tuple and devices[0] == dj.device("cpu")
