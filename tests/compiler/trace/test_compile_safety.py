"""Issue 12 for ``@dj.compile``: no silent wrong answers.

Outputs alias each other exactly as in eager mode; what a function reads from
globals, closures and attribute chains is re-read or guarded at every call;
reading a traced tensor's data falls back to eager instead of showing a
placeholder; Python scalar arguments are runtime values of the loop; the
counters survive a warm disk cache; threads may share a compiled function.
Arrays are tiny; functions share structures so that loops are compiled once.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import CompileWarning


def t(values, dtype=np.float32):
    return dj.from_numpy(np.asarray(values, dtype=dtype))


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def shares(a, b) -> bool:
    return np.shares_memory(a.numpy(), b.numpy())


# -- 1. outputs alias as in eager mode ---------------------------------------------------------
ALIASING = [
    ("permuted_twin", lambda a: (a * 2.0, (a * 2.0).T)),
    ("swapped", lambda a: ((a * 2.0).T, a * 2.0)),
    ("sliced_twin", lambda a: (a * 2.0, (a * 2.0)[1:])),
    ("reshaped_twin", lambda a: (a * 2.0, (a * 2.0).reshape(-1))),
    ("two_views_of_twins", lambda a: ((a * 2.0).T, (a * 2.0).T)),
    ("one_value_two_views", lambda a: (lambda y: (y, y.T, y[1:]))(a * 2.0)),
    ("views_of_input", lambda a: (a.T, a.T, a[1:])),
    ("same_tensor_twice", lambda a: (lambda y: (y, y))(a + 1.0)),
    ("twin_in_a_dict", lambda a: {"p": a - 1.0, "q": [(a - 1.0).T]}),
]


def _flat(x):
    if isinstance(x, dict):
        return [z for v in x.values() for z in _flat(v)]
    if isinstance(x, (list, tuple)):
        return [z for v in x for z in _flat(v)]
    return [x]


@pytest.mark.parametrize("fn", [c[1] for c in ALIASING], ids=[c[0] for c in ALIASING])
def test_outputs_alias_exactly_as_in_eager_mode(fn):
    x = t([[1.0, 2.0], [3.0, 4.0]])
    f = dj.compile(fn)
    for _ in range(2):      # the first call traces, the second runs the cached entry
        got, want = _flat(f(x)), _flat(fn(x))
        assert f.cache_info().eager_calls == 0
        for i in range(len(want)):
            same(got[i], want[i])
            for j in range(len(want)):
                assert (got[i] is got[j]) == (want[i] is want[j]), (i, j)
                assert shares(got[i], got[j]) == shares(want[i], want[j]), (i, j)
                assert shares(got[i], x) == shares(want[i], x)
        # a write into one output shows in exactly the outputs eager mode shows it in
        before = [g.numpy().copy() for g in got]
        got[0].add_(100.0)
        want[0].add_(100.0)
        for g, w, b in zip(got, want, before):
            np.testing.assert_array_equal(g.numpy() != b, w.numpy() != b)
        x = t([[1.0, 2.0], [3.0, 4.0]])


def test_a_view_output_shares_the_version_counter_it_shares_in_eager_mode():
    from dispatch_jit.tensor import version_of
    f = dj.compile(lambda a: (lambda y: (y, y.T))(a * 3.0))
    y, v = f(t([[1.0, 2.0], [3.0, 4.0]]))
    y.add_(1.0)
    assert version_of(v) == version_of(y) == 1
    p, q = dj.compile(lambda a: (a * 3.0, (a * 3.0).T))(t([[1.0, 2.0], [3.0, 4.0]]))
    p.add_(1.0)
    assert version_of(q) == 0


# -- 4a. a warm disk cache after a lazy-mode flush -----------------------------------------------
WARM_SCRIPT = textwrap.dedent("""
    import json
    import dispatch_jit as dj
    x = dj.tensor([1.0, 2.0, 3.0])
    with dj.execution_mode("compiled"):
        y = (x * 2.0 + 1.0) * x
        y.numpy()
    f = dj.compile(lambda a: (a - 3.0) * a * 0.5)
    r = f(x)
    print(json.dumps({"r": r.tolist(), "info": f.cache_info()._asdict()}))
