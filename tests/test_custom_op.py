"""dj.library.custom_op, register_kernel/register_autograd/register_fake, and opcheck.

This module uses ``from __future__ import annotations``, so every function
defined here has string annotations: schema inference must evaluate them.
"""

from __future__ import annotations

import itertools
import re
from typing import Optional, Sequence, Union

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import SchemaInferenceError
from dispatch_jit.library import infer_schema
from dispatch_jit.errors import OpCheckError

_ids = itertools.count()


@pytest.fixture
def ns():
    """A unique namespace; every custom op made through ``make`` is destroyed afterwards."""
    name = f"custom_test{next(_ids)}"
    made = []

    def make(opname, fn=None, **kw):
        kw.setdefault("mutates_args", ())
        if fn is None:
            return lambda f: make(opname, f, **kw)
        op = dj.library.custom_op(f"{name}::{opname}", fn, **kw)
        made.append(op)
        return op
    make.ns = name
    yield make
    for op in reversed(made):
        op._destroy()


def t64(*values, requires_grad=False):
    return dj.tensor(list(values), dtype=dj.float64, requires_grad=requires_grad)


# -- schema inference ----------------------------------------------------------------------------
def f_basic(a: dj.Tensor, b: dj.Tensor) -> dj.Tensor: ...
def f_optional(x: dj.Tensor, w: Optional[dj.Tensor] = None, b: dj.Tensor | None = None) -> dj.Tensor: ...
def f_lists(x: dj.Tensor, dims: list[int], sizes: Sequence[int] = (1, 2), scales: Optional[list[float]] = None,
            flags: list[bool] = (True,)) -> dj.Tensor: ...
def f_scalars(x: dj.Tensor, n: int = 3, alpha: float = 0.5, eps: float = 1, on: bool = False,
              mode: str = "mean", s: Union[int, float] = 2) -> dj.Tensor: ...
def f_kwonly(x: dj.Tensor, *, keepdim: bool = False, dtype: Optional[dj.DType] = None) -> dj.Tensor: ...
def f_tensor_lists(xs: list[dj.Tensor], maybe: list[Optional[dj.Tensor]]) -> list[dj.Tensor]: ...
def f_tuple(x: dj.Tensor) -> tuple[dj.Tensor, dj.Tensor]: ...
def f_none(out: dj.Tensor, x: dj.Tensor) -> None: ...
def f_int(x: dj.Tensor) -> int: ...


@pytest.mark.parametrize("fn, mutates, expected", [
    (f_basic, (), "(Tensor a, Tensor b) -> Tensor"),
    (f_optional, (), "(Tensor x, Tensor? w=None, Tensor? b=None) -> Tensor"),
    (f_lists, (), "(Tensor x, int[] dims, int[] sizes=[1, 2], float[]? scales=None, bool[] flags=[True]) -> Tensor"),
    (f_scalars, (), "(Tensor x, int n=3, float alpha=0.5, float eps=1, bool on=False, str mode='mean', "
                    "Scalar s=2) -> Tensor"),
    (f_kwonly, (), "(Tensor x, *, bool keepdim=False, ScalarType? dtype=None) -> Tensor"),
    (f_tensor_lists, (), "(Tensor[] xs, Tensor?[] maybe) -> Tensor[]"),
    (f_tuple, (), "(Tensor x) -> (Tensor, Tensor)"),
    (f_none, ("out",), "(Tensor(a!) out, Tensor x) -> ()"),
    (f_none, ("x", "out"), "(Tensor(a!) out, Tensor(b!) x) -> ()"),
    (f_none, "unknown", "(Tensor(a!) out, Tensor(b!) x) -> ()"),
    (f_optional, ("w",), "(Tensor x, Tensor(a!)? w=None, Tensor? b=None) -> Tensor"),
    (f_int, (), "(Tensor x) -> int"),
])
def test_infer_schema(fn, mutates, expected):
    assert infer_schema(fn, mutates_args=mutates) == expected
    # and the result parses, with the op name in front
    from dispatch_jit.schema import parse_schema
    parse_schema(infer_schema(fn, mutates_args=mutates, op_name="f"))


