"""Random op graphs: eager vs NumPy/PyTorch node by node, and eager vs @dj.compile vs dj.execution_mode("compiled")."""

from hypothesis import given, strategies as st

import fuzz_check as fc
import fuzz_graph as fg
from fuzz_settings import fuzz_settings


@st.composite
def graphs(draw, **kw):
    return fg.gen_graph(fg.HypothesisChooser(draw), **kw)


@fuzz_settings(25)
@given(graphs())
def test_random_graphs_all_modes(g):
    fc.check_graph(g)


@fuzz_settings(40)
@given(graphs(max_nodes=3))
def test_random_graphs_eager_vs_numpy_and_torch(g):
    # eager only: cheap (no fused loops), so many more graphs
    fc.check_graph(g, modes=())
