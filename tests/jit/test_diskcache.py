"""The on-disk cache of fused loops (dispatch_jit/jit/diskcache.py).

Each scenario runs in fresh subprocesses whose DISPATCH_JIT_CACHE_DIR is a
tmp_path (never the user's ~/.cache): a cold run compiles and saves, a warm
run loads every loop from disk (Numba compiles nothing), and a run after the
files were corrupted recompiles quietly and still gets eager mode's results
(test_diskcache_faults.py has every kind of fault).  Subprocesses cost a
Numba start each, so there are few.
"""

import json
import os
import subprocess
import sys
import textwrap

from dispatch_jit.jit import diskcache

# Three functions, so three fused loops, each corrupted in its own way below.  Together they
# touch the scalar helpers, transcendental functions, integer and boolean ops.
SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import dispatch_jit as dj
    from dispatch_jit.compiler import codegen

    def chain8(a, b, c):
        x = a * b + c
        x = x * 2.0 - a
        x = dj.maximum(x, 0.0)
        x = x * dj.exp(-b)
        return dj.sqrt(x + 1.0) * 0.5 + c

    def mixed(a, b):
        m = dj.where(a > b, dj.log(dj.abs(a) + 1.0), dj.tanh(b))
        return m * m - dj.minimum(a, b)

    def ints(i, j):
        return (i * 3 + j) // 2 - dj.abs(i - j)

    rng = np.random.default_rng(0)
    a, b, c = (dj.from_numpy(rng.standard_normal((5, 7))) for _ in range(3))
    i, j = (dj.from_numpy(rng.integers(-50, 50, 33)) for _ in range(2))
    cases = [(chain8, (a, b, c)), (mixed, (a, b)), (ints, (i, j))]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ok, infos = [], []
        for fn, args in cases:
            cf = dj.compile(fn)
            ok.append(bool(np.array_equal(cf(*args).numpy(), fn(*args).numpy())))
            infos.append(cf.cache_info()._asdict())
    print(json.dumps({"ok": ok, "infos": infos, "disk_hits": codegen.disk_hits(),
                      "warnings": [str(x.message) for x in w if "disk cache" in str(x.message)]}))
""")


def _run(script, cache_dir):
    env = dict(os.environ, DISPATCH_JIT_CACHE_DIR=str(cache_dir))
    env.pop("NUMBA_CACHE_DIR", None)
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _entries(cache_dir):
    """The fused loops' entries (the eager kernels the script calls are in the same store)."""
    return sorted(p.stem for p in (cache_dir / "cpu").glob("fused_*.nbx"))


def test_fresh_process_loads_from_disk_and_survives_corruption(tmp_path):
    script = tmp_path / "use_cache.py"
    script.write_text(SCRIPT)
    cache = tmp_path / "cache"

    cold = _run(script, cache)
    assert all(cold["ok"]) and cold["disk_hits"] == 0 and not cold["warnings"]
    assert [i["compiles"] for i in cold["infos"]] == [1, 1, 1]
    stems = _entries(cache)
    assert len(stems) == 3

    warm = _run(script, cache)
    assert all(warm["ok"]) and not warm["warnings"]
    assert warm["disk_hits"] == 3
    assert [(i["compiles"], i["disk_hits"]) for i in warm["infos"]] == [(0, 1)] * 3

    # corrupt each entry differently: truncated, garbage, one bit flipped
    files = [cache / "cpu" / f"{stem}.nbx" for stem in stems]
    files[0].write_bytes(files[0].read_bytes()[:100])
    files[1].write_bytes(b"\x80\x04garbage")
    blob = files[2].read_bytes()
    files[2].write_bytes(blob[:-50] + bytes([blob[-50] ^ 1]) + blob[-49:])

    healed = _run(script, cache)
    assert all(healed["ok"]) and not healed["warnings"]
    assert sorted(i["compiles"] for i in healed["infos"]) == [1, 1, 1]

    again = _run(script, cache)
    assert all(again["ok"]) and not again["warnings"] and again["disk_hits"] == 3


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("DISPATCH_JIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.cache_dir() == tmp_path / "xdg" / "dispatch_jit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert diskcache.cache_dir() == diskcache.Path.home() / ".cache" / "dispatch_jit"
    for off in ("", "0", "off", "OFF", "false", "no"):
        monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", off)
        assert diskcache.cache_dir() is None
    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(tmp_path / "c"))
    assert diskcache.cache_dir() == tmp_path / "c"


def test_disabled_cache_compiles_in_memory(monkeypatch, tmp_path):
    """With the cache off the loop is compiled in memory and nothing is written."""
    import numpy as np
    from numba import types as nbt
    from dispatch_jit.compiler import codegen

    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    src = "def fused_k(a0, o0):\n    for i in prange(o0.shape[0]):\n        o0[i] = a0[i] * 2.5 + 0.125\n"
    arr = nbt.Array(nbt.float64, 1, "C")
    ep, new = codegen.compile_source(src, "fused_k", (arr, arr), False)
    assert new and codegen.last_outcome() == "compiled" and codegen.last_outcome() is None
    x, out = np.arange(4.0), np.empty(4)
    ep(x, out)
    assert out.tolist() == [0.125, 2.625, 5.125, 7.625]
    assert codegen.compile_source(src, "fused_k", (arr, arr), False) == (ep, False)
    assert codegen.last_outcome() == "memory"
    assert list(tmp_path.iterdir()) == []