""")


def test_compile_after_a_lazy_flush_with_a_warm_disk_cache(tmp_path):
    script = tmp_path / "warm.py"
    script.write_text(WARM_SCRIPT)
    env = dict(os.environ, DISPATCH_JIT_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):       # cold, then warm: the loops come from disk
        p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert runs[0]["r"] == runs[1]["r"] == [-1.0, -1.0, 0.0]
    assert (runs[0]["info"]["compiles"], runs[0]["info"]["disk_hits"]) == (1, 0)
    assert (runs[1]["info"]["compiles"], runs[1]["info"]["disk_hits"]) == (0, 1)


# -- 2. globals, closures and attribute chains ---------------------------------------------------
W = t([1.0, 2.0, 3.0])
SCALE = 2.0
FLAG = True
LIST = [t([1.0, 1.0, 1.0])]
ARRAY = np.ones(3, np.float32)


class Box:
    pass


BOX = Box()
BOX.w, BOX.k = t([1.0, 1.0, 1.0]), 3.0


def helper(a):
    return a * SCALE


def uses_w(a):
    return a * W + 1.0


def uses_scale(a):
    return a * SCALE


def uses_flag(a):
    return a + 1.0 if FLAG else a - 1.0


def test_a_global_tensor_is_read_at_every_call_without_retracing():
    global W
    f = dj.compile(uses_w)
    a = t([1.0, 1.0, 1.0])
    same(f(a), a * W + 1.0)
    old = W
    try:
        W = t([5.0, 6.0, 7.0])
        same(f(a), t([6.0, 7.0, 8.0]))
        W = t([5.0, 6.0, 7.0, 8.0])          # a new size: read as it is, still no retrace
        same(f(t([1.0, 1.0, 1.0, 1.0])), t([6.0, 7.0, 8.0, 9.0]))
        assert f.cache_info().traces == 1
        W = t([5, 6, 7], np.int64)             # a new dtype: retraces, and explain says why
        same(f(a), a * W + 1.0)
        assert f.cache_info().traces == 2
        assert "global 'W': dtype float32 -> int64" in f.explain()
    finally:
        W = old


def test_a_global_number_is_guarded_and_explain_names_it():
    global SCALE
    f = dj.compile(uses_scale)
    a = t([1.0, -2.0])
    old = SCALE
    try:
        for s in (2.0, 3.0, 1.0, 0.0, -0.0, float("nan"), 2.0):
            SCALE = s
            got = f(a)
            np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit((a * s).numpy()))
            np.testing.assert_array_equal(got.numpy(), (a * s).numpy())
        assert f.cache_info().hits == 1       # 2.0 again; 0.0, -0.0 and 1.0 each keyed apart
        SCALE = 5.0
        f(a)
        assert "global 'SCALE': value nan -> 5.0" in f.explain()     # the latest key differs only there
    finally:
        SCALE = old


def test_a_global_flag_in_a_branch_is_guarded():
    global FLAG
    f = dj.compile(uses_flag)
    a = t([1.0, 2.0])
    try:
        same(f(a), a + 1.0)
        FLAG = False
        same(f(a), a - 1.0)
    finally:
        FLAG = True


def test_closure_variables_are_re_read():
    w, k = t([1.0, 2.0]), 2.0

    def fn(a):
        return a * w + k

    f = dj.compile(fn)
    a = t([1.0, 1.0])
    same(f(a), t([3.0, 4.0]))
    w = t([10.0, 20.0])        # noqa: F841  (the closure cell is what fn reads)
    same(f(a), t([12.0, 22.0]))
    k = -1.0                   # noqa: F841
    same(f(a), t([9.0, 19.0]))
    assert f.cache_info().traces == 2


def test_attribute_chains_containers_and_helpers_are_read_or_guarded():
    f = dj.compile(lambda a: helper(a) * BOX.w + BOX.k + LIST[0])
    a = t([1.0, 2.0, 3.0])
    same(f(a), t([6.0, 8.0, 10.0]))
    old = (BOX.w, BOX.k, LIST[0])
    try:
        BOX.w, LIST[0] = t([2.0, 2.0, 2.0]), t([0.0, 0.0, 100.0])
        same(f(a), t([7.0, 11.0, 115.0]))
        BOX.k = 0.0
        same(f(a), t([4.0, 8.0, 112.0]))
        assert "global 'BOX'.k: value 3.0 -> 0.0" in f.explain()
    finally:
        BOX.w, BOX.k, LIST[0] = old


def test_an_argument_attribute_is_read_at_every_call():
    f = dj.compile(lambda obj, a: a * obj.w)
    box, a = Box(), t([1.0, 2.0])
    box.w = t([3.0, 3.0])
    same(f(box, a), t([3.0, 6.0]))
    box.w = t([-1.0, 1.0])
    same(f(box, a), t([-1.0, 2.0]))


def test_data_reads_of_a_captured_tensor_fall_back_to_eager():
    global W
    f = dj.compile(lambda a: a * float(W[0]))
    a = t([1.0, 2.0, 3.0])
    old = W
    try:
        same(f(a), a * 1.0)
        W = t([4.0, 0.0, 0.0])
        same(f(a), a * 4.0)
        assert "float() of a traced tensor" in f.explain()
    finally:
        W = old


def test_what_cannot_be_guarded_runs_eagerly_and_says_so():
    f = dj.compile(lambda a: a * dj.from_numpy(ARRAY))
    a = t([1.0, 2.0, 3.0])
    same(f(a), a * 1.0)
    ARRAY[0] = 7.0
    try:
        same(f(a), t([7.0, 2.0, 3.0]))
        assert "ndarray" in f.explain() and "pass it as an argument" in f.explain()
    finally:
        ARRAY[0] = 1.0


COUNT = 0


def counts(a):
    global COUNT
    COUNT += 1
    return a + 1.0


def test_assigning_a_global_runs_eagerly():
    f = dj.compile(counts)
    a = t([1.0])
    before = COUNT
    f(a)
    f(a)
    assert COUNT == before + 2
    assert "assigns the global 'COUNT'" in f.explain()


# -- 3. reading a traced tensor's data --------------------------------------------------------
READS = [
    ("print", lambda a: (print("b is", a * 2.0), a + 1.0)[1], "print()"),
    ("repr", lambda a: a + len(repr(a * 2.0)), "repr()"),
    ("format", lambda a: a + len(f"{a * 2.0}"), "print()"),
    ("float", lambda a: a + float((a * 2.0).sum()), "float()"),
    ("int", lambda a: a + int((a * 2.0).sum()), "int()"),
    ("iteration", lambda a: sum(x for x in a * 2.0), "iteration"),
    ("tolist", lambda a: a + (a * 2.0).tolist()[0][0], "tolist()"),
    ("array", lambda a: a + float(np.asarray(a * 2.0)[0, 0]), "NumPy array"),
    ("is_contiguous", lambda a: a * 2.0 if (a * 2.0).T.is_contiguous() else a, "is_contiguous()"),
]


@pytest.mark.parametrize("fn,why", [(c[1], c[2]) for c in READS], ids=[c[0] for c in READS])
def test_data_reads_while_tracing_fall_back_to_eager(fn, why, capsys):
    a = t([[1.0, 2.0], [3.0, 4.0]])
    f = dj.compile(fn)
    want = fn(a)
    capsys.readouterr()
    same(f(a), want)
    assert f.cache_info().eager_calls == 1
    assert why in f.explain()
    out = capsys.readouterr().out
    assert "tensor([[0." not in out and "tensor([0." not in out    # never a placeholder
    if "print" in out:
        assert "tensor([[2., 4.],\n        [6., 8.]])" in out


# -- 4b. threads ----------------------------------------------------------------------------
def test_threads_calling_one_function_with_new_signatures():
    f = dj.compile(lambda a, b: a * b + 1.0, max_recompiles=64)
    dtypes = [np.float32, np.float64, np.int32, np.int64]
    inputs = [(t(np.arange(6).reshape(shape), d), t(np.ones(shape), d2))
              for shape in [(6,), (2, 3), (1, 2, 3)] for d in dtypes for d2 in dtypes[:2]]
    errors, barrier = [], threading.Barrier(4)

    def hammer(k):
        try:
            barrier.wait()
            for i in range(len(inputs)):
                a, b = inputs[(i + 7 * k) % len(inputs)]
                same(f(a, b), a * b + 1.0)
                f.explain()
                f.cache_info()
        except BaseException as e:     # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)      # switch threads often, so that a race shows in one run
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    info = f.cache_info()
    assert info.entries == len(inputs) and info.eager_calls == 0


# -- 4c. Python scalars are runtime values of the loop -----------------------------------------
def test_a_new_float_each_call_reuses_one_entry():
    f = dj.compile(lambda a, k: (a * k + 1.0) * k)
    a = t([1.0, -2.0, 3.0])
    for k in [0.5 * i for i in range(40)] + [-0.0, float("nan"), float("inf")]:
        got, want = f(a, k), (a * k + 1.0) * k
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()))
    info = f.cache_info()
    assert info.entries == 1 and info.eager_calls == 0 and info.compiles + info.disk_hits <= 1
    assert "%s0" in f.graph()


def test_int_float_and_bool_scalars_are_keyed_by_type():
    f = dj.compile(lambda a, k: a * k)
    i = t([1, 2], np.int32)
    same(f(i, 3), i * 3)            # int32 stays int32
    same(f(i, 4), i * 4)
    same(f(i, 2.5), i * 2.5)        # a float promotes to float32
    same(f(i, True), i * True)
    assert f.cache_info().entries == 3


def test_a_scalar_whose_value_shapes_the_trace_is_keyed_by_value():
    f = dj.compile(lambda a, k, n: a * (k if k > 0 else -k) + a.sum(axis=n), max_recompiles=3)
    a = t([[1.0, 2.0], [3.0, 4.0]])
    for k, n in [(2.0, 0), (-2.0, 0), (2.0, 1)]:
        same(f(a, k, n), a * abs(k) + a.sum(axis=n))
    ex = f.explain()
    assert "scalar argument 'k' is keyed by value: its value was used in Python (__gt__)" in ex
    assert "scalar argument 'n' is keyed by value" in ex
    # past the limit new values run eagerly and are not stored: the cache stays bounded
    with pytest.warns(RuntimeWarning, match="recompile limit"):
        for k in range(4, 40):
            same(f(a, float(k), 0), a * float(k) + a.sum(axis=0))
    info = f.cache_info()
    assert info.entries == 3 and info.eager_calls == 36


def test_a_value_used_where_the_trace_cannot_see_is_keyed_by_value():
    import math
    f = dj.compile(lambda a, k: a * math.exp(k) + dj.add(a, a, alpha=k))
    a = t([1.0, 2.0])
    for k in (1.0, 2.0):
        same(f(a, k), a * math.exp(k) + dj.add(a, a, alpha=k))
    assert "scalar argument 'k' is keyed by value" in f.explain()


# -- 5. data reads of tensors from outside the function; methods, partials, side effects ---------
OUT = Box()


def _reset_out():
    OUT.w, OUT.s = t([1.0, 2.0, 3.0]), t([2.0])
    OUT.items = [t([2.0])]


_reset_out()
W0 = t([2.0])


def default_item(a, w=W0):
    return a * w.item()


OUTSIDE_READS = [   # (name, function, what explain() says, the captured tensor's label)
    ("item", lambda a: a * OUT.s.item(), "Tensor.item()", "global 'OUT'.s"),
    ("float", lambda a: a * float(OUT.s), "float()", "global 'OUT'.s"),
    ("bool", lambda a: a * 2.0 if OUT.s else a, "bool()", "global 'OUT'.s"),
    ("tolist", lambda a: a * OUT.w.tolist()[0], "tolist()", "global 'OUT'.w"),
    ("numpy", lambda a: a * float(OUT.w.numpy()[0]), "numpy()", "global 'OUT'.w"),
    ("asarray", lambda a: a * float(np.asarray(OUT.w)[0]), "NumPy array", "global 'OUT'.w"),
    ("iteration", lambda a: a * len([v for v in OUT.w]), "iteration", "global 'OUT'.w"),
    ("shape", lambda a: a * OUT.w.shape[0], "Tensor.shape", "global 'OUT'.w"),
    ("len", lambda a: a * len(OUT.w), "len()", "global 'OUT'.w"),
    ("repr", lambda a: a * len(repr(OUT.w)), "repr()", "global 'OUT'.w"),
    ("item_of_a_view", lambda a: a * OUT.w[0].item(), "item()", ""),
    ("container", lambda a: a * OUT.items[0].item(), "Tensor.item()", "global 'OUT'.items"),
    ("default_argument", default_item, "Tensor.item()", "default argument value of default_item()"),
]


@pytest.mark.parametrize("fn,why,label", [c[1:] for c in OUTSIDE_READS], ids=[c[0] for c in OUTSIDE_READS])
def test_data_reads_of_tensors_from_outside_are_never_baked(fn, why, label):
    a = t([1.0, 1.0, 1.0])
    f = dj.compile(fn)
    try:
        same(f(a), fn(a))
        # in place, then rebound to another tensor of the same signature (new size and data)
        for change in (lambda: OUT.w.numpy().__setitem__(0, 5.0), lambda: OUT.s.numpy().__setitem__(0, 0.0),
                       lambda: OUT.items[0].numpy().__setitem__(0, 4.0), lambda: W0.numpy().__setitem__(0, 6.0),
                       lambda: setattr(OUT, "w", t([7.0, 8.0, 9.0, 10.0]))):
            change()
            same(f(a), fn(a))
        ex = f.explain()
        assert why in ex and label in ex, ex
        assert type(OUT.w) is dj.Tensor and type(OUT.s) is dj.Tensor and type(W0) is dj.Tensor
    finally:
        _reset_out()
        W0.numpy()[0] = 2.0


def test_ops_on_a_tensor_from_outside_still_compile():
    f = dj.compile(lambda a: a * OUT.w[1:] + OUT.w.sum())
    a = t([1.0, 1.0])
    try:
        same(f(a), a * OUT.w[1:] + OUT.w.sum())
        OUT.w = t([4.0, 5.0, 6.0])
        same(f(a), t([20.0, 21.0]))
        assert f.cache_info().eager_calls == 0 and f.cache_info().traces == 1
    finally:
        _reset_out()


class Scaler:
    def __init__(self, w, k):
        self.w, self.k = w, k

    def scale(self, a):
        return a * self.w + self.k

    @property
    def doubled(self):
        return self.w * 2.0

    def __call__(self, a):
        return self.scale(a) - 1.0


class Net:
    def __init__(self):
        self.layer = Scaler(t([1.0, 2.0]), 0.0)

    def forward(self, a):
        return self.layer(a) * 2.0


SC = Scaler(t([1.0, 2.0]), 0.0)


@pytest.mark.parametrize("case", ["method", "property", "callable_object", "submodule"])
def test_methods_and_callable_objects_read_their_attributes_at_every_call(case):
    net, sc = Net(), Scaler(t([1.0, 2.0]), 0.0)
    obj = {"method": SC, "property": SC, "callable_object": sc, "submodule": net.layer}[case]
    fn = {"method": lambda a: SC.scale(a), "property": lambda a: a + SC.doubled,
          "callable_object": sc, "submodule": net.forward}[case]
    f = dj.compile(fn)
    a = t([1.0, 1.0])
    old = (SC.w, SC.k)
    try:
        same(f(a), fn(a))
        obj.w = t([5.0, -3.0])        # rebound: read at every call, no retrace
        same(f(a), fn(a))
        obj.k = 4.0                   # a number: guarded
        same(f(a), fn(a))
        assert f.cache_info().eager_calls == 0
    finally:
        SC.w, SC.k = old



class _Gain(dj.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k if self.training else x * (self.k + 1.0)


class _Model(dj.nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = _Gain(2.0)
        self.body = dj.nn.Sequential(dj.nn.Linear(2, 2), _Gain(3.0), dj.nn.Tanh())
        self.scale = 1.0

    def forward(self, x):
        return self.body(self.gain(x)) * self.scale


def test_nn_modules_called_by_the_function_are_guarded_through_their_forward_and_children():
    """A module called as ``model(x)`` (dj.nn.Module.__call__, library code) used to hide its
    forward from the walk: a number it read (``self.k``, ``self.training``) was baked into the
    trace and a later change silently ignored.  The walk now follows a user module's forward and
    a library module's options and submodules, at any nesting depth."""
    dj.manual_seed(0)
    m = _Model()
    f = dj.compile(lambda x: m(x))
    x = t([[0.5, -1.0], [2.0, 0.25]])
    changes = [lambda: None, lambda: setattr(m.gain, "k", 4.0), lambda: setattr(m.body[1], "k", -1.0),
               lambda: setattr(m, "scale", 0.5), lambda: m.eval(), lambda: m.train(),
               lambda: setattr(m.body, "1", _Gain(7.0))]
    for change in changes:
        change()
        same(f(x), m(x))
    assert f.cache_info().eager_calls == 0


