"""Issue 12: PyTorch users must not get different answers without a word.  Each top-level
function is checked against hand-written values (no torch needed) and, where torch is
installed, against torch itself; where torch raises, dispatch_jit must raise too."""

import math
import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import AutogradError, BroadcastError, DTypeError, SchemaError, ShapeError
from dispatch_jit.registry import lookup
from dispatch_jit.signature import MAX_NDIM, decode, make_sig

X4 = [1.0, 2.0, 3.0, 4.0]          # mean 2.5, sum of squared deviations 5
M23 = [[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]]


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got.tolist() if hasattr(got, "tolist") else got, np.float64),
                               np.asarray(want, np.float64), rtol=1e-6, equal_nan=True)


# -- var / std: unbiased by default, unbiased= and correction= -----------------------------------
VAR_CALLS = [   # (call on module M and tensor x, the value by hand for X4)
    (lambda M, x: M.var(x), 5 / 3),
    (lambda M, x: x.var(), 5 / 3),
    (lambda M, x: M.var(x, unbiased=False), 5 / 4),
    (lambda M, x: M.var(x, 0, False), 5 / 4),                   # the third positional is unbiased
    (lambda M, x: M.var(x, correction=0), 5 / 4),
    (lambda M, x: M.var(x, correction=2), 5 / 2),
    (lambda M, x: M.var(x, dim=0, unbiased=True), 5 / 3),
    (lambda M, x: M.std(x), math.sqrt(5 / 3)),
    (lambda M, x: x.std(unbiased=False), math.sqrt(5 / 4)),
    (lambda M, x: M.std(x, 0, True, True), [math.sqrt(5 / 3)]),  # (x, dim, unbiased, keepdim)
    (lambda M, x: x.std(dim=0, keepdim=True, correction=0), [math.sqrt(5 / 4)]),
    # PyTorch's overload (input, unbiased): a bool where dim goes (issue 25)
    (lambda M, x: M.std(x, False), math.sqrt(5 / 4)),
    (lambda M, x: M.var(x, True), 5 / 3),
    (lambda M, x: x.var(False), 5 / 4),
    (lambda M, x: x.std(True), math.sqrt(5 / 3)),
]


@pytest.mark.parametrize("i", range(len(VAR_CALLS)))
def test_var_std_defaults_and_spellings(i):
    call, want = VAR_CALLS[i]
    got = call(dj, dj.tensor(X4))
    _close(got, want)
    assert np.shape(got.tolist()) == np.shape(want)


@pytest.mark.parametrize("i", range(len(VAR_CALLS)))
def test_var_std_match_torch(i):
    torch = pytest.importorskip("torch")
    call, _ = VAR_CALLS[i]
    _close(call(dj, dj.tensor(X4)), call(torch, torch.tensor(X4)).tolist())


def test_var_std_refuse_both_unbiased_and_correction():
    for f in (dj.var, dj.std):
        with pytest.raises(SchemaError, match="both unbiased=True and correction=1"):
            f(dj.tensor(X4), unbiased=True, correction=1)


@pytest.mark.parametrize("call", ["f(x, False, True)", "f(x, True, keepdim=True)", "f(x, False, correction=0)",
                                  "f(x, dim=False)", "f(x, np.bool_(False))", "f(x, 0, 1)"])
def test_var_std_refuse_what_torch_refuses(call):
    """The overload (input, unbiased) takes nothing more; a bool is no dim, an int no unbiased."""
    for f in (dj.var, dj.std):
        with pytest.raises(SchemaError):
            eval(call, {"f": f, "x": dj.tensor(X4), "np": np})
    torch = pytest.importorskip("torch")
    for f in (torch.var, torch.std):
        with pytest.raises(TypeError):
            eval(call, {"f": f, "x": torch.tensor(X4), "np": np})


def test_mse_loss_and_std_of_a_composite_keep_their_meaning():
    # internal callers: the CUDA kernel and the derivative read the same resolved correction
    x = dj.tensor(X4, requires_grad=True)
    dj.var(x, unbiased=False).backward()
    _close(x.grad, [2 * (v - 2.5) / 4 for v in X4])


