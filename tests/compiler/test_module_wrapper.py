"""dj.compile(module) -> OptimizedModule (dispatch_jit/compiler/module_wrapper.py), as torch.compile(module):
parameters/named_parameters/state_dict under ``_orig_mod.``, train()/eval() reaching the original,
attribute reads and writes forwarded, the call compiled, training through it equal to eager."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.module_wrapper import OptimizedModule


def _net():
    dj.manual_seed(0)
    return dj.nn.Sequential(dj.nn.Linear(3, 4), dj.nn.ReLU(), dj.nn.Dropout(0.5), dj.nn.Linear(4, 2))


def test_wrapper_forwards_the_module_api():
    net = _net()
    model = dj.compile(net)
    assert isinstance(model, OptimizedModule) and isinstance(model, dj.nn.Module)
    assert model._orig_mod is net
    assert [p is q for p, q in zip(model.parameters(), net.parameters())] == [True] * 4
    assert [n for n, _ in model.named_parameters()] == ["_orig_mod." + n for n, _ in net.named_parameters()]
    assert list(model.state_dict()) == ["_orig_mod." + k for k in net.state_dict()]
    assert model.eval() is model and not net.training and not net[2].training and not model.training
    model.train()
    assert net.training and net[2].training
    model.flag = 3                       # attribute writes and reads go to the original, as PyTorch's
    assert net.flag == 3 and model.flag == 3
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        model.nope
    assert "_orig_mod" in repr(model)


def test_function_compile_unchanged():
    f = dj.compile(lambda x: x * 2)
    assert type(f).__name__ == "CompiledFunction"
    assert type(dj.compile()(dj.nn.Identity())).__name__ == "OptimizedModule"


def test_call_is_compiled_and_follows_eval():
    net = _net()
    model = dj.compile(net)
    x = dj.tensor(np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32))
    model.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), net(x).detach().numpy())
    assert model.cache_info().calls == 1
    model.train()                        # dropout on: a new trace, outputs change from call to call
    a, b = model(x), model(x)
    assert not np.array_equal(a.detach().numpy(), b.detach().numpy())
    model.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), net(x).detach().numpy())


def test_training_through_the_wrapper_equals_eager():
    rng = np.random.default_rng(1)
    x = dj.tensor(rng.standard_normal((8, 3)).astype(np.float32))
    y = dj.tensor(rng.integers(0, 2, 8))
    results = []
    for compiled in (False, True):
        net = _net()
        net[2].p = 0.0
        model = dj.compile(net) if compiled else net
        opt = dj.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            dj.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        results.append([p.detach().numpy().copy() for p in net.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_load_state_dict_round_trip():
    model = dj.compile(_net())
    other = dj.compile(dj.nn.Sequential(dj.nn.Linear(3, 4), dj.nn.ReLU(), dj.nn.Dropout(0.5), dj.nn.Linear(4, 2)))
    other.load_state_dict(model.state_dict())
    for p, q in zip(model.parameters(), other.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_against_torch_names():
    torch = pytest.importorskip("torch")
    tm = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                                           torch.nn.Linear(4, 2)))
    assert list(dj.compile(_net()).state_dict()) == list(tm.state_dict())
