"""The nn names PyTorch users reach for beyond convolution and pooling: F.pad, normalize,
batch_norm, scaled_dot_product_attention, binary_cross_entropy, the channel and alpha
dropouts, and the modules over them (Flatten, Unflatten, Softmax, LogSoftmax, Conv1d/2d,
BatchNorm1d/2d, pooling, Dropout1d/2d, AlphaDropout, MultiheadAttention, BCELoss): values and
gradients against PyTorch when installed, finite differences always, state_dict keys, errors."""

import warnings

import numpy as np
import pytest

import dispatch_jit as dj
import dispatch_jit.nn as nn
import dispatch_jit.nn.functional as F
from dispatch_jit.errors import InvalidArgumentError, SchemaError, ShapeError

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
RNG = np.random.default_rng(11)
TOL = dict(rtol=1e-10, atol=1e-12)


def _both(fn_dj, fn_torch, arrays, tol=TOL):
    ours = [dj.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays]
    theirs = [torch.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays]
    y, ty = fn_dj(*ours), fn_torch(*theirs)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **tol)
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(dj.tensor(g.astype(y.dtype.np)))
    ty.backward(torch.tensor(g, dtype=ty.dtype))
    for a, b in zip(ours, theirs):
        if isinstance(a, dj.Tensor) and a.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


# -- pad ---------------------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("mode,shape,pad", [
    ("constant", (2, 3), (1, 2)), ("constant", (2, 3, 4), (2, -1, 0, 1, 1, 1)), ("reflect", (2, 5), (2, 3)),
    ("reflect", (1, 2, 4, 5), (1, 2, 3, 1)), ("replicate", (2, 3, 4), (3, 1)), ("replicate", (1, 2, 2, 3, 3), (1, 1, 2, 0, 1, 2)),
    ("replicate", (2, 3, 4), (-4, 5, 2, -3)),
    ("circular", (1, 2, 4, 5), (2, 1, 3, 4)), ("circular", (2, 3, 4), (-1, 2))])
def test_pad_matches_torch(mode, shape, pad):
    value = 2.5 if mode == "constant" else None
    _both(lambda x: F.pad(x, pad, mode, value), lambda x: TF.pad(x, pad, mode, value), [RNG.standard_normal(shape)])


def test_pad_without_torch_and_its_errors():
    x = dj.tensor([[1.0, 2.0, 3.0]])
    assert F.pad(x, (2, 1), "reflect").numpy().tolist() == [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    assert F.pad(x, (1, 1), "replicate").numpy().tolist() == [[1.0, 1.0, 2.0, 3.0, 3.0]]
    assert F.pad(x, (1, 2), "circular").numpy().tolist() == [[3.0, 1.0, 2.0, 3.0, 1.0, 2.0]]
    assert F.pad(x, (-1, 1)).numpy().tolist() == [[2.0, 3.0, 0.0]]
    # a negative replicate pad crops, even past the edge it then replicates (output j reads input
    # clamp(j - lo, 0, n - 1), as PyTorch's), or empties the dim
    assert F.pad(x, (-3, 2), "replicate").numpy().tolist() == [[3.0, 3.0]]
    assert F.pad(x, (-1, -2), "replicate").shape == (1, 0)
    with pytest.raises(ShapeError, match="negative size -1"):
        F.pad(x, (-2, -2), "replicate")
    xg = dj.tensor(RNG.standard_normal((1, 2, 3, 4)), requires_grad=True)
    assert dj.autograd.gradcheck(lambda t: F.pad(t, (2, 1, 1, 2), "reflect"), (xg,))
    with pytest.raises(ShapeError, match="Padding length should be less than or equal to two times"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ShapeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(x, (3, 3), "reflect")
    with pytest.raises(ShapeError, match="Padding size 2 is not supported for 1D input"):
        F.pad(dj.ones(3), (1, 1), "reflect")
    with pytest.raises(SchemaError, match="Padding length must be divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(SchemaError, match="padding mode"):
        F.pad(x, (1, 1), "mirror")


# -- normalize, batch_norm -------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize_matches_torch(p, dim):
    _both(lambda x: F.normalize(x, p, dim), lambda x: TF.normalize(x, p, dim), [RNG.standard_normal((3, 4, 2))])


@needs_torch
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_functional_matches_torch(shape):
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal(3), RNG.standard_normal(3)
    rm, rv = dj.zeros(3, dtype=dj.float64), dj.ones(3, dtype=dj.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    _both(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, True, 0.3), lambda x, w, b: TF.batch_norm(
        x, trm, trv, w, b, True, 0.3), [x, w, b])
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), **TOL)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), **TOL)
    _both(lambda x, w, b: F.batch_norm(x, rm, rv, w, b), lambda x, w, b: TF.batch_norm(x, trm, trv, w, b), [x, w, b])


