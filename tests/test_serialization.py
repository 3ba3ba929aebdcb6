"""dj.save / dj.load (dispatch_jit/serialization.py): round trips of tensors, containers and an
nn module's state_dict; weights_only refusing arbitrary classes; bad files."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile

import numpy as np
import pytest

import dispatch_jit as dj


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    dj.save(obj, buf)
    buf.seek(0)
    return dj.load(buf, **kw)


@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "int8", "uint64", "bool", "complex128"])
def test_tensor_roundtrip_keeps_dtype_shape_values(dt):
    a = (np.arange(12).reshape(3, 4) % 5).astype(dt)
    t = _roundtrip(dj.tensor(a))
    assert t.dtype.name == dt and tuple(t.shape) == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a)


def test_containers_strided_views_and_requires_grad(tmp_path):
    w = dj.arange(6.0).reshape(2, 3)
    obj = {"w": w.t(), "lst": [dj.tensor(1), (dj.tensor([True]), "s", 2.5, None)],
           "g": dj.tensor([1.0], requires_grad=True), "od": collections.OrderedDict(a=dj.zeros(0))}
    path = tmp_path / "x.dj"
    dj.save(obj, path)
    back = dj.load(str(path))
    np.testing.assert_array_equal(back["w"].numpy(), w.numpy().T)
    assert back["lst"][0].item() == 1 and back["lst"][1][1:] == ("s", 2.5, None)
    assert back["g"].requires_grad and back["g"].grad_fn is None
    assert isinstance(back["od"], collections.OrderedDict) and tuple(back["od"]["a"].shape) == (0,)


def test_state_dict_of_a_module_roundtrips():
    dj.manual_seed(0)
    m = dj.nn.Sequential(dj.nn.Linear(3, 4), dj.nn.ReLU(), dj.nn.Linear(4, 2))
    buf = io.BytesIO()
    dj.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = dj.nn.Sequential(dj.nn.Linear(3, 4), dj.nn.ReLU(), dj.nn.Linear(4, 2))
    m2.load_state_dict(dj.load(buf))
    x = dj.randn(5, 3)
    np.testing.assert_array_equal(m(x).detach().numpy(), m2(x).detach().numpy())
    params = _roundtrip(dict(m.named_parameters()))
    assert all(isinstance(p, dj.nn.Parameter) and p.requires_grad for p in params.values())


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_weights_only_refuses_arbitrary_classes():
    buf = io.BytesIO()
    dj.save({"x": Evil()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=True refuses to build builtins.print"):
        dj.load(buf)
    buf.seek(0)
    assert dj.load(buf, weights_only=False) == {"x": None}    # print's return value: trusted files only


def test_not_a_dispatch_jit_file(tmp_path):
    p = tmp_path / "other.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("data.pkl", b"")
    with pytest.raises(pickle.UnpicklingError, match="not a file written by dispatch_jit.save"):
        dj.load(p)


def test_map_location_cuda_under_the_simulator():
    t = _roundtrip(dj.tensor([1.0, 2.0]).cuda(), map_location="cuda")
    assert t.is_cuda and t.cpu().tolist() == [1.0, 2.0]
