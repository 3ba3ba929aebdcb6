"""512-bit vectors for the generated loops, where the CPU has AVX-512 (issue 26 part 3).

LLVM's tuning for AVX-512 CPUs (skylake-avx512 on, rocketlake among them) prefers
256-bit vectors: it vectorizes a float32 loop with 8 lanes where NumPy's own loops
use 16.  Measured on the 2-core rocketlake development machine, njit loops of 3e4
float32 against NumPy: log 1.26x -> 1.00x, exp 1.51x -> 1.03x, tanh 3.5x -> 2.6x
with 512-bit vectors.  LLVM takes the width per function, from the function attribute
``"prefer-vector-width"="512"``; the process-wide switch (``-prefer-256-bit`` in
``NUMBA_CPU_FEATURES``) is the user's, read once at Numba's start, and would change
their own Numba code too.

So every loop the library generates carries the attribute: ``widen`` puts a call of
``_wide_vectors()`` (an intrinsic that emits no instruction and marks the LLVM function
being lowered) at the top of the generated function and of every ``prange`` body, which
Numba's parfor lowering outlines into a function of its own (the serial compile binds
``prange`` to ``range``, and the call then marks the one function twice).  The jit layer
applies it to every generated source it compiles (cache.njit_source,
diskcache.compile_cached): eager elementwise and reduction kernels and the compiler's
fused loops alike, so eager and compiled mode keep calling the same code.  On a CPU
without AVX-512 the source is left as it was.

Bits do not change with the width where no float fold is reassociated: elementwise
loops compute each element alone, and float sums fold in explicit lanes
(kernels/support/loops/lanes.py).  The disk cache keys entries by the source (which
now holds the call) and by the CPU's features (diskcache.target_tag), so an entry
written on a CPU without AVX-512 is never loaded on one with it, nor the reverse.

>>> src = "def k(a, o):\\n    for i in prange(a.shape[0]):\\n        o[i] = a[i]\\n"
>>> print(mark(src, "k"), end="")
def k(a, o):
    _wide_vectors()
    for i in prange(a.shape[0]):
        _wide_vectors()
        o[i] = a[i]
"""

from __future__ import annotations

import ast

from numba.core import types
from numba.extending import intrinsic

__all__ = ["ATTRIBUTE", "CALL", "GLOBALS", "available", "mark", "widen"]

# the string attribute LLVM's vectorizer reads (TargetTransformInfo::getRegisterBitWidth via
# the subtarget's prefer-vector-width); a key="value" pair, written as LLVM IR spells it
ATTRIBUTE = '"prefer-vector-width"="512"'
CALL = "_wide_vectors()"
_avail: list = []


def available() -> bool:
    """Whether the CPU Numba compiles for has AVX-512 (``avx512f``; NUMBA_CPU_FEATURES, when set, decides)."""
    if not _avail:
        import llvmlite.binding as llvm
        import numba
        features = numba.config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
        _avail.append("+avx512f" in features.split(","))
    return _avail[0]


@intrinsic
def _wide_vectors(typingctx):
    """Mark the LLVM function being lowered to vectorize with 512-bit registers."""
    def codegen(context, builder, sig, args):
        # llvmlite's FunctionAttributes accepts only its list of keyword attributes; the set
        # underneath is emitted as written, and a string attribute is valid LLVM IR there
        set.add(builder.function.attributes, ATTRIBUTE)
        return context.get_dummy_value()
    return types.none(), codegen


GLOBALS = {"_wide_vectors": _wide_vectors}


def _is_prange(node) -> bool:
    it = getattr(node, "iter", None)
    return isinstance(node, ast.For) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
        and it.func.id == "prange"


def mark(src: str, name: str) -> str:
    """``src`` with ``_wide_vectors()`` first in the body of the function ``name``, of each
    decorated one (a whole-step plan's ``@numba.njit`` fused loops), of the functions they
    nest, and of each ``prange`` loop in them.  Other functions are left alone: Python runs
    them, and an intrinsic cannot be called from Python."""
    lines = src.splitlines(True)
    at = {}             # line index -> indentation of the call to insert before it
    jitted = [f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef) and (f.name == name or f.decorator_list)]
    for node in (n for f in jitted for n in ast.walk(f)):
        if isinstance(node, ast.FunctionDef) or _is_prange(node):
            first = node.body[0]
            # a body on its header's line ("for i in prange(n): x") has no line of its own to precede
            if first.lineno > node.lineno:
                at[first.lineno - 1] = " " * first.col_offset
    return "".join(f"{at[i]}{CALL}\n{line}" if i in at else line for i, line in enumerate(lines))


def widen(src: str, name: str, glb: dict) -> tuple[str, dict]:
    """``(source, globals)`` to compile the function ``name`` of ``src`` from: marked (``mark``),
    with the intrinsic among the globals, where the CPU has AVX-512; as given elsewhere."""
    if not available():
        return src, glb
    return mark(src, name), {**glb, **GLOBALS}
