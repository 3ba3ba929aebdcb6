"""Random numbers (dispatch_jit/random.py): PyTorch's signatures, checked call form by call form
against torch where it is installed; seeded reproducibility; and the distributions, checked on
seeded samples with generous bounds (many standard errors wide, so the tests cannot flake)."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import DispatchJitError


def _names(M):
    """The same inputs, built by ``M`` (dj or torch)."""
    return {
        "D": M, "G": M.Generator().manual_seed(0) if M is not dj else dj.Generator(0),
        "X": M.zeros(2, 3), "XI": M.zeros(2, 3, dtype=M.int32),
        "M": M.zeros(2, 3), "S": M.ones(3), "MG": M.zeros(3, requires_grad=True),
        "P": M.tensor([0.2, 0.5, 0.9]), "PG": M.tensor([0.2, 0.5], requires_grad=True), "BAD": M.tensor([1.5]),
        "W": M.tensor([1.0, 0.0, 3.0, 2.0]), "W2": M.ones(3, 4), "NEG": M.tensor([-1.0, 2.0]),
        "ZERO": M.tensor([0.0, 0.0]), "SCALAR": M.tensor(1.0),
    }


# call forms that torch takes: each must give the same shape, dtype and requires_grad in dj
FORMS = [
    "rand(2, 3)", "rand((2, 3))", "rand([2])", "rand(size=(2, 3))", "rand(2, dtype=D.float64)", "rand(2, requires_grad=True)",
    "rand(2, generator=G)", "rand(2, device='cpu')", "rand(2, dtype=D.complex64)", "rand(2, dtype=D.float16)",
    "randn(2, 3)", "randn(size=[2])", "randn(2, dtype=D.complex64, requires_grad=True)",
    "rand_like(X)", "rand_like(X, dtype=D.float64)", "randn_like(X, requires_grad=True)", "randn_like(X, generator=G)",
    "randint(5, (100,))", "randint(2, 5, (3,))", "randint(high=5, size=(3,))", "randint(low=2, high=5, size=(3,))",
    "randint(2, high=5, size=(3,))", "randint(5, [2, 2])", "randint(5, size=(2,))", "randint(0, 2, (3,), dtype=D.bool)",
    "randint(0, 5, (3,), dtype=D.float32, requires_grad=True)", "randint(0, 5, (3,), generator=G, dtype=D.uint8)",
    "randint(-2**63, 2**63 - 1, (2,))",
    "randint_like(X, 5)", "randint_like(X, 2, 5)", "randint_like(X, high=5)", "randint_like(XI, low=2, high=5)",
    "randint_like(XI, 5, dtype=D.int64)",
    "randperm(5)", "randperm(n=4)", "randperm(0)", "randperm(5, dtype=D.float32, requires_grad=True)",
    "randperm(5, generator=G)", "randperm(256, dtype=D.uint8)",
    "normal(M, S)", "normal(M, 1.0)", "normal(M)", "normal(mean=M)", "normal(2.0, S)", "normal(2.0, std=S)",
    "normal(0.0, 1.0, (2, 3))", "normal(0, 1, (2,))", "normal(0.0, 1.0, size=(2,), dtype=D.float64, requires_grad=True)",
    "normal(MG, 1.0)", "normal(M, S, generator=G)", "normal(S, M)",
    "bernoulli(P)", "bernoulli(P, 0.3)", "bernoulli(P, p=0.3)", "bernoulli(PG)", "bernoulli(XI, p=0.5)",
    "bernoulli(P, generator=G)",
    "multinomial(W, 2)", "multinomial(W, 3, True)", "multinomial(W, num_samples=2, replacement=True)",
    "multinomial(W2, 2)", "multinomial(W, 2, generator=G)", "multinomial(W2[:0], 2)",
]

# call forms that torch refuses: dj must refuse them too, with one of its own errors
REFUSED = [
    "rand()", "rand(2, dtype=D.int64)", "rand_like(XI)", "randint(5)", "randint(5, 3)", "randint(5.0, (3,))",
    "randint(5, 5, (3,))", "randint(0, 300, (3,), dtype=D.uint8)", "randint(-1, 3, (3,), dtype=D.uint8)",
    "randint(0, 3, (3,), dtype=D.bool)", "randint(5, size=3)", "randint(0, 5, (3,), requires_grad=True)",
    "randint(0, 5, (2,), dtype=D.complex64)", "randperm(-1)", "randperm(5.0)", "randperm(257, dtype=D.uint8)",
    "randperm(3, dtype=D.bool)", "randperm(5, requires_grad=True)",
    "normal(0.0, 1.0)", "normal(M, -1.0)", "normal(0.0, -1.0, (2,))", "normal(M, 1.0, size=(2,))",
    "normal(M, dtype=D.float64)", "normal(XI, 1.0)", "normal(M, D.tensor([1.0, -1.0, 1.0]))", "normal(M, D.ones(4))",
    "bernoulli(P, P)", "bernoulli(BAD)", "bernoulli(P, p=1.5)", "bernoulli(XI)",
    "multinomial(W, 5)", "multinomial(XI, 1)", "multinomial(NEG, 1)", "multinomial(ZERO, 1)", "multinomial(W, 0)",
    "multinomial(W, 2.0)", "multinomial(W, True)", "multinomial(SCALAR, 1)", "multinomial(D.ones(2, 2, 2), 1)",
    "multinomial(D.tensor([float('inf'), 1.0]), 1)",
]


@pytest.mark.parametrize("form", FORMS)
def test_call_forms_of_torch(form):
    got = eval("D." + form, _names(dj))
    assert isinstance(got, dj.Tensor)
    torch = pytest.importorskip("torch")
    want = eval("D." + form, _names(torch))
    assert (got.shape, got.dtype.name, got.requires_grad) == \
        (tuple(want.shape), str(want.dtype).removeprefix("torch."), want.requires_grad)


@pytest.mark.parametrize("form", REFUSED)
def test_refused_forms_of_torch(form):
    with pytest.raises(DispatchJitError):
        eval("D." + form, _names(dj))
    torch = pytest.importorskip("torch")
    with pytest.raises((TypeError, RuntimeError, ValueError, NotImplementedError)):
        eval("D." + form, _names(torch))


def test_randint_high_size_is_high_and_size():
    """Issue 25: randint(5, (100,)) is 100 values in [0, 5), not one value in [5, 100)."""
    r = dj.randint(5, (100,), generator=dj.Generator(1))
    assert r.shape == (100,) and r.dtype is dj.int64
    assert set(r.tolist()) == {0, 1, 2, 3, 4}


SEEDED = ["rand(3)", "randn(3)", "randint(9, (8,))", "randperm(6)", "normal(0.0, 1.0, (3,))", "normal(X)",
          "bernoulli(P)", "bernoulli(X, 0.5)", "multinomial(W, 3)", "rand_like(X)", "randint_like(X, 9)"]


@pytest.mark.parametrize("form", SEEDED)
def test_seeded_draws_repeat(form):
    names = _names(dj)
    dj.manual_seed(7)
    a = eval("D." + form, names).tolist()
    b = eval("D." + form, names).tolist()
    dj.manual_seed(7)
    assert eval("D." + form, names).tolist() == a
    names["G"] = dj.Generator(7)
    with_g = eval(f"D.{form[:-1]}, generator=G)", names).tolist()
    names["G"] = dj.Generator(7)
    assert eval(f"D.{form[:-1]}, generator=G)", names).tolist() == with_g
    if form != "randperm(6)" and "multinomial" not in form:
        assert a != b


N = 100_000


def test_uniform_and_normal_moments():
    g = dj.Generator(0)
    u = dj.rand(N, generator=g, dtype=dj.float64).numpy()
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    z = dj.randn(N, generator=g, dtype=dj.float64).numpy()
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
    c = dj.randn(N, generator=g, dtype=dj.complex128).numpy()     # E|z|^2 = 1, split evenly
    assert abs(np.mean(np.abs(c) ** 2) - 1) < 0.03 and abs(c.real.var() - 0.5) < 0.02
    h = dj.rand(N, generator=g, dtype=dj.float16).numpy()
    assert h.dtype == np.float16 and h.min() >= 0 and h.max() <= 1


def test_randint_is_uniform_over_its_range():
    r = dj.randint(-3, 4, (N,), generator=dj.Generator(0)).numpy()
    counts = np.bincount(r + 3, minlength=7)
    assert r.min() == -3 and r.max() == 3
    assert np.all(np.abs(counts / N - 1 / 7) < 0.01)
    b = dj.randint(0, 2, (N,), dtype=dj.bool, generator=dj.Generator(1)).numpy()
    assert abs(b.mean() - 0.5) < 0.01


def test_randperm_is_a_uniform_permutation():
    g = dj.Generator(0)
    perms = np.array([dj.randperm(4, generator=g).tolist() for _ in range(4000)])
    assert all(sorted(p) == [0, 1, 2, 3] for p in perms)
    first = np.bincount(perms[:, 0], minlength=4) / len(perms)
    assert np.all(np.abs(first - 0.25) < 0.04)
    assert sorted(dj.randperm(1000, generator=g).tolist()) == list(range(1000))


def test_normal_overloads_have_their_parameters():
    g = dj.Generator(0)
    mean = dj.tensor([[-5.0], [10.0]], dtype=dj.float64)
    std = dj.tensor([0.5, 2.0, 4.0], dtype=dj.float64)
    s = np.stack([dj.normal(mean, std, generator=g).numpy() for _ in range(4000)])   # broadcast to (2, 3)
    assert s.shape == (4000, 2, 3)
    np.testing.assert_allclose(s.mean(axis=0), np.broadcast_to(mean.numpy(), (2, 3)), atol=0.4)
    np.testing.assert_allclose(s.std(axis=0), np.broadcast_to(std.numpy(), (2, 3)), rtol=0.1)
    one = dj.normal(dj.full((N,), 3.0, dtype=dj.float64), generator=g).numpy()       # std=1.0
    assert abs(one.mean() - 3) < 0.02 and abs(one.std() - 1) < 0.02
    fs = dj.normal(-1.0, dj.full((N,), 0.5, dtype=dj.float64), generator=g).numpy()
    assert abs(fs.mean() + 1) < 0.01 and abs(fs.std() - 0.5) < 0.01
    ff = dj.normal(2.0, 3.0, (N,), generator=g, dtype=dj.float64).numpy()
    assert abs(ff.mean() - 2) < 0.05 and abs(ff.std() - 3) < 0.05
    assert dj.normal(0.0, 0.0, (5,)).tolist() == [0.0] * 5


def test_normal_and_bernoulli_samples_have_zero_gradients():
    """As PyTorch's: the samples require grad when a parameter does, and its gradient is zero."""
    m = dj.tensor([1.0, 2.0], requires_grad=True)
    s = dj.tensor([0.5, 0.5], requires_grad=True)
    out = dj.normal(m, s)
    assert out.requires_grad and "Normal" in repr(out.grad_fn)
    out.sum().backward()
    assert m.grad.tolist() == [0.0, 0.0] and s.grad.tolist() == [0.0, 0.0]
    p = dj.tensor([0.3, 0.6], requires_grad=True)
    b = dj.bernoulli(p)
    b.sum().backward()
    assert p.grad.tolist() == [0.0, 0.0]
    with dj.no_grad():
        assert not dj.normal(m, 1.0).requires_grad


