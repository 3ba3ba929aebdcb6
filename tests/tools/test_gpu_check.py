"""scripts/gpu_check.py, the parts that run without a GPU: its arguments, the exit without a GPU, the
test and benchmark runners on CPU stand-ins, and the summary of a canned result."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dispatch_jit as dj

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
_spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)


def _run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env=env)


@pytest.mark.parametrize("args, says", [
    (["--skip-tests", "--skip-bench"], "leaves nothing to check"),
    (["--marked-only", "--skip-tests"], "--marked-only"),
    (["--samples", "2"], "at least 3 samples"),
    (["--budget", "5"], "at least 60"),
    (["--samples", "many"], "invalid int value"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_usage_errors_are_one_line_and_exit_2(args, says):
    r = _run(*args)
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr


def test_outdir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(SystemExit) as e:
        gc.parse_args([str(f)])
    assert e.value.code == 2


def test_outdir_defaults_to_OUT(monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert gc.parse_args([]).outdir == str(tmp_path)
    assert gc.parse_args(["elsewhere"]).outdir == "elsewhere"
    monkeypatch.delenv("OUT")
    assert gc.parse_args([]).outdir is None


@pytest.mark.skipif(dj.cuda.is_available() and not dj.cuda.is_simulator(), reason="a real GPU is here: the check would run")
def test_without_a_gpu_it_exits_2_with_one_line(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")      # the simulator is not a GPU: the check turns it off
    r = _run(str(tmp_path / "out"), env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.splitlines()) == 1 and "no CUDA GPU" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()          # nothing is written before the check can run


def test_missing_modules_are_named():
    assert gc.missing_modules(gc.REQUIRED) == [] and gc.missing_modules(gc.TEST_NEEDS) == []
    assert gc.missing_modules(["numpy", "no_such_module_q", "no_such_pkg_q.sub"]) == \
        ["no_such_module_q", "no_such_pkg_q.sub"]


def test_cuda_test_files_are_found():
    marked = gc.gpu_marked_files()
    assert "tests/kernels/reduction/test_cuda_reduction.py" in marked
    assert "tests/tools/test_gpu_check.py" not in marked
    files = gc.cuda_test_files()
    assert "tests/cuda/test_tensor_cuda.py" in files
    assert "tests/kernels/elementwise/test_cuda_elementwise.py" in files
    assert all(Path(f).name.startswith("test_") for f in files)


def test_run_tests_counts_outcomes(tmp_path):
    t = tmp_path / "test_sample.py"
    t.write_text("import pytest\n"
                 "def test_ok(): pass\n"
                 "def test_bad(): assert False\n"
                 "@pytest.mark.skip(reason='x')\n"
                 "def test_skip(): pass\n"
                 "@pytest.mark.parametrize('i', [1, 2])\n"
                 "def test_p(i): pass\n")
    res = gc.run_tests("sample", [str(t)], tmp_path, timeout=120)
    assert res["counts"]["passed"] == 3 and res["counts"]["failed"] == 1 and res["counts"]["skipped"] == 1
    assert [f.split("::")[1] for f in res["failed"]] == ["test_bad"]
    assert res["returncode"] == 1 and not res["timed_out"] and (tmp_path / res["log"]).exists()


def test_count_results_of_a_run_cut_short():
    log = ("tests/a.py::test_x[float32] PASSED   [ 10%]\n"
           "tests/a.py::test_y ERROR   [ 20%]\n"
           "tests/b.py::test_z SKIPPED (needs a GPU)   [ 30%]\n")
    res = gc.count_results(log)
    assert res["counts"]["passed"] == 1 and res["counts"]["error"] == 1 and res["counts"]["skipped"] == 1
    assert res["failed"] == ["tests/a.py::test_y"]


BENCH = '''
import numpy as np

class Add:
    def setup(self):
        self.a = np.ones(64, np.float32)
        self.b = np.ones(64, np.float32)

    def time_add(self):
        np.add(self.a, self.b)

    def track_two(self):
        return 2.0
    track_two.unit = "widgets"

class NeedsGPU:
    def setup(self):
        raise NotImplementedError("needs a real CUDA GPU")

    def time_x(self):
        pass

class Broken:
    def time_y(self):
        raise RuntimeError("boom")
'''


def test_run_bench_file_compares_time_benchmarks_and_reports_tracks(tmp_path):
    path = tmp_path / "bench_cpu_sample.py"
    path.write_text(BENCH)
    libs = lambda: [("dj", None, lambda t: t, lambda: None), ("cupy", np, np.asarray, lambda: None)]  # noqa: E731
    eq = {"Add.time_add": lambda s, xp, v: (lambda: xp.add(v(s.a), v(s.b)))}
    recs = {(r["class"], r["name"]): r for r in gc.run_bench_file(str(path), 3, eq, libs)}
    add = recs[("Add", "time_add")]
    assert add["status"] == "ok" and len(add["seconds"]["dj"]) == len(add["seconds"]["cupy"]) == 3
    assert len(add["ratios"]["cupy"]) == 3 and all(r > 0 for r in add["ratios"]["cupy"])
    assert recs[("Add", "track_two")] == dict(file=path.stem, **{"class": "Add"}, name="track_two", status="ok",
                                              value=2.0, unit="widgets")
    assert recs[("NeedsGPU", "time_x")]["status"] == "skipped"
    assert recs[("Broken", "time_y")]["status"] == "error" and "boom" in recs[("Broken", "time_y")]["why"]


CANNED = {
    "gpu": "NVIDIA H100 80GB HBM3", "commit": "abc1234", "date": "2026-11-28 05:00 UTC", "seconds": 301.0,
    "tests": [
        {"name": "gpu-marked", "counts": dict(passed=3, failed=0, skipped=0, error=0, xfail=0, xpass=0),
         "failed": [], "seconds": 20.0, "returncode": 0, "timed_out": False, "log": "pytest_gpu-marked.log"},
        {"name": "CUDA files", "counts": dict(passed=90, failed=2, skipped=1, error=0, xfail=0, xpass=0),
         "failed": ["tests/cuda/a.py::test_b", "tests/cuda/a.py::test_c"], "seconds": 150.0, "returncode": 1,
         "timed_out": False, "log": "pytest_CUDA files.log"},
    ],
    "benchmarks": [
        {"file": "bench_cuda", "class": "TinyOp", "name": "time_add", "status": "ok",
         "seconds": {"dj": [5e-6, 6e-6, 7e-6], "cupy": [4e-6] * 3, "torch": [10e-6] * 3},
         "ratios": {"cupy": [1.25, 1.5, 1.75], "torch": [0.5, 0.6, 0.7]}},
        {"file": "bench_cuda", "class": "SumBandwidth", "name": "track_fraction_of_copy", "status": "ok",
         "value": 0.81234, "unit": "fraction"},
        {"file": "bench_cuda_linalg", "class": "MatmulCUDARatioCupy", "name": "track_add16_dj_over_cupy",
         "status": "skipped", "why": "cupy is not importable"},
    ],
}


def test_summary_of_a_canned_result():
    s = gc.format_summary(CANNED)
    assert s.splitlines()[0].startswith("dispatch_jit GPU check: NVIDIA H100 80GB HBM3, commit abc1234")
    assert "3 passed, 0 failed" in s and "90 passed, 2 failed" in s
    assert "FAILED tests/cuda/a.py::test_c" in s
    row = next(line for line in s.splitlines() if "TinyOp.time_add" in line)
    assert "0.005 / 0.006 / 0.007" in row                       # ms, min / median / max
    assert "1.25 / 1.50 / 1.75x, dj slower" in row and "0.50 / 0.60 / 0.70x, dj faster" in row
    assert "dj time (ms)" in s and "dj / cupy" in s and "dj / torch" in s
    assert "0.8123 fraction" in s
    assert "SKIPPED bench_cuda_linalg MatmulCUDARatioCupy.track_add16_dj_over_cupy: cupy is not importable" in s
    assert s.splitlines()[-1] == "verdict: FAIL"                # two tests failed
    ok = dict(CANNED, tests=CANNED["tests"][:1])
    assert gc.format_summary(ok).splitlines()[-1] == "verdict: PASS"
    cut = dict(CANNED, tests=[dict(CANNED["tests"][0], timed_out=True, returncode=None)])
    assert "CUT SHORT" in gc.format_summary(cut) and gc.verdict(cut) == "INCOMPLETE"
    no_pytest = dict(ok, tests=[dict(CANNED["tests"][0], not_run="pytest not importable by python")])
    assert "NOT RUN: pytest not importable" in gc.format_summary(no_pytest) and gc.verdict(no_pytest) == "INCOMPLETE"
    skipped = dict(ok, tests=[dict(CANNED["tests"][0], counts=dict(CANNED["tests"][0]["counts"], passed=0,
                                                                   skipped=3))])
    assert gc.verdict(skipped) == "INCOMPLETE"             # on a GPU, everything skipped checked nothing
    assert gc.verdict(dict(ok, benchmarks=CANNED["benchmarks"][2:])) == "INCOMPLETE"
    uncollected = dict(CANNED, tests=[dict(CANNED["tests"][0], returncode=2)])
    assert "pytest EXITED 2" in gc.format_summary(uncollected) and gc.verdict(uncollected) == "FAIL"
    late = dict(ok, benchmarks=CANNED["benchmarks"] + [
        {"file": "bench_cuda_linalg", "class": "-", "name": "-", "status": "cut", "why": "killed after 9 s"}])
    assert gc.verdict(late) == "INCOMPLETE" and "CUT bench_cuda_linalg" in gc.format_summary(late)
    broken = dict(ok, benchmarks=[dict(CANNED["benchmarks"][2], status="error", why="setup: boom")])
    assert gc.verdict(broken) == "FAIL" and gc.EXIT[gc.verdict(broken)] == 1
