"""dj.nn.ModuleList and dj.nn.ModuleDict (nn/containers.py): registration, indexing and
mutation as PyTorch's, checked against torch where it is installed."""

from __future__ import annotations

import pytest

import dispatch_jit as dj
from dispatch_jit import nn


class Stack(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.h = nn.ModuleList([nn.Linear(2, 2) for _ in range(n)])
        self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})

    def forward(self, x):
        for layer in self.h:
            x = layer(x)
        return self.heads["a"](x)


def test_children_are_registered():
    m = Stack(3)
    names = [n for n, _ in m.named_parameters()]
    assert names == ["h.0.weight", "h.0.bias", "h.1.weight", "h.1.bias", "h.2.weight", "h.2.bias",
                     "heads.a.weight", "heads.a.bias", "heads.b.weight", "heads.b.bias"]
    assert list(m.state_dict()) == names
    m.eval()
    assert not m.h[1].training and not m.heads["b"].training
    assert m(dj.ones(4, 2)).shape == (4, 1)


def test_module_list_indexing_and_mutation():
    a, b, c, d = (nn.Linear(1, 1) for _ in range(4))
    ml = nn.ModuleList([a, b])
    ml.append(c)
    assert len(ml) == 3 and ml[-1] is c and ml[0] is a and list(ml) == [a, b, c]
    sl = ml[1:]
    assert isinstance(sl, nn.ModuleList) and list(sl) == [b, c]
    ml[1] = d
    assert list(ml) == [a, d, c]
    del ml[0]
    assert list(ml) == [d, c] and list(ml._modules) == ["0", "1"]     # renumbered, as torch's
    ml.insert(1, b)
    assert list(ml) == [d, b, c] and list(ml._modules) == ["0", "1", "2"]
    ml += [a]
    ml.extend(nn.ModuleList([nn.Tanh()]))
    assert len(ml) == 5 and len(ml + [a]) == 6
    with pytest.raises(IndexError, match="out of range"):
        ml[5]
    with pytest.raises(TypeError, match="iterable"):
        ml.extend(3)
    assert repr(nn.ModuleList()) == "ModuleList()"


def test_module_dict_mapping():
    md = nn.ModuleDict([("x", nn.Tanh()), ("y", nn.ReLU())])
    md.update({"z": nn.Identity()})
    assert list(md) == ["x", "y", "z"] and list(md.keys()) == ["x", "y", "z"] and "y" in md
    md["x"] = nn.Sigmoid()                 # a key already held keeps its place
    assert list(md) == ["x", "y", "z"] and isinstance(md["x"], nn.Sigmoid)
    assert isinstance(md.pop("y"), nn.ReLU) and "y" not in md and len(md) == 2
    del md["x"]
    assert [k for k, _ in md.items()] == ["z"]
    with pytest.raises(KeyError):
        md["missing"]
    with pytest.raises(TypeError, match="pair"):
        md.update([nn.Tanh()])
    md.clear()
    assert len(md) == 0


def test_same_structure_as_torch():
    torch = pytest.importorskip("torch")

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = lib.nn.ModuleList([lib.nn.Linear(3, 3), lib.nn.LayerNorm(3)])
                self.blocks.insert(1, lib.nn.Linear(3, 3))
                del self.blocks[0]
                self.d = lib.nn.ModuleDict({"out": lib.nn.Linear(3, 2)})
        return Net()

    ours, theirs = build(dj), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [tuple(v.shape) for v in ours.state_dict().values()] == \
        [tuple(v.shape) for v in theirs.state_dict().values()]
