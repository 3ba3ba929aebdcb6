"""The memo key has one source of truth: dispatcher.memo_key.

The generated entry builds the key inline (the hot path); these tests check,
for a variety of calls, that what it builds is what memo_key returns for the
same arguments in the same thread-local state.
"""

import contextlib

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard, IncludeDispatchKeyGuard, memo_key, redispatch
from dispatch_jit.entry import make_entry
from dispatch_jit.keys import DispatchKey
from dispatch_jit.registry import lookup


def _keys_of(opname: str, *args, **kwargs):
    """(key the generated entry built, memo_key of the arguments it passed on), in the current state."""
    op = lookup(opname)
    entry = make_entry(op, op.schema.name, as_alias=True)   # a private entry over the same op
    seen = {}
    g = entry.__globals__

    def memo_get(key):
        seen["entry"] = key
        return None                         # force the miss path, where memo_key is computed

    def miss(op_, full_args):
        seen["memo_key"] = memo_key(op_, full_args)
        return lambda *a: None
    g["_memo_get"], g["_miss"] = memo_get, miss
    entry(*args, **kwargs)
    return seen["entry"], seen["memo_key"]


def _t(values, dtype=dj.float32, **kw):
    return dj.tensor(values, dtype=dtype, **kw)


CALLS = [
    ("aten::add.Tensor", lambda: ((_t([1.0, 2.0]), _t([3.0, 4.0])), {})),
    ("aten::add.Tensor", lambda: ((_t([1.0, 2.0], dj.float64), _t([3.0, 4.0])), {"alpha": 2})),
    ("aten::add.Tensor", lambda: ((_t([1, 2], dj.int32), 3), {"alpha": 2.5})),
    ("aten::add.Tensor", lambda: ((2.0, _t([1.0], dj.float16)), {})),
    ("aten::add.Tensor", lambda: ((_t([1.0, 2.0]), np.float64(3.0)), {})),
    ("aten::add.Tensor", lambda: ((_t([1.0, 2.0]), _t([3.0, 4.0])), {"out": _t([0.0, 0.0])})),
    ("aten::add.Tensor", lambda: ((_t([1.0, 2.0], requires_grad=True), _t([3.0, 4.0])), {})),
    ("aten::add.Tensor", lambda: ((_t([[1.0, 2.0]]).T, _t([3.0]).reshape(1, 1)), {})),
    ("aten::mul.Tensor", lambda: ((_t([True, False], dj.bool), _t([1.0, 2.0], dj.complex64)), {})),
    ("aten::cat", lambda: (([_t([1.0]), _t([2.0], dj.float64)],), {"axis": 0})),
    ("aten::sum", lambda: ((_t([[1.0, 2.0]]),), {"axis": 1, "keepdims": True})),
    ("aten::sum", lambda: ((_t([[1.0, 2.0]]),), {"axis": (0, 1)})),
    ("aten::sum", lambda: ((_t([[1.0, 2.0]]),), {"axis": [True], "keepdims": 1})),
    ("aten::sum", lambda: ((_t([[1.0, 2.0]]),), {"axis": (), "dtype": dj.float64})),
    ("aten::reshape", lambda: ((_t([1.0, 2.0]), [np.int64(2), 1]), {})),
    ("aten::std", lambda: ((_t([1.0, 2.0]),), {"unbiased": False, "correction": None})),
    ("aten::neg", lambda: ((_t([1.0]),), {})),
]

STATES = {
    "default": contextlib.nullcontext,
    "no_grad": dj.no_grad,
    "autocast_cpu": lambda: dj.autocast("cpu"),
    "include_autocast_cuda": lambda: IncludeDispatchKeyGuard(DispatchKey.AutocastCUDA),
    "exclude_autograd": lambda: ExcludeDispatchKeyGuard([DispatchKey.AutogradCPU, DispatchKey.AutogradCUDA]),
    "trace": lambda: dj.show_dispatch_trace(),
}


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("i", range(len(CALLS)))
def test_generated_entry_builds_memo_key(i, state):
    opname, make = CALLS[i]
    args, kwargs = make()
    with STATES[state]():
        built, expected = _keys_of(opname, *args, **kwargs)
    assert built == expected


def test_generated_entry_builds_memo_key_on_cuda():
    if not dj.cuda.is_available():
        pytest.skip("no CUDA device or simulator")
    x, y = _t([1.0, 2.0]).to("cuda"), _t([3.0, 4.0], requires_grad=True).to("cuda")
    for state in STATES.values():
        with state():
            built, expected = _keys_of("aten::add.Tensor", x, y)
            assert built == expected
            built, expected = _keys_of("aten::add.Tensor", x, 2)
            assert built == expected


def test_states_give_different_keys():
    x = _t([1.0, 2.0], requires_grad=True)
    keys = set()
    for state in STATES.values():
        with state():
            keys.add(_keys_of("aten::add.Tensor", x, x)[0])
    assert len(keys) == len(STATES)


def test_redispatch_memo_key_is_memo_key_under_its_key_set():
    op = lookup("aten::add.Tensor")
    x = _t([1.0, 2.0])
    args = (x, x, 1, None)
    before = set(op.memo)
    out = redispatch(op, dj.DispatchKeySet(DispatchKey.CPU), args)
    assert out.tolist() == [2.0, 4.0]
    added = set(op.memo) - before
    assert ("redispatch", dj.DispatchKeySet(DispatchKey.CPU).bits) + memo_key(op, args) in added | before


