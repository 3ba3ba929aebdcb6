"""The eager kernels on disk: file-defined ``numba.njit`` functions (diskcache.attach, the
path of linalg, quantized and sparse) and the generated eager loops (elementwise, reduction),
in the same store as the fused loops.

In-process cases use one tiny kernel of this file, compiled afresh by a new dispatcher (what a
fresh process has) into a per-test cache directory; damaged entries reuse
test_diskcache_faults.py's table.  One pair of subprocesses runs real library kernels of every
CPU family cold and then warm, and compares.
"""

import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings

import numba
import numpy as np
import pytest
from numba import types as nbt

from dispatch_jit.jit import cache as compile_cache, diskcache, fingerprint

from test_diskcache_faults import ARR, FAULTS  # the same faults (the per-test cache dir is conftest's)

SCALE = 3.0


@numba.njit
def _helper(v):
    return v + 0.25


def _body(a, o):
    for i in range(o.shape[0]):
        o[i] = _helper(a[i] * SCALE)


def _fresh():
    """A new dispatcher of the same kernel (its callee compiled with it), as a new process has."""
    return numba.njit(_body)


def _run(disp):
    """How ``disp`` came by its overload for (ARR, ARR) ("disk" or "compiled"), checking its values."""
    slot = diskcache.attach(disp, "eager_test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ep = disp.compile((ARR, ARR))
    out = np.empty(4)
    ep(np.arange(4.0), out)
    assert out.tolist() == (np.arange(4.0) * SCALE + 0.25).tolist()
    return slot.outcome((ARR, ARR))


def _entry(root):
    (path,) = (root / "cpu").glob("eager_test_*.nbx")
    return path


def test_a_loaded_kernel_gives_the_same_results_and_counts_as_disk(cache):
    assert _run(_fresh()) == "compiled"
    assert _run(_fresh()) == "disk"                     # values checked in _run
    # through the compile cache: a load is counted as "disk", not as a compile
    ep = compile_cache.njit_function("t_eager_counts", "k", "eager_test", _fresh(), (ARR, ARR))
    out = np.empty(2)
    ep(np.array([1.0, 2.0]), out)
    assert out.tolist() == [3.25, 6.25]
    assert compile_cache.counts("t_eager_counts") == {"memory": 0, "disk": 1, "compiled": 0}
    assert compile_cache.signatures("t_eager_counts") == {"eager_test": ["(array(float64, 1d, C), array(float64, 1d, C))"]}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_damaged_eager_entry_is_a_quiet_miss_and_is_rewritten(cache, fault, caplog):
    assert _run(_fresh()) == "compiled"
    path = _entry(cache)
    FAULTS[fault](path, path.read_bytes(), cache)
    with caplog.at_level(logging.DEBUG, logger="dispatch_jit"):
        assert _run(_fresh()) == "compiled"             # the right values, no warning
    assert all(r.levelno <= logging.DEBUG for r in caplog.records)
    assert _run(_fresh()) == "disk"


def test_cache_off_keeps_eager_kernels_in_memory(monkeypatch, tmp_path):
    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _run(_fresh()) == "compiled"
    assert _run(_fresh()) == "compiled"
    assert list(tmp_path.iterdir()) == []


def test_generic_calls_of_an_on_disk_kernel_are_counted(cache):
    disp = compile_cache.on_disk("t_eager_on_disk", _fresh())
    out = np.empty(3)
    disp(np.arange(3.0), out)       # Numba's own type dispatch compiles, through the store
    disp(np.arange(3.0), out)       # from memory: Numba's, not counted
    again = compile_cache.on_disk("t_eager_on_disk", _fresh())
    again(np.arange(3.0), out)
    assert out.tolist() == [0.25, 3.25, 6.25]
    assert compile_cache.counts("t_eager_on_disk") == {"memory": 0, "disk": 1, "compiled": 1}


# --- keys ------------------------------------------------------------------------------------------------

def _twice(a, o):
    for i in range(o.shape[0]):
        o[i] = a[i] * 2.0


def _thrice(a, o):
    for i in range(o.shape[0]):
        o[i] = a[i] * 3.0


def test_the_key_follows_the_source_of_the_kernel_its_callees_globals_and_options(monkeypatch):
    base = fingerprint.of_dispatcher(numba.njit(_body))
    assert base == fingerprint.of_dispatcher(numba.njit(_body))           # stable
    assert fingerprint.of_dispatcher(numba.njit(_twice)) != fingerprint.of_dispatcher(numba.njit(_thrice))
    assert fingerprint.of_dispatcher(numba.njit(fastmath=True)(_body)) != base
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 4.0)                # a global Numba freezes
    assert fingerprint.of_dispatcher(numba.njit(_body)) != base
    monkeypatch.undo()

    def other_helper(v):
        return v + 0.5
    monkeypatch.setattr(sys.modules[__name__], "_helper", numba.njit(other_helper))    # a callee's source
    assert fingerprint.of_dispatcher(numba.njit(_body)) != base
    monkeypatch.undo()
    assert fingerprint.of_dispatcher(numba.njit(_body)) == base
    # generated source: the text, and the values of the globals it names
    src = "def k(a, o):\n    o[0] = a[0] * C\n"
    opts = {"parallel": False}
    keys = {diskcache.source_key(src, "k", (ARR, ARR), opts, {"C": 2.0}),
            diskcache.source_key(src, "k", (ARR, ARR), opts, {"C": 3.0}),
            diskcache.source_key(src.replace("*", "+"), "k", (ARR, ARR), opts, {"C": 2.0}),
            diskcache.source_key(src, "k", (ARR, ARR), {"parallel": True}, {"C": 2.0}),
            diskcache.source_key(src, "k", (nbt.Array(nbt.float32, 1, "C"),) * 2, opts, {"C": 2.0})}
    assert len(keys) == 5
    # the options' set, whose repr depends on the process's string hashing, is canonical
    assert fingerprint.of_options({"fastmath": {"reassoc", "contract"}}) == "[('fastmath', \"['contract', 'reassoc']\")]"


