"""CUDA matmul and dot: one generated tiled shared-memory kernel.

Semantics, dtype rules and error messages are the CPU kernels'
(op.Linalg over cpu.py): both operands are promoted to
``result_type(a, b)`` (operands of another dtype are converted by one
``dispatch_jit.cuda.copy.contiguous_copy`` first); bool and the unsigned types other
than uint8 raise linalg's DTypeError; shapes follow ``numpy.matmul``
(1-D operands promoted to a row / a column and the added dimension
dropped, batch dimensions broadcast) and raise linalg's ShapeErrors; 1-D x
1-D gives a 0-d tensor.  ``dot`` is 1-D x 1-D of equal length, with the
CPU's messages.

The kernel (``_source``) computes C[z] = A[z] @ B[z] for one output tile of
BM x BN per block:

* every operand is (buffer, element offset, batch strides, row stride, col
  stride), so transposed, sliced and broadcast operands are read in place
  (broadcast batch dimensions have stride 0); the batch is flattened on
  gridDim.z, with a loop when it exceeds the grid's limit;
* per k-step the block stages a BM x BK tile of A (transposed, padded
  against bank conflicts) and a BK x BN tile of B in ``cuda.shared.array``;
  each thread then accumulates a TM x TN register block (generated as
  scalar locals, so they live in registers) from TM + TN shared loads per
  kk; a thread's rows and columns are strided by the thread-grid size, so a
  warp reads consecutive shared addresses and stores coalesced;
* the tile loads are coalesced along whichever stride of the operand is 1
  (a code-generation choice per layout); tiles that lie wholly inside the
  matrices skip the bounds checks.

Accumulation: float16 loads float16, accumulates and stages in float32 and
rounds once at the store (as the CPU does); float32/64 and complex in their
own dtype; integers in int64 and stored truncated to the dtype, which
gives the same bits as the CPU's wrapping in-dtype accumulation (sums and
products mod 2**bits do not depend on the width they were computed in).

The configurations come from the same generator (``config(dtype)``): on
real hardware 128x128 tiles, BK=8, 8x8 per thread (256 threads) for 4-byte
accumulators, 64x64 tiles, 4x4 per thread (256 threads) for 8- and 16-byte
ones (float64, complex, integers); every array index is unsigned, so
constant offsets fold into the load and store addresses (see ``_source``;
checked in the sm_90 PTX with ptxas: float32 238 registers, no spills,
8.4 KB shared memory per block); under the simulator (one Python thread per CUDA thread) 8x8 tiles, BK=4, 2x2 per
thread (16 threads), which still exercises register blocking, multi-load
tiles, partial tiles and the interior fast path.  The launch plan (kernel,
grid, block) is cached per (dtype, shapes, layout kind) with the resolved
kernel.  ``numba.cuda`` is imported on first use only.
"""

from __future__ import annotations

import math
from collections import namedtuple
from types import SimpleNamespace

import numpy as np

from dispatch_jit.cuda.array import empty
from dispatch_jit.tensor import wrap

from dispatch_jit.cuda.codegen import compile_cuda, unravel
from dispatch_jit.cuda.copy import contiguous_copy
from dispatch_jit.cuda.launch import run
from dispatch_jit.errors import InvalidArgumentError

__all__ = ["CUDA", "TileConfig", "config", "HARDWARE_CONFIG", "HARDWARE_CONFIG_WIDE", "SIMULATOR_CONFIG",
           "matmul_arrays"]

TileConfig = namedtuple("TileConfig", "BM BN BK TM TN PAD")
HARDWARE_CONFIG = TileConfig(BM=128, BN=128, BK=8, TM=8, TN=8, PAD=4)
# 8- and 16-byte accumulators (float64, complex, integers in int64): half the register block, as
# ptxas for sm_90 reported 254 registers for float64 at 8x8 and 3.6 KB of spills for complex128
HARDWARE_CONFIG_WIDE = TileConfig(BM=64, BN=64, BK=8, TM=4, TN=4, PAD=4)
SIMULATOR_CONFIG = TileConfig(BM=8, BN=8, BK=4, TM=2, TN=2, PAD=1)
MAX_GRID_Z = 65535     # CUDA's gridDim.z limit; larger batches loop inside the kernel

