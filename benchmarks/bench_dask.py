"""The Dask backend against its targets (issue 16), on a LocalCluster of 2 worker processes.

``f(a, b, c) = maximum((a*b + c)*2 - a, 0) * exp(-b)`` on float32 inputs that live on the
workers (persisted), the result persisted there too (nothing returns to the client):

* ``track_dask_numpy_over_dj_dask``: the same expression in dask.array over NumPy chunks /
  ``dj.compile(f)`` on Dask tensors, on the same cluster.  Target >= 3.
* ``track_dj_dask_over_dj_single_process``: ``dj.compile(f)`` on Dask tensors / ``dj.compile(f)`` on
  CPU tensors in this process.  Target <= 1.5.
* ``track_graph_tasks_over_chunks``: the compiled graph's tasks beyond its inputs' / the number
  of chunks, for a 1-op and a 12-op chain.  Target 1 (independent of the chain's length).

These are ``slow`` (test_benchmarks_import skips them); ``DaskSmall`` times a small chain on the
threaded scheduler.  ``python benchmarks/bench_dask.py N CHUNK`` prints the figures once.
Skipped without dask and distributed.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import dispatch_jit as dj


def f(a, b, c):
    return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)


def f_dask(a, b, c):
    import dask.array as da
    return da.maximum((a * b + c) * np.float32(2.0) - a, np.float32(0.0)) * da.exp(-b)


def chain(n):
    def g(a, b, c):
        x = a
        for _ in range(n):
            x = f(x, b, c)
        return x
    return g


def _need_dask():
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as e:
        raise NotImplementedError(f"dask is not installed: {e}") from None


def _best(fns, repeat: int) -> list:
    """Seconds per call of each of ``fns``, best of ``repeat`` interleaved rounds (shared machine)."""
    times = [[] for _ in fns]
    for _ in range(repeat + 1):
        for ts, fn in zip(times, fns):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [min(ts[1:]) for ts in times]      # round 0 warms up (compiles, imports on the workers)


class DaskTargets:
    """The issue's targets at N elements in chunks of CHUNK (the issue's full size is 2e8 in 1e7)."""

    slow = True
    timeout = 900
    N, CHUNK, repeat = 20_000_000, 1_000_000, 5

    def setup(self):
        _need_dask()
        import dask.array as da
        import distributed
        self.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                dashboard_address=None)
        self.client = distributed.Client(self.cluster)
        # chunk i of a, b and c on the same worker (rows of one array), as data a loader produced
        # together would be: this measures the computation, not moving inputs between workers
        x = da.random.default_rng(0).random((3, self.N), dtype=np.float32, chunks=(3, self.CHUNK))
        self.arrs = self.client.persist([x[0], x[1], x[2]])
        distributed.wait(self.arrs)
        self.ts = [dj.from_dask(a) for a in self.arrs]
        self.compiled = dj.compile(f)
        self.host = [dj.from_numpy(np.random.default_rng(i).random(self.N, dtype=np.float32)) for i in range(3)]
        self.host_compiled = dj.compile(f)

    def teardown(self):
        self.client.close()
        self.cluster.close()

    def _run(self, arr):
        import distributed
        out = self.client.persist(arr)
        distributed.wait(out)
        del out

    def times(self) -> dict:
        t_dask, t_dj, t_one = _best([lambda: self._run(f_dask(*self.arrs)),
                                     lambda: self._run(self.compiled(*self.ts).dask),
                                     lambda: self.host_compiled(*self.host)], self.repeat)
        return {"dask.array over NumPy": t_dask, "dj.compile on Dask": t_dj, "dj.compile single process": t_one}

    def track_dask_numpy_over_dj_dask(self):
        t = self.times()
        return t["dask.array over NumPy"] / t["dj.compile on Dask"]

    def track_dj_dask_over_dj_single_process(self):
        t = self.times()
        return t["dj.compile on Dask"] / t["dj.compile single process"]

    def track_graph_tasks_over_chunks(self):
        inputs = sum(len(a.__dask_graph__()) for a in self.arrs)
        chunks = self.arrs[0].npartitions
        extra = [len(dj.compile(chain(n))(*self.ts).dask.__dask_graph__()) - inputs for n in (1, 12)]
        return max(extra) / chunks


class DaskSmall:
    """A small compiled chain on Dask tensors, threaded scheduler: the per-graph overhead."""

    def setup(self):
        _need_dask()
        import dask.array as da
        self.ts = [dj.from_dask(da.random.default_rng(i).random(100_000, dtype=np.float32, chunks=25_000))
                   for i in range(3)]
        self.compiled = dj.compile(chain(4))
        self.compiled(*self.ts).compute(scheduler="threads")

    def time_compiled_chain_threads(self):
        self.compiled(*self.ts).compute(scheduler="threads")

    def time_build_graph(self):
        self.compiled(*self.ts)


if __name__ == "__main__":
    b = DaskTargets()
    if len(sys.argv) > 2:
        b.N, b.CHUNK = int(float(sys.argv[1])), int(float(sys.argv[2]))
    b.setup()
    try:
        t = b.times()
        for k, v in t.items():
            print(f"{k:28s} {v * 1e3:9.1f} ms")
        print(f"speedup vs dask.array/NumPy  {t['dask.array over NumPy'] / t['dj.compile on Dask']:.2f}x (target >= 3)")
        print(f"ratio vs single process      {t['dj.compile on Dask'] / t['dj.compile single process']:.2f} "
              f"(target <= 1.5)")
        print(f"tasks beyond inputs / chunks {b.track_graph_tasks_over_chunks():.2f} (chains of 1 and 12 ops)")
    finally:
        b.teardown()