def partial_target(a, k, w):
    return a * k * SCALE + w


def test_a_partial_reads_its_function_s_globals_and_its_bound_arguments():
    import functools
    global SCALE
    p = functools.partial(partial_target, k=2.0, w=t([1.0, 1.0]))
    f = dj.compile(p)
    a = t([1.0, 2.0])
    old = SCALE
    try:
        same(f(a), p(a))
        SCALE = 3.0
        same(f(a), p(a))
        p.keywords["k"] = -1.0
        same(f(a), p(a))
        p.keywords["w"] = t([0.0, 10.0])
        same(f(a), p(a))
        assert "partial_target" in f.explain()
    finally:
        SCALE = old


def test_a_rebound_global_helper_retraces():
    global helper
    f = dj.compile(lambda a: helper(a) + 1.0)
    a = t([1.0, 2.0])
    old = helper
    try:
        same(f(a), a * SCALE + 1.0)
        helper = lambda a: a - 5.0     # noqa: E731
        same(f(a), a - 4.0)
        assert f.cache_info().traces == 2
    finally:
        helper = old


def bumps(a):
    counts(a)
    return a * 2.0


def test_a_helper_that_assigns_a_global_runs_eagerly():
    f = dj.compile(bumps)
    before = COUNT
    f(t([1.0]))
    f(t([1.0]))
    assert COUNT == before + 2
    assert "global 'counts', which it calls, assigns the global 'COUNT'" in f.explain()
    assert f.cache_info().entries == 1       # COUNT's new value is no new signature


