"""The Dask backend as a mode of the differential fuzzer: random graphs of the ops the Dask key
supports, run on Dask tensors (inputs cut into small chunks) eagerly and under ``@dj.compile`` (fused
regions, one task per chunk: dispatch_jit/dask/compiled.py), must give eager CPU mode's results:
bit for bit, except where a float reduction's tree combine may round otherwise (the graph's
``reordered`` values, compared within a few ulps of the accumulation).  Where eager mode raises,
the Dask run must raise the same exception type (when the graph is built or when it computes)."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

pytest.importorskip("dask.array")

import dispatch_jit as dj
import fuzz_check as fc
import fuzz_graph as fg
import fuzz_ops as fo
from fuzz_settings import fuzz_settings

# the rows whose ops have a kernel at the Dask key (dispatch_jit/dask/kernels.py)
_KINDS = ("unary", "binary", "ternary", "cast")
_OTHER = ("sum", "prod", "mean", "max", "min", "amax", "amin", "matmul",
          "transpose", "T", "permute", "unsqueeze", "squeeze", "expand", "reshape", "clone", "contiguous")
_LEFT_OUT = ("mse_loss", "gelu", "silu")      # composite ops: PrivateUse1 gets no composite kernels
DASK_ROWS = [r for r in fo.ROWS if (r.kind in _KINDS and r.name not in _LEFT_OUT) or r.name in _OTHER]


@st.composite
def graphs(draw):
    return fg.gen_graph(fg.HypothesisChooser(draw), rows=DASK_ROWS, max_nodes=4, allow_large=False)


def _dask_inputs(g):
    """The graph's inputs as Dask tensors in chunks of (at most) 2 along every dim."""
    return [t.to("dask", chunks=tuple(max(1, min(2, n)) for n in t.shape) or ()) for t in fg.make_inputs(g)]


def _run(f, inputs):
    try:
        outs = f(*inputs)
        return [np.asarray(t.numpy()) for t in outs], None
    except Exception as e:      # noqa: BLE001 - any exception is a result to compare
        return None, e


def _tol(got):
    if got.dtype.kind != "f":
        return None
    return (64 * np.finfo(got.dtype).eps, 64 * np.finfo(got.dtype).tiny)


@fuzz_settings(30)
@given(graphs())
def test_random_graphs_dask_vs_eager(g):
    f = fg.build_function(fg.function_source(g))
    want, err = _run(f, fg.make_inputs(g))
    src = fg.function_source(g)
    for mode, fn in (("dask", f), ("compiled dask", dj.compile(f))):
        got, derr = _run(fn, _dask_inputs(g))
        if err is not None:
            assert derr is not None and isinstance(derr, type(err)), \
                f"eager raised {type(err).__name__}: {err}; {mode} gave {derr!r}\n{src}"
            continue
        assert derr is None, f"{mode} raised {type(derr).__name__}: {derr}; eager did not\n{src}"
        for i, (gv, wv) in enumerate(zip(got, want)):
            why = fc.close(gv, wv, _tol(gv) if g.reordered[g.outputs[i]] else None)
            assert why is None, f"{mode}: output {i}: {why}\n{src}"
