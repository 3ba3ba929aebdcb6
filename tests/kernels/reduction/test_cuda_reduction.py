"""CUDA reductions (kernels/reduction/cuda.py) against the CPU kernels on the same data.

Runs on Numba's CUDA simulator (tests/conftest.py) or a real GPU.  The
simulator runs one Python thread per CUDA thread, so arrays are tiny: runs
shorter than a 32-thread block take the one-thread-per-output ("rows")
kernel, and the tree kernels are exercised by runs of 32..100 elements (100
elements make two blocks per output, so pass 2 merges their partials).
"""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DTypeError, ShapeError
from dispatch_jit.kernels.reduction import cpu as reduction, cuda as cuda_reduction

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="needs CUDA or the Numba CUDA simulator")

OPS = ["sum", "prod", "mean", "max", "min", "argmax", "argmin", "var", "std", "all", "any", "logsumexp"]
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if np.dtype(dtype) == np.bool_:
        return rng.random(n).reshape(shape) < 0.6
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-3, 4, n).reshape(shape).astype(dtype)   # ties, and prod stays small
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).reshape(shape).astype(dtype)
    return np.round(rng.standard_normal(n), 1).reshape(shape).astype(dtype)   # rounded: ties for argmax


def _numpy_ref(op, a, axis=None, keepdims=False, dtype=None, correction=1):
    """The CPU kernels' results by NumPy, with their dtype rules (reduction.result_dtype).

    Each CPU kernel costs a Numba compile of ~0.5-1 s per (op, dtype), so only float32 runs
    them here (``cpu=True``); the other dtypes compare with this reference."""
    if dtype is not None:
        a = a.astype(dtype.np)
    rdt = reduction.result_dtype(op, a.dtype)
    ax = tuple(axis) if isinstance(axis, (tuple, list)) else axis
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    if op in ("sum", "prod"):
        r = getattr(np, op)(a.astype(rdt if a.dtype.kind in "biu" else wide), axis=ax, keepdims=keepdims)
    elif op in ("mean", "var", "std"):
        kw = {} if op == "mean" else {"ddof": correction}
        r = getattr(np, op)(a.astype(wide), axis=ax, keepdims=keepdims, **kw)
    elif op == "logsumexp":
        x = (a.astype(np.float32) if a.dtype.kind in "biu" else a).astype(wide)
        m = np.max(x.real, axis=ax, keepdims=True)
        m = np.where(np.isinf(m), 0.0, m)
        r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
        r = r if keepdims else np.squeeze(r, axis=tuple(range(a.ndim)) if ax is None else ax)
    else:
        r = getattr(np, op)(a, axis=ax, keepdims=keepdims)
    return np.asarray(r).astype(rdt)


def _public(op):
    """dj's function for reduction ``op``: max/min over axes are amax/amin (dj.max(x, dim) is torch's)."""
    return getattr(dj, {"max": "amax", "min": "amin"}.get(op, op))


def _same(op, a, cuda_t, cpu=None, **kw):
    """op on the CUDA tensor against the CPU kernel (cpu=True, default for float32) or NumPy's
    reference of it: same dtype, shape and values; and the same error where the CPU raises."""
    x = dj.tensor(a)
    cpu = a.dtype == np.float32 if cpu is None else cpu
    try:
        if not cpu and a.size:
            reduction.result_dtype(op, a.dtype)      # the CPU's dtype errors, without compiling it
            want = _numpy_ref(op, a, **kw)
        else:
            want = _public(op)(x, **kw).numpy()
    except (DTypeError, ShapeError) as e:
        with pytest.raises(type(e)) as got:
            _public(op)(cuda_t, **kw)
        assert str(got.value) == str(e) or not cpu
        return None
    out = _public(op)(cuda_t, **kw)
    assert out.device.type == "cuda", op
    got = out.numpy()
    assert got.dtype == want.dtype and got.shape == want.shape, (op, kw, got.dtype, want.dtype, got.shape, want.shape)
    tol = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-5, np.dtype(np.complex64): 2e-5}.get(want.dtype, 1e-12)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=f"{op} {kw}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {kw}")
    return got


def _cu(a):
    return dj.tensor(a).cuda()


@pytest.mark.parametrize("op", OPS)
def test_matches_cpu_over_dtypes_axes_keepdims(op):
    # dim=None, a single dim, a negative dim, a tuple of dims, with and without keepdim, every dtype
    # (unsupported ones must raise the CPU's error); runs of 2..24 elements: the rows kernel
    for dt in DTYPES:
        a = _data((2, 3, 4), dt)
        xc = _cu(a)
        axes = [None, 1, -1] if op in ("argmax", "argmin") else [None, 1, -1, (0, 2)]
        for ax in axes:
            for keep in (False, True):
                _same(op, a, xc, axis=ax, keepdims=keep)


