"""The losses, distances, normalizations, shuffles and adaptive poolings of dispatch_jit/nn/
functional_loss.py, functional_norm.py and their layers (loss.py, norm_layers.py): one table of calls
run in dispatch_jit and in PyTorch 2.13 where installed (values and gradients), closed forms
always, and PyTorch's checks."""

from __future__ import annotations

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.errors import InvalidArgumentError, ShapeError

RNG = np.random.default_rng(11)
A = np.round(RNG.standard_normal((4, 6)), 3)
B = np.round(RNG.standard_normal((4, 6)), 3)
C = np.round(RNG.standard_normal((4, 6)), 3)
SIGN = np.array([1.0, -1.0, 1.0, -1.0])
SIGN2 = np.where(RNG.standard_normal((4, 6)) > 0, 1.0, -1.0)
POS = np.abs(B) + 0.1
PROB = np.abs(B) / np.abs(B).sum(1, keepdims=True)
IMG = np.round(RNG.standard_normal((2, 8, 3, 4)), 3)
SEQ = np.round(RNG.standard_normal((2, 4, 7)), 3)


def _like(x, values):
    """An int64 tensor of ``values`` from the library ``x`` belongs to (class indices)."""
    if isinstance(x, dj.Tensor):
        return dj.tensor(values)
    import torch
    return torch.tensor(values)


