"""The loop generator (kernels/support/loops): one source of loop nests for eager and fused loops."""

import linecache

import numba
import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.jit.source import define
from dispatch_jit.kernels.support.loops import Nest, loop_globals, read_cast


def _copy_kernel(kind, ndim):
    """A generated kernel o0 = a0 * 2 + a1 over a nest of ``kind``, compiled serially."""
    nest = Nest(kind, ndim, ["a0", "a1"], ["o0"])
    body = lambda at: [f"{at('o0')} = {read_cast('compute', at('a0'), '_t_float64')} * 2 + {at('a1')}"]
    src = "\n".join(["def k(a0, a1, o0):"] + nest.setup + nest.loop(body)) + "\n"
    return numba.njit(define(src, "k", loop_globals(False), "<dispatch_jit test loops>")), src


@pytest.mark.parametrize("kind,shape", [("flat", (3, 5)), ("strided", (3, 5)), ("strided", ()), ("tiled", (2, 3, 5)),
                                        ("strided", (4,))])
def test_every_nest_shape_visits_every_element_once(kind, shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape)
    if kind != "flat" and len(shape) >= 2:
        b = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)   # a crosswise operand
    out = np.full(shape, np.nan)
    k, src = _copy_kernel(kind, len(shape))
    k(a, b, out)
    np.testing.assert_array_equal(out, a.astype(np.float64) * 2 + b)
    assert ("prange" in src) == (len(shape) > 0)


def test_guarded_nest_takes_the_fast_body_only_for_whole_chunks_that_pass():
    nest = Nest("strided", 1, ["a0"], ["o0"])
    lines = nest.setup + nest.loop_guarded(lambda at: [f"ok &= {at('a0')} >= 0"],
                                           lambda at: [f"{at('o0')} = 1.0"], lambda at: [f"{at('o0')} = 2.0"])
    k = define("\n".join(["def k(a0, o0):"] + lines) + "\n", "k", loop_globals(False), "<dispatch_jit test loops>")
    a = np.ones(5000)
    a[4500] = -1.0                    # spoils the third chunk of 2048 only
    out = np.zeros(5000)
    numba.njit(k)(a, out)
    assert (out[:4096] == 1.0).all() and (out[4096:] == 2.0).all()


def test_cast_rule_is_the_one_both_layers_use():
    assert read_cast("compute", "v", "_t_int64") == "_t_int64(v)"
    assert read_cast("bool", "v", "_t_int64") == "(v != 0)"
    assert read_cast("none", "v", "_t_int64") == "v"


def test_eager_and_fused_loops_share_the_nest():
    """A one-node fused region and the eager kernel of the op loop the same way: the for lines
    of their generated sources are the same."""
    from dispatch_jit.compiler.codegen import compiled_loops  # noqa: F401 (the compiler is loaded)
    from dispatch_jit.kernels.elementwise.cpu import _gen_source
    from dispatch_jit.kernels.elementwise.table import SCALAR_OPS
    from dispatch_jit.dtypes import float64
    eager = _gen_source(SCALAR_OPS["mul"], ("array", "array", "none"), ("none", "none", "none"), float64, 2, False, ())
    fused = Nest("strided", 2, ["a0", "a1"], ["out"])
    fors = [ln for ln in eager.splitlines() if ln.lstrip().startswith(("for ", "n0"))]
    assert fors == [ln for ln in fused.setup + fused.loop(lambda at: ["pass"]) if ln.lstrip().startswith(("for ", "n0"))]


def test_eager_fast_path_source_is_shown_in_tracebacks():
    """The flat fast path is generated code made through jit/source.py: linecache holds its lines."""
    x = dj.ones(3, dtype=dj.float64)
    (x - x).sum()
    names = [n for n in linecache.cache if n.startswith("<dispatch_jit aten::sub.Tensor fast path")]
    assert names and any("def run(" in ln for n in names for ln in linecache.getlines(n))


def test_reduction_nests_fold_per_output_and_per_chunk():
    """``loop(level=...)`` places an accumulator's start and store around the reduced loops;
    ``loop_chunks`` splits the flat range into ``nc`` chunks of ``ceil(n / nc)``, the last shorter."""
    rows = Nest("strided", 3, ["a0"], [], sizes="a0")
    src = "\n".join(["def rows(a0, r0):"] + rows.setup + rows.loop(
        lambda at: [f"acc += {at('a0')}"], level=1, before=["acc = 0.0"], after=["r0[i0] = acc"])) + "\n"
    chunks = Nest("flat", 2, ["a0"], [], sizes="a0")
    src += "\n".join(["def chunks(a0, nc, p0, c0):"] + chunks.setup + chunks.loop_chunks(
        ["acc = 0.0", "m = 0"], lambda at: [f"acc += {at('a0')}", "m += 1"], ["p0[ch] = acc", "c0[ch] = m"])) + "\n"
    g = define(src, "rows", loop_globals(False), "<dispatch_jit test reduction loops>").__globals__
    a = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    r = np.zeros(2)
    numba.njit(g["rows"])(a, r)
    np.testing.assert_array_equal(r, a.sum(axis=(1, 2)))
    p, c = np.zeros(5), np.zeros(5, np.int64)
    numba.njit(g["chunks"])(a, 5, p, c)
    assert list(c) == [5, 5, 5, 5, 4]                 # 24 elements: ceil(24 / 5) = 5 per chunk
    np.testing.assert_array_equal(p, [a.ravel()[i:i + 5].sum() for i in range(0, 24, 5)])


def test_cuda_nest_indexes_fresh_outputs_without_strides():
    """Fused CUDA regions write fresh C-contiguous outputs (offset + i); eager kernels may write
    into a strided out= view, whose strides are parameters."""
    from dispatch_jit.kernels.support.loops.cuda import CudaNest
    fused = CudaNest(False, 2, ["a0"], ["o0"], fresh_outputs=True)
    assert fused.params("a0") == ["a0", "a0_o", "a0_s0", "a0_s1"] and fused.params("o0") == ["o0", "o0_o"]
    src = fused.kernel("k", fused.params("a0") + fused.params("o0") + fused.sizes(),
                       lambda at: [f"{at('o0')} = {at('a0')}"])
    assert "o0_k = o0_o + i" in src and "o0[o0_k] = a0[a0_k]" in src
    eager = CudaNest(False, 2, ["a0"], ["out"])
    assert eager.params("out") == ["out", "out_o", "out_s0", "out_s1"]
    assert CudaNest(True, 2, ["a0"], ["out"]).params("a0") == ["a0", "a0_o"]
