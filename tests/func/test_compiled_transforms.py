"""dj.func's transforms under dj.compile: ``grad``/``vjp`` run the autograd engine on the trace's
values (compiler/trace/autodiff.py), so the forward and its backward are one compiled plan, equal to
eager mode bit for bit; per-sample gradients (``vmap(grad(loss))``) of an MLP included, and forward
mode (``jvp``, ``jacfwd``, ``hessian``), whose levels make their own leaves as trace values.  What the
trace cannot stand for breaks the graph and runs eagerly, with eager's results."""

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import CompileWarning
from dispatch_jit.func import grad, grad_and_value, jacrev, vjp, vmap

F = dj.nn.functional


def _x(*shape, seed=0):
    return dj.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _calls(fn, *args, times=2):
    """``fn(*args)`` ``times`` times (the later ones run the cached plan); the CompileWarnings seen."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        outs = [fn(*args) for _ in range(times)]
    return outs, [str(w.message) for w in seen if issubclass(w.category, CompileWarning)]


def _flat(x):
    return dj.func.pytree.tree_flatten(x)[0]


def _assert_bits(got, want):
    g, w = _flat(got), _flat(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _traced(cf):
    text = str(cf.explain())
    assert " 0 eager calls" in text.splitlines()[0], text
    return text


def _mlp(seed, i=12, h=8, o=4):
    rng = np.random.default_rng(seed)
    return {"w1": dj.tensor(rng.standard_normal((h, i)).astype(np.float32) * 0.3),
            "b1": dj.tensor(rng.standard_normal(h).astype(np.float32) * 0.1),
            "w2": dj.tensor(rng.standard_normal((o, h)).astype(np.float32) * 0.3),
            "b2": dj.tensor(rng.standard_normal(o).astype(np.float32) * 0.1)}


def loss(p, xi, yi):
    h = F.relu(F.linear(xi.unsqueeze(0), p["w1"], p["b1"]))
    return F.cross_entropy(F.linear(h, p["w2"], p["b2"]), yi.unsqueeze(0))


def test_per_sample_gradients_of_an_mlp_are_one_compiled_plan():
    per = vmap(grad(loss), in_dims=(None, 0, 0))
    cf = dj.compile(per)
    p = _mlp(0)
    for batch, seed in ((6, 1), (6, 2), (3, 3)):
        x = _x(batch, 12, seed=seed)
        y = dj.tensor(np.random.default_rng(seed).integers(0, 4, batch))
        (got, again), broke = _calls(cf, p, x, y)
        assert not broke, broke
        want = per(p, x, y)
        _assert_bits(got, want)
        _assert_bits(again, want)
        assert got["w1"].shape == (batch, 8, 12) and not got["w1"].requires_grad
    text = _traced(cf)
    assert "fused loop(s)" in text and "compiled plan: 0 fused" not in text, text
    # the per-example gradients themselves: the loop of grad over the examples
    one = grad(loss)(p, x[1], y[1])
    np.testing.assert_allclose(got["w2"].numpy()[1], one["w2"].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["grad", "argnums", "aux", "vjp", "jacrev", "grad_of_grad", "vmap_over_w"])
def test_transforms_inside_a_compiled_function_are_traced(name):
    def f(x, w):
        return ((x * w).sin() * x.exp()).sum() + (x * w).tanh().sum()
    fns = {
        "grad": grad(f),
        "argnums": grad(f, argnums=(0, 1)),
        "aux": grad_and_value(lambda x, w: (f(x, w), x.cos()), has_aux=True),
        "vjp": lambda x, w: vjp(lambda a: a.sin() * w, x)[1](w),
        "jacrev": lambda x, w: jacrev(lambda a: a.sin() * a.sum())(x) * w,
        "grad_of_grad": lambda x, w: grad(lambda a: grad(lambda b: (b ** 3 * w).sum())(a).sum())(x),
        "vmap_over_w": lambda x, w: vmap(grad(f, argnums=1), in_dims=(None, 0))(x, w.unsqueeze(0).expand(3, 5)),
    }
    fn = fns[name]
    cf = dj.compile(fn)
    x, w = _x(5), _x(5, seed=1)
    (got, again), broke = _calls(cf, x, w)
    assert not broke, broke
    _assert_bits(got, fn(x, w))
    _assert_bits(again, fn(x, w))
    _traced(cf)


def test_a_detach_inside_a_traced_grad_cuts_the_graph_as_eagers():
    fn = grad(lambda y: (y * y.detach()).sum())
    cf = dj.compile(fn)
    x = _x(4)
    (got, _), broke = _calls(cf, x)
    assert not broke, broke
    _assert_bits(got, fn(x))
    np.testing.assert_array_equal(got.numpy(), x.numpy())      # d/dy sum(y * c) = c, not 2y
    _traced(cf)


def test_a_detach_in_a_compiled_call_whose_inputs_require_grad_still_runs_eagerly():
    """The compiled backward (joint.py) differentiates the recorded ops, where a detach has no node:
    such a call keeps running eagerly, with eager's gradient."""
    cf = dj.compile(lambda a: (a * a.detach()).sum())
    x = _x(4).requires_grad_(True)
    (out, _), broke = _calls(cf, x)
    assert any("detach() in a compiled call whose inputs require grad" in b for b in broke), broke
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), x.detach().numpy())