def test_batch_norm_gradients_and_errors():
    x = dj.tensor(RNG.standard_normal((4, 2, 3)), requires_grad=True)
    w = dj.tensor(RNG.standard_normal(2), requires_grad=True)
    assert dj.autograd.gradcheck(lambda x, w: F.batch_norm(x, None, None, w, None, True), (x, w))
    with pytest.raises(InvalidArgumentError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(dj.ones(1, 3), None, None, training=True)
    with pytest.raises(SchemaError, match="running_mean must be defined in evaluation mode"):
        F.batch_norm(dj.ones(2, 3), None, None)
    with pytest.raises(ShapeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(dj.ones(2, 3), dj.zeros(4), dj.ones(4))
    with pytest.raises(ShapeError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(dj.ones(2, 3, 4))
    # PyTorch counts a 1-D input's channels as 0: an empty one with empty statistics gives itself
    for training in (True, False):
        out = F.batch_norm(dj.ones(0), dj.zeros(0), dj.ones(0), training=training)
        assert out.shape == (0,) and out.dtype == dj.float32
    with pytest.raises(ShapeError, match="running_mean should contain 0 elements not 1"):
        F.batch_norm(dj.ones(0), dj.zeros(1), dj.ones(1))
    with pytest.raises(ShapeError, match="2 or more dimensions"):
        F.batch_norm(dj.ones(3), dj.zeros(3), dj.ones(3))


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"momentum": None}, {"track_running_stats": False}, {"affine": False},
                                {"bias": False}])
def test_batchnorm_modules_match_torch_in_train_and_eval(kw):
    ours, theirs = nn.BatchNorm2d(3, **kw), torch.nn.BatchNorm2d(3, **kw).double()
    ours = ours.to(dj.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    for step in range(3):
        x = RNG.standard_normal((2, 3, 2, 2)) * (step + 1)
        np.testing.assert_allclose(ours(dj.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), **TOL)
    for (k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOL, err_msg=k)
    ours.eval(), theirs.eval()
    x = RNG.standard_normal((2, 3, 2, 2))
    np.testing.assert_allclose(ours(dj.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), **TOL)
    bn1 = nn.BatchNorm1d(3)
    assert bn1(dj.ones(4, 3, 2)).shape == (4, 3, 2) and int(bn1.num_batches_tracked.item()) == 1


# -- attention ---------------------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("case", ["plain", "bool", "float", "causal", "scale", "gqa", "dead_row"])
def test_sdpa_matches_torch(case):
    q, k, v = (RNG.standard_normal((2, 4, 3, 5)), RNG.standard_normal((2, 4, 6, 5)), RNG.standard_normal((2, 4, 6, 2)))
    kw, mask = {}, None
    if case in ("bool", "dead_row"):
        mask = RNG.random((3, 6)) > 0.3
        mask[:, 0] = True
        if case == "dead_row":
            mask[1] = False
    elif case == "float":
        mask = RNG.standard_normal((2, 1, 3, 6))
    if case == "causal":
        kw["is_causal"] = True
    if case == "scale":
        kw["scale"] = 0.3
    if case == "gqa":
        k, v, kw["enable_gqa"] = k[:, :2], v[:, :2], True
    arrays = [q, k, v] + ([mask] if mask is not None else [])
    _both(lambda q, k, v, m=None: F.scaled_dot_product_attention(q, k, v, m, **kw),
          lambda q, k, v, m=None: TF.scaled_dot_product_attention(q, k, v, m, **kw), arrays, dict(rtol=1e-9, atol=1e-11))


def test_sdpa_gradients_dropout_and_errors():
    q, k, v = (dj.tensor(RNG.standard_normal(s), requires_grad=True) for s in ((1, 2, 3), (1, 4, 3), (1, 4, 2)))
    assert dj.autograd.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))
    x = dj.ones(1, 3, 4)
    assert np.all(F.scaled_dot_product_attention(x, x, x, dropout_p=1.0).numpy() == 0)
    dj.manual_seed(3)
    a = F.scaled_dot_product_attention(x, x, x, dropout_p=0.5).numpy()
    dj.manual_seed(3)
    assert np.array_equal(a, F.scaled_dot_product_attention(x, x, x, dropout_p=0.5).numpy())
    with pytest.raises(ShapeError, match="do not fit"):
        F.scaled_dot_product_attention(x, dj.ones(1, 3, 5), x)
    with pytest.raises(SchemaError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(x, x, x, dj.ones(3, 3), is_causal=True)


@needs_torch
@pytest.mark.parametrize("kw,call", [
    ({}, {}), ({"batch_first": True}, {"need_weights": False}), ({}, {"average_attn_weights": False}),
    ({"kdim": 3, "vdim": 5, "bias": False}, {}), ({"batch_first": True}, {"kpm": True, "mask": "bool"}),
    ({}, {"mask": "float", "need_weights": False}), ({}, {"mask": "per_head"}), ({}, {"unbatched": True}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"kpm": True, "mask": "per_head"}),
    ({"add_zero_attn": True, "batch_first": True}, {"mask": "bool", "need_weights": False})])
