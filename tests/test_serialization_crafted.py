"""dj.load against files built by hand, as an attacker would (dispatch_jit/serialization/): a pickle
naming one storage hundreds of times, deflate bombs, forged and overlapping zip entries, duplicate
names, malformed tensor references, a bytearray bomb, and paths that are no regular file."""

from __future__ import annotations

import io
import os
import pickle
import struct
import threading
import tracemalloc
import warnings
import zipfile
import zlib

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import LoadError

V1, V2 = "dispatch_jit.save/1", "dispatch_jit.save/2"     # the first layout (.npy members) still loads


class Ref:
    """Stands in for a tensor in a hand-made pickle: pickled as the persistent id ``pid``."""

    def __init__(self, pid):
        self.pid = pid


class _RefPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Ref) else None


V1_REF = Ref(("tensor", 0, False, False))       # a first-layout reference to tensors/0.npy


def _pickle(obj) -> bytes:
    buf = io.BytesIO()
    _RefPickler(buf, protocol=4).dump(obj)
    return buf.getvalue()


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _zip(members: dict, method=zipfile.ZIP_STORED) -> io.BytesIO:
    """An archive as zipfile writes it (duplicates allowed: give a list of pairs)."""
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", method) as z:
        warnings.simplefilter("ignore")                  # zipfile warns about a duplicate name, and writes it
        for name, data in (members.items() if isinstance(members, dict) else members):
            z.writestr(name, data)
    buf.seek(0)
    return buf


def _local(name: str, payload: bytes, content: bytes, method: int = 0, declared: int | None = None) -> tuple:
    """A local file record (header + payload) by hand, and its central-directory fields: the zip
    header may declare any inflated size (``declared``)."""
    n = name.encode()
    crc = zlib.crc32(content)
    size = len(content) if declared is None else declared
    head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(payload), size, len(n), 0)
    return head + n + payload, (name, method, crc, len(payload), size)


def _archive(blob: bytes, entries: list) -> io.BytesIO:
    """``blob`` (local records) followed by a central directory of ``entries``: (offset, fields)."""
    central = b""
    for offset, (name, method, crc, csize, usize) in entries:
        n = name.encode()
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, csize, usize,
                               len(n), 0, 0, 0, 0, 0, offset) + n
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), len(blob), 0)
    return io.BytesIO(blob + central + end)


def _records(*records) -> io.BytesIO:
    """Local records laid end to end, each listed once in the central directory."""
    blob, entries = b"", []
    for rec, fields in records:
        entries.append((len(blob), fields))
        blob += rec
    return _archive(blob, entries)


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _v2_ref(tensor: int, nbytes: int, shape=(2,), strides=(1,), offset=0, dtype="float32", location="cpu",
            storage=0, requires_grad=False, is_param=False) -> Ref:
    return Ref(("tensor", tensor, storage, nbytes, location, dtype, shape, strides, offset, requires_grad, is_param))


