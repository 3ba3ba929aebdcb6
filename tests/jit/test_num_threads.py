"""One thread policy for the process (dispatch_jit/jit/threads.py, kernels/linalg/gemm.py):
``dj.set_num_threads`` / ``dj.get_num_threads`` as PyTorch's, each BLAS product's thread count
from its sizes alone (so its bits too), and OpenBLAS's and libgomp's wait settings applied
where they still can be (dispatch_jit imported before NumPy; torch's private libgomp)."""

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DispatchJitError
from dispatch_jit.jit import fingerprint, threads
from dispatch_jit.kernels.linalg import gemm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_threads():
    old = dj.get_num_threads()
    yield
    dj.set_num_threads(old)


def test_set_and_get_num_threads_as_pytorchs(restore_threads):
    assert dj.get_num_threads() == threads.get_num_threads() >= 1
    dj.set_num_threads(1)
    assert dj.get_num_threads() == 1 and numba.get_num_threads() == 1
    assert threads.info()["num_threads"] == 1
    dj.set_num_threads(64)                      # above Numba's pool: the BLAS cap, Numba's pool size
    assert dj.get_num_threads() == 64 and numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_set_num_threads_refuses_what_is_not_a_positive_int(bad, restore_threads):
    before = dj.get_num_threads()
    with pytest.raises(DispatchJitError, match="positive int"):
        dj.set_num_threads(bad)
    assert dj.get_num_threads() == before


def test_the_blas_rule_is_a_function_of_the_sizes_and_the_cap():
    g = threads.BLAS_GRAIN
    assert threads.blas_threads(0, 4) == threads.blas_threads(g - 1, 4) == threads.blas_threads(g, 4) == 1
    assert threads.blas_threads(2 * g, 4) == 2 and threads.blas_threads(100 * g, 4) == 4
    assert threads.blas_threads(100 * g, 1) == 1
    # issue 14's MLP and a GPT block's products stay on one thread
    assert threads.blas_threads(2 * 512 * 20 * 64, 2) == threads.blas_threads(2 * 512 * 64 * 256, 2) == 1


_needs_numpy_openblas = pytest.mark.skipif(not gemm.LIBRARY, reason="NumPy bundles no OpenBLAS here")


def _blas_count() -> int:
    """The calling thread's count of NumPy's OpenBLAS, as the last product left it."""
    return ctypes.CDLL(gemm.LIBRARY).scipy_openblas_get_num_threads64_()


@_needs_numpy_openblas
@pytest.mark.parametrize("m,k,n", [(512, 20, 64), (64, 64, 64), (256, 512, 512), (1024, 1024, 1024)])
@pytest.mark.parametrize("cap", [1, 2, 3])
def test_each_product_runs_the_rules_threads(m, k, n, cap, restore_threads):
    dj.set_num_threads(cap)
    a, b = dj.ones(m, k), dj.ones(k, n)
    assert float((a @ b).numpy()[0, 0]) == k
    assert _blas_count() == threads.blas_threads(2 * m * n * k, cap)


@_needs_numpy_openblas
def test_a_products_bits_do_not_depend_on_what_ran_before(restore_threads):
    rng = np.random.default_rng(3)
    small = [dj.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in [(512, 20), (20, 64)]]
    big = [dj.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in [(512, 512), (512, 512)]]
    ref_small, ref_big = (small[0] @ small[1]).numpy(), (big[0] @ big[1]).numpy()
    for cap in (1, 2, 1, 2):
        dj.set_num_threads(cap)
        big[0] @ big[1]                                    # leaves the pool at the big product's count
        assert np.array_equal((small[0] @ small[1]).numpy(), ref_small)   # one thread at any cap
    dj.set_num_threads(2)
    assert np.array_equal((big[0] @ big[1]).numpy(), ref_big)


def test_the_gemm_kernels_stay_cacheable_and_fingerprint_their_implementation():
    # the stubs name their overloads, so the disk cache's key changes with the code behind them
    assert fingerprint.of_dispatcher(gemm.gemm) is not None
    assert fingerprint.of_value({np.dtype("f4"): 1}) == fingerprint.of_value({np.dtype("f4"): 1})


_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "torch":
    import torch
import dispatch_jit as dj
from dispatch_jit.jit import threads
x = dj.ones(1 << 19)
x + x
print(json.dumps({"info": threads.info(), "env": {k: os.environ.get(k) for k in ("OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT")},
                  "libgomp": sorted({l.split()[-1] for l in open("/proc/self/maps") if "libgomp" in l})}))
"""


def _probe(first: str, **env):
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT",
                                                               "OMP_WAIT_POLICY")}
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT), first], env={**clean, **env},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_openblas_workers_sleep_at_once_when_dispatch_jit_comes_before_numpy():
    r = _probe("dj")
    assert r["info"]["applied"]["OPENBLAS_THREAD_TIMEOUT"] == r["env"]["OPENBLAS_THREAD_TIMEOUT"] == "4"
    r = _probe("dj", OPENBLAS_THREAD_TIMEOUT="8")
    assert r["info"]["kept"]["OPENBLAS_THREAD_TIMEOUT"] == {"OPENBLAS_THREAD_TIMEOUT": "8"}


def test_torchs_own_libgomp_does_not_keep_our_spin_count_out():
    pytest.importorskip("torch")
    r = _probe("torch")
    # torch's private libgomp and the one Numba's OpenMP layer loads are two libraries
    if len(r["libgomp"]) < 2:
        pytest.skip(f"this torch shares Numba's libgomp: {r['libgomp']}")
    assert r["info"]["applied"]["GOMP_SPINCOUNT"] == r["env"]["GOMP_SPINCOUNT"] == "30000"
    assert r["info"]["layer"] == "omp"


def test_every_gemm_caller_holds_the_gil():
    # the thread count set before a product is the library's, not the thread's (OpenBLAS 0.3.31's
    # pthreads build): no other thread's product may come between the set and the gemm
    from dispatch_jit.kernels.linalg import cpu, product
    for disp in (gemm.gemm, gemm.dot_into, cpu._blas, product.product_into):
        assert not disp.targetoptions.get("nogil"), disp
