"""The tutorial GPT (tools/gpt.py, tools/gpt_training.py): the same source on dispatch_jit
and on PyTorch, the modes of dispatch_jit training the same parameters bit for bit, and the
GPT section of ``dispatch-jit tradeoff``."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.tools import gpt_training as gt
from dispatch_jit.tools.gpt import build, corpus, decode, encode

STEPS = 3


def test_corpus_is_the_zen_of_python_and_encodes_both_ways():
    text = corpus()
    assert text.startswith("The Zen of Python, by Tim Peters") and "Namespaces are one honking great idea" in text
    assert corpus() == text
    ids, stoi, itos = encode(text)
    assert ids.dtype == np.int64 and len(ids) == len(text) and len(stoi) == len(set(text))
    assert decode(ids, itos) == text


def test_model_follows_the_config():
    g = build(dj)
    cfg = g.GPTConfig(vocab_size=10, block_size=8, n_layer=3, n_head=2, n_embd=8)
    model = g.GPT(cfg)
    assert len(model.h) == 3 and isinstance(model.h, dj.nn.ModuleList)
    names = list(model.state_dict())
    assert "h.2.attn.bias" in names and "h.0.mlp.c_fc.weight" in names   # the causal mask is a buffer
    assert "h.0.attn.bias" not in [n for n, _ in model.named_parameters()]
    logits, loss = model(dj.zeros((2, 5), dtype=dj.int64))
    assert logits.shape == (2, 5, 10) and loss is None
    # causal: a later token changes nothing before it
    a = model(dj.tensor([[1, 2, 3, 4]]))[0].numpy()
    b = model(dj.tensor([[1, 2, 3, 9]]))[0].numpy()
    np.testing.assert_array_equal(a[:, :3], b[:, :3])
    assert not np.array_equal(a[:, 3], b[:, 3])


class _Run:
    """One mode's training run, shared by the tests below: each mode's GPT plans are traced and
    compiled once per module (the whole step's plan function alone takes tens of seconds cold on a
    2-core machine).  ``at(n)`` trains on to ``n`` steps and returns what the run showed after its
    first ``STEPS`` steps and after ``n``: the losses, a copy of the parameters and, for a compiled
    mode, what its compiled function said then (explain(), why_eager, the plan function's calls),
    read before the run went on.  Training on from step ``STEPS`` is the same run a fresh model
    trained for ``n`` steps makes (the same initial weights, the same cycle of batches)."""

    def __init__(self, mode: str, s):
        self.mode = mode
        self.run, self.model, self.compiled = gt.dj_runner(mode, s)
        self.losses: list[float] = []
        self.seen: dict[int, SimpleNamespace] = {}
        self.warnings: list = []

    def _train_to(self, n: int) -> None:
        with warnings.catch_warnings(record=self.mode == "compile") as seen:
            if seen is not None:
                warnings.simplefilter("always")
            while len(self.losses) < n:
                self.losses.append(self.run().item())
        self.warnings += seen or []
        snap = SimpleNamespace(losses=list(self.losses),
                               params=[p.detach().numpy().copy() for p in self.model.parameters()])
        if self.compiled is not None:
            snap.why_eager = gt.why_eager(self.mode, self.compiled)
            snap.explain = str(self.compiled.explain())
            last = getattr(self.compiled, "_last", None)
            plan = last.plan if last is not None else None
            snap.has_function = plan is not None and plan.function is not None
            snap.function_calls = plan.function.calls if snap.has_function else None
            snap.describe = plan.describe_function() if plan is not None else ""
        self.seen[n] = snap

    def at(self, n: int = STEPS) -> SimpleNamespace:
        for k in sorted({STEPS, n}):
            if k not in self.seen:
                assert len(self.losses) <= k, f"{self.mode}: asked for step {k} after {len(self.losses)}"
                self._train_to(k)
        return self.seen[n]


@pytest.fixture(scope="module")
def tiny():
    return gt.setup("gpt-tiny")


@pytest.fixture(scope="module")
def runs(tiny):
    """mode -> its one shared ``_Run``, made on first use."""
    made: dict[str, _Run] = {}

    def get(mode: str) -> _Run:
        if mode not in made:
            made[mode] = _Run(mode, tiny)
        return made[mode]
    return get


@pytest.fixture(scope="module")
def eager_run(runs):
    return runs("eager").at(STEPS)


@pytest.mark.parametrize("mode", ["compile", "step", "lazy"])
def test_compiled_modes_train_eagers_parameters_bit_for_bit(runs, eager_run, mode):
    got = runs(mode).at(STEPS)
    assert got.losses == eager_run.losses
    assert got.losses[-1] < got.losses[0]
    for a, b in zip(got.params, eager_run.params):
        np.testing.assert_array_equal(a, b)


def test_the_whole_step_compiles_the_gpt(runs):
    """Under ``@dj.compile`` the whole step traces end to end (embedding's index_select and its
    scatter-add backward, contiguous() of a transposed view, clip_grad_norm_'s in-place scaling of
    a gradient made by a view, AdamW): after the first step, which makes AdamW's state, no call
    runs eagerly, no fused loop falls back, the plan is one compiled function after its first
    (interpreted) run, and explain()'s header counts what its body does."""
    got = runs("step").at(STEPS)
    assert got.why_eager == ""
    text = got.explain
    assert "whole step compiled" in text and "fused regions run eagerly" not in text, text
    # and the plan runs as one generated function: no op left to step-by-step interpretation
    assert got.has_function and got.function_calls == STEPS - 2, got.describe
    assert "one compiled function" in text
    header = text.splitlines()[0]
    assert "1 eager calls" in header and "whole training step: 2 step trace(s), 2 variant(s), 1 eager call(s)" in text


def test_compiled_forward_compiles_the_gpt(runs):
    """``dj.compile(model)``: the forward reads ``idx.size()``, so the function is keyed by its
    input sizes and traced with them (as torch.compile's static shapes): no graph break is told,
    no call runs eagerly, and explain() says why the key holds sizes."""
    run = runs("compile")
    got = run.at(STEPS)
    assert not [w for w in run.warnings if issubclass(w.category, dj.errors.CompileWarning)]
    assert got.why_eager == ""
    text = got.explain
    assert " 0 eager calls" in text.splitlines()[0] and "keyed by input sizes" in text, text


def test_parameters_after_100_steps_are_equal_across_eager_whole_step_and_lazy(runs):
    """Issue 26's check on the tiny config: 100 steps (25 passes over the batches) in eager mode,
    with the whole step under ``@dj.compile`` and in compiled (lazy) mode end with the same bits."""
    got = {m: runs(m).at(100) for m in ("eager", "step", "lazy")}
    for mode in ("step", "lazy"):
        assert len(got[mode].losses) == 100, mode
        assert got[mode].losses == got["eager"].losses, mode
        for a, b in zip(got[mode].params, got["eager"].params):
            np.testing.assert_array_equal(a, b, err_msg=mode)
    assert got["eager"].losses[-1] < got["eager"].losses[0]


def test_same_source_on_torch_gives_the_same_gradients_and_losses(tiny, eager_run):
    """From dj's initial weights, torch running the same source computes the same loss and
    gradients (float32 rounding apart), and trains along the same loss trajectory.  (AdamW's
    first steps move each weight by about lr whatever its gradient's size, so the parameters are
    compared within a few lr: a gradient near zero may round to either sign.)"""
    torch = pytest.importorskip("torch")
    g = {lib: build(lib) for lib in (dj, torch)}
    grads = {}
    for lib in (dj, torch):
        model = g[lib].GPT(tiny.cfg)
        model.load_state_dict({k: lib.tensor(v) for k, v in tiny.init.items()})
        x, y = (lib.tensor(a) for a in tiny.batches[0])
        _, loss = model(x, y)
        loss.backward()
        grads[lib] = (loss.item(), {n: p.grad.numpy() for n, p in model.named_parameters()})
    assert grads[dj][0] == pytest.approx(grads[torch][0], rel=1e-6)
    assert list(grads[dj][1]) == list(grads[torch][1])
    for name, ours in grads[dj][1].items():
        np.testing.assert_allclose(ours, grads[torch][1][name], rtol=1e-4, atol=1e-6, err_msg=name)

    run, model = gt.torch_runner(False, tiny)
    losses = [run().item() for _ in range(STEPS)]
    np.testing.assert_allclose(losses, eager_run.losses, rtol=2e-5)
    for (name, p), ours in zip(model.named_parameters(), eager_run.params):
        np.testing.assert_allclose(p.detach().numpy(), ours, atol=3e-3, err_msg=name)


def test_tradeoff_gpt_section(monkeypatch, capsys):
    from dispatch_jit.tools import gpt, training
    from dispatch_jit.tools.tradeoff import training_section
    monkeypatch.setitem(gpt.SIZES, "gpt", gpt.SIZES["gpt-tiny"])
    rows = training_section("gpt", steps=2, torch_compile=False)
    out = capsys.readouterr().out
    assert "character-level GPT" in out and "per step ms: min / median / max" in out
    assert [r.mode for r in rows][:4] == ["eager", "compile", "step", "lazy"]
    for r in rows[:4]:
        assert r.bitwise is True and r.check == 0.0 and len(r.times) == 2
        assert r.fastest <= r.step <= r.slowest
        assert r.mode in training.format_training(r)
    # no compiled mode breaks on the GPT (the forward reads idx.size(): keyed by sizes), so the
    # section lists no graph breaks
    assert "graph breaks" not in out, out


def test_cli_tradeoff_gpt_flag_adds_the_gpt_section(monkeypatch, capsys):
    from dispatch_jit.tools import cli, gpt, tradeoff
    monkeypatch.setattr(tradeoff, "SIZES", (100,))
    monkeypatch.setattr(tradeoff, "CHAINS", (1,))
    monkeypatch.setitem(gpt.SIZES, "gpt", gpt.SIZES["gpt-tiny"])
    monkeypatch.setattr(tradeoff, "training_section",
                        lambda size, steps, *a: print(f"section {size} {steps}") or [])
    assert cli.main(["tradeoff", "--no-plot", "--no-lazy", "--gpt"]) == 0
    assert cli.main(["tradeoff", "--no-plot", "--no-lazy", "--training-size", "gpt"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln for ln in out if ln.startswith("section")] == ["section mlp 50", "section gpt 50", "section gpt 50"]