@pytest.mark.parametrize("op", OPS)
def test_non_contiguous_input(op):
    a = _data((3, 4, 2), np.float64, seed=1)
    xc = _cu(a).permute((2, 0, 1))             # (2, 3, 4), strided
    assert not xc._data.flags.c_contiguous
    t = a.transpose(2, 0, 1)
    _same(op, t, xc)
    _same(op, t, xc, axis=1)
    if op not in ("argmax", "argmin"):
        _same(op, t, xc, axis=(0, 2), keepdims=True)


@pytest.mark.parametrize("op", OPS)
def test_tree_two_passes(op):
    # a run of three blocks' worth plus a tail (100 elements in the simulator's 32-thread blocks; on
    # hardware 256 threads x 4 elements each): at least two blocks per output, partials merged by the
    # second pass
    tpb = cuda_reduction._threads(0)
    per_block = tpb * (1 if dj.cuda.is_simulator() else cuda_reduction._PER_THREAD)
    n = 3 * per_block + 4
    a = _data((n,), np.float64, seed=2)
    if op == "prod":
        a = 1.0 + a / (n / 2)
    assert cuda_reduction.plan_variant(1, n) == "tree"
    assert cuda_reduction.launch_config(1, n)[1] >= 2
    _same(op, a, _cu(a))
    f = a.astype(np.float32)
    _same(op, f, _cu(f))


@pytest.mark.parametrize("op", ["sum", "var", "argmax", "logsumexp", "all"])
def test_tree_several_outputs(op):
    # three runs of 40 (more outputs than blocks: a block walks outputs) and a strided run of 50
    a = _data((3, 40), np.float32, seed=3)
    _same(op, a, _cu(a), axis=1)
    b = _data((50, 2), np.float64, seed=4)
    _same(op, b, _cu(b), axis=0, keepdims=True)


def test_tree_ints_and_ties_across_blocks():
    a = np.zeros(100, np.int32)
    a[[70, 10, 90]] = 7          # the maximum in both blocks: the first occurrence wins
    a[[33, 99]] = -5
    xc = _cu(a)
    assert _same("argmax", a, xc) == 10
    assert _same("argmin", a, xc) == 33
    assert _same("sum", a, xc).dtype == np.int64
    _same("max", a, xc)
    _same("any", a, xc)


def test_nan_propagates():
    a = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, -1.0]], np.float32)
    xc = _cu(a)
    for op in ("max", "min", "argmax", "argmin", "sum", "logsumexp"):
        _same(op, a, xc)
        _same(op, a, xc, axis=1)
    assert np.isnan(dj.max(xc).item())
    assert dj.argmax(xc, axis=1).numpy().tolist() == [1, 1]       # first NaN; first of tied 5s
    b = np.zeros(100)
    b[[64, 40]] = np.nan            # NaNs in both blocks of the tree
    assert _same("argmax", b, _cu(b)) == 40
    assert np.isnan(_same("min", b, _cu(b)))


def test_argmax_ties_keep_first():
    a = np.array([[3, 1, 3, 3], [0, 0, 0, 0]], np.int64)
    xc = _cu(a)
    assert dj.argmax(xc, axis=1).numpy().tolist() == [0, 0]
    assert dj.argmin(xc, axis=0).numpy().tolist() == [1, 1, 1, 1]
    assert dj.argmax(xc).item() == 0


def test_empty_inputs_match_cpu():
    # the CPU raises (or fills the identity) before it compiles anything: compare with it directly
    for shape, kw in [((0,), {}), ((0, 3), {}), ((0, 3), {"axis": 0}), ((0, 3), {"axis": 1}), ((2, 0), {"axis": 1})]:
        a = np.zeros(shape, np.float32)
        xc = dj.zeros(shape, device="cuda")
        for op in OPS:
            if op in ("argmax", "argmin") and kw.get("axis") is None and len(shape) > 1:
                continue
            _same(op, a, xc, cpu=True, **kw)
    with pytest.raises(ShapeError, match="zero-size"):
        dj.max(dj.zeros((0,), device="cuda"))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # correction >= n divides by zero, as on the CPU
