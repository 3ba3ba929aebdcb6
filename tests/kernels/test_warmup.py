"""dj.warmup (kernels/warmup.py) and ``dispatch-jit warmup``: the kernels a call will look up are
compiled (or loaded) ahead of it, so the call itself compiles nothing."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import UnknownOperatorError
from dispatch_jit.jit import cache


def test_after_warmup_a_forward_and_backward_compiles_nothing():
    info = dj.warmup(["mul", "sub", "tanh", "sum"], ["float64"])
    assert info.skipped == []
    again = dj.warmup(["mul", "sub", "tanh", "sum"], ["float64"])
    assert (again.compiled, again.loaded) == (0, 0)        # all in memory: nothing to compile or load
    before = cache.totals()
    rng = np.random.default_rng(0)
    x = dj.tensor(rng.standard_normal((4, 5)))
    w = dj.tensor(rng.standard_normal(5), requires_grad=True)
    loss = (dj.tanh(x * w) - x).sum() * 0.5
    loss.backward()
    with dj.no_grad():
        w -= 0.1 * w.grad
    after = cache.totals()
    assert after["compiled"] == before["compiled"] and after["disk"] == before["disk"]
    assert np.allclose(loss.item(), 0.5 * (np.tanh(x.numpy() * (w.numpy() + 0.1 * w.grad.numpy())) - x.numpy()).sum())


def test_warmup_runs_eagerly_in_compiled_mode():
    with dj.execution_mode("compiled"):
        info = dj.warmup(["neg"], ["int32"])
    assert info.skipped == [] and dj.get_mode() == "eager"


def test_refused_dtypes_are_reported_and_unknown_names_rejected():
    info = dj.warmup(["bitwise_and", "add"], ["float64", "int16"])
    assert [s[:2] for s in info.skipped] == [("bitwise_and", "float64")]
    assert "does not support floating" in info.skipped[0][2]
    with pytest.raises(UnknownOperatorError, match=r"no op named 'addd'.*the ops it can warm up: .*\badd\b"):
        dj.warmup(["addd"])


# --- the command line, in fresh processes --------------------------------------------------------------

USE = textwrap.dedent("""
    import json
    import numpy as np
    import dispatch_jit as dj
    from dispatch_jit.jit import cache
    x = dj.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    b = dj.tensor(np.ones(4, np.float32), requires_grad=True)
    (dj.tanh(x + b) * 2.0).sum().backward()
    print(json.dumps({"totals": cache.totals(), "grad": b.grad.tolist()}))
""")


def test_cli_warmup_fills_the_disk_cache_that_a_fresh_process_loads(tmp_path):
    env = dict(os.environ, DISPATCH_JIT_CACHE_DIR=str(tmp_path / "cache"))

    def run(*args):
        p = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout

    cold = run("-m", "dispatch_jit", "warmup", "add", "mul", "tanh", "sum")
    assert "warmed up 4 ops x float32" in cold and "loaded from the disk cache" in cold
    assert f"disk cache: {tmp_path / 'cache'}" in cold
    n = int(cold.split("s: ")[1].split(" kernels compiled")[0])
    assert n > 0
    warm = run("-m", "dispatch_jit", "warmup", "add", "mul", "tanh", "sum")
    assert f": 0 kernels compiled, {n} loaded from the disk cache" in warm
    used = json.loads(run("-c", USE).strip().splitlines()[-1])
    assert used["totals"]["compiled"] == 0 and used["totals"]["disk"] > 0
    assert np.allclose(used["grad"], (2 * (1 - np.tanh(np.linspace(-1, 1, 12).reshape(3, 4) + 1) ** 2)).sum(0))