def test_print_runs_eagerly_and_prints_exactly_what_eager_prints(capsys):
    fn = lambda a: (print("called"), print("b =", a * 2.0), a + 1.0)[2]   # noqa: E731
    a = t([1.0, 2.0])
    fn(a)
    want = capsys.readouterr().out
    f = dj.compile(fn)
    for _ in range(2):
        same(f(a), a + 1.0)
        assert capsys.readouterr().out == want     # once per call; never a partial "b = " line
    assert "calls print()" in f.explain()


GLOBAL_W = t([1.0, 2.0])


def test_backward_uses_the_values_the_forward_used():
    global GLOBAL_W, SCALE
    fn = lambda a: (a * GLOBAL_W * SCALE + a * OUT.w[:2]).sum()      # noqa: E731
    f = dj.compile(fn)
    old = (GLOBAL_W, SCALE)
    try:
        for compiled in (False, True):
            a = t([1.0, 1.0])
            a.requires_grad_(True)
            y = (f if compiled else fn)(a)
            GLOBAL_W, SCALE, OUT.w = t([100.0, 100.0]), 50.0, t([-9.0, -9.0, -9.0])   # after forward
            y.backward()
            np.testing.assert_array_equal(a.grad.numpy(), [1.0 * 2.0 + 1.0, 2.0 * 2.0 + 2.0])
            (GLOBAL_W, SCALE), _ = old, _reset_out()
        assert type(f(a).grad_fn).__name__ == "CompiledBackward"
    finally:
        (GLOBAL_W, SCALE), _ = old, _reset_out()