def test_infer_schema_real_annotations_match_string_ones():
    # the same function without `from __future__ import annotations`: real type objects
    g = {"dj": dj, "Optional": Optional}
    src = ("def f_optional(x: dj.Tensor, w: Optional[dj.Tensor] = None, b: dj.Tensor | None = None) "
           "-> dj.Tensor: ...")
    exec(compile(src, "<real annotations>", "exec", dont_inherit=True), g)   # no inherited __future__ flags
    assert isinstance(f_optional.__annotations__["x"], str)
    assert not isinstance(g["f_optional"].__annotations__["x"], str)
    assert infer_schema(g["f_optional"], mutates_args=()) == infer_schema(f_optional, mutates_args=())


def _bad_dict(x: dj.Tensor, opts: dict) -> dj.Tensor: ...
def _bad_missing(x: dj.Tensor, n) -> dj.Tensor: ...
def _bad_varargs(x: dj.Tensor, *rest: dj.Tensor) -> dj.Tensor: ...
def _bad_no_return(x: dj.Tensor): ...
def _bad_default(x: dj.Tensor, y: dj.Tensor = 1.0) -> dj.Tensor: ...
def _bad_int_default(x: dj.Tensor, n: int = 1.5) -> dj.Tensor: ...
def _bad_variadic_return(x: dj.Tensor) -> tuple[dj.Tensor, ...]: ...
def _bad_name(x: dj.Tensor, y: NoSuchType) -> dj.Tensor: ...  # noqa: F821


@pytest.mark.parametrize("fn, mutates, match", [
    (_bad_dict, (), r"parameter 'opts' has unsupported type annotation dict"),
    (_bad_missing, (), r"parameter 'n' needs a type annotation"),
    (_bad_varargs, (), r"parameter 'rest': \*args"),
    (_bad_no_return, (), r"return type needs an annotation"),
    (_bad_default, (), r"parameter 'y': default 1.0 does not fit type Tensor"),
    (_bad_int_default, (), r"parameter 'n': default 1.5 does not fit type int"),
    (_bad_variadic_return, (), r"give the number of outputs"),
    (_bad_name, (), r"NoSuchType.*importable at module level"),
    (f_basic, ("c",), r"mutates_args names \['c'\], which are not parameters"),
    (f_scalars, ("n",), r"parameter 'n' is in mutates_args but is int"),
    (f_basic, "a", r"did you mean \('a',\)"),
])
def test_infer_schema_errors(fn, mutates, match):
    with pytest.raises(SchemaInferenceError, match=match):
        infer_schema(fn, mutates_args=mutates)


# -- defining and calling --------------------------------------------------------------------------
def test_custom_op_defines_and_dispatches(ns):
    @ns("scale_add")
    def scale_add(x: dj.Tensor, y: Optional[dj.Tensor] = None, *, alpha: float = 2) -> dj.Tensor:
        return x * alpha if y is None else x * alpha + y

    assert str(scale_add.schema) == f"{ns.ns}::scale_add(Tensor x, Tensor? y=None, *, float alpha=2.0) -> Tensor"
    x = dj.tensor([1.0, 2.0])
    assert scale_add(x).tolist() == [2.0, 4.0]
    assert scale_add(x, x, alpha=3.0).tolist() == [4.0, 8.0]
    packet = getattr(getattr(dj.ops, ns.ns), "scale_add")
    assert packet(x, alpha=1.0).tolist() == [1.0, 2.0]
    assert scale_add.op == packet.default and scale_add._opoverload is scale_add.op
    assert scale_add.__name__ == "scale_add"
    with pytest.raises(dj.errors.SchemaError, match="argument 'alpha' must be float"):
        scale_add(dj.tensor([1, 2]), alpha="big")   # a new signature: checked on the miss path
    # device_types=None: one kernel for every backend
    assert dj.has_kernel(scale_add.op, "CompositeExplicitAutograd")
    assert dj.has_kernel(scale_add.op, "CPU") and dj.has_kernel(scale_add.op, "CUDA")
    assert "scale_add [alias kernel] (custom_op" in dj.dump(scale_add.op)