def test_multihead_attention_matches_torch_with_its_state_dict(kw, call):
    dj.manual_seed(0)
    ours = nn.MultiheadAttention(8, 2, **kw).to(dj.float64)
    theirs = torch.nn.MultiheadAttention(8, 2, **kw).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    L, S, N = 3, 4, 2
    kd, vd = kw.get("kdim", 8), kw.get("vdim", 8)
    shapes = [(L, 8), (S, kd), (S, vd)] if call.get("unbatched") else [
        (N, L, 8), (N, S, kd), (N, S, vd)] if kw.get("batch_first") else [(L, N, 8), (S, N, kd), (S, N, vd)]
    arrays = [RNG.standard_normal(s) for s in shapes]
    opts = {k: call[k] for k in ("need_weights", "average_attn_weights") if k in call}
    masks = {}
    if call.get("kpm"):
        kpm = np.zeros((N, S), bool)
        kpm[0, -1] = True
        masks["key_padding_mask"] = kpm
    if call.get("mask") == "bool":
        masks["attn_mask"] = np.triu(np.ones((L, S), bool), 2)
    elif call.get("mask") == "float":
        masks["attn_mask"] = RNG.standard_normal((L, S))
    elif call.get("mask") == "per_head":
        masks["attn_mask"] = RNG.standard_normal((N * 2, L, S))
    ins = [dj.tensor(a, requires_grad=True) for a in arrays]
    tins = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, w = ours(*ins, **opts, **{k: dj.tensor(m) for k, m in masks.items()})
    tout, tw = theirs(*tins, **opts, **{k: torch.tensor(m) for k, m in masks.items()})
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-9, atol=1e-11)
    assert (w is None) == (tw is None)
    if w is not None:
        np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-11)
    g = RNG.standard_normal(tuple(tout.shape))
    out.backward(dj.tensor(g))
    tout.backward(torch.tensor(g))
    for a, b in zip(ins, tins):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11)
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-11, err_msg=n)


def test_multihead_attention_without_torch():
    dj.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2)
    assert [n for n, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                      "out_proj.bias"]
    x = dj.tensor(RNG.standard_normal((3, 1, 4)), dtype=dj.float64)
    mha = mha.to(dj.float64)
    out, w = mha(x, x, x)
    np.testing.assert_allclose(w.numpy().sum(-1), 1.0)
    with pytest.raises(SchemaError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(5, 2)
    with pytest.raises(SchemaError, match="Need attn_mask if specifying the is_causal hint"):
        mha(x, x, x, is_causal=True)


# -- losses and dropouts -------------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_torch(reduction):
    x, t, w = RNG.uniform(0.05, 0.95, (4, 3)), RNG.uniform(0, 1, (4, 3)), RNG.uniform(0, 2, (4, 3))
    _both(lambda x, t: F.binary_cross_entropy(x, t, reduction=reduction),
          lambda x, t: TF.binary_cross_entropy(x, t, reduction=reduction), [x, t])
    _both(lambda x: nn.BCELoss(dj.tensor(w), reduction=reduction)(x, dj.tensor(t)),
          lambda x: torch.nn.BCELoss(torch.tensor(w), reduction=reduction)(x, torch.tensor(t)), [x])
    edge, et = np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 1.0])   # log clamped at -100, as PyTorch's
    np.testing.assert_allclose(F.binary_cross_entropy(dj.tensor(edge), dj.tensor(et), reduction="none").numpy(),
                               TF.binary_cross_entropy(torch.tensor(edge), torch.tensor(et), reduction="none").numpy())


