"""Oracle tests for kernels/linalg/cpu.py: every dtype, shape and layout against
numpy.matmul / numpy.dot.  Arrays stay tiny; the compiled kernels are shared
by all parametrizations through the module's own caches (one compile per
kernel and dtype), which keeps the whole file to a few seconds per dtype."""

from __future__ import annotations

import doctest
import importlib.util
import pathlib

import numba
import numpy as np
import pytest

_PATH = pathlib.Path(__file__).resolve().parents[3] / "kernels" / "linalg" / "cpu.py"


def _load_by_path(name: str):
    spec = importlib.util.spec_from_file_location(name, _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


try:
    from dispatch_jit.kernels.linalg import cpu as linalg
except Exception:  # the package is mid-construction: load the module by path
    linalg = _load_by_path("dispatch_jit_kernels_linalg")

from dispatch_jit.kernels.linalg import gemm, product  # noqa: E402 - what cpu.py imports
from helpers import fresh_dispatcher  # noqa: E402

ShapeError, DTypeError = linalg.ShapeError, linalg.DTypeError
CastingError = linalg.CastingError

DTYPES = [np.dtype(t) for t in ("float16", "float32", "float64", "complex64", "complex128",
                                "int8", "int16", "int32", "int64", "uint8")]
# rtol = atol per dtype; integers must match NumPy exactly (wraparound included)
TOL = {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12, "complex64": 1e-5, "complex128": 1e-12}


def _rand(shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    lo, hi = (0, 256) if dt == np.uint8 else (-100, 100)  # big enough to wrap int8/uint8
    return rng.integers(lo, hi, shape).astype(dt)


def _reference(a, b):
    if a.dtype == np.float16:  # the oracle computes in float64 and rounds once
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float16)
    return np.matmul(a, b)


def _check(got, a, b):
    want = _reference(a, b)
    assert isinstance(got, np.ndarray)
    assert got.shape == np.shape(want) and got.dtype == a.dtype
    assert got.flags.c_contiguous
    tol = TOL.get(a.dtype.name)
    if tol is None:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1, a.shape[-1]) ** 0.5)


SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((2, 3, 4), (4, 5)),
    ((1, 3, 4), (5, 4, 2)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((6,), (2, 6, 3)),
    ((2, 3, 6), (6,)),
    ((2, 0), (0, 3)),        # k = 0: zeros
    ((4, 3, 0), (0, 2)),     # batched k = 0
    ((0, 3), (3, 2)),
    ((2, 3), (3, 0)),
    ((0, 2, 3), (3, 4)),     # empty batch
]


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("sa,sb", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_shapes(dt, sa, sb):
    a, b = _rand(sa, dt, 1), _rand(sb, dt, 2)
    got = linalg.get_matmul(dt)(a, b)
    _check(got, a, b)
    if 0 in sa or 0 in sb:
        assert not got.any()


def _layouts(dt):
    """(name, a, b) for one 2-D and one batched problem, in views of every kind."""
    a, b = _rand((6, 4), dt, 3), _rand((6, 5), dt, 4)  # a.T is (4, 6)
    a3, b3 = _rand((3, 6, 4), dt, 5), _rand((3, 5, 6), dt, 6)
    c3 = _rand((3, 4, 6), dt, 11)
    big = _rand((9, 12), dt, 7)
    return [
        ("a_transposed", a.T, _rand((6, 5), dt, 8)),
        ("b_transposed", _rand((4, 5), dt, 9), b.T),
        ("both_transposed", a.T, _rand((5, 6), dt, 10).T),
        ("strided", big[::2, ::3], big[1:5, ::2]),
        ("negative_strides", big[::-2, :4], big[:4, ::-1]),
        ("batched_transposed", a3.swapaxes(1, 2), b3.swapaxes(1, 2)),
        ("batch_strided", c3[::2], b3.swapaxes(1, 2)[::2]),
        ("broadcast_view", np.broadcast_to(big[:3, :4], (2, 3, 4)), big[:4, :5]),
        ("vector_strided", big[0, ::3], big[:4, :5]),
        ("matvec_transposed", a.T, b[:, 0]),
        ("vecmat_transposed", b[:, 1], _rand((5, 6), dt, 12).T),
        ("fortran_batched", np.asfortranarray(c3[:, :, :5]), big[:5, :3]),
    ]


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_matmul_layouts(dt):
    f = linalg.get_matmul(dt)
    for name, a, b in _layouts(dt):
        a_copy, b_copy = a.copy(), b.copy()
        _check(f(a, b), a, b)
        np.testing.assert_array_equal(a, a_copy, err_msg=name)  # inputs untouched
        np.testing.assert_array_equal(b, b_copy, err_msg=name)


def test_one_signature_per_dtype_whatever_the_layout():
    dt = np.dtype(np.float64)
    f = linalg.get_matmul(dt)
    for _, a, b in _layouts(dt):
        f(a, b)
    assert len([s for s in linalg.compiled_signatures()["blas"] if "float64" in s]) == 1


@pytest.mark.parametrize("dt", [np.dtype(t) for t in ("float32", "int32")], ids=str)
def test_out(dt):
    f = linalg.get_matmul(dt)
    a, b = _rand((2, 3, 4), dt), _rand((4, 5), dt)
    out = np.empty((2, 3, 5), dt)
    assert f(a, b, out=out) is out
    _check(out, a, b)
    with pytest.raises(ShapeError, match=r"out has shape \(3, 5\), expected \(2, 3, 5\)"):
        f(a, b, out=np.empty((3, 5), dt))
    with pytest.raises(CastingError, match="out has dtype float16"):
        f(a, b, out=np.empty((2, 3, 5), np.float16))
    with pytest.raises(ShapeError, match="C-contiguous"):
        f(a, b, out=np.empty((2, 5, 3), dt).swapaxes(1, 2))


def test_out_half_and_aliasing():
    a, b = _rand((4, 4), np.dtype(np.float16)), _rand((4, 4), np.dtype(np.float16), 1)
    out = np.empty((4, 4), np.float16)
    assert linalg.get_matmul(np.float16)(a, b, out=out) is out
    _check(out, a, b)
    for dt in (np.dtype(np.float64), np.dtype(np.int16)):  # out aliases an input: via a temporary
        a, b = _rand((4, 4), dt), _rand((4, 4), dt, 1)
        want = _reference(a, b)
        linalg.get_matmul(dt)(a, b, out=a)
        np.testing.assert_allclose(a, want, rtol=1e-12)


def test_blocked_and_parallel_paths():
    """Sizes past the loop nest's k and j blocks (with remainders), and past
    the parallel threshold, so the prange variants compile and run."""
    i32, f32 = np.dtype(np.int32), np.dtype(np.float32)
    cases = [
        (_rand((3, 131), i32), _rand((131, 1030), i32)),   # j blocks, k block + remainder
        (_rand((70, 61), i32), _rand((61, 70), i32)),      # rows in parallel
        (_rand((600, 8, 9), i32), _rand((9, 7), i32)),     # batch in parallel
        (_rand((200, 401), i32), _rand((401,), i32)),      # matrix-vector, row-dot form
        (_rand((1100, 4, 4), f32), _rand((1100, 4, 4), f32)),  # small float batch: loop nest
        (_rand((3, 20, 20), f32), _rand((20, 20), f32)),   # float batch past _SMALL_MNK: BLAS
    ]
    for a, b in cases:
        _check(linalg.get_matmul(a.dtype)(a, b), a, b)
    if numba.get_num_threads() > 1:
        wanted = {"ikj_parallel_rows", "ikj_parallel_batch"}
        assert wanted <= set(linalg.compiled_signatures())


@pytest.mark.parametrize("dt", [np.dtype(t) for t in ("float32", "float64", "complex64")], ids=str)
def test_skinny_products_take_the_loop_nest(dt):
    """A few rows times a wide matrix (linear's weight gradient of a small output layer) runs in
    the i-k-j loop nest, whatever the operands' layout; past the measured bounds, BLAS."""
    for (m, k, n), kernel in [((3, 512, 64), "ikj"), ((1, 64, 32), "ikj"), ((4, 1024, 256), "ikj"),
                              ((5, 512, 64), "blas"), ((3, 2048, 64), "blas"), ((3, 512, 31), "blas")]:
        a, b = _rand((k, m), dt, 1).T, _rand((k, n), dt, 2)       # a transposed, as g.T in linear's backward
        _check(linalg.get_matmul(dt)(a, b), a, b)
        assert linalg._PLANS[("blas", a.shape, b.shape)][9] == kernel


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_dot(dt):
    f = linalg.get_dot(dt)
    for n in (0, 1, 7):
        a, b = _rand((n,), dt), _rand((n,), dt, 1)
        got = f(a, b)
        assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == dt
        _check(got, a, b)
    base = _rand((20,), dt, 3)
    _check(f(base[::3], base[1::3]), base[::3], base[1::3])


def test_dot_complex_does_not_conjugate():
    a = np.array([1 + 2j, 3 - 1j], np.complex128)
    assert linalg.get_dot(np.complex128)(a, a) == np.sum(a * a)


def test_dot_errors():
    f = linalg.get_dot(np.float32)
    with pytest.raises(ShapeError, match=r"dot: expected two 1-D arrays, got shapes \(2, 2\) and"):
        f(np.ones((2, 2), np.float32), np.ones(2, np.float32))
    with pytest.raises(ShapeError, match=r"dot: shapes \(3,\) and \(4,\) differ in length \(3 != 4\)"):
        f(np.ones(3, np.float32), np.ones(4, np.float32))


@pytest.mark.parametrize("sa,sb,msg", [
    ((2, 3), (4, 5), "matmul: shapes (2, 3) and (4, 5) cannot be multiplied (3 != 4)"),
    ((3,), (4,), "matmul: shapes (3,) and (4,) cannot be multiplied (3 != 4)"),
    ((2, 3), (2,), "matmul: shapes (2, 3) and (2,) cannot be multiplied (3 != 2)"),
    ((), (3,), "matmul: both arguments need at least one dimension, got shapes () and (3,)"),
    ((3,), (), "matmul: both arguments need at least one dimension, got shapes (3,) and ()"),
    ((2, 3, 4), (3, 4, 5), "matmul: batch dimensions (2,) and (3,) of shapes (2, 3, 4) and (3, 4, 5) "
                           "cannot be broadcast together"),
])
def test_shape_errors(sa, sb, msg):
    with pytest.raises(ShapeError) as info:
        linalg.matmul_result_shape(sa, sb)
    assert str(info.value) == msg
    with pytest.raises(ShapeError) as info:
        linalg.get_matmul(np.float32)(np.ones(sa, np.float32), np.ones(sb, np.float32))
    assert str(info.value) == msg
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError):  # NumPy agrees that these are errors
        np.matmul(np.ones(sa), np.ones(sb))