def test_dtype_argument_correction_and_other_dtypes():
    a = _data((2, 5), np.int32)
    xc = _cu(a)
    assert _same("sum", a, xc, dtype=dj.float64).dtype == np.float64
    _same("mean", a, xc, axis=1, dtype=dj.float32)
    f = _data((2, 5), np.float64, seed=5)
    for c in (0, 1, 7):
        _same("var", f, _cu(f), axis=1, correction=c)
        _same("std", f, _cu(f), correction=c)
    h = _data((2, 5), np.float16, seed=6)
    for op in ("sum", "mean", "max", "argmin", "logsumexp"):
        _same(op, h, _cu(h), axis=1)
    z = _data((2, 3), np.complex64, seed=7)
    for op in ("sum", "mean", "var", "any", "max"):
        _same(op, z, _cu(z))
    u = np.array([[0, 255, 3], [9, 9, 1]], np.uint8)
    for op in ("sum", "max", "argmin", "logsumexp"):
        _same(op, u, _cu(u), axis=0)


def test_zero_d_and_size_one():
    s = np.array(2.5, np.float32)
    for op in ("sum", "max", "argmax", "mean", "var"):
        _same(op, s, _cu(s))
    a = np.array([[4.0], [1.0]], np.float32)
    _same("sum", a, _cu(a), axis=1, keepdims=True)


def test_gradients_on_cuda():
    x = dj.tensor(np.arange(5.0, dtype=np.float32), device="cuda", requires_grad=True)
    x.sum().backward()
    assert x.grad.device.type == "cuda" and x.grad.numpy().tolist() == [1.0] * 5
    x.grad = None
    x.mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(5, 0.2), rtol=1e-6)
    x.grad = None
    try:
        y = x * x
    except Exception as e:    # the elementwise CUDA kernels are another module's
        pytest.skip(f"mul is not registered on CUDA yet ({type(e).__name__}: {e})")
    y.sum().backward()
    assert x.grad.device.type == "cuda"
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.arange(5.0), rtol=1e-6)


def test_generated_sources():
    # the hardware path (warp shuffles for the last 32 lanes) is generated even where it cannot run
    src = cuda_reduction.kernel_source("argmax", np.float32, "partial", nk=1, nr=2, tpb=256, shuffles=True)
    assert "(0xffffffff, SH_m(v_m), 16)" in src and "(0xffffffff, SH_i(v_i), 1)" in src
    assert "sh_m = cuda.shared.array(256" in src and "if tid < 32:" in src
    assert "if tid < 16:" not in src            # the shared tree stops at 32 partials
    sim = cuda_reduction.kernel_source("sum", np.float32, "combine", tpb=32, shuffles=False)
    assert "shfl" not in sim and "if tid < 1:" in sim
    assert "for j in range(R):" in cuda_reduction.kernel_source("var", np.float64, "rows", nk=2, nr=1)
    # float32 sums accumulate in float64, as on the CPU
    assert reduction.REDUCTIONS["sum"].acc(np.dtype(np.float32)) == np.float64


@pytest.mark.parametrize("op", ["sum", "argmax", "var", "any", "max"])
def test_warp_shuffle_tail(op, monkeypatch):
    # the hardware's tree: 64-thread blocks whose last 32 partials merge by shfl_down_sync (in the
    # simulator an emulation of it); 150 elements make two blocks and a second pass
    monkeypatch.setattr(cuda_reduction, "THREADS", 64)
    monkeypatch.setattr(cuda_reduction, "SHUFFLES", True)
    a = _data((150,), np.float32, seed=8)
    a[[20, 140]] = a.max() + 1            # tied maximum in both blocks
    _same(op, a, _cu(a), cpu=False)
    b = _data((70, 2), np.int32 if op != "var" else np.float64, seed=9)
    _same(op, b, _cu(b), cpu=False, axis=0)
    if op in ("max", "any"):
        c = _data((100,), np.bool_)
        _same(op, c, _cu(c), cpu=False)
    if op == "sum":
        z = _data((64,), np.complex64)      # complex states: no shuffle, the shared tree to one lane
        _same(op, z, _cu(z), cpu=False)
    assert any(k[-1] for k in cuda_reduction._KERNELS)


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_real_gpu_long_runs(op):
    # real hardware only: 256-thread blocks, the warp-shuffle tail, many blocks per output and pass 2
    cases = [((300_000,), None), ((37, 5000), 1), ((5000, 37), 0), ((7, 300, 11), (0, 2)), ((3, 70_000), -1)]
    for dt in (np.float32, np.float64, np.int32, np.int64, np.bool_, np.uint8, np.float16):
        for shape, ax in cases:
            if op in ("argmax", "argmin") and isinstance(ax, tuple):
                continue
            a = _data(shape, dt, seed=len(shape))
            if op == "prod" and a.dtype.kind == "f":
                a = (1 + a / 1e4).astype(dt)
            if dt == np.float16 and op in ("sum", "mean", "var", "std", "logsumexp"):
                continue   # a float16 result of 1e5 terms: rounding, not the kernel, would differ
            _same(op, a, _cu(a), cpu=False, axis=ax)
