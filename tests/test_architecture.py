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
* **One loop generator.**  The compiler takes loop nests, casts, parallel thresholds and
  chunking from ``dispatch_jit.kernels.support.loops``, never from a kernel backend's
  internals (``kernels/elementwise/cpu.py``, ...), so fused loops compute as eager ones.
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


# kernel backends whose internals the compiler must not reach into: it takes loops, casts, thresholds
# and chunking from the loop generator (dispatch_jit.kernels.support.loops), as the eager kernels do
_KERNEL_BACKENDS = ("dispatch_jit.kernels.elementwise.cpu", "dispatch_jit.kernels.elementwise.cuda",
                    "dispatch_jit.kernels.reduction.cpu", "dispatch_jit.kernels.reduction.cuda",
                    "dispatch_jit.kernels.reduction.codegen", "dispatch_jit.kernels.shape.cpu")


def compiler_backend_imports(graph=None) -> set[str]:
    graph = GRAPH if graph is None else graph
    return {f"{m} -> {t}" for m, targets in graph.items() if _layer(m) == "compiler"
            for t in targets if t in _KERNEL_BACKENDS}


def test_compiler_imports_the_loop_generator_not_kernel_backends():
    found = compiler_backend_imports()
    assert not found, ("the compiler imports kernel backend internals; take loops, casts, thresholds and "
                       f"chunking from dispatch_jit.kernels.support.loops: {sorted(found)}")
    assert any(t.startswith("dispatch_jit.kernels.support.loops") for t in GRAPH["dispatch_jit.compiler.codegen"])
    # and the rule sees a planted import
    planted = {"dispatch_jit.compiler.x": {"dispatch_jit.kernels.elementwise.cpu"}}
    assert compiler_backend_imports(planted) == {"dispatch_jit.compiler.x -> dispatch_jit.kernels.elementwise.cpu"}


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


# -- no compiled-mode slots below the compiler ---------------------------------------------------
# The compiler plugs into the layers below it through their general mechanisms (a backend fallback
# at the Tracer key, write observers, a tensor subclass's ``__backward__``), never by assigning a
# name or an item of a lower layer's module.  Until a whole step's trace sees the optimizers' fused
# update ops as it sees other ops (issue 28), dj.optim's step slot remains: this list may only shrink.
SLOTS_PENDING = {"dispatch_jit.optim.optimizer.STEP_TRACE"}


def slot_assignments(source: str, package: str, layer_of=None) -> set[str]:
    """``module.name`` for each assignment in ``source`` (of a module in ``package``) to a name or
    an item of a module of a lower layer than the compiler: ``mod.X = v``, ``mod.X[0] = v``,
    ``setattr(mod, "X", v)``, with ``mod`` a module bound by an import anywhere in the module
    (a lower layer's objects, ``tls`` or a class, are its mechanisms, not slots)."""
    layer_of = layer_of or _layer
    tree = ast.parse(source)
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    modules[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            mod = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else [])) \
                if node.level else node.module
            for a in node.names:
                modules[a.asname or a.name] = f"{mod}.{a.name}"
    lower = {n: m for n, m in modules.items() if m in MODULES and LAYERS[layer_of(m)] < LAYERS["compiler"]}
    found = set()

    def target(t):
        while isinstance(t, ast.Subscript):
            t = t.value
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in lower:
            found.add(f"{lower[t.value.id]}.{t.attr}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                target(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            target(node.target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in lower \
                and isinstance(node.args[1], ast.Constant):
            found.add(f"{lower[node.args[0].id]}.{node.args[1].value}")
    return found


def slot_setters(source: str) -> set[str]:
    """The functions of a module that rebind one of its module-level names (``global X; X = v``) or
    replace the item of a module-level one-element list (``X[0] = v``): slot setters."""
    tree = ast.parse(source)
    boxes = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
             for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             if isinstance(t, ast.Name) and isinstance(n.value, ast.List) and len(n.value.elts) == 1}
    found = set()
    for f in tree.body:
        if not isinstance(f, ast.FunctionDef):
            continue
        rebound = {g for n in ast.walk(f) if isinstance(n, ast.Global) for g in n.names}
        for n in ast.walk(f):
            for t in (n.targets if isinstance(n, ast.Assign) else []):
                if isinstance(t, ast.Name) and t.id in rebound or isinstance(t, ast.Subscript) \
                        and isinstance(t.value, ast.Name) and t.value.id in boxes:
                    found.add(f.name)
    return found


