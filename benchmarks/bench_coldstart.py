"""Cold start: the first calls of a fresh process whose disk cache is warm.

Every eager kernel and fused loop is kept on disk (dispatch_jit/jit/diskcache.py), so a
process after the first loads its kernels (a few ms each) instead of compiling them
(0.1-0.5 s each).  Each sample here is a fresh interpreter over a temporary
``DISPATCH_JIT_CACHE_DIR`` that ``setup`` filled by running the same code once.

* ``WarmCache.timeraw_first_add``: the first ``dj.add`` of two float32 tensors after
  ``import dispatch_jit`` (its kernel loaded from disk).
* ``WarmCache.timeraw_first_mlp_step``: ``import dispatch_jit`` plus the first training step
  of a 2-layer MLP (N=512, D=20, H=64, 3 classes, tanh, log-softmax cross-entropy, SGD
  update): forward, backward and update, every kernel loaded from disk.
* ``WarmCache.track_first_mlp_step_dj_over_torch``: that step including the import, over the same
  step written in PyTorch including ``import torch`` (min of a few fresh interpreters each,
  in the same run); torch optional (skipped without it).

Targets (issue 14, 2-core machine, warm cache): first ``dj.add`` <= 50 ms after import;
first MLP step <= 1.0 s including import.  (Cold, with an empty cache: ~0.3-0.5 s and
~4 s, what every process paid before the eager kernels were cached.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile

# the step, in dispatch_jit (lib="dj") or in PyTorch (lib="torch")
_STEP = """
import numpy as np
rng = np.random.default_rng(0)
N, D, H, C = 512, 20, 64, 3
X = {lib}.tensor(rng.standard_normal((N, D)).astype(np.float32))
Y = {lib}.tensor(np.eye(C, dtype=np.float32)[rng.integers(0, C, N)])
W1 = {lib}.tensor((rng.standard_normal((D, H)) * 0.1).astype(np.float32), requires_grad=True)
b1 = {lib}.tensor(np.zeros(H, np.float32), requires_grad=True)
W2 = {lib}.tensor((rng.standard_normal((H, C)) * 0.1).astype(np.float32), requires_grad=True)
b2 = {lib}.tensor(np.zeros(C, np.float32), requires_grad=True)
loss = -({lib}.log_softmax({lib}.tanh(X @ W1 + b1) @ W2 + b2, {axis}=1) * Y).sum() / N
loss.backward()
with {lib}.no_grad():
    for p in (W1, b1, W2, b2):
        p -= 0.1 * p.grad
"""
STEP = _STEP.format(lib="dj", axis="axis")
TORCH_STEP = _STEP.format(lib="torch", axis="dim")

_ADD = "x = dj.tensor([1.0, 2.0], dtype=dj.float32)\n"
_TIMED = "import time\nt0 = time.perf_counter()\n{body}\nprint(time.perf_counter() - t0)\n"


def _env_line(cache_dir: str) -> str:
    return f"import os\nos.environ['DISPATCH_JIT_CACHE_DIR'] = {cache_dir!r}\n"


class WarmCache:
    """Fresh interpreters over a disk cache that setup() filled."""

    # every sample is a fresh interpreter (~1 s): a few samples, no warm-up calls
    repeat = (3, 5, 60.0)
    warmup_time = 0.0
    timeout = 300
    IMPORT_RUNS = 3     # fresh interpreters per track_ sample; the quick test sets 1

    def setup(self):
        self.dir = tempfile.mkdtemp(prefix="dj_bench_coldstart_")
        prime = _env_line(self.dir) + "import dispatch_jit as dj\n" + _ADD + "dj.add(x, x)\n" + STEP
        subprocess.run([sys.executable, "-c", prime], check=True, capture_output=True, timeout=300)

    def teardown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def timeraw_first_add(self):
        """First dj.add after import, its kernel loaded from the warm disk cache."""
        return "dj.add(x, x)", _env_line(self.dir) + "import dispatch_jit as dj\n" + _ADD

    def timeraw_first_mlp_step(self):
        """import dispatch_jit + the first MLP forward, backward and SGD update, warm cache."""
        return "import dispatch_jit as dj\n" + STEP, _env_line(self.dir)

    def _best(self, code: str) -> float:
        best = float("inf")
        for _ in range(self.IMPORT_RUNS):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 timeout=300)
            best = min(best, float(out.stdout.strip().splitlines()[-1]))
        return best



class WarmCacheVsTorch(WarmCache):
    """The warm first step against torch's import and first step, fresh interpreters both."""

    def setup(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            raise NotImplementedError("torch is not installed") from None
        super().setup()

    def track_first_mlp_step_dj_over_torch(self):
        """(import dispatch_jit + first MLP step, warm cache) / (import torch + the same step),
        min of IMPORT_RUNS fresh interpreters each."""
        dj_code = _env_line(self.dir) + _TIMED.format(body="import dispatch_jit as dj\n" + STEP)
        torch_code = _TIMED.format(body="import torch\n" + TORCH_STEP)
        return self._best(dj_code) / self._best(torch_code)

    track_first_mlp_step_dj_over_torch.unit = "ratio"


if __name__ == "__main__":      # python benchmarks/bench_coldstart.py: the figures, without asv
    b = WarmCache()
    b.setup()
    try:
        for name in ("timeraw_first_add", "timeraw_first_mlp_step"):
            stmt, setup = getattr(b, name)()
            code = setup + _TIMED.format(body=stmt)
            print(name, f"{b._best(code):.3f} s (min of {b.IMPORT_RUNS})")
    finally:
        b.teardown()