# -- max / min ------------------------------------------------------------------------------------
def test_max_min_with_dim_return_values_and_indices():
    x = dj.tensor([[1.0, 5.0, 5.0], [4.0, 2.0, 0.0]])
    r = dj.max(x, 1)
    assert type(r).__name__ == "max" and r.values.tolist() == [5.0, 4.0] and r.indices.tolist() == [1, 0]
    values, indices = dj.min(x, dim=0, keepdim=True)
    assert values.tolist() == [[1.0, 2.0, 0.0]] and indices.tolist() == [[0, 1, 1]]
    assert x.max(1).indices.tolist() == dj.argmax(x, 1).tolist()       # first of tied maxima
    assert x.min(axis=1).values.tolist() == [1.0, 0.0]
    assert dj.max(x).shape == () and dj.max(x).item() == 5.0 and x.min().item() == 0.0
    assert dj.max(x, dj.tensor([3.0, 3.0, 3.0])).tolist() == [[3.0, 5.0, 5.0], [4.0, 3.0, 3.0]]
    assert dj.min(x, other=dj.tensor(1.0)).tolist() == [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
    assert dj.amax(x, (0, 1)).item() == 5.0 and x.amin(dim=1).tolist() == [1.0, 0.0]
    s = dj.max(dj.tensor(3.0), 0)
    assert s.values.item() == 3.0 and s.indices.item() == 0


def test_max_min_errors_are_torchs():
    x = dj.tensor(M23)
    with pytest.raises(SchemaError, match="keepdim needs a dim"):
        dj.max(x, keepdim=True)
    with pytest.raises(SchemaError, match="dim must be an int"):
        dj.max(x, (0, 1))
    with pytest.raises(SchemaError, match="dim must be an int"):
        dj.min(x, 1.0)


def test_max_min_match_torch():
    torch = pytest.importorskip("torch")
    for call in (lambda M, x: M.max(x, 1), lambda M, x: M.min(x, 0, True), lambda M, x: x.max(dim=-1, keepdim=True)):
        got, want = call(dj, dj.tensor(M23)), call(torch, torch.tensor(M23))
        assert got.values.tolist() == want.values.tolist() and got.indices.tolist() == want.indices.tolist()
    assert dj.max(dj.tensor(M23)).item() == torch.max(torch.tensor(M23)).item()


# -- equal ---------------------------------------------------------------------------------------
def test_equal_is_one_bool():
    a = dj.tensor([1.0, 2.0])
    assert dj.equal(a, dj.tensor([1.0, 2.0])) is True
    assert dj.equal(a, dj.tensor([1.0, 3.0])) is False
    assert dj.equal(a, dj.tensor([[1.0, 2.0]])) is False           # shapes differ
    assert dj.equal(dj.tensor([1, 2]), a) is True                   # dtypes may differ
    assert dj.equal(dj.tensor([math.nan]), dj.tensor([math.nan])) is False
    assert a.equal(a) is True


def test_equal_matches_torch():
    torch = pytest.importorskip("torch")
    for p, q in (([1.0, 2.0], [1.0, 2.0]), ([1.0], [1.0, 1.0]), ([math.nan], [math.nan]), ([1, 2], [1.0, 2.0])):
        assert dj.equal(dj.tensor(p), dj.tensor(q)) == torch.equal(torch.tensor(p), torch.tensor(q))


# -- sizes, reshape, where -----------------------------------------------------------------------
SIZE_CALLS = [lambda M: M.ones(3.5), lambda M: M.zeros(2.0), lambda M: M.empty(True), lambda M: M.rand(3.5),
              lambda M: M.randn(2, 1.0), lambda M: M.full((2.5,), 1.0), lambda M: M.ones((2, 3.0))]


@pytest.mark.parametrize("i", range(len(SIZE_CALLS)))
def test_float_sizes_raise_typeerror(i):
    with pytest.raises(TypeError, match="must be a tuple of ints"):
        SIZE_CALLS[i](dj)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        SIZE_CALLS[i](torch)


def test_reshape_only_minus_one_once():
    x = dj.arange(6)
    for shape, match in (((-2, 3), "invalid shape dimension -2"), ((3, -3), "invalid shape dimension -3"),
                         ((-1, -1), "only one dimension can be inferred")):
        with pytest.raises(ShapeError, match=match):
            x.reshape(*shape)
        with pytest.raises(ShapeError, match=match):
            x.view(*shape)
    with pytest.raises(ShapeError, match="ambiguous"):
        dj.zeros(0, 3).reshape(-1, 0)
    assert x.reshape(3, -1).shape == (3, 2)


@pytest.mark.parametrize("cond", [[1.0, 0.0], [1, 0]])
def test_where_refuses_a_non_bool_condition(cond):
    a, b = dj.tensor([1.0, 2.0]), dj.tensor([3.0, 4.0])
    with pytest.raises(DTypeError, match="where expected condition to be a boolean tensor"):
        dj.where(dj.tensor(cond), a, b)
    with pytest.raises(DTypeError, match="where expected condition to be a boolean tensor"):
        dj.compile(lambda c, x, y: dj.where(c, x, y) * 2.0)(dj.tensor(cond), a, b)
    assert dj.where(dj.tensor(cond, dtype=dj.uint8), a, b).tolist() == [1.0, 4.0]   # torch accepts uint8
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        torch.where(torch.tensor(cond), torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]))


