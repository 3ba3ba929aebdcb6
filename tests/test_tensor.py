import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import CudaUnavailableError, DTypeError, ShapeError


def test_metadata():
    x = dj.arange(6.0).reshape((2, 3))
    assert x.shape == (2, 3) and x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert x.dtype is dj.float32 and x.device == dj.device("cpu") and x.device == "cpu"
    assert x.layout == dj.strided
    assert x.strides == (3, 1) and x.stride(0) == 3 and x.T.strides == (1, 3)
    assert x.size() == (2, 3) and x.size(-1) == 3 and len(x) == 2
    assert x.is_contiguous() and not x.T.is_contiguous()
    assert x.element_size() == 4 and x.itemsize == 4


def test_views_share_storage():
    x = dj.zeros(2, 3)
    views = [x.reshape((3, 2)), x.view((6,)), x.T, x.permute((1, 0)), x.transpose(0, 1), x[0], x[:, 1:],
             x.unsqueeze(0), x.flatten(), x[None].squeeze(0), x[:1].expand((4, 3))]
    x.add_(1.0)
    for v in views:
        assert np.all(v.numpy() == 1.0), v
    assert np.shares_memory(x.T.numpy(), x.numpy())


def test_view_errors():
    x = dj.zeros(2, 3)
    with pytest.raises(ShapeError, match="not compatible"):
        x.T.view((6,))
    assert x.T.reshape((6,)).shape == (6,)           # reshape copies when it must
    with pytest.raises(ShapeError, match="invalid for input of size 6"):
        x.reshape((4, 2))
    with pytest.raises(ShapeError, match="cannot be expanded"):
        x.expand((3, 3))
    with pytest.raises(ShapeError, match="not a permutation"):
        x.permute((0, 0))
    with pytest.raises(ShapeError, match="out of range"):
        x.unsqueeze(4)


def test_size_methods_take_varargs_as_pytorch():
    x = dj.arange(16.0)
    assert x.reshape(4, 4).shape == x.reshape((4, 4)).shape == (4, 4)
    assert x.view(2, 8).shape == (2, 8) and x.reshape(-1).shape == (16,) and x.reshape(np.int64(16)).shape == (16,)
    assert x.reshape(4, 4).permute(1, 0).tolist() == x.reshape((4, 4)).permute((1, 0)).tolist()
    assert x.expand(2, 16).shape == (2, 16) and x.reshape(shape=[2, 8]).shape == (2, 8)
    with pytest.raises(ShapeError, match="invalid for input of size 16"):
        x.reshape(3, 3)


def test_reshape_that_copies_is_a_new_tensor():
    """A reshape NumPy answers with a copy shares neither storage nor version counter with its source."""
    from dispatch_jit.tensor import version_of
    x = dj.arange(6.0).reshape((2, 3))
    y = x.T
    z = y.reshape((6,))                  # strides cannot express it: a copy
    v = version_of(y)
    z.add_(1.0)
    assert version_of(y) == v and x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    w = x.reshape((3, 2))                # a view: writes and versions are shared
    w.add_(1.0)
    assert version_of(x) == v + 1 and x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_contiguous_and_clone():
    x = dj.arange(6.0).reshape((2, 3)).T
    c = x.contiguous()
    assert c.is_contiguous() and c.tolist() == x.tolist()
    y = dj.ones(3)
    assert y.contiguous() is y
    z = y.clone()
    z.add_(1.0)
    assert y.tolist() == [1.0, 1.0, 1.0]


def test_conversions():
    x = dj.tensor([[1.5, 2.0]])
    assert isinstance(x.numpy(), np.ndarray) and np.asarray(x).dtype == np.float32
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert x.tolist() == [[1.5, 2.0]]
    assert dj.tensor([7]).item() == 7 and float(dj.tensor(2.5)) == 2.5 and int(dj.tensor([3])) == 3
    with pytest.raises(ValueError, match="2 elements cannot be converted"):
        x.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x)
    assert bool(dj.tensor([1.0]))
    assert [t.item() for t in dj.tensor([1, 2])] == [1, 2]


