"""nn.functional's activations, their modules, and the new elementwise rows' gradients, against PyTorch.

One table drives the values and gradients (float64, a few elements crossing every branch: negative,
zero, the kinks at +-0.5 and +-3, large); the modules and in-place forms are checked on top.
"""

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.errors import InvalidArgumentError, ShapeError

torch = pytest.importorskip("torch")

X = np.array([-25.0, -3.5, -3.0, -1.2, -0.5, -0.25, 0.0, 0.3, 0.5, 2.0, 3.0, 4.5, 30.0])
P = np.array([0.01, 0.2, 0.5, 0.7, 0.999])          # in (0, 1): logit, erfinv, ndtri
POS = np.array([0.3, 1.0, 2.5, 7.0])               # positive: lgamma, digamma, polygamma, entr


def _f(name, **kw):
    return lambda m, x: getattr(m.nn.functional, name)(x, **kw)


# name -> (dj and torch call on a module-like namespace, input values)
CASES = {
    "hardswish": (_f("hardswish"), X), "hardsigmoid": (_f("hardsigmoid"), X), "hardtanh": (_f("hardtanh"), X),
    "relu6": (_f("relu6"), X), "leaky_relu": (_f("leaky_relu", negative_slope=0.2), X),
    "elu": (_f("elu", alpha=1.5), X), "selu": (_f("selu"), X), "celu": (_f("celu", alpha=2.0), X),
    "softplus": (_f("softplus", beta=2.0, threshold=5.0), X), "softshrink": (_f("softshrink", lambd=1.0), X),
    "hardshrink": (_f("hardshrink", lambd=1.0), X), "threshold": (_f("threshold", threshold=0.4, value=-2.0), X),
    "softsign": (_f("softsign"), X), "tanhshrink": (_f("tanhshrink"), X), "mish": (_f("mish"), X),
    "logsigmoid": (_f("logsigmoid"), X), "glu": (lambda m, x: m.nn.functional.glu(x[:12], 0), X),
    "softmin": (lambda m, x: m.nn.functional.softmin(x, 0), X),
    "frac": (lambda m, x: m.frac(x), X), "deg2rad": (lambda m, x: m.deg2rad(x), X),
    "rad2deg": (lambda m, x: m.rad2deg(x), X), "exp2": (lambda m, x: m.exp2(x), X),
    "sinc": (lambda m, x: m.sinc(x), X), "erfc": (lambda m, x: m.erfc(x), X),
    "erfinv": (lambda m, x: m.erfinv(x), P * 2 - 1), "lgamma": (lambda m, x: m.lgamma(x), POS),
    "digamma": (lambda m, x: m.digamma(x), POS), "polygamma": (lambda m, x: m.polygamma(2, x), POS),
    "mvlgamma": (lambda m, x: m.mvlgamma(x, 3), POS + 1), "logit": (lambda m, x: m.logit(x, 0.05), P),
    "i0": (lambda m, x: m.i0(x), X[1:-1]), "i0e": (lambda m, x: m.special.i0e(x), X),
    "i1": (lambda m, x: m.special.i1(x), X[1:-1]), "i1e": (lambda m, x: m.special.i1e(x), X),
    "ndtr": (lambda m, x: m.special.ndtr(x), X), "ndtri": (lambda m, x: m.special.ndtri(x), P),
    "log_ndtr": (lambda m, x: m.special.log_ndtr(x), X), "erfcx": (lambda m, x: m.special.erfcx(x), X),
    "entr": (lambda m, x: m.special.entr(x), POS), "nan_to_num": (lambda m, x: m.nan_to_num(m.log(x)), POS - 1),
    "fmax": (lambda m, x: m.fmax(x, m.flip(x, [0])), X), "fmin": (lambda m, x: m.fmin(x, m.flip(x, [0])), X),
    "fmod": (lambda m, x: m.fmod(x, m.flip(x, [0]) + 40.0), X),
    "logaddexp2": (lambda m, x: m.logaddexp2(x, m.flip(x, [0])), X),
    "ldexp": (lambda m, x: m.ldexp(x, m.flip(x, [0])), X[3:-2]),
    "float_power": (lambda m, x: m.float_power(x, m.flip(x, [0])), POS),
    "xlog1py": (lambda m, x: m.special.xlog1py(x, m.flip(x, [0])), POS),
    "zeta": (lambda m, x: m.special.zeta(m.full_like(x, 3.5), x), POS),     # none in its first argument
    "prelu": (lambda m, x: m.nn.functional.prelu(m.reshape(x[:12], (2, 3, 2)), m.flip(x[:3], [0])), X),
    "lerp": (lambda m, x: m.lerp(x, m.flip(x, [0]), m.sigmoid(x)), X),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    fn, values = CASES[name]
    xd = dj.tensor(values, requires_grad=True)
    xt = torch.tensor(values, requires_grad=True)
    got, want = fn(dj, xd), fn(torch, xt)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    got.sum().backward()
    want.sum().backward()
    # 1e-7: torch's hardsigmoid backward multiplies by a float32 1/6 even in float64
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("name,kw", [("hardswish", {}), ("leaky_relu", {"negative_slope": 0.3}), ("elu", {}),
                                     ("hardtanh", {"min_val": -0.5}), ("relu6", {}), ("threshold", {})])
def test_inplace_forms_write_their_input(name, kw):
    if name == "threshold":
        kw = {"threshold": 0.1, "value": 7.0}
    a = dj.tensor(X.copy())
    out = getattr(F, name)(a, inplace=True, **kw)
    assert out is a
    want = getattr(torch.nn.functional, name)(torch.tensor(X), **kw)
    np.testing.assert_allclose(a.numpy(), want.numpy(), rtol=1e-12)


def test_tensor_inplace_methods():
    a = dj.tensor([5.5, -7.25])
    a.fmod_(2.0)
    assert a.tolist() == [1.5, -1.25]
    b = dj.tensor([0.5, 0.9])
    b.logit_()
    np.testing.assert_allclose(b.numpy(), torch.tensor([0.5, 0.9]).logit().numpy(), rtol=1e-6)
    c = dj.tensor([float("nan"), float("inf")])
    c.nan_to_num_(1.0, 2.0)
    assert c.tolist() == [1.0, 2.0]


def test_integer_inputs_follow_torch():
    i = dj.tensor([-3, 0, 2, 9])
    ti = torch.tensor([-3, 0, 2, 9])
    for fn in (lambda m, x: m.nn.functional.relu6(x), lambda m, x: m.nn.functional.hardtanh(x, -0.5, 1.5),
               lambda m, x: m.nn.functional.threshold(x, 1, 5), lambda m, x: m.sgn(x),
               lambda m, x: m.erfc(x), lambda m, x: m.float_power(x, 2), lambda m, x: m.gcd(x, m.flip(x, [0])),
               lambda m, x: m.lcm(x, m.flip(x, [0])), lambda m, x: m.fmod(x, 4)):
        got, want = fn(dj, i), fn(torch, ti)
        assert got.dtype.name == str(want.dtype).replace("torch.", "")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(ZeroDivisionError, match="fmod"):
        dj.fmod(i, dj.tensor([1, 0, 1, 1]))
    with pytest.raises(Exception, match="does not support integer"):
        F.leaky_relu(i)


def test_modules_match_torch():
    x = np.linspace(-4, 4, 12).reshape(2, 6)
    for name, args in [("Hardswish", ()), ("Hardsigmoid", ()), ("Hardtanh", (-2.0, 2.0)), ("ReLU6", ()),
                       ("LeakyReLU", (0.1,)), ("ELU", (0.5,)), ("SELU", ()), ("CELU", (1.5,)), ("Softplus", (2.0,)),
                       ("Softshrink", (0.3,)), ("Hardshrink", (0.3,)), ("Threshold", (0.5, -1.0)), ("Softsign", ()),
                       ("Tanhshrink", ()), ("Mish", ()), ("LogSigmoid", ()), ("GLU", ()), ("Softmin", (1,)),
                       ("PReLU", ())]:
        m, tm = getattr(dj.nn, name)(*args), getattr(torch.nn, name)(*args)
        if name == "PReLU":
            tm = tm.double()
        np.testing.assert_allclose(m(dj.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-10, atol=1e-12, err_msg=name)
        assert repr(m) == repr(tm), (repr(m), repr(tm))


def test_rrelu_eval_is_the_mean_slope_and_training_draws_slopes_in_range():
    x = dj.tensor(-np.linspace(1, 2, 64))
    np.testing.assert_allclose(F.rrelu(x, 0.1, 0.3).numpy(), x.numpy() * 0.2)
    y = F.rrelu(x, 0.1, 0.3, training=True).numpy() / x.numpy()
    assert (y >= 0.1).all() and (y <= 0.3).all() and y.std() > 0
    m = dj.nn.RReLU(0.1, 0.3)
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), x.numpy() * 0.2)


def test_errors_say_what_was_wrong():
    with pytest.raises(InvalidArgumentError, match="lambda must be greater or equal to 0"):
        F.softshrink(dj.tensor([1.0]), -1.0)
    with pytest.raises(ShapeError, match="Halving dimension must be even"):
        F.glu(dj.zeros(3))
    with pytest.raises(ShapeError, match="channel size"):
        F.prelu(dj.zeros(2, 3), dj.zeros(2))
    with pytest.raises(InvalidArgumentError, match="greater than \\(p-1\\)/2"):
        dj.mvlgamma(dj.tensor([0.5]), 3)
    with pytest.raises(InvalidArgumentError, match="unsigned"):
        F.hardtanh(dj.tensor([1], dtype=dj.uint8))
    with pytest.raises(InvalidArgumentError, match="Bool inputs"):
        F.relu6(dj.tensor([True]))