def test_destroy_undoes_everything(ns):
    name = f"{ns.ns}::gone"
    op = dj.library.custom_op(name, lambda x: x.clone(), mutates_args=(), schema="(Tensor x) -> Tensor")
    op.register_fake(lambda x: dj.empty_like(x))
    op.register_autograd(lambda ctx, g: g)
    op._destroy()
    with pytest.raises(LookupError):
        dj.has_kernel(name, "CPU")
    again = dj.library.custom_op(name, lambda x: x * 2, mutates_args=(), schema="(Tensor x) -> Tensor")
    try:
        from dispatch_jit.keys import DispatchKey
        from dispatch_jit.registry import lookup
        assert DispatchKey.Meta not in lookup(name).kernels and not dj.has_kernel(name, "Autograd")
        assert again(dj.tensor([1.0])).tolist() == [2.0]
    finally:
        again._destroy()


def test_fragment_next_to_an_existing_def_library(lib):
    lib.define("first(Tensor x) -> Tensor")
    op = dj.library.custom_op(f"{lib.ns}::second", lambda x: x + 1, mutates_args=(),
                              schema="second(Tensor x) -> Tensor")
    try:
        assert op(dj.tensor([1.0])).tolist() == [2.0]
    finally:
        op._destroy()
    assert dj.dump(f"{lib.ns}::first")   # the DEF library's op is untouched


def test_explicit_schema_must_agree_with_mutates_args(ns):
    with pytest.raises(SchemaInferenceError, match=r"mutates \['x'\] but mutates_args says \[\]"):
        ns("m", lambda x: None, schema="(Tensor(a!) x) -> ()")


@pytest.mark.parametrize("qualname, match", [
    ("noname", "qualified name"), ("aten::mine", "reserved"), ("a::b.overload", "identifiers"),
])
def test_bad_qualnames(qualname, match):
    with pytest.raises(ValueError, match=match):
        dj.library.custom_op(qualname, f_basic, mutates_args=())


def test_register_kernel_per_device(ns):
    @ns("dev", device_types="cpu")
    def dev(x: dj.Tensor) -> dj.Tensor:
        return x + 1

    assert dj.has_kernel(dev.op, "CPU") and not dj.has_kernel(dev.op, "CUDA")

    @dev.register_kernel("cuda")
    def dev_cuda(x):
        raise AssertionError("no CUDA tensors exist")

    assert dj.has_kernel(dev.op, "CUDA")
    assert re.search(r"CUDA +dev_cuda +\[kernel\]", dj.dump_table(dev.op))
    assert dev(dj.tensor([1.0])).tolist() == [2.0]
    dev.register_kernel("cpu", lambda x: x + 10)   # replaces the kernel this object registered
    assert dev(dj.tensor([1.0])).tolist() == [11.0]
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        dev.register_kernel("tpu", lambda x: x)


# -- autograd ----------------------------------------------------------------------------------------
def _mymul(ns):
    @ns("mymul")
    def mymul(a: dj.Tensor, b: dj.Tensor) -> dj.Tensor:
        return a * b

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b if ctx.needs_input_grad[0] else None, g * a if ctx.needs_input_grad[1] else None)

    mymul.register_autograd(backward, setup_context=setup_context)
    return mymul


def test_register_autograd_matches_finite_differences(ns):
    mymul = _mymul(ns)
    a, b = t64(0.5, -1.5, 2.0, requires_grad=True), t64(2.0, 3.0, -1.0, requires_grad=True)
    assert dj.autograd.gradcheck(mymul, (a, b))
    out = mymul(a, b)
    assert type(out.grad_fn).__name__ == "MymulBackward"
    out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.numpy())
    np.testing.assert_allclose(b.grad.numpy(), a.numpy())
    # broadcasting: the gradient is summed back to the input's shape
    c = t64(2.0, requires_grad=True)
    mymul(a, c).sum().backward()
    assert c.grad.tolist() == [1.0]
    # nothing requires grad, or grad mode is off: nothing is recorded
    assert not mymul(t64(1.0), t64(2.0)).requires_grad
    with dj.no_grad():
        assert mymul(a, b).grad_fn is None


