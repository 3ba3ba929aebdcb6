"""Batched products of strided views (kernels/linalg/strided.py): attention's ``q @ k.transpose(-2, -1)``
on heads split out of one projection go to gemm in place, in eager mode and in the compiled plan
functions alike, with the bits of the product of contiguous copies."""

import numpy as np

import dispatch_jit as dj
from dispatch_jit.jit import cache
from dispatch_jit.kernels.linalg import strided

B, T, NH, HS = 2, 16, 2, 8      # m*n*k over cpu.py's _SMALL_MNK: BLAS, not the loop nest
C = NH * HS


def _heads(qkv):
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in (q, k, v))   # (B, nh, T, hs), strided
    return q, k, v


def _attention(qkv):
    q, k, v = _heads(qkv)
    att = (q @ k.transpose(-2, -1)).tanh()
    return ((att @ v) * (q @ dj.ones(HS, HS))).sum()


COMPILED = dj.compile(_attention)


def _qkv():
    return np.random.default_rng(1).standard_normal((B, T, 3 * C)).astype(np.float32)


def _bits(x):
    return np.asarray(x).view(np.int32)


def test_strided_heads_multiply_in_place_with_the_copies_bits():
    q, k, v = _heads(dj.from_numpy(_qkv()))
    w = dj.from_numpy(np.random.default_rng(2).standard_normal((B, NH, T, T)).astype(np.float32))
    for a, b in [(q, k.transpose(-2, -1)), (w, v), (q.transpose(-2, -1), w), (q, dj.ones(HS, 16))]:
        an, bn = a.numpy(), b.numpy()
        assert strided.eligible(an) and strided.eligible(bn)
        got = (a @ b).numpy()
        want = (a.contiguous() @ b.contiguous()).numpy()
        np.testing.assert_array_equal(_bits(got), _bits(want))
    assert "batched_gemm_view" in cache.signatures(strided.__name__)     # eager took the strided kernel


def test_compiled_attention_gradients_equal_eager_without_copies():
    x = _qkv()
    grads = []
    for fn in (_attention, COMPILED, COMPILED, COMPILED):
        t = dj.from_numpy(x.copy()).requires_grad_(True)
        loss = fn(t)
        loss.backward()
        grads.append((_bits(loss.detach().numpy()), _bits(t.grad.numpy())))
    for got in grads[1:]:
        np.testing.assert_array_equal(got[0], grads[0][0])
        np.testing.assert_array_equal(got[1], grads[0][1])
    (entry,) = COMPILED._last.fused.values()
    for plan in (entry.forward, entry.backward):
        src = plan.function.source
        gemms = [line for line in src.splitlines() if "_batched_gemm" in line]
        assert any("_batched_gemm_view(" in line for line in gemms), src
        assert not any("ascontiguousarray" in line for line in gemms), gemms     # no copy for a product
