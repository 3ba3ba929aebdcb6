"""bfloat16 fuzz: every elementwise op of the table on random bfloat16 words (ties, subnormals, inf,
NaN among them) must give exactly float32's result rounded once to nearest even (the loop
generator's read_cast widens, its store rounds), and random chains of them must give the same
bits eagerly, under @dj.compile and in dj.execution_mode("compiled"), where a chain (and a
reduction ending it) is one fused loop rounding each node's result where eager stores it."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dispatch_jit as dj
from dispatch_jit import bf16
from dispatch_jit.dtypes import FLOAT
from dispatch_jit.kernels.elementwise.table import SCALAR_OPS
from fuzz_settings import fuzz_settings
from helpers import assert_same

# the float ops the table has, called by their public names (nextafter refuses 16-bit floats)
OPS = sorted(op.name for op in SCALAR_OPS.values()
             if FLOAT in op.cats and op.arity in (1, 2) and not op.statics
             and op.name not in ("nextafter", "real", "imag", "conj") and hasattr(dj, op.name))
# words worth drawing: exact ties of float32 neighbours come from the arithmetic; these are the edges
EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0]


@st.composite
def words(draw, n):
    return np.array(draw(st.lists(st.one_of(st.sampled_from(EDGES), st.integers(0, 0xFFFF)),
                                  min_size=n, max_size=n)), np.uint16)


def _bf16(w) -> dj.Tensor:
    return dj.tensor(bf16.to_float32(bf16.words_to_storage(w)), dtype=dj.bfloat16)


@fuzz_settings(60)
@given(st.sampled_from(OPS), words(12), words(12))
def test_each_op_is_float32_rounded_once(name, wa, wb):
    op = SCALAR_OPS[name]
    x, y = _bf16(wa), _bf16(wb)
    args = (x,) if op.arity == 1 else (x, y)
    r = getattr(dj, name)(*args)
    want = getattr(dj, name)(*(a.float() for a in args))
    assert_same(r, want.bfloat16() if want.dtype is dj.float32 else want)


@fuzz_settings(15)
@given(st.lists(st.sampled_from([n for n in OPS if SCALAR_OPS[n].rule not in ("compare", "predicate", "logical")]),
                min_size=1, max_size=4),
       words(20), words(20), st.booleans(),
       st.sampled_from([None, ("sum", None), ("mean", 1), ("sum", 0), ("amax", 1), ("amin", None)]))
def test_chains_compiled_equal_eager(names, wa, wb, mixed, reduce):
    x, y = _bf16(wa).reshape(4, 5), _bf16(wb).reshape(4, 5)
    if mixed:
        y = y.float()            # bfloat16 meets float32: promoted, as PyTorch's table says

    unary = [SCALAR_OPS[n].arity == 1 for n in names]     # (a ScalarOp read inside would make it run eagerly)

    def chain(a, b):
        v = a
        for name, one in zip(names, unary):
            v = getattr(dj, name)(v) if one else getattr(dj, name)(v, b)
        if reduce is not None:       # an epilogue folding the chain's rounded values, as eager's kernel
            v = getattr(dj, reduce[0])(v) if reduce[1] is None else getattr(dj, reduce[0])(v, reduce[1])
        return v
    compiled = dj.compile(chain)
    try:
        eager = chain(x, y)
    except dj.errors.DTypeError as e:            # a bool in the chain (isreal) that the next op refuses
        with pytest.raises(type(e)):
            compiled(x, y)
        return
    assert_same(compiled(x, y), eager)
    # one loop (a lone op is its own eager kernel, already one loop)
    one = len(names) > 1 or reduce is not None
    plan = "1 fused loop(s), 0 eager step(s)" if one else "0 fused loop(s), 1 eager step(s)"
    assert f"compiled plan: {plan}" in compiled.explain(), compiled.explain()
    with dj.execution_mode("compiled"):
        lazy = chain(x, y)
    assert_same(lazy, eager)


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator computes with NumPy scalars
@fuzz_settings(6)
@given(st.lists(st.sampled_from([n for n in OPS if SCALAR_OPS[n].rule not in ("compare", "predicate", "logical")]),
                min_size=2, max_size=4),
       words(6), words(6), st.booleans())
def test_chains_on_cuda_compiled_equal_eager(names, wa, wb, mixed):
    # the CUDA fused kernel reads and rounds the words where eager's CUDA kernels do (few examples: the
    # simulator runs a Python thread per element and compiles each chain)
    x, y = _bf16(wa).reshape(2, 3).cuda(), _bf16(wb).reshape(2, 3).cuda()
    if mixed:
        y = y.float()
    unary = [SCALAR_OPS[n].arity == 1 for n in names]

    def chain(a, b):
        v = a
        for name, one in zip(names, unary):
            v = getattr(dj, name)(v) if one else getattr(dj, name)(v, b)
        return v
    compiled = dj.compile(chain)
    try:
        eager = chain(x, y)
    except dj.errors.DTypeError as e:
        with pytest.raises(type(e)):
            compiled(x, y)
        return
    got = compiled(x, y)
    assert got.is_cuda and got.dtype is eager.dtype
    assert_same(got.cpu(), eager.cpu())
    assert "compiled plan: 1 fused loop(s), 0 eager step(s)" in compiled.explain(), compiled.explain()