# -- keepdim and keepdims together -----------------------------------------------------------------
REDUCTIONS = ["sum", "prod", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "all", "any",
              "logsumexp"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_keepdim_and_keepdims_together_raise(name):
    x = dj.tensor(M23)
    with pytest.raises(SchemaError, match="keepdim"):
        getattr(dj, name)(x, 0, keepdim=True, keepdims=True)
    with pytest.raises(SchemaError, match="keepdim"):
        getattr(x, name)(dim=0, keepdim=False, keepdims=True)
    with pytest.raises(TypeError, match="dim"):      # SchemaError, or Python's "multiple values for 'dim'"
        getattr(dj, name)(x, 0, dim=1)
    r = getattr(dj, name)(x, dim=0, keepdim=True)
    assert (r[0] if isinstance(r, tuple) else r).shape == (1, 3)


# -- a kernel that returns a non-tensor ----------------------------------------------------------
def test_non_tensor_return_names_the_kernel_and_costs_nothing_after():
    lib = dj.Library("issue12_ret", "DEF")
    lib.define("half(Tensor self, bool broken) -> Tensor")

    def half_cpu(x, broken):
        return 0.5 if broken else x * 0.5
    handle = lib.impl("half", half_cpu, "CPU")
    x = dj.tensor([2.0])
    for t in (x, dj.tensor([2.0], requires_grad=True)):   # directly, and below the autograd fallback
        with pytest.raises(SchemaError, match=r"issue12_ret::half: the kernel 'test_non_tensor.*half_cpu'.*"
                                              r"returned float \(0.5\)"):
            dj.ops.issue12_ret.half(t, True)
    y = dj.tensor([4.0])
    assert dj.ops.issue12_ret.half(y, False).tolist() == [2.0]
    # after a first call that returned a tensor, the memo holds the kernel itself: no check on the hot path
    assert half_cpu in lookup("issue12_ret::half").memo.values()
    handle.remove()
    lib.impl("half", lambda x, broken: 1.0, "CPU")     # a new registration is checked again
    with pytest.raises(SchemaError, match="returned float"):
        dj.ops.issue12_ret.half(y, False)


# -- hooks and .grad of non-leaves -------------------------------------------------------------------
@pytest.mark.parametrize("hook,match", [(lambda g: dj.ones(3), "wrong shape"), (lambda g: g.double(), "wrong dtype"),
                                        (lambda g: 2.0, "a float, not a Tensor")])
def test_hook_returning_a_wrong_gradient_raises(hook, match):
    x = dj.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(hook)
    with pytest.raises(AutogradError, match=f"hook .* returned an invalid value \\({match}"):
        y.sum().backward()
    x.register_hook(hook)
    with pytest.raises(AutogradError, match="returned an invalid value"):
        (x * 2).sum().backward()


def test_hook_may_replace_a_gradient_of_the_same_shape():
    x = dj.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * 3)
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_grad_of_a_non_leaf_warns_and_is_none():
    x = dj.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None
    z = x * 3
    z.retain_grad()
    z.sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert z.grad.tolist() == [1.0, 1.0] and x.grad.tolist() == [5.0, 5.0]
        assert dj.tensor([1.0]).grad is None                            # a leaf: no warning