def test_what_the_traced_grad_cannot_stand_for_runs_eagerly():
    kept = []

    def leaky(y):
        kept.append(y * 2.0)          # a value that requires grad, leaving the level
        return (y * y).sum()
    # indexing of a value that requires grad is a getitem node, which no Autograd kernel sees
    fns = {"index": grad(lambda y: (y[1:] * y[0]).sum()),
           "leak": lambda x: (grad(leaky)(x), kept[-1])[1]}
    for name, fn in fns.items():
        cf = dj.compile(fn)
        x = _x(4)
        (got, _), broke = _calls(cf, x)
        assert broke, name
        want = fn(x)
        _assert_bits(got, want)
        assert got.requires_grad == want.requires_grad, name


def test_the_per_sample_grads_example_runs_and_agrees():
    """examples/per_sample_grads.py at a small batch: compiled equals eager bit for bit, and all of
    it traced (its timing lines are not checked: no wall-clock assertions)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(root / "examples" / "per_sample_grads.py"), "--batch", "8",
                           "--rounds", "1"], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "compiled == eager, bit for bit: True" in lines, proc.stdout
    assert any(ln.startswith("compiled: ") and " 0 eager calls" in ln for ln in lines), proc.stdout
    assert any(ln.strip().startswith("dj.compile(vmap(grad)):") for ln in lines), proc.stdout


def test_a_detach_outside_transforms_is_traced_and_returns_new_tensors_as_eagers():
    """detach() is a value of the graph (no node): used by ops it is traced; returned as itself it
    would be the input (or the other output) object, where eager mode returns a new tensor over the
    same memory, so that call runs eagerly."""
    x = _x(3)
    used = dj.compile(lambda a: a.detach() * 2.0)
    (got, _), broke = _calls(used, x)
    assert not broke, broke
    _assert_bits(got, x * 2.0)
    _traced(used)
    for fn in (lambda a: a.detach(), lambda a: (lambda y: (y, y.detach()))(a * 2.0)):
        cf = dj.compile(fn)
        (got, _), broke = _calls(cf, x)
        assert any("detach()ed value" in b for b in broke), broke
        outs = _flat(got)
        assert all(o is not x for o in outs) and len({id(o) for o in outs}) == len(outs)
        _assert_bits(got, fn(x))


def _f64(*shape, seed=0):
    return dj.tensor(np.random.default_rng(seed).standard_normal(shape))


# forward mode and hessian: each level's own leaves (jvp's cotangent placeholder, an alias of a
# captured tensor) are values of the trace, not lifted like a parameter, so the level's detach()
# does not break the graph.  Each case is a function of (the transforms' namespace: dj.func or
# torch.func, stack, x, w, m), run by both libraries.
_FORWARD = {
    "jvp": lambda fn, stack, x, w, m: fn.jvp(lambda a: a.sin() * a, (x,), (w,)),
    "jvp_aux": lambda fn, stack, x, w, m: fn.jvp(lambda a: (a.sin() * a, a.cos()), (x,), (w,), has_aux=True),
    "jvp_of_captured": lambda fn, stack, x, w, m: fn.jvp(lambda b: (b @ x).tanh(), (m,), (m * 2.0,)),
    "jacfwd": lambda fn, stack, x, w, m: fn.jacfwd(lambda a: a.sin() * a)(x),
    "jacfwd_argnums": lambda fn, stack, x, w, m: fn.jacfwd(lambda a, b: a.exp() * b, argnums=(0, 1))(x, w),
    "jacfwd_aux": lambda fn, stack, x, w, m: fn.jacfwd(lambda a: (a.exp() * a, a.sum()), has_aux=True)(x),
    "jacfwd_of_captured": lambda fn, stack, x, w, m: fn.jacfwd(lambda b: (b @ x).tanh())(m),
    "hessian": lambda fn, stack, x, w, m: fn.hessian(lambda a: (a.sin() * a).sum())(x),
    "hessian_argnums": lambda fn, stack, x, w, m: fn.hessian(
        lambda a, b: (a.exp() * b).sum() * b.tanh().sum(), argnums=1)(w, x),
    # autograd's matmul formula of a vector operand squeezes (a rank that depends on the sizes:
    # typed by the sized trace)
    "jacfwd_of_matvec": lambda fn, stack, x, w, m: fn.jacfwd(lambda a: (m @ a).tanh())(x),
    "hessian_of_matvec": lambda fn, stack, x, w, m: fn.hessian(lambda a: ((m @ a).tanh() ** 2).sum())(x),
    "vmap_of_jacfwd": lambda fn, stack, x, w, m: fn.vmap(fn.jacfwd(lambda a: a.sin() * a))(stack([x, w * x])),
}


@pytest.mark.parametrize("name", list(_FORWARD))
def test_forward_mode_and_hessian_are_one_compiled_plan(name):
    """``dj.compile`` of jvp, jacfwd, hessian (with argnums, has_aux, of a captured tensor, under
    vmap): no graph break, all of it traced, equal to eager bit for bit (the second call runs the
    cached plan), and to torch.func's to 1e-12 in float64."""
    x, w, m = _f64(4), _f64(4, seed=1), _f64(3, 4, seed=2)
    case = _FORWARD[name]

    def fn(a):
        return case(dj.func, dj.stack, a, w, m)
    cf = dj.compile(fn)
    (got, again), broke = _calls(cf, x)
    assert not broke, broke
    want = fn(x)
    _assert_bits(got, want)
    _assert_bits(again, want)
    assert not any(t.requires_grad for t in _flat(got))
    _traced(cf)
    torch = pytest.importorskip("torch")
    ref = case(torch.func, torch.stack, *(torch.from_numpy(t.numpy()) for t in (x, w, m)))
    ref_flat = torch.utils._pytree.tree_leaves(ref)
    assert len(ref_flat) == len(_flat(got))
    for a, b in zip(_flat(got), ref_flat):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_jvp_aux_is_unwrapped_at_its_level_as_torch_funcs():
    """jvp's (and jacfwd's) aux left the level still carrying its graph (requires_grad=True) in
    eager mode, where torch.func's is a plain value; in a compiled call that was a graph break."""
    x, w = _x(3), _x(3, seed=1)
    aux = dj.func.jvp(lambda a: (a.sin(), a.cos()), (x,), (w,), has_aux=True)[2]
    assert not aux.requires_grad and aux.grad_fn is None
    aux = dj.func.jacfwd(lambda a: (a.sin(), a.cos()), has_aux=True)(x)[1]
    assert not aux.requires_grad
    # under an outer level the aux keeps its graph: the outer level differentiates it
    g = grad(lambda a: dj.func.jvp(lambda b: (b.sin(), b.cos()), (a,), (w,), has_aux=True)[2].sum())(x)
    np.testing.assert_array_equal(g.numpy(), (-x.sin()).numpy())


@pytest.mark.parametrize("transform", ["jacfwd", "hessian"])
def test_a_transform_in_a_compiled_call_whose_inputs_require_grad_still_runs_eagerly(transform):
    """The guard stays: where the compiled call itself is differentiated from outside (its input
    requires grad), the level's detach() would be differentiated through by the compiled backward."""
    fn = {"jacfwd": dj.func.jacfwd(lambda y: y.sin()),
          "hessian": dj.func.hessian(lambda y: (y.sin() * y).sum())}[transform]
    cf = dj.compile(fn)
    x = _f64(3).requires_grad_(True)
    (got, _), broke = _calls(cf, x)
    assert any("detach() in a compiled call whose inputs require grad" in b for b in broke), broke
    _assert_bits(got, fn(x))