def _peak_bytes(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- one storage, many references -------------------------------------------------------------------------------

STORE = 1 << 16        # one 64 KiB storage; 300 copies of it would be 19 MiB
BOUND = 2 * STORE + 300 * 2048      # the storage (and a read buffer) once, plus 300 tensors' own small objects


def test_a_storage_named_300_times_is_read_once_first_format():
    a = np.arange(STORE // 4, dtype=np.float32)
    f = _zip({"format": V1, "data.pkl": _pickle([V1_REF] * 300), "tensors/0.npy": _npy(a)})
    out, peak = _peak_bytes(lambda: dj.load(f))
    assert len(out) == 300 and np.array_equal(out[299].numpy(), a)
    assert np.shares_memory(out[0].numpy(), out[299].numpy())
    assert peak < BOUND, f"loading one {STORE}-byte storage named 300 times peaked at {peak} bytes"


def test_a_storage_named_by_300_tensors_is_read_once():
    a = np.arange(STORE // 4, dtype=np.float32)
    refs = [_v2_ref(i, STORE, shape=(STORE // 4,)) for i in range(300)]
    f = _zip({"format": V2, "data.pkl": _pickle(refs), "data/0": a.tobytes()})
    out, peak = _peak_bytes(lambda: dj.load(f))
    assert len({id(t) for t in out}) == 300 and np.array_equal(out[299].numpy(), a)
    assert np.shares_memory(out[0].numpy(), out[299].numpy())
    assert peak < BOUND, f"loading one {STORE}-byte storage named by 300 tensors peaked at {peak} bytes"


def test_a_cuda_storage_named_by_300_tensors_is_copied_to_the_device_once():
    a = np.arange(STORE // 4, dtype=np.float32)
    refs = [_v2_ref(i, STORE, shape=(STORE // 4,), location="cuda:0") for i in range(300)]
    f = _zip({"format": V2, "data.pkl": _pickle(refs), "data/0": a.tobytes()})
    out, peak = _peak_bytes(lambda: dj.load(f))
    assert out[0].is_cuda and np.array_equal(out[299].cpu().numpy(), a)
    ptrs = {t.__cuda_array_interface__["data"][0] for t in out}
    assert len(ptrs) == 1, "300 references to one storage made several device copies"
    assert peak < BOUND + 2 * STORE       # host buffer + device copy (host memory under the simulator)


def test_a_storage_not_named_is_not_read():
    f = _zip({"format": V2, "data.pkl": _pickle({"n": 1}), "data/0": b"\0" * STORE})
    out, peak = _peak_bytes(lambda: dj.load(f))
    assert out == {"n": 1} and peak < STORE


# -- deflate bombs and forged sizes -----------------------------------------------------------------------------

def test_a_member_that_inflates_past_its_npy_header_is_refused():
    # the header declares 8 bytes; 4 MiB of zeros follow them (4 KiB deflated)
    member = _npy(np.zeros(2, np.float32)) + b"\0" * (4 << 20)
    f = _zip({"format": V1, "data.pkl": _pickle(V1_REF), "tensors/0.npy": member},
             zipfile.ZIP_DEFLATED)
    with pytest.raises(LoadError, match=r"tensors/0.npy.* holds 4194312 bytes where the file's index declares 8"):
        dj.load(f)


def test_a_storage_larger_than_its_reference_declares_is_refused():
    f = _zip({"format": V2, "data.pkl": _pickle(_v2_ref(0, 8)), "data/0": b"\0" * (4 << 20)}, zipfile.ZIP_DEFLATED)
    with pytest.raises(LoadError, match=r"'data/0'.* holds 4194304 bytes where the file's index declares 8"):
        dj.load(f)


def test_a_zip_header_declaring_more_than_deflate_can_produce_is_refused():
    content = _npy(np.zeros(1 << 18, np.float32))
    payload = _deflate(content)                                 # ~1 KiB
    declared = 2**31 - 1                                        # claims 2 GiB
    pkl = _pickle(V1_REF)
    f = _records(_local("format", V1.encode(), V1.encode()), _local("data.pkl", pkl, pkl),
                 _local("tensors/0.npy", payload, content, zipfile.ZIP_DEFLATED, declared))
    with pytest.raises(LoadError, match=r"'tensors/0.npy'.* declares 2147483647 bytes inflated from \d+ compressed "
                                        r"bytes, more than deflate can produce .*zip bomb"):
        dj.load(f)


def test_a_stored_member_whose_sizes_disagree_is_refused():
    f = _records(_local("format", V2.encode(), V2.encode(), declared=10**6))
    with pytest.raises(LoadError, match=r"'format'.* stored uncompressed yet declares 1000000 bytes in 19"):
        dj.load(f)


def test_overlapping_members_are_refused():
    # tensors/0.npy is stored, and after its own array come tensors/1.npy's whole record: two names
    # reading one blob (nest such quotes, and each level inflates the same compressed bytes again)
    inner, inner_fields = _local("tensors/1.npy", _npy(np.ones(2, np.float32)), _npy(np.ones(2, np.float32)))
    outer_content = _npy(np.zeros(2, np.float32)) + inner
    outer, outer_fields = _local("tensors/0.npy", outer_content, outer_content)
    pkl = _pickle([V1_REF, Ref(("tensor", 1, False, False))])
    fmt, fmt_fields = _local("format", V1.encode(), V1.encode())
    data, data_fields = _local("data.pkl", pkl, pkl)
    start = len(fmt) + len(data)
    f = _archive(fmt + data + outer, [(0, fmt_fields), (len(fmt), data_fields), (start, outer_fields),
                                      (start + len(outer) - len(inner), inner_fields)])
    with pytest.raises(LoadError, match=r"members 'tensors/0.npy' and 'tensors/1.npy' .* share bytes"):
        dj.load(f)


def test_duplicate_member_names_are_refused():
    # one reader takes the first tensors/0.npy, another the last: refuse rather than pick
    f = _zip([("format", V1), ("data.pkl", _pickle(V1_REF)), ("tensors/0.npy", _npy(np.zeros(2, np.float32))),
              ("tensors/0.npy", _npy(np.ones(2, np.float32)))])
    with pytest.raises(LoadError, match=r"two members named 'tensors/0.npy'"):
        dj.load(f)


def test_other_compression_methods_are_refused():
    # bzip2 inflates far past deflate's 1032:1, so no size check could bound it
    f = _zip({"format": V1, "data.pkl": _pickle(V1_REF), "tensors/0.npy": _npy(np.zeros(2, np.float32))},
             zipfile.ZIP_BZIP2)
    with pytest.raises(LoadError, match=r"compression method 12; dj.load accepts stored and deflated"):
        dj.load(f)


# -- tensor references ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, match", [
    (_v2_ref(0, 8, shape=(3,)), r"reaches byte 12 of a storage of 8 bytes"),
    (_v2_ref(0, 8, shape=(2,), offset=1), r"reaches byte 12 of a storage of 8 bytes"),
    (_v2_ref(0, 8, shape=(1000, 2), strides=(0, 1)), r"address some elements twice"),
    (_v2_ref(0, 8, shape=(2, 2), strides=(1, 1)), r"address some elements twice"),
    (_v2_ref(0, 8, dtype="object"), r"malformed tensor reference"),
    (_v2_ref(0, 8, location="../../etc"), r"malformed tensor reference"),
    (_v2_ref(0, 8, shape=(-1,)), r"malformed tensor reference"),
    (_v2_ref(0, 8, shape=(2**70,)), r"malformed tensor reference"),
    (_v2_ref(0, 8, shape=(0, 2**40, 2**40), strides=(1, 1, 1)), r"larger than any array can be"),
    (_v2_ref(0, 8, requires_grad=1), r"malformed tensor reference"),
    (Ref(("tensor", 0)), r"no tensor reference dj.save writes"),
    (Ref(["tensor", 0, 0, 8, "cpu", "float32", (2,), (1,), 0, False, False]), r"no tensor reference"),
])
def test_malformed_or_out_of_bounds_references_are_refused(ref, match):
    f = _zip({"format": V2, "data.pkl": _pickle([ref]), "data/0": b"\0" * 8})
    with pytest.raises(LoadError, match=match):
        dj.load(f)


def test_one_tensor_described_twice_or_a_storage_of_two_sizes_is_refused():
    f = _zip({"format": V2, "data.pkl": _pickle([_v2_ref(0, 8), _v2_ref(0, 8, shape=(1,))]), "data/0": b"\0" * 8})
    with pytest.raises(LoadError, match=r"tensor 0 two different descriptions"):
        dj.load(f)
    f = _zip({"format": V2, "data.pkl": _pickle([_v2_ref(0, 8), _v2_ref(1, 16)]), "data/0": b"\0" * 8})
    with pytest.raises(LoadError, match=r"two references describe storage 0 differently"):
        dj.load(f)


def test_a_reference_to_a_missing_member_is_refused():
    f = _zip({"format": V2, "data.pkl": _pickle(_v2_ref(0, 8, storage=7))})
    with pytest.raises(LoadError, match=r"has no member 'data/7'"):
        dj.load(f)


def test_an_object_array_in_a_first_format_file_is_refused():
    header = _npy(np.zeros(2, np.float32)).replace(b"'<f4'", b"'|O' ")
    f = _zip({"format": V1, "data.pkl": _pickle(V1_REF), "tensors/0.npy": header})
    with pytest.raises(LoadError, match=r"holds dtype object, which is no dtype of dispatch_jit"):
        dj.load(f)


def test_a_bytearray_bomb_in_the_pickle_is_refused():
    # 22 bytes of pickle: bytearray(256 MiB), which allocates and zeroes it
    pkl = b"\x80\x04\x8c\x08builtins\x8c\tbytearray\x93J\x00\x00\x00\x10\x85R."
    f = _zip({"format": V1, "data.pkl": pkl})
    with pytest.raises(LoadError, match=r"bytearray\(\) with other arguments than bytes"):
        dj.load(f)
    ok = _zip({"format": V1, "data.pkl": pickle.dumps(bytearray(b"ab"), protocol=4)})
    assert dj.load(ok) == bytearray(b"ab")


def _ops(*objs) -> bytes:
    """The opcodes that push ``objs`` (protocol 2, without its header and STOP)."""
    return b"".join(pickle.dumps(o, 2)[2:-1] for o in objs)


TENSOR_V1 = _ops(("tensor", 0, False, False)) + pickle.BINPERSID     # pushes the tensor of tensors/0.npy


@pytest.mark.parametrize("ops, match", [
    (TENSOR_V1 + _ops((None, {"_sig": 0})) + pickle.BUILD, "sets the state of a Tensor"),   # its dispatch signature
    (TENSOR_V1 + _ops(0, 5.0) + pickle.SETITEM, "assigns an item of a Tensor"),               # t[0] = 5.0
    (TENSOR_V1 + pickle.MARK + _ops(0, 5.0) + pickle.SETITEMS, "assigns items of a Tensor"),
    (TENSOR_V1 + pickle.MARK + _ops(1.0) + pickle.ADDITEMS, "adds items to a Tensor"),        # t.add(1.0)
    (TENSOR_V1 + _ops(1.0) + pickle.APPEND, "appends to a Tensor"),
    (_ops({}) + _ops((None, {"x": 1})) + pickle.BUILD, "sets the state of a dict"),
])
def test_the_pickle_cannot_reach_into_a_tensor_or_set_state(ops, match):
    f = _zip({"format": V1, "data.pkl": pickle.PROTO + b"\x04" + ops + pickle.STOP,
              "tensors/0.npy": _npy(np.ones(2, np.float32))})
    with pytest.raises(LoadError, match=match + r"; weights_only=True does that only to"):
        dj.load(f)


@pytest.mark.parametrize("pkl", [
    pickle.PROTO + b"\x04" + pickle.BINBYTES8 + struct.pack("<Q", 2**40) + b"abc" + pickle.STOP,   # claims 1 TiB
    pickle.dumps(complex, 4)[:-1] + _ops(("x",)) + pickle.REDUCE + pickle.STOP,                     # complex("x")
    pickle.PROTO + b"\x04" + pickle.APPEND + pickle.STOP,                                          # an empty stack
])
def test_a_damaged_pickle_is_a_load_error(pkl):
    f = _zip({"format": V1, "data.pkl": pkl})
    with pytest.raises(LoadError, match=r"the pickle in the file object is damaged \("):
        dj.load(f)


# -- what is opened -----------------------------------------------------------------------------------------------

def _load_in_thread(target) -> list:
    """dj.load(target) in a thread; [result or exception, ...] once it returns, [] if it is still blocked."""
    out = []

    def run():
        try:
            out.append(dj.load(target))
        except BaseException as e:       # noqa: BLE001 (handed to the test's thread)
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)          # a guard against hanging the suite, not a measurement
    return out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = _load_in_thread(fifo)
    if not out:       # blocked in open(): give it a writer that closes at once, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("dj.load of a FIFO blocked")
    assert isinstance(out[0], LoadError) and "is a FIFO (named pipe), not a regular file" in str(out[0])


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_dev_zero_is_refused_path_or_file_object():
    out = _load_in_thread("/dev/zero")
    assert out and isinstance(out[0], LoadError), out
    assert "'/dev/zero' is a character device, not a regular file" in str(out[0])
    with open("/dev/zero", "rb") as fh:
        out = _load_in_thread(fh)
    assert out and isinstance(out[0], LoadError) and "the file object is a character device" in str(out[0])


def test_a_directory_and_an_unseekable_stream_are_refused(tmp_path):
    with pytest.raises(LoadError, match="is a directory, not a regular file"):
        dj.load(tmp_path)

    class Stream(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            return 0
    with pytest.raises(LoadError, match="not seekable"):
        dj.load(Stream())


def test_random_damage_to_a_saved_file_is_a_load_error_or_a_load():
    """Flip, cut or insert bytes of a real file, and of its pickle (with the zip's CRC made to
    match): every outcome is a LoadError, or a load (a timestamp byte), never another error."""
    import random

    x = dj.arange(12.0).reshape(3, 4)
    buf = io.BytesIO()
    dj.save({"x": x, "r": x[1], "n": 3, "s": "hi", "l": [dj.tensor([1, 2]), {1, 2}, 2j, slice(1, 2)]}, buf)
    good = buf.getvalue()
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        members = {n: z.read(n) for n in z.namelist()}
    rng = random.Random(0)

    def damage(b: bytes) -> bytes:
        b = bytearray(b)
        mode = rng.random()
        if mode < 0.7:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            return bytes(b)
        p = rng.randrange(len(b))
        return bytes(b[:p]) if mode < 0.85 else bytes(b[:p]) + rng.randbytes(rng.randint(1, 8)) + bytes(b[p:])

    for _ in range(400):
        for f in (io.BytesIO(damage(good)),
                  _zip({**members, "data.pkl": damage(members["data.pkl"])})):
            try:
                dj.load(f)
            except LoadError:
                pass
