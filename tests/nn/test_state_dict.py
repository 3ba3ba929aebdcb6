"""Module.state_dict / load_state_dict (dispatch_jit/nn/module.py) against PyTorch's: a module used
twice, assign=True, and a tied model through dj.save / dj.load."""

import io

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import nn

torch = pytest.importorskip("torch")


def _tied(lib):
    lib.manual_seed(0)
    lin = lib.nn.Linear(2, 2)
    return lib.nn.Sequential(lin, lib.nn.ReLU(), lin)


def test_a_module_used_twice_lists_each_path_as_torch():
    ours, theirs = _tied(dj), _tied(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 2
    assert list(ours.state_dict(prefix="m.")) == list(theirs.state_dict(prefix="m."))
    # a PyTorch checkpoint of the tied model loads strictly, into the one shared Linear
    sd = {k: dj.tensor(v.numpy()) for k, v in theirs.state_dict().items()}
    assert ours.load_state_dict(sd) == ([], [])
    np.testing.assert_array_equal(ours[0].weight.detach().numpy(), theirs[0].weight.detach().numpy())


def test_a_tied_model_saved_and_loaded_keeps_one_storage_per_tensor():
    m = _tied(dj)
    buf = io.BytesIO()
    dj.save(m.state_dict(), buf)
    buf.seek(0)
    sd = dj.load(buf)
    assert np.shares_memory(sd["0.weight"].numpy(), sd["2.weight"].numpy())      # as torch.load gives them
    fresh = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
    assert fresh.load_state_dict(sd) == ([], [])


def _counter(lib):
    """The same module in both libraries: a parameter that does not require grad, and a buffer."""
    m = lib.nn.Linear(2, 1)
    m.bias.requires_grad_(False)
    m.register_buffer("count", lib.zeros(()))
    return m


def _assign(lib):
    m = _counter(lib)
    sd = {"weight": lib.ones(1, 2, dtype=lib.float64), "bias": lib.nn.Parameter(lib.zeros(1)),
          "count": lib.tensor(7.0)}
    m.load_state_dict(sd, assign=True)
    sd["weight"].add_(1.0)       # the module's weight is a view of the given tensor's storage
    return [isinstance(m.weight, lib.nn.Parameter), repr(m.weight.dtype).split(".")[-1], m.weight.requires_grad,
            m.weight is sd["weight"], m.weight.tolist(),
            m.bias is sd["bias"], m.bias.requires_grad, sd["bias"].requires_grad, m.count is sd["count"]]


def test_assign_true_takes_the_given_tensors_as_torch():
    ours, theirs = _assign(dj), _assign(torch)
    assert ours == theirs == [True, "float64", True, False, [[2.0, 2.0]], True, False, False, True]


def test_assign_false_copies_in_place_and_keeps_the_parameter():
    m = _counter(dj)
    w = m.weight
    m.load_state_dict({"weight": dj.ones(1, 2, dtype=dj.float64), "bias": dj.zeros(1), "count": dj.tensor(7.0)})
    assert m.weight is w and m.weight.dtype == dj.float32 and m.count.item() == 7.0


def test_load_state_dict_wants_a_mapping():
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got list"):
        nn.Linear(2, 1).load_state_dict([("weight", dj.ones(1, 2))])
