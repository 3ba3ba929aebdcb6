"""What a transformer's step needs of ``dj.compile`` (issue 26, part 4), op by op, against eager
mode bit for bit: index reads and their scatter-add backward traced through their meta functions,
``contiguous()`` of a view in a whole step, a gradient made by a view scaled in place by
``clip_grad_norm_``, fused loops that never fall back (a clipping coefficient shared by every
parameter's update, a layer norm's saved statistics smaller than its loop), and graph breaks told
once per function and line with ``explain()``'s counts agreeing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.errors import CompileWarning

F = nn.functional
RNG = np.random.default_rng(26)


def _f32(*shape):
    return dj.tensor(RNG.standard_normal(shape).astype(np.float32))


def test_index_reads_trace_through_their_meta_functions():
    """index_select, gather and scatter_add read their indices to check them: a trace used to run
    them on the placeholders' garbage and abort.  Their Meta kernels type them without data; the
    plan runs the eager kernels, so results, gradients (index_select's backward is a scatter_add)
    and the bounds check are eager mode's."""
    w = _f32(6, 4).requires_grad_()
    idx = dj.tensor([3, 0, 3, 5])
    f = dj.compile(lambda w, i: (w.index_select(0, i) * 2.0).sum())
    for _ in range(2):
        w.grad = None
        f(w, idx).backward()
    got = w.grad.numpy().copy()
    w.grad = None
    (w.index_select(0, idx) * 2.0).sum().backward()
    np.testing.assert_array_equal(got, w.grad.numpy())
    assert f.cache_info().eager_calls == 0, f.explain()

    x, i2 = _f32(3, 5), dj.tensor([[0, 4], [1, 1], [2, 3]])
    g = dj.compile(lambda x, i: dj.gather(x, 1, i) * 3.0 + 1.0)
    h = dj.compile(lambda x, i, s: dj.scatter_add(x, 1, i, s) * 0.5)
    s = _f32(3, 2)
    for _ in range(2):
        np.testing.assert_array_equal(g(x, i2).numpy(), (dj.gather(x, 1, i2) * 3.0 + 1.0).numpy())
        np.testing.assert_array_equal(h(x, i2, s).numpy(), (dj.scatter_add(x, 1, i2, s) * 0.5).numpy())
    assert g.cache_info().eager_calls == 0 and h.cache_info().eager_calls == 0, (g.explain(), h.explain())
    with pytest.raises(IndexError, match="index_select: index out of range in self: index 6 is out of bounds"):
        f(w, dj.tensor([1, 6]))
    with pytest.raises(dj.errors.DTypeError, match="integer"), warnings.catch_warnings():
        warnings.simplefilter("ignore", CompileWarning)       # the trace stops there; eager raises
        dj.compile(lambda x, i: dj.gather(x, 1, i) * 2.0)(x, i2.to(dj.float32))


class _Attn(nn.Module):
    """A transformer's shapes in miniature: an embedding, a head split by view/transpose, a
    causal mask, contiguous() of a transposed view and of a contiguous one, a weight used through
    ``.t()`` (its gradient is a transposed view), a layer norm, gelu."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.qk = nn.Linear(8, 8)
        self.w = nn.Parameter(dj.randn(5, 8) * 0.3)
        self.ln = nn.LayerNorm(8)
        self.register_buffer("mask", dj.tril(dj.ones(4, 4)).view(1, 1, 4, 4))

    def forward(self, x):
        B, T = x.size()
        h = self.emb(x)
        q = self.qk(h).view(B, T, 2, 4).transpose(1, 2)                  # (B, 2, T, 4)
        att = (q @ q.transpose(-2, -1)) * 0.5
        att = F.softmax(att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = (att @ q).transpose(1, 2).contiguous().view(B, T, 8)        # a copy: not contiguous
        y = y.view(B * T, 8).contiguous()                                # contiguous: itself
        return F.gelu(self.ln(y + h.view(B * T, 8))) @ self.w.t()


def _step(model, opt):
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss
    return step


def test_a_transformer_step_compiles_whole_and_equals_eager():
    models = []
    for _ in range(2):
        dj.manual_seed(3)
        m = _Attn()
        models.append((m, dj.optim.AdamW(m.parameters(), lr=1e-2)))
    eager = _step(*models[0])
    compiled = dj.compile(_step(*models[1]))
    batches = [(dj.tensor(RNG.integers(0, 10, (3, 4))), dj.tensor(RNG.integers(0, 5, (3, 4)))) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)       # the first step's eager run is by design
        for x, y in batches:
            assert eager(x, y).item() == compiled(x, y).item()
    for p, q in zip(models[0][0].parameters(), models[1][0].parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    text = str(compiled.explain())
    assert "whole step compiled (3 runs)" in text, text
    assert "fused regions run eagerly" not in text, text     # no loop falls back to its ops
    assert text.splitlines()[0].endswith("1 eager calls, 1 signatures"), text


def test_a_graph_break_is_told_once_per_function_and_line():
    def body(x, which):
        y = x * 2.0
        if which:
            return y + float(y.sum())          # reads data: a break here
        return y + int(y.sum())                # reads data: a break there
    f = dj.compile(body)
    x = _f32(3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            for which in (True, False):
                np.testing.assert_array_equal(f(x, which).numpy(), body(x, which).numpy())
    told = [w for w in seen if issubclass(w.category, CompileWarning)]
    assert len(told) == 2, [str(w.message) for w in told]
    lines = {w.lineno for w in told}
    assert all(w.filename == __file__ for w in told) and len(lines) == 2
    assert "float() of a traced tensor" in str(told[0].message) and "float(y.sum())" in str(told[0].message)
    assert "int() of a traced tensor" in str(told[1].message) and "int(y.sum())" in str(told[1].message)
    assert str(told[0].message).startswith("body: graph break")
    header = str(f.explain()).splitlines()[0]
    assert "6 calls" in header and "6 eager calls" in header, header


def test_a_whole_step_break_is_told_and_counted_alike():
    dj.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = dj.optim.SGD(m.parameters(), lr=0.1)
    x = _f32(4, 3)

    @dj.compile
    def step(x):
        opt.zero_grad(set_to_none=True)
        loss = m(x).sum()
        loss.backward()
        if m.weight.grad.sum().item() > 1e9:     # a data read inside the step: a break
            return loss
        opt.step()
        return loss
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            step(x)
    told = [w for w in seen if issubclass(w.category, CompileWarning)]
    assert len(told) == 1 and "Tensor.item() reads data" in str(told[0].message), [str(w.message) for w in told]
    assert told[0].filename == __file__ and ".item() > 1e9" in str(told[0].message)
    text = str(step.explain())
    assert "3 eager call(s)" in text and text.splitlines()[0].endswith("3 eager calls, 1 signatures"), text