def slot_setter_calls(source: str, package: str, setters: dict) -> set[str]:
    """``module.function`` for each call in ``source`` of a lower layer's slot setter (``setters``:
    module -> its setters), called as ``mod.f(...)`` or imported by name."""
    tree = ast.parse(source)
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            base = package.split(".")
            mod = (".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                   if isinstance(node, ast.ImportFrom) and node.level else getattr(node, "module", None))
            for a in node.names:
                full = a.name if isinstance(node, ast.Import) else f"{mod}.{a.name}"
                names[a.asname or a.name.split(".")[0]] = full
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in names:
            mod, _, fn = names[f.id].rpartition(".")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in names:
            mod, fn = names[f.value.id], f.attr
        else:
            continue
        if fn in setters.get(mod, ()):
            found.add(f"{mod}.{fn}")
    return found


def test_the_compiler_calls_no_slot_setter_below_it():
    setters = {m: slot_setters(p.read_text()) for m, p in MODULES.items() if LAYERS[_layer(m)] < LAYERS["compiler"]}
    found = set()
    for m, p in MODULES.items():
        if _layer(m) == "compiler":
            package = m if _is_package(m) else m.rpartition(".")[0]
            found |= slot_setter_calls(p.read_text(), package, setters)
    assert not found, (f"the compiler sets lower layers' module-level slots through {sorted(found)}: have the "
                       f"lower layer expose a general mechanism and plug in through it")


def test_slot_setter_finder_finds_planted_setters():
    lower = ("_HOOK = None\n_BOX: list = [None]\ndef set_hook(f):\n    global _HOOK\n    _HOOK = f\n"
             "def set_box(f):\n    _BOX[0] = f\ndef plain(f):\n    x = [f]\n    x[0] = f\n")
    assert slot_setters(lower) == {"set_hook", "set_box"}
    setters = {"dispatch_jit.autograd.engine": {"set_hook", "set_box"}}
    src = ("from dispatch_jit.autograd import engine\nfrom dispatch_jit.autograd.engine import set_box\n"
           "engine.set_hook(print)\nset_box(print)\nengine.plain(print)\n")
    assert slot_setter_calls(src, "dispatch_jit.compiler", setters) == {
        "dispatch_jit.autograd.engine.set_hook", "dispatch_jit.autograd.engine.set_box"}


def test_the_compiler_assigns_no_slot_below_it():
    found = set()
    for m, p in MODULES.items():
        if _layer(m) == "compiler":
            package = m if _is_package(m) else m.rpartition(".")[0]
            found |= slot_assignments(p.read_text(), package)
    assert found - SLOTS_PENDING == set(), (
        f"the compiler assigns into lower layers' modules {sorted(found - SLOTS_PENDING)}: have the lower layer "
        f"expose a general mechanism (a dispatch key's kernel, an observer with a handle, a class protocol) and "
        f"plug in through it")
    assert SLOTS_PENDING <= found, f"{sorted(SLOTS_PENDING - found)} are gone: take them off SLOTS_PENDING"


def test_slot_finder_finds_planted_slots():
    src = ("from dispatch_jit.autograd import engine\nimport dispatch_jit.writes as w\n"
           "from ..optim import optimizer as _o\nfrom .tracer import _state\n"
           "def f():\n    engine._backward_hook = f\n    w._WRITE_GUARD[0] = (f, [])\n"
           "    setattr(_o, 'STEP', 1)\n    _state.tracer = None\n")
    assert slot_assignments(src, "dispatch_jit.compiler") == {
        "dispatch_jit.autograd.engine._backward_hook", "dispatch_jit.writes._WRITE_GUARD",
        "dispatch_jit.optim.optimizer.STEP"}
