"""Run the Python array API standard's official test suite (data-apis/array-api-tests).

Each test file of the suite runs in its own pytest process (a crash or a hang in one file
cannot hide the others' results), against ``ARRAY_API_TESTS_MODULE`` (by default
``dispatch_jit.array_api``), with a small hypothesis budget and no deadline (the first call
of every op x dtype compiles a Numba kernel; the disk cache, ``DISPATCH_JIT_CACHE_DIR``, keeps it
for the next run).  suite_plugin.py, loaded into each process, drops hypothesis's explain phase
and prints the file's compile count.  Known failures are listed, each with its reason, in
``tests/array_api/xfails.txt``; the run fails only on a failure not listed there.

The suite is not vendored: it is looked up at ``../shared/array-api-tests`` from the
repository root (or ``$ARRAY_API_TESTS_DIR``).  Where it is absent the run says so and
succeeds, so a clone without it still passes CI.

    python tests/array_api/suite.py                       # every file, dispatch_jit.array_api
    python tests/array_api/suite.py --module numpy        # the same files and settings, NumPy
    python tests/array_api/suite.py test_sorting_functions.py --max-examples 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
XFAILS = HERE / "xfails.txt"
VERSION = "2025.12"
_COMPILES = re.compile(r"^compiles: (.*)$", re.M)
_COUNT = re.compile(r"(\d+) (passed|failed|xfailed|xpassed|skipped|errors?|deselected)")
KINDS = ("passed", "failed", "xfailed", "xpassed", "skipped", "error")


def suite_dir() -> Path:
    return Path(os.environ.get("ARRAY_API_TESTS_DIR", REPO.parent / "shared" / "array-api-tests"))


def parse_summary(text: str) -> dict[str, int]:
    """Counts from pytest's closing summary line (``3 failed, 10 passed, 1 xfailed in 2.0s``)."""
    counts = dict.fromkeys(KINDS, 0)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        found = _COUNT.findall(line)
        if found and (" in " in line or "no tests ran" in line):
            for n, kind in found:
                counts["error" if kind.startswith("error") else kind if kind in counts else "skipped"] += int(n)
            return counts
    counts["error"] = 1       # no summary: the process died (collection crash, timeout)
    return counts


def run_file(suite: Path, name: str, module: str, max_examples: int, xfails: Path | None,
             timeout: float, extra: list[str]) -> tuple[dict[str, int], float, str]:
    path = os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = dict(os.environ, ARRAY_API_TESTS_MODULE=module, ARRAY_API_TESTS_VERSION=VERSION, PYTHONPATH=path)
    cmd = [sys.executable, "-m", "pytest", str(suite / "array_api_tests" / name), "-q", "-p", "no:cacheprovider",
           f"--max-examples={max_examples}", "--disable-deadline", "-rf", "--tb=line", "-p", "suite_plugin", *extra]
    if xfails is not None:
        cmd.append(f"--xfails-file={xfails}")
    t0 = time.perf_counter()
    # a scratch working directory: hypothesis writes its example database there, not into the suite
    with tempfile.TemporaryDirectory() as cwd:
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
            out = p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            out += f"\nTIMEOUT after {timeout:.0f} s"
    return parse_summary(out), time.perf_counter() - t0, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="test files of the suite (default: every test_*.py)")
    ap.add_argument("--module", default="dispatch_jit.array_api")
    ap.add_argument("--max-examples", type=int, default=20)
    ap.add_argument("--xfails", default=None, help="xfails file (default: ours for dispatch_jit, none otherwise)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per file")
    ap.add_argument("--json", help="write the per-file counts here")
    ap.add_argument("--log-dir", help="keep each file's pytest output here")
    ap.add_argument("--pytest-args", default="", help="more arguments for pytest, one string")
    args = ap.parse_args(argv)
    suite = suite_dir()
    if not (suite / "array_api_tests").is_dir():
        print(f"array API suite SKIPPED: not found at {suite} (set ARRAY_API_TESTS_DIR to run it)")
        return 0
    files = args.files or sorted(p.name for p in (suite / "array_api_tests").glob("test_*.py"))
    xfails = Path(args.xfails) if args.xfails else (XFAILS if args.module.startswith("dispatch_jit") else None)
    print(f"array API suite at {suite}: module {args.module}, --max-examples={args.max_examples}, "
          f"xfails {xfails or 'none'}")
    total, rows = dict.fromkeys(KINDS, 0), {}
    for name in files:
        counts, secs, out = run_file(suite, name, args.module, args.max_examples, xfails, args.timeout,
                                     args.pytest_args.split())
        rows[name] = dict(counts, seconds=round(secs, 1))
        for k in KINDS:
            total[k] += counts[k]
        print(f"{name:48s} " + " ".join(f"{k} {counts[k]:4d}" for k in KINDS) + f"  {secs:7.1f} s", flush=True)
        # suite_plugin.py's count: a warm run (same cache directory, same examples) compiles nothing
        found = _COMPILES.findall(out)
        rows[name]["compiles"] = found[-1] if found else None
        print(f"    compiles: {found[-1] if found else 'no count (the process died?)'}", flush=True)
        if args.log_dir:
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            Path(args.log_dir, name + ".log").write_text(out)
        if counts["failed"] or counts["error"]:
            for line in out.splitlines():
                if line.startswith(("FAILED", "ERROR")):
                    print("    " + line[:300])
    print(f"{'TOTAL':48s} " + " ".join(f"{k} {total[k]:4d}" for k in KINDS))
    if args.json:
        Path(args.json).write_text(json.dumps({"module": args.module, "max_examples": args.max_examples,
                                               "files": rows, "total": total}, indent=1))
    return 1 if total["failed"] or total["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
