"""The architecture, checked: imports point one way and modules stay small.

Every module of the library (``dispatch_jit/`` and ``kernels/``, installed as
``dispatch_jit.kernels``) is parsed, and every import in it is collected,
including the imports placed inside functions (an import deferred to call time
is still a dependency; hiding a cycle behind it does not remove the cycle).

Three rules:

* **Layers.**  The engine (everything in ``dispatch_jit`` outside the groups
  below) < ``dispatch_jit.kernels`` (registers itself into the engine, as ATen
  registers into the dispatcher) < ``dispatch_jit.nn`` and ``dispatch_jit.optim``
  (modules, losses, optimizers: user-level code over the ops) < ``dispatch_jit.compiler``
  < ``dispatch_jit.array_api`` (the Python array API standard's namespace, a layer of
  functions over the ops) < the out-of-tree style backends (``dispatch_jit.dask``, on
  PrivateUse1) < the tools (``cli``, ``__main__``).  A module imports only its
  own layer or lower ones.
  The top package ``dispatch_jit/__init__.py`` assembles everything and is
  imported by no library module below the tools.
* **No cycles** among modules, counting imports inside functions.
* **Size.**  No library module above ``MAX_LINES`` lines.
* **Names that say one thing.**  No two compiler modules share a name, and no compiler module's
  name is another library module's plus a suffix (``step``/``steps``/``stepdrive``,
  ``trace``/``tracer``, ``plan``/``planfn``/``planops``, ``entry``/``entries``).
* **One exec.**  Generated source becomes code only through ``dispatch_jit/jit/source.py``
  (``define``/``namespace``, which register it with ``linecache`` for tracebacks).
* **Errors come from errors.py.**  No library module raises a builtin exception
  class itself (``ValueError``, ``TypeError``, ``RuntimeError``, ...): it raises
  one of ``dispatch_jit.errors``' classes, which subclass the builtin a user
  would catch, so ``except ValueError`` and ``except dj.errors.DispatchJitError``
  both work.  The builtins left to raise are those of Python's protocols and
  invariants: ``NotImplementedError`` (an abstract method: ``Module.forward``),
  ``AttributeError`` (``__getattr__``), ``BufferError`` (the DLPack and buffer
  protocols ask for it), ``ImportError`` (an optional dependency is missing),
  ``StopIteration`` and ``AssertionError`` (an internal invariant: a bug here,
  never a user's mistake).

Third-party imports are not constrained here, except that optional ones
(``torch``, ``matplotlib``, ``cupy``, ...) may appear only inside functions:
the library must import without them.

There is no exception list: a violation is fixed, not recorded.
"""

from __future__ import annotations

import ast
import builtins
import importlib.machinery
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500
OPTIONAL = ("torch", "matplotlib", "cupy", "jax", "dask", "scipy", "pandas", "hypothesis", "pytest")
LAYERS = {"engine": 0, "kernels": 1, "nn": 2, "compiler": 3, "array_api": 4, "backends": 5, "tools": 6, "top": 7}

def _modules() -> dict[str, Path]:
    """Module name -> file, for every library module."""
    found = {}
    for pkg, base in (("dispatch_jit", ROOT / "dispatch_jit"), ("dispatch_jit.kernels", ROOT / "kernels")):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and not os.path.islink(os.path.join(dirpath, d))]
            rel = Path(dirpath).relative_to(base)
            for f in filenames:
                if not f.endswith(".py"):
                    continue
                parts = [pkg] + [p for p in rel.parts] + ([] if f == "__init__.py" else [f[:-3]])
                found[".".join(parts)] = Path(dirpath) / f
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(name: str) -> str | None:
    """The library module an imported dotted name refers to (its longest known prefix)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in MODULES:
            return cand
        parts.pop()
    return None


def _imports(name: str) -> list[tuple[str, bool, int]]:
    """``(imported module or third-party name, inside a function, line)`` for each import of ``name``."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    return _imports_in(MODULES[name].read_text(), package)