class _Opaque:
    factor = 2.0


_OPAQUE = _Opaque()


def _reads_opaque(a, o):
    for i in range(o.shape[0]):
        o[i] = a[i] * _OPAQUE.factor


def test_a_kernel_reading_a_value_without_fingerprint_is_never_stored(cache):
    assert fingerprint.of_dispatcher(numba.njit(_reads_opaque)) is None
    slot = diskcache.attach(numba.njit(_reads_opaque), "opaque_test")
    assert slot.load_overload((ARR, ARR), None) is None
    assert not (cache / "cpu").exists()


# --- real kernels in fresh processes -------------------------------------------------------------------

FAMILIES = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import dispatch_jit as dj
    from dispatch_jit.jit import cache
    from dispatch_jit.kernels.elementwise import cpu as ew
    from dispatch_jit.kernels.reduction import codegen as red
    from dispatch_jit.kernels.linalg import cpu as lin
    from dispatch_jit.kernels.sparse import cpu as sp
    warnings.simplefilter("error")

    a = dj.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 7)
    b = dj.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 5)
    csr = dj.tensor(np.array([[0.0, 2.0], [3.0, 0.0]])).to_sparse_csr()
    # 64**3 multiply-adds: the integer loop nest's parallel variant (its thread count is an argument,
    # not numba.get_num_threads() inside, which would keep it off the disk)
    ai = dj.tensor(np.arange(64 * 64, dtype=np.int32).reshape(64, 64) % 7)
    out = {"add": (a + a).numpy().tolist(), "sum": float(a.sum().numpy()),
           "matmul": (a @ b).numpy().tolist(), "to_dense": csr.to_dense().numpy().tolist(),
           "int matmul": (ai @ ai).numpy()[::9, ::9].tolist()}
    kinds = {"elementwise": "elementwise", "reduction": red._CACHE_KIND, "linalg": lin._CACHE_KIND,
             "sparse": sp._CACHE_KIND}
    print(json.dumps({"out": out, "counts": {k: cache.counts(v) for k, v in kinds.items()}}))
""")


def test_every_family_loads_from_disk_in_a_fresh_process(tmp_path):
    env = dict(os.environ, DISPATCH_JIT_CACHE_DIR=str(tmp_path / "cache"))

    def run():
        p = subprocess.run([sys.executable, "-c", FAMILIES], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    cold = run()
    for kind, c in cold["counts"].items():
        assert c["compiled"] >= 1 and c["disk"] == 0, (kind, c)
    warm = run()
    assert warm["out"] == cold["out"]
    for kind, c in warm["counts"].items():
        assert c["compiled"] == 0 and c["disk"] == cold["counts"][kind]["compiled"], (kind, c)
    # every entry truncated: recompiled quietly, same results
    for p in (tmp_path / "cache" / "cpu").glob("*.nbx"):
        p.write_bytes(p.read_bytes()[:-9])
    healed = run()
    assert healed["out"] == cold["out"]
    assert {k: c["compiled"] for k, c in healed["counts"].items()} == {k: c["compiled"] for k, c in cold["counts"].items()}


def test_a_callee_reached_through_a_module_is_in_the_key(monkeypatch):
    import types as pytypes
    mod = pytypes.ModuleType("_dj_test_helpers")
    mod.helper = numba.njit(lambda v: v + 1.0)
    glb = {"helpers": mod}
    exec("def k(a, o):\n    o[0] = helpers.helper(a[0])\n", glb)
    base = fingerprint.of_dispatcher(numba.njit(glb["k"]))
    assert base is not None
    monkeypatch.setattr(mod, "helper", numba.njit(lambda v: v + 2.0))
    assert fingerprint.of_dispatcher(numba.njit(glb["k"])) != base


def test_a_name_read_only_as_an_attribute_is_no_global():
    # kernels/nn/norm.py's layer-norm kernel calls np.empty in a module that imports dispatch_jit's
    # own ``empty`` (no fingerprint): that name is no global of the kernel, and the plan functions
    # calling the kernel were compiled again in every process (a 60 s first lazy GPT step)
    glb = {"np": np, "empty": _OPAQUE}
    exec("def k(n):\n    return np.empty(n)\n", glb)
    assert fingerprint.of_dispatcher(numba.njit(glb["k"])) is not None
    exec("def k(n):\n    return empty.factor * n\n", glb)       # read as a global: still unseen
    assert fingerprint.of_dispatcher(numba.njit(glb["k"])) is None