# -- composites: empty inputs, and errors naming the op called ----------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((2, 0), 1), ((0, 3), 1), ((0,), 0)])
def test_softmax_of_empty_is_empty(name, shape, axis):
    r = getattr(dj, name)(dj.zeros(*shape), axis)
    assert r.shape == shape and r.dtype is dj.float32
    with pytest.raises(ShapeError, match=f"^{name}: axis 5"):
        getattr(dj, name)(dj.zeros(*shape), 5)
    torch = pytest.importorskip("torch")
    assert tuple(getattr(torch, name)(torch.zeros(*shape), axis).shape) == shape


def test_empty_reductions_match_torch():
    assert math.isnan(dj.mean(dj.zeros(0)).item()) and dj.logsumexp(dj.zeros(2, 0), 1).tolist() == [-math.inf] * 2
    assert math.isnan(dj.var(dj.zeros(0)).item())
    assert dj.max(dj.zeros(2, 0), 0).values.shape == (0,)
    with pytest.raises(ShapeError):
        dj.max(dj.zeros(0))                      # torch raises too: no identity


def test_composite_errors_name_the_op():
    with pytest.raises(dj.errors.BroadcastError, match="^mse_loss"):
        dj.mse_loss(dj.zeros(2), dj.zeros(3))
    with pytest.raises(ShapeError, match="^linear"):
        dj.linear(dj.zeros(2, 3), dj.zeros(4, 2))


def test_empty_dim_list_follows_torch():
    x = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert dj.sum(x, dim=()).item() == 10.0 and dj.amax(x, dim=()).item() == 4.0
    assert dj.mean(x, dim=(), keepdim=True).shape == (1, 1)
    assert dj.all(x > 0, dim=()).shape == (2, 2)                  # torch: all/any over no dim
    with pytest.raises(ShapeError, match="axis=()"):
        dj.prod(x, dim=())
    w = dj.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    dj.mean(w, dim=()).backward()
    assert w.grad.tolist() == [[0.25, 0.25], [0.25, 0.25]]
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert torch.sum(t, dim=()).item() == 10.0 and torch.all(t > 0, dim=()).shape == (2, 2)


# -- up to 64 dimensions ---------------------------------------------------------------------------
def test_signature_holds_64_dims_and_65_are_refused():
    assert MAX_NDIM == 64
    for ndim in (0, 31, 32, 40, 64):
        m = decode(make_sig(1 << 12, dj.float64, ndim, True, 3))
        assert (m.ndim, m.dtype, m.contiguous) == (ndim, dj.float64, True)
    assert dj.zeros(*[1] * 64).ndim == 64
    with pytest.raises(ShapeError, match="at most 64"):
        dj.zeros(*[1] * 65)


def test_forty_dims_through_elementwise_reduction_and_view():
    a = np.arange(6, dtype=np.float32).reshape((2,) + (1,) * 38 + (3,))
    x = dj.from_numpy(a)
    assert x.ndim == 40
    b = np.ones((1,) * 38 + (2, 1), np.float32)
    np.testing.assert_array_equal((x + dj.from_numpy(b)).numpy(), a + b)          # broadcast, strided loop
    t = x.transpose(0, 39)
    np.testing.assert_array_equal((t * 2.0).numpy(), np.swapaxes(a, 0, 39) * 2)    # non-contiguous
    np.testing.assert_array_equal(dj.sum(x, 39).numpy(), a.sum(39))
    np.testing.assert_array_equal(dj.amax(x, (0, 39), keepdim=True).numpy(), a.max((0, 39), keepdims=True))
    assert x.reshape(3, *(1,) * 38, 2).numpy().ravel().tolist() == list(range(6))
    w = dj.from_numpy(a.copy()).requires_grad_()
    (w.transpose(0, 39) * 3.0).sum().backward()
    assert w.grad.shape == a.shape and (w.grad.numpy() == 3.0).all()


