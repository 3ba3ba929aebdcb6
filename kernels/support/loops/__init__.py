"""The loop generator: the source of every generated CPU loop nest over tensor elements.

Eager elementwise kernels (``kernels/elementwise/cpu.py``, a region of one node) and
the fused regions of compiled mode (``dispatch_jit/compiler/codegen.py``, many nodes)
both take their loops, their operand casts, their parallel thresholds, the
chunks of a full reduction (``parallel.py``), the fold order of float sums
(``lanes.py``, eager reduction kernels too) and their globals from here, so that
a fused chain computes what eager mode computes.  The
compiler imports this package's public names only, never a kernel backend's
internals (``tests/test_architecture.py`` holds it to that).

>>> from dispatch_jit.kernels.support.loops import Nest, read_cast
>>> read_cast("compute", "a0[i]", "_t_float64")
'_t_float64(a0[i])'
"""

from .nest import (GUARD_CHUNK, MAX_LOOP_NDIM, PARALLEL_MIN, TILE, TILE_MIN_INNER, TYPE_FNS, Nest, constant, crosswise,
                   loop_globals, read_cast, store, type_fn)
from .fold import Fold
from .parallel import full_chunks

__all__ = ["Nest", "read_cast", "store", "type_fn", "TYPE_FNS", "constant", "loop_globals", "crosswise", "GUARD_CHUNK", "TILE",
           "TILE_MIN_INNER", "PARALLEL_MIN", "MAX_LOOP_NDIM", "full_chunks", "Fold"]
