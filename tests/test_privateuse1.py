"""PrivateUse1: a dispatch key for a backend that is not built in, named with
``dj.utils.rename_privateuse1_backend`` and served by a user's boxed fallback.

The renaming is once per process (as PyTorch's), and the Dask backend claims the
key when first used, so the out-of-tree backend below runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dispatch_jit as dj

ROOT = Path(__file__).resolve().parent.parent

# A toy out-of-tree backend, "mybackend": its tensors keep their data in a NumPy array but carry
# PrivateUse1 in their key set; one boxed fallback serves every op by unwrapping the arguments to
# CPU tensors, redispatching, and wrapping the result back (counting the calls it served).
_BACKEND = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})
    import numpy as np
    import dispatch_jit as dj
    from dispatch_jit.keys import key_bits
    from dispatch_jit.signature import make_sig
    from dispatch_jit.dtypes import from_numpy_dtype
    from dispatch_jit.tensor import Tensor, wrap

    dj.utils.rename_privateuse1_backend("mybackend")
    dj.utils.rename_privateuse1_backend("mybackend")          # the same name again: a no-op
    try:
        dj.utils.rename_privateuse1_backend("other")
    except RuntimeError as e:
        assert "already named 'mybackend'" in str(e), e
    else:
        raise AssertionError("a second rename must fail")

    class MyTensor(Tensor):
        __slots__ = ()
        @property
        def device(self):
            return dj.device("mybackend")

    def my(a):
        t = object.__new__(MyTensor)
        t._data = a
        t._sig = make_sig(key_bits(dj.DispatchKey.PrivateUse1), from_numpy_dtype(a.dtype), a.ndim, True)
        return t

    served = []

    def fallback(op, keyset, args, kwargs):
        served.append(op.__name__)
        unwrap = lambda v: wrap(v._data) if isinstance(v, MyTensor) else v
        out = op(*[unwrap(a) for a in args], **{{k: unwrap(v) for k, v in kwargs.items()}})
        return my(out.numpy()) if isinstance(out, Tensor) else out

    h = dj.Library("_", "IMPL").fallback(fallback, "PrivateUse1")
    x = my(np.array([1.0, 2.0, 3.0], np.float32))
    assert dj.dispatch_keys(x) == dj.DispatchKeySet(dj.DispatchKey.PrivateUse1)
    assert str(x.device) == "mybackend" and dj.device("mybackend:0").type == "mybackend"
    y = dj.exp(x) * 2.0
    assert type(y) is MyTensor, type(y)
    assert served == ["aten::exp", "aten::mul.Tensor"], served
    np.testing.assert_array_equal(y._data, (dj.exp(wrap(x._data)) * 2.0).numpy())    # eager CPU's answer
    assert served == ["aten::exp", "aten::mul.Tensor"], served
    assert "PrivateUse1" in dj.dump_table("aten::exp") and "[backend fallback]" in dj.dump_table("aten::exp")
    try:                                   # mixing devices is refused, naming both
        dj.add(x, wrap(np.ones(3, np.float32)))
    except RuntimeError as e:
        assert "mybackend and cpu" in str(e) or "cpu and mybackend" in str(e), e
    else:
        raise AssertionError("mixed devices must fail")
    h.remove()
    try:                                   # no fallback, no kernel: the error names the op and the key
        dj.exp(x)
    except LookupError as e:
        assert "aten::exp" in str(e) and "PrivateUse1" in str(e), e
    else:
        raise AssertionError("no kernel must fail")
    print("ok")
''')


def test_privateuse1_keys_order():
    K = dj.DispatchKey
    assert K.CPU < K.PrivateUse1 < K.ADInplaceOrView < K.AutogradPrivateUse1 < K.AutocastCPU < K.Tracer
    assert not K.PrivateUse1.is_alias and not K.AutogradPrivateUse1.is_alias


def test_rename_rejects_bad_names():
    for bad in ("Bad-Name", "cuda", 3):
        with pytest.raises(ValueError):
            dj.utils.rename_privateuse1_backend(bad)


def test_out_of_tree_backend_with_a_boxed_fallback():
    r = subprocess.run([sys.executable, "-c", _BACKEND.format(root=str(ROOT))], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
