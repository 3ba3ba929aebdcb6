"""The engine sits below the op library: no engine module imports kernels/.

kernels/ registers itself into the engine (as ATen registers into the
dispatcher); only the top package (dispatch_jit/__init__.py), the compiler
and the tools (dispatch_jit/tools: the CLI, the tradeoff report), which sit
above it, may import it.
"""

import ast
import pathlib

import dispatch_jit

ROOT = pathlib.Path(dispatch_jit.__file__).parent
ABOVE_KERNELS = {"__init__.py", "__main__.py"}


def _engine_modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("kernels", "compiler", "tools") or str(rel) in ABOVE_KERNELS:
            continue
        yield rel, path


def _imports_kernels(tree: ast.AST, rel: pathlib.PurePath):
    depth = len(rel.parts) - 1          # how many packages below dispatch_jit the module lives
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dispatch_jit.kernels" or alias.name.startswith("dispatch_jit.kernels."):
                    yield node.lineno
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 0:
                absolute = mod
            elif node.level == depth + 1:     # relative to dispatch_jit itself
                absolute = f"dispatch_jit.{mod}" if mod else "dispatch_jit"
            else:
                continue
            if absolute == "dispatch_jit.kernels" or absolute.startswith("dispatch_jit.kernels."):
                yield node.lineno
            elif absolute == "dispatch_jit" and any(a.name == "kernels" for a in node.names):
                yield node.lineno


def test_engine_never_imports_kernels():
    found = []
    for rel, path in _engine_modules():
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{rel}:{line}" for line in _imports_kernels(tree, rel)]
    assert found == [], f"engine modules import kernels/ (register into the engine instead): {found}"