def _imports_in(source: str, package: str) -> list[tuple[str, bool, int]]:
    tree = ast.parse(source)
    found = []

    def visit(node, nested):
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    found.append((a.name, nested, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module
                for a in child.names:
                    sub = f"{mod}.{a.name}"      # ``from pkg import submodule``
                    found.append((sub if sub in MODULES else mod, nested, child.lineno))
            visit(child, inner)
    visit(tree, False)
    return found


def _layer(name: str) -> str:
    if name == "dispatch_jit":
        return "top"
    if name.startswith("dispatch_jit.kernels"):
        return "kernels"
    if name.startswith(("dispatch_jit.nn", "dispatch_jit.optim")):
        return "nn"
    if name.startswith("dispatch_jit.compiler"):
        return "compiler"
    if name.startswith("dispatch_jit.array_api"):
        return "array_api"
    if name.startswith("dispatch_jit.dask"):
        return "backends"
    if name in ("dispatch_jit.cli", "dispatch_jit.__main__") or name.startswith("dispatch_jit.tools"):
        return "tools"
    return "engine"


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for imported, _, _ in _imports(m):
            target = _resolve(imported)
            if target is not None and target != m:
                graph[m].add(target)
    return graph


GRAPH = _graph()


def _cycles(graph) -> list[frozenset]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(frozenset(comp))
    return out


def layer_violations() -> set[str]:
    bad = set()
    for m in MODULES:
        lm = LAYERS[_layer(m)]
        for target in GRAPH[m]:
            lt = LAYERS[_layer(target)]
            if lt > lm and not (m == "dispatch_jit" or (_layer(m) == "tools" and target == "dispatch_jit")):
                bad.add(f"{m} -> {target}")
    return bad


def cycle_members() -> set[str]:
    return {m for comp in _cycles(GRAPH) for m in comp}


def oversize() -> set[str]:
    return {m for m, p in MODULES.items() if len(p.read_text().splitlines()) > MAX_LINES}


_HOW = {
    "layer": "an import against the layer order engine < kernels < nn/optim < compiler < tools: move the code to the "
             "layer it belongs to, or have the higher layer register into the lower one (docs/ARCHITECTURE.md)",
    "cycle": "modules in an import cycle (imports inside functions count): give them one direction",
    "size": f"modules above {MAX_LINES} lines: split them along their concepts",
}


def _check(kind: str, found: set[str]) -> None:
    assert not found, f"{_HOW[kind]}: {sorted(found)}"


def test_the_parser_sees_the_library():
    """The walk finds the modules, resolves relative imports and sees imports inside functions."""
    assert "dispatch_jit.dispatcher" in MODULES and "dispatch_jit.kernels" in MODULES
    assert "dispatch_jit.compiler" in MODULES
    assert _layer("dispatch_jit.optim.sgd") == _layer("dispatch_jit.nn.functional") == "nn"
    assert "dispatch_jit.registry" in GRAPH["dispatch_jit.dispatcher"]
    # the top package imports the kernels (it assembles the library)
    assert any(t.startswith("dispatch_jit.kernels") for t in GRAPH["dispatch_jit"])


def test_imports_follow_the_layer_order():
    _check("layer", layer_violations())


def test_no_import_cycles():
    _check("cycle", cycle_members())


def test_no_module_above_the_size_budget():
    _check("size", oversize())


def test_optional_dependencies_are_imported_only_inside_functions():
    bad = []
    for m in MODULES:
        for imported, nested, line in _imports(m):
            if imported.split(".")[0] in OPTIONAL and not nested:
                bad.append(f"{MODULES[m].relative_to(ROOT)}:{line} imports {imported} at module level")
    assert not bad, bad


_PROTOCOL_ERRORS = frozenset(["NotImplementedError", "AttributeError", "BufferError", "ImportError",
                              "ModuleNotFoundError", "StopIteration", "AssertionError"])
_BUILTIN_ERRORS = frozenset(n for n in dir(builtins)
                            if n.endswith(("Error", "Exception")) and n not in _PROTOCOL_ERRORS)


def builtin_raises(tree: ast.AST, where: str) -> list[str]:
    """``where:line raises X`` for each ``raise X(...)`` / ``raise X`` of a builtin exception class."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in _BUILTIN_ERRORS:
                found.append(f"{where}:{node.lineno} raises {exc.id}")
    return found


def test_errors_come_from_errors_py():
    bad = []
    for m, path in MODULES.items():
        if m != "dispatch_jit.errors":
            bad += builtin_raises(ast.parse(path.read_text()), str(path.relative_to(ROOT)))
    assert not bad, ("raise a class of dispatch_jit/errors.py (add one there, subclassing the builtin a user "
                     f"would catch): {bad}")


def test_builtin_raise_finder_finds_a_planted_raise():
    tree = ast.parse("def f(x):\n    if x:\n        raise ValueError('no')\n    raise NotImplementedError\n")
    assert builtin_raises(tree, "m.py") == ["m.py:3 raises ValueError"]


def test_imports_inside_functions_and_relative_imports_are_seen():
    src = ("import numpy as np\n"
           "from . import registry\n"
           "from ..cuda import launch\n"
           "def f():\n"
           "    from dispatch_jit.kernels import aten\n"
           "    import torch\n")
    got = _imports_in(src, "dispatch_jit.autograd")
    assert ("numpy", False, 1) in got
    assert ("dispatch_jit.autograd.registry", False, 2) in got or ("dispatch_jit.autograd", False, 2) in got
    assert ("dispatch_jit.cuda.launch", False, 3) in got
    assert ("dispatch_jit.kernels.aten", True, 5) in got or ("dispatch_jit.kernels", True, 5) in got
    assert ("torch", True, 6) in got


LOOK_ALIKE = ("s", "fn", "ops", "drive", "trace", "r", "er")


def look_alikes(names: list[str], scope: str) -> set[str]:
    """Pairs of module names (one of them under ``scope``) that are the same name, or one
    name plus a suffix of ``LOOK_ALIKE`` (plural ``-ies`` read as ``-y``)."""
    stem = {m: m.rsplit(".", 1)[-1].lstrip("_") for m in names}
    norm = {m: s[:-3] + "y" if s.endswith("ies") else s for m, s in stem.items()}
    ours = [m for m in names if m.startswith(scope + ".")]
    bad = set()
    for a in ours:
        for b in names:
            if a == b:
                continue
            same = (b.startswith(scope + ".") and stem[a] == stem[b]) or (stem[a] != stem[b] and norm[a] == norm[b])
            for x, y in ((a, b), (b, a)):
                if norm[y].startswith(norm[x]) and norm[y][len(norm[x]):] in LOOK_ALIKE:
                    same = True
            if same:
                bad.add(" ~ ".join(sorted((a, b))))
    return bad


def test_compiler_module_names_do_not_look_alike():
    bad = look_alikes(sorted(MODULES), "dispatch_jit.compiler")
    assert not bad, f"name each module after its concept, so that no two names look alike: {sorted(bad)}"


def test_look_alike_finder_finds_planted_pairs():
    names = ["p.c.step", "p.c.steps", "p.c.x.codegen", "p.c.y.codegen", "p.entry", "p.c.entries", "p.c.plan",
             "p.other", "p.others", "p.c.run.cached"]
    assert look_alikes(names, "p.c") == {"p.c.step ~ p.c.steps", "p.c.x.codegen ~ p.c.y.codegen",
                                         "p.c.entries ~ p.entry"}


def exec_calls(tree: ast.AST, where: str) -> list[str]:
    return [f"{where}:{n.lineno}" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "exec"]


def test_generated_code_is_made_only_in_jit_source():
    bad = []
    for m, path in MODULES.items():
        if m != "dispatch_jit.jit.source":
            bad += exec_calls(ast.parse(path.read_text()), str(path.relative_to(ROOT)))
    assert not bad, f"make generated source into code with dispatch_jit.jit.source.define/namespace: {bad}"
    assert exec_calls(ast.parse("def f(s):\n    exec(compile(s, '<x>', 'exec'), {})\n"), "m.py") == ["m.py:2"]


def test_cycle_finder_finds_a_planted_cycle():
    """The checker itself: a planted two-module cycle and a self-contained chain."""
    g = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"c"}}
    assert _cycles(g) == [frozenset({"a", "b"})]
    assert _cycles({"x": {"y"}, "y": set()}) == []


# Optional packages that a dependency imports when it can (dask.array probes `sparse` on import):
# a test folder must not pass for one.
PROBED = ("sparse",)


def test_no_test_folder_passes_for_an_optional_package():
    """pytest puts each folder that holds test modules on sys.path (the test folders are not
    packages), so a folder inside one is importable by its name, as a namespace package.  Named
    like an optional package that is not installed, it passes for it: tests/kernels/sparse/ made
    dask.array's probe of `sparse` fail with an AttributeError, not an ImportError."""
    on_path = sorted({str(p.parent) for p in (ROOT / "tests").rglob("test_*.py")})
    for name in PROBED:
        spec = importlib.machinery.PathFinder.find_spec(name, on_path)
        assert spec is None, (f"a test folder is named {name!r}, like an optional package a dependency "
                              f"probes: {list(spec.submodule_search_locations or [spec.origin])}; rename it")
