"""vmap as a fuzz mode: random op graphs from the fuzzers' table (tests/fuzz), ``vmap(f)`` on a batch
of two examples equals ``f`` on each example, stacked (same dtype, shape and values; float results
may differ only by a reduction's order of additions, as between eager and compiled runs); and
``dj.compile(vmap(f))`` equals eager ``vmap(f)`` as the compile fuzzer compares (bit for bit, except
an output a float reduction reaches, ``g.reordered``), raising the same exception type where it raises."""

import os
import sys

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import dispatch_jit as dj
from dispatch_jit.func import vmap
from dispatch_jit.kernels.batching.core import FALLBACK_WARNED

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fuzz"))
import fuzz_check as fc        # noqa: E402
import fuzz_graph as fg        # noqa: E402
from fuzz_ops import ROWS      # noqa: E402
from fuzz_settings import fuzz_settings   # noqa: E402

# rows vmap does not take, each with its reason
EXCLUDED = {
    "setitem": "item assignment into a batched tensor (t[i] = v) is not supported inside vmap",
}
VMAP_ROWS = [r for r in ROWS if r.kind not in EXCLUDED and r.name not in EXCLUDED]


@st.composite
def graphs(draw):
    ch = fg.HypothesisChooser(draw)
    return fg.gen_graph(ch, rows=VMAP_ROWS, max_nodes=3, allow_large=False)


def _second_example(t):
    """Another example of the same shape and dtype, from the same values (so in the op's domain too):
    the elements in reverse order."""
    a = t.numpy()
    return dj.from_numpy(np.array(a.reshape(-1)[::-1].reshape(a.shape), order="C"))


@fuzz_settings(15)
@given(graphs())
def test_vmap_equals_the_stacked_loop(g):
    assume(not g.expect_error and g.outputs)
    f = fg.build_function(fg.function_source(g))
    first = fg.make_inputs(g)
    second = [_second_example(x) for x in fg.make_inputs(g)]
    try:
        want = [[o.numpy().copy() for o in f(*ex)] for ex in (first, second)]
    except Exception:      # noqa: BLE001 - errors are test_fuzz_graphs' business
        assume(False)
    fresh = [_second_example(x) for x in fg.make_inputs(g)]
    batch = [dj.stack([a, b]) for a, b in zip(fg.make_inputs(g), fresh)]
    saved = set(FALLBACK_WARNED)
    FALLBACK_WARNED.clear()
    try:
        got = vmap(f)(*batch)
        # every op of the table has a rule: none ran once per example
        assert not FALLBACK_WARNED, f"took the looping fallback: {FALLBACK_WARNED}\n{fg.function_source(g)}"
    finally:
        FALLBACK_WARNED.update(saved)
    for j, o in enumerate(got):
        for i in range(2):
            why = fc.same_result(o.numpy()[i], want[i][j])
            assert why is None, f"output {j}, example {i}: {why}\n{fg.function_source(g)}"


def _run(fn, batch):
    try:
        return [o.numpy().copy() for o in fn(*batch)], None
    except Exception as e:      # noqa: BLE001 - compared with the other mode's
        return None, e


@fuzz_settings(6)
@given(graphs())
@pytest.mark.filterwarnings("ignore::dispatch_jit.errors.CompileWarning")
def test_compiled_vmap_equals_eager_vmap(g):
    """``dj.compile(vmap(f))``: the batching rules run inside the trace (the batch is a loop axis of
    the plan); twice, so the second call runs the cached plan."""
    assume(g.outputs)
    f = fg.build_function(fg.function_source(g))
    batch = [dj.stack([a, _second_example(b)]) for a, b in zip(fg.make_inputs(g), fg.make_inputs(g))]
    want, err = _run(vmap(f), batch)
    cf = dj.compile(vmap(f))
    for call in range(2):
        got, gerr = _run(cf, [x.clone() for x in batch])
        src = fg.function_source(g)
        if err is not None or gerr is not None:
            assert type(gerr) is type(err), f"call {call + 1}: eager vmap raised {err!r}, compiled {gerr!r}\n{src}"
            return
        for j, (a, b) in enumerate(zip(got, want)):
            why = (fc.same_result if g.reordered[g.outputs[j]] else fc.same_bits)(a, b)
            assert why is None, f"call {call + 1}, output {j}: {why}\n{src}\n{cf.explain()}"
