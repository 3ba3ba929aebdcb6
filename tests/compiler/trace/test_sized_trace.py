"""A compiled function that reads sizes (``x.shape``, ``x.size()``, ``len(x)``) is keyed by its
inputs' sizes and traced with them (compiler/api.py ``_sized``, a ShapedTracer), as torch.compile
specializes on static shapes: no graph break, one compiled entry per set of sizes, results equal
eager's bit for bit.  vmap (which reads the batch size) then traces through its batching rules."""

from __future__ import annotations

import warnings

import numpy as np

import dispatch_jit as dj
from dispatch_jit.errors import CompileWarning


def _x(*shape, seed=0):
    return dj.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _no_breaks(fn, *calls):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        outs = [fn(*args) for args in calls]
    assert not [str(w.message) for w in seen if issubclass(w.category, CompileWarning)]
    return outs


def test_a_size_read_keys_the_function_by_sizes_instead_of_breaking():
    def body(x):
        b, t = x.shape
        n = x.size(1) + len(x) + x.numel()
        return (x.view(b * t) * float(n)).relu().view(t, b)
    f = dj.compile(body)
    calls = [(_x(3, 4),), (_x(3, 4, seed=1),), (_x(5, 2),)]
    for out, (x,) in zip(_no_breaks(f, *calls), calls):
        np.testing.assert_array_equal(out.numpy(), body(x).numpy())
    text = str(f.explain())
    header = text.splitlines()[0]
    assert "3 calls" in header and "1 cache hits" in header and "0 eager calls" in header, header
    assert "2 signatures" in header and "keyed by input sizes" in text
    assert "last recompile: input sizes [3, 4] -> [5, 2]" in text, text


def test_a_function_that_reads_no_size_keeps_a_size_free_key():
    f = dj.compile(lambda x: x * 2.0 + 1.0)
    for x in (_x(3), _x(7), _x(11)):
        np.testing.assert_array_equal(f(x).numpy(), (x * 2.0 + 1.0).numpy())
    text = str(f.explain())
    assert "1 signatures" in text.splitlines()[0] and "keyed by input sizes" not in text


def test_a_sized_forward_with_parameters_trains_as_eager():
    """A module whose forward reads sizes: its parameters are lifted into the sized trace, and
    the compiled backward gives eager's gradients."""
    class Net(dj.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = dj.nn.Linear(4, 3)

        def forward(self, x):
            b, t, c = x.shape
            return self.lin(x.reshape(b * t, c)).tanh().sum()

    dj.manual_seed(0)
    net = Net()
    f = dj.compile(net.forward)
    x = _x(2, 5, 4)
    (loss,) = _no_breaks(f, (x,))
    loss.backward()
    got = [p.grad.numpy().copy() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    ref = net(x)
    ref.backward()
    np.testing.assert_array_equal(loss.numpy(), ref.numpy())
    for g, p in zip(got, net.parameters()):
        np.testing.assert_array_equal(g, p.grad.numpy())
    assert "0 eager calls" in str(f.explain()).splitlines()[0]


def test_a_parameter_replaced_by_one_of_other_sizes_retraces():
    """Sizes that came from a parameter (through an op's result) are guarded with the parameter
    itself (owners.py): ``.data`` of other sizes retraces rather than replaying the old sizes."""
    class Net(dj.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = dj.nn.Linear(4, 3)

        def forward(self, x):
            h = self.lin(x)
            return h.view(h.shape[0] * h.shape[1]).relu()

    net = Net()
    f = dj.compile(net)
    x = _x(2, 4)
    for grad in (False, True):
        with dj.set_grad_enabled(grad):
            net.lin.weight.data, net.lin.bias.data = _x(3, 4, seed=5), _x(3, seed=6)
            np.testing.assert_array_equal(f(x).detach().numpy(), net(x).detach().numpy())
            net.lin.weight.data, net.lin.bias.data = _x(5, 4, seed=3), _x(5, seed=4)   # same objects
            np.testing.assert_array_equal(f(x).detach().numpy(), net(x).detach().numpy())
            assert "its sizes changed" in str(f.explain()), str(f.explain())


def test_vmap_under_compile_traces_through_the_batching_rules():
    """vmap reads the batch size: keyed by sizes, its batching rules run inside the trace, and
    the ops they call on the batched values are what the plan fuses (no Python per example)."""
    def f(x, w):
        return (x * w).sin().sum() + x.exp().mean()
    vf = dj.func.vmap(f, in_dims=(0, None))
    cf = dj.compile(vf)
    x, w = _x(8, 5), _x(5, seed=1)
    (out,) = _no_breaks(cf, (x, w))
    np.testing.assert_array_equal(out.numpy(), vf(x, w).numpy())
    text = str(cf.explain())
    assert "0 eager calls" in text.splitlines()[0], text
    assert "fused loop(s)" in text and "compiled plan: 0 fused" not in text, text


def test_vmap_inside_a_compiled_function():
    def body(x, w):
        y = dj.func.vmap(lambda r: (r * w).softmax(0))(x)
        return y * 2.0
    cf = dj.compile(body)
    x, w = _x(4, 6), _x(6, seed=2)
    (out,) = _no_breaks(cf, (x, w))
    np.testing.assert_array_equal(out.numpy(), body(x, w).numpy())
    assert "0 eager calls" in str(cf.explain()).splitlines()[0]


def test_a_squeeze_whose_rank_depends_on_the_sizes_is_typed_by_a_sized_trace():
    """``squeeze(dim)`` drops ``dim`` only where its size is 1: a size-free trace cannot type it
    (it breaks), a sized one has the sizes its key holds, so a function that reads them traces."""
    def body(x):
        n = x.shape[0]
        return (x.reshape(n, 1, -1).squeeze(1) * 2.0).squeeze(-1).exp()
    f = dj.compile(body)
    calls = [(_x(3, 1),), (_x(3, 1, seed=1),), (_x(2, 4),)]
    for out, (x,) in zip(_no_breaks(f, *calls), calls):
        want = body(x)
        assert out.shape == want.shape
        np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert "0 eager calls" in str(f.explain()).splitlines()[0]
