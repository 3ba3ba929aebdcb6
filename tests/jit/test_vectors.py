"""jit/vectors.py: generated loops compiled for 512-bit vectors where the CPU has AVX-512,
through every path that compiles generated source, with the bits of the 256-bit code."""

import numba
import numpy as np
import pytest

from dispatch_jit.jit import cache, diskcache, source, vectors
from dispatch_jit.kernels.support.loops import loop_globals
from dispatch_jit.kernels.support.numba_types import JIT_HELPERS

ARR = numba.float32[::1]
AVX512 = pytest.mark.skipif(not vectors.available(), reason="the CPU has no AVX-512: generated loops are left as they are")

# a flat loop over two float32 forms of support/vecmath (one compile serves both; each compile of
# this loop costs ~1 s)
_SRC = """def k(a, o0, o1):
    for i in prange(a.shape[0]):
        o0[i] = _exp_f32(a[i])
        o1[i] = _tanh_f32(a[i])
"""
_SIG = (ARR,) * 3


def _kernel(parallel: bool, wide: bool):
    glb = {**loop_globals(parallel), **JIT_HELPERS}
    src, glb = vectors.widen(_SRC, "k", glb) if wide else (_SRC, glb)
    k = numba.njit(parallel=parallel, error_model="numpy")(source.define(src, "k", glb, "<dispatch_jit test_vectors>"))
    k.compile(_SIG)
    return k


def test_mark_puts_the_call_first_in_jitted_functions_and_their_prange_bodies_only():
    src = ("def helper(x):\n    return x\n\n@numba.njit\ndef fused(a):\n    return a\n\n"
           "def k(a, o):\n    n = a.shape[0]\n    for c in prange(n):\n        for i in range(4):\n"
           "            o[i] = a[i]\n    for j in range(n): o[j] = 0\n")
    lines = vectors.mark(src, "k").splitlines()
    call = lambda ind: " " * ind + vectors.CALL
    # the helper Python runs is left alone; the decorated function, k and its prange body are marked
    assert lines[1] == "    return x" and lines[5] == call(4)
    assert lines[9] == call(4) and lines[12] == call(8) and sum(vectors.CALL in s for s in lines) == 3
    # what the marked source computes is the original's
    a, o = np.arange(4.0), np.ones(4)
    glb = {"prange": range, "_wide_vectors": lambda: None, "numba": numba}
    source.define(vectors.mark(src, "k"), "k", glb, "<dispatch_jit test_vectors mark>")(a, o)
    np.testing.assert_array_equal(o, np.zeros(4))


def test_without_avx512_the_source_is_left_as_it_was(monkeypatch):
    monkeypatch.setattr(vectors, "_avail", [False])
    glb = {"prange": range}
    assert vectors.widen(_SRC, "k", glb) == (_SRC, glb)


@AVX512
@pytest.mark.parametrize("parallel", [False, True])
def test_a_marked_loop_uses_zmm_registers_and_computes_the_same_bits(parallel):
    # the parallel compile outlines the prange body into a function of its own: marked there too
    wide, narrow = _kernel(parallel, True), _kernel(parallel, False)
    assert "zmm" in wide.inspect_asm(_SIG) and "zmm" not in narrow.inspect_asm(_SIG)
    assert vectors.ATTRIBUTE in wide.inspect_llvm(_SIG)
    # every element alone, no fold: the width changes no bit (a dense sample, subnormals to overflow)
    x = np.concatenate([np.linspace(-110.0, 110.0, 200_003, dtype=np.float32),
                        np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3e38], np.float32)])
    outs = [[np.empty_like(x) for _ in range(2)] for _ in range(2)]
    wide(x, *outs[0])
    narrow(x, *outs[1])
    for w, n in zip(*outs):
        np.testing.assert_array_equal(w.view(np.uint32), n.view(np.uint32))


def test_every_path_compiling_generated_source_widens_it(monkeypatch, tmp_path):
    # cache.njit_source (memory only and through the disk) and diskcache.compile_cached (the
    # eager reductions): the eager kernels and the compiler's fused loops all come through these
    seen = []
    real = vectors.widen
    monkeypatch.setattr(vectors, "widen", lambda src, name, glb: seen.append(name) or real(src, name, glb))
    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(tmp_path))
    src = "def twice_wide(a, o):\n    for i in prange(a.shape[0]):\n        o[i] = a[i] * 2\n"
    a, o = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    for disk in (False, True):
        ep = cache.njit_source("test_vectors", src, "twice_wide", (ARR, ARR), {"prange": range}, key=disk,
                               disk=disk)[0]
        ep(a, o)
        np.testing.assert_array_equal(o, a * 2)
    assert seen == ["twice_wide", "twice_wide"]


def test_the_disk_key_tells_a_widened_kernel_from_a_narrow_one(monkeypatch):
    # an entry written where the source was not marked (no AVX-512) is another key; the CPU's
    # features are in every key besides (diskcache.target_tag)
    keys = set()
    for avail in (False, True):
        monkeypatch.setattr(vectors, "_avail", [avail])
        keys.add(diskcache.source_key(_SRC, "k", _SIG, {"parallel": False}, {**loop_globals(False), **JIT_HELPERS}))
    assert len(keys) == 2 and None not in keys
    assert "avx512f" in diskcache.target_tag() or not vectors.available()
