import pytest

import dispatch_jit as dj
from dispatch_jit.keys import ALIAS_KEYS, RUNTIME_KEYS

K = dj.DispatchKey


def test_declaration_order_is_priority():
    order = [k for k in K if not k.is_alias]
    assert order == sorted(order, key=lambda k: k.value)
    # the runtime priority chain of DESIGN.md, highest first
    chain = [K.Python, K.Tracer, K.AutocastCUDA, K.AutocastCPU, K.AutogradCUDA, K.AutogradCPU, K.AutogradOther,
             K.ADInplaceOrView, K.SparseCsrCUDA, K.SparseCsrCPU, K.QuantizedCUDA, K.QuantizedCPU, K.CUDA, K.CPU,
             K.Meta, K.Undefined]
    assert chain == sorted(chain, reverse=True)


def test_alias_keys_are_not_runtime_keys():
    assert set(ALIAS_KEYS) == {K.CompositeImplicitAutograd, K.CompositeExplicitAutograd, K.Autograd}
    assert not set(ALIAS_KEYS) & set(RUNTIME_KEYS)
    with pytest.raises(ValueError, match="alias key"):
        dj.DispatchKeySet(K.Autograd)


def test_keyset_operations():
    ks = dj.DispatchKeySet([K.CPU, K.AutogradCPU])
    assert ks.highest() is K.AutogradCPU
    assert K.CPU in ks and K.CUDA not in ks
    assert (ks - K.AutogradCPU).highest() is K.CPU
    assert (ks | K.Tracer).highest() is K.Tracer
    assert list(ks) == [K.AutogradCPU, K.CPU]
    assert len(ks) == 2 and bool(ks) and not dj.DispatchKeySet()
    assert dj.DispatchKeySet().highest() is K.Undefined
    assert repr(ks) == "DispatchKeySet(AutogradCPU, CPU)"
    assert ks == dj.DispatchKeySet(["CPU", "AutogradCPU"]) and hash(ks) == hash(dj.DispatchKeySet(ks))


def test_parse_rejects_unknown_key():
    with pytest.raises(ValueError, match="unknown dispatch key 'GPU'"):
        K.parse("GPU")


def test_tensor_keyset_computed_at_creation():
    t = dj.tensor([1.0])
    assert dj.dispatch_keys(t) == dj.DispatchKeySet(K.CPU)
    g = dj.tensor([1.0], requires_grad=True)
    assert dj.dispatch_keys(g) == dj.DispatchKeySet([K.CPU, K.AutogradCPU])
    with pytest.raises(TypeError):
        dj.dispatch_keys([1.0])
