"""Faults in the disk cache of fused loops (dispatch_jit/jit/diskcache.py).

Whatever is on disk, a call returns the right values: a damaged, swapped,
vanished or unreadable entry is a miss (recompile, rewrite) with no warning
and no exception, a directory that cannot be written warns once, and two
processes sharing one directory never see a partial entry.  In-process cases
compile one small loop each (distinct sources, so distinct entries); the cases
that need fresh processes run a few subprocesses with their own cache dirs.
"""

import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import types as nbt

from dispatch_jit.jit import diskcache, trust

ARR = nbt.Array(nbt.float64, 1, "C")
_GLB = {"np": np, "prange": range}
_OPTS = {"parallel": False, "error_model": "numpy", "nogil": False}


def _src(tag: int) -> str:
    return f"def fused_fault(a0, o0):\n    for i in prange(o0.shape[0]):\n        o0[i] = a0[i] * {tag}.5 + 0.25\n"


def _compile(tag: int):
    """How the loop ``tag`` came ("disk" or "compiled"); fails on a warning or a wrong value."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ep, how = diskcache.compile_cached(_src(tag), "fused_fault", (ARR, ARR), _OPTS, _GLB)
    out = np.empty(4)
    ep(np.arange(4.0), out)
    assert out.tolist() == (np.arange(4.0) * (tag + 0.5) + 0.25).tolist()
    return how


def _entry(root: Path, tag: int) -> Path:
    return diskcache.entry_path(root, "fused_fault", _key(tag))


def _key(tag: int) -> str:
    return diskcache.source_key(_src(tag), "fused_fault", (ARR, ARR), _OPTS, _GLB)


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x10]) + blob[at + 1:]


# each fault: (path of the entry, its bytes, the cache root) -> None, damaging the entry
FAULTS = {
    "truncated": lambda p, b, r: p.write_bytes(b[: len(b) // 2]),
    "empty": lambda p, b, r: p.write_bytes(b""),
    "bit flip in the object code": lambda p, b, r: p.write_bytes(_flip(b, len(b) - 40)),
    "bit flip in the header": lambda p, b, r: p.write_bytes(_flip(b, b.index(b'"key"') + 12)),
    "bit flip in the magic line": lambda p, b, r: p.write_bytes(_flip(b, 3)),
    "garbage": lambda p, b, r: p.write_bytes(np.random.default_rng(0).bytes(len(b))),
    "pickle garbage after a valid-looking header": lambda p, b, r: p.write_bytes(
        diskcache._pack(trust.store(r).key, _key_of(b), "fused_fault", (ARR, ARR), b"\x80\x04garbage")),
    "another key's entry under this name": lambda p, b, r: p.write_bytes(_other_entry(r)),
}


def _key_of(blob: bytes) -> str:
    return json.loads(blob.split(b"\n")[2])["key"]


def _other_entry(root: Path) -> bytes:
    """A whole, valid entry of a different loop (same name, argument types and size)."""
    assert _compile(9) == "compiled"
    return _entry(root, 9).read_bytes()


@pytest.mark.parametrize("fault", list(FAULTS))
def test_damaged_entry_is_a_quiet_miss_and_is_rewritten(cache, fault, caplog):
    tag = 1 + list(FAULTS).index(fault)
    assert _compile(tag) == "compiled"
    path = _entry(cache, tag)
    FAULTS[fault](path, path.read_bytes(), cache)
    with caplog.at_level(logging.DEBUG, logger="dispatch_jit"):
        assert _compile(tag) == "compiled"          # the right values (checked in _compile), no warning
    # dispatch_jit's records only: another library's (a Dask cluster's event-loop notes) are not ours
    assert all(r.levelno <= logging.DEBUG for r in caplog.records if r.name.startswith("dispatch_jit"))
    assert _compile(tag) == "disk"                  # rewritten whole


def test_entry_deleted_between_listing_and_reading(cache, monkeypatch):
    assert _compile(20) == "compiled"
    path = _entry(cache, 20)
    real = os.open

    def vanish_then_open(name, *a, **k):
        if os.fspath(name) == str(path):
            os.unlink(name)
        return real(name, *a, **k)
    monkeypatch.setattr(os, "open", vanish_then_open)
    assert _compile(20) == "compiled"
    monkeypatch.setattr(os, "open", real)
    assert _compile(20) == "disk"


def test_unreadable_entry(cache, monkeypatch):
    # as root, chmod 000 does not stop a read: raise what a read of such a file raises
    assert _compile(21) == "compiled"
    path = _entry(cache, 21)
    real = os.open

    def denied(name, *a, **k):
        if os.fspath(name) == str(path):
            raise PermissionError(13, "Permission denied", str(name))
        return real(name, *a, **k)
    monkeypatch.setattr(os, "open", denied)
    assert _compile(21) == "compiled"


def test_cache_files_changed_while_compiling(cache, monkeypatch):
    """Files in the cache dir truncated mid-compile (another process, a cleaner) never reach the
    caller: the loop's source is not re-read from disk."""
    from numba.core.dispatcher import Dispatcher
    real = Dispatcher.compile

    def damage_then_compile(self, sig):
        for p in cache.rglob("*"):
            if p.is_file():
                b = p.read_bytes()
                p.write_bytes(b[: b.rfind(b"[") + 1 or len(b) // 2])    # cut inside a bracket, say
        return real(self, sig)
    monkeypatch.setattr(Dispatcher, "compile", damage_then_compile)
    assert _compile(22) == "compiled"


@pytest.mark.parametrize("how", ["cannot create files", "a file in the way"])
def test_unwritable_cache_dir_compiles_in_memory_and_warns_once(tmp_path, monkeypatch, how):
    # root ignores permission bits, so a read-only directory is modelled by what writing to it raises
    if how == "cannot create files":
        monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(tmp_path))

        def denied(*a, **k):
            raise PermissionError(13, "Permission denied", str(tmp_path))
        monkeypatch.setattr(diskcache, "_create_temp", denied)
    else:
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot write"):
        ep, how1 = diskcache.compile_cached(_src(30), "fused_fault", (ARR, ARR), _OPTS, _GLB)
    assert how1 == "compiled"
    assert _compile(31) == "compiled"       # second loop: no second warning (_compile fails on one)


def test_interrupted_write_leaves_no_entry(cache, monkeypatch):
    """A save cut short (process killed, disk full) leaves nothing under the entry's name."""
    real = os.replace

    def die(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(diskcache.os, "replace", die)
    with pytest.raises(KeyboardInterrupt):
        _compile(23)
    monkeypatch.setattr(diskcache.os, "replace", real)
    assert list((cache / "cpu").iterdir()) == []    # neither an entry nor a temporary file
    assert _compile(23) == "compiled"
    assert _compile(23) == "disk"


# --- fresh processes -----------------------------------------------------------------------------------

def _env(tmp_path, **extra):
    """Environment of a subprocess whose every cache location is a fresh tmp dir (so a stray write shows)."""
    env = dict(os.environ, DISPATCH_JIT_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"), NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DISPATCH_JIT_CACHE_KEY_FILE=str(tmp_path / "key" / "cache.key"), **extra)
    for d in ("home", "xdg", "numba"):
        (tmp_path / d).mkdir(exist_ok=True)
    return env


WARM = textwrap.dedent("""
    import json, logging, warnings
    import numpy as np
    import dispatch_jit as dj
    from dispatch_jit.compiler import codegen
    logging.basicConfig(level=logging.DEBUG, format="LOG %(name)s %(message)s")
    warnings.simplefilter("error")

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    f = dj.compile(lambda x, y: dj.exp(x * 2.0 - y) + y)
    ok = [bool(np.allclose(f(dj.from_numpy(a), dj.from_numpy(b)).numpy(), np.exp(a * 2 - b) + b))]
    with dj.execution_mode("compiled"):                  # the global lazy mode: its own chain, flushed by .numpy()
        x, y = dj.from_numpy(a), dj.from_numpy(b)
        z = (dj.maximum(x - y, 0.0) * 3.0 + x).numpy()
    ok.append(bool(np.allclose(z, np.maximum(a - b, 0) * 3 + a)))
    print(json.dumps({"ok": ok, "disk_hits": codegen.disk_hits()}))
""")


def _run(script, env):
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def _files(d: Path):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_warm_cache_in_a_fresh_process_lazy_mode_too_and_nothing_written_elsewhere(tmp_path):
    env = _env(tmp_path)
    pkg = Path(diskcache.__file__).parents[2]
    numba_files = lambda: sorted(pkg.rglob("*.nb[ic]"))
    before = numba_files()
    cold, _ = _run(WARM, env)
    assert cold == {"ok": [True, True], "disk_hits": 0}
    entries = _files(tmp_path / "cache")
    assert len(entries) == 2 and all(e.startswith("cpu/") and e.endswith(".nbx") for e in entries)
    # damage the lazy mode's entry: the warm process must still give the right values
    lazy_entry = max((tmp_path / "cache" / "cpu").iterdir(), key=lambda p: p.stat().st_mtime)
    lazy_entry.write_bytes(lazy_entry.read_bytes()[:-7])
    warm, log = _run(WARM, env)
    assert warm == {"ok": [True, True], "disk_hits": 1}, log
    assert "ignored: authentication failed" in log
    again, _ = _run(WARM, env)
    assert again == {"ok": [True, True], "disk_hits": 2}
    # Numba's object code stays in DISPATCH_JIT_CACHE_DIR: not in NUMBA_CACHE_DIR, ~, ~/.cache or the sources
    assert [_files(tmp_path / d) for d in ("home", "xdg", "numba")] == [[], [], []]
    assert _files(tmp_path / "cache") == entries
    assert numba_files() == before


RACE = textwrap.dedent("""
    import json, logging, os, sys, time, warnings
    import numba
    import numpy as np
    from numba import types as nbt
    from dispatch_jit.compiler import codegen
    from dispatch_jit.jit import diskcache, trust

    records = []
    class Keep(logging.Handler):
        def emit(self, r): records.append(r.getMessage())
    logging.getLogger("dispatch_jit").addHandler(Keep())
    logging.getLogger("dispatch_jit").setLevel(logging.DEBUG)
    arr = nbt.Array(nbt.float64, 1, "C")
    for _ in range(int(sys.argv[2])):          # as in real use, the processes compiled different things before
        numba.njit(lambda x: x + 1)(1)
    while time.time() < float(sys.argv[1]):      # both processes start compiling at once
        time.sleep(0.001)
    def run(k):
        src = f"def fused_race(a0, o0):\\n    for i in prange(o0.shape[0]):\\n        o0[i] = a0[i] + {k}.0\\n"
        ep, how = diskcache.compile_cached(src, "fused_race", (arr, arr), {"parallel": False}, {"prange": range})
        out = np.empty(3)
        ep(np.arange(3.0), out)
        return how, out.tolist() == [k, k + 1.0, k + 2.0]

    firsts, reloads, ok = [], [], True
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(8):
            how, good = run(k)
            firsts.append(how)
            ok &= good
            # reload it for a while: the other process is about to compile and write the same entry
            end = time.time() + 0.25
            while time.time() < end:
                how, good = run(k)
                reloads.append(how)
                ok &= good
    print(json.dumps({"ok": ok, "firsts": firsts, "reloads": reloads, "warnings": [str(x.message) for x in w], "logs": records}))
""")


def test_two_processes_sharing_one_cache_dir(tmp_path):
    import time
    env = _env(tmp_path)
    start = str(time.time() + 4.0)        # after both have imported numba and dispatch_jit
    procs = [subprocess.Popen([sys.executable, "-c", RACE, start, str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        assert r["ok"] and r["warnings"] == [] and r["logs"] == [], r
        assert set(r["reloads"]) == {"disk"}        # never a partial entry, so never a miss
    assert len(_files(tmp_path / "cache")) == 8
