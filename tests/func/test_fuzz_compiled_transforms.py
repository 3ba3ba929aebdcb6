"""The transforms under dj.compile as a fuzz mode: for random float64 graphs of the table's
differentiable rows (the gradient fuzzer's, tests/fuzz/test_fuzz_grad.py), ``dj.compile`` of
``grad``, ``jvp``, ``jacfwd`` and ``hessian`` of the graph's loss equals the eager transform: bit
for bit, except where a float reduction may add in another order (a reduction of the graph, or
the sum over a broadcast axis that a gradient is), which is within the fuzzers' reorder
tolerance; twice, so the second call runs the cached plan.  It traces as one plan (no graph
break) unless the graph's function breaks by itself under dj.compile, or for a documented limit
of the transforms' trace (KNOWN_BREAKS; docs/FUNC.md): never for a level's own detach()."""

import os
import sys
import warnings

import numpy as np
from hypothesis import assume, given

import dispatch_jit as dj
from dispatch_jit.errors import CompileWarning
from dispatch_jit.func import grad, hessian, jacfwd, jvp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fuzz"))
import fuzz_check as fc        # noqa: E402
import fuzz_graph as fg        # noqa: E402
from fuzz_settings import fuzz_settings   # noqa: E402
from test_fuzz_grad import _well_posed, build_loss, grad_graphs   # noqa: E402


# what a traced transform may not stand for (compiler/trace/autodiff.py, symbolic_tensor.py)
KNOWN_BREAKS = ("indexing (t[...]) of a value that requires grad", "has no derivative formula to trace",
                "has several outputs")


def _reasons(messages):
    """The abort reasons of CompileWarnings (without the site)."""
    return {m.split("trace aborted: ", 1)[-1].split("\n", 1)[0] for m in messages}


def _calls(cf, xs):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = cf(*[x.clone() for x in xs])
    return out, _reasons([str(w.message) for w in seen if issubclass(w.category, CompileWarning)])


def _transforms(loss, k):
    """The modes: each a function of the graph's ``k`` inputs, differentiating the first."""
    def on_first(t):
        return lambda *xs: t(lambda a: loss(a, *xs[1:]))(xs[0])
    return {
        "grad": lambda *xs: grad(loss, argnums=tuple(range(k)))(*xs),
        "jvp": lambda *xs: jvp(loss, xs, tuple(x.cos() for x in xs)),
        "jacfwd": on_first(jacfwd),
        "hessian": on_first(hessian),
    }


def _flat(x):
    return dj.func.pytree.tree_flatten(x)[0]


@fuzz_settings(3)
@given(grad_graphs())
def test_compiled_transforms_equal_eager_transforms(g):
    assume(not g.expect_error and g.outputs and all(s.shape and np.prod(s.shape) <= 6 for s in g.inputs))
    assume(_well_posed(g))
    loss = build_loss(g)
    k = len(g.inputs)
    xs = [x.detach() for x in fg.make_inputs(g)]
    broadcast = len({tuple(x.shape) for x in xs}) > 1
    src = fg.function_source(g)
    f = fg.build_function(src)
    try:
        _, own = _calls(dj.compile(f), xs)
    except Exception:      # noqa: BLE001
        assume(False)
    for name, fn in _transforms(loss, k).items():
        try:
            want = _flat(fn(*xs))
        except Exception:      # noqa: BLE001 - errors are the other fuzzers' business
            continue
        cf = dj.compile(fn)
        broken = False
        for call in range(2):
            got, broke = _calls(cf, xs)
            got = _flat(got)
            bad = [b for b in broke - own if not any(kb in b for kb in KNOWN_BREAKS)]
            assert not bad, f"{name}, call {call + 1}: {bad}\n{src}"
            broken = broken or bool(broke)
            assert len(got) == len(want), f"{name}: {len(got)} outputs, eager {len(want)}\n{src}"
            for j, (a, b) in enumerate(zip(got, want)):
                same = fc.same_result if any(g.reordered) or broadcast else fc.same_bits
                why = same(a.numpy(), b.numpy())
                assert why is None, f"{name}, call {call + 1}, output {j}: {why}\n{src}\n{cf.explain()}"
        assert broken or " 0 eager calls" in str(cf.explain()).splitlines()[0], f"{name}\n{src}\n{cf.explain()}"