def test_a_tensor_kept_outside_the_trace_raises_when_used():
    from dispatch_jit.errors import EscapedTensorError
    kept = []
    f = dj.compile(lambda a: (kept.append(a * 2.0), a + 1.0)[1])
    a = t([1.0, 2.0])
    same(f(a), a + 1.0)
    assert len(kept) == 1       # stored while tracing only: the docstring says so
    for use in (lambda x: x + 1.0, lambda x: x.numpy(), lambda x: print(x), lambda x: x.shape):
        with pytest.raises(EscapedTensorError, match="placeholder without data"):
            use(kept[0])


class Cfg:
    scale = 2.0


class Slotted:
    __slots__ = ("w",)


SLOTTED = Slotted()
SLOTTED.w = t([1.0, 2.0])


def test_class_attributes_and_slots_are_read_or_guarded():
    inst = Cfg()
    fn = lambda a: a * Cfg.scale + inst.scale * SLOTTED.w       # noqa: E731
    f = dj.compile(fn)
    a = t([1.0, 1.0])
    old = SLOTTED.w
    try:
        same(f(a), fn(a))
        Cfg.scale = 3.0                  # the class's: both reads change
        same(f(a), fn(a))
        inst.scale = -1.0                # the instance's own now
        same(f(a), fn(a))
        SLOTTED.w = t([5.0, 6.0])        # a tensor in a slot: read at every call
        same(f(a), fn(a))
        assert "global 'Cfg'.scale" in f.explain() and f.cache_info().eager_calls == 0
    finally:
        Cfg.scale, SLOTTED.w = 2.0, old


