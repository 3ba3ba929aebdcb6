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
