"""The asv suites in benchmarks/ stay runnable, without running asv.

Imports each benchmark module and, for every benchmark (``time_``, ``track_``,
``timeraw_``; class methods and module functions), runs the class's ``setup``
and one call on the smallest parameter set only: the first value of each
parameter list, which the suites order smallest first.  A setup that raises
NotImplementedError is asv's skip and skips here too; a benchmark marked
``slow = True`` (the 1e7-element and 1024x1024 target ratios) is skipped.
A ``timeraw_`` benchmark's (stmt, setup) code runs once in a fresh interpreter.
The suites' repeat knobs (QUICK below) are turned down: this checks that the
benchmarks run, not what they measure.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
MODULES = ["bench_dispatch", "bench_kernels", "bench_compile", "bench_coldstart", "bench_autograd", "bench_sparse", "bench_compiled", "bench_compiled_views", "bench_quantized",
           "bench_cuda_linalg", "bench_cuda", "bench_cuda_compiled", "bench_shared_cores",
           "bench_training", "bench_compiled_training", "bench_gpt", "bench_arrayops", "bench_dask", "bench_threads",
           "bench_vecmath", "bench_axes", "bench_user_mlp", "bench_attention_rows", "bench_gpt_ops"]
PREFIXES = ("time_", "track_", "timeraw_")
PACKAGE = "_dj_asv"
# knob -> quick value, set on a benchmark's class or module where it has one
QUICK = {"calls_per_sample": 200, "samples": 2, "IMPORT_RUNS": 1, "steps": 2, "ROUNDS": 1}


def _package() -> str:
    # by path, under a private name: "benchmarks" is too generic a top-level name to import; a
    # package, as asv imports it, so that the suites' relative imports (``from ._common ...``) resolve
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(PACKAGE, BENCH_DIR / "__init__.py",
                                                      submodule_search_locations=[str(BENCH_DIR)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package
        spec.loader.exec_module(package)
    return PACKAGE


def _load(name: str):
    return importlib.import_module(f"{_package()}.{name}")


def _cases():
    for modname in MODULES:
        module = _load(modname)
        for name, obj in vars(module).items():
            if name.startswith(PREFIXES) and inspect.isfunction(obj):
                yield pytest.param(modname, None, name, id=f"{modname}.{name}")
            elif inspect.isclass(obj) and obj.__module__ == module.__name__ and not name.startswith("_"):
                for meth in sorted(m for m in dir(obj) if m.startswith(PREFIXES)):
                    yield pytest.param(modname, name, meth, id=f"{modname}.{name}.{meth}")


# modules whose classes' setup() primes a directory, self.<attr>, by running the same code cold in a
# child (bench_coldstart: a disk cache, every kernel compiled, ~15 s on CI).  Their cases prime the same
# code, so the first prime is kept and later setups copy it instead of compiling it all again: each case
# still runs its benchmark over a primed cache, and the prime itself still runs (once).
PRIMED_DIRS = {"bench_coldstart": "dir"}
_primed: dict = {}


class _CopyPrime:
    """Stands in for a module's ``subprocess`` during setup(): its ``run`` (the prime) copies the directory
    the first real prime left into ``owner.<attr>``."""

    def __init__(self, template: str, owner, attr: str):
        self._template, self._owner, self._attr = template, owner, attr

    def run(self, args, **kw):
        shutil.copytree(self._template, getattr(self._owner, self._attr), dirs_exist_ok=True)
        return subprocess.CompletedProcess(args, 0, "", "")


def _setup_sharing_primes(modname, module, owner, setup, params, tmp_path_factory, monkeypatch):
    attr = PRIMED_DIRS.get(modname)
    if attr is None:
        setup(*params)
    elif modname in _primed:
        with monkeypatch.context() as m:
            m.setattr(module, "subprocess", _CopyPrime(_primed[modname], owner, attr))
            setup(*params)
    else:
        setup(*params)
        template = tmp_path_factory.mktemp(f"primed_{modname}") / attr
        shutil.copytree(getattr(owner, attr), template)
        _primed[modname] = str(template)


def _smallest(params) -> tuple:
    if not params:
        return ()
    if not isinstance(params[0], (list, tuple)):      # one parameter: a flat list
        params = [params]
    return tuple(values[0] for values in params)


def _run_timeraw(code) -> None:
    stmt, setup = code if isinstance(code, tuple) else (code, "")
    src = textwrap.dedent(setup) + "\n" + textwrap.dedent(stmt) + "\n"
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"timeraw code failed:\n{src}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("modname, clsname, name", list(_cases()))
def test_benchmark_runs_on_smallest_params(modname, clsname, name, monkeypatch, tmp_path_factory):
    module = sys.modules[f"{PACKAGE}.{modname}"]
    owner = getattr(module, clsname)() if clsname else module
    for knob, value in QUICK.items():
        if hasattr(owner, knob):
            monkeypatch.setattr(owner, knob, value)
    fn = getattr(owner, name)
    # ``slow`` on the function, or on its class (a bound method does not see class attributes)
    if getattr(fn, "slow", False) or (clsname and getattr(owner, "slow", False)):
        pytest.skip("marked slow = True (1e7 elements or 1024x1024): run it with asv")
    params = _smallest(getattr(fn, "params", None) or getattr(owner, "params", None))
    setup = getattr(owner, "setup", None) if clsname else None
    if setup is not None:
        try:
            _setup_sharing_primes(modname, module, owner, setup, params, tmp_path_factory, monkeypatch)
        except NotImplementedError as e:      # asv's documented skip
            pytest.skip(f"setup raised NotImplementedError: {e}")
    try:
        result = fn(*params)
    finally:
        teardown = getattr(owner, "teardown", None) if clsname else None
        if teardown is not None:
            teardown(*params)
    if name.startswith("track_"):
        assert isinstance(result, (int, float)) and math.isfinite(result) and result > 0, result
    elif name.startswith("timeraw_"):
        _run_timeraw(result)


def test_benchmark_modules_import_without_torch_and_compile_nothing():
    """With torch unimportable the modules still import, the torch benchmarks skip the asv
    way, and importing them resolves (so compiles) no operator."""
    code = f"""
import sys
sys.modules["torch"] = None          # makes `import torch` raise ImportError
sys.path.insert(0, {str(BENCH_DIR.parent)!r})
import dispatch_jit as dj
from benchmarks import {", ".join(MODULES)}
misses = sum(dj.cache_info(name)["misses"] for name in dj.list_operators("aten"))
assert misses == 0, f"importing the benchmarks resolved {{misses}} op signatures"
for cls in (bench_dispatch.TorchAddX100, bench_dispatch.TorchRatios):
    try:
        cls().setup(*([16] if getattr(cls, "params", None) else []))
    except NotImplementedError:
        pass
    else:
        raise AssertionError(f"{{cls.__name__}}.setup did not skip without torch")
for m in ({", ".join(MODULES)}):
    assert m.__doc__ and "Target" in m.__doc__, m.__name__
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
