"""The view ops' shape rules: the one place their output shape and their argument
checks are written.

Each rule takes the input's shape and the op's static arguments and returns the
output's shape, or raises eager mode's ``ShapeError``.  A size in the input
shape may be ``None``, unknown: ``dj.compile`` traces without sizes (they are
not part of its cache key), so its tracer asks with every size unknown and
reads the output's rank; the global compiled mode asks with the real shape
before it records a view of a pending value; the eager CPU and CUDA kernels
ask before they make the NumPy view (cpu.py, cuda.py).  Unknown sizes
propagate (``flatten`` of an unknown size is unknown); a check that needs a
size it does not have is left to the eager kernel's call, which knows it.
Where not even the output's rank is known without the sizes (``squeeze``
drops the size-1 dims), the rule raises ``SizeDependentError``.

The registration loop (kernels/__init__.py) installs them as the ops'
``shape_fn`` in the registry, where the compiler finds them.

>>> RULES["permute"]((2, None, 4), (2, 0, 1))
(4, 2, None)
>>> RULES["reshape"]((6, 4), (3, -1))
(3, 8)
>>> RULES["reshape"]((None, 4), (3, -1))
(3, None)
>>> RULES["flatten"]((2, 3, 4), 1, -1)
(2, 12)
"""

from __future__ import annotations

import math

from dispatch_jit.errors import ShapeError, SizeDependentError
from dispatch_jit.registry import Tag

__all__ = ["RULES", "TAGS", "getitem", "normalize_axis", "normalize_axes"]


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    n = max(ndim, 1)     # a 0-d tensor takes axis 0 and -1, as PyTorch's
    if not -n <= axis < n:
        raise ShapeError(f"{op}: axis {axis} is out of range for a tensor of {ndim} dimensions "
                         f"(expected in [{-n}, {n - 1}])")
    return axis % n


# An empty axis list (dim=()) is not one rule in PyTorch: sum, mean, amax, var... reduce over every
# dim; all and any (and squeeze) over none (NumPy's reading); prod and logsumexp refuse it.
_EMPTY_AXES = {"sum": "all", "mean": "all", "max": "all", "min": "all", "var": "all", "std": "all",
               "prod": "error", "logsumexp": "error"}


