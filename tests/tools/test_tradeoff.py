"""``dispatch-jit tradeoff``: the measurement runs, the table reads right, and
break-even is compile / (eager - compiled) only when compiled is faster."""

import math

import pytest

from dispatch_jit.tools import cli
from dispatch_jit.tools import tradeoff
from dispatch_jit.tools.tradeoff import Row, format_row, format_table, measure


def test_break_even():
    assert Row(4, 100, eager=3e-6, compiled=1e-6, lazy=0, compile_time=0.2).break_even == pytest.approx(1e5)
    assert Row(4, 100, eager=1e-6, compiled=3e-6, lazy=0, compile_time=0.2).break_even is None
    assert "never" in format_row(Row(1, 100, 1e-6, 2e-6, 5e-6, 0.0))
    assert "100,000" in format_row(Row(4, 100, 3e-6, 1e-6, 5e-6, 0.2))


def test_measure_small():
    rows = measure(sizes=(100, 1000), chains=(1, 4), budget=0.003)
    assert [(r.length, r.size) for r in rows] == [(1, 100), (1, 1000), (4, 100), (4, 1000)]
    for r in rows:
        assert r.eager > 0 and r.compiled > 0 and r.lazy > 0 and not math.isnan(r.lazy)
    assert all(r.compile_time == 0 for r in rows if r.length == 1)     # one op: nothing is fused
    table = format_table(rows)
    assert table.splitlines()[0].split()[:3] == ["chain", "size", "eager"]
    assert len(table.splitlines()) == 5


def test_cli_tradeoff(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(tradeoff, "QUICK_SIZES", (100,))
    monkeypatch.setattr(tradeoff, "CHAINS", (1, 4))
    plot = tmp_path / "t.png"
    assert cli.main(["tradeoff", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "break-even calls" in out
    try:
        import matplotlib  # noqa: F401
        assert plot.exists()
    except ImportError:
        assert "matplotlib is not installed" in out and not plot.exists()


@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_training_section_runs_every_mode_and_they_train_the_same_model(monkeypatch, opt):
    from dispatch_jit.tools import training
    from dispatch_jit.tools.training import format_training, measure_training
    monkeypatch.setitem(training.SIZES, "tiny", training.SIZES["tiny"][:4] + (opt,))
    rows = measure_training("tiny", steps=3, torch=False)
    assert [r.mode for r in rows] == ["eager", "compile", "step", "lazy"]
    for r in rows:
        assert r.first > 0 and r.step > 0
        assert r.check <= 1e-5, (r.mode, r.check)     # the modes must train the same parameters
        assert r.mode in format_training(r)
    assert rows[0].break_even == 0.0


def test_cli_tradeoff_training_only_section(monkeypatch, capsys):
    monkeypatch.setattr(tradeoff, "QUICK_SIZES", (100,))
    monkeypatch.setattr(tradeoff, "CHAINS", (1,))
    from dispatch_jit.tools import training
    monkeypatch.setitem(training.SIZES, "wide", training.SIZES["tiny"][:4] + ("Adam",))
    assert cli.main(["tradeoff", "--no-plot", "--no-lazy", "--training-size", "wide"]) == 0
    out = capsys.readouterr().out
    assert "training step" in out and "break-even steps" in out and "lazy" in out and "dj.optim.Adam" in out
