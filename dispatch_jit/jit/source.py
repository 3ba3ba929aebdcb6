"""Generated Python source, made into code in one place.

The library writes Python source at run time (the per-operator entry points, the
autograd recorders, the compiled-mode guards, the loop nests Numba compiles).  All of
it becomes code here, and only here: ``define`` is the one ``exec`` in the library
(``tests/test_architecture.py`` holds it to that).

Each source is registered with ``linecache`` under a ``<dispatch_jit ...>`` name, so a
traceback through generated code shows the generated lines, ``pdb`` can list them,
and ``inspect.getsource`` finds them (Numba reads a kernel's source back through
``inspect`` when it pickles it for the disk cache).  A name that already holds a
different source gets a numeric suffix, so a traceback never shows another
function's lines.

>>> from dispatch_jit.jit.source import define
>>> twice = define("def twice(x):\\n    return 2 * x\\n", "twice", {}, "<dispatch_jit example>")
>>> twice(21)
42
>>> import inspect
>>> inspect.getsource(twice).splitlines()[0]
'def twice(x):'
"""

from __future__ import annotations

import itertools
import linecache
import threading

__all__ = ["define", "namespace", "register"]

_LOCK = threading.Lock()
_SERIAL = itertools.count(1)


def register(source: str, filename: str) -> str:
    """Put ``source`` in ``linecache`` under ``filename`` (or, when that name already
    holds other lines, under ``filename`` with a numeric suffix); return the name used.

    The entry's mtime is ``None``, which ``linecache.checkcache`` leaves alone: it is
    no file, and stays until the process ends (a generated function lives as long)."""
    lines = source.splitlines(True)
    with _LOCK:
        name = filename
        held = linecache.cache.get(name)
        while held is not None and held[2] != lines:
            name = f"{filename[:-1]} #{next(_SERIAL)}>" if filename.endswith(">") else f"{filename} #{next(_SERIAL)}"
            held = linecache.cache.get(name)
        linecache.cache[name] = (len(source), None, lines, name)
    return name


def namespace(source: str, glb: dict, filename: str) -> dict:
    """Run ``source`` (definitions only) with ``glb`` as its globals, registered with
    ``linecache`` under ``filename``; return ``glb``, now holding what it defined."""
    if not source.endswith("\n"):
        source += "\n"
    code = compile(source, register(source, filename), "exec")
    exec(code, glb)  # the library's one exec: everything generated passes here
    return glb


def define(source: str, name: str, glb: dict, filename: str):
    """The object ``source`` defines under ``name``, run with ``glb`` as its globals.

    ``filename`` should read ``<dispatch_jit WHAT>``: it is what a traceback shows."""
    return namespace(source, glb, filename)[name]