def test_a_tensor_from_outside_works_as_usual_in_other_threads_while_a_trace_guards_it():
    started, go, res = threading.Event(), threading.Event(), []

    def fn(a):
        started.set()
        go.wait(30)
        return a * OUT.w

    f = dj.compile(fn)
    a = t([1.0, 1.0, 1.0])
    th = threading.Thread(target=lambda: res.append(f(a)))
    th.start()
    try:
        assert started.wait(30)
        assert type(OUT.w).__name__ == "ExternalTensor"      # guarded in the tracing thread only
        assert OUT.w.tolist() == [1.0, 2.0, 3.0] and float(OUT.w[2]) == 3.0 and OUT.w.shape == (3,)
        same(dj.add(OUT.w, 1.0), t([2.0, 3.0, 4.0]))
    finally:
        go.set()
        th.join()
    same(res[0], t([1.0, 2.0, 3.0]))
    assert type(OUT.w) is dj.Tensor and f.cache_info().eager_calls == 0


def test_random_numbers_drawn_while_tracing_are_not_replayed():
    fn = lambda a: a + dj.rand(3)                # noqa: E731
    f = dj.compile(fn)
    a = dj.zeros(3)
    dj.manual_seed(7)
    want = [fn(a).tolist() for _ in range(3)]
    dj.manual_seed(7)
    got = [f(a).tolist() for _ in range(3)]
    assert got == want                           # fresh values per call, the same stream as eager's
    assert "draws random numbers" in f.explain()


