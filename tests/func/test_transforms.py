"""grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, functional_call: against finite
differences and explicit loops always, and against torch.func where torch is installed."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp, vmap

F = dj.nn.functional
RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
XV = RNG.standard_normal(4)


def f_vec(x):
    """R^4 -> R^3, nonlinear."""
    return dj.matmul(dj.tensor(A), x.sin()) * x.sum()


def f_scalar(x):
    return (x.exp() * x).sum() + (x * x).sum() * x.sum()


def _fd_jac(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        cols.append((f(dj.tensor(x + e)).numpy() - f(dj.tensor(x - e)).numpy()) / (2 * eps))
    return np.stack(cols, axis=-1)


def test_grad_and_value_against_finite_differences():
    g, v = grad_and_value(f_scalar)(dj.tensor(XV))
    np.testing.assert_allclose(g.numpy(), _fd_jac(f_scalar, XV), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(v.numpy(), f_scalar(dj.tensor(XV)).numpy())
    assert g.grad_fn is None and v.grad_fn is None


def test_grad_argnums_and_has_aux():
    f = lambda x, y: ((x * y).sum(), {"aux": x * 2})    # noqa: E731
    x, y = dj.tensor([1.0, 2.0]), dj.tensor([3.0, 5.0])
    (gx, gy), aux = grad(f, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(gx.numpy(), y.numpy())
    np.testing.assert_allclose(gy.numpy(), x.numpy())
    np.testing.assert_allclose(aux["aux"].numpy(), [2.0, 4.0])
    assert not aux["aux"].requires_grad       # unwrapped at the level, as torch.func's
    _, _, vaux = vjp(lambda x: (x.sin(), x * 2), x, has_aux=True)
    assert not vaux.requires_grad
    assert grad(lambda x, y: (x * x).sum(), argnums=1)(x, y).numpy().tolist() == [0.0, 0.0]   # unused: zeros


def test_grad_errors_as_torch_func():
    with pytest.raises(ValueError, match="scalar Tensor"):
        grad(lambda x: x * 2)(dj.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="only 1 positional inputs"):
        grad(lambda x: x.sum(), argnums=1)(dj.tensor([1.0]))
    with pytest.raises(ValueError, match="tuple"):
        grad(lambda x: x.sum(), has_aux=True)(dj.tensor([1.0]))


def test_jacrev_jacfwd_against_finite_differences():
    want = _fd_jac(f_vec, XV)
    np.testing.assert_allclose(jacrev(f_vec)(dj.tensor(XV)).numpy(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jacfwd(f_vec)(dj.tensor(XV)).numpy(), want, rtol=1e-6, atol=1e-7)


def test_vjp_and_jvp_against_the_jacobian():
    J = jacrev(f_vec)(dj.tensor(XV)).numpy()
    out, vjp_fn = vjp(f_vec, dj.tensor(XV))
    u = RNG.standard_normal(3)
    (g,) = vjp_fn(dj.tensor(u))
    np.testing.assert_allclose(g.numpy(), u @ J, rtol=1e-12)
    v = RNG.standard_normal(4)
    o, jv = jvp(f_vec, (dj.tensor(XV),), (dj.tensor(v),))
    np.testing.assert_allclose(jv.numpy(), J @ v, rtol=1e-12)
    np.testing.assert_allclose(o.numpy(), out.numpy())


def test_hessian_and_grad_of_grad():
    H = hessian(f_scalar)(dj.tensor(XV)).numpy()
    want = _fd_jac(lambda x: grad(f_scalar)(x), XV)
    np.testing.assert_allclose(H, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(H, H.T, rtol=1e-12)
    gg = grad(lambda x: grad(lambda y: (y ** 3).sum())(x).sum())(dj.tensor(XV))
    np.testing.assert_allclose(gg.numpy(), 6 * XV, rtol=1e-12)


def _mlp_params(rng):
    return {"0.weight": dj.tensor(rng.standard_normal((8, 6)) * 0.3), "0.bias": dj.tensor(rng.standard_normal(8)),
            "2.weight": dj.tensor(rng.standard_normal((3, 8)) * 0.3), "2.bias": dj.tensor(rng.standard_normal(3))}


def test_per_sample_gradients_of_an_mlp_equal_the_loop():
    model = dj.nn.Sequential(dj.nn.Linear(6, 8), dj.nn.ReLU(), dj.nn.Linear(8, 3))
    params = _mlp_params(np.random.default_rng(1))
    xs = dj.tensor(np.random.default_rng(2).standard_normal((5, 6)))
    ys = dj.tensor(np.array([0, 2, 1, 1, 0]))

    def loss(p, x, y):
        logits = functional_call(model, p, (x.unsqueeze(0),))
        return F.cross_entropy(logits, y.unsqueeze(0))
    per = vmap(grad(loss), in_dims=(None, 0, 0))(params, xs, ys)
    for i in range(5):
        one = grad(loss)(params, xs[i], ys[i])
        for k in params:
            np.testing.assert_allclose(per[k].numpy()[i], one[k].numpy(), rtol=1e-12, atol=1e-14)
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()
    tp = {k: torch.tensor(v.numpy()) for k, v in params.items()}

    def tloss(p, x, y):
        return torch.nn.functional.cross_entropy(torch.func.functional_call(tm, p, (x.unsqueeze(0),)), y.unsqueeze(0))
    tper = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tp, torch.tensor(xs.numpy()),
                                                                         torch.tensor(ys.numpy()))
    for k in params:
        np.testing.assert_allclose(per[k].numpy(), tper[k].numpy(), rtol=1e-10, atol=1e-12)


def test_grad_of_vmap_and_vmap_of_grad_compose():
    x = dj.tensor(RNG.standard_normal((3, 4)))
    g = grad(lambda x: vmap(f_scalar)(x).sum())(x)
    want = np.stack([grad(f_scalar)(dj.tensor(r)).numpy() for r in x.numpy()])
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(vmap(grad(f_scalar))(x).numpy(), want, rtol=1e-12)
    # vmap of jacrev: a batch of Jacobians
    jb = vmap(jacrev(f_vec))(x).numpy()
    np.testing.assert_allclose(jb[1], jacrev(f_vec)(dj.tensor(x.numpy()[1])).numpy(), rtol=1e-12)


def test_against_torch_func():
    torch = pytest.importorskip("torch")
    TA = torch.tensor(A)

    def tf_vec(x):
        return (TA @ x.sin()) * x.sum()

    def tf_scalar(x):
        return (x.exp() * x).sum() + (x * x).sum() * x.sum()
    tx = torch.tensor(XV)
    x = dj.tensor(XV)
    np.testing.assert_allclose(jacrev(f_vec)(x).numpy(), torch.func.jacrev(tf_vec)(tx).numpy(), rtol=1e-12)
    np.testing.assert_allclose(jacfwd(f_vec)(x).numpy(), torch.func.jacfwd(tf_vec)(tx).numpy(), rtol=1e-12)
    np.testing.assert_allclose(hessian(f_scalar)(x).numpy(), torch.func.hessian(tf_scalar)(tx).numpy(), rtol=1e-12)
    np.testing.assert_allclose(grad(f_scalar)(x).numpy(), torch.func.grad(tf_scalar)(tx).numpy(), rtol=1e-12)


def test_functional_call_leaves_the_module_unchanged():
    m = dj.nn.Linear(2, 1)
    w0 = m.weight
    out = functional_call(m, {"weight": dj.ones(1, 2), "bias": dj.zeros(1)}, (dj.tensor([1.0, 2.0]),))
    assert out.numpy().tolist() == [3.0]
    assert m.weight is w0
    with pytest.raises(ValueError, match="no parameter or buffer"):
        functional_call(m, {"nope": dj.ones(1)}, (dj.tensor([1.0, 2.0]),))


def test_indexing_under_grad_inside_vmap():
    x = dj.tensor(RNG.standard_normal((3, 4, 5)))

    def f(r):
        return (r[0] * r[1, 1:3].sum() + r[..., ::2].sum() + r[None, 2, dj.tensor([0, 3])].sum()).sum()
    got = vmap(grad(f))(x).numpy()
    for i in range(3):
        np.testing.assert_allclose(got[i], grad(f)(dj.tensor(x.numpy()[i])).numpy(), rtol=1e-12)
    np.testing.assert_allclose(got[0], _fd_jac(f, x.numpy()[0]).reshape(4, 5), rtol=1e-6, atol=1e-6)


def test_vmap_of_hessian_and_jacfwd_and_nested_vmap_of_grad():
    x = dj.tensor(RNG.standard_normal((3, 4)))
    f = lambda r: (r.sin() * r).sum()      # noqa: E731
    H = vmap(hessian(f))(x).numpy()
    np.testing.assert_allclose(H[1], hessian(f)(dj.tensor(x.numpy()[1])).numpy(), rtol=1e-12)
    g = vmap(vmap(grad(f)))(x.reshape(3, 2, 2)).numpy()
    np.testing.assert_allclose(g.reshape(3, 4), vmap(grad(lambda r: (r.sin() * r).sum()))(x.reshape(12, 1))
                               .numpy().reshape(3, 4), rtol=1e-12)
    gg = grad(lambda x: vmap(grad(f))(x).sum())(x).numpy()
    np.testing.assert_allclose(gg, H.sum(axis=1), rtol=1e-12)
