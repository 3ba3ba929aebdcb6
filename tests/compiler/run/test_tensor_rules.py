"""The plan function's rules for a transformer's tensor ops (compiler/run/tensor_rules.py):
embedding (index_select, scatter_add), 4-D matmul, softmax and its backward, cat, stack, layer
norm, views of several tensors and reshapes that copy.  Oracle: the same plans
run interpreted (each step through its eager kernel) and eager mode's gradients, bit for bit."""

import math

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from helpers import fused_grad

F = nn.functional
B, T, C, H, V = 2, 4, 8, 2, 11
RNG = np.random.default_rng(5)
IDX = dj.from_numpy(RNG.integers(0, V, (B, T)))
Y = dj.from_numpy(RNG.integers(0, V, (B * T,)))


class _Attention(nn.Module):
    """nanoGPT's block in small: an embedding, layer norm, causal attention of view/transpose/@/
    masked_fill/softmax, the heads merged, and a head over the tokens."""

    def __init__(self):
        super().__init__()
        dj.manual_seed(1)
        self.wte = nn.Embedding(V, C)
        self.ln = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.head = nn.Linear(C, V)
        self.register_buffer("mask", dj.tril(dj.ones(T, T)).view(1, 1, T, T))

    def forward(self, idx):
        x = self.wte(idx)
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
        att = F.softmax(att.masked_fill(self.mask == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.head(x + y)


def _loss(model, idx, y):
    return F.cross_entropy(model(idx).view(B * T, V), y)


def _trainer(compiled: bool):
    model = _Attention()
    opt = dj.optim.SGD(model.parameters(), lr=0.1)

    def step(idx, y):
        opt.zero_grad()
        loss = _loss(model, idx, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)     # a stack of the 0-d norms
        opt.step()
        return loss
    return model, (dj.compile(step) if compiled else step)


def test_an_attention_step_runs_as_one_function_with_eagers_bits():
    """The whole step (plain tracing aborts at the embedding's sizes): its plan becomes one
    compiled function after its first run, and three steps train eager mode's parameters."""
    (cm, cstep), (em, estep) = _trainer(True), _trainer(False)
    for _ in range(3):
        assert cstep(IDX, Y).item() == estep(IDX, Y).item()
    for p, q in zip(cm.parameters(), em.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    plan = cstep._last.plan
    assert plan.function is not None and plan.function.calls == 1, plan.describe_function()
    ops = {s.node.name for s in plan.steps if s.plan_kind == "eager"}
    for op in ("aten::index_select", "aten::scatter_add", "aten::matmul", "aten::softmax",
               "aten::_softmax_backward_data", "aten::cat", "aten::stack", "aten::_layer_norm",
               "aten::_layer_norm_backward"):
        assert op in ops, sorted(ops)


def test_an_index_out_of_range_raises_eager_modes_error():
    model, step = _trainer(True)
    step(IDX, Y)
    step(IDX, Y)
    before = [p.numpy().copy() for p in model.parameters()]
    bad = IDX.numpy().copy()
    bad[1, 2] = V
    with pytest.raises(Exception) as compiled:
        step(dj.from_numpy(bad), Y)
    with pytest.raises(type(compiled.value)) as eager:
        _loss(model, dj.from_numpy(bad), Y)
    # the interpreted plan raises index_select's error (eager mode names the embedding that called it)
    assert str(compiled.value).split(": ", 1)[1] == str(eager.value).split(": ", 1)[1]
    assert "index_select refused its input" in step._last.plan.function.declined_reason
    for a, p in zip(before, model.parameters()):      # nothing was written
        np.testing.assert_array_equal(a, p.numpy())


def test_a_matmul_broadcasting_a_batch_keeps_the_plan_interpreted_and_says_why():
    dj.manual_seed(0)
    w = nn.Parameter(dj.randn(3, 5, 4))
    x = dj.from_numpy(RNG.standard_normal((2, 3, 6, 5)).astype(np.float32))
    cf = dj.compile(lambda x: (x @ w).sum())
    for _ in range(2):
        cf(x).backward()
    reason = fused_grad(cf).forward.function_reason
    assert "matmul of batch shapes" in reason and "(2, 3)" in reason, reason
