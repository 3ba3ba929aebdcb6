"""A causal attention's core in compiled mode (the GPT's: ``masked_fill(bias[..., :T, :T] == 0, -inf)``,
softmax, the products) runs as one compiled function, bit for bit eager mode's.

Its fused loop had an output smaller than the loop (the mask, which masked_fill's backward saves),
so the plan ran that region op by op at every call and never became one function; and the mask's
``== 0`` alone, with its runtime scalar, kept the plan interpreted too.  A lazy flush's graph now
carries its values' sizes (the mask gets a loop of its own: passes._smaller) and a lone elementwise
op reads its runtime scalar as a one-node loop's parameter (run/function.py)."""

import math

import numpy as np

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.compiler.lazy import mode
from dispatch_jit.compiler.lazy.state import state

B, H, T, D = 2, 2, 5, 4


def _leaves():
    rng = np.random.default_rng(3)
    q, k, v = (dj.tensor(rng.standard_normal((B, H, T, D)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    bias = dj.tensor(np.tril(np.ones((T + 2, T + 2), np.float32)).reshape(1, 1, T + 2, T + 2))
    return q, k, v, bias


def _attention(q, k, v, bias):
    att = dj.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    y = dj.matmul(F.softmax(att, dim=-1), v)
    return (y * y).sum()


def _run(compiled: bool):
    q, k, v, bias = _leaves()
    got = []
    for _ in range(4):         # the plan, its hits, then its compiled function
        for t in (q, k, v):
            t.grad = None
        if compiled:
            with mode("compiled"):
                loss = _attention(q, k, v, bias)
                loss.backward()
        else:
            loss = _attention(q, k, v, bias)
            loss.backward()
        got.append([loss.numpy().copy()] + [t.grad.numpy().copy() for t in (q, k, v)])
    return got


def test_a_masked_attention_runs_as_one_compiled_function_with_eager_bits():
    eager = _run(False)
    state.plans.clear()
    lazy = _run(True)
    for e, z in zip(eager, lazy):
        for a, b in zip(e, z):
            np.testing.assert_array_equal(a, b)
    mine = [p for p in state.plans.values() if any(n.name == "aten::softmax" for n in p.graph.nodes)]
    assert mine and all(p.function is not None and p.function.calls for p in mine), \
        [p.describe_function() for p in mine]