def test_binary_cross_entropy_errors_and_gradient():
    with pytest.raises(InvalidArgumentError, match="between 0 and 1"):
        F.binary_cross_entropy(dj.tensor([1.5]), dj.tensor([1.0]))
    with pytest.raises(ShapeError, match="Please ensure they have the same size"):
        F.binary_cross_entropy(dj.tensor([0.5, 0.2]), dj.tensor([1.0]))
    x = dj.tensor([0.2, 0.7, 0.4], dtype=dj.float64, requires_grad=True)
    assert dj.autograd.gradcheck(lambda x: F.binary_cross_entropy(x, dj.tensor([0.0, 1.0, 0.3], dtype=dj.float64)),
                                 (x,))


def test_channel_dropouts_drop_whole_channels():
    dj.manual_seed(1)
    y = F.dropout2d(dj.ones(4, 8, 3, 3), 0.5).numpy()
    per_channel = y.reshape(4, 8, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1)) and set(np.unique(y)) <= {0.0, 2.0}
    assert 0 < np.count_nonzero(per_channel[..., 0]) < 32
    y1 = F.dropout1d(dj.ones(6, 5), 0.5).numpy()        # unbatched (C, L): one draw per channel
    assert np.all(y1.min(-1) == y1.max(-1))
    x = dj.ones(2, 3, 4)
    assert F.dropout1d(x, training=False) is x and nn.Dropout2d().eval()(dj.ones(1, 2, 2, 2)).shape == (1, 2, 2, 2)
    with pytest.raises(ShapeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(dj.ones(1, 2, 3, 4))
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        F.dropout2d(x)
    with pytest.raises(SchemaError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout1d(1.5)


def test_alpha_dropout_keeps_mean_and_variance():
    dj.manual_seed(2)
    x = dj.tensor(np.random.default_rng(0).standard_normal(200_000).astype(np.float32))
    y = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1.0) < 0.03
    # a dropped element is a * (-alpha') + b, one value for all of them
    assert np.isclose(np.bincount(np.unique(y, return_inverse=True)[1]).max() / y.size, 0.2, atol=0.01)
    assert F.alpha_dropout(x, 0.2) is x and nn.AlphaDropout(0.2).eval()(x) is x


# -- modules ---------------------------------------------------------------------------------------------------
@needs_torch
def test_shape_and_softmax_modules_match_torch():
    x = RNG.standard_normal((2, 3, 4))
    for ours, theirs in ((nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(0, 1), torch.nn.Flatten(0, 1)),
                         (nn.Unflatten(2, (2, 2)), torch.nn.Unflatten(2, (2, 2))),
                         (nn.Unflatten(-1, (2, -1)), torch.nn.Unflatten(-1, (2, -1))),
                         (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)), (nn.LogSoftmax(-1), torch.nn.LogSoftmax(-1))):
        assert repr(ours) == repr(theirs)
        _both(ours, theirs, [x])
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = nn.Softmax()(dj.tensor(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(y.numpy(), torch.nn.Softmax()(torch.tensor(x)).numpy(), **TOL)


@needs_torch
@pytest.mark.parametrize("cls,args,kw,shape", [
    ("Conv2d", (4, 6, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 4, 5, 5)),
    ("Conv2d", (4, 6, (2, 3)), {"stride": 2, "groups": 2, "bias": False, "padding_mode": "circular"}, (2, 4, 6, 7)),
    ("Conv2d", (2, 2, 4), {"padding": "same", "dilation": 1, "padding_mode": "replicate"}, (1, 2, 6, 6)),
    ("Conv1d", (3, 5, 3), {"padding": "same", "dilation": 2}, (2, 3, 8)),
    ("Conv1d", (3, 5, 2), {"stride": 2, "padding": 1, "padding_mode": "zeros"}, (3, 8))])
def test_conv_modules_load_torch_weights_and_match(cls, args, kw, shape):
    dj.manual_seed(0)
    ours, theirs = getattr(nn, cls)(*args, **kw).to(dj.float64), getattr(torch.nn, cls)(*args, **kw).double()
    assert list(ours.state_dict()) == list(theirs.state_dict()) and repr(ours) == repr(theirs)
    ours.load_state_dict({k: dj.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal(shape)
    _both(ours, theirs, [x])
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **TOL, err_msg=n)


@needs_torch
def test_pooling_modules_match_torch():
    x = RNG.standard_normal((2, 3, 6, 7))
    for name, args, kw in (("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}), ("AvgPool2d", (2,), {}),
                           ("AvgPool2d", (3, 1, 1), {"count_include_pad": False, "divisor_override": 2}),
                           ("AdaptiveAvgPool2d", ((2, 3),), {})):
        ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
        assert repr(ours) == repr(theirs)
        _both(ours, theirs, [x])
    x1 = RNG.standard_normal((2, 3, 9))
    for name, args in (("MaxPool1d", (3, 2, 1)), ("AvgPool1d", (3, 2, 1))):
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(ours) == repr(theirs)
        _both(ours, theirs, [x1])
    out, idx = nn.MaxPool2d(2, return_indices=True)(dj.tensor(x))
    tout, tidx = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    assert np.array_equal(idx.numpy(), tidx.numpy())


def test_small_cnn_trains_and_compiles_to_eager_bits():
    dj.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Dropout2d(0.0), nn.Flatten(), nn.Linear(4 * 3 * 3, 3))
    x = dj.tensor(RNG.standard_normal((8, 1, 6, 6)).astype(np.float32))
    t = dj.tensor(RNG.integers(0, 3, 8))
    opt = dj.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    model.eval()

    def fn(x):
        return model(x).sum()
    eager = fn(x).numpy()
    assert np.array_equal(dj.compile(fn)(x).numpy(), eager)


NEW_FUNCTIONS = ["conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d",
                 "pad", "batch_norm", "normalize", "scaled_dot_product_attention", "binary_cross_entropy",
                 "dropout1d", "dropout2d", "alpha_dropout"]
NEW_MODULES = ["Flatten", "Unflatten", "Softmax", "LogSoftmax", "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d",
               "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "Dropout1d", "Dropout2d",
               "AlphaDropout", "MultiheadAttention", "BCELoss"]


def _params(fn):
    import inspect
    try:
        sig = inspect.signature(fn)
    except ValueError:       # a builtin without a signature: its docstring's first line
        return None
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]


def _torch_params(fn):
    import inspect
    import re
    got = _params(fn)
    if got is not None and got != [("args", inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty),
                                   ("kwargs", inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty)]:
        return got
    # torch's boolean-dispatch wrappers (max_pool2d, ...) document the signature in the docstring
    lines = [ln.strip() for ln in fn.__doc__.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith(fn.__name__ + "("))
    text = ""
    for ln in lines[start:]:       # the signature may run over several lines: up to its closing parenthesis
        text += " " + ln
        if text.count("(") == text.count(")"):
            break
    src = "def " + re.sub(r"\s*->.*$", "", text.strip()) + ": pass"
    ns = {}
    exec(src, ns)            # noqa: S102 -- a test parsing torch's documented signature
    return _params(ns[fn.__name__])


@needs_torch
@pytest.mark.parametrize("name", NEW_FUNCTIONS)
def test_functional_signatures_are_torchs(name):
    assert _params(getattr(F, name)) == _torch_params(getattr(TF, name))


@needs_torch
@pytest.mark.parametrize("name", NEW_MODULES)
def test_module_constructor_and_forward_signatures_are_torchs(name):
    assert _params(getattr(nn, name).__init__) == _params(getattr(torch.nn, name).__init__)
    ours, theirs = _params(getattr(nn, name).forward), _params(getattr(torch.nn, name).forward)
    assert [p[0] for p in ours] == [p[0] for p in theirs] and [p[2] for p in ours] == [p[2] for p in theirs]
