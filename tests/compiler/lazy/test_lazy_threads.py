"""Compiled (lazy) mode and threads: a pending graph reads its inputs as they were when the ops
were recorded, whatever other threads write (in place, out=, item assignment, copy_, through a
view, in eager or compiled mode); another thread's pending tensors can be read safely while
their thread keeps recording.  Tiny tensors, a few hundred rounds each, deterministic checks:
the threads take turns through barriers, so each round has one right answer, eager mode's."""

import threading

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.lazy import LazyTensor, mode, set_mode

ROUNDS = 200


@pytest.fixture(autouse=True)
def _eager_after():
    yield
    set_mode("eager")


def _run(*targets):
    """Run each target in its own thread; re-raise the first error any of them hit."""
    errors = []

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as e:       # noqa: BLE001 - re-raised in the main thread
                errors.append(e)
                for b in _BARRIERS:
                    b.abort()
        return run
    threads = [threading.Thread(target=guarded(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    _BARRIERS.clear()
    if errors:
        raise errors[0]


_BARRIERS: list = []


def _barrier(n=2):
    b = threading.Barrier(n, timeout=30)
    _BARRIERS.append(b)
    return b


# how thread B writes into x: each must be seen as a write by every pending graph that reads x
WRITES = {
    "add_": lambda x: x.add_(1.0),
    "out=": lambda x: dj.add(x, 1.0, out=x),
    "setitem": lambda x: x.__setitem__(0, 100.0),
    "copy_": lambda x: x.copy_(dj.full(x.shape, 7.0)),
    "through a view": lambda x: x[1:].mul_(-1.0),
    "through a transposed view": lambda x: x.reshape(2, 2).T.sub_(5.0),
}


@pytest.mark.parametrize("writer_mode", ["eager", "compiled"])
@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_a_write_from_another_thread_runs_the_pending_readers_first(write, writer_mode):
    """Thread A records ``y = x * 2 + 1``; then thread B writes into x; A's y is what eager mode
    gives: computed from x as it was before the write.  (x's memory is never handed out as a
    NumPy array here: that case is the next test's.)"""
    x = dj.tensor([1.0, 2.0, 3.0, 4.0])
    turn = _barrier()
    got = []

    def reader():
        with mode("compiled"):
            for _ in range(ROUNDS):
                before = np.array(x.tolist(), np.float32)
                y = x * 2.0 + 1.0
                assert type(y) is LazyTensor
                turn.wait()              # B writes now
                turn.wait()              # B is done
                got.append((y.numpy().copy(), before * 2 + 1))

    def writer():
        with mode(writer_mode):
            for _ in range(ROUNDS):
                turn.wait()
                WRITES[write](x)
                turn.wait()
    _run(reader, writer)
    assert len(got) == ROUNDS
    for y, want in got:
        np.testing.assert_array_equal(y, want)


def test_a_numpy_view_taken_after_recording_runs_the_pending_readers_first():
    """``.numpy()`` hands out a writable view: taking it runs the graphs (of any thread) that read
    the tensor first, so writing through it does not change what they compute."""
    x = dj.tensor([1.0, 2.0, 3.0])
    turn = _barrier()
    got = []

    def reader():
        with mode("compiled"):
            for k in range(ROUNDS):
                x[...] = float(k)
                y = x * 2.0
                turn.wait()
                turn.wait()
                got.append((y.numpy().copy(), 2.0 * k))

    def writer():
        for _ in range(ROUNDS):
            turn.wait()
            x.numpy()[:] = -1.0
            turn.wait()
    _run(reader, writer)
    for y, want in got:
        np.testing.assert_array_equal(y, [want] * 3)


def test_a_numpy_view_taken_before_recording_is_written_after_it():
    """Eager mode reads x when each op runs; a write through a NumPy view of x taken earlier cannot
    be intercepted, so each recorded op reads a copy of x taken when it was recorded."""
    x = dj.tensor([1.0, 2.0, 3.0])
    views = [x.numpy(), np.asarray(x)]
    with mode("compiled"):
        y = x * 2.0
        views[0][0] = 100.0
        z = x + 1.0
        views[1][1] = 50.0
        w = y + z
        assert type(w) is LazyTensor
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(z.numpy(), [101.0, 3.0, 4.0])
    np.testing.assert_array_equal(w.numpy(), [103.0, 7.0, 10.0])
    np.testing.assert_array_equal(x.numpy(), [100.0, 50.0, 3.0])


def test_reading_another_threads_pending_tensors_while_it_records():
    """Thread B reads the pending tensors that thread A keeps making: every read is the eager
    value, never an internal record or a GraphError, and A's later values are right too."""
    x = dj.tensor(np.arange(6, dtype=np.float32))
    base = np.arange(6, dtype=np.float32)
    handoff: list = []
    done = threading.Event()
    got = []

    def recorder():
        try:
            with mode("compiled"):
                for k in range(ROUNDS):
                    y = (x * float(k) + 1.0) * 0.5
                    z = dj.exp(-y) + y               # more records after the one handed over
                    handoff.append((k, y))
                    w = z * 2.0 - 1.0
                    got.append((k, w.numpy().copy()))
        finally:
            done.set()

    def reader():
        while not done.is_set() or handoff:
            if not handoff:
                continue
            k, y = handoff.pop(0)
            a = y.numpy()
            assert isinstance(a, np.ndarray) and a.shape == (6,)
            np.testing.assert_array_equal(a, (base * np.float32(k) + np.float32(1.0)) * np.float32(0.5))
            assert y.shape == (6,) and y.dtype == dj.float32
    _run(recorder, reader)
    with mode("eager"):
        for k, w in got:
            y = (x * float(k) + 1.0) * 0.5
            np.testing.assert_array_equal(w, ((dj.exp(-y) + y) * 2.0 - 1.0).numpy())


def test_foreign_flushes_racing_lock_free_records():
    """The generated recorders take no lock until another thread flushes their graph
    (LazyRecorder's busy/contended handshake), and A's own flush re-arms it every round.  The interpreter switches threads every 10 microseconds, so B's flushes land in
    the middle of A's records: every value either thread reads is eager mode's."""
    import sys
    from dispatch_jit.compiler import lazy
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    x = dj.tensor(np.arange(8, dtype=np.float64))
    base = np.arange(8, dtype=np.float64)
    handoff: list = []
    done = threading.Event()
    got, armed = [], []

    def recorder():
        try:
            with mode("compiled"):
                r = lazy.switch._mstate.recorder
                for k in range(120):
                    y = x * float(k) + 1.0
                    handoff.append((k, y))
                    for _ in range(20):           # records B's flush of y may interleave with
                        y = y * 0.5 + 0.25
                    got.append((k, y.numpy().copy()))
                    lazy.flush()                  # A's own flush re-arms the handshake ...
                    armed.append(not r.contended)  # ... and B, with nothing to run, leaves it armed
        finally:
            done.set()

    def reader():
        while not done.is_set() or handoff:
            if handoff:
                k, y = handoff.pop(0)
                np.testing.assert_array_equal(y.numpy(), base * float(k) + 1.0)
    try:
        _run(recorder, reader)
    finally:
        sys.setswitchinterval(old)
    assert all(armed) and len(armed) == 120
    for k, y in got:
        want = base * float(k) + 1.0
        for _ in range(20):
            want = want * 0.5 + 0.25
        np.testing.assert_array_equal(y, want)


def test_two_compiled_threads_writing_what_the_other_reads_do_not_deadlock():
    """A and B each record a read of the tensor the other one then writes in place."""
    a, b = dj.tensor([1.0, 2.0]), dj.tensor([10.0, 20.0])
    turn = _barrier()
    got = {"A": [], "B": []}

    def worker(name, mine, theirs):
        def run():
            with mode("compiled"):
                for _ in range(ROUNDS):
                    turn.wait()
                    before = np.array(theirs.tolist(), np.float32)
                    y = theirs * 3.0
                    turn.wait()
                    mine.add_(1.0)            # the other thread's y reads this
                    turn.wait()
                    got[name].append((y.numpy().copy(), before * 3))
        return run
    _run(worker("A", a, b), worker("B", b, a))
    for name in "AB":
        assert len(got[name]) == ROUNDS
        for y, want in got[name]:
            np.testing.assert_array_equal(y, want)


def test_a_numpy_view_of_a_pooled_output_is_tracked_until_its_block_is_reused():
    """Outputs from the buffer pool: the mark that a NumPy array may view the block does not keep
    the pool from reusing it (no weak reference), and goes stale when the pool hands it out again."""
    from dispatch_jit.bufferpool import pool
    from dispatch_jit.compiler import lazy
    old = pool.min_bytes
    pool.set_limits(min_bytes=256)          # 64 float32 elements come from the pool
    try:
        x = dj.tensor(np.arange(64, dtype=np.float32))
        with mode("compiled"):
            y = (x + 1.0) * 2.0                # a fused loop: its output comes from the pool
            a = y.numpy()
            assert pool.handouts(a.base) is not None
            z = y + 1.0                        # reads a copy of y taken now
            a[0] = 100.0
            np.testing.assert_array_equal(z.numpy()[:2], [3.0, 5.0])
            del y, z, a
            hits = pool.hits
            w = (x + 1.0) * 3.0
            w.numpy()[:1].copy()               # computed into the same block, free again
            assert pool.hits == hits + 1
            del w
            v = (x + 1.0) * 4.0
            v.tolist()                         # the block again; not handed out as an array this time
            u = v + 1.0
            assert lazy.switch._mstate.recorder.input_ids.get(v) is not None      # read in place, no copy
            np.testing.assert_array_equal(u.numpy()[:2], [5.0, 9.0])
    finally:
        pool.set_limits(min_bytes=old)
