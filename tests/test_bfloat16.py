"""bfloat16: storage as 16-bit words, conversions, promotion, finfo, printing, the loops' read and
rounding store (bit for bit against known patterns and against PyTorch), and the ops that refuse it."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit import bf16
from dispatch_jit.errors import DTypeError, NoKernelError


def words(t) -> np.ndarray:
    return t._data.view(np.uint16)


def from_words(w) -> dj.Tensor:
    return dj.tensor(bf16.to_float32(bf16.words_to_storage(np.asarray(w, np.uint16))), dtype=dj.bfloat16)


# float32 bit patterns and the bfloat16 word each rounds to, to nearest, ties to even
_ROUNDING = [
    (0x3F800000, 0x3F80),   # 1.0 exactly
    (0x3F808000, 0x3F80),   # tie, even below: stays
    (0x3F818000, 0x3F82),   # tie, odd below: up to even
    (0x3F808001, 0x3F81),   # just above the tie: up
    (0x3F807FFF, 0x3F80),   # just below the tie: down
    (0xBF818000, 0xBF82),   # negative tie
    (0x7F7FFFFF, 0x7F80),   # float32's max rounds to inf
    (0x7F7F7FFF, 0x7F7F),   # bfloat16's max
    (0x00000001, 0x0000),   # the smallest subnormal rounds to zero
    (0x00018000, 0x0002),   # a subnormal tie, odd below: up
    (0x80000000, 0x8000),   # -0.0
    (0x7F800000, 0x7F80),   # inf
    (0xFF800000, 0xFF80),   # -inf
]


def test_rounding_to_nearest_even_known_patterns():
    f = np.array([p for p, _ in _ROUNDING], np.uint32).view(np.float32)
    expect = [w for _, w in _ROUNDING]
    assert words(dj.tensor(f).bfloat16()).tolist() == expect        # to.dtype (bf16.cast)
    assert words(dj.tensor(f).bfloat16() * 1.0).tolist() == expect  # the loop's store (_bf16_store)
    assert words(dj.tensor(f) * dj.tensor([1.0], dtype=dj.bfloat16)).tolist() != expect  # float32 result
    nan = dj.tensor([float("nan"), -float("nan")]).bfloat16()
    assert np.isnan(nan.float().numpy()).all() and words(nan).tolist() == [0x7FC0, 0x7FC0]


def test_array_rounding_equals_the_loops_store_on_random_bits():
    # three writers of one rule: bf16.from_float32 (one njit pass over the bits), the generated
    # loops' _bf16_store (a float32 product stored into a bfloat16 out=) and the rule written
    # out in NumPy; every float32 bit pattern (NaN payloads, subnormals, ties) rounds alike,
    # from a strided view too
    u = np.random.default_rng(7).integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    u[:len(_ROUNDING)] = [p for p, _ in _ROUNDING]
    f = u.view(np.float32)
    rule = ((u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)).astype(np.uint16)
    rule[np.isnan(f)] = 0x7FC0
    by_array = bf16.bits(bf16.from_float32(f))
    by_loop = words(dj.mul(dj.tensor(f), 1.0, out=dj.zeros(f.size, dtype=dj.bfloat16)))
    assert np.array_equal(by_array, rule) and np.array_equal(by_loop, rule)
    assert np.array_equal(bf16.bits(bf16.from_float32(f.reshape(256, 256)[:, ::3])), rule.reshape(256, 256)[:, ::3])
    assert bf16.from_float32(f[:0]).shape == (0,)


def test_every_word_reads_back_exactly():
    w = np.arange(1 << 16, dtype=np.uint16)
    t = bf16.words_to_storage(w)
    f = bf16.to_float32(t)
    assert (f.view(np.uint32) == w.astype(np.uint32) << 16).all()
    x = dj.tensor(f, dtype=dj.bfloat16)
    finite = ~np.isnan(f)
    assert (words(x)[finite] == w[finite]).all()
    y = x * 1.0                                     # the loop widens and rounds back: the identity
    assert (words(y)[finite] == w[finite]).all() and np.isnan(y.float().numpy()[~finite]).all()


def test_dtype_object_promotion_and_finfo():
    b = dj.bfloat16
    assert b.itemsize == 2 and b.is_floating_point and repr(b) == "dispatch_jit.bfloat16"
    assert dj.promote_types(b, dj.float16) is dj.float32 and dj.promote_types(dj.float16, b) is dj.float32
    assert dj.promote_types(b, dj.int64) is b and dj.promote_types(dj.bool, b) is b
    assert dj.promote_types(b, dj.float32) is dj.float32 and dj.promote_types(b, dj.float64) is dj.float64
    assert dj.promote_types(b, dj.complex64) is dj.complex64
    x = dj.tensor([1.0, 2.0], dtype=b)
    assert dj.result_type(x, 2.5) is b and dj.result_type(x, dj.tensor(1.0)) is b
    assert dj.result_type(dj.tensor([1, 2]), dj.tensor(1.0, dtype=b)) is b
    f = dj.finfo(b)
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == \
        (16, 0.0078125, 3.3895313892515355e+38, -3.3895313892515355e+38, 1.1754943508222875e-38,
         1.1754943508222875e-38, 0.01, "bfloat16")
    assert dj.finfo(dj.float32).eps == float(np.finfo(np.float32).eps) and dj.finfo().dtype == "float32"
    assert dj.iinfo(dj.int16).max == 32767
    with pytest.raises(DTypeError, match="floating point"):
        dj.finfo(dj.int32)
    # no NumPy scalar type stands for bfloat16 (its storage's, np.void, must not)
    with pytest.raises(DTypeError, match="not a dtype"):
        dj.tensor([1.0], dtype=np.void)


def test_conversions_and_python_values():
    x = dj.tensor([1.0, 2.5, 1.00390625, -3.3], dtype=dj.bfloat16)
    assert x.dtype is dj.bfloat16 and x.tolist() == [1.0, 2.5, 1.0, -3.296875]
    assert x[1].item() == 2.5 and float(x[3]) == -3.296875 and bool(x[0])
    assert x.float().dtype is dj.float32 and x.float().tolist() == x.tolist()
    assert x.to(dj.float64).tolist() == x.tolist() and x.to(dj.int32).tolist() == [1, 2, 1, -3]
    assert dj.tensor([3, 257], dtype=dj.bfloat16).tolist() == [3.0, 256.0]      # ints: through float32
    assert dj.ones(2, dtype=dj.bfloat16).tolist() == [1.0, 1.0]
    assert dj.full((2,), 3.3, dtype=dj.bfloat16).tolist() == [3.296875, 3.296875]
    assert dj.zeros(3, dtype=dj.bfloat16).tolist() == [0.0, 0.0, 0.0]
    assert dj.tensor(x).dtype is dj.bfloat16 and dj.tensor(x).tolist() == x.tolist()
    stored = bf16.from_float32(np.array([1.5, -2.0], np.float32))     # a bfloat16 storage array: its values
    assert dj.tensor(stored).tolist() == [1.5, -2.0] and dj.tensor(stored, dtype=dj.int64).tolist() == [1, -2]
    assert dj.tensor(x, dtype=dj.float32).tolist() == x.tolist()
    assert dj.asarray(np.array([1.5, 1.00390625]), dtype=dj.bfloat16).tolist() == [1.5, 1.0]
    assert dj.cat([x, dj.tensor([0.5])]).dtype is dj.float32
    assert dj.cat([x, x]).tolist() == x.tolist() * 2 and dj.stack([x, x]).dtype is dj.bfloat16
    assert x.reshape(2, 2).T.tolist() == [[1.0, 1.0], [2.5, -3.296875]]
    # NumPy has no bfloat16: .numpy() refuses, as torch's "Got unsupported ScalarType BFloat16"
    with pytest.raises(TypeError, match="unsupported ScalarType BFloat16"):
        x.numpy()
    with pytest.raises(TypeError, match="unsupported ScalarType BFloat16"):
        np.asarray(x)


def test_printing():
    x = dj.tensor([1.0, 2.5, 1.00390625, float("nan"), 3.3], dtype=dj.bfloat16)
    assert repr(x) == "tensor([1.0000, 2.5000, 1.0000,    nan, 3.2969], dtype=dj.bfloat16)"
    assert repr(dj.tensor([[1.0, 2.0]], dtype=dj.bfloat16)) == "tensor([[1., 2.]], dtype=dj.bfloat16)"


def test_elementwise_loops_read_and_round():
    a = from_words([0x3F80, 0x3F81, 0x4000, 0x7F80, 0x0001])     # 1, 1+2**-7, 2, inf, a subnormal
    b = from_words([0x3B80, 0x3B80, 0x3F80, 0x3F80, 0x0001])     # 2**-8 (half an ulp of 1), ..., 1, 1
    s = a + b
    assert s.dtype is dj.bfloat16
    # 1 + 2**-8: a tie, rounds to even 1.0; (1 + 2**-7) + 2**-8: a tie, odd below, rounds up to 1 + 2**-6
    assert words(s).tolist() == [0x3F80, 0x3F82, 0x4040, 0x7F80, 0x0002]
    assert (a * 2).dtype is dj.bfloat16 and (a + dj.tensor([1.0])).dtype is dj.float32
    assert (a > b).dtype is dj.bool and (a + 1).dtype is dj.bfloat16
    # strided and broadcast operands, in place and out=
    m = from_words(np.arange(0x3F80, 0x3F80 + 6)).reshape(2, 3)
    assert (m.T + m.T).tolist() == (m.float().T * 2).tolist()
    y = m.clone()
    y.mul_(dj.tensor([2.0], dtype=dj.bfloat16))
    assert y.dtype is dj.bfloat16 and y.tolist() == (m.float() * 2).tolist()
    out = dj.empty((2, 3), dtype=dj.bfloat16)
    dj.add(m, 1.0, out=out)
    assert words(out).tolist() == words((m.float() + 1.0).bfloat16()).tolist()


def test_ops_without_a_bfloat16_kernel_refuse_it_clearly():
    x = dj.tensor([1.0, 2.0], dtype=dj.bfloat16)
    with pytest.raises(DTypeError, match="nextafter.. does not support bfloat16"):
        dj.nextafter(x, x)
    assert "aten::add" in bf16.supported_ops("CPU") and "aten::matmul" not in bf16.supported_ops("CUDA")
    refused = [n for n in ("aten::cumsum", "aten::sort", "aten::argmax") if n not in bf16.supported_ops()]
    assert refused, "every op takes bfloat16 now: choose an op that refuses it"
    name = refused[0].split("::")[1]
    with pytest.raises(NoKernelError, match=rf"'aten::{name}[.\w]*' has no bfloat16 kernel on CPU.*\.float\(\)"):
        getattr(dj, name)(x, 0)


def test_elementwise_bit_for_bit_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    # random values, every exponent, and words whose float32 neighbours are exact ties
    f = np.concatenate([rng.standard_normal(3000).astype(np.float32) * np.float32(100),
                        bf16.to_float32(bf16.words_to_storage(rng.integers(0, 1 << 16, 3000, dtype=np.uint16))),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40], np.float32)])
    g = np.roll(f, 7)
    a, b = dj.tensor(f).bfloat16(), dj.tensor(g).bfloat16()
    ta, tb = torch.from_numpy(f).bfloat16(), torch.from_numpy(g).bfloat16()

    def check(r, t):
        assert r.dtype is dj.bfloat16 and t.dtype == torch.bfloat16
        tw = t.view(torch.int16).numpy().view(np.uint16)
        nan = np.isnan(t.float().numpy())
        assert (np.isnan(r.float().numpy()) == nan).all()           # torch's NaN words differ by path
        assert (words(r)[~nan] == tw[~nan]).all()

    check(a.float().bfloat16(), ta.float().bfloat16())
    check(dj.tensor(f.astype(np.float64)).bfloat16(), torch.from_numpy(f.astype(np.float64)).bfloat16())
    for name in ("add", "sub", "mul", "div", "maximum", "atan2"):
        check(getattr(dj, name)(a, b), getattr(torch, name)(ta, tb))
    # (not sigmoid: below -88 its float32 loop keeps subnormals that torch flushes, in float32 too)
    for name in ("neg", "abs", "exp", "log", "sqrt", "sin", "tanh", "floor"):
        check(getattr(dj, name)(a), getattr(torch, name)(ta))
    check(a * 0.3, ta * 0.3)
    check(a + 3, ta + 3)


def test_reductions_accumulate_in_float32_and_round_once():
    # 1 + 256 * 2**-9: bfloat16 accumulation would stay at 1.0; float32's gives 1.5, exact in bfloat16
    x = dj.tensor([1.0] + [2.0 ** -9] * 256, dtype=dj.bfloat16)
    s = x.sum()
    assert s.dtype is dj.bfloat16 and s.shape == () and s.item() == 1.5
    assert x.mean().dtype is dj.bfloat16 and x.amax().item() == 1.0 and x.argmax().item() == 0
    assert x.sum(dtype=dj.float32).dtype is dj.float32 and x.float().sum(dtype=dj.bfloat16).item() == 1.5
    m = dj.tensor([[1.0, 3.0], [2.0, 5.0]], dtype=dj.bfloat16)
    assert m.sum(0).tolist() == [3.0, 8.0] and m.amin(1).dtype is dj.bfloat16 and bool(m.any())


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "argmin", "var", "logsumexp", "any"])
def test_reductions_read_the_words_and_equal_float32_rounded_once(name):
    from dispatch_jit.kernels.reduction.cpu import compiled_signatures
    g = np.random.default_rng(11)
    x = dj.tensor(g.standard_normal((40, 30)).astype(np.float32)).bfloat16()
    x[3, 4] = float("inf") if name == "amax" else 0.0
    for v in (x, x.t(), x[::2, 1:]):              # contiguous, transposed, strided: no float32 copy
        for kw in ({"dim": 1}, {"dim": 0, "keepdim": True}, {} if name != "logsumexp" else {"dim": (0, 1)}):
            got, want = getattr(dj, name)(v, **kw), getattr(dj, name)(v.float(), **kw)
            want = want.bfloat16() if want.dtype is dj.float32 else want
            assert got.dtype is want.dtype and got.shape == want.shape
            assert got._data.tobytes() == want._data.tobytes(), (name, kw)
    kernel = {"mean": "sum", "amax": "max", "argmin": "argmin", "var": "var", "any": "any"}.get(name, name)
    assert any(k.startswith("bfloat16") for k in compiled_signatures()[kernel]), compiled_signatures()[kernel]


def test_a_full_reductions_result_rounds_as_arrays_do():
    # the 0-d result of a full reduction is rounded by a scalar path: every word's neighbours, ties included
    w = np.arange(0, 1 << 16, 97, dtype=np.uint32)
    for low in (0, 0x7FFF, 0x8000, 0x8001):
        f = ((w << 16) | low).view(np.float32)
        want = bf16.from_float32(f).view(np.uint16)
        got = [int(bf16.from_float32(v).view(np.uint16)) for v in f]   # 0-d float32 each
        assert got == want.tolist()


def test_reductions_and_matmul_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    f, g = rng.standard_normal((40, 33)).astype(np.float32), rng.standard_normal((33, 7)).astype(np.float32)
    a, b = dj.tensor(f).bfloat16(), dj.tensor(g).bfloat16()
    ta, tb = torch.from_numpy(f).bfloat16(), torch.from_numpy(g).bfloat16()
    tw = lambda t: t.view(torch.int16).numpy().view(np.uint16)    # noqa: E731
    for name in ("sum", "mean", "amax", "amin", "var"):
        assert (words(getattr(a, name)(1)) == tw(getattr(ta, name)(1))).all(), name
        assert words(getattr(a, name)()).tolist() == tw(getattr(ta, name)()).tolist(), name
    # matmul: float32 products and sums (BLAS), one rounding; torch's CPU kernel gives the same bits here
    r = a @ b
    assert r.dtype is dj.bfloat16 and (words(r) == tw(ta @ tb)).all()
    assert (words(r) == tw((ta.float() @ tb.float()).bfloat16())).all()
    assert (a @ dj.tensor(g)).dtype is dj.float32


def test_autograd_through_bfloat16_matches_torch():
    torch = pytest.importorskip("torch")
    f = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    for fn in (lambda x, m: (x * x).sum(), lambda x, m: m.exp(x).mean(),
               lambda x, m: (m.tanh(x) * 3 + x / 2).sum(1).sum(), lambda x, m: (x.T * x[0:1].T).sum(),
               lambda x, m: (x @ x.T).sum()):
        x = dj.tensor(f).bfloat16().requires_grad_()
        tx = torch.from_numpy(f).bfloat16().requires_grad_()
        fn(x, dj).backward()
        fn(tx, torch).backward()
        assert x.grad.dtype is dj.bfloat16
        assert (words(x.grad) == tx.grad.view(torch.int16).numpy().view(np.uint16)).all()


def test_save_load_and_pickle_keep_the_words():
    import io
    import pickle
    x = from_words([0x3F80, 0x4020, 0xC053, 0x7F80]).reshape(2, 2)
    buf = io.BytesIO()
    dj.save({"x": x, "col": x[:, 1]}, buf)
    buf.seek(0)
    d = dj.load(buf)
    assert d["x"].dtype is dj.bfloat16 and words(d["x"]).tolist() == words(x).tolist()
    assert words(d["col"]).tolist() == [0x4020, 0x7F80]
    assert words(pickle.loads(pickle.dumps(x))).tolist() == words(x).tolist()


def test_dlpack_in_and_out_as_kdlbfloat():
    torch = pytest.importorskip("torch")
    x = from_words([0x3F80, 0x4020, 0xC053])
    t = torch.from_dlpack(x)
    assert t.dtype == torch.bfloat16 and t.tolist() == x.tolist()
    t[0] = 7.0                                                  # one buffer
    assert x[0].item() == 7.0
    tt = torch.tensor([1.5, -2.25, 3.3], dtype=torch.bfloat16)
    y = dj.from_dlpack(tt)
    assert y.dtype is dj.bfloat16 and y.tolist() == tt.tolist()
    tt[1] = 9.0
    assert y[1].item() == 9.0
    assert dj.from_dlpack(tt.view(torch.int16)).dtype is dj.int16


def test_compiled_mode_equals_eager_bit_for_bit():
    f = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    a, b = dj.tensor(f).bfloat16(), dj.tensor(f[::-1].copy()).bfloat16()

    def chain(x, y):
        return (dj.maximum((x * y + 0.3) * 2.0 - x, 0.0) * dj.exp(-y)).sum(1)
    eager = chain(a, b)
    compiled = dj.compile(chain)(a, b)
    assert compiled.dtype is dj.bfloat16 and words(compiled).tolist() == words(eager).tolist()


def test_factories_fills_and_masks_round_values_not_words():
    # NumPy's casts would store the integer 1 as the word 0x0001 (a subnormal): each path converts values
    x = dj.tensor([0.5, -2.0, 3.0], dtype=dj.bfloat16)
    assert dj.arange(3, dtype=dj.bfloat16).tolist() == [0.0, 1.0, 2.0]
    assert dj.arange(0, 0.3, 0.1, dtype=dj.bfloat16).tolist() == [0.0, 0.10009765625, 0.2001953125]
    assert dj.linspace(0, 1, 5, dtype=dj.bfloat16).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert dj.eye(2, dtype=dj.bfloat16).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    r = dj.randn(1000, dtype=dj.bfloat16, generator=dj.Generator(0))
    assert r.dtype is dj.bfloat16 and 0.8 < r.float().std().item() < 1.2
    assert 0.3 < dj.rand(1000, dtype=dj.bfloat16).float().mean().item() < 0.7
    assert set(dj.randint(0, 3, (100,), dtype=dj.bfloat16).tolist()) <= {0.0, 1.0, 2.0}
    assert x.clone().fill_(1.3).tolist() == [1.296875] * 3
    assert x.masked_fill(x > 0, 1.3).tolist() == [1.296875, -2.0, 1.296875]
    y = x.clone()
    y[1] = 1.3
    y[2] = dj.tensor(7.0)
    assert y.tolist() == [0.5, 1.296875, 7.0]
    z = dj.zeros(3)
    z[0:2] = x[1:]
    assert z.tolist() == [-2.0, 3.0, 0.0]
    n = dj.zeros(1000, dtype=dj.bfloat16).normal_(generator=dj.Generator(1))
    assert 0.8 < n.float().std().item() < 1.2
    assert 0.3 < dj.zeros(1000, dtype=dj.bfloat16).uniform_().float().mean().item() < 0.7
    d = dj.nn.functional.dropout(dj.ones(1000, dtype=dj.bfloat16), 0.5)
    assert set(d.tolist()) <= {0.0, 2.0} and 0 < d.float().sum().item() < 2000


def test_nn_softmax_and_linear_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    f, wf, bf = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 40), (5, 40), (5,)))
    tw = lambda t: t.detach().view(torch.int16).numpy().view(np.uint16)    # noqa: E731
    x, w, b = (dj.tensor(a).bfloat16().requires_grad_() for a in (f, wf, bf))
    tx, tw_, tb = (torch.from_numpy(a).bfloat16().requires_grad_() for a in (f, wf, bf))
    s = dj.softmax(x, -1)
    assert s.dtype is dj.bfloat16 and (words(s) == tw(torch.softmax(tx, -1))).all()
    y = dj.nn.functional.linear(x, w, b)         # float32 products, sums and bias; one rounding (addmm)
    ty = torch.nn.functional.linear(tx, tw_, tb)
    assert (words(y) == tw(ty)).all()
    (y.sum() + (s * s).sum()).backward()
    (ty.sum() + (torch.softmax(tx, -1) ** 2).sum()).backward()
    for g, tg in ((x.grad, tx.grad), (w.grad, tw_.grad), (b.grad, tb.grad)):
        assert g.dtype is dj.bfloat16 and (words(g) == tw(tg)).all()


# (not SGD: its per-tensor update is mul then sub, two roundings, where torch's add_(alpha=-lr) rounds once)
@pytest.mark.parametrize("name,kw", [("Adam", {"lr": 0.01}), ("AdamW", {"lr": 0.01, "weight_decay": 0.1})])
def test_optimizer_steps_on_bfloat16_parameters_match_torch(name, kw):
    torch = pytest.importorskip("torch")
    p = dj.tensor([1.0, 2.0, -3.0, 0.1]).bfloat16().requires_grad_()
    tp = torch.tensor([1.0, 2.0, -3.0, 0.1]).bfloat16().requires_grad_()
    opt, topt = getattr(dj.optim, name)([p], **kw), getattr(torch.optim, name)([tp], **kw)
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        (p * p * p).sum().backward()
        (tp * tp * tp).sum().backward()
        opt.step()
        topt.step()
    assert p.dtype is dj.bfloat16
    assert words(p).tolist() == tp.detach().view(torch.int16).numpy().view(np.uint16).tolist()


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")
def test_cuda_keeps_the_words_and_its_other_kernels_refuse_bfloat16():
    x = from_words([0x3F80, 0x4020])
    y = x.to("cuda")
    assert y.dtype is dj.bfloat16 and words(y.cpu()).tolist() == [0x3F80, 0x4020]
    with pytest.raises(NoKernelError, match=r"no bfloat16 kernel on CUDA.*\.cpu\(\)"):
        dj.matmul(y, y)
    assert "aten::add" in bf16.supported_ops("CUDA") and "aten::matmul" not in bf16.supported_ops("CUDA")


@pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device or simulator")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the simulator computes with NumPy scalars
def test_cuda_elementwise_kernels_read_and_round_the_words_as_the_cpu():
    # edge words (ties, subnormals, inf, NaN, the largest finite) through a few ops: the CPU loop's bits
    w = [0x0000, 0x8001, 0x007F, 0x3F80, 0x3F81, 0xBFFF, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0xC2F7]
    x, y = from_words(w), from_words(w[::-1])
    xc, yc = x.cuda(), y.cuda()
    for f in (lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a / b, lambda a, b: a * 3.1 - 1.0,
              lambda a, b: dj.maximum(a, b), lambda a, b: a < b):
        got, want = f(xc, yc).cpu(), f(x, y)
        assert got.dtype is want.dtype and got._data.tobytes() == want._data.tobytes()
    got, want = (xc + y.float().cuda()).cpu(), x + y.float()       # promoted to float32
    assert got.dtype is dj.float32 and got._data.tobytes() == want._data.tobytes()
    xs = xc[::2]                                  # strided, and in place
    xs.mul_(2.0)
    assert words(xc.cpu()).tolist()[1::2] == w[1::2] and words(xs.cpu()).tolist() == words(x[::2] * 2.0).tolist()


def test_compiled_chain_is_one_fused_loop_over_views_and_mixed_dtypes():
    # a transposed bfloat16 view, a broadcast row, an int32 operand (bfloat16 + int -> bfloat16) and a
    # float32 one (-> float32): one loop, each node rounded where eager stores it, eager's bits
    g = np.random.default_rng(5)
    a = dj.tensor(g.standard_normal((6, 4)).astype(np.float32)).bfloat16().t()
    b = dj.tensor(g.standard_normal(6).astype(np.float32)).bfloat16()
    k = dj.tensor(g.integers(-3, 4, (4, 6)).astype(np.int32))
    w = dj.tensor(g.standard_normal((4, 6)).astype(np.float32))

    def chain(x, y, i, f):
        h = dj.exp(x * y + i) - 0.25
        return h * 3.0, h / f
    f = dj.compile(chain)
    for got, want in zip(f(a, b, k, w), chain(a, b, k, w)):
        assert got.dtype is want.dtype and got._data.dtype == want._data.dtype
        assert got._data.view(np.uint8).tolist() == want._data.view(np.uint8).tolist()
    assert "compiled plan: 1 fused loop(s), 0 eager step(s)" in f.explain(), f.explain()


@pytest.mark.parametrize("parallel", [False, True])
def test_compiled_chain_ending_in_a_reduction_is_one_loop_with_eagers_bits(parallel, monkeypatch):
    # full (in the eager kernel's chunks when threads are forced: 2**20 elements), rows and columns
    from dispatch_jit.kernels.support.loops import parallel as par
    monkeypatch.setattr(par, "PARALLEL", parallel)
    g = np.random.default_rng(9)
    shape = (1024, 1024) if parallel else (6, 50)
    a = dj.tensor(g.standard_normal(shape).astype(np.float32)).bfloat16()
    b = dj.tensor(g.standard_normal(shape[1]).astype(np.float32)).bfloat16()
    chains = [lambda x, y: (x * y + 1.0).sum()] if parallel else [
        lambda x, y: (x * y + 1.0).sum(), lambda x, y: dj.exp(x - y).mean(1), lambda x, y: (x * y).sum(0),
        lambda x, y: (x + y).amax(1, keepdim=True), lambda x, y: dj.maximum(x, y * 2.0).amin(0)]
    for chain in chains:
        f = dj.compile(chain)
        got, want = f(a, b), chain(a, b)
        assert got.dtype is want.dtype and got.shape == want.shape and got._data.tobytes() == want._data.tobytes()
        assert "compiled plan: 1 fused loop(s), 0 eager step(s)" in f.explain(), f.explain()
