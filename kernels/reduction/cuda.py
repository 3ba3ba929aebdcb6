"""CUDA reduction kernels: sum, prod, mean, max, min, argmax, argmin, var, std, all, any, logsumexp.

The ops are the CPU's: every op's dtype rules, states, steps, merges, posts
and finals are read from ``table.REDUCTIONS`` (the same scalar snippets
the CPU kernels paste into their loops), so NaN propagation, first-occurrence
ties, the two-pass variance and logsumexp's shift match by construction.
This module only supplies the CUDA loop shapes around those snippets.

Layout.  The input is viewed with its kept axes first and its reduced axes
last (a transpose of the layout, no copy); adjacent dims that address memory
as one are merged and size-1 dims dropped.  Output element ``k`` then reduces
the ``R`` elements ``j = 0..R-1`` at ``base(k) + offset(j)``, both unravelled
from the strides (reduced axes stay in C order, so ``j`` is argmax's index).

Two loop shapes, chosen per call from (K outputs, R elements per output):

* rows (``R < threads per block``: short runs): one thread per output, a
  grid-stride loop over outputs; each thread runs every pass of the op in
  registers, as the CPU's row loop does.  One launch.
* tree (runs of at least a block: few outputs with long runs): pass 1 is a grid of ``nb x gy`` blocks;
  block (bx, by) walks outputs ``k = by, by + gy, ...``; each thread folds a
  grid-stride partial of output k's run, the block merges its threads'
  partials with a shared-memory tree (on real hardware the last 32 lanes
  merge with ``cuda.shfl_down_sync``; the simulator has no shuffles, so its
  tree goes down to one lane), and thread 0 writes one partial per block.
  Pass 2 merges output k's ``nb`` partials with one block.  When ``nb == 1``
  pass 1 finishes the output itself (one launch).  Ops with two sweeps (var:
  mean, then squared deviations; logsumexp: max, then sum of exp) run this
  once per sweep, the first sweep's states kept in per-output buffers.

Accumulation: in the CPU's accumulator dtype (``spec.acc``): float32 sums,
means, variances and logsumexp accumulate in float64 (and the tree is
pairwise on top of it), ints in int64, complex in complex128; max/min in the
input dtype.  bool inputs are read as uint8 and float16 inputs as float32
(converted in the kernel as they load, as the CPU's kernel dtype says).
float16 results are stored by a float16 conversion of the float64/float32
value.  bfloat16 inputs reduce exactly as float32 ones (each word widened as
it loads, no float32 copy), and a float32 result is rounded to bfloat16's
word once at the store: the CPU's bfloat16 reductions (cpu.py) do the same
over float32's kernels.

>>> plan_variant(1, 100), plan_variant(50, 3)      # in the simulator (32-thread blocks)
('tree', 'rows')
"""

from __future__ import annotations

import math
import threading
from types import SimpleNamespace

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.cuda.array import empty, from_host
from dispatch_jit.cuda.codegen import compile_cuda, grid_stride
from dispatch_jit.cuda.copy import astype
from dispatch_jit.cuda.launch import BLOCKS_PER_SM, launch, run
from dispatch_jit.cuda.runtime import device_attributes, is_simulator
from dispatch_jit.cuda.simwarp import sim_shfl_down_sync
from dispatch_jit.cuda.words import words
from dispatch_jit.dtypes import BF16_STORAGE

from . import cpu as reduction
from . import table as reduction_table

__all__ = ["CUDA", "plan_variant", "kernel_source", "compiled_kernels", "launch_config"]

_BOOL = np.dtype(np.bool_)
_F32 = np.dtype(np.float32)
# elements each thread folds before the block tree, on hardware (sizes the grid)
_PER_THREAD = 4
# the most partials per output: pass 2 is one block, so it stays one sweep
_MAX_PARTIALS = 1024
# Knobs (tests): threads per tree block (a power of two; None: 256 on hardware, 32 in the
# simulator) and warp shuffles for the last 32 lanes (None: on hardware only; True in the
# simulator runs them through an emulation, dispatch_jit/cuda/simwarp.py, since it has none).
THREADS: int | None = None
SHUFFLES: bool | None = None


