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


def _members(buf) -> dict:
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        return {i.filename: i.file_size for i in z.infolist()}


def test_views_share_storage_after_load_as_in_torch():
    torch = pytest.importorskip("torch")

    def program(lib, x):
        buf = io.BytesIO()
        lib.save({"x": x, "row": x[1], "col": x[:, 2], "t": x.t(), "again": x}, buf)
        buf.seek(0)
        back = lib.load(buf)
        back["x"][1, 2] = 100.0        # a write through one view shows in every other
        return buf, back, [back[k].tolist() for k in ("row", "col", "t")], back["again"] is back["x"]

    buf, back, ours, same = program(dj, dj.arange(12.0).reshape(3, 4))
    _, _, theirs, their_same = program(torch, torch.arange(12.0).reshape(3, 4))
    assert ours == theirs and same == their_same
    assert sorted(v for k, v in _members(buf).items() if k.startswith("data/")) == [48]    # one storage, once


def test_a_slice_saves_the_bytes_it_spans_not_its_whole_buffer():
    big = dj.arange(1000.0)
    buf = io.BytesIO()
    dj.save(big[10:20], buf)
    stored = sum(v for k, v in _members(buf).items() if k not in ("format", "data.pkl"))
    assert stored <= 40 + 16          # its 40 bytes, from the 16-byte boundary below them
    buf.seek(0)
    assert dj.load(buf).tolist() == list(range(10, 20))


def test_map_location_str_device_dict_and_callable_as_torch():
    torch = pytest.importorskip("torch")
    x = dj.arange(6.0).reshape(2, 3)
    buf = io.BytesIO()
    dj.save({"x": x, "row": x[1]}, buf)
    seen = []

    def keep(storage, location):
        seen.append((storage.dtype, tuple(storage.shape), location))
        return storage

    for where in ("cpu", dj.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}, keep, lambda s, loc: None):
        buf.seek(0)
        back = dj.load(buf, map_location=where)
        assert back["x"].device == dj.device("cpu") and back["row"].tolist() == [3.0, 4.0, 5.0]
    assert seen == [(dj.uint8, (24,), "cpu")]      # once per storage, with its bytes and saved location
    their = []
    tbuf = io.BytesIO()
    tx = torch.arange(6.0).reshape(2, 3)
    torch.save({"x": tx, "row": tx[1]}, tbuf)
    tbuf.seek(0)
    torch.load(tbuf, map_location=lambda s, loc: their.append((s.nbytes(), loc)) or s)
    assert their == [(24, "cpu")]

    buf.seek(0)
    with pytest.raises(TypeError, match=r"map_location\(storage, 'cpu'\) must return the storage .* got int"):
        dj.load(buf, map_location=lambda s, loc: 3)
    with pytest.raises(TypeError, match="map_location must be None, a device or its name, a dict"):
        dj.load(buf, map_location=3.5)


def test_cuda_tensors_load_where_they_were_saved_unless_mapped():
    buf = io.BytesIO()
    dj.save({"c": dj.tensor([1.0, 2.0]).cuda(), "h": dj.tensor([3.0])}, buf)
    for where, c_on_cuda in ((None, True), ({"cuda:0": "cpu"}, False), (lambda s, loc: s, False),
                             (lambda s, loc: s.cuda() if loc == "cuda:0" else s, True), ("cpu", False)):
        buf.seek(0)
        back = dj.load(buf, map_location=where)
        assert back["c"].is_cuda == c_on_cuda and not back["h"].is_cuda
        assert back["c"].cpu().tolist() == [1.0, 2.0] and back["h"].tolist() == [3.0]


def test_cuda_views_share_one_device_storage_after_load():
    x = dj.arange(12.0).reshape(3, 4).cuda()
    buf = io.BytesIO()
    dj.save({"x": x, "row": x[1], "t": x.t()}, buf)
    assert sorted(v for k, v in _members(buf).items() if k.startswith("data/")) == [48]
    buf.seek(0)
    back = dj.load(buf)
    assert all(t.is_cuda for t in back.values())
    back["x"][1, 2] = 100.0
    assert back["row"].cpu().tolist() == [4.0, 5.0, 100.0, 7.0] and back["t"][2, 1].item() == 100.0
