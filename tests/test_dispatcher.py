"""The dispatcher: registration, the computed table's precedence, memoized
resolution, guards, fallthrough, fallbacks, redispatch, modes, threads, errors."""

import threading

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import NoKernelError, RegistrationError, SchemaError
from dispatch_jit.registry import lookup
from helpers import run_threads

K = dj.DispatchKey


class _Tagged(dj.Tensor):
    """A tensor naming the kernel that made it; it compares equal to that name.  (A ``-> Tensor``
    kernel must return a tensor: the dispatcher checks the first call of each signature.)"""

    __slots__ = ()

    def __eq__(self, other):
        return self.__dict__["tag"] == other if isinstance(other, str) else super().__eq__(other)

    __hash__ = dj.Tensor.__hash__

    def __repr__(self):
        return f"<tensor tagged {self.__dict__['tag']!r}>"


def _tag(name):
    """A kernel that records which kernel ran, by returning a tagged tensor."""
    def kernel(x, *rest):
        t = dj.zeros(1)
        t.__class__ = _Tagged
        t.__dict__["tag"] = name
        return t
    kernel.__name__ = name
    return kernel


def _entry(lib, name):
    return lookup(f"{lib.ns}::{name}")


def test_define_impl_and_call(lib):
    lib.define("myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: dj.add(a, b), "CPU")
    x, w = dj.tensor([1.0, 2.0]), dj.tensor([3.0, 4.0])
    out = getattr(dj.ops, lib.ns).myadd(x, w)
    assert out.tolist() == [4.0, 6.0]
    assert getattr(dj.ops, lib.ns).myadd.default(x, w).tolist() == [4.0, 6.0]


def test_impl_as_decorator(lib):
    lib.define("twice(Tensor self) -> Tensor")

    @lib.impl("twice", dispatch_key="CPU")
    def twice(x):
        return x * 2
    assert getattr(dj.ops, lib.ns).twice(dj.tensor([1.0])).tolist() == [2.0]


# Each precedence rule of the computed table, one registration set at a time.
@pytest.mark.parametrize("registered,expected_cpu,expected_autograd_cpu", [
    ({"CPU": "direct", "CompositeExplicitAutograd": "cea", "CompositeImplicitAutograd": "cia"}, "direct", None),
    ({"CompositeExplicitAutograd": "cea", "CompositeImplicitAutograd": "cia"}, "cea", None),
    ({"CompositeImplicitAutograd": "cia"}, "cia", "cia"),
    ({"CPU": "direct", "Autograd": "ag", "CompositeImplicitAutograd": "cia"}, "direct", "ag"),
    ({"CPU": "direct"}, "direct", None),
])
def test_table_precedence(lib, registered, expected_cpu, expected_autograd_cpu):
    lib.define("f(Tensor self) -> Tensor")
    for key, name in registered.items():
        lib.impl("f", _tag(name), key)
    op = _entry(lib, "f")
    fn, _ = op.table[K.CPU.value]
    assert fn.__name__ == expected_cpu
    fn, source = op.table[K.AutogradCPU.value]
    if expected_autograd_cpu is None:
        # nothing op-specific: the global autograd fallback (autograd not implemented) applies
        assert source == "backend fallback"
    else:
        assert fn.__name__ == expected_autograd_cpu


def test_cia_not_used_for_autograd_when_backend_has_kernel(lib):
    # PyTorch's rule 2.2: a direct CPU kernel hides CompositeImplicit at AutogradCPU
    lib.define("g(Tensor self) -> Tensor")
    lib.impl("g", _tag("cia"), "CompositeImplicitAutograd")
    lib.impl("g", _tag("cpu"), "CPU")
    op = _entry(lib, "g")
    assert op.table[K.AutogradCPU.value][1] != "CompositeImplicitAutograd"
    assert op.table[K.AutogradCUDA.value][1] == "CompositeImplicitAutograd"


def test_autograd_key_runs_first_then_redispatches(lib):
    lib.define("h(Tensor self) -> Tensor")
    seen = []

    def cpu(x):
        seen.append("CPU")
        return x

    def autograd(x):
        seen.append("Autograd")
        with dj.ExcludeDispatchKeyGuard(K.AutogradCPU):
            return getattr(dj.ops, lib.ns).h(x)
    lib.impl("h", cpu, "CPU")
    lib.impl("h", autograd, "Autograd")
    h = getattr(dj.ops, lib.ns).h
    h(dj.tensor([1.0]))
    assert seen == ["CPU"]                 # no AutogradCPU key on a tensor without grad
    seen.clear()
    h(dj.tensor([1.0], requires_grad=True))
    assert seen == ["Autograd", "CPU"]


def test_fallthrough_masks_the_key(lib):
    lib.define("ft(Tensor self) -> Tensor")
    lib.impl("ft", _tag("cpu"), "CPU")
    lib.impl("ft", _tag("tracer"), "Tracer")
    f = getattr(dj.ops, lib.ns).ft
    with dj.IncludeDispatchKeyGuard(K.Tracer):
        assert f(dj.tensor([1.0])) == "tracer"
    op = _entry(lib, "ft")
    op.kernels.clear(); op.refresh()
    lib.impl("ft", _tag("cpu"), "CPU")
    lib.impl("ft", dj.library.fallthrough_kernel, "Tracer")
    with dj.IncludeDispatchKeyGuard(K.Tracer):
        assert f(dj.tensor([1.0])) == "cpu"
    assert op.fallthrough_bits >> K.Tracer.value & 1


def test_boxed_fallback_applies_to_every_op_present_and_future(lib, fallback_lib):
    # a key that aten::sub has no kernel at, so the fallback is what the table falls back to
    calls = []

    def boxed(op, keyset, args, kwargs):
        assert type(op) is dj.OpOverload      # the public handle (dispatcher.set_op_handle), not the entry
        calls.append((op.name(), keyset.highest().name))
        with dj.ExcludeDispatchKeyGuard(K.SparseCsrCUDA):
            return op(*args, **kwargs)
    fallback_lib.fallback(boxed, "SparseCsrCUDA")
    lib.define("later(Tensor self) -> Tensor")      # defined after the fallback
    lib.impl("later", lambda x: x, "CPU")
    x = dj.tensor([1.0, 2.0])
    with dj.IncludeDispatchKeyGuard(K.SparseCsrCUDA):
        dj.sub(x, x)
        getattr(dj.ops, lib.ns).later(x)
    assert calls == [("aten::sub.Tensor", "SparseCsrCUDA"), (f"{lib.ns}::later", "SparseCsrCUDA")]
    fallback_lib._destroy()
    with pytest.raises(NoKernelError), dj.IncludeDispatchKeyGuard(K.SparseCsrCUDA):
        dj.sub(x, x)                               # removed: nothing at SparseCsrCUDA any more
    assert len(calls) == 2


def test_fallback_only_on_underscore_impl_library(lib):
    with pytest.raises(RegistrationError, match="only allowed on Library"):
        lib.fallback(lambda *a: None, "CPU")


def test_guards_exclusion_wins_and_restores(lib):
    lib.define("gg(Tensor self) -> Tensor")
    lib.impl("gg", _tag("cpu"), "CPU")
    lib.impl("gg", _tag("autocast"), "AutocastCPU")
    f = getattr(dj.ops, lib.ns).gg
    x = dj.tensor([1.0])
    with dj.IncludeDispatchKeyGuard(K.AutocastCPU):
        assert f(x) == "autocast"
        with dj.ExcludeDispatchKeyGuard(K.AutocastCPU):
            assert f(x) == "cpu"
        assert f(x) == "autocast"
    assert f(x) == "cpu"


def test_guards_are_thread_local(lib):
    lib.define("tl(Tensor self) -> Tensor")
    lib.impl("tl", _tag("cpu"), "CPU")
    lib.impl("tl", _tag("autocast"), "AutocastCPU")
    f = getattr(dj.ops, lib.ns).tl
    x = dj.tensor([1.0])
    result = {}
    with dj.IncludeDispatchKeyGuard(K.AutocastCPU):
        t = threading.Thread(target=lambda: result.setdefault("other", f(x)))
        t.start(); t.join()
        assert f(x) == "autocast"
    assert result["other"] == "cpu"


def test_handles_undo_and_reregistration(lib):
    lib.define("hd(Tensor self) -> Tensor")
    h = lib.impl("hd", _tag("one"), "CPU")
    with pytest.raises(RegistrationError, match="already has a kernel registered at CPU"):
        lib.impl("hd", _tag("two"), "CPU")
    f = getattr(dj.ops, lib.ns).hd
    assert f(dj.tensor([1.0])) == "one"
    h.remove()
    h.remove()   # idempotent
    with pytest.raises(NoKernelError):
        f(dj.tensor([1.0]))
    lib.impl("hd", _tag("two"), "CPU")
    assert f(dj.tensor([1.0])) == "two"            # registration invalidated the memo


def test_duplicate_definitions_are_errors(lib):
    lib.define("dup(Tensor self) -> Tensor")
    with pytest.raises(RegistrationError, match="already defined"):
        lib.define("dup(Tensor self) -> Tensor")
    with pytest.raises(RegistrationError, match="already has a DEF library"):
        dj.Library(lib.ns, "DEF")
    frag = dj.Library(lib.ns, "FRAGMENT")
    frag.define("dup.other(Tensor self) -> Tensor")
    with pytest.raises(RegistrationError, match="IMPL library"):
        dj.Library(lib.ns, "IMPL").define("nope(Tensor self) -> Tensor")
    frag._destroy()


def test_no_kernel_error_lists_keys_and_table(lib):
    lib.define("onlycuda(Tensor self) -> Tensor")
    lib.impl("onlycuda", _tag("cuda"), "CUDA")
    with pytest.raises(NoKernelError) as e:
        getattr(dj.ops, lib.ns).onlycuda(dj.tensor([1.0]))
    msg = str(e.value)
    assert f"Could not run '{lib.ns}::onlycuda' with arguments from the 'CPU' backend" in msg
    assert "registered only for: CUDA" in msg
    assert "Computed dispatch table" in msg
    assert isinstance(e.value, LookupError)


def test_schema_errors_quote_the_schema():
    x = dj.tensor([1.0])
    with pytest.raises(SchemaError, match=r"aten::add\.Tensor\(Tensor self, Tensor other.*'other'"):
        dj.add(x)
    with pytest.raises(SchemaError, match="alpha"):
        dj.add(x, x, alpha="two")
    with pytest.raises(SchemaError, match="argument .other. must be Tensor, not str"):
        dj.add(x, "one")
    with pytest.raises(TypeError):
        dj.add(x, x, beta=2)


def test_memo_resolves_once_per_signature():
    op = lookup("aten::mul.Tensor")
    op.memo.clear()
    before = op.misses
    a32, b32 = dj.tensor([1.0, 2.0]), dj.tensor([3.0, 4.0])
    for _ in range(5):
        dj.mul(a32, b32)
    assert op.misses == before + 1
    dj.mul(a32.to(dj.float64), b32.to(dj.float64))
    dj.mul(a32, 2.0)
    assert op.misses == before + 3
    assert len(op.memo) == 3


def test_memoized_callable_is_the_specialized_kernel():
    # a hit must not go back through Numba's generic dispatcher: the memo holds
    # a closure over the compiled overload's entry point
    op = lookup("aten::sub.Tensor")
    x = dj.tensor([1.0, 2.0])
    dj.sub(x, x)
    from dispatch_jit.dispatcher import tls
    fn = next(v for k, v in op.memo.items() if k[0] == tls.k and k[1] == x._sig and k[2] == x._sig)
    ks = fn.__globals__["_ks"]
    assert type(ks).__name__ == "builtin_function_or_method"


def test_dispatch_trace_output(capsys):
    x = dj.tensor([1.0, 2.0], dtype=dj.float32)
    w = dj.tensor([3.0, 4.0], dtype=dj.float32)
    with dj.show_dispatch_trace():
        dj.add(x, w)
    assert capsys.readouterr().out == "[call] op=[aten::add.Tensor], key=[CPU]\n"


def test_dispatch_trace_nested_redispatch(lib, capsys):
    lib.define("tr(Tensor self) -> Tensor")
    lib.impl("tr", lambda x: x, "CPU")

    class Wrapper:
        __name__ = "wrapper"

        def specialize(self, call):
            below = call.redispatch()
            return lambda x: below(x)
    lib.impl("tr", Wrapper(), "Autograd")
    with dj.show_dispatch_trace():
        getattr(dj.ops, lib.ns).tr(dj.tensor([1.0], requires_grad=True))
    out = capsys.readouterr().out.splitlines()
    assert out == [f"[call] op=[{lib.ns}::tr], key=[AutogradCPU]", f" [redispatch] op=[{lib.ns}::tr], key=[CPU]"]


def test_redispatch_with_explicit_keyset(lib):
    lib.define("rd(Tensor self) -> Tensor")
    lib.impl("rd", _tag("cpu"), "CPU")
    lib.impl("rd", _tag("autocast"), "AutocastCPU")
    ov = getattr(dj.ops, lib.ns).rd.default
    x = dj.tensor([1.0])
    assert ov.redispatch(dj.DispatchKeySet([K.AutocastCPU, K.CPU]), x) == "autocast"
    assert ov.redispatch(dj.DispatchKeySet(K.CPU), x) == "cpu"


def test_dispatch_mode_sees_every_call():
    seen = []

    class Log(dj.DispatchMode):
        def __dispatch__(self, op, types, args, kwargs):
            seen.append(op.name())
            return op(*args, **kwargs)
    x = dj.tensor([1.0, 2.0])
    with Log():
        y = (x + 1) * x
    assert seen == ["aten::add.Tensor", "aten::mul.Tensor"]
    assert y.tolist() == [2.0, 6.0]
    seen.clear()
    x + 1
    assert seen == []


def test_concurrent_calls_from_many_threads():
    errors = []
    arrays = [np.arange(50, dtype=np.float32) * i for i in range(8)]

    def work(i):
        try:
            t = dj.asarray(arrays[i])
            for _ in range(200):
                r = dj.add(t, t) * 0.5
                if not np.array_equal(r.numpy(), arrays[i]):
                    errors.append(i)
                    return
        except Exception as e:   # pragma: no cover - reported below
            errors.append(repr(e))
    run_threads(work, 8)
    assert errors == []


def test_introspection(lib):
    assert dj.has_kernel("aten::add", "CPU") and not dj.has_kernel("aten::add", "Meta")
    table = dj.dump_table("aten::add")
    assert "CPU" in table and "add_cpu  [kernel]" in table and "[missing]" in table
    lib.define("intro(Tensor self) -> Tensor")
    lib.impl("intro", lambda x: x, "CompositeImplicitAutograd")
    text = dj.dump(f"{lib.ns}::intro")
    assert "CompositeImplicitAutograd" in text and "alias kernel" in text
    assert "[CompositeImplicitAutograd]" in dj.dump_table(f"{lib.ns}::intro")
    assert "aten::add.Tensor" in dj.list_operators("aten")


def test_keyword_aliases_dim_and_keepdim():
    x = dj.ones(2, 3)
    assert dj.sum(x, dim=1, keepdim=True).shape == (2, 1)
    assert x.sum(axis=0).shape == (3,)


def test_only_python_scalars_is_a_clear_error():
    with pytest.raises(SchemaError, match="expected at least one Tensor argument, got only Python values"):
        dj.add(1, 2)


def test_clamp_needs_a_bound():
    with pytest.raises(SchemaError, match="at least one of 'min' or 'max'"):
        dj.clamp(dj.tensor([1.0]))


def test_trace_environment_variable_turns_tracing_on():
    import os
    import subprocess
    import sys
    code = "import dispatch_jit as dj; dj.add(dj.tensor([1.0]), dj.tensor([2.0]))"
    env = dict(os.environ, DISPATCH_JIT_SHOW_DISPATCH_TRACE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[call] op=[aten::add.Tensor], key=[CPU]" in r.stdout