def test_contiguous_copies_or_aliases_as_in_eager_mode():
    # the placeholder of a traced tensor is always contiguous, so .contiguous() returned a
    # non-contiguous input itself: writing into the result changed the input (found by the fuzzer)
    a = np.arange(6.0).reshape(2, 3)
    f = dj.compile(lambda x: (x.contiguous(), (x * 2).contiguous()))
    strided = dj.from_numpy(np.ascontiguousarray(a[::-1]))[::-1]
    plain = dj.from_numpy(a.copy())
    for x in (strided, plain, strided):
        got, doubled = f(x)
        want = x.contiguous()
        assert got.is_contiguous() and (got is x) == (want is x)
        assert np.shares_memory(got.numpy(), x.numpy()) == np.shares_memory(want.numpy(), x.numpy())
        np.testing.assert_array_equal(got.numpy(), a)
        np.testing.assert_array_equal(doubled.numpy(), a * 2)
    # a view's layout depends on sizes and strides: that signature runs eagerly, and says why
    g = dj.compile(lambda x: (x.T.contiguous(),))
    y = g(plain)[0]
    assert y.is_contiguous() and not np.shares_memory(y.numpy(), plain.numpy())
    assert "contiguous() of a traced view" in g.explain()


def test_autograd_functions_keep_their_backward_under_compile():
    # the compiled backward replays the traced ops through the derivative table: a Function's own
    # backward was lost, so max(x, dim).values shared the gradient among ties (amax's rule) where
    # eager gives it to the selected index only
    class Twice(dj.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    def f(x):
        return (dj.max(x, 1).values * 2).sum() + (Twice.apply(x) * 3).sum()

    data = [[1.0, 3.0, 3.0], [2.0, 0.5, 2.0]]
    x = dj.tensor(data, requires_grad=True)
    f(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[6.0, 8.0, 6.0], [8.0, 6.0, 6.0]])
    cf = dj.compile(f)
    y = dj.tensor(data, requires_grad=True)
    cf(y).backward()
    np.testing.assert_array_equal(y.grad.numpy(), x.grad.numpy())
    assert "dj.autograd.Function" in cf.explain()
    assert cf(dj.tensor(data)).item() == f(dj.tensor(data)).item()     # without grad it still compiles


