import subprocess
import sys

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