def test_register_autograd_trace_redispatches_below_autograd(ns, capsys):
    mymul = _mymul(ns)
    a = t64(1.0, requires_grad=True)
    with dj.show_dispatch_trace():
        mymul(a, a)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"[call] op=[{ns.ns}::mymul], key=[AutogradCPU]",
                         f" [redispatch] op=[{ns.ns}::mymul], key=[CPU]",
                         "  [call] op=[aten::mul.Tensor], key=[CPU]"]   # the kernel's own ops do not record


def test_register_autograd_multiple_outputs_and_tensor_lists(ns):
    @ns("two")
    def two(x: dj.Tensor) -> tuple[dj.Tensor, dj.Tensor]:
        return x * 2, x * x

    two.register_autograd(lambda ctx, g1, g2: g1 * 2 + g2 * 2 * ctx.saved_tensors[0],
                          setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
    x = t64(1.0, -2.0, requires_grad=True)
    assert dj.autograd.gradcheck(two, (x,))
    p, q = two(x)
    assert p.grad_fn is q.grad_fn
    q.sum().backward()          # p gets no gradient: backward sees zeros for it
    assert x.grad.tolist() == [2.0, -4.0]
    from dispatch_jit.autograd.graph import Node
    assert "num_outputs" not in Node.metadata    # per-node metadata, not the shared class default

    @ns("weighted_sum")
    def weighted_sum(xs: list[dj.Tensor], w: float) -> dj.Tensor:
        out = xs[0] * w
        for t in xs[1:]:
            out = out + t
        return out

    def setup(ctx, inputs, output):
        ctx.w, ctx.n = inputs[1], len(inputs[0])

    weighted_sum.register_autograd(lambda ctx, g: ([g * ctx.w] + [g] * (ctx.n - 1), None), setup_context=setup)
    u, v = t64(1.0, 2.0, requires_grad=True), t64(3.0, 4.0, requires_grad=True)
    assert dj.autograd.gradcheck(lambda u, v: weighted_sum([u, v], 3.0), (u, v))


def test_register_autograd_records_its_node_as_autograd_function_does(ns):
    """One recorder (autograd.function.record_node) for both user-written backwards:
    set_materialize_grads(False) passes None for an output without a gradient, here as there."""
    seen = []

    @ns("pair")
    def pair(x: dj.Tensor) -> tuple[dj.Tensor, dj.Tensor]:
        return x * 2, x * 3

    def backward(ctx, g1, g2):
        seen.append((g1 is None, g2 is None))
        return g1 * 2 if g1 is not None else g2 * 3

    pair.register_autograd(backward, setup_context=lambda ctx, inputs, output: ctx.set_materialize_grads(False))

    class Pair(dj.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return backward(ctx, g1, g2)

    for f in (pair, Pair.apply):
        x = t64(1.0, -2.0, requires_grad=True)
        p, q = f(x)
        assert p.grad_fn is q.grad_fn and p.grad_fn.metadata == {"num_outputs": 2}
        q.sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]
    assert seen == [(True, False), (True, False)]


def test_register_autograd_keyword_only_inputs(ns):
    @ns("scaled")
    def scaled(x: dj.Tensor, *, factor: float = 2.0) -> dj.Tensor:
        return x * factor

    def setup(ctx, inputs, output, keyword_only_inputs):
        ctx.factor = keyword_only_inputs["factor"]

    scaled.register_autograd(lambda ctx, g: g * ctx.factor, setup_context=setup)
    x = t64(1.0, 2.0, requires_grad=True)
    scaled(x, factor=5.0).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]


@pytest.mark.parametrize("backward, match", [
    (lambda ctx, g: g, r"backward returned 1 gradient, but the op has 2 positional inputs \(a, b\)"),
    (lambda ctx, g: (dj.ones(3, dtype=dj.float64), None), r"shape \(3,\) for input 'a' of shape \(2,\)"),
    (lambda ctx, g: (g.numpy(), None), r"returned ndarray as the gradient of 'a'"),
])
def test_register_autograd_bad_backward(ns, backward, match):
    @ns("bad")
    def bad(a: dj.Tensor, b: dj.Tensor) -> dj.Tensor:
        return a + b

    bad.register_autograd(backward)
    x = t64(1.0, 2.0, requires_grad=True)
    with pytest.raises(dj.errors.AutogradError, match=match):
        bad(x, x).sum().backward()