# -- a hit is exactly what a miss would resolve ------------------------------------------
# The key must determine the resolution, errors included: every type the schema binder tells
# apart (bool from int, a NumPy scalar from a Python one, an int list from one holding a bool, a
# number from a tensor, None from a value) must give its own key.  Each case below is resolved
# fresh (the memo cleared, the case alone), then on a memo primed with every case; the two must
# give the same result or raise the same error.

PROBE = ("probe(Tensor self, Tensor? opt=None, Scalar sc=1, int i=0, float f=0.0, bool b=False, str s='a', "
         "int? oi=None, float? of=None, bool? ob=None, str? os=None, int[] il=[0], int[2] i2=1, int[]? oil=None, "
         "float[] fl=[0.0], bool[2] bl=[False, False], Tensor[] tl=[], ScalarType? dt=None, *, ScalarType rdt) "
         "-> Tensor")


def _values(x):
    """One value of every Python type a call may pass where a non-tensor argument goes."""
    return [True, 1, np.int64(1), np.bool_(True), 1.5, np.float32(1.5), 1j, "a", None, dj.float32, [1], (1, 2),
            [True], (1.5,), [np.int64(1)], [1, None], [], [x], x]


def _tensor_values(x):
    return [x, _t([1, 2], dj.int32), 1, True, 1.5, 1j, np.float32(1.5), np.bool_(True), None, "a", [x]]


def _outcome(call):
    try:
        out = call()
    except Exception as e:      # noqa: BLE001 - the error itself is the outcome compared
        return ("raises", type(e).__name__, str(e))
    return ("returns", out)


def _hit_equals_miss(cases, ops):
    """For each case: its outcome fresh, then on a memo primed with every case (a hit where it
    resolved at all).  Returns the cases where they differ."""
    fresh = []
    for call in cases:
        for op in ops:
            op.memo.clear()
        fresh.append(_outcome(call))
    for op in ops:
        op.memo.clear()
    for call in cases:
        _outcome(call)
    differ = []
    for call, want in zip(cases, fresh):
        misses = sum(op.misses for op in ops)
        got = _outcome(call)
        if want[0] == "returns":     # resolved once already: this call must have been a hit
            assert sum(op.misses for op in ops) == misses, call.__doc__
        if got != want:
            differ.append((call.__doc__, want, got))
    return differ


def test_memo_hit_equals_fresh_resolution_for_every_binder_type(lib):
    lib.define(PROBE)
    seen = []

    def probe_cpu(*args, **kwargs):
        seen.append(tuple((type(v).__name__, repr(v)) for v in args + tuple(kwargs.values())))
        return args[0] if isinstance(args[0], dj.Tensor) else args[1]
    lib.impl("probe", probe_cpu, "CPU")
    op = lookup(f"{lib.ns}::probe")
    x = _t([1.0, 2.0])

    def case(**kw):
        kw = {"rdt": dj.float32, **kw}
        self_ = kw.pop("self", x)

        def call():
            seen.clear()
            op.entry(self_, **kw)
            return seen[-1]
        call.__doc__ = f"probe({self_!r}, {kw})"
        return call

    cases = [case(rdt=None), case(rdt="float32")]
    for a in op.schema.arguments[1:-1]:
        for v in (_tensor_values(x) if a.type.is_tensor_like else _values(x)):
            cases.append(case(**{a.name: v}))
    for v in _tensor_values(x):
        cases += [case(self=v), case(self=v, opt=x)]
    assert len(cases) > 300
    assert _hit_equals_miss(cases, [op]) == []


def test_memo_hit_equals_fresh_resolution_for_the_reductions_overloads():
    M = _t([[1.0, 5.0, 2.0], [8.0, 3.0, 9.0]])
    calls = [
        "dj.sum(M)", "dj.sum(M, 1)", "dj.sum(M, True)", "dj.sum(M, [True])", "dj.sum(M, (1,))", "dj.sum(M, [0, 1])",
        "dj.sum(M, 1.0)", "dj.sum(M, np.int64(1))", "dj.sum(M, 1, True)", "dj.sum(M, 1, 1)", "dj.sum(M, dim=1)",
        "dj.sum(M, [1, False])", "dj.sum(M, 1, dtype=dj.float64)",
        "dj.std(M)", "dj.std(M, False)", "dj.std(M, True)", "dj.std(M, 0)", "dj.std(M, 0, False)",
        "dj.std(M, 0, False, True)", "dj.std(M, False, True)", "dj.std(M, unbiased=False)", "dj.std(M, 0, 1)",
        "dj.std(M, unbiased=0)", "dj.std(M, 1, correction=0)", "dj.std(M, None, False)", "M.std(False)",
        "dj.var(M, False)", "dj.var(M, 0)", "dj.var(M, np.bool_(False))", "M.var(True)",
        "dj.add(M, M)", "dj.add(M, 1)", "dj.add(M, True)", "dj.add(M, 1.5)", "dj.add(M, M, alpha=2)",
        "dj.add(M, M, alpha=True)", "dj.add(M, M, alpha=1.5)",
    ]

    def case(src):
        def call():
            return eval(src, {"dj": dj, "np": np, "M": M}).tolist()
        call.__doc__ = src
        return call
    ops = [lookup(n) for n in ("aten::sum", "aten::std", "aten::var", "aten::add.Tensor")]
    assert _hit_equals_miss([case(s) for s in calls], ops) == []
