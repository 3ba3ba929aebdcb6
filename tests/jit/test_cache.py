"""The one compile cache (dispatch_jit/jit/cache.py): memory -> build, counted per kind,
first-use races build once; and that the library's compilers go through it."""

import threading

import numpy as np
from numba import types as nbt

import dispatch_jit as dj
from dispatch_jit.jit import cache


def test_lookup_builds_once_and_counts_where_it_decides():
    built = []

    def build():
        built.append(1)
        return "entry", "compiled"

    assert cache.lookup("t_counts", "k", build) == ("entry", "compiled")
    assert cache.last_outcome("t_counts") == "compiled" and cache.last_outcome("t_counts") is None
    assert cache.lookup("t_counts", "k", build) == ("entry", "memory")
    assert cache.last_outcome("t_counts") == "memory"
    assert len(built) == 1 and cache.size("t_counts") == 1 and cache.keys("t_counts") == ["k"]
    assert cache.counts("t_counts") == {"memory": 1, "disk": 0, "compiled": 1}
    assert cache.lookup("t_counts", "d", lambda: ("other", "disk"))[1] == "disk"
    assert cache.counts("t_counts")["disk"] == 1


def test_a_failed_build_is_not_cached():
    def fail():
        raise ValueError("no")

    for _ in range(2):
        try:
            cache.lookup("t_fail", "k", fail)
        except ValueError:
            pass
    assert cache.size("t_fail") == 0 and cache.counts("t_fail")["compiled"] == 0


def test_first_use_race_builds_once():
    start, built = threading.Barrier(8), []
    inside = threading.Event()

    def build():
        built.append(threading.get_ident())
        inside.wait(5)         # hold the lock until every thread has asked
        return object(), "compiled"

    results = []

    def ask():
        start.wait()
        results.append(cache.lookup("t_race", "k", build)[0])

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    threading.Timer(0.2, inside.set).start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(set(map(id, results))) == 1
    assert cache.counts("t_race") == {"memory": 7, "disk": 0, "compiled": 1}


def test_njit_source_compiles_once_per_source_signature_and_options():
    src = "def twice(x):\n    return x * 2\n"
    ep, how = cache.njit_source("t_njit", src, "twice", (nbt.float64,), {})
    assert ep(1.5) == 3.0 and how == "compiled"
    assert cache.njit_source("t_njit", src, "twice", (nbt.float64,), {})[1] == "memory"
    assert cache.njit_source("t_njit", src, "twice", (nbt.int64,), lambda: {})[1] == "compiled"
    assert cache.njit_source("t_njit", src, "twice", (nbt.int64,), {}, options={"fastmath": True})[1] == "compiled"
    assert cache.size("t_njit") == 3


def test_the_library_compiles_through_it():
    from dispatch_jit.compiler import codegen
    from dispatch_jit.kernels.elementwise import cpu as ew

    before = cache.size("elementwise")
    dj.add(dj.tensor(np.arange(3, dtype=np.int16)), dj.tensor(np.arange(3, dtype=np.int16)))
    assert ew.compiled_kernels() == cache.size("elementwise") >= before
    assert codegen.compiled_loops() == cache.size("loop")
    assert codegen.disk_hits() == cache.counts("loop")["disk"]