# name -> (call(F, *tensors), arrays, differentiable inputs)
CASES = {
    "smooth_l1": (lambda f, a, b: f.smooth_l1_loss(a, b, beta=0.5), (A, B)),
    "smooth_l1-none": (lambda f, a, b: f.smooth_l1_loss(a, b, reduction="none", beta=0.0), (A, B)),
    "huber": (lambda f, a, b: f.huber_loss(a, b, delta=0.7, reduction="sum"), (A, B)),
    "soft_margin": (lambda f, a, s: f.soft_margin_loss(a, s), (A, SIGN2)),
    "margin_ranking": (lambda f, a, b, s: f.margin_ranking_loss(a, b, s, margin=0.2), (A[:, 0], B[:, 0], SIGN)),
    "kl_div": (lambda f, a, p: f.kl_div(a, p, reduction="batchmean"), (A, PROB)),
    "kl_div-log": (lambda f, a, b: f.kl_div(a, b, reduction="sum", log_target=True), (A, B)),
    "poisson_nll": (lambda f, a, p: f.poisson_nll_loss(a, p), (A, POS)),
    "poisson_nll-full": (lambda f, a, p: f.poisson_nll_loss(a, p * 3, log_input=False, full=True), (POS, POS)),
    "gaussian_nll": (lambda f, a, b, v: f.gaussian_nll_loss(a, b, v), (A, B, POS)),
    "gaussian_nll-hetero": (lambda f, a, b, v: f.gaussian_nll_loss(a, b, v[:, :1], full=True, reduction="sum"),
                            (A, B, POS)),
    "hinge_embedding": (lambda f, a, s: f.hinge_embedding_loss(a, s, margin=0.5), (A, SIGN2)),
    "cosine_embedding": (lambda f, a, b, s: f.cosine_embedding_loss(a, b, s, margin=0.1), (A, B, SIGN)),
    "triplet": (lambda f, a, b, c: f.triplet_margin_loss(a, b, c, margin=2.0), (A, B, C)),
    "triplet-swap-p1": (lambda f, a, b, c: f.triplet_margin_loss(a, b, c, p=1, swap=True, reduction="none"),
                        (A, B, C)),
    "triplet_with_distance": (lambda f, a, b, c: f.triplet_margin_with_distance_loss(
        a, b, c, distance_function=lambda x, y: (x - y).abs().sum(-1), swap=True), (A, B, C)),
    "multilabel_soft_margin": (lambda f, a, y: f.multilabel_soft_margin_loss(a, y), (A, (SIGN2 > 0) * 1.0)),
    "multi_margin": (lambda f, a: f.multi_margin_loss(a, _like(a, [0, 5, 2, 3])), (A,)),
    "multi_margin-p2": (lambda f, a, w: f.multi_margin_loss(a, _like(a, [1, 1, 4, 0]), p=2, margin=0.5, weight=w,
                                                            reduction="none"), (A, POS[0])),
    "multilabel_margin": (lambda f, a: f.multilabel_margin_loss(a, _like(a, [[3, 0, -1, 1, 2, 0], [4, 4, 1, -1, -1, 5],
                                                                         [-1, 2, 3, 0, 0, 0], [5, 4, 3, 2, 1, 0]])),
                          (A,)),
    "cosine_similarity": (lambda f, a, b: f.cosine_similarity(a, b), (A, B)),
    "cosine_similarity-dim0": (lambda f, a, b: f.cosine_similarity(a, b[:1], dim=0), (A, B)),
    "pairwise_distance": (lambda f, a, b: f.pairwise_distance(a, b, keepdim=True), (A, B)),
    "pairwise_distance-p3": (lambda f, a, b: f.pairwise_distance(a, b, p=3.0), (A, B)),
    "pdist": (lambda f, a: f.pdist(a), (A,)),
    "pdist-inf": (lambda f, a: f.pdist(a, float("inf")), (A,)),
    "group_norm": (lambda f, x, w, b: f.group_norm(x, 2, w, b), (IMG, np.linspace(0.5, 2, 8), np.linspace(-1, 1, 8))),
    "instance_norm": (lambda f, x: f.instance_norm(x), (SEQ,)),
    "rms_norm": (lambda f, x, w: f.rms_norm(x, [3, 4], w), (IMG, POS[:3, :4])),
    "rms_norm-eps": (lambda f, x: f.rms_norm(x, (7,), eps=1e-3), (SEQ,)),
    "local_response_norm": (lambda f, x: f.local_response_norm(x, 3, alpha=0.5), (IMG,)),
    "local_response_norm-3d": (lambda f, x: f.local_response_norm(x, 2), (SEQ,)),
    "pixel_shuffle": (lambda f, x: f.pixel_shuffle(x, 2), (IMG,)),
    "pixel_unshuffle": (lambda f, x: f.pixel_unshuffle(x[:, :, :2, :], 2), (IMG,)),
    "channel_shuffle": (lambda f, x: f.channel_shuffle(x, 4), (IMG,)),
    "adaptive_avg_pool1d": (lambda f, x: f.adaptive_avg_pool1d(x, 3), (SEQ,)),
    "adaptive_max_pool1d": (lambda f, x: f.adaptive_max_pool1d(x, 3), (SEQ,)),
    "adaptive_max_pool2d": (lambda f, x: f.adaptive_max_pool2d(x, (2, 3)), (IMG,)),
}
NO_GRAD = {"soft_margin", "hinge_embedding", "multilabel_soft_margin", "multi_margin-p2"}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_against_torch(name):
    torch = pytest.importorskip("torch")
    call, arrays = CASES[name]
    # PyTorch refuses a gradient for the targets of these losses: only the input requires one
    grad = [i == 0 or name not in NO_GRAD for i in range(len(arrays))]
    xs = [dj.tensor(a, requires_grad=g) for a, g in zip(arrays, grad)]
    ts = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grad)]
    got, want = call(F, *xs), call(torch.nn.functional, *ts)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == "float64"
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = RNG.standard_normal(tuple(want.shape))
    (got * dj.tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        if t.grad is None:
            continue
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_adaptive_max_pool_indices_and_modules_against_torch():
    torch = pytest.importorskip("torch")
    v, i = F.adaptive_max_pool2d(dj.tensor(IMG), 2, return_indices=True)
    tv, ti = torch.nn.functional.adaptive_max_pool2d(torch.tensor(IMG), 2, return_indices=True)
    assert i.tolist() == ti.tolist()
    _, i1 = F.adaptive_max_pool1d(dj.tensor(SEQ), 4, return_indices=True)
    assert i1.tolist() == torch.nn.functional.adaptive_max_pool1d(torch.tensor(SEQ), 4, return_indices=True)[1].tolist()
    for name, args in (("GroupNorm", (2, 8)), ("InstanceNorm2d", (8,)), ("RMSNorm", ([3, 4],)),
                       ("LocalResponseNorm", (3,)), ("PixelShuffle", (2,)), ("ChannelShuffle", (2,)),
                       ("AdaptiveMaxPool2d", (2,))):
        m, tm = getattr(dj.nn, name)(*args), getattr(torch.nn, name)(*args)
        assert list(m.state_dict()) == list(tm.state_dict()), name
        x32 = IMG.astype(np.float32)
        np.testing.assert_allclose(m(dj.tensor(x32)).detach().numpy(), tm(torch.tensor(x32)).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_instance_norm_running_stats_follow_torch():
    torch = pytest.importorskip("torch")
    m = dj.nn.InstanceNorm1d(4, track_running_stats=True, affine=True)
    tm = torch.nn.InstanceNorm1d(4, track_running_stats=True, affine=True)
    x = dj.tensor(SEQ, dtype=dj.float32)
    m(x)
    tm(torch.tensor(SEQ, dtype=torch.float32))
    np.testing.assert_allclose(m.running_var.numpy(), tm.running_var.numpy(), rtol=1e-6)
    np.testing.assert_allclose(m.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-6, atol=1e-7)
    m.eval()
    tm.eval()
    np.testing.assert_allclose(m(x).detach().numpy(), tm(torch.tensor(SEQ, dtype=torch.float32)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_closed_forms():
    d = np.array([0.5, 3.0])
    got = F.smooth_l1_loss(dj.tensor(d), dj.tensor([0.0, 0.0]), reduction="none").numpy()
    np.testing.assert_allclose(got, [0.125, 2.5])
    x = dj.tensor([[3.0, 0.0], [0.0, 4.0]])
    np.testing.assert_allclose(F.pdist(x).numpy(), [5.0])
    np.testing.assert_allclose(F.cosine_similarity(x, x).numpy(), [1.0, 1.0])
    g = F.group_norm(dj.tensor([[1.0, 3.0, 5.0, 7.0]]), 2).numpy()
    np.testing.assert_allclose(g, [[-1, 1, -1, 1]], atol=1e-4)
    assert F.pixel_unshuffle(F.pixel_shuffle(dj.tensor(IMG), 2), 2).tolist() == dj.tensor(IMG).tolist()
    # pdist of equal rows: a zero distance with a zero gradient (not the root's NaN at 0)
    r = dj.tensor([[1.0, 2.0], [1.0, 2.0]], requires_grad=True)
    F.pdist(r).sum().backward()
    assert r.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_checks():
    x = dj.tensor(A)
    with pytest.raises(InvalidArgumentError, match="not a valid value for reduction"):
        F.smooth_l1_loss(x, x, reduction="avg")
    with pytest.raises(InvalidArgumentError, match="negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(InvalidArgumentError, match="var has negative"):
        F.gaussian_nll_loss(x, x, dj.tensor(-POS))
    with pytest.raises(InvalidArgumentError, match="incorrect size"):
        F.gaussian_nll_loss(x, x, dj.ones(3))
    with pytest.raises(InvalidArgumentError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(x, dj.tensor([0, 1, 2, 3]), p=3)
    with pytest.raises(ShapeError, match="divisible by num_groups"):
        F.group_norm(dj.tensor(IMG), 3)
    with pytest.raises(ShapeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(dj.tensor(IMG), 3)
    with pytest.raises(ShapeError, match="divisible by groups"):
        F.channel_shuffle(dj.tensor(IMG), 3)
    with pytest.raises(ShapeError, match="normalized_shape"):
        F.rms_norm(dj.tensor(IMG), [5])
    with pytest.raises(ShapeError, match="3D or higher"):
        F.local_response_norm(x, 2)
    with pytest.raises(InvalidArgumentError, match="more than 1 spatial element"):
        F.instance_norm(dj.ones(2, 3, 1))
    with pytest.raises(ShapeError, match="2D tensors"):
        F.pdist(dj.tensor(IMG))
    with pytest.raises(InvalidArgumentError, match="margin must be greater than 0"):
        F.triplet_margin_loss(x, x, x, margin=0.0)
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, x)
