"""Every ```python block of README.md and docs/*.md runs, so a pasted block never fails.

A file's blocks run in order in one namespace (a guide builds on its earlier blocks), in a
temporary working directory.  A block that needs an optional part says so on the line above
its fence, ``<!-- needs: torch -->`` (or dask, cuda; several separated by commas), and is
skipped, with the rest of its file, where that part is missing.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
_FENCE = re.compile(r"(?:<!-- needs: (?P<needs>[\w, ]+) -->\n)?```python\n(?P<code>.*?)^```", re.S | re.M)


def blocks(text: str) -> list[tuple[int, set, str]]:
    """(line of the code's first line, what it needs, the code) per python block."""
    out = []
    for m in _FENCE.finditer(text):
        needs = {n.strip() for n in (m.group("needs") or "").split(",") if n.strip()}
        out.append((text.count("\n", 0, m.start("code")) + 1, needs, m.group("code")))
    return out


def _missing(need: str) -> str | None:
    if need == "cuda":
        import dispatch_jit as dj
        return None if dj.cuda.is_available() else "no CUDA device and no simulator"
    modules = {"torch": ["torch"], "dask": ["dask.array", "distributed"]}[need]
    for mod in modules:
        try:
            __import__(mod)
        except ImportError:
            return f"{mod} is not installed"
    return None


def test_blocks_are_found_with_their_needs():
    text = "a\n```python\nx = 1\n```\n<!-- needs: torch, dask -->\n```python\nimport torch\n```\n```bash\nls\n```\n"
    assert blocks(text) == [(3, set(), "x = 1\n"), (7, {"torch", "dask"}, "import torch\n")]


@pytest.mark.parametrize("path", [p for p in FILES if "```python" in p.read_text()],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_python_block_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "__doc_block__"}
    rel = path.relative_to(ROOT).as_posix()
    try:
        for line, needs, code in blocks(path.read_text()):
            for need in sorted(needs):
                why = _missing(need)
                if why:
                    pytest.skip(f"{rel}:{line} needs {need}: {why}")
            try:
                exec(compile(code, f"{rel}:{line}", "exec"), ns)
            except Exception as e:
                pytest.fail(f"the block at {rel}:{line} raised {type(e).__name__}: {e}")
    finally:
        _unregister(ns)


def _unregister(ns: dict) -> None:
    """The operators a page defined leave with it: the rest of the suite may define the same names."""
    import dispatch_jit as dj
    for value in list(ns.values()):
        if isinstance(value, (dj.Library, dj.library.CustomOpDef)):
            value._destroy()


def test_readme_is_a_guide_of_at_most_300_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_the_site_lists_every_page():
    """mkdocs.yml's nav names every docs/*.md page, and every page it names exists."""
    nav = re.findall(r"^  - [^:]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert sorted(nav) == pages
