"""The eager kernels of the GPT's attention (issue 26 part 5) at its shapes, against PyTorch at
one thread: softmax over the last axis of (16, 4, 32, 32) float32 under a causal mask's -inf,
its backward (``_softmax_backward_data``), log_softmax on the same rows, and the cats of the
attention's ``split`` backward: three (16, 32, 64) pieces along the last axis, one of them a
transposed (non-contiguous) view, and (16, 32, 128) beside (16, 32, 64).

Target: each ``track_dj_over_torch`` <= 1.0 (dj eager GPT step <= 1.0 x torch eager).  The
ratio is the median of interleaved calls over the same (tools: _common.interleaved_ratio).
Measured on a loaded 2-core machine (medians of interleaved calls): softmax 3.1 -> 1.7,
log_softmax 3.4 -> 2.4, softmax backward 3.6, cat of three 2.5 -> 2.2, cat 128 + 64 1.85 -> 1.75,
the cat with a strided piece 0.9.  Later (2026-11-29, minima of 30 x 20 interleaved calls, load 3.5-4):
softmax backward 5.4-5.9 -> 4.6 with kernels/nn/rows_bwd.py (eight rows' dots interleaved; the bare
kernel 71 -> 52 us, torch's 24).
"""

from __future__ import annotations

import numpy as np

from ._common import interleaved_ratio, torch_or_skip

CASES = ["softmax", "log_softmax", "softmax_backward", "cat3", "cat3_strided", "cat2"]


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 32, 32)).astype(np.float32)
    x[..., np.triu(np.ones((32, 32), bool), 1)] = -np.inf
    g = rng.standard_normal((16, 4, 32, 32)).astype(np.float32)
    p64 = rng.standard_normal((16, 32, 64)).astype(np.float32)
    p128 = rng.standard_normal((16, 32, 128)).astype(np.float32)
    t64 = rng.standard_normal((16, 64, 32)).astype(np.float32)      # transposed: a strided piece
    return x, g, p64, p128, t64


def _dj_runs():
    import dispatch_jit as dj
    x, g, p64, p128, t64 = (dj.tensor(a) for a in _inputs())
    y = dj.softmax(x, -1)
    s = t64.transpose(1, 2)
    aten = dj.ops.aten
    return {"softmax": lambda: dj.softmax(x, -1), "log_softmax": lambda: dj.log_softmax(x, -1),
            "softmax_backward": lambda: aten._softmax_backward_data(g, y, 3),
            "cat3": lambda: dj.cat([p64, p64, p64], 2), "cat3_strided": lambda: dj.cat([p64, s, p64], 2),
            "cat2": lambda: dj.cat([p128, p64], 2)}


def _torch_runs(torch):
    x, g, p64, p128, t64 = (torch.from_numpy(a) for a in _inputs())
    y = torch.softmax(x, -1)
    s = t64.transpose(1, 2)
    aten = torch.ops.aten
    return {"softmax": lambda: torch.softmax(x, -1), "log_softmax": lambda: torch.log_softmax(x, -1),
            "softmax_backward": lambda: aten._softmax_backward_data(g, y, 3, torch.float32),
            "cat3": lambda: torch.cat([p64, p64, p64], 2), "cat3_strided": lambda: torch.cat([p64, s, p64], 2),
            "cat2": lambda: torch.cat([p128, p64], 2)}


class AttentionRows:
    params = [CASES]
    param_names = ["case"]
    unit = "ratio"
    timeout = 300
    samples = 200

    def setup(self, case):
        self.dj = _dj_runs()[case]
        self.dj()
        self.torch = None
        try:
            self.torch = _torch_runs(torch_or_skip(1))[case]
        except NotImplementedError:
            pass

    def track_dj_over_torch(self, case):
        if self.torch is None:
            raise NotImplementedError("torch is not installed")
        return interleaved_ratio(self.dj, self.torch, self.samples)

    def time_dj(self, case):
        self.dj()