def test_register_autograd_rejects_returning_an_input(ns):
    @ns("ident")
    def ident(x: dj.Tensor) -> dj.Tensor:
        return x

    ident.register_autograd(lambda ctx, g: g)
    x = t64(1.0, requires_grad=True)
    with pytest.raises(dj.errors.AutogradError, match=r"returned one of its inputs.*x.clone\(\)"):
        ident(x)
    assert x.grad_fn is None and x.is_leaf


def test_register_autograd_refuses_mutating_ops(ns):
    @ns("inplace", mutates_args=("x",))
    def inplace(x: dj.Tensor) -> None:
        x.numpy()[...] += 1

    with pytest.raises(dj.errors.RegistrationError, match="mutate"):
        inplace.register_autograd(lambda ctx, g: g)


def test_no_autograd_formula(ns):
    # a kernel written with dj ops: it runs below autograd, so nothing inside records either
    @ns("noag")
    def noag(x: dj.Tensor) -> dj.Tensor:
        return x * 3

    w = t64(1.0, 2.0, requires_grad=True)
    out = noag(w)
    assert out.tolist() == [3.0, 6.0]
    # as PyTorch's NotImplemented node: the output requires grad, and a backward that reaches it raises,
    # alone or inside a larger expression (where dropping the op's part of w.grad would be silent)
    assert out.requires_grad and out.grad_fn.name() == "NotImplemented"
    for loss in (lambda: out.sum(), lambda: (noag(w) + w).sum()):
        with pytest.raises(dj.errors.AutogradError, match=rf"'{ns.ns}::noag' is not implemented.*register_autograd"):
            loss().backward()
    assert w.grad is None
    (noag(w.detach()) + w).sum().backward()         # a backward that does not pass through it runs
    assert w.grad.tolist() == [1.0, 1.0]
    with dj.no_grad():
        assert not noag(w).requires_grad


def test_non_differentiable_tag(ns):
    @ns("argmax_like", tags=("non_differentiable",))
    def argmax_like(x: dj.Tensor) -> dj.Tensor:
        return x * 0

    w = t64(1.0, requires_grad=True)
    assert not argmax_like(w).requires_grad
    with pytest.raises(dj.errors.RegistrationError, match="non_differentiable"):
        argmax_like.register_autograd(lambda ctx, g: g)
    argmax_like.register_fake(lambda x: dj.empty_like(x))
    assert set(dj.library.opcheck(argmax_like, (w,)).values()) == {"SUCCESS"}


