"""Tensor repr in PyTorch's style: ``tensor([1., 2.])``, ``tensor([1, 2], dtype=dj.int32)``,
under the options ``set_printoptions`` sets (PyTorch's: precision, threshold, edgeitems,
linewidth, sci_mode, profile)."""

from __future__ import annotations

import math
import sys

import numpy as np

from .dtypes import default_complex_dtype, get_default_dtype, int64, bool_
from .errors import InvalidArgumentError

__all__ = ["set_printoptions", "get_printoptions", "format_data", "tensor_repr"]

# PyTorch's profiles; "default" is where the options start
_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}
_OPTIONS = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """How tensors print, as ``torch.set_printoptions``: digits after the point (``precision``),
    the element count above which the middle is elided (``threshold``) keeping ``edgeitems`` at
    each end, the line width, and ``sci_mode`` (True: always scientific, False: never, None:
    automatic).  ``profile`` ("default", "short", "full") sets the first four first.

    >>> import dispatch_jit as dj
    >>> dj.set_printoptions(precision=2)
    >>> dj.tensor([1.0 / 3])
    tensor([0.33])
    >>> dj.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise InvalidArgumentError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        _OPTIONS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            _OPTIONS[name] = value
    # as PyTorch: sci_mode is set on every call (None restores the automatic choice)
    _OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The current print options (a copy)."""
    return dict(_OPTIONS)


def _float_formatter(a: np.ndarray):
    """PyTorch's _Formatter: integral values print as ``3.``, and scientific notation is chosen
    when the nonzero finite magnitudes span more than 1e3 or exceed 1e8 (or, for non-integral
    values, go below 1e-4), unless ``sci_mode`` says otherwise."""
    p, sci = _OPTIONS["precision"], _OPTIONS["sci_mode"]
    finite = a[np.isfinite(a)] if a.size else a
    nz = np.abs(finite[finite != 0]).astype(np.float64)
    int_mode = bool(np.all(nz == np.ceil(nz)))
    if sci is None and nz.size:
        amax, amin = float(nz.max()), float(nz.min())
        sci = amax / amin > 1000.0 or amax > 1.0e8 or (not int_mode and amin < 1.0e-4)
    if sci:
        return lambda v: _special(v) or f"{v:.{p}e}"
    if int_mode:
        return lambda v: _special(v) or f"{v:.0f}."
    return lambda v: _special(v) or f"{v:.{p}f}"


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
    o = _OPTIONS
    threshold = sys.maxsize if o["threshold"] == math.inf else int(o["threshold"])
    s = np.array2string(a, separator=", ", formatter=fmt, threshold=threshold, edgeitems=o["edgeitems"],
                        max_line_width=o["linewidth"], prefix="tensor(")
    # PyTorch elides inside a row as " ..." (one more space than NumPy's "...")
    return s.replace(", ...,", ",  ...,") if "..." in s else s


def tensor_repr(t) -> str:
    a = t._data if hasattr(t, "_data") else np.asarray(t)
    # _host_values: a bfloat16 tensor's as float32 (it has no NumPy dtype to print)
    if hasattr(t, "_host_values"):
        host = t._host_values()
    else:
        host = a if isinstance(a, np.ndarray) else np.asarray(t.numpy())
    extras = []
    if str(t.device) != "cpu":
        extras.append(f"device='{t.device}'")
    # dtypes PyTorch leaves implicit: the default float and complex, int64 and bool
    implicit = (get_default_dtype(), default_complex_dtype(), int64, bool_)
    if t.dtype not in implicit or host.size == 0 and t.dtype is not implicit[0]:
        extras.append(f"dtype=dj.{t.dtype.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    body = format_data(host)
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
