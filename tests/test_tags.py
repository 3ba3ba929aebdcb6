"""Op kinds as tags on the operator (``dj.Tag``, PyTorch's ``torch.Tag``): set where the op is
defined, read by every layer that needs the kind (the compiler's views, the lazy recorder's
reductions and views, the whole step's in-place functionalization).  A user's op defined with a
tag is treated as that kind."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.graph.ir import Node, Var
from dispatch_jit.compiler.lazy import LazyTensor, lazy_info, mode
from dispatch_jit.compiler.graph.views import is_view, may_copy


# the name lists the layers kept before the tags (kernels/shape/op.py, compiler/views.py,
# compiler/elementwise.py, compiler/lazy/record.py, kernels/reduction/table.py)
VIEWS = ["permute.default", "transpose.int", "expand.default", "unsqueeze.default", "view.default",
         "narrow.default", "squeeze.default", "reshape.default", "flatten.default"]
MAY_COPY = ["reshape.default", "flatten.default"]
REDUCTIONS = ["sum", "prod", "mean", "max", "min", "argmax", "argmin", "var", "std", "any", "all", "logsumexp"]


def _op(name):
    packet, overload = name.split(".")
    return getattr(getattr(dj.ops.aten, packet), overload)


def test_the_old_lists_are_tags():
    for name in VIEWS:
        assert dj.Tag.view in _op(name).tags, name
        assert (dj.Tag.view_may_copy in _op(name).tags) == (name in MAY_COPY), name
    for name in REDUCTIONS:
        assert dj.Tag.reduction in _op(name + ".default").tags, name
    assert dj.Tag.view not in dj.ops.aten.add.Tensor.tags and dj.Tag.reduction not in dj.ops.aten.add.Tensor.tags


def test_inplace_comes_from_the_schema():
    assert dj.Tag.inplace in dj.ops.aten.add_.Tensor.tags and dj.Tag.inplace in dj.ops.aten.relu_.default.tags
    assert dj.Tag.inplace not in dj.ops.aten.add.Tensor.tags
    lib = dj.Library("tags_inplace", "DEF")
    try:
        lib.define("bump_(Tensor(a!) self) -> Tensor(a!)")
        lib.define("bump(Tensor self) -> Tensor")
        assert dj.ops.tags_inplace.bump_.default.tags == {dj.Tag.inplace}
        assert not dj.ops.tags_inplace.bump.default.tags
    finally:
        lib._destroy()


def test_tag_is_its_string():
    assert "view" in dj.ops.aten.permute.default.tags and dj.Tag("reduction") is dj.Tag.reduction


@pytest.fixture
def user_view():
    """``tags_demo::swap``: a user's transpose, defined with the view tag and a shape rule, or
    without the tag (``request.param``)."""
    def make(tagged):
        lib = dj.Library("tags_demo", "DEF")
        lib.define("swap(Tensor self) -> Tensor", tags=(dj.Tag.view,) if tagged else ())
        lib.impl("swap", lambda x: dj.ops.aten.transpose.int(x, 0, 1), "CompositeExplicitAutograd")
        lib.impl_shape("swap", lambda s: (s[1], s[0]))
        made.append(lib)
        return dj.ops.tags_demo.swap.default
    made = []
    yield make
    for lib in made:
        lib._destroy()


def test_user_view_is_a_view_for_the_compiler(user_view):
    op = user_view(True)
    node = Node(op, (Var(0),), {}, (1,))
    assert is_view(node) and not may_copy(op)


@pytest.mark.parametrize("tagged", [True, False])
def test_user_view_in_compiled_mode(user_view, tagged):
    """Tagged, a view of a pending value is recorded into the pending graph (no flush, no eager
    op), as aten's views are; untagged, it runs eagerly.  Equal to eager either way."""
    op = user_view(tagged)
    a = dj.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    want = op(a * 2.0) + 1.0
    with mode("compiled"):
        before = lazy_info()["eager_ops"]
        v = op(a * 2.0)
        recorded = type(v) is LazyTensor and lazy_info()["eager_ops"] == before
        got = v + 1.0
    assert recorded == tagged
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.shape == (3, 2)


def test_user_reduction_in_compiled_mode():
    """A user's op tagged ``reduction`` is recorded as a reduction of a pending value; the fused
    loops have no epilogue for it, so it runs eagerly, with eager's result."""
    from dispatch_jit.compiler.lazy.record import LazyRecorder, of_pending
    lib = dj.Library("tags_red", "DEF")
    try:
        lib.define("total(Tensor self, int[]? axis=None, bool keepdims=False) -> Tensor", tags=("reduction",))
        lib.impl("total", lambda x, axis=None, keepdims=False: dj.ops.aten.sum.default(x, axis, keepdims),
                 "CompositeExplicitAutograd")
        op = dj.ops.tags_red.total.default
        assert of_pending(op) is LazyRecorder._record_reduction
        a = dj.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
        want = op(a * 2.0, [1])
        with mode("compiled"):
            got = op(a * 2.0, [1])
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    finally:
        lib._destroy()
