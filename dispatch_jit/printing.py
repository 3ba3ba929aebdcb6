"""Tensor repr in PyTorch's style: ``tensor([1., 2.])``, ``tensor([1, 2], dtype=dj.int32)``."""

from __future__ import annotations

import numpy as np

from .dtypes import float32, int64, bool_, complex64

_DEFAULT_SHOWN = {float32, int64, bool_, complex64}   # dtypes PyTorch leaves implicit


def _float_formatter(a: np.ndarray):
    finite = a[np.isfinite(a)] if a.size else a
    if finite.size == 0:
        return lambda v: _special(v) or f"{v:.4f}"
    amax = float(np.abs(finite).max())
    amin = float(np.abs(finite[finite != 0]).min()) if np.any(finite != 0) else 0.0
    if np.all(finite == np.round(finite)) and amax < 1e8:
        return lambda v: _special(v) or f"{v:.0f}."
    if amax >= 1e8 or (amin != 0 and (amin < 1e-4 or amax / amin > 1e3 and amax > 1e4)):
        return lambda v: _special(v) or f"{v:.4e}"
    return lambda v: _special(v) or f"{v:.4f}"


def _special(v) -> str | None:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def format_data(a: np.ndarray) -> str:
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    kind = a.dtype.kind
    if kind == "f":
        fmt = {"float_kind": _float_formatter(a)}
    elif kind == "c":
        fr, fi = _float_formatter(a.real), _float_formatter(a.imag)
        fmt = {"complex_kind": lambda v: f"{fr(v.real)}{'+' if v.imag >= 0 or np.isnan(v.imag) else '-'}"
                                         f"{fi(abs(v.imag))}j"}
    elif kind == "b":
        fmt = {"bool": lambda v: "True" if v else "False"}
    else:
        fmt = None
    if fmt is not None:
        # pad every element to the widest, as PyTorch does, so columns line up
        (kind_key, f), = fmt.items()
        sample = a.ravel() if a.size <= 1000 else np.concatenate([a.ravel()[:500], a.ravel()[-500:]])
        width = max((len(f(v)) for v in sample), default=0)
        fmt = {kind_key: lambda v, f=f: f(v).rjust(width)}
    s = np.array2string(a, separator=", ", formatter=fmt, threshold=1000, edgeitems=3,
                        max_line_width=80, prefix="tensor(")
    return s


def tensor_repr(t) -> str:
    a = t._data if hasattr(t, "_data") else np.asarray(t)
    host = a if isinstance(a, np.ndarray) else np.asarray(t.numpy())
    extras = []
    if str(t.device) != "cpu":
        extras.append(f"device='{t.device}'")
    if t.dtype not in _DEFAULT_SHOWN or host.size == 0 and t.dtype is not float32:
        extras.append(f"dtype=dj.{t.dtype.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    body = format_data(host)
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