def test_to_dtype_and_device():
    x = dj.tensor([1.7, -2.2])
    assert x.to(dj.int32).tolist() == [1, -2] and x.to(dj.int32).dtype is dj.int32
    assert x.to("float64").dtype is dj.float64 and x.double().dtype is dj.float64
    assert x.to(dj.float32) is x and x.to("cpu") is x
    assert x.to(dj.float16).to(dj.float32).tolist() == pytest.approx([1.7, -2.2], rel=1e-3)
    assert x.to(dj.tensor([1])).dtype is dj.int64
    if dj.cuda.is_available():
        assert x.to("cuda").is_cuda and x.to("cuda").to("cpu").tolist() == x.tolist()
    else:
        with pytest.raises(CudaUnavailableError, match="CUDA"):
            x.to("cuda")


def test_repr_pytorch_style():
    assert repr(dj.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(dj.tensor([1.5, 2.25])) == "tensor([1.5000, 2.2500])"
    assert repr(dj.tensor([1, 2], dtype=dj.int32)) == "tensor([1, 2], dtype=dj.int32)"
    assert repr(dj.tensor([1, 20])) == "tensor([ 1, 20])"
    assert repr(dj.tensor([True, False])) == "tensor([ True, False])"
    assert repr(dj.tensor(3.0)) == "tensor(3.)"
    assert repr(dj.tensor([1.0], dtype=dj.float64)) == "tensor([1.], dtype=dj.float64)"
    assert repr(dj.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert repr(dj.tensor([float("nan"), 1.0])) == "tensor([nan,  1.])"
    assert "\n" in repr(dj.ones(2, 2))


def test_format_spec_on_a_zero_dim_tensor_as_pytorch():
    assert f"{dj.tensor(1.23456):.3f}" == "1.235" and f"{dj.tensor(7):>3d}" == "  7"
    assert f"{dj.tensor(1 + 2j):.1f}" == "1.0+2.0j" and f"{dj.tensor(True)}" == "True"
    assert f"{dj.tensor(2.5, requires_grad=True) * 2:.1f}" == "5.0"
    assert format(dj.tensor([1.5]), "") == repr(dj.tensor([1.5]))
    with pytest.raises(TypeError, match="'.3f' for a tensor of shape \\(2,\\).*0-d tensors only"):
        f"{dj.tensor([1.0, 2.0]):.3f}"
    torch = pytest.importorskip("torch")
    for v in (1.23456, -7, 1e-9):
        for spec in (".3f", "", ">10", ".2e"):
            assert format(dj.tensor(v), spec) == format(torch.tensor(v), spec), (v, spec)


def test_requires_grad_only_for_floating():
    with pytest.raises(DTypeError, match="floating point and complex"):
        dj.tensor([1, 2], requires_grad=True)
    x = dj.tensor([1.0]).requires_grad_()
    assert x.requires_grad and dj.DispatchKey.AutogradCPU in dj.dispatch_keys(x)


def test_setitem_casts_as_pytorch():
    x = dj.zeros(3, dtype=dj.int64)
    x[0] = 5
    x[1:] = dj.tensor([1, 2])
    assert x.tolist() == [5, 1, 2]
    x[0] = 1.9                       # truncates, as PyTorch, NumPy, JAX and Dask (it used to raise)
    assert x.tolist() == [1, 1, 2]
    f = dj.zeros(2)
    f[0] = 3
    assert f.tolist() == [3.0, 0.0]
    # what the dtype cannot hold raises, as PyTorch ("value cannot be converted ... without overflow")
    for bad, exc in ((float("nan"), OverflowError), (float("inf"), OverflowError), (1e19, OverflowError),
                     (2 ** 63, OverflowError), (1 + 2j, TypeError)):
        with pytest.raises(exc, match="cannot assign"):
            x[0] = bad
    with pytest.raises(OverflowError, match=r"uint8 without overflow \(it holds \[0, 255\]"):
        dj.zeros(2, dtype=dj.uint8)[0] = -0.5        # checked before truncation, as PyTorch
    with pytest.raises(TypeError, match="imaginary part"):
        f[1] = 1j
    f[1] = 2 + 0j
    assert f.tolist() == [3.0, 2.0]
    # an integral tensor takes a value that requires grad without recording anything
    x[2] = dj.tensor(7.5, requires_grad=True)
    assert x.tolist() == [1, 1, 7] and not x.requires_grad and x.grad_fn is None


_ASSIGNMENTS = {
    "int": lambda t, T: t.__setitem__(0, 1.9),
    "negative": lambda t, T: t.__setitem__(1, -2.7),
    "mask": lambda t, T: t.__setitem__(t > 2, 1.9),
    "slice": lambda t, T: t.__setitem__(slice(1, 3), 2.7),
    "ellipsis": lambda t, T: t.__setitem__(Ellipsis, -0.5),
    "0-d tensor": lambda t, T: t.__setitem__(0, T.tensor(1.9)),
    "tensor slice": lambda t, T: t.__setitem__(slice(0, 2), T.tensor([1.9, -2.5])),
    "0-d complex tensor": lambda t, T: t.__setitem__(3, T.tensor(5.5 + 2j)),
    "bool target": lambda t, T: t.__setitem__(0, 0.0),
    "fill_": lambda t, T: t.fill_(-3.9),
    "masked_fill_": lambda t, T: t.masked_fill_(t < 3, 6.6),
}


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("form", sorted(_ASSIGNMENTS))
def test_float_values_into_integer_tensors_as_torch(form, mode):
    torch = pytest.importorskip("torch")
    import warnings
    dtype = "bool" if form == "bool target" else "int64"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # complex -> real discards the imaginary part (both warn)
        want = torch.tensor([1, 2, 3, 4], dtype=getattr(torch, dtype))
        _ASSIGNMENTS[form](want, torch)
        got = dj.tensor([1, 2, 3, 4], dtype=getattr(dj, dtype))
        with dj.execution_mode(mode):
            _ASSIGNMENTS[form](got, dj)
    assert got.tolist() == want.tolist() and got.dtype.name == str(want.dtype).split(".")[1]


def test_indexing_with_tensors():
    x = dj.arange(5)
    assert x[dj.tensor([0, 2])].tolist() == [0, 2]
    assert x[x > 2].tolist() == [3, 4]


def test_methods_defined_above_tensor_py_are_bound_as_methods():
    # autograd/methods.py and _install.py define them (tensor.py is below autograd and creation)
    for name in ("__getitem__", "__setitem__", "backward", "register_hook", "copy_"):
        fn = dj.Tensor.__dict__[name]
        assert fn.__name__ == name and fn.__qualname__ == f"Tensor.{name}"


def test_tensor_constructor_is_not_public():
    with pytest.raises(TypeError, match="dj.tensor"):
        dj.Tensor([1.0])


def test_operator_reflection_and_numpy_interop():
    x = dj.tensor([1.0, 2.0])
    assert (2 - x).tolist() == [1.0, 0.0] and (1 / x).tolist() == [1.0, 0.5]
    assert (2 ** x).tolist() == [2.0, 4.0] and (-x).tolist() == [-1.0, -2.0] and abs(-x).tolist() == [1.0, 2.0]
    # NumPy arrays on the left defer to the tensor (__array_priority__)
    r = np.float32(3) * x
    assert isinstance(r, dj.Tensor) and r.tolist() == [3.0, 6.0]


def test_copy_broadcasts_casts_and_is_differentiable_in_its_source():
    t = dj.zeros(2, 3, dtype=dj.int32)
    assert t.copy_(dj.tensor([1.7, -2.5, 3.0])) is t                  # any cast, as torch's copy_
    np.testing.assert_array_equal(t.numpy(), [[1, -2, 3], [1, -2, 3]])
    t.copy_([[4, 5, 6], [7, 8, 9]])                                     # array-likes too
    np.testing.assert_array_equal(t.numpy(), [[4, 5, 6], [7, 8, 9]])
    w = dj.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = dj.zeros(2, 3)
    b.copy_(w * 2.0)
    (b * b).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [16.0, 32.0, 48.0])   # 2 rows * 2 * (2w) * 2
    with pytest.raises(Exception, match="broadcast|shape"):
        dj.zeros(3).copy_(dj.ones(2))


def test_requires_grad_assignment_is_requires_grad_():
    """``t.requires_grad = flag`` is PyTorch's leaf switch: the dispatcher must see it (the flag
    used to change alone, so ops went on recording, or never started, for that tensor)."""
    p = dj.ones(3, requires_grad=True)
    p.requires_grad = False
    y = (p * 2).sum()
    assert not y.requires_grad and y.grad_fn is None
    q = dj.ones(3)
    q.requires_grad = True
    (q * q).sum().backward()
    np.testing.assert_array_equal(q.grad.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(dj.errors.DTypeError, match="floating point"):
        dj.ones(3, dtype=dj.int64).requires_grad = True
    r = q * 3
    with pytest.raises(RuntimeError, match="leaf"):
        r.requires_grad = False
