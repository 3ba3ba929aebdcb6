import pytest

import dispatch_jit as dj
from dispatch_jit.keys import ALIAS_KEYS, RUNTIME_KEYS

K = dj.DispatchKey


def test_declaration_order_is_priority():
    order = [k for k in K if not k.is_alias]
    assert order == sorted(order, key=lambda k: k.value)
    # the runtime priority chain of DESIGN.md, highest first
    chain = [K.Python, K.Tracer, K.AutocastCUDA, K.AutocastCPU, K.AutogradCUDA, K.AutogradCPU, K.AutogradOther,
             K.ADInplaceOrView, K.SparseCsrCUDA, K.SparseCsrCPU, K.SparseCUDA, K.SparseCPU, K.QuantizedCUDA, K.QuantizedCPU, K.CUDA, K.CPU,
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


def test_sparse_cuda_key_keeps_signatures_small_and_sixteen_devices():
    """SparseCUDA sits between SparseCPU and SparseCsrCPU (PyTorch's order), and the key set starts at
    bit 16 of a signature, so a CPU tensor that requires grad still has a one-digit signature (< 2**30)
    for every dtype and ndim; the device index has 4 bits: cuda:15 round-trips, cuda:16 is refused."""
    from dispatch_jit.dtypes import ALL_DTYPES
    from dispatch_jit.errors import CudaUnavailableError
    from dispatch_jit.keys import CUDA_KEY_BITS, key_bits
    from dispatch_jit.signature import decode, make_sig
    assert K.SparseCPU < K.SparseCUDA < K.SparseCsrCPU and K.SparseCUDA > K.QuantizedCUDA
    assert CUDA_KEY_BITS & key_bits(K.SparseCUDA)
    autograd_cpu = key_bits(K.CPU, K.AutogradCPU)
    for dt in ALL_DTYPES:
        assert make_sig(autograd_cpu, dt, 64, True) < 2 ** 30
    assert dj.tensor([1.0], requires_grad=True)._sig < 2 ** 30
    bits = key_bits(K.SparseCUDA, K.AutogradCUDA)
    m = decode(make_sig(bits, dj.float32, 2, True, 15))
    assert (m.device, m.keyset, m.dtype, m.ndim) == ("cuda:15", bits, dj.float32, 2)
    with pytest.raises(CudaUnavailableError, match=r"cuda:16 cannot be used: dispatch_jit addresses at most 16 CUDA "
                                                   r"devices.*CUDA_VISIBLE_DEVICES"):
        make_sig(key_bits(K.CUDA), dj.float32, 1, True, 16)
    if dj.cuda.is_available():
        with pytest.raises(CudaUnavailableError, match="at most 16 CUDA devices"):
            dj.ones(2, device="cuda:16")
