#!/usr/bin/env python3
"""The GPU check: everything that needs a real CUDA GPU, in one command.

    python scripts/gpu_check.py [OUTDIR]

From a checkout of the repository, on a machine with an NVIDIA GPU (Numba's
simulator is switched off: ``NUMBA_ENABLE_CUDASIM`` is removed from the
environment), it runs

1. the tests marked ``gpu`` (``pytest -m gpu``), then every test in the CUDA
   test files (``tests/cuda/``, ``tests/**/test_cuda*.py``: the suite runs
   them on the simulator elsewhere), each phase under a time limit;
2. the CUDA benchmarks (``benchmarks/bench_cuda*.py``) once each, directly
   (not through asv), one child process per file: every ``time_`` benchmark
   interleaved sample by sample with the same computation in CuPy and in
   PyTorch where they are installed, and every ``track_`` value once;

prints a short summary (test counts; each benchmark's dj time and the ratios
dj / cupy and dj / torch, min / median / max over the samples) and writes it,
with the raw results as JSON and the pytest logs, to OUTDIR (default: ``$OUT``
when set, else a new temporary directory, announced).  It needs only numpy,
numba and numba-cuda (and, for the tests, pytest and hypothesis: without them
the tests are reported as not run and the benchmarks still run); CuPy and
torch are compared against where importable.  No network, no pip.

Exit status: 0 when everything passed, 1 when a test or a benchmark failed,
2 on a usage error or when there is no GPU (one line saying so), 3 when
nothing failed but the time budget (``--budget``) cut a phase short.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = "gpu_check.txt"
RAW = "gpu_check.json"
REQUIRED = ("numpy", "numba", "numba.cuda")
TEST_NEEDS = ("pytest", "hypothesis")      # without them the tests are reported as not run
OPTIONAL = ("cupy", "torch")
# classes that time another library on its own: their track_ values are reported, their time_ ones not
# (the interleaved comparison of the dj benchmark already times the same call)
REFERENCE_CLASSES = {"MatmulCUDATorch", "MatmulCUDACupy"}


def _f(a, b, c, xp):
    return xp.maximum((a * b + c) * 2.0 - a, 0.0) * xp.exp(-b)


# "Class.time_method" -> {library: (instance, library module) -> the same computation in that library,
# on the benchmark's own arrays (shared through __cuda_array_interface__, no copy)}
EQUIVALENTS = {
    "ElementwiseBandwidth.time_fma": lambda s, xp, v: (lambda: v(s.a) * v(s.b) + v(s.c)),
    "SumBandwidth.time_sum": lambda s, xp, v: (lambda: v(s.a).sum()),
    "TinyOp.time_add": lambda s, xp, v: (lambda: xp.add(v(s.a), v(s.b))),
    "CompiledBandwidth.time_compiled": lambda s, xp, v: (lambda: _f(v(s.a), v(s.b), v(s.c), xp)),
    "MatmulCUDA.time_matmul_4096_float32": lambda s, xp, v: (lambda: xp.matmul(v(s.a), v(s.b))),
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (what was wrong, what to do), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = _Parser(
        prog="gpu_check.py",
        description="Run the gpu-marked tests, the CUDA test files and the CUDA benchmarks on a real GPU, and "
                    "write a summary (gpu_check.txt) with the raw results (gpu_check.json) to OUTDIR.")
    p.add_argument("outdir", nargs="?", metavar="OUTDIR",
                   help="directory for the summary and logs (default: $OUT when set, else a new temporary "
                        "directory, printed at the start)")
    p.add_argument("--skip-tests", action="store_true", help="run the benchmarks only")
    p.add_argument("--skip-bench", action="store_true", help="run the tests only")
    p.add_argument("--marked-only", action="store_true",
                   help="of the tests, run only the gpu-marked ones, not the CUDA test files")
    p.add_argument("--samples", type=int, default=7, metavar="N",
                   help="timing samples per benchmark and library, at least 3 (default: 7)")
    p.add_argument("--budget", type=float, default=450, metavar="SECONDS",
                   help="time for the whole check, shared out between the phases (default: 450)")
    p.add_argument("--child", nargs=2, metavar=("BENCH_FILE", "JSON"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return args
    if args.skip_tests and args.skip_bench:
        p.error("--skip-tests together with --skip-bench leaves nothing to check: drop one of them")
    if args.marked_only and args.skip_tests:
        p.error("--marked-only chooses which tests run, and --skip-tests runs none: drop one of them")
    if args.samples < 3:
        p.error(f"--samples {args.samples}: a spread needs at least 3 samples, e.g. --samples 7")
    if args.budget < 60:
        p.error(f"--budget {args.budget:g}: under 60 s nothing finishes; give at least 60")
    out = args.outdir or os.environ.get("OUT")
    if out and os.path.exists(out) and not os.path.isdir(out):
        p.error(f"{out} is a file, not a directory: name a directory for the summary")
    args.outdir = out
    return args


def missing_modules(names=REQUIRED) -> list[str]:
    gone = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                gone.append(name)
        except ModuleNotFoundError:
            gone.append(name)
    return gone


def child_env() -> dict:
    """The environment of every child: a real GPU (no simulator), this checkout first on the path."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["DISPATCH_JIT_TEST_REAL_GPU"] = "1"       # tests/conftest.py: never fall back to the simulator
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def find_gpu() -> str | None:
    """The GPU's name, or None; asked in a child (this process may have imported numba.cuda already)."""
    code = ("from numba import cuda\n"
            "print(cuda.get_current_device().name.decode() if cuda.is_available() else '')")
    try:
        r = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        return None
    name = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    return name or None


