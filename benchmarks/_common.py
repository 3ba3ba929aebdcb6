"""What the asv suites share.

The suites import it relatively (``from ._common import ...``): asv imports ``benchmarks/`` as a
package, and so do ``tests/test_benchmarks_import.py`` and ``tests/tools/test_benchmark_names.py``.
"""

from __future__ import annotations


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
