"""The built wheel holds the whole package (setup.py's package discovery).

It is built from a copy of the sources (an in-tree build leaves build/ and
*.egg-info behind), with a new subpackage added to dispatch_jit/ and to
kernels/, to show that a folder added later is packaged without editing the
build configuration.  Installing and running the wheel is .ci/run's job.
"""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _setuptools_builds_wheels() -> bool:
    """The build runs without isolation (no network in tests), so on this interpreter's setuptools:
    bdist_wheel is built in from setuptools 70.1 (older ones need the wheel package)."""
    try:
        import setuptools
    except ImportError:
        return False
    return tuple(int(x) for x in setuptools.__version__.split(".")[:2]) >= (70, 1)


def _py_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if "__pycache__" not in p.parts}


@pytest.mark.skipif(not _setuptools_builds_wheels(), reason="setuptools < 70.1 here; .ci/run builds the wheel")
def test_wheel_holds_every_module_and_kernels_as_dispatch_jit_kernels(tmp_path):
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("dispatch_jit", "kernels"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for new in (src / "dispatch_jit" / "later", src / "kernels" / "later_family" / "deeper"):
        new.mkdir(parents=True)
        (new / "__init__.py").write_text("")
    (src / "kernels" / "later_family" / "__init__.py").write_text("")

    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    (wheel,) = (tmp_path / "dist").glob("dispatch_jit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())

    want = {f"dispatch_jit/{f}" for f in _py_files(src / "dispatch_jit")}
    want |= {f"dispatch_jit/kernels/{f}" for f in _py_files(src / "kernels")}
    assert {"dispatch_jit/later/__init__.py", "dispatch_jit/kernels/later_family/deeper/__init__.py"} <= want
    got = {n for n in names if n.endswith(".py")}
    assert sorted(want - got) == [], "modules missing from the wheel"
    assert sorted(got - want) == [], "unexpected modules in the wheel"
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"dispatch_jit"}     # no bare 'kernels'


def test_every_source_folder_is_a_package():
    """find_packages skips a folder without __init__.py, so its modules would be left out of the wheel."""
    for root in (ROOT / "dispatch_jit", ROOT / "kernels"):
        for d in {p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts}:
            assert (d / "__init__.py").exists(), f"{d} has Python files but no __init__.py"
