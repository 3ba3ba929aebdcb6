"""Compiled mode on Dask tensors (dispatch_jit/dask/compiled.py): under ``@dj.compile`` and the global
compiled mode, a fused region is one task per chunk running the generated loop, so the graph does not
grow with the chain's length; results equal eager CPU mode's (to rounding for reductions).  Workers in
other processes: test_schedulers.py."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dispatch_jit as dj
from dispatch_jit.dask.compiled import program_info


def chain(n):
    def f(a, b, c):
        x = a
        for _ in range(n):
            x = dj.maximum((x * b + c) * 2.0 - a, 0.0) * dj.exp(-b)
        return x
    return f


def _inputs(chunks=(10, 30)):
    rng = np.random.default_rng(3)
    arrs = [rng.standard_normal((40, 30)).astype(np.float32) for _ in range(3)]
    return [dj.from_dask(da.from_array(x, chunks=chunks)) for x in arrs], [dj.tensor(x) for x in arrs]


def _tasks(t) -> int:
    return len(t.dask.__dask_graph__())


@pytest.mark.parametrize("n", [1, 12])
def test_a_chain_is_one_task_per_chunk(n):
    (a, b, c), cpu = _inputs()
    f = chain(n)
    got = dj.compile(f)(a, b, c)
    inputs = sum(_tasks(x) for x in (a, b, c))
    assert _tasks(got) == inputs + a.dask.npartitions       # the chunks' tasks, whatever n is
    assert _tasks(f(a, b, c)) > inputs + n * a.dask.npartitions    # eagerly: a task per op per chunk
    np.testing.assert_array_equal(got.numpy(), f(*cpu).numpy())


def test_reductions_are_an_epilogue_per_chunk_and_a_tree():
    (a, b, c), (ca, cb, cc) = _inputs((10, 15))
    for red in (lambda x: x.sum(), lambda x: x.sum(axis=1), lambda x: dj.amax(x, axis=0, keepdims=True),
                lambda x: x.mean(axis=0)):
        tasks = []
        for n in (1, 6):
            f = chain(n)
            got, want = dj.compile(lambda a, b, c: red(f(a, b, c)))(a, b, c), red(f(ca, cb, cc))
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-6)
            tasks.append(_tasks(got))
        # one task per chunk for the loop and its epilogue (and da.reduction's pass-through chunk
        # step, which optimization fuses into it), then the tree: none of it grows with the chain
        assert tasks[0] == tasks[1] <= sum(_tasks(x) for x in (a, b, c)) + 2 * a.dask.npartitions + 8


def test_leaves_stay_and_regions_fuse_over_them():
    (a, b, c), (ca, cb, cc) = _inputs((10, 15))

    def f(a, b, c):
        m = (a * 0.1) @ b.T                        # matmul: a leaf; the regions around it fuse
        return dj.exp(-m) * 3.0 + m.sum(axis=0), dj.argmax(c, 1) + 1
    got, want = dj.compile(f)(a, b, c), f(ca, cb, cc)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)    # float32 blocks vs one BLAS call


def test_global_compiled_mode_fuses_what_it_materializes():
    (a, b, c), cpu = _inputs()
    f = chain(8)
    with dj.execution_mode("compiled"):
        y = f(a, b, c)
        assert _tasks(y) == sum(_tasks(x) for x in (a, b, c)) + a.dask.npartitions
        np.testing.assert_array_equal(y.numpy(), f(*cpu).numpy())
    z = f(a, b, c)                                 # eager mode: the graph of every op
    assert _tasks(z) > _tasks(y)


def test_a_program_compiles_once_per_process_and_signature():
    (a, b, c), cpu = _inputs()
    f = dj.compile(chain(2))
    before = {s: i.compiles + i.disk_hits for s, i in program_info().items()}
    f(a, b, c).numpy()
    f(dj.from_dask(a.dask * 2), b, c).numpy()     # other data, the same program: nothing new to compile
    after = program_info()
    new = [s for s in after if s not in before]
    assert len(new) == 1
    info = after[new[0]]
    assert info.calls == 2 * a.dask.npartitions and info.compiles + info.disk_hits <= 1 and info.entries == 1


def test_errors_are_eager_modes():
    (a, b, c), cpu = _inputs()
    with pytest.raises(dj.errors.DeviceMismatchError):
        dj.compile(lambda x, y: x + y)(a, cpu[0])
    with pytest.raises(dj.errors.DTypeError):
        dj.compile(lambda x: dj.bitwise_and(x, x))(a)