def test_library_impl_autograd_kernel_as_in_the_seed(lib):
    lib.define("myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: dj.from_numpy(a.numpy() + b.numpy()), "CPU")
    op = getattr(dj.ops, lib.ns).myadd.default

    class MyAddFunction(dj.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            with dj.ExcludeDispatchKeyGuard(dj.DispatchKey.AutogradCPU):
                return op(a, b)

        @staticmethod
        def backward(ctx, g):
            return g, g

    lib.impl("myadd", lambda a, b: MyAddFunction.apply(a, b), "Autograd")
    a, b = t64(1.0, 2.0, requires_grad=True), t64(3.0, 4.0, requires_grad=True)
    out = op(a, b)
    assert out.tolist() == [4.0, 6.0] and type(out.grad_fn).__name__ == "MyAddFunctionBackward"
    out.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [1.0, 1.0]
    assert dj.autograd.gradcheck(op, (t64(0.5, requires_grad=True), t64(2.0, requires_grad=True)))
    assert dj.library.opcheck(op, (a, b), test_utils=("test_schema", "test_autograd_registration", "test_mutation"))


# -- the fake kernel is the op's meta function -----------------------------------------------------------
def test_register_fake_is_the_meta_kernel_that_tracing_uses(ns):
    """register_fake registers at the Meta key, and dj.compile's tracer asks it for the output type
    instead of running the kernel on size-1 placeholders (which this kernel refuses)."""
    calls = []

    @ns("pairsum")
    def pairsum(x: dj.Tensor) -> dj.Tensor:
        calls.append(tuple(x.shape))
        if x.shape[0] < 2:
            raise ValueError("pairsum needs two rows")
        return x[0] + x[1]

    @pairsum.register_fake
    def _(x):
        return dj.empty(*x.shape[1:], dtype=x.dtype)

    assert "Meta: _ [kernel] (custom_op" in dj.dump(pairsum.op)

    @dj.compile
    def f(x):
        return pairsum(x * 2.0) + 1.0

    x = t64(1.0, 2.0, 3.0, 4.0).reshape(2, 2)
    assert f(x).tolist() == [9.0, 13.0] == (pairsum(x * 2.0) + 1.0).tolist()
    assert calls == [(2, 2), (2, 2)]          # the compiled call and the eager one: never a placeholder
    assert "ran eagerly" not in f.explain()
    # a second register_fake replaces the first; _destroy (the fixture's) removes it
    pairsum.register_fake(lambda x: dj.empty(*x.shape[1:], dtype=x.dtype))
    assert "fake <lambda>" in dj.dump(pairsum.op)


# -- opcheck ---------------------------------------------------------------------------------------------
def _good(ns):
    op = _mymul(ns)
    op.register_fake(lambda a, b: dj.empty(np.broadcast_shapes(a.shape, b.shape), dtype=dj.result_type(a, b)))
    return op


def test_opcheck_passes_a_good_op(ns):
    op = _good(ns)
    a, b = t64(1.0, 2.0, requires_grad=True), t64(3.0, 4.0)
    before = (a.tolist(), b.tolist())
    result = dj.library.opcheck(op, (a, b))
    assert result == {"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
                      "test_faketensor": "SUCCESS", "test_mutation": "SUCCESS"}
    assert (a.tolist(), b.tolist()) == before and a.grad is None    # the sample inputs are left alone
    # by qualified name and by OpOverload too; skipped checks are reported as such
    assert dj.library.opcheck(f"{ns.ns}::mymul", (a, b))["test_faketensor"] == "SUCCESS"
    r = dj.library.opcheck(op.op, (a, b), test_utils=["test_schema", "test_aot_dispatch_dynamic"])
    assert r["test_schema"] == "SUCCESS" and r["test_aot_dispatch_dynamic"].startswith("SKIPPED")
    with pytest.raises(ValueError, match="unknown test_utils"):
        dj.library.opcheck(op, (a, b), test_utils=["test_everything"])


@pytest.mark.parametrize("fake, match", [
    (lambda a, b: dj.empty(3, dtype=dj.float64), r"fake kernel returned Tensor\(shape=\(3,\).*real kernel returned "
                                                   r"Tensor\(shape=\(2,\)"),
    (lambda a, b: dj.empty(2, dtype=dj.float32), r"dtype=float32.*real kernel returned.*dtype=float64"),
    (lambda a, b: (dj.empty(2), dj.empty(2)), r"returned 2 output\(s\), the real kernel 1"),
    (lambda a, b: a.numpy()[99], r"fake kernel of .* raised IndexError"),
])
def test_opcheck_catches_a_wrong_fake_kernel(ns, fake, match):
    op = _mymul(ns)
    op.register_fake(fake)
    with pytest.raises(OpCheckError, match=r"^test_faketensor: .*" + match):
        dj.library.opcheck(op, (t64(1.0, 2.0), t64(3.0, 4.0)))


def test_opcheck_calls_the_fake_kernel_like_the_kernel(ns):
    seen = []

    @ns("kw")
    def kw(x: dj.Tensor, n: int = 2, *, scale: float = 1.0) -> dj.Tensor:
        return x * scale

    kw.register_autograd(lambda ctx, g: (g, None))

    @kw.register_fake
    def _(x, n, *, scale):        # no defaults: every argument arrives, as for the kernel
        seen.append((n, scale))
        return dj.empty_like(x)

    assert dj.library.opcheck(kw, (t64(1.0),), {"scale": 3.0})["test_faketensor"] == "SUCCESS"
    assert seen == [(2, 3.0)]


def test_opcheck_requires_a_fake_kernel(ns):
    op = _mymul(ns)
    with pytest.raises(OpCheckError, match="test_faketensor: .* has no fake kernel; add one with register_fake"):
        dj.library.opcheck(op, (t64(1.0), t64(2.0)))
    # module-level register_fake, by name
    dj.library.register_fake(f"{ns.ns}::mymul", lambda a, b: dj.empty_like(a))
    assert dj.library.opcheck(op, (t64(1.0), t64(2.0)))["test_faketensor"] == "SUCCESS"


def test_opcheck_catches_a_lying_mutation_annotation(ns):
    @ns("sneaky")     # says it mutates nothing, writes into x
    def sneaky(x: dj.Tensor, y: dj.Tensor) -> dj.Tensor:
        x.numpy()[...] += 1
        return y * 2

    sneaky.register_fake(lambda x, y: dj.empty_like(y))
    sneaky.register_autograd(lambda ctx, g: (None, g * 2))
    x = t64(1.0, 2.0)
    with pytest.raises(OpCheckError, match=r"test_mutation: .*sneaky mutated 'x', but its schema does not declare it"):
        dj.library.opcheck(sneaky, (x, t64(3.0, 4.0)))
    assert x.tolist() == [1.0, 2.0]    # opcheck mutated its own copy

    @ns("lazy", mutates_args=("out",))    # says it writes into out, never does
    def lazy(out: dj.Tensor, x: dj.Tensor) -> None:
        pass

    lazy.register_fake(lambda out, x: None)
    with pytest.raises(OpCheckError, match=r"test_mutation: the schema of .*lazy declares 'out' as mutated"):
        dj.library.opcheck(lazy, (t64(0.0, 0.0), t64(1.0, 2.0)))

    @ns("honest", mutates_args=("out",))
    def honest(out: dj.Tensor, x: dj.Tensor) -> None:
        out.numpy()[...] = x.numpy()

    honest.register_fake(lambda out, x: None)
    assert set(dj.library.opcheck(honest, (t64(0.0, 0.0), t64(1.0, 2.0))).values()) == {"SUCCESS"}


def test_opcheck_schema_and_autograd_failures(ns):
    op = _good(ns)
    with pytest.raises(OpCheckError, match=r"test_schema: the call does not fit the schema.*missing required"):
        dj.library.opcheck(op, (t64(1.0),))

    @ns("alias")
    def alias(x: dj.Tensor) -> dj.Tensor:
        return x     # returns its input: an undeclared alias

    alias.register_fake(lambda x: dj.empty_like(x))
    alias.register_autograd(lambda ctx, g: g)
    with pytest.raises(OpCheckError, match=r"test_schema: output 0 of .* shares memory with input 'x'"):
        dj.library.opcheck(alias, (t64(1.0),))

    @ns("noag")
    def noag(x: dj.Tensor) -> dj.Tensor:
        return x * 2

    noag.register_fake(lambda x: dj.empty_like(x))
    with pytest.raises(OpCheckError, match=r"test_autograd_registration: .*noag.*register_autograd"):
        dj.library.opcheck(noag, (t64(1.0),))
    # integer inputs cannot require grad: no autograd kernel needed
    assert dj.library.opcheck(noag, (dj.tensor([1, 2]),))["test_autograd_registration"] == "SUCCESS"
    # raise_exception=False collects the failures
    r = dj.library.opcheck(noag, (t64(1.0),), raise_exception=False)
    assert isinstance(r["test_autograd_registration"], OpCheckError) and r["test_schema"] == "SUCCESS"
    r = dj.library.opcheck(noag, (), raise_exception=False)     # a call that cannot even be made
    assert all(isinstance(r[k], OpCheckError) for k in ("test_schema", "test_faketensor", "test_mutation"))
    assert str(r["test_mutation"]).startswith("test_mutation: calling ")
    assert issubclass(OpCheckError, AssertionError) and issubclass(OpCheckError, dj.errors.DispatchJitError)