def test_twenty_unmergeable_dims_run_the_strided_loop():
    # every dim of size 2, reversed strides: nothing coalesces in C order; Python nests only 20 loops
    c = np.arange(2 ** 20, dtype=np.float32).reshape((2,) * 20)
    ct = dj.from_numpy(c).permute(tuple(range(19, -1, -1)))
    np.testing.assert_array_equal((ct * 2.0).numpy(), c.T * 2)
    out = dj.zeros(*(2,) * 20).permute(tuple(range(19, -1, -1)))
    dj.mul(ct, 3.0, out=out)
    np.testing.assert_array_equal(out.numpy(), c.T * 3)


# -- the default-value sweep ---------------------------------------------------------------------------
def test_defaults_follow_torch():
    ints = dj.tensor([1, 2], dtype=dj.int32)
    assert dj.sum(ints).dtype is dj.int64 and dj.prod(dj.tensor([2, 3], dtype=dj.uint8)).dtype is dj.int64
    with pytest.raises(DTypeError):
        dj.mean(dj.tensor([1, 2]))
    assert dj.arange(3).dtype is dj.int64 and dj.arange(0, 1, 0.5).dtype is dj.float32
    assert dj.argmax(dj.tensor(M23)).item() == 5                                  # flattened
    assert dj.argmax(dj.tensor(M23), keepdim=True).shape == (1, 1)
    assert dj.sum(dj.tensor([True, True])).item() == 2


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [dj.uint8, dj.int8, dj.int64, dj.bool])
def test_softmax_of_integers_raises_and_dtype_casts_first(name, dtype):
    # x - max(x) in the integer dtype wrapped around: softmax([0, 200] uint8) gave [1, 4.8e-25]
    fn = getattr(dj, name)
    x = dj.tensor([0, 1], dtype=dtype)
    with pytest.raises(DTypeError, match=f"{name}: expected a floating point tensor, got {dtype.name}"):
        fn(x, 0)
    big = dj.tensor([0, 200], dtype=dj.uint8)
    want = np.array([-200.0, 0.0])
    want = np.exp(want) if name == "softmax" else want
    got = fn(big, 0, dtype=dj.float64)
    assert got.dtype == dj.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("mode", ["eager", "compile", "lazy"])