_override: list = []   # tests force a configuration (e.g. the hardware one, under the simulator)


def config(dt=np.float32) -> TileConfig:
    """The tile configuration for operands of dtype ``dt``: the hardware one on a GPU (by the
    accumulator's width), a small one on the simulator."""
    if _override:
        return _override[-1]
    from dispatch_jit.cuda.runtime import is_simulator
    if is_simulator():
        return SIMULATOR_CONFIG
    return HARDWARE_CONFIG if _acc_dtype(np.dtype(dt)).itemsize <= 4 else HARDWARE_CONFIG_WIDE


def _check_config(c: TileConfig) -> int:
    nt = (c.BM // c.TM) * (c.BN // c.TN)
    if c.BM % c.TM or c.BN % c.TN or (c.BM * c.BK) % nt or (c.BK * c.BN) % nt:
        raise InvalidArgumentError(f"tile configuration {c} does not divide evenly among {nt} threads")
    return nt


# --- code generation ----------------------------------------------------------------------------

def _acc_dtype(dt: np.dtype) -> np.dtype:
    if dt == np.float16:
        return np.dtype(np.float32)
    if dt.kind in "iu":
        return np.dtype(np.int64)
    return dt


def _source(c: TileConfig, nd: int, a_rows_fast: bool, b_rows_fast: bool) -> str:
    """The kernel ``mm`` for tile config ``c``, ``nd`` batch dimensions, and the
    tile-load order of each operand (rows fastest when its row stride is 1)."""
    nt = _check_config(c)
    TR, TC = c.BM // c.TM, c.BN // c.TN          # thread grid: TR rows x TC cols
    LA, LB = c.BM * c.BK // nt, c.BK * c.BN // nt  # tile elements each thread loads
    bs = lambda op: [f"{op}_s{d}" for d in range(nd)]   # noqa: E731
    params = (["A", "a_o", *bs("a"), "a_sr", "a_sc", "B", "b_o", *bs("b"), "b_sr", "b_sc", "C", "c_o"]
              + [f"n{d}" for d in range(nd)] + ["M", "N", "K", "nbatch", "gn"])
    LDA, LDB = c.BM + c.PAD, c.BN + c.PAD        # shared row lengths (padding against bank conflicts)
    L = [f"def mm({', '.join(params)}):",
         f"    sA = cuda.shared.array({c.BK * LDA}, dtype=_sdt)",   # A tile, transposed: sA[kk * LDA + row]
         f"    sB = cuda.shared.array({c.BK * LDB}, dtype=_sdt)",   # B tile: sB[kk * LDB + col]
         "    tid = cuda.threadIdx.x",
         f"    ty = tid // {TC}",
         f"    tx = tid % {TC}",
         "    ty_u = _u(ty)",
         "    tx_u = _u(tx)",
         "    bid = cuda.blockIdx.x",
         f"    row0 = (bid // gn) * {c.BM}",
         f"    col0 = (bid % gn) * {c.BN}",
         f"    inner = row0 + {c.BM} <= M and col0 + {c.BN} <= N"]
    # per-thread tile-load coordinates (constant over k-steps): A tile BM x BK, B tile BK x BN
    for l in range(LA):
        e = f"(tid + {l * nt})"
        r, k = (f"{e} % {c.BM}", f"{e} // {c.BM}") if a_rows_fast else (f"{e} // {c.BK}", f"{e} % {c.BK}")
        L += [f"    ar{l} = {r}", f"    ak{l} = {k}", f"    sa{l} = ak{l} * {LDA} + ar{l}"]
    for l in range(LB):
        e = f"(tid + {l * nt})"
        k, col = (f"{e} % {c.BK}", f"{e} // {c.BK}") if b_rows_fast else (f"{e} // {c.BN}", f"{e} % {c.BN}")
        L += [f"    bk{l} = {k}", f"    bc{l} = {col}", f"    sb{l} = bk{l} * {LDB} + bc{l}"]
    L += ["    z = cuda.blockIdx.z",
          "    while z < nbatch:"]
    L += unravel(nd, ["a", "b"], "        ", linear="z")
    L += ["        c_k = c_o + z * M * N"]
    for l in range(LA):
        L.append(f"        pa{l} = a_k + (row0 + ar{l}) * a_sr + ak{l} * a_sc")
    for l in range(LB):
        L.append(f"        pb{l} = b_k + bk{l} * b_sr + (col0 + bc{l}) * b_sc")
    acc = [[f"c{i}_{j}" for j in range(c.TN)] for i in range(c.TM)]
    L += [f"        {acc[i][j]} = _zero" for i in range(c.TM) for j in range(c.TN)]
    L += [f"        for k0 in range(0, K, {c.BK}):",
          f"            if inner and k0 + {c.BK} <= K:"]
    for l in range(LA):
        L.append(f"                sA[_u(sa{l})] = _ld(A[_u(pa{l} + k0 * a_sc)])")
    for l in range(LB):
        L.append(f"                sB[_u(sb{l})] = _ld(B[_u(pb{l} + k0 * b_sr)])")
    L.append("            else:")
    for l in range(LA):
        L += [f"                if row0 + ar{l} < M and k0 + ak{l} < K:",
              f"                    sA[_u(sa{l})] = _ld(A[_u(pa{l} + k0 * a_sc)])",
              "                else:",
              f"                    sA[_u(sa{l})] = _zero"]
    for l in range(LB):
        L += [f"                if k0 + bk{l} < K and col0 + bc{l} < N:",
              f"                    sB[_u(sb{l})] = _ld(B[_u(pb{l} + k0 * b_sr)])",
              "                else:",
              f"                    sB[_u(sb{l})] = _zero"]
    L.append("            cuda.syncthreads()")
    # the k-step, unrolled: TM + TN shared loads and TM * TN multiply-adds per kk.  Every
    # array index in this kernel is unsigned (`_u`): a signed index gets Numba's
    # negative-index select, which stops LLVM folding constants into the address and makes
    # it hoist each address into registers of its own (ptxas for sm_90 reported 255
    # registers and spills for 8x8 per thread with signed indices).
    for kk in range(c.BK):
        L += [f"            a{i} = sA[ty_u + _u({kk * LDA + i * TR})]" for i in range(c.TM)]
        L += [f"            b{j} = sB[tx_u + _u({kk * LDB + j * TC})]" for j in range(c.TN)]
        L += [f"            {acc[i][j]} += a{i} * b{j}" for i in range(c.TM) for j in range(c.TN)]
    L += ["            cuda.syncthreads()",
          "        if inner:"]
    for i in range(c.TM):
        L.append(f"            r = _u(c_k + (row0 + ty + {i * TR}) * N + col0 + tx)")
        L += [f"            C[r + _u({j * TC})] = _st({acc[i][j]})" for j in range(c.TN)]
    L.append("        else:")
    for i in range(c.TM):
        L += [f"            if row0 + ty + {i * TR} < M:",
              f"                r = _u(c_k + (row0 + ty + {i * TR}) * N + col0 + tx)"]
        for j in range(c.TN):
            L += [f"                if col0 + tx + {j * TC} < N:",
                  f"                    C[r + _u({j * TC})] = _st({acc[i][j]})"]
    L += ["        z += cuda.gridDim.z"]
    return "\n".join(L) + "\n"


def _kernel(c: TileConfig, dt: np.dtype, nd: int, a_rows_fast: bool, b_rows_fast: bool):
    adt = _acc_dtype(dt)
    # `_zero` is a value: one object per dtype, since the compile cache keys globals by identity
    g = {"_sdt": adt.type, "_zero": _ZEROS.setdefault(adt, adt.type(0)), "_ld": adt.type, "_st": dt.type,
         "_u": np.uint64}
    return compile_cuda(_source(c, nd, a_rows_fast, b_rows_fast), "mm", g)


_ZEROS: dict = {}


# --- planning and launch ------------------------------------------------------------------------

_PLANS: dict = {}
_MAX_PLANS = 4096


def _rows_fast(sr: int, sc: int, rows: int, cols: int) -> bool:
    """Load a tile rows-fastest when the operand's rows are adjacent in memory (a transpose)
    or it has a single column; otherwise columns-fastest."""
    return rows > 1 and (cols == 1 or (sr == 1 and sc != 1))


def _plan(dt: np.dtype, sa: tuple, sb: tuple, amode: bool, bmode: bool):
    from . import cpu as linalg
    shape, batch, m, k, n = linalg._plan(sa, sb)
    c = config(dt)
    nd = len(batch)
    nbatch = math.prod(batch)
    gn = -(-n // c.BN)
    grid = (max(gn * -(-m // c.BM), 1), 1, max(min(nbatch, MAX_GRID_Z), 1))
    kern = None
    if m * n * nbatch:
        kern = _kernel(c, dt, nd, amode, bmode)
    plan = (shape, batch, m, k, n, nbatch, gn, kern, grid, _check_config(c))
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[(dt, sa, sb, amode, bmode, c)] = plan
    return plan


def matmul_arrays(xa, ya, dt: np.dtype):
    """``numpy.matmul(xa, ya)`` of two CudaArrays in dtype ``dt``: a new C-contiguous CudaArray."""
    sa, sb = xa.shape, ya.shape
    if not sa or not sb:
        from . import cpu as linalg
        linalg._plan(sa, sb)            # raises the CPU's ShapeError for 0-d operands
    if xa.dtype != dt:
        xa = contiguous_copy(xa, dt)
    if ya.dtype != dt:
        ya = contiguous_copy(ya, dt)
    a2 = xa.view_as(lambda l: l[None, :]) if len(sa) == 1 else xa
    b2 = ya.view_as(lambda l: l[:, None]) if len(sb) == 1 else ya
    ast, bst = a2.elem_strides(), b2.elem_strides()
    amode = _rows_fast(ast[-2], ast[-1], a2.shape[-2], a2.shape[-1])
    bmode = _rows_fast(bst[-2], bst[-1], b2.shape[-2], b2.shape[-1])
    c = config(dt)
    plan = _PLANS.get((dt, sa, sb, amode, bmode, c)) or _plan(dt, sa, sb, amode, bmode)
    shape, batch, m, k, n, nbatch, gn, kern, grid, nt = plan
    out = empty(shape, dt, xa.device_index)
    if kern is None:
        return out
    if a2.shape[:-2] != batch:
        a2 = a2.view_as(lambda l: np.broadcast_to(l, batch + l.shape[-2:]))
    if b2.shape[:-2] != batch:
        b2 = b2.view_as(lambda l: np.broadcast_to(l, batch + l.shape[-2:]))
    run(kern, grid, nt, (a2.storage.buf, a2.offset, *a2.elem_strides(),
                         b2.storage.buf, b2.offset, *b2.elem_strides(),
                         out.storage.buf, out.offset, *batch, m, n, k, nbatch, gn))
    return out


# --- the dispatcher's run (linalg/op.py checks the arguments) ------------------------------------

def _bind(name: str, call, dt):
    """The CUDA run of matmul or dot for result dtype ``dt`` (linalg/op.py's Linalg calls it)."""
    from . import cpu as linalg
    npdt, _ = linalg._kind_of(dt.np, name)      # the CPU's DTypeError (bool, uint16, ...)
    if name == "matmul":
        def run(x, y):
            return wrap(matmul_arrays(x._data, y._data, npdt))
    else:
        def run(x, y):
            linalg.check_dot_shapes(x._data, y._data)
            return wrap(matmul_arrays(x._data, y._data, npdt))
    return run


CUDA = SimpleNamespace(bind=_bind)
