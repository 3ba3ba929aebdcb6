"""Smoke test of an installed dispatch_jit wheel, run by .ci/run from outside the repository.

It proves that the installed copy is complete (every subpackage, kernels as
dispatch_jit.kernels, nothing as a bare top-level ``kernels``) and works:
an eager op, a compiled function cold then warm from the disk cache, the
global lazy mode, the console script.  Exits non-zero with a message on the
first failure.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def check(cond, msg):
    if not cond:
        sys.exit(f"wheel smoke test FAILED: {msg}")


def installed_where():
    import dispatch_jit
    repo = Path(sys.argv[1]).resolve()
    here = Path(dispatch_jit.__file__).resolve()
    check(repo not in here.parents, f"dispatch_jit imported from the source tree ({here}), not the wheel")
    check(Path(sys.prefix).resolve() in here.parents, f"dispatch_jit at {here} is not in this environment")
    for sub in ("autograd", "compiler", "cuda", "kernels"):
        spec = importlib.util.find_spec(f"dispatch_jit.{sub}")
        check(spec is not None and Path(spec.origin).resolve().is_relative_to(here.parent),
              f"dispatch_jit.{sub} missing from the wheel")
    check(importlib.util.find_spec("kernels") is None, "the wheel installs a bare top-level 'kernels'")
    return here


COMPILED = """
import numpy as np, dispatch_jit as dj
a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
f = dj.compile(lambda x, y: dj.maximum((x * y + x) * 2.0 - y, 0.0) * dj.exp(-y))
got = f(dj.from_numpy(a), dj.from_numpy(a + 1)).numpy()
want = np.maximum((a * (a + 1) + a) * 2 - (a + 1), 0) * np.exp(-(a + 1))
assert np.allclose(got, want, rtol=1e-5), (got, want)
with dj.execution_mode("compiled"):
    z = (dj.from_numpy(a) * 3.0 - 1.0).sum().item()
assert abs(z - float((a * 3 - 1).sum())) < 1e-3, z
print(f.cache_info().compiles, f.cache_info().disk_hits)
"""


def compiled_cold_then_warm():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DISPATCH_JIT_CACHE_DIR=cache)
        runs = [subprocess.run([sys.executable, "-c", COMPILED], env=env, capture_output=True, text=True)
                for _ in range(2)]
        for r in runs:
            check(r.returncode == 0, f"compiled mode failed:\n{r.stderr}")
        cold, warm = (r.stdout.split() for r in runs)
        check(cold == ["1", "0"] and warm == ["0", "1"], f"disk cache: cold {cold}, warm {warm} (compiles, disk hits)")


def main():
    here = installed_where()
    import numpy as np
    import dispatch_jit as dj
    x = dj.tensor([1.0, 2.0], dtype=dj.float32)
    w = dj.tensor([3.0, 4.0], dtype=dj.float32, requires_grad=True)
    dj.add(x, w).sum().backward()
    check(np.array_equal(w.grad.numpy(), [1.0, 1.0]), f"eager autograd gave {w.grad}")
    compiled_cold_then_warm()
    exe = Path(sys.executable).parent / "dispatch-jit"
    r = subprocess.run([str(exe), "ops", "aten::add"], capture_output=True, text=True)
    check(r.returncode == 0 and "aten::add" in r.stdout, f"console script failed:\n{r.stdout}{r.stderr}")
    print(f"wheel smoke test passed: {here.parent}")


if __name__ == "__main__":
    main()