def test_errors_come_in_eager_order():
    # softmax of an int tensor is refused while tracing; eager mode reaches x % x first, which fails
    # on a zero: the compiled call raised the trace's DTypeError instead (found by the fuzzer)
    f = dj.compile(lambda x: (x % x).softmax(-1))
    with pytest.raises(dj.errors.DTypeError, match="softmax"):
        f(dj.tensor([1, 2], dtype=dj.int16))
    with pytest.raises(ZeroDivisionError):
        f(dj.tensor([0, 2], dtype=dj.int16))
    assert "DTypeError" in f.explain()     # the softmax op refuses int16 (trace aborted on its meta run)


_SPARSE_FNS = {
    "sizes": lambda a, d: d * a.shape[0] * len(a) * a.numel(),   # the matrix's sizes, not its values'
    "chain": lambda a, d: (a * 2 * 3).to_dense() + d.sum(),      # a fused loop must not read the values
    "mm": lambda a, d: dj.sparse.mm(a, d) * 2 + 1,
}


@pytest.mark.parametrize("name", sorted(_SPARSE_FNS))
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_sparse_tensor_makes_the_call_run_eagerly(name, layout):
    # the graph holds strided arrays only: a sparse tensor's array is its values, so a stand-in
    # answered shape[0] with the number of non-zeros (3, not 2) and fused loops read the values
    fn = _SPARSE_FNS[name]
    a = dj.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    a = a if layout == "coo" else a.to_sparse_csr()
    d = dj.tensor(np.arange(6.0).reshape(3, 2))
    want = fn(a, d)
    f = dj.compile(fn)
    with pytest.warns(CompileWarning, match=f"a sparse_{layout} tensor reached the function"):
        got = f(a, d)
    same(got, want)
    same(f(a, d), want)
    captured = dj.compile(lambda d: fn(a, d))                    # reached through a closure
    with pytest.warns(CompileWarning, match="tensor reached the function"):
        same(captured(d), want)
    assert "2 eager calls" in f.explain().splitlines()[0]
