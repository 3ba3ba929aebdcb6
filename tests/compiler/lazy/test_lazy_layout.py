"""The shape of compiled mode's package (compiler/lazy): its modules import one way, and
importing dispatch_jit changes nothing process-wide; compiled mode plugs itself in (the
Tracer fallback's specializer, the write hooks) when a thread first enters it."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import dispatch_jit.compiler.lazy as lazy

# the layers, lowest first: each module imports only modules before it
ORDER = ["layout", "state", "tensor", "encode", "watch", "execute", "generic", "backward", "grad", "record",
         "specialize", "update", "switch", "__init__"]


def _package_imports(path: Path) -> set:
    """The package modules a module imports, at the top or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            name = node.module if isinstance(node, ast.ImportFrom) else None
            names = [name] if name else [a.name for a in node.names]
            for n in names:
                if n and n.startswith("dispatch_jit.compiler.lazy."):
                    out.add(n.split(".")[3])
    return out


def test_modules_import_one_way():
    root = Path(lazy.__file__).parent
    assert sorted(p.stem for p in root.glob("*.py")) == sorted(ORDER)
    for i, name in enumerate(ORDER):
        below = set(ORDER[:i])
        got = _package_imports(root / f"{name}.py")
        assert got <= below, f"{name}.py imports {sorted(got - below)}, which are not below it"


def test_importing_installs_nothing_until_compiled_mode_is_entered():
    code = (
        "import dispatch_jit as dj\n"
        "from dispatch_jit import registry, writes\n"
        "from dispatch_jit.keys import DispatchKey\n"
        "from dispatch_jit.tensor import Tensor\n"
        "from dispatch_jit.compiler.lazy import mode, LazyTensor\n"
        "hooks = lambda: [hasattr(Tensor.__dict__[n], '__wrapped__') for n in ('__setitem__', 'numpy')]"
        " + [hasattr(LazyTensor, '__backward__'), bool(writes._observers)]\n"
        "fallback = lambda: registry.backend_fallbacks()[DispatchKey.Tracer]\n"
        "print(hasattr(fallback(), 'specialize'), *hooks())\n"
        "x = dj.tensor([1.0, 2.0])\n"
        "with mode('compiled'):\n"
        "    y = x * 2.0\n"
        "    print(type(y).__name__, fallback().specialize.__module__, *hooks())\n"
        "print(y.numpy().tolist())\n")
    env = {k: v for k, v in os.environ.items() if k != "DISPATCH_JIT_MODE"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, during, result = out.stdout.splitlines()
    assert before.split() == ["False", "False", "False", "False", "False"]
    assert during.split() == ["LazyTensor", "dispatch_jit.compiler.lazy.specialize", "True", "True", "True", "True"]
    assert result == "[2.0, 4.0]"
