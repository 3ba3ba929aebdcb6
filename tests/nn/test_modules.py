"""dj.nn modules: registration, walks, train/eval, state_dict, repr, and the layers against PyTorch."""

import math
from collections import OrderedDict

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn
from dispatch_jit.errors import SchemaError, StateDictError

try:
    import torch
except ImportError:
    torch = None


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.drop = nn.Dropout(0.5)
        self.scale = nn.Parameter(dj.ones(3))
        self.register_buffer("steps", dj.zeros(()))
        self.register_buffer("cache", dj.zeros(2), persistent=False)

    def forward(self, x):
        return self.drop(self.norm(self.lin(x))) * self.scale


def test_registration_and_walks():
    m = nn.Sequential(Block(), nn.GELU(), nn.Linear(3, 2, bias=False))
    names = [n for n, _ in m.named_parameters()]
    # PyTorch's order: a module's own members, then its children's, depth first
    assert names == ["0.scale", "0.lin.weight", "0.lin.bias", "0.norm.weight", "0.norm.bias", "2.weight"]
    assert [n for n, _ in m.named_buffers()] == ["0.steps", "0.cache"]
    assert list(m.state_dict()) == ["0.scale", "0.steps"] + names[1:]     # non-persistent buffers left out
    assert [n for n, _ in m.named_modules()] == ["", "0", "0.lin", "0.norm", "0.drop", "1", "2"]
    assert len(list(m.children())) == 3 and len(m) == 3 and isinstance(m[-1], nn.Linear)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    shared = nn.Linear(2, 2)
    twice = nn.Sequential(shared, shared)
    assert len(list(twice.parameters())) == 2          # each parameter once
    m[0].lin.bias = None
    assert "0.lin.bias" not in dict(m.named_parameters())
    with pytest.raises(SchemaError, match="parameter 'weight'"):
        m[0].lin.weight = dj.ones(3, 4)               # a plain tensor where a Parameter lives


def test_train_eval_and_dropout():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.9))
    x = dj.ones(8, 4)
    m.eval()
    assert not m.training and not m[1].training
    assert np.array_equal(m(x).detach().numpy(), m[0](x).detach().numpy())
    m.train()
    assert m[1].training and (m(x).detach().numpy() == 0).mean() > 0.5


def test_state_dict_round_trip_and_strictness():
    dj.manual_seed(1)
    a = Block()
    dj.manual_seed(2)
    b = Block()
    w = b.lin.weight
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b.lin.weight is w and np.array_equal(w.detach().numpy(), a.lin.weight.detach().numpy())
    sd = a.state_dict()
    sd.pop("scale")
    sd["extra"] = dj.ones(1)
    with pytest.raises(StateDictError, match=r'Missing key\(s\) in state_dict: "scale".*\n.*Unexpected key\(s\)'):
        b.load_state_dict(sd)
    res = b.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["scale"] and res.unexpected_keys == ["extra"]
    bad = a.state_dict()
    bad["lin.weight"] = dj.ones(2, 2)
    with pytest.raises(StateDictError, match="size mismatch for lin.weight"):
        b.load_state_dict(bad, strict=False)