_RESULT = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b")


def count_results(log: str) -> dict:
    """Outcome counts and the failed test ids, from pytest's ``-v`` lines (a run cut short counts too)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0, "xfail": 0, "xpass": 0}
    failed = []
    for line in log.splitlines():
        m = _RESULT.match(line)
        if m:
            counts[m.group(2).lower()] += 1
            if m.group(2) in ("FAILED", "ERROR"):
                failed.append(m.group(1))
    return {"counts": counts, "failed": failed}


def run_tests(name: str, pytest_args: list[str], outdir: Path, timeout: float) -> dict:
    log_path = outdir / f"pytest_{name}.log"
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-o", "addopts=", *pytest_args]
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            r = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=log, stderr=subprocess.STDOUT,
                               timeout=timeout)
            rc, timed_out = r.returncode, False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
    res = count_results(log_path.read_text(errors="replace"))
    res.update(name=name, seconds=time.perf_counter() - t0, returncode=rc, timed_out=timed_out,
               log=log_path.name)
    return res


def gpu_marked_files() -> list[str]:
    """Test files that mark tests ``gpu``: collecting only these keeps the whole suite's collection
    (half a minute) out of the check."""
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                  if "mark.gpu" in p.read_text(errors="replace"))


def cuda_test_files() -> list[str]:
    files = sorted({p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_cuda*.py")}
                   | {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "cuda").glob("test_*.py")})
    return files


# ---- the benchmarks (in a child process per file) ---------------------------------------------------

def _libraries():
    """(name, module, to-library, synchronize) for dj and each other library importable here."""
    import dispatch_jit as dj
    libs = [("dj", dj, lambda t: t, dj.cuda.synchronize)]
    try:
        import cupy
        libs.append(("cupy", cupy, cupy.asarray, lambda: cupy.cuda.Device().synchronize()))
    except Exception:       # noqa: BLE001 - any import failure means "not compared against"
        pass
    try:
        import torch
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False    # true float32 products, as dj's
            libs.append(("torch", torch, lambda t: torch.as_tensor(t, device="cuda"), torch.cuda.synchronize))
    except Exception:       # noqa: BLE001
        pass
    return libs


def interleave(calls: dict, sync, samples: int, sample_seconds: float = 0.02) -> dict:
    """Seconds per call of each callable, ``samples`` samples each, taken in turn (the order rotating),
    each sample a batch of calls then ``sync()``; ratios are dj's sample over the other's, sample by sample."""
    number = {}
    for name, call in calls.items():
        call()
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        number[name] = max(1, min(1000, int(sample_seconds / max(time.perf_counter() - t0, 1e-7))))
    names = list(calls)
    times = {name: [] for name in names}
    for k in range(samples):
        for name in names[k % len(names):] + names[:k % len(names)]:
            call, n = calls[name], number[name]
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            sync()
            times[name].append((time.perf_counter() - t0) / n)
    out = {"seconds": times}
    if "dj" in times:
        out["ratios"] = {name: [d / o for d, o in zip(times["dj"], times[name])] for name in names if name != "dj"}
    return out


def run_bench_file(path: str, samples: int, equivalents=EQUIVALENTS, libraries=None) -> list[dict]:
    """One record per benchmark of the file: time_ ones compared across libraries, track_ ones once."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    libs = libraries() if libraries else _libraries()

    def sync():
        for _, _, _, s in libs:
            s()
    records = []
    classes = [c for n, c in vars(mod).items() if isinstance(c, type) and not n.startswith("_")
               and c.__module__ == mod.__name__ and any(a.startswith(("time_", "track_")) for a in dir(c))]
    for cls in classes:
        methods = sorted(a for a in dir(cls) if a.startswith(("time_", "track_")))
        if cls.__name__ in REFERENCE_CLASSES:
            methods = [m for m in methods if m.startswith("track_")]
        base = {"file": Path(path).stem, "class": cls.__name__}
        inst = cls()
        try:
            if hasattr(inst, "setup"):
                inst.setup()
        except NotImplementedError as e:
            records += [dict(base, name=m, status="skipped", why=str(e)) for m in methods]
            continue
        except Exception as e:     # noqa: BLE001 - reported, and the next class runs
            records += [dict(base, name=m, status="error", why=f"setup: {type(e).__name__}: {e}") for m in methods]
            continue
        for m in methods:
            rec = dict(base, name=m)
            try:
                if m.startswith("track_"):
                    fn = getattr(inst, m)
                    rec.update(status="ok", value=float(fn()),
                               unit=getattr(fn, "unit", None) or getattr(cls, "unit", ""))
                else:
                    calls = {"dj": getattr(inst, m)}
                    make = equivalents.get(f"{cls.__name__}.{m}")
                    for name, module, convert, _ in libs[1:]:
                        if make is not None:
                            calls[name] = make(inst, module, convert)
                    rec.update(status="ok", **interleave(calls, sync, samples))
            except NotImplementedError as e:
                rec.update(status="skipped", why=str(e))
            except Exception as e:     # noqa: BLE001
                rec.update(status="error", why=f"{type(e).__name__}: {e}")
            records.append(rec)
        if hasattr(inst, "teardown"):
            inst.teardown()
    return records


