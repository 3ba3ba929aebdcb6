"""Fuzzers: random op graphs in eager, @dj.compile and global compiled mode against NumPy and PyTorch.

``python -m pytest tests/fuzz`` runs them with the suite's deterministic hypothesis profile and a fixed
example budget (about 3 minutes on the 2-core machines); ``DISPATCH_JIT_FUZZ_EXAMPLES=N`` runs N examples
per fuzz test, ``DISPATCH_JIT_FUZZ_SHRINK=1`` lets hypothesis shrink a failure (slow: every shrink step
may compile), and ``python tests/fuzz/longrun.py`` runs thousands of graphs and collects every distinct
mismatch instead of stopping at the first.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def examples(default: int) -> int:
    """The example budget of one fuzz test."""
    return int(os.environ.get("DISPATCH_JIT_FUZZ_EXAMPLES", default))