# ---------------------------------------------------------------- launch planning

def _threads(device_index: int) -> int:
    if THREADS is not None:
        return THREADS
    a = device_attributes(device_index)
    return 32 if a.simulated else min(256, a.max_threads)


def plan_variant(K: int, R: int, device_index: int = 0) -> str:
    """'tree' (blocks per output) for runs of at least a block's threads, else 'rows' (a thread per output).

    A run shorter than a block would leave most of a tree block's threads idle and pay
    its barriers; one thread folds it faster (the simulator's barriers are slow too).
    """
    return "tree" if R >= _threads(device_index) else "rows"


def launch_config(K: int, R: int, device_index: int = 0) -> tuple[int, int, int]:
    """Tree launch: (threads per block, nb blocks per output, gy output rows of blocks)."""
    a = device_attributes(device_index)
    tpb = _threads(device_index)
    cap = a.sm_count * (1 if a.simulated else BLOCKS_PER_SM)
    gy = max(1, min(K, cap, 65535))
    per_block = tpb * (1 if a.simulated else _PER_THREAD)
    nb = max(1, min(-(-R // per_block), cap // gy, _MAX_PARTIALS))
    return tpb, nb, gy


# ---------------------------------------------------------------- op description

class _Op:
    """What the generated source of one (op, input dtype) needs, from the CPU's table."""

    def __init__(self, name: str, dt: np.dtype):
        spec = reduction_table.REDUCTIONS[name]
        self.name, self.dt, self.spec = name, dt, spec
        self.kname = spec.kernel or name
        kspec = reduction_table.REDUCTIONS[self.kname]
        # bfloat16 reduces as float32 does (its words widened as they load), the result rounded once
        self.words = dt == BF16_STORAGE
        self.kin = _F32 if self.words else reduction_table.kernel_dtype(kspec, dt)
        self.acc = kspec.acc(self.kin)
        self.passes = kspec.passes(self.kin)
        self.states = reduction_table.state_dtypes(kspec, self.kin)     # [(name, dtype)] over all passes
        self.rdt = reduction_table.result_dtype(name, dt) if self.words else spec.result(dt)
        self.kout = kspec.result(self.kin)
        self.arg = float(spec.arg)
        self.static_arg = spec.static_arg
        final = kspec.final
        # the derived ops' host posts, as device expressions (mean = sum / n, std = sqrt(var))
        if name == "mean":
            final = f"({final}) / n"
        elif name == "std":
            final = f"SQRT({final})"
        self.final = final
        self.cplx = self.acc.kind == "c"

    def globals(self) -> dict:
        acc, sim = self.acc, is_simulator()
        info = np.finfo(acc) if acc.kind in "fc" else np.iinfo(acc)
        low, high = (-math.inf, math.inf) if acc.kind in "fc" else (int(info.min), int(info.max))
        if sim:   # NumPy scalars: inf/nan on overflow and log(0), where Python's math raises
            exp, log, sqrt = np.exp, np.log, np.sqrt
        else:
            import cmath
            exp, log = (cmath.exp, cmath.log) if self.cplx else (math.exp, math.log)
            sqrt = math.sqrt
        g = {"ACC": acc.type, "KIN": self.kin.type, "LOW": low, "HIGH": high, "INF": math.inf,
             "EXP": exp, "LOG": log, "SQRT": sqrt, "_dt": _F32.type if self.words else self.rdt.type,
             **{f"T_{s}": sdt.type for s, sdt in self.states}}
        for s, sdt in self.states:
            to, back = _shuffle_types(sdt)
            if to is not None:
                g[f"SH_{s}"], g[f"SB_{s}"] = to, back
        return g

    def state_dtype(self, s: str) -> np.dtype:
        return dict(self.states)[s]

    def shufflable(self, p) -> bool:
        return all(_shuffle_types(sdt)[0] is not None for s, sdt in self.states if s in {t for t, _, _ in p.states})


def _shuffle_types(sdt: np.dtype):
    """(to, back) converting a state for cuda.shfl_down_sync (i4, i8, f4, f8 only); (None, None): no shuffle."""
    if sdt.kind == "c":
        return None, None
    if sdt in (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64)):
        return sdt.type, sdt.type
    if sdt == _BOOL:
        return np.int32, None     # back with != 0
    if sdt.kind in "iu" and sdt.itemsize <= 2:
        return np.int32, sdt.type
    if sdt.kind in "iu":       # uint32 widens, uint64 travels as its int64 bits
        return np.int64, sdt.type
    return None, None


def _shfl_name() -> str:
    return "_SHFL_DOWN" if is_simulator() else "cuda.shfl_down_sync"


def _fix(code: str) -> str:
    # the CPU's complex snippets spell np.exp / np.log: CUDA takes the globals chosen per target
    return code.replace("np.exp(", "EXP(").replace("np.log(", "LOG(")


def _ind(code: str, level: int) -> str:
    pad = "    " * level
    return "".join(pad + line + "\n" for line in code.splitlines() if line.strip())


def _names(states, other=None):
    d = {s: f"v_{s}" for s, _ in states}
    if other is not None:
        d.update({f"{s}_o": f"o_{s}" for s in other})
    return d


def _unravel(prefix: str, n: int, linear: str, base: str) -> str:
    """Lines adding the strided offset of ``linear`` over dims {prefix}n0.. to ``base``."""
    if n == 0:
        return ""
    lines = [f"_r = {linear}"]
    for d in reversed(range(n)):
        if d:
            lines += [f"_c = _r % {prefix}n{d}", f"_r = _r // {prefix}n{d}", f"{base} += _c * {prefix}s{d}"]
        else:
            lines.append(f"{base} += _r * {prefix}s{d}")
    return "\n".join(lines) + "\n"


def _store_out(op: _Op) -> str:
    final = _fix(op.final.format(**_names(op.states)))
    if op.rdt == _BOOL:
        expr = final if op.kout == _BOOL else f"({final}) != 0"
    elif op.rdt == BF16_STORAGE:      # float32's result, then its bfloat16 word (two roundings, as the CPU's)
        expr = f"_bf16_store(_dt({final}))"
    else:
        expr = f"_dt({final})"
    return f"out[k] = {expr}\n"


def _init(p) -> str:
    return "".join(f"v_{s} = T_{s}({v})\n" for s, _, v in p.states)


def _merge_code(op: _Op, p, other: str) -> str:
    """Load the other partial from ``other`` (a format with {s}) into o_*, merge into v_*."""
    own = [s for s, _, _ in p.states]
    loads = "".join(f"o_{s} = {other.format(s=s)}\n" for s in own)
    return loads + _fix(p.merge.format(**_names(op.states, other=own))) + "\n"


def _tree(op: _Op, p, tpb: int, shuffles: bool) -> str:
    """Block-level merge of the v_* of all threads; lane 0 ends with the block's states."""
    own = [s for s, _, _ in p.states]
    code = "".join(f"sh_{s}[tid] = v_{s}\n" for s in own) + "cuda.syncthreads()\n"
    # complex states have no shuffle: their tree goes down to one lane, as in the simulator
    stop = 32 if shuffles and tpb >= 64 and op.shufflable(p) else 1
    step = tpb // 2
    while step >= stop:
        body = _merge_code(op, p, f"sh_{{s}}[tid + {step}]") + "".join(f"sh_{s}[tid] = v_{s}\n" for s in own)
        code += f"if tid < {step}:\n{_ind(body, 1)}cuda.syncthreads()\n"
        step //= 2
    code += "".join(f"v_{s} = sh_{s}[tid]\n" for s in own)
    if stop == 32:
        # the last 32 partials sit in lanes 0..31 of warp 0: shuffle them down
        body = ""
        for off in (16, 8, 4, 2, 1):
            loads = ""
            for s in own:
                got = f"{_shfl_name()}(0xffffffff, SH_{s}(v_{s}), {off})"
                loads += f"o_{s} = {got} != 0\n" if op.state_dtype(s) == _BOOL else f"o_{s} = SB_{s}({got})\n"
            body += loads + _fix(p.merge.format(**_names(op.states, other=own))) + "\n"
        code += f"if tid < 32:\n{_ind(body, 1)}"
    return code


def _finish(op: _Op, pi: int) -> str:
    """Thread 0 after a full merge: the pass's post, its states kept, the output if it was the last pass."""
    p = op.passes[pi]
    code = _fix(p.post.format(**_names(op.states))) + "\n"
    last = pi == len(op.passes) - 1
    if not last:
        code += "".join(f"st_{s}[k] = v_{s}\n" for s, _, _ in p.states)
    else:
        code += _store_out(op)
    return code


def _prior(op: _Op, pi: int) -> str:
    """Load the states of the passes before pass pi (their steps and the final read them)."""
    return "".join(f"v_{s} = st_{s}[k]\n" for q in op.passes[:pi] for s, _, _ in q.states)


def _header(op: _Op, name: str, params: list[str]) -> str:
    return f"def {name}({', '.join(params)}):\n" + _ind(_prelude(op), 1)


def _prelude(op: _Op) -> str:
    """A kernel's first lines (column 0): ``inv`` where the op's steps read it."""
    if "inv" in op.spec.final or any("inv" in p.step for p in op.passes):
        return "inv = arg != 0.0\n"
    return ""


def _layout_params(nk: int, nr: int) -> list[str]:
    return (["buf", "off"] + [f"kn{d}" for d in range(nk)] + [f"ks{d}" for d in range(nk)]
            + [f"rn{d}" for d in range(nr)] + [f"rs{d}" for d in range(nr)] + ["K", "R", "n", "arg"])


def _load_x(op: _Op) -> str:
    return "x = ACC(_bf16_load(buf[idx]))\n" if op.words else "x = ACC(KIN(buf[idx]))\n"


def _source_rows(op: _Op, nk: int, nr: int) -> str:
    params = _layout_params(nk, nr) + ["out"]
    body = "base = off\n" + _unravel("k", nk, "k", "base")
    for p in op.passes:
        loop = "idx = base\n" + _unravel("r", nr, "j", "idx") + _load_x(op) + _fix(p.step.format(**_names(op.states)))
        body += _init(p) + f"for j in range(R):\n{_ind(loop, 1)}" + _fix(p.post.format(**_names(op.states))) + "\n"
    body += _store_out(op)
    return grid_stride(f"red_rows({', '.join(params)})", "K", _ind(body, 0), index="k", prelude=_prelude(op))


def _source_partial(op: _Op, pi: int, nk: int, nr: int, tpb: int, direct: bool, shuffles: bool) -> str:
    """Pass 1 of sweep pi: per block, a grid-stride partial per thread, merged by the block tree."""
    p = op.passes[pi]
    own = [s for s, _, _ in p.states]
    params = (_layout_params(nk, nr) + ["nb", "out"] + [f"st_{s}" for s, _ in op.states]
              + [f"part_{s}" for s in own])
    shared = "".join(f"sh_{s} = cuda.shared.array({tpb}, T_{s})\n" for s in own)
    loop = "idx = base\n" + _unravel("r", nr, "j", "idx") + _load_x(op) + _fix(p.step.format(**_names(op.states)))
    body = ("base = off\n" + _unravel("k", nk, "k", "base") + _prior(op, pi) + _init(p)
            + f"j = np.int64(bx) * {tpb} + tid\n"
            + f"while j < R:\n{_ind(loop, 1)}    j += nb * {tpb}\n" + _tree(op, p, tpb, shuffles))
    if direct:
        done = _finish(op, pi)
    else:
        done = "".join(f"part_{s}[k * nb + bx] = v_{s}\n" for s in own)
    body += f"if tid == 0:\n{_ind(done, 1)}cuda.syncthreads()\n"   # shared arrays are reused for the next k
    return (_header(op, "red_partial", params) + _ind(shared, 1)
            + "    tid = cuda.threadIdx.x\n    bx = cuda.blockIdx.x\n    k = cuda.blockIdx.y\n"
            + f"    while k < K:\n{_ind(body, 2)}        k += cuda.gridDim.y\n")


def _source_combine(op: _Op, pi: int, tpb: int, shuffles: bool) -> str:
    """Pass 2 of sweep pi: one block per output merges its nb partials, then finishes the sweep."""
    p = op.passes[pi]
    own = [s for s, _, _ in p.states]
    params = (["K", "n", "arg", "nb", "out"] + [f"st_{s}" for s, _ in op.states] + [f"part_{s}" for s in own])
    shared = "".join(f"sh_{s} = cuda.shared.array({tpb}, T_{s})\n" for s in own)
    body = (_prior(op, pi) + _init(p) + "t = tid\n"
            + f"while t < nb:\n{_ind(_merge_code(op, p, 'part_{s}[k * nb + t]'), 1)}    t += {tpb}\n"
            + _tree(op, p, tpb, shuffles) + f"if tid == 0:\n{_ind(_finish(op, pi), 1)}cuda.syncthreads()\n")
    return (_header(op, "red_combine", params) + _ind(shared, 1)
            + "    tid = cuda.threadIdx.x\n    k = cuda.blockIdx.x\n"
            + f"    while k < K:\n{_ind(body, 2)}        k += cuda.gridDim.x\n")


# ---------------------------------------------------------------- compiled kernels, memoized

_KERNELS: dict = {}
_LOCK = threading.Lock()


def kernel_source(name: str, dtype, variant: str, nk: int = 0, nr: int = 1, pi: int = 0, tpb: int = 32,
                  direct: bool = True, shuffles: bool | None = None) -> str:
    """The generated source of one kernel (for inspection and tests).

    variant: "rows", "partial" (tree pass 1 of sweep ``pi``) or "combine" (tree pass 2).
    shuffles: warp shuffles for the last 32 lanes; default: on real hardware only.
    """
    op = _Op(name, np.dtype(getattr(dtype, "np", dtype)))
    if shuffles is None:
        shuffles = _shuffles()
    if variant == "rows":
        return _source_rows(op, nk, nr)
    if variant == "partial":
        return _source_partial(op, pi, nk, nr, tpb, direct, shuffles)
    return _source_combine(op, pi, tpb, shuffles)


def _kernel(op: _Op, variant: str, nk: int, nr: int, pi: int, tpb: int, direct: bool):
    shuffles = _shuffles()
    key = (op.name, op.dt, variant, nk, nr, pi, tpb, direct, shuffles)
    k = _KERNELS.get(key)
    if k is None:
        if variant == "rows":
            src, fn = _source_rows(op, nk, nr), "red_rows"
        elif variant == "partial":
            src, fn = _source_partial(op, pi, nk, nr, tpb, direct, shuffles), "red_partial"
        else:
            src, fn = _source_combine(op, pi, tpb, shuffles), "red_combine"
        g = _GLOBALS.get((op.name, op.dt))
        if g is None:
            g = _GLOBALS[(op.name, op.dt)] = op.globals()
            if is_simulator():
                g["_SHFL_DOWN"] = sim_shfl_down_sync
        k = _KERNELS[key] = compile_cuda(src, fn, g)
    return k


_GLOBALS: dict = {}


def _shuffles() -> bool:
    return (not is_simulator()) if SHUFFLES is None else SHUFFLES


def compiled_kernels() -> list[tuple]:
    """(op, dtype name, variant, kept dims, reduced dims, sweep, threads, direct) of every kernel built so far."""
    return [(n, "bfloat16" if dt == BF16_STORAGE else dt.name, *rest) for n, dt, *rest in _KERNELS]


# ---------------------------------------------------------------- host side

def _merge_dims(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Drop size-1 dims and merge neighbours that address memory as one (C order kept)."""
    out: list[tuple[int, int]] = []
    for n, s in dims:
        if n == 1:
            continue
        if out and out[-1][1] == n * s:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def _reduce(op: _Op, a, axes, keepdims: bool, arg: float):
    nd = a.ndim
    axes_t = tuple(range(nd)) if axes is None else axes
    kept = [d for d in range(nd) if d not in axes_t]
    red = sorted(axes_t)
    out_shape = (tuple(1 if d in axes_t else a.shape[d] for d in range(nd)) if keepdims
                 else tuple(a.shape[d] for d in kept))
    K = math.prod(a.shape[d] for d in kept)
    R = math.prod(a.shape[d] for d in red)
    dev = a.device_index
    if K == 0 or R == 0:
        rdt = _F32 if op.rdt == BF16_STORAGE else op.rdt
        host = reduction._empty_result(op.spec, a.shape, axes_t, out_shape, rdt, R)
        host = bf16.cast(host, op.rdt) if rdt is not op.rdt else host
        # (from_host goes through np.ascontiguousarray, which makes a 0-d array 1-d: reshape back)
        return from_host(host.reshape(-1), dev).view_as(lambda l: l.reshape(out_shape))
    st = a.elem_strides()
    kd = _merge_dims([(a.shape[d], st[d]) for d in kept])
    rd = _merge_dims([(a.shape[d], st[d]) for d in red])
    nk, nr = len(kd), len(rd)
    lay = [words(a.storage.buf), a.offset, *[n for n, _ in kd], *[s for _, s in kd], *[n for n, _ in rd],
           *[s for _, s in rd], K, R, R, arg]
    out = empty(out_shape, op.rdt, dev)
    ob = words(out.storage.buf)
    if plan_variant(K, R, dev) == "rows":
        launch(_kernel(op, "rows", nk, nr, 0, 0, True), K, dev, *lay, ob)
        return out
    tpb, nb, gy = launch_config(K, R, dev)
    direct = nb == 1
    # scratch arrays stay referenced until every launch is queued: a dropped one goes back to the
    # caching allocator at once (stream order makes its reuse by later launches safe, not before)
    keep = []

    def scratch(n, sdt):
        keep.append(empty((n,), sdt, dev))
        return keep[-1].storage.buf

    sbufs = {s: (scratch(K, sdt) if len(op.passes) > 1 else ob) for s, sdt in op.states}
    for pi, p in enumerate(op.passes):
        own = [s for s, _, _ in p.states]
        sts = [sbufs[s] for s, _ in op.states]
        parts = [scratch(K * nb, sdt) if not direct else ob for s, sdt in op.states if s in own]
        run(_kernel(op, "partial", nk, nr, pi, tpb, direct), (nb, gy), tpb, (*lay, nb, ob, *sts, *parts))
        if not direct:
            gx = max(1, min(K, gy))
            run(_kernel(op, "combine", 0, 0, pi, tpb, False), gx, tpb, (K, R, arg, nb, ob, *sts, *parts))
    return out


def _bind(name: str, call, kernel_name: str):
    """The CUDA ``reduce`` of one reduction op (reduction/op.py's Reduction calls it)."""
    ops: dict = {}

    def op_for(dt):
        o = ops.get(dt)
        if o is None:
            reduction_table.result_dtype(name, dt)
            o = ops[dt] = _Op(name, dt)
        return o

    def reduce(a, axes, keepdims, to, kw):
        if to is not None:
            reduction_table.result_dtype(name, to)
            a = astype(a, to)
        op = op_for(a.dtype)
        arg = float(kw.pop(op.static_arg)) if op.static_arg in kw else op.arg
        return _reduce(op, a, axes, keepdims, arg)
    return reduce


CUDA = SimpleNamespace(bind=_bind)
