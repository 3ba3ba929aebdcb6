"""The Dask key on every Dask scheduler: threads, processes, and dask.distributed (a LocalCluster of
two worker processes, one per module), including a worker that dies in the middle of a computation.
Every compute has a timeout, so a hang fails instead of stalling CI."""

import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dispatch_jit as dj

TIMEOUT = 120


def _expr(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def _inputs():
    rng = np.random.default_rng(7)
    arrs = [rng.standard_normal((40, 30)).astype(np.float32) for _ in range(3)]
    return arrs, [dj.from_dask(da.from_array(a, chunks=(10, 15))) for a in arrs]


def _expected(arrs):
    a, b, c = (dj.tensor(x) for x in arrs)
    e = _expr(a, b, c)
    return e.numpy(), e.sum(axis=1).numpy(), (a @ b.T).numpy()


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)
    c = distributed.Client(cluster, timeout=TIMEOUT)
    yield c
    c.close(timeout=TIMEOUT)
    cluster.close(timeout=TIMEOUT)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_local_schedulers(scheduler):
    arrs, (a, b, c) = _inputs()
    e, s, m = _expected(arrs)
    got = _expr(a, b, c)
    np.testing.assert_array_equal(got.compute(scheduler=scheduler).numpy(), e)
    np.testing.assert_allclose(got.sum(axis=1).compute(scheduler=scheduler).numpy(), s, rtol=1e-5)
    np.testing.assert_allclose((a @ b.T).compute(scheduler=scheduler).numpy(), m, rtol=1e-5, atol=1e-5)


def test_distributed_local_cluster(client):
    arrs, (a, b, c) = _inputs()
    e, s, m = _expected(arrs)
    got = _expr(a, b, c)
    # the workers are other processes, importing this checkout of dispatch_jit
    files = client.run(lambda: __import__("dispatch_jit").__file__)
    assert len(files) == 2 and set(files.values()) == {dj.__file__}
    np.testing.assert_array_equal(client.compute(got.dask).result(timeout=TIMEOUT), e)
    np.testing.assert_allclose(client.compute(got.sum(axis=1).dask).result(timeout=TIMEOUT), s, rtol=1e-5)
    np.testing.assert_allclose(client.compute((a @ b.T).dask).result(timeout=TIMEOUT), m, rtol=1e-5, atol=1e-5)
    # the default scheduler once a Client exists: .numpy() runs on the cluster too
    np.testing.assert_array_equal(got.numpy(), e)


def _die_once(block, marker="", parent=0):
    """Kill this worker process the first time any task runs it (a crash mid-computation); never the
    test's own process."""
    if os.getpid() == parent:
        return block
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return block
    os.close(fd)
    os._exit(1)


def test_a_killed_worker_still_gives_the_right_result(client, tmp_path):
    arrs, (a, b, c) = _inputs()
    e = _expected(arrs)[0]
    marker = str(tmp_path / "died")
    doomed = dj.from_dask(a.dask.map_blocks(_die_once, marker=marker, parent=os.getpid(), dtype=np.float32,
                                           meta=np.empty((0, 0), np.float32)))   # no call here
    got = client.compute(_expr(doomed, b, c).dask).result(timeout=TIMEOUT)
    assert os.path.exists(marker)                     # a worker did die ...
    np.testing.assert_array_equal(got, e)             # ... and Dask's retry gave the right answer


def test_compiled_chains_on_worker_processes_compile_once_per_worker(client):
    arrs, (a, b, c) = _inputs()
    a, b, c = (x.to("dask", chunks=(5, 30)) for x in (a, b, c))    # 8 contiguous chunks: one signature
    e = _expected(arrs)[0]
    f = dj.compile(_expr)
    for _ in range(2):              # the second run finds the program compiled on every worker
        np.testing.assert_array_equal(client.compute(f(a, b, c).dask).result(timeout=TIMEOUT), e)
    np.testing.assert_array_equal(f(a, b, c).compute(scheduler="processes").numpy(), e)
    from dispatch_jit.dask.compiled import program_info
    per_worker = client.run(program_info)
    calls = 0
    for infos in per_worker.values():
        assert len(infos) <= 1                     # one program, shipped as its source ...
        for info in infos.values():
            assert info.entries == 1 and info.compiles + info.disk_hits <= 1    # ... compiled once there
            calls += info.calls
    assert calls == 2 * a.dask.npartitions        # every chunk ran the fused loop on a worker
