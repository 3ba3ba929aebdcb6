"""Errors a kernel raises surface unchanged at every size and in every mode (issue 12).

A raise inside a ``prange`` loop used to be lost with its worker thread: from
PARALLEL_MIN elements on, ``x // 0`` returned garbage for the rest of the
failing chunk, or a ``SystemError`` when the bad element was in the calling
thread's chunk.  Kernels now count the refused elements (the ``Check`` of the
op in kernels/elementwise/table.py) and raise after the loop.  The reference is the
small eager call, whose error was always right.
"""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN

SMALL, BIG = 64, PARALLEL_MIN + 5

# name -> (chain whose second argument holds one zero, exception, message start); pow's error is
# PyTorch's for a negative Python int exponent (a tensor exponent computes: test_pow_... below)
CASES = {
    "floor_divide": (lambda a, b: (a * 1) // b, ZeroDivisionError, "floor_divide: integer division by zero"),
    "remainder": (lambda a, b: (a + 1) % b, ZeroDivisionError, "remainder: integer modulo by zero"),
    "pow": (lambda a, b: (a * b) ** -1, ValueError, "pow: integers to negative integer powers"),
}
COMPILED = {name: dj.compile(fn) for name, (fn, _, _) in CASES.items()}
COMPILED_POW = dj.compile(lambda a, b: (a + 0) ** b)


def _operands(n, pos, dtype=np.int64):
    a = np.arange(n, dtype=np.int64) % 100 + 7
    b = np.ones(n, dtype)
    b[pos] = 0
    return dj.from_numpy(a.astype(dtype)), dj.from_numpy(b)


def _lazy(fn):
    def run(a, b):
        with dj.execution_mode("compiled"):
            return fn(a, b).numpy()
    return run


def _runner(name, mode):
    fn = CASES[name][0]
    return {"eager": fn, "compile": COMPILED[name], "lazy": _lazy(fn)}[mode]


def _expected(name):
    """The error of the small eager call: what every size and mode must raise."""
    fn, exc, start = CASES[name]
    with pytest.raises(exc) as info:
        fn(*_operands(SMALL, 3))
    assert str(info.value).startswith(start)
    return exc, str(info.value)


@pytest.mark.parametrize("mode", ["eager", "compile", "lazy"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_error_at_every_size(name, mode):
    exc, msg = _expected(name)
    run = _runner(name, mode)
    for n, pos in ((SMALL, 5), (BIG, BIG // 2)):
        with pytest.raises(exc) as info:
            run(*_operands(n, pos))
        assert str(info.value) == msg, (n, mode)


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_error_in_any_thread_chunk(mode):
    # the first element is in the calling thread's chunk (it used to give a SystemError), the last
    # in another worker's (it used to give garbage)
    exc, msg = _expected("floor_divide")
    run = _runner("floor_divide", mode)
    for pos in (0, 1, BIG - 1):
        with pytest.raises(exc, match="^floor_divide: integer division by zero"):
            run(*_operands(BIG, pos))


def test_valid_inputs_still_compute():
    a, b = _operands(BIG, 0)
    b.numpy()[0] = 3
    want = np.floor_divide(a.numpy(), b.numpy())
    np.testing.assert_array_equal((a * 1 // b).numpy(), want)
    np.testing.assert_array_equal(COMPILED["floor_divide"](a, b).numpy(), want)


@pytest.mark.parametrize("n", [SMALL, BIG])
def test_failed_inplace_and_out_leave_the_target_untouched(n):
    a, b = _operands(n, n // 2)
    before = a.numpy().copy()
    with pytest.raises(ZeroDivisionError):
        a //= b
    np.testing.assert_array_equal(a.numpy(), before)
    out = dj.from_numpy(np.full(n, -1, np.int64))
    with pytest.raises(ZeroDivisionError):
        dj.remainder(a, b, out=out)
    assert (out.numpy() == -1).all()


def test_strided_and_small_dtypes():
    # the strided loop nest (a transposed view, prange over its first dimension) and int32
    a, b = _operands(BIG - 5, 7, np.int32)
    at, bt = a.reshape((2, -1)).T, b.reshape((2, -1)).T
    with pytest.raises(ZeroDivisionError, match="^floor_divide"):
        at // bt
    with pytest.raises(ZeroDivisionError, match="^floor_divide"):
        COMPILED["floor_divide"](at, bt)


def test_python_scalar_divisor():
    a, _ = _operands(SMALL, 0)
    f = dj.compile(lambda x: (x + 1) // 0)
    for run in (lambda: (a + 1) // 0, lambda: f(a)):
        with pytest.raises(ZeroDivisionError, match="^floor_divide"):
            run()


@pytest.mark.parametrize("reduce", [lambda v: v.sum(), lambda v: v.reshape((4, -1)).sum(1),
                                    lambda v: v.reshape((4, -1)).sum(0)], ids=["full", "rows", "cols"])
def test_fused_reduction_epilogue(reduce):
    a, b = _operands(BIG - 5, (BIG - 5) * 3 // 4)
    f = dj.compile(lambda x, y: reduce((x * 2) // y))
    with pytest.raises(ZeroDivisionError, match="^floor_divide"):
        f(a, b)
    b.numpy()[:] = 1
    np.testing.assert_array_equal(f(a, b).numpy(), reduce((a * 2) // b).numpy())


def test_first_failing_op_wins_as_in_eager():
    # both ops refuse an element; eager runs them in order, so the fused loop raises the first one's
    a, b = _operands(BIG, 11)
    for chain, exc in ((lambda x, y: (x // y) ** -1, ZeroDivisionError),
                       (lambda x, y: (x ** -1) // y, ValueError)):
        with pytest.raises(exc):
            chain(a, b)
        with pytest.raises(exc):
            dj.compile(chain)(a, b)


@pytest.mark.parametrize("mode", ["eager", "compile", "lazy"])
def test_pow_of_a_tensor_of_negative_exponents_computes_as_torch(mode):
    # PyTorch's integer answer, 1 / x**|y| truncated (1, -1 or 0), the same at every size and in
    # every mode; only a negative Python int exponent raises (CASES["pow"])
    chain = {"eager": lambda a, b: (a + 0) ** b, "compile": COMPILED_POW, "lazy": _lazy(lambda a, b: (a + 0) ** b)}
    base = np.array([2, 1, -1, 0, -2, 3, -1, 1, 0, -1], np.int64)
    exp = np.array([-1, -1, -1, -1, -1, -2, -2, -5, -3, -3], np.int64)
    want = np.array([0, 1, -1, 0, 0, 0, 1, 1, 0, -1], np.int64)     # torch.tensor(base) ** torch.tensor(exp)
    for n in (SMALL, BIG):
        a, b = np.resize(base, n), np.resize(exp, n)
        got = chain[mode](dj.from_numpy(a), dj.from_numpy(b))
        np.testing.assert_array_equal(np.asarray(got), np.resize(want, n))
    # int8 computes in its own dtype, int64 in the wrapping uint64 form: both know base -1
    got = chain[mode](dj.from_numpy(base.astype(np.int8)), dj.from_numpy(exp.astype(np.int8)))
    np.testing.assert_array_equal(np.asarray(got), want.astype(np.int8))


def test_a_negative_python_exponent_raises_even_on_an_empty_or_uint8_tensor():
    # tested on the number as given, once per call: -1 is no uint8 (cast, it was 255 and computed)
    for x in (dj.tensor([], dtype=dj.int64), dj.tensor([3], dtype=dj.uint8), dj.tensor(2)):
        for run in (lambda: x ** -1, lambda: dj.compile(lambda t: (t + 0) ** -1)(x), lambda: x.clone().pow_(-2)):
            with pytest.raises(ValueError, match="^pow: integers to negative integer powers"):
                run()
