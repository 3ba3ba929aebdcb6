"""``dispatch-jit tradeoff``: the measurement runs, the table reads right (spreads, one unit per column,
ratios that say what over what), and break-even is compile / (eager - compiled) only when compiled is
faster."""

import math

import pytest

from dispatch_jit.tools import cli
from dispatch_jit.tools import tradeoff
from dispatch_jit.tools.tradeoff import Row, format_row, format_table, measure
from dispatch_jit.tools.training import StepRow, format_training, format_vs_torch


def test_break_even_and_ratio_of_the_medians():
    fast = Row(4, 100, eager=(3e-6, 3e-6, 9e-6), compiled=(1e-6, 1e-6, 5e-6), lazy=(), compile_time=0.2)
    assert fast.break_even == pytest.approx(1e5) and fast.ratio == pytest.approx(1 / 3)
    slow = Row(4, 100, eager=(1e-6,) * 3, compiled=(3e-6,) * 3, lazy=(), compile_time=0.2)
    assert slow.break_even is None
    row = format_row(Row(1, 100, (1e-6,) * 3, (2e-6,) * 3, (5e-6,) * 3, 0.0))
    assert "never" in row and "2.00x, eager faster" in row
    row = format_row(fast)
    assert "100,000" in row and "0.33x, compiled faster" in row
    assert "3.00 / 3.00 / 9.00" in row                  # eager us, min / median / max


def test_measure_small():
    rows = measure(sizes=(100, 1000), chains=(1, 4), budget=0.003)
    assert [(r.length, r.size) for r in rows] == [(1, 100), (1, 1000), (4, 100), (4, 1000)]
    for r in rows:
        assert len(r.eager) == len(r.compiled) == len(r.lazy) == 5
        assert min(r.eager) > 0 and min(r.compiled) > 0 and min(r.lazy) > 0
    assert all(r.compile_time == 0 for r in rows if r.length == 1)     # one op: nothing is fused
    table = format_table(rows).splitlines()
    assert table[0].split()[:4] == ["chain", "size", "eager", "us"]
    assert "compiled / eager" in table[0] and "min / median / max" in table[1]
    assert len(table) == 6
    assert not any(" ms " in line or " s " in line for line in table[2:])   # one unit per column


def test_quick_measures_fewer_sizes_than_the_default(monkeypatch, capsys):
    monkeypatch.setattr(tradeoff, "QUICK_SIZES", (100,))
    monkeypatch.setattr(tradeoff, "SIZES", (100, 1000))
    monkeypatch.setattr(tradeoff, "CHAINS", (1,))
    for flags, sizes in ((["--quick"], ["1e+02"]), ([], ["1e+02", "1e+03"])):
        assert cli.main(["tradeoff", "--no-plot", "--no-lazy", "--no-training", *flags]) == 0
        out = capsys.readouterr().out
        assert out.startswith("measured ") and " UTC on " in out.splitlines()[0] and "numba " in out
        got = [line.split()[1] for line in out.splitlines() if line.startswith("    1 ")]
        assert got == sizes, out


def test_cli_tradeoff_writes_nothing_into_the_cwd(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(tradeoff, "SIZES", (100,))
    monkeypatch.setattr(tradeoff, "CHAINS", (1, 4))
    monkeypatch.chdir(tmp_path)
    out_dir = tmp_path / "plots"
    try:
        import matplotlib  # noqa: F401
        has_mpl = True
    except ImportError:
        has_mpl = False
    args = ["tradeoff", "--no-training"] + (["--out", str(out_dir)] if has_mpl else [])
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "break-even calls" in out
    if has_mpl:
        assert out.startswith(f"plots go to {out_dir}") and (out_dir / "tradeoff.png").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["plots"]
    else:
        assert "matplotlib is not installed" in out and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_training_section_runs_every_mode_and_they_train_the_same_model(monkeypatch, opt):
    from dispatch_jit.tools import training
    from dispatch_jit.tools.training import measure_training
    monkeypatch.setitem(training.SIZES, "tiny", training.SIZES["tiny"][:4] + (opt,))
    rows = measure_training("tiny", steps=3, torch=False)
    assert [r.mode for r in rows] == ["eager", "compile", "step", "lazy"]
    for r in rows:
        assert r.first > 0 and r.step > 0 and len(r.times) == 3
        assert r.check <= 1e-5, (r.mode, r.check)     # the modes must train the same parameters
        assert r.mode in format_training(r)
    assert rows[0].break_even == 0.0


def test_training_rows_say_what_over_what():
    eager = StepRow("eager", 1.5, 2e-3, 0.0, 2e-3, 3e-3, (1e-3, 2e-3, 9.5), True)
    step = StepRow("step", 0.5, 1e-3, 0.0, 2e-3, 4e-3, (1e-3,) * 3, True)
    torch = StepRow("torch eager", 0.1, 4e-3, 1e-7, 2e-3, 4e-3, (4e-3,) * 3)
    line = format_training(eager)
    assert "1,500" in line and "1.00 / 2.00 / 9,500" in line           # milliseconds only, never "s"
    assert "0.50x, faster" in format_training(step)
    t = format_training(torch).split()
    assert "2.00x, slower" in format_training(torch) and t[-3] == "-"     # torch: no break-even
    assert format_vs_torch([eager, step, torch]) == [
        "  dj eager / torch eager, median step: 0.50x, dj faster",
        "  dj step / torch eager, median step: 0.25x, dj faster"]
    assert format_vs_torch([eager, step]) == []
    assert math.isnan(StepRow("x", 1, 1, 0, 1).second)
    assert format_vs_torch([eager, StepRow("torch eager", 1, 0.5, 0, 2e-3)])[0].endswith("0.004x, dj faster")


def test_cli_tradeoff_training_only_section(monkeypatch, capsys):
    monkeypatch.setattr(tradeoff, "SIZES", (100,))
    monkeypatch.setattr(tradeoff, "CHAINS", (1,))
    from dispatch_jit.tools import training
    monkeypatch.setitem(training.SIZES, "wide", training.SIZES["tiny"][:4] + ("Adam",))
    assert cli.main(["tradeoff", "--no-plot", "--no-lazy", "--training-size", "wide"]) == 0
    out = capsys.readouterr().out
    assert "training step" in out and "break-even steps" in out and "lazy" in out and "dj.optim.Adam" in out