def test_zero_grad_and_call_and_repr():
    m = nn.Linear(3, 2)
    m(dj.ones(1, 3)).sum().backward()
    assert m.weight.grad is not None
    m.zero_grad()
    assert m.weight.grad is None
    assert repr(m) == "Linear(in_features=3, out_features=2, bias=True)"
    assert repr(nn.Sequential(OrderedDict(act=nn.ReLU()))) == "Sequential(\n  (act): ReLU()\n)"
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_linear_init_and_embedding():
    dj.manual_seed(0)
    lin = nn.Linear(16, 5)
    bound = 1 / math.sqrt(16)
    assert np.abs(lin.weight.detach().numpy()).max() <= bound and np.abs(lin.bias.detach().numpy()).max() <= bound
    assert np.abs(lin.weight.detach().numpy()).max() > 0.8 * bound
    dj.manual_seed(0)
    again = nn.Linear(16, 5)
    assert np.array_equal(again.weight.detach().numpy(), lin.weight.detach().numpy())
    e = nn.Embedding(10, 3, padding_idx=0)
    assert e.weight.detach().numpy()[0].tolist() == [0.0, 0.0, 0.0]
    assert e(dj.tensor([[1, 2, 0]])).shape == (1, 3, 3)


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_layers_match_torch_with_the_same_weights():
    dj.manual_seed(0)
    ours = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 3), nn.ReLU())
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.LayerNorm(6), torch.nn.GELU(),
                                 torch.nn.Linear(6, 3), torch.nn.ReLU()).double()
    theirs.load_state_dict({k: torch.tensor(v.numpy().astype(np.float64)) for k, v in ours.state_dict().items()})
    ours.load_state_dict({k: dj.tensor(v.numpy().astype(np.float64)) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 4))
    loss_fn, tloss_fn = nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    y = np.array([0, 2, 1, 1, 0])
    xo = dj.tensor(x).to(dj.float32)
    out = ours(xo)
    tout = theirs(torch.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    loss_fn(out, dj.tensor(y)).backward()
    tloss_fn(tout, torch.tensor(y)).backward()
    for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == tn
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=n)


def test_to_and_dtype_casts_keep_parameters_and_optimizers():
    dj.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    m.register_buffer("steps", dj.zeros((), dtype=dj.int64))
    m.register_buffer("scale", dj.ones(2))
    params = list(m.parameters())
    opt = dj.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = dj.tensor(np.random.default_rng(0).standard_normal((5, 3)))
    (m(x.float()) ** 2).sum().backward()
    want = [p.detach().numpy().astype(np.float64) for p in params]
    assert m.double() is m and all(p is q for p, q in zip(m.parameters(), params))
    assert all(p.dtype == dj.float64 and p.grad.dtype == dj.float64 and p.requires_grad for p in params)
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())
    assert m.steps.dtype == dj.int64 and m.scale.dtype == dj.float64       # integer buffers keep theirs
    for p, w in zip(params, want):
        np.testing.assert_array_equal(p.detach().numpy(), w)
    opt.step()                          # the optimizer made before the cast updates the cast parameters
    assert all(p.dtype == dj.float64 for p in params)
    assert not np.array_equal(params[0].detach().numpy(), want[0])
    assert m.to(dj.float32, device="cpu").scale.dtype == dj.float32
    assert m.to(dj.zeros(1, dtype=dj.float64))[0].weight.dtype == dj.float64
    assert m.half()[0].bias.dtype == dj.float16 and m.float()[0].bias.dtype == dj.float32
    assert m.cpu() is m and m.to("cpu")[0].weight is params[0]
    with pytest.raises(SchemaError, match="floating point"):
        m.to(dj.int32)
    with pytest.raises(SchemaError, match="unexpected keyword"):
        m.to(dtype=dj.float64, non_blocking=True)


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")
def test_cuda_and_cpu_move_parameters_their_grads_and_buffers():
    m = nn.Linear(2, 1)
    m.register_buffer("scale", dj.ones(1))
    w = m.weight
    opt = dj.optim.SGD(m.parameters(), lr=0.5)
    (m(dj.ones(3, 2)) ** 2).sum().backward()
    m.cuda()
    assert m.weight is w and w.device.type == "cuda" and w.grad.device.type == "cuda" and w.requires_grad
    assert m.scale.device.type == "cuda"
    before = w.detach().cpu().numpy().copy()
    opt.step()
    np.testing.assert_allclose(w.detach().cpu().numpy(), before - 0.5 * w.grad.cpu().numpy(), rtol=1e-6)
    assert m.to("cpu").weight is w and w.device.type == "cpu" and w.grad.device.type == "cpu"