@pytest.mark.parametrize("sa,sb", SHAPES + [((7, 1, 2, 3), (1, 5, 3, 4)), ((1,), (2, 1, 3))])
def test_result_shape_matches_numpy(sa, sb):
    assert linalg.matmul_result_shape(sa, sb) == np.matmul(np.empty(sa), np.empty(sb)).shape


def test_unsupported_dtypes():
    for get in (linalg.get_matmul, linalg.get_dot):
        with pytest.raises(DTypeError) as info:
            get(np.bool_)
        msg = str(info.value)
        assert isinstance(info.value, TypeError)
        assert "bool" in msg and "PyTorch" in msg
        assert all(str(dt) in msg for dt in linalg.SUPPORTED_DTYPES)
    with pytest.raises(DTypeError, match="uint16 is not supported"):
        linalg.get_matmul(np.uint16)
    with pytest.raises(DTypeError, match="kernel for float32 called with float64 and float32"):
        linalg.get_matmul(np.float32)(np.ones((2, 2)), np.ones((2, 2), np.float32))


def test_supported_dtypes_and_callable_cache():
    assert set(linalg.SUPPORTED_DTYPES) == set(DTYPES)
    assert linalg.get_matmul(np.float32) is linalg.get_matmul(np.dtype("float32"))
    assert linalg.get_dot(np.int8) is linalg.get_dot("int8")