def run_benchmarks(outdir: Path, samples: int, timeout: float) -> list[dict]:
    files = sorted((ROOT / "benchmarks").glob("bench_cuda*.py"))
    records = []
    deadline = time.perf_counter() + timeout
    for path in files:
        left = deadline - time.perf_counter()
        if left < 10:
            records.append({"file": path.stem, "class": "-", "name": "-", "status": "cut",
                            "why": "not run: the check's time budget was spent"})
            continue
        out = outdir / f"bench_{path.stem}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--samples", str(samples), "--child", str(path),
               str(out)]
        log = outdir / "bench.log"
        with open(log, "a") as f:
            try:
                r = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                   timeout=left)
                why = None if r.returncode == 0 else f"exited {r.returncode} (see bench.log)"
                status = "error"
            except subprocess.TimeoutExpired:
                why = f"killed after {left:.0f} s (the check's time budget)"
                status = "cut"
        if out.exists():
            records += json.loads(out.read_text())
            out.unlink()
        if why:
            records.append({"file": path.stem, "class": "-", "name": "-", "status": status, "why": why})
    return records


# ---- the summary ----------------------------------------------------------------------------------

def _spread(values, scale=1.0, fmt="{:.4g}") -> str:
    if not values:
        return "-"
    v = sorted(x * scale for x in values)
    return " / ".join(fmt.format(x) for x in (v[0], v[len(v) // 2], v[-1]))


def _ratio(values) -> str:
    if not values:
        return "-"
    med = sorted(values)[len(values) // 2]
    verdict = "dj faster" if med < 1 else "dj slower" if med > 1 else "even"
    return f"{_spread(values, fmt='{:.2f}')}x, {verdict}"


def format_summary(result: dict) -> str:
    """The report of one check (``result`` as written to gpu_check.json)."""
    lines = [f"dispatch_jit GPU check: {result['gpu']}, commit {result['commit']}, {result['date']} "
             f"({result['seconds']:.0f} s)", ""]
    if result.get("tests"):
        lines.append("tests (on the real GPU)")
        for t in result["tests"]:
            if t.get("not_run"):
                lines.append(f"  NOT RUN: {t['not_run']}")
                continue
            c = t["counts"]
            state = " CUT SHORT by the time budget" if t["timed_out"] else \
                "" if t["returncode"] in (0, 5) else f" pytest EXITED {t['returncode']} (collection error?)"
            lines.append(f"  {t['name']:<12} {c['passed']} passed, {c['failed']} failed, {c['error']} errors, "
                         f"{c['skipped']} skipped, {c['xfail']} xfailed in {t['seconds']:.0f} s{state} "
                         f"(log: {t['log']})")
            lines += [f"    FAILED {f}" for f in t["failed"][:10]]
            if len(t["failed"]) > 10:
                lines.append(f"    ... and {len(t['failed']) - 10} more in {t['log']}")
        lines.append("")
    bench = result.get("benchmarks")
    if bench is not None:
        timed = [r for r in bench if r["status"] == "ok" and "seconds" in r]
        if timed:
            n = len(timed[0]["seconds"]["dj"])
            lines.append(f"benchmarks: per call, min / median / max of {n} samples, the libraries taking turns; "
                         "ratio = dj time / other time, sample by sample (below 1: dj faster)")
            lines.append(f"  {'benchmark':<44} {'dj time (ms)':>26}  {'dj / cupy':>30}  {'dj / torch':>30}")
        else:
            lines.append("benchmarks: none timed")
        for r in timed:
            ratios = r.get("ratios", {})
            lines.append(f"  {r['class'] + '.' + r['name']:<44} {_spread(r['seconds']['dj'], 1e3):>26}  "
                         f"{_ratio(ratios.get('cupy')):>30}  {_ratio(ratios.get('torch')):>30}")
        tracks = [r for r in bench if r["status"] == "ok" and "value" in r]
        if tracks:
            lines.append("")
            lines.append("targets (track_ benchmarks, one run each)")
            for r in tracks:
                lines.append(f"  {r['class'] + '.' + r['name']:<58} {r['value']:>10.4g} {r['unit']}")
        other = [r for r in bench if r["status"] != "ok"]
        if other:
            lines.append("")
            lines += [f"  {r['status'].upper()} {r['file']} {r['class']}.{r['name']}: {r['why']}" for r in other]
        lines.append("")
    lines.append(f"verdict: {verdict(result)}")
    return "\n".join(lines)


def verdict(result: dict) -> str:
    """FAIL: a test or a benchmark failed; INCOMPLETE: none failed, but the time budget cut a phase
    short, the tests could not run, or a phase passed nothing (all skipped); PASS: everything ran and passed."""
    tests, bench = result.get("tests", []), result.get("benchmarks") or []
    if any(t["counts"]["failed"] or t["counts"]["error"] or t["returncode"] not in (0, 5, None) for t in tests) \
            or any(r["status"] == "error" for r in bench):
        return "FAIL"
    if any(t["timed_out"] or t.get("not_run") for t in tests) or any(r["status"] == "cut" for r in bench):
        return "INCOMPLETE"
    # on a GPU, a phase that passed nothing (every test skipped, every benchmark skipped) checked nothing
    if any(t["counts"]["passed"] == 0 for t in tests) or \
            ("benchmarks" in result and not any(r["status"] == "ok" for r in bench)):
        return "INCOMPLETE"
    return "PASS"


EXIT = {"PASS": 0, "FAIL": 1, "INCOMPLETE": 3}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _link_kernels() -> str | None:
    """The children import this checkout (PYTHONPATH), where ``dispatch_jit.kernels`` is the repository's
    kernels/ (setup.py maps it on install): a checkout without the link the development worktrees have
    gets it."""
    link = ROOT / "dispatch_jit" / "kernels"
    if link.exists():
        return None
    link.symlink_to("../kernels")
    return "linked dispatch_jit/kernels -> ../kernels (this checkout has no such link)"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        sys.path.insert(0, str(ROOT))
        records = run_bench_file(args.child[0], args.samples)
        Path(args.child[1]).write_text(json.dumps(records))
        return 0
    t0 = time.perf_counter()          # the budget counts from here: the GPU probe is in it
    gone = missing_modules()
    if gone:
        print(f"gpu_check: cannot run: {', '.join(gone)} not importable by {sys.executable}; run it with a "
              "Python that has them", file=sys.stderr)
        return 2
    gpu = find_gpu()
    if gpu is None:
        print("gpu_check: no CUDA GPU here (numba.cuda finds none with the simulator off): run it on a "
              "machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    if args.outdir:
        outdir = Path(args.outdir)
        outdir.mkdir(parents=True, exist_ok=True)
    else:
        outdir = Path(tempfile.mkdtemp(prefix="dispatch_jit_gpu_check_"))
    print(f"gpu_check: {gpu}; writing to {outdir}", flush=True)
    note = _link_kernels()
    if note:
        print(f"gpu_check: {note}", flush=True)
    print(f"gpu_check: optional libraries compared against: "
          f"{', '.join(m for m in OPTIONAL if not missing_modules([m])) or 'none'}", flush=True)
    deadline = t0 + args.budget
    result = {"gpu": gpu, "commit": _commit(),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "tests": []}
    no_pytest = missing_modules(TEST_NEEDS)
    if not args.skip_tests and no_pytest:
        result["tests"].append({"name": "tests", "counts": dict.fromkeys(("passed", "failed", "skipped", "error",
                                                                           "xfail", "xpass"), 0),
                                "failed": [], "seconds": 0.0, "returncode": None, "timed_out": False,
                                "log": "-", "not_run": f"{', '.join(no_pytest)} not importable by {sys.executable}"})
    elif not args.skip_tests:
        share = 0.3 if args.skip_bench else 0.2
        result["tests"].append(run_tests("gpu-marked", ["-m", "gpu", *gpu_marked_files()], outdir,
                                         args.budget * share))
        print(f"gpu_check: gpu-marked tests done: {result['tests'][-1]['counts']}", flush=True)
        if not args.marked_only:
            left = (deadline - time.perf_counter()) * (1.0 if args.skip_bench else 0.55)
            result["tests"].append(run_tests("CUDA files", cuda_test_files(), outdir, left))
            print(f"gpu_check: CUDA test files done: {result['tests'][-1]['counts']}", flush=True)
    if not args.skip_bench:
        result["benchmarks"] = run_benchmarks(outdir, args.samples, deadline - time.perf_counter())
    result["seconds"] = time.perf_counter() - t0
    (outdir / RAW).write_text(json.dumps(result, indent=1))
    summary = format_summary(result)
    (outdir / SUMMARY).write_text(summary + "\n")
    print()
    print(summary)
    print(f"\nsummary written to {outdir / SUMMARY}")
    return EXIT[verdict(result)]


if __name__ == "__main__":
    sys.exit(main())
