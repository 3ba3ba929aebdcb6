"""What a cached trace walked besides values (compiler/structure.py): the containers a call went
through and the hooks on what it reached.  A change after the first calls (a module added to a
``Sequential``, a parameter or buffer added, a gradient hook or a module's forward hook registered
or removed) must be seen by every way of compiling a call: ``@dj.compile`` of a forward (its
backward run outside), of a loss with its ``backward()``, of a whole training step (forward,
backward and optimizer step), and ``dj.execution_mode("compiled")``.  Each runs beside an eager twin of the
same model, changed the same way at the same call, and must agree with it call for call."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn

CONTEXTS = ("forward", "loss_backward", "train_step", "mode")


def _body(model, x):
    out = model(x)
    # iterating the registries: a parameter or buffer added changes the loss
    reg = sum((p * p).sum() for p in model.parameters()) + sum(b.sum() for b in model.buffers())
    return (out * out).mean() + 0.01 * reg


def _twin(ctx):
    """(model, the function of ``ctx`` over it, its optimizer or None)."""
    dj.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2))
    opt = dj.optim.SGD(model.parameters(), lr=0.1) if ctx in ("train_step", "mode") else None
    if ctx == "forward":
        return model, (lambda x: _body(model, x)), opt

    def step(x):
        if opt is not None:
            opt.zero_grad()
        loss = _body(model, x)
        loss.backward()
        if opt is not None:
            opt.step()
        return loss
    return model, step, opt


def _call(ctx, fn, x):
    if ctx == "mode":
        with dj.execution_mode("compiled"):
            return fn(x).numpy()
    loss = fn(x)
    if ctx == "forward":
        loss.backward()        # the compiled forward's backward, run by the engine
    return loss.numpy()


def _linear(seed):
    dj.manual_seed(seed)
    return nn.Linear(2, 2)


def _mask(g):
    return g * 0


def _raise(g):
    raise ValueError("a hook that raises")


# each: (change it makes to a model, what explain() says of it for @dj.compile)
CHANGES = {
    "add_module": (lambda m: m.add_module("extra", _linear(1)), "submodule 'extra' added"),
    "append": (lambda m: m.append(_linear(1)), "submodule '1' added"),
    "write_into_modules": (lambda m: m._modules.__setitem__("extra", _linear(1)), "submodule 'extra' added"),
    "add_parameter": (lambda m: m[0].register_parameter("gain", nn.Parameter(dj.full((2,), 3.0))),
                      "parameter 'gain' added"),
    "add_buffer": (lambda m: m[0].register_buffer("shift", dj.full((2,), 5.0)), "buffer 'shift' added"),
    "grad_hook": (lambda m: m[0].weight.register_hook(_mask), "gradient hook was registered"),
    "forward_hook": (lambda m: m[0].register_forward_hook(lambda mod, args, out: out * 2.0),
                     "forward hook was registered"),
    "forward_pre_hook": (lambda m: m[0].register_forward_pre_hook(lambda mod, args: (args[0] * 3.0,)),
                         "forward pre-hook was registered"),
}


def _same_state(cm, em, what):
    for i, (p, q) in enumerate(zip(cm.parameters(), em.parameters())):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{what}: parameter {i}")
        assert (p.grad is None) == (q.grad is None), f"{what}: .grad {i}"
        if p.grad is not None:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{what}: .grad {i}")


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_after_the_first_calls_is_seen(ctx, change):
    """The issue's cases: a module added to a Sequential after two calls kept the old graph
    (2.4 where eager gave 24.0); a gradient hook registered after two compiled steps was never
    called (gradient masking silently stopped)."""
    (cm, cfn, _), (em, efn, _) = _twin(ctx), _twin(ctx)
    f = cfn if ctx == "mode" else dj.compile(cfn)
    x = dj.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    make, said = CHANGES[change]
    for k in range(4):
        if k == 2:
            make(cm), make(em)
        what = f"{ctx}, {change}, call {k}"
        np.testing.assert_allclose(_call(ctx, f, x), _call(ctx, efn, x), rtol=1e-5, err_msg=what)
        _same_state(cm, em, what)
    if ctx != "mode":
        assert said in f.explain(), f.explain()


@pytest.mark.parametrize("ctx", ("loss_backward", "train_step", "mode"))
def test_a_hook_that_raises_after_the_first_calls_raises(ctx):
    cm, cfn, _ = _twin(ctx)
    f = cfn if ctx == "mode" else dj.compile(cfn)
    x = dj.ones(2, 3)
    for _ in range(2):
        _call(ctx, f, x)
    cm[0].bias.register_hook(_raise)
    with pytest.raises(ValueError, match="a hook that raises"):
        _call(ctx, f, x)


@pytest.mark.parametrize("ctx", ("forward", "train_step", "mode"))
def test_removing_a_hook_is_seen_and_the_step_compiles_again(ctx):
    """A hook present makes the compiled step run eagerly (hooks run in Python); its handle's
    ``remove()`` must make the plan run without it, and a compiled plan again."""
    (cm, cfn, _), (em, efn, _) = _twin(ctx), _twin(ctx)
    f = cfn if ctx == "mode" else dj.compile(cfn)
    handles = [m[0].weight.register_hook(_mask) for m in (cm, em)]
    handles += [m[0].register_forward_hook(lambda mod, args, out: out + 1.0) for m in (cm, em)]
    x = dj.ones(2, 3)
    for k in range(5):
        if k == 2:
            for h in handles:
                h.remove()
        what = f"{ctx}, call {k}"
        np.testing.assert_allclose(_call(ctx, f, x), _call(ctx, efn, x), rtol=1e-5, err_msg=what)
        _same_state(cm, em, what)
    if ctx == "train_step":
        assert not f._last.last_reason, f.explain()       # the last call ran the compiled plan
    if ctx != "mode":
        assert "was removed" in f.explain()


def test_an_unchanged_structure_keeps_its_entry():
    """Registrations elsewhere (another model) move the epoch; the entry is checked again, found
    unchanged, and kept: no retrace."""
    model, fn, _ = _twin("forward")
    f = dj.compile(fn)
    x = dj.ones(2, 3)
    f(x), f(x)
    other = nn.Sequential(nn.Linear(2, 2))
    other.append(nn.Tanh())
    other[0].weight.register_hook(_mask)
    f(x)
    assert f.cache_info().traces == 1, f.explain()


def test_hook_handles_remove_once_and_work_as_context_managers():
    w = dj.tensor([1.0, 2.0], requires_grad=True)
    with w.register_hook(_mask) as h:
        (w * w).sum().backward()
    assert w.grad.numpy().tolist() == [0.0, 0.0]
    h.remove()            # a second remove does nothing
    w.grad = None
    (w * w).sum().backward()
    assert w.grad.numpy().tolist() == [2.0, 4.0]
    with pytest.raises(dj.errors.ArgumentTypeError, match="must be callable"):
        nn.Identity().register_forward_hook(3)


SCALE = 2.0


def _scaled(mod, args, out):
    return out * SCALE


class _Gain(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


def test_what_an_added_module_or_hook_reads_is_guarded_like_the_rest():
    """After a retrace for a change, the captures are found anew: a number the added module's
    forward reads (``self.k``) or a global a forward hook reads is guarded from then on."""
    global SCALE
    model, fn, _ = _twin("forward")
    f = dj.compile(lambda x: model(x))
    x = dj.ones(2, 3)
    f(x), f(x)
    model.append(_Gain(3.0))
    model[0].register_forward_hook(_scaled)
    np.testing.assert_allclose(f(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    model[1].k = -1.0
    np.testing.assert_allclose(f(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    SCALE = 0.5
    try:
        np.testing.assert_allclose(f(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
        assert "global 'SCALE'" in f.explain(), f.explain()
    finally:
        SCALE = 2.0
