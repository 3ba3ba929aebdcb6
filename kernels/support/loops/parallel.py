"""When a reduction's loop runs on threads, and how a full reduction is split into chunks.

Eager reductions (kernels/reduction/cpu.py) and the fused reduction epilogues of
compiled mode (dispatch_jit/compiler/codegen.py) both ask here: float sums and
products round differently per split, so one rule for both is what makes a fused
``(x * 2).sum()`` store eager's bits.
"""

from __future__ import annotations

import time

import numba
import numpy as np

__all__ = ["REDUCE_PARALLEL_MIN", "PARALLEL", "MIN_CHUNK", "use_parallel", "chunk_length", "full_chunks",
           "reduce_pieces", "splits_outputs"]

# From this many input elements on, a parallel reduction may run (where threads
# pay, see use_parallel): 4 MB of float32 take ~100 us on one core, waking
# the thread pool ~10-20 us; below that the serial kernel wins.
REDUCE_PARALLEL_MIN = 1 << 20
# None: use threads above the threshold if a one-time probe finds that two
# threads really run at once here; True/False: force (tests, benchmarks).
PARALLEL: bool | None = None
# A chunk of a full reduction is at least this long, so partials stay few.
MIN_CHUNK = 1 << 16


def _threads_run_in_parallel() -> bool:
    """Measure once whether two threads really run at once on this machine.

    Two CPU-bound, GIL-free NumPy loops on two threads take about as long as
    one on two real cores, and twice as long where the "cores" share one
    (measured on the 2-vCPU VMs: 2.3x, and an OpenMP prange sum of 1e7
    float32 ran 8x slower than the serial kernel).  About 40 ms, once.
    """
    import threading

    x = np.linspace(0.0, 1.0, 1 << 15)
    ys = [np.empty_like(x), np.empty_like(x)]

    def work(y):
        for _ in range(8):
            np.sin(x, out=y)

    def timed(nthreads):
        th = [threading.Thread(target=work, args=(ys[i],)) for i in range(nthreads)]
        t = time.perf_counter()
        for h in th:
            h.start()
        for h in th:
            h.join()
        return time.perf_counter() - t

    timed(1)   # warm up (clock ramp, first-touch)
    ones, twos = [], []
    for _ in range(7):
        ones.append(timed(1))
        twos.append(timed(2))
    # Best single run (what one core does undisturbed) against the median
    # pair (what two threads typically get): noise only biases towards serial.
    return sorted(twos)[3] < 1.3 * min(ones)


_PARALLEL_OK: list[bool] = []


def use_parallel() -> bool:
    """Whether reductions above REDUCE_PARALLEL_MIN run on threads (``PARALLEL``, else the probe)."""
    if PARALLEL is not None:
        return PARALLEL
    if numba.get_num_threads() < 2:
        return False
    if not _PARALLEL_OK:
        # twice: a VM whose vCPUs share a core passes one probe now and then
        _PARALLEL_OK.append(_threads_run_in_parallel() and _threads_run_in_parallel())
    return _PARALLEL_OK[0]


def chunk_length(R: int, pieces: int) -> int:
    """Elements per chunk when ``R`` reduced elements of one output are split for ``pieces`` tasks:
    at least MIN_CHUNK each (the caller splits only from 2 * MIN_CHUNK), the last shorter."""
    return -(-R // min(pieces, R // MIN_CHUNK))


def full_chunks(n: int) -> int:
    """How many chunks a full reduction of ``n`` contiguous elements folds separately and then
    merges in order (1: one serial run).  The eager kernel's ``chunks`` variant and the fused
    epilogue split exactly so."""
    if n < REDUCE_PARALLEL_MIN or not use_parallel():
        return 1
    # REDUCE_PARALLEL_MIN >= 2 * MIN_CHUNK: the eager plan of one output is always its chunks variant
    return -(-n // chunk_length(n, reduce_pieces()))


def reduce_pieces() -> int:
    """Tasks a parallel reduction is split into: four per thread, for balance on a busy machine."""
    return 4 * numba.get_num_threads()


def splits_outputs(K: int, R: int) -> bool:
    """Whether the eager kernel folds each of ``K`` > 1 outputs of ``R`` elements in chunks
    on threads (its ``chunks`` variant: few outputs, long ones), so that a loop folding each
    output whole would round differently."""
    return (K > 1 and K * R >= REDUCE_PARALLEL_MIN and K < reduce_pieces() and R >= 2 * MIN_CHUNK
            and use_parallel())