def test_mse_loss_of_integers_raises_naming_mse_loss(reduction, mode):
    # found by the long fuzz run (seed 31, graph 1218): reduction='none' on int64 returned the
    # squared differences where PyTorch refuses, and 'mean' raised an error naming mean()
    a, b = dj.tensor([1, 2]), dj.tensor([2, 2])
    run = {"eager": dj.mse_loss, "compile": dj.compile(dj.mse_loss)}.get(mode)
    with pytest.raises(DTypeError, match="mse_loss: expected floating point input and target, got int64 and int64"):
        if run is None:
            with dj.execution_mode("compiled"):
                dj.mse_loss(a, b, reduction=reduction).numpy()
        else:
            run(a, b, reduction=reduction)
    # an int input against a float target computes in float, as PyTorch's promotion does
    got = dj.mse_loss(a, dj.tensor([2.0, 2.0]), reduction=reduction)
    want = {"none": [1.0, 0.0], "mean": 0.5, "sum": 1.0}[reduction]
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("mode", ["eager", "compile", "lazy"])
def test_copy_source_must_broadcast_to_the_destination(mode):
    # found by the long fuzz run (seed 31, graph 1461): copy_ accepted a (1, 5) source for a (5,)
    # destination (item assignment's NumPy rule drops leading 1-sized dims; PyTorch's copy_ refuses)
    def f(dst, src):
        return dst.copy_(src)
    run = {"eager": f, "compile": dj.compile(f)}.get(mode)
    for dst_shape, src_shape in [((5,), (1, 5)), ((2, 3), (3, 3))]:
        dst, src = dj.zeros(*dst_shape), dj.ones(*src_shape)
        with pytest.raises(BroadcastError, match=r"copy_: the source of shape .* does not broadcast"):
            if run is None:
                with dj.execution_mode("compiled"):
                    f(dst, src).numpy()
            else:
                run(dst, src)
    dst = dj.zeros(2, 3)
    got = f(dst, dj.tensor([1.0, 2.0, 3.0])) if run is None else run(dst, dj.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(dst.numpy(), [[1, 2, 3], [1, 2, 3]])
    assert got.shape == (2, 3)
    a = dj.zeros(5)
    a[...] = dj.ones(1, 5)          # item assignment keeps NumPy's rule (as torch's __setitem__)
    np.testing.assert_array_equal(a.numpy(), np.ones(5))


# -- all/any of uint8 are uint8, as PyTorch's (legacy) -------------------------------------------
_ALL_ANY_CASES = [("all", None, False), ("any", None, False), ("all", 1, False), ("any", 0, True),
                  ("all", (0, 1), False)]


def _all_any_run(x, op, axis, keepdim):
    return getattr(dj, op)(x) if axis is None else getattr(dj, op)(x, axis, keepdim)


@pytest.mark.parametrize("mode", ["eager", "compile", "lazy"])
def test_all_any_of_uint8_are_uint8(mode):
    a = np.array([[1, 0, 7], [2, 3, 255]], np.uint8)
    # hand-written: the values are 0/1 whatever the input's nonzero values
    want = {("all", None): 0, ("any", None): 1, ("all", 1): [0, 1], ("any", 0): [[1, 1, 1]], ("all", (0, 1)): 0}
    for op, axis, keepdim in _ALL_ANY_CASES:
        for dt, wdt in ((np.uint8, np.uint8), (np.int8, np.bool_), (np.float32, np.bool_)):
            x = dj.from_numpy(a.astype(dt) if dt != np.int8 else (a % 100).astype(dt))
            if mode == "compile":
                got = dj.compile(_all_any_run)(x, op, axis, keepdim).numpy()
            elif mode == "lazy":
                with dj.execution_mode("compiled"):
                    got = (_all_any_run(x, op, axis, keepdim) * 1).numpy()     # recorded, then fused
                if dt == np.uint8:
                    assert got.dtype == np.uint8
                got = got.astype(wdt)
            else:
                got = _all_any_run(x, op, axis, keepdim).numpy()
            assert got.dtype == wdt, (op, axis, dt, got.dtype)
            np.testing.assert_array_equal(got, np.asarray(want[op, axis]).astype(wdt))
    assert dj.all(dj.tensor([], dtype=dj.uint8)).dtype is dj.uint8


def test_all_any_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[1, 0, 7], [2, 3, 255]], np.uint8)
    for dt in (np.uint8, np.int8, np.int64, np.float32, np.bool_):
        for op, axis, keepdim in _ALL_ANY_CASES[:4]:
            t = torch.from_numpy(a.astype(dt))
            want = getattr(torch, op)(t) if axis is None else getattr(torch, op)(t, axis, keepdim)
            got = _all_any_run(dj.from_numpy(a.astype(dt)), op, axis, keepdim)
            assert got.dtype.name == str(want.dtype).replace("torch.", ""), (dt, op)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_activations_refuse_integers(name):
    # they computed in float32 and returned a result where PyTorch raises (found by the fuzzer)
    with pytest.raises(DTypeError, match=f"{name}: expected a floating point tensor, got int64"):
        getattr(dj, name)(dj.tensor([1, 2]))
    assert getattr(dj, name)(dj.tensor([1.0, 2.0])).dtype == dj.float32
