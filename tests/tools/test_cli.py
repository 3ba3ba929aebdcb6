"""The command line: its commands run, and every user error is one line naming what was wrong and what
to do, exit status 2, before any work starts (no usage dump, no traceback)."""

import subprocess
import sys

import pytest

from dispatch_jit.tools import cli, tradeoff
from dispatch_jit.tools.cli import main


def test_ops_lists_operators(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "aten::add.Tensor" in out and "CPU" in out and "operators" in out


def test_ops_dumps_one_operator(capsys):
    assert main(["ops", "aten::mul"]) == 0
    out = capsys.readouterr().out
    assert "schema: aten::mul.Tensor" in out and "Computed dispatch table" in out


def test_module_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "dispatch_jit", "ops", "aten::relu"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "aten::relu" in r.stdout


ERRORS = [
    (["ops", "aten::no_such_op"], "no operator named 'aten::no_such_op'"),
    (["ops", "--namespace", "nowhere"], "no operator is in namespace 'nowhere'"),
    (["nonsense"], "invalid choice: 'nonsense'"),
    ([], "required: {ops,demo,tradeoff,warmup}"),
    (["warmup", "no_such_op"], "no op named 'no_such_op' to warm up"),
    (["warmup", "add", "--dtype", "float99"], "--dtype float99: not a dtype"),
    (["tradeoff", "--quick", "--full"], "not allowed with argument --quick"),
    (["tradeoff", "--out", "/no/such/dir/plots"], "its parent directory /no/such/dir does not exist"),
    (["tradeoff", "--no-plot", "--out", "x"], "--out names where the plots go and --no-plot writes none"),
    (["tradeoff", "--no-training", "--gpt"], "--gpt configures the training section"),
    (["tradeoff", "--no-training", "--torch-compile"], "--torch-compile configures the training section"),
    (["tradeoff", "--no-training", "--training-size", "wide"], "--training-size configures"),
    (["tradeoff", "--training-size", "huge"], "invalid choice: 'huge'"),
    (["demo", "--fast"], "unrecognized arguments: --fast"),
]


@pytest.fixture
def no_work(monkeypatch):
    """Any measuring or warming up fails the test: errors come before the work."""
    def refuse(*a, **k):
        raise AssertionError("work started before the arguments were checked")
    monkeypatch.setattr(tradeoff, "measure", refuse)
    monkeypatch.setattr(tradeoff, "training_section", refuse)
    import dispatch_jit as dj
    monkeypatch.setattr(dj, "warmup", refuse)


def _one_line_exit_2(capsys, argv) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("dispatch-jit") and "Traceback" not in err and "--help)" in err
    return err


@pytest.mark.parametrize("argv, says", ERRORS, ids=[" ".join(a) or "nothing" for a, _ in ERRORS])
def test_user_errors_are_one_line_exit_2_before_any_work(capsys, no_work, argv, says):
    assert says in _one_line_exit_2(capsys, argv)


def test_out_that_is_a_file_is_refused(capsys, no_work, tmp_path):
    f = tmp_path / "plots.png"
    f.write_text("")
    assert "a file is there; name a directory" in _one_line_exit_2(capsys, ["tradeoff", "--out", str(f)])


def test_out_without_matplotlib_is_refused(capsys, no_work, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)        # import matplotlib raises ImportError
    err = _one_line_exit_2(capsys, ["tradeoff", "--out", str(tmp_path)])
    assert "need matplotlib" in err and "--no-plot" in err


def test_an_error_from_a_fresh_process_has_no_traceback():
    r = subprocess.run([sys.executable, "-m", "dispatch_jit", "tradeoff", "--quick", "--full"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr


def test_help_is_complete_and_plain(capsys):
    for argv in ([], ["ops"], ["demo"], ["tradeoff"], ["warmup"]):
        with pytest.raises(SystemExit) as e:
            main(argv + ["--help"])
        assert e.value.code == 0
        text = capsys.readouterr().out
        assert "``" not in text and "issue" not in text.lower(), text
    with pytest.raises(SystemExit):
        main(["tradeoff", "--help"])
    text = capsys.readouterr().out
    assert "--quick" in text and "1e2, 1e4 and 1e6" in text and "temporary directory" in text
    assert "Every user error" in cli.build_parser().format_help()       # the whole description, not a cut