def normalize_axes(axis, ndim: int, op: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not axes and op in _EMPTY_AXES:
        if _EMPTY_AXES[op] == "error":
            raise ShapeError(f"{op}: axis=() (an empty dim list) is refused, as PyTorch; pass axis=None to "
                             f"reduce over every dimension")
        return tuple(range(ndim))
    out = tuple(normalize_axis(a, ndim, op) for a in axes)
    if ndim == 0:
        return ()      # a 0-d tensor accepts axis 0 / -1 and has nothing to reduce
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: axis {tuple(axes)} repeats a dimension")
    return out


def _numel(s: tuple):
    return None if None in s else math.prod(s)


def _reshaped(op: str, s: tuple, shape) -> tuple:
    """reshape's and view's rule, PyTorch's, stricter than NumPy's: -1 (inferred) at most once,
    no other negative size (NumPy reads any negative as -1, so reshape(-2, 3) would work)."""
    shape = tuple(shape)
    for i, n in enumerate(shape):
        if n < -1:
            raise ShapeError(f"{op}: invalid shape dimension {n} at index {i} of shape {list(shape)}; sizes are "
                             f">= 0, or -1 (once) for the one to infer")
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be inferred (-1), got shape {list(shape)}")
    numel = _numel(s)
    if numel is None:
        return tuple(None if n == -1 else n for n in shape)
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if numel == 0 and known == 0:
            raise ShapeError(f"{op}: cannot reshape a tensor of 0 elements into shape {list(shape)} because the "
                             f"unspecified dimension size -1 can be any value and is ambiguous")
        if known and numel % known == 0:
            return tuple(numel // known if n == -1 else n for n in shape)
    elif known == numel:
        return shape
    raise ShapeError(f"{op}: shape {list(shape)} is invalid for input of size {numel} (shape {s})")


def reshape(s: tuple, shape) -> tuple:
    return _reshaped("reshape", s, shape)


def view(s: tuple, shape) -> tuple:
    # whether the input's strides allow a view is the kernel's to check: it has them
    return _reshaped("view", s, shape)


def permute(s: tuple, dims) -> tuple:
    dims = tuple(dims)
    axes = [normalize_axis(d, len(s), "permute") for d in dims]
    if sorted(axes) != list(range(len(s))):
        raise ShapeError(f"permute: dims {list(dims)} is not a permutation of the {len(s)} dimensions")
    return tuple(s[a] for a in axes)


def transpose(s: tuple, dim0: int, dim1: int) -> tuple:
    if not s:
        return ()         # PyTorch ignores the dims of a 0-d tensor
    a, b = normalize_axis(dim0, len(s), "transpose"), normalize_axis(dim1, len(s), "transpose")
    out = list(s)
    out[a], out[b] = s[b], s[a]
    return tuple(out)


def expand(s: tuple, size) -> tuple:
    size = tuple(size)
    if len(size) < len(s):
        raise ShapeError(f"expand: the number of sizes ({len(size)}) must be at least the tensor's "
                         f"dimensions ({len(s)})")
    lead = len(size) - len(s)
    out = list(size[:lead])          # new leading dims: any size, but no -1
    for have, want in zip(s, size[lead:]):
        out.append(have if want == -1 else want)
    if any(n is not None and n < 0 for n in out):
        raise ShapeError(f"expand: -1 is only allowed for existing dimensions, got {list(size)}")
    for have, want in zip(s, out[lead:]):
        if have is not None and want is not None and want != have and have != 1:
            raise ShapeError(f"expand: shape {s} cannot be expanded to {list(size)} "
                             f"(only size-1 dimensions can grow)")
    return tuple(out)


def squeeze(s: tuple, axis=None) -> tuple:
    axes = range(len(s)) if axis is None else normalize_axes(axis, len(s), "squeeze")
    if any(s[i] is None for i in axes):
        raise SizeDependentError("squeeze: which dimensions it drops depends on the sizes; use reshape, "
                                 "or index with 0")
    return tuple(n for i, n in enumerate(s) if not (i in axes and n == 1))


def unsqueeze(s: tuple, axis: int) -> tuple:
    a = normalize_axis(axis, len(s) + 1, "unsqueeze")
    return s[:a] + (1,) + s[a:]


def flatten(s: tuple, start_dim: int = 0, end_dim: int = -1) -> tuple:
    if not s:
        return (1,)       # PyTorch ignores the dims of a 0-d tensor
    a, b = normalize_axis(start_dim, len(s), "flatten"), normalize_axis(end_dim, len(s), "flatten")
    if a > b:
        raise ShapeError(f"flatten: start_dim ({start_dim}) must not come after end_dim ({end_dim})")
    return s[:a] + (_numel(s[a:b + 1]),) + s[b + 1:]


def narrow(s: tuple, axis: int, start: int, length: int) -> tuple:
    if not s:
        raise ShapeError("narrow: a 0-d tensor has no dimension to narrow")
    a = normalize_axis(axis, len(s), "narrow")
    n = s[a]
    if n is None:
        if length < 0:
            raise ShapeError(f"narrow: length ({length}) must be non-negative")
    else:
        st = start + n if start < 0 else start
        if not (0 <= st <= n and length >= 0 and st + length <= n):
            raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension {a} of size {n}")
    return s[:a] + (length,) + s[a + 1:]


def getitem(s: tuple, index: tuple) -> tuple:
    """Basic indexing's rule: the shape of ``t[index]`` for an index already normalized to ints,
    slices of ints, None and at most one ``...`` (compiler/views.py's ``index_type``).  Indexing
    is no registered view op (eager mode makes the view in autograd/indexing.py, which raises
    its own errors), so this rule is not in RULES; the tracer and lazy mode share it."""
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(s):
        raise ShapeError(f"too many indices for tensor of dimension {len(s)}")
    out, d = [], 0
    for i in index:
        if i is Ellipsis:
            k = len(s) - used
            out += s[d:d + k]
            d += k
        elif i is None:
            out.append(1)
        elif i.__class__ is slice:
            if i.step == 0:
                raise ShapeError("slice step cannot be zero")
            out.append(None if s[d] is None else len(range(*i.indices(s[d]))))
            d += 1
        else:
            if s[d] is not None and not -s[d] <= i < s[d]:
                raise ShapeError(f"index {i} is out of bounds for dimension {d} with size {s[d]}")
            d += 1
    return tuple(out) + tuple(s[d:])


# op name -> its rule: (input shape, *static arguments) -> output shape
RULES = {"reshape": reshape, "view": view, "permute": permute, "transpose.int": transpose, "expand": expand,
         "squeeze": squeeze, "unsqueeze": unsqueeze, "flatten": flatten, "narrow": narrow}
# the views' kinds (dj.Tag), which every layer reads: reshape and flatten copy where the strides
# cannot express the new shape (NumPy's reshape), the others never do
TAGS = {name: (Tag.view, Tag.view_may_copy) if name in ("reshape", "flatten") else (Tag.view,) for name in RULES}
