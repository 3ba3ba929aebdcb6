"""Every asv ``track_`` benchmark says what it measures over what: a ratio's name reads
``<what>_over_<what>`` (``track_sort_dj_over_numpy`` is dj's time over NumPy's), and every other one
carries an absolute unit.  Importing the suites touches no GPU and compiles nothing."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ABSOLUTE_UNITS = {"s", "seconds", "ms", "us", "GB/s", "TFLOP/s", "sizes", "fraction"}


def _tracks():
    sys.path.insert(0, str(ROOT))
    try:
        for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
            mod = importlib.import_module(f"benchmarks.{path.stem}")
            for name, obj in vars(mod).items():
                if name.startswith("track_") and callable(obj):
                    yield f"{path.stem}.{name}", name, getattr(obj, "unit", None)
                elif isinstance(obj, type) and obj.__module__ == mod.__name__:
                    for attr in dir(obj):
                        if attr.startswith("track_"):
                            fn = getattr(obj, attr)
                            yield f"{path.stem}.{name}.{attr}", attr, getattr(fn, "unit", None) or \
                                getattr(obj, "unit", None)
    finally:
        sys.path.remove(str(ROOT))


TRACKS = list(_tracks())


def test_there_are_track_benchmarks():
    assert len(TRACKS) > 50


@pytest.mark.parametrize("where, name, unit", TRACKS, ids=[t[0] for t in TRACKS])
def test_a_track_benchmark_says_what_over_what(where, name, unit):
    if "_over_" in name:
        a, b = name[len("track_"):].split("_over_", 1)
        assert a and b, where
        return
    assert "ratio" not in name and "speedup" not in name and "_vs_" not in name, \
        f"{where}: a ratio whose name does not say what over what; name it <what>_over_<what>"
    assert unit in ABSOLUTE_UNITS, f"{where}: unit {unit!r} is neither absolute nor named what over what"


def test_every_part_of_the_quick_suite_selects_a_benchmark():
    """scripts/asv_quick.sh runs benchmarks/__init__.py's QUICK: a rename must not empty a part of it."""
    import re
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks import QUICK
    finally:
        sys.path.remove(str(ROOT))
    names = [where for where, _, _ in TRACKS]
    for part in QUICK.split("|^"):
        pattern = re.compile(part if part.startswith("^") else "^" + part)
        assert any(pattern.search(n) for n in names), f"no track_ benchmark matches {pattern.pattern}"
    assert 5 <= sum(bool(re.search(QUICK, n)) for n in names) <= 20
