"""What the asv suites share.

The suites import it relatively (``from ._common import ...``): asv imports ``benchmarks/`` as a
package, and so do ``tests/test_benchmarks_import.py`` and ``tests/tools/test_benchmark_names.py``.
"""

from __future__ import annotations

import statistics
import time


def torch_or_skip(threads: int = 2):
    """torch with ``threads`` intra-op threads (two: the cores dj's own kernels get on CI, so that
    a ratio compares like with like), or NotImplementedError, asv's documented way to skip a
    benchmark, where torch is not installed."""
    try:
        import torch
    except ImportError:
        raise NotImplementedError("torch is not installed") from None
    torch.set_num_threads(threads)
    return torch


def interleaved_ratio(a, b, samples: int) -> float:
    """The median of ``samples`` calls of ``a`` over the same of ``b``, the calls interleaved so
    that both see the same machine (a shared machine's load drifts; interleaved medians compare,
    separate runs do not)."""
    ta, tb = [], []
    for _ in range(samples):
        for fn, out in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(ta) / statistics.median(tb)