def test_bernoulli_frequencies():
    g = dj.Generator(0)
    p = dj.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=dj.float64)
    s = np.stack([dj.bernoulli(p, generator=g).numpy() for _ in range(5000)])
    assert set(np.unique(s)) <= {0.0, 1.0}
    np.testing.assert_allclose(s.mean(axis=0), p.numpy(), atol=0.03)
    assert s[:, 0].sum() == 0 and s[:, 4].sum() == len(s)
    q = dj.bernoulli(dj.zeros(N, dtype=dj.int64), p=0.25, generator=g)
    assert q.dtype is dj.int64 and abs(q.numpy().mean() - 0.25) < 0.01
    assert dj.bernoulli(dj.zeros(3, dtype=dj.bool), 1.0).tolist() == [True] * 3


def test_multinomial_with_replacement_follows_the_weights():
    w = np.array([1.0, 0.0, 3.0, 2.0, 0.0])
    r = dj.multinomial(dj.tensor(w), N, replacement=True, generator=dj.Generator(0)).numpy()
    assert r.dtype == np.int64 and r.shape == (N,)
    freq = np.bincount(r, minlength=5) / N
    assert freq[1] == 0 and freq[4] == 0
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.01)


def test_multinomial_without_replacement_draws_in_sequence():
    """Without replacement each draw is proportional to the weights left: P(first = i) = p_i,
    P(second = j) = sum_i p_i p_j / (1 - p_i); no index twice in a row."""
    w = np.array([0.1, 0.2, 0.3, 0.4])
    rows = 20000
    r = dj.multinomial(dj.tensor(np.tile(w, (rows, 1))), 2, generator=dj.Generator(0)).numpy()
    assert r.shape == (rows, 2) and np.all(r[:, 0] != r[:, 1])
    np.testing.assert_allclose(np.bincount(r[:, 0], minlength=4) / rows, w, atol=0.015)
    second = np.array([sum(w[i] * w[j] / (1 - w[i]) for i in range(4) if i != j) for j in range(4)])
    np.testing.assert_allclose(np.bincount(r[:, 1], minlength=4) / rows, second, atol=0.015)
    every = dj.multinomial(dj.tensor([5.0, 1.0, 2.0]), 3, generator=dj.Generator(1)).tolist()
    assert sorted(every) == [0, 1, 2]


def test_samples_land_on_the_parameters_device():
    if not dj.cuda.is_available():
        pytest.skip("no CUDA device or simulator")
    p = dj.tensor([0.5, 0.5]).to("cuda")
    for out in (dj.bernoulli(p), dj.normal(p), dj.multinomial(p, 1), dj.rand_like(p), dj.randint_like(p, 3),
                dj.randperm(3, device="cuda")):
        assert out.device == "cuda:0"
