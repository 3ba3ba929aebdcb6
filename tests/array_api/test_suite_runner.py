"""tests/array_api/suite.py, the official suite's runner: its summary parsing, its skip when the suite
is absent (CI on a clone without ../shared), and the xfails file's format."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("array_api_suite_runner", HERE / "suite.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def test_parse_summary():
    got = suite.parse_summary("....\n3 failed, 10 passed, 1 xfailed, 2 skipped in 2.00s\n")
    assert got == {"passed": 10, "failed": 3, "xfailed": 1, "xpassed": 0, "skipped": 2, "error": 0}
    assert suite.parse_summary("=== 1 error in 0.5s ===")["error"] == 1
    # no summary line at all: the process died, which counts as an error
    assert suite.parse_summary("Segmentation fault")["error"] == 1


def test_absent_suite_is_skipped_not_failed(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ARRAY_API_TESTS_DIR", str(tmp_path / "nowhere"))
    assert suite.main([]) == 0
    assert "SKIPPED" in capsys.readouterr().out


def test_every_xfail_has_a_reason_above_it():
    lines = (HERE / "xfails.txt").read_text().splitlines()
    ids = [i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#")]
    assert ids, "the xfails file lists no test"
    for i in ids:
        assert lines[i].startswith("array_api_tests/test_"), lines[i]
        # the nearest non-id line above is a comment (the group's reason), not a blank line
        j = i - 1
        while j >= 0 and lines[j].startswith("array_api_tests/"):
            j -= 1
        assert j >= 0 and lines[j].startswith("#"), f"no reason above {lines[i]}"


def test_plugin_counts_compiles_and_drops_the_explain_phase(tmp_path):
    (tmp_path / "test_one.py").write_text(
        "import numba\n"
        "from hypothesis import Phase, settings\n"
        "def test_one():\n"
        "    assert Phase.explain not in settings.default.phases and Phase.shrink in settings.default.phases\n"
        "    assert numba.njit(lambda x: x + 1)(1) == 2\n")
    env = dict(os.environ, PYTHONPATH=str(HERE))
    p = subprocess.run([sys.executable, "-m", "pytest", "test_one.py", "-q", "-p", "no:cacheprovider",
                        "-p", "suite_plugin"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert suite._COMPILES.findall(p.stdout) == ["numba 1, dispatch_jit {}"], p.stdout