def test_lazy_compile():
    fresh = _load_by_path("dispatch_jit_kernels_linalg_fresh")
    assert fresh.compiled_signatures() == {}
    f = fresh.get_matmul(np.int8)
    assert fresh.compiled_signatures() == {}  # getting the callable compiles nothing
    a, b = _rand((2, 5), np.dtype(np.int8)), _rand((5,), np.dtype(np.int8))
    f(a, b)
    f(a[::-1], b)  # another call, another layout: no new compile
    sigs = fresh.compiled_signatures()
    assert list(sigs) == ["rowdot"] and len(sigs["rowdot"]) == 1 and "int8" in sigs["rowdot"][0]


def test_doctests():
    assert doctest.testmod(linalg, raise_on_error=True).failed == 0
    assert doctest.testmod(product, raise_on_error=True).attempted >= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_matrix_product_shortcut_equals_the_batched_path(dtype):
    """dj.matmul of two C-contiguous matrices of one float dtype takes matrix_product (one BLAS
    call on 2-D arrays): the bits of get_matmul's batched call; sizes that do not fit, empty
    ones and transposed operands still take the general path and its errors."""
    import dispatch_jit as dj
    from dispatch_jit.errors import ShapeError
    from dispatch_jit.registry import lookup
    rng = np.random.default_rng(3)
    for m, k, n in [(64, 64, 64), (3, 5, 2), (1, 1, 1), (0, 3, 2), (3, 0, 2), (17, 9, 33), (3, 512, 64)]:
        a, b = (rng.standard_normal((m, k)) * 3).astype(dtype), (rng.standard_normal((k, n)) * 3).astype(dtype)
        got = dj.matmul(dj.tensor(a), dj.tensor(b))
        assert got.shape == (m, n) and got.numpy().dtype == dtype and got.is_contiguous()
        np.testing.assert_array_equal(got.numpy(), linalg.get_matmul(dtype)(a[None], b[None])[0])
    assert any(getattr(f, "__name__", "") == "run_matrices" for f in lookup("aten::matmul").memo.values())
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        dj.matmul(dj.tensor(np.ones((2, 3), dtype)), dj.tensor(np.ones((2, 3), dtype)))
    t = dj.tensor(np.arange(6, dtype=dtype).reshape(2, 3))
    np.testing.assert_array_equal(dj.matmul(t, t.T).numpy(), t.numpy() @ t.numpy().T)


@pytest.mark.skipif(not gemm.LIBRARY, reason="this NumPy bundles no OpenBLAS of its own: np.dot runs")
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_products_run_numpys_openblas(dt):
    """gemm.py binds NumPy's own OpenBLAS: a float matmul is np.matmul's gemm call, to the bit, with
    C-ordered and transposed (F-ordered) operands alike; and the compiled plans' product_into too."""
    rng = np.random.default_rng(11)
    for m, k, n in [(64, 64, 64), (512, 20, 64), (64, 512, 20), (7, 300, 5)]:
        a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
        for x, y in [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b))]:
            want = np.matmul(x, y)
            np.testing.assert_array_equal(linalg.get_matmul(dt)(x, y), want)
            out = np.empty((m, n), dt)
            product.product_into(x, y, out)
            np.testing.assert_array_equal(out, want)
    # the bits alone cannot tell the libraries apart (SciPy's often agrees): the code names the symbol
    symbol = f"dispatch_jit_cblas_{np.dtype(dt).char}gemm"
    with_a = fresh_dispatcher(gemm._with_a)     # compiled here: from a warm disk cache, nothing is
    a, b = rng.standard_normal((2, 3)).astype(dt), rng.standard_normal((3, 2)).astype(dt)
    out = np.empty((2, 2), dt)
    with_a(a, False, b, out)
    np.testing.assert_array_equal(out, np.matmul(a, b))
    assert any(symbol in ir for ir in with_a.inspect_llvm().values())
