"""PyTorch's product and combination names over the dispatcher's ops: mv, vdot, inner, tensordot,
kron, trace, addr, addbmm, addcmul, addcdiv, dist, cdist, cartesian_prod, combinations, meshgrid,
block_diag.

Python functions (kernels/surface.py's ``PY_FUNCTIONS``), PyTorch's CompositeImplicitAutograd
style: each checks PyTorch's preconditions, so an error names the function called, then composes
matmul, mul, sum, cat, expand ...; autograd, vmap and compiled mode see only those ops.
"""

from __future__ import annotations

import itertools
import warnings

from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT
from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.ops import entries

from .composite_math import _addmm_like
from .shape.op import normalize_axis
from .torch_functions import norm

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")


def _same_dtype(op: str, a, b, what: str = "both inputs") -> None:
    if a.dtype is not b.dtype:
        raise DTypeError(f"{op}: expected {what} to have the same dtype, but found {a.dtype.name} and "
                         f"{b.dtype.name}; convert one: other.to(input.dtype)")


def mv(input, vec):  # noqa: A002  (PyTorch's argument name)
    """The product of the matrix ``input`` (n, m) and the vector ``vec`` (m,), as ``torch.mv``.

    >>> import dispatch_jit as dj
    >>> dj.mv(dj.tensor([[1, 2], [3, 4]]), dj.tensor([1, 1]))
    tensor([3, 7])
    """
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv: vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise ShapeError(f"mv: size mismatch, got input ({input.shape[0]}), mat ({input.shape[0]}x{input.shape[1]}), "
                         f"vec ({vec.shape[0]})")
    _same_dtype("mv", input, vec, "the matrix and the vector")
    return A.matmul(input, vec)


def vdot(input, other):  # noqa: A002
    """The dot product of two 1-D tensors, the first conjugated, as ``torch.vdot``.

    >>> import dispatch_jit as dj
    >>> dj.vdot(dj.tensor([1.0, 2.0]), dj.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"vdot: 1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    _same_dtype("vdot", input, other, "both vectors")
    if input.shape[0] != other.shape[0]:
        raise ShapeError(f"vdot: inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
                         f"[{other.shape[0]}] to have the same number of elements, but got {input.shape[0]} and "
                         f"{other.shape[0]} elements respectively")
    if input.dtype.category == COMPLEX:
        input = A.conj(input)
    return A.dot(input, other)


def tensordot(a, b, dims=2, out=None):
    """The sum of products of ``a`` and ``b`` over the last ``dims`` dimensions of ``a`` and the
    first of ``b``, or over the listed pairs ``dims=([a dims], [b dims])``, as ``torch.tensordot``.

    >>> import dispatch_jit as dj
    >>> dj.tensordot(dj.ones(2, 3), dj.ones(3, 4), 1).shape
    (2, 4)
    >>> dj.tensordot(dj.ones(2, 3), dj.ones(3, 2), ([1], [0]))
    tensor([[3., 3.],
            [3., 3.]])
    """
    if out is not None:
        raise SchemaError("tensordot: out= is not supported; use the returned tensor")
    if hasattr(dims, "ndim"):
        dims = int(dims.item()) if dims.ndim == 0 else dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise ShapeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise ShapeError(f"tensordot expects dims to be a pair of lists of dimensions, got {dims!r}")
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise ShapeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
        da = [normalize_axis(d, a.ndim, "tensordot") for d in da]
        db = [normalize_axis(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        # PyTorch's rule: a size-1 dimension contracts with any size (the other operand is summed there)
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = A.sum(b, (j,), True)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = A.sum(a, (i,), True)
        elif a.shape[i] != b.shape[j]:
            raise ShapeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} and "
                             f"second has size {b.shape[j]} in dim {j}")
    _same_dtype("tensordot", a, b)
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    ma = A.reshape(A.permute(a, tuple(free_a + da)), (-1, k) if free_a else (1, k))
    mb = A.reshape(A.permute(b, tuple(db + free_b)), (k, -1) if free_b else (k, 1))
    if 0 in ma.shape or 0 in mb.shape:
        # reshape(-1) of an empty tensor is ambiguous: the sizes are known
        ma = A.reshape(A.permute(a, tuple(free_a + da)), (_prod(a, free_a), k))
        mb = A.reshape(A.permute(b, tuple(db + free_b)), (k, _prod(b, free_b)))
    out = A.matmul(ma, mb)
    return A.reshape(out, tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


def _prod(t, dims) -> int:
    n = 1
    for d in dims:
        n *= t.shape[d]
    return n


def inner(input, other):  # noqa: A002
    """The sum of products over the last dimension of each (a 0-d operand multiplies), as
    ``torch.inner``.

    >>> import dispatch_jit as dj
    >>> dj.inner(dj.tensor([[1, 2], [3, 4]]), dj.tensor([1, 1]))
    tensor([3, 7])
    """
    if input.ndim == 0 or other.ndim == 0:
        return A.mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner() the last dimension must match on both input tensors but got shapes "
                         f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def kron(input, other):  # noqa: A002
    """The Kronecker product: every element of ``input`` times a block of ``other``, as
    ``torch.kron``.

    >>> import dispatch_jit as dj
    >>> dj.kron(dj.tensor([1, 2]), dj.tensor([1, 10]))
    tensor([ 1, 10,  2, 20])
    """
    n = max(input.ndim, other.ndim)
    a = A.reshape(input, (1,) * (n - input.ndim) + tuple(input.shape))
    b = A.reshape(other, (1,) * (n - other.ndim) + tuple(other.shape))
    # (a0, 1, a1, 1, ...) * (1, b0, 1, b1, ...) -> (a0 * b0, a1 * b1, ...)
    ai = A.reshape(a, tuple(s for m in a.shape for s in (m, 1)))
    bi = A.reshape(b, tuple(s for m in b.shape for s in (1, m)))
    return A.reshape(A.mul(ai, bi), tuple(x * y for x, y in zip(a.shape, b.shape)))


def trace(input):  # noqa: A002
    """The sum of the main diagonal of a 2-D tensor (integers sum as int64), as ``torch.trace``.

    >>> import dispatch_jit as dj
    >>> dj.trace(dj.tensor([[1, 2], [3, 4]]))
    tensor(5)
    """
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype.category == BOOL:
        raise DTypeError("trace: \"trace\" not implemented for 'Bool'; convert first: x.long()")
    return A.sum(A.diagonal(input, 0, 0, 1))


def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)`` (``input`` ignored where ``beta`` is 0); for
    bool tensors, ``and``/``or`` in place of ``*``/``+``, as ``torch.addr``.

    >>> import dispatch_jit as dj
    >>> dj.addr(dj.zeros(2, 2), dj.tensor([1.0, 2.0]), dj.tensor([1.0, 3.0]))
    tensor([[1., 3.],
            [2., 6.]])
    """
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"addr: Expected 1-D argument vec1 and vec2, but got {vec1.ndim}-D and {vec2.ndim}-D")
    if input.dtype.category == BOOL:
        if not all(isinstance(v, (bool, int)) and not isinstance(v, float) for v in (beta, alpha)):
            raise DTypeError("addr: Boolean beta only supported for Boolean results.")
        prod = A.logical_and(A.unsqueeze(vec1, 1), A.unsqueeze(vec2, 0))
        prod = prod if alpha else A.logical_and(prod, False)
        return A.logical_or(A.logical_and(input, True), prod) if beta else A.expand(prod, tuple(prod.shape))
    _same_dtype("addr", vec1, vec2, "vec1 and vec2")
    return _addmm_like("addr", input, A.outer(vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2 summed over the batch)``, as ``torch.addbmm``.

    >>> import dispatch_jit as dj
    >>> dj.addbmm(dj.zeros(2, 2), dj.ones(3, 2, 1), dj.ones(3, 1, 2))
    tensor([[3., 3.],
            [3., 3.]])
    """
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ShapeError(f"addbmm: batch1 must be a 3D tensor, batch2 must be a 3D tensor; got {batch1.ndim}-D and "
                         f"{batch2.ndim}-D")
    A.bmm(A.narrow(batch1, 0, 0, 0), A.narrow(batch2, 0, 0, 0))    # bmm's checks, on no data
    if batch1.shape[0] != batch2.shape[0]:
        raise ShapeError(f"addbmm: batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and "
                         f"{batch2.shape[0]}")
    if batch1.dtype.category not in (FLOAT, COMPLEX):
        # PyTorch converts the scalars to the integer dtype (beta=0.6 is 0), where addmm refuses them
        beta, alpha = int(beta), int(alpha)
    # one product over the batch and the inner dimension together, (n, b*m) @ (b*m, p): one GEMM
    b, n, m = batch1.shape
    lhs = A.reshape(A.permute(batch1, (1, 0, 2)), (n, b * m))
    rhs = A.reshape(batch2, (b * m, batch2.shape[2]))
    return _addmm_like("addbmm", input, A.matmul(lhs, rhs), beta, alpha)


def _value_check(op: str, dtype, value) -> None:
    if dtype.category not in (FLOAT, COMPLEX) and isinstance(value, float):
        raise DTypeError(f"{op}: For integral input tensors, argument value must not be a floating point number "
                         f"(got {value!r})")


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``, broadcast, as ``torch.addcmul``.

    >>> import dispatch_jit as dj
    >>> dj.addcmul(dj.tensor([1.0, 1.0]), dj.tensor([2.0, 3.0]), dj.tensor([4.0, 5.0]), value=0.5)
    tensor([5.0000, 8.5000])
    """
    prod = A.mul(tensor1, tensor2)
    _value_check("addcmul", prod.dtype, value)
    return A.add(input, A.mul(prod, value) if value != 1 else prod)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2``, broadcast, as ``torch.addcdiv`` (integer operands
    are refused: their division would be a floor division in old PyTorch).

    >>> import dispatch_jit as dj
    >>> dj.addcdiv(dj.tensor([1.0, 1.0]), dj.tensor([2.0, 3.0]), dj.tensor([4.0, 5.0]), value=2)
    tensor([2.0000, 2.2000])
    """
    if tensor1.dtype.category not in (FLOAT, COMPLEX) and tensor2.dtype.category not in (FLOAT, COMPLEX):
        raise DTypeError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                         "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
                         "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
                         "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
                         "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
                         "for all dtypes.")
    quot = A.div(tensor1, tensor2)
    _value_check("addcdiv", input.dtype, value)
    return A.add(input, A.mul(quot, value) if value != 1 else quot)


def dist(input, other, p=2):  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcast), as ``torch.dist``.

    >>> import dispatch_jit as dj
    >>> dj.dist(dj.tensor([0.0, 0.0]), dj.tensor([3.0, 4.0]))
    tensor(5.)
    """
    if hasattr(p, "ndim"):
        p = p.item()
    _same_dtype("dist", input, other)
    return norm(A.sub(input, other), p)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and each of ``x2``
    (..., R, M), as ``torch.cdist``: shape (..., P, R).  For p=2 with more than 25 rows (or
    ``compute_mode="use_mm_for_euclid_dist"``) as PyTorch, through one matrix product; otherwise
    from the differences.

    >>> import dispatch_jit as dj
    >>> dj.cdist(dj.tensor([[0.0, 0.0]]), dj.tensor([[3.0, 4.0], [0.0, 1.0]]))
    tensor([[5., 1.]])
    """
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if x1.dtype.category != FLOAT or x2.dtype.category != FLOAT:
        raise DTypeError(f"cdist only supports floating-point dtypes, X1 got: {x1.dtype.name}, X2 got: "
                         f"{x2.dtype.name}")
    if p < 0:
        raise ShapeError(f"cdist only supports non-negative p values, got {p}")
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist", None):
        raise SchemaError(f"{compute_mode} is not a valid value for compute_mode")
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
            compute_mode in ("use_mm_for_euclid_dist_if_necessary", None)
            and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        return _euclidean_by_matmul(x1, x2)
    diff = A.sub(A.unsqueeze(x1, -2), A.unsqueeze(x2, -3))
    if p in (0, 1) or p == float("inf"):
        return norm(diff, p, -1)
    # sum(|d|^p)^(1/p) with the root taken only away from 0: at a zero distance PyTorch's gradient
    # is 0, where the root's own derivative would make it NaN
    if p == 2:
        s = A.sum(A.mul(diff, diff), (-1,))
    else:
        # |d|^p likewise only away from 0 (for p < 1 its derivative there is infinite; PyTorch's is 0)
        flat = A.eq(diff, 0)
        s = A.sum(A.where(flat, 0.0, A.pow(A.where(flat, 1.0, A.abs(diff)), float(p))), (-1,))
    zero = A.eq(s, 0)
    root = A.sqrt(A.where(zero, 1.0, s)) if p == 2 else A.pow(A.where(zero, 1.0, s), 1.0 / p)
    return A.where(zero, 0.0, root)


def _euclidean_by_matmul(x1, x2):
    """PyTorch's ``_euclidean_dist``, step for step (so the values round as its do): |a|^2 + |b|^2
    - 2 a.b as one matrix product of padded operands, clamped at 1e-30 before the square root (the
    clamp's zero gradient is what PyTorch's backward gives at a zero distance)."""
    from dispatch_jit.creation import ones
    n1 = A.sum(A.mul(x1, x1), (-1,), True)
    n2 = A.sum(A.mul(x2, x2), (-1,), True)
    pad1 = ones(*n1.shape, dtype=x1.dtype, device=x1.device)
    pad2 = ones(*n2.shape, dtype=x2.dtype, device=x2.device)
    a = A.cat([A.mul(x1, -2), n1, pad1], -1)
    b = A.cat([x2, pad2, n2], -1)
    return A.sqrt(A.clamp(A.matmul(a, A.transpose(b, -2, -1)), 1e-30, None))


def cartesian_prod(*tensors):
    """Every combination of one element from each 1-D tensor, as rows, as ``torch.cartesian_prod``
    (one tensor is returned as it is).

    >>> import dispatch_jit as dj
    >>> dj.cartesian_prod(dj.tensor([1, 2]), dj.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    for t in tensors:
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod: Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return A.stack([A.reshape(g, (-1,)) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The length-``r`` combinations of the elements of a 1-D tensor, as rows, as Python's
    itertools.combinations (``with_replacement``: combinations_with_replacement).

    >>> import dispatch_jit as dj
    >>> dj.combinations(dj.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    if input.ndim != 1:
        raise ShapeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise ShapeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        from dispatch_jit.creation import empty
        return empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    from dispatch_jit.creation import tensor
    from dispatch_jit.dtypes import int64
    idx = tensor([i for row in rows for i in row], dtype=int64, device=input.device)
    return A.reshape(A.index_select(input, 0, idx), (len(rows), r))


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D (or 0-d) tensors, views (``expand``): ``indexing="ij"`` gives
    grids of shape (len(t0), len(t1), ...), ``"xy"`` swaps the first two, as ``torch.meshgrid``
    (no ``indexing`` means "ij", with PyTorch's warning).

    >>> import dispatch_jit as dj
    >>> a, b = dj.meshgrid(dj.tensor([1, 2]), dj.tensor([3, 4, 5]), indexing="ij")
    >>> a.shape, b[0]
    ((2, 3), tensor([3, 4, 5]))
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise ShapeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise SchemaError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise ShapeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
    for t in tensors[1:]:
        if t.dtype is not tensors[0].dtype:
            raise DTypeError("torch.meshgrid: Expected all tensors in the tensor list to have the same dtype")
    ts = [A.reshape(t, (-1,)) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    n = len(ts)
    grids = [A.expand(A.reshape(t, tuple(-1 if j == i else 1 for j in range(n))), shape) for i, t in enumerate(ts)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def block_diag(*tensors):
    """The tensors (0-d, 1-d as one row, or 2-d) as blocks on the diagonal of a 2-D tensor of
    their promoted dtype, zeros elsewhere, as ``torch.block_diag``.

    >>> import dispatch_jit as dj
    >>> dj.block_diag(dj.tensor([[1, 2]]), dj.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    from dispatch_jit.creation import zeros
    from dispatch_jit.dtypes import float32, result_type
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ShapeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                             f"{t.ndim} dimensions")
        blocks.append(A.reshape(t, (1, 1) if t.ndim == 0 else (1, t.shape[0]) if t.ndim == 1 else tuple(t.shape)))
    if not blocks:
        return zeros(1, 0, dtype=float32)
    dtype = result_type(*[b.dtype for b in blocks])
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        h, w = b.shape
        parts = [zeros(h, left, dtype=dtype, device=b.device), b.to(dtype),
                 zeros(h, width - left - w, dtype=dtype, device=b.device)]
        rows.append(A.cat(parts, 1))
        left += w
    return A.cat(rows, 0)


# name -> (function, also a Tensor method?)
PY_FUNCTIONS = {
    "mv": (mv, True), "vdot": (vdot, True), "tensordot": (tensordot, False), "inner": (inner, True),
    "kron": (kron, True), "trace": (trace, True), "addr": (addr, True), "addbmm": (addbmm, True),
    "addcmul": (addcmul, True), "addcdiv": (addcdiv, True), "dist": (dist, True), "cdist": (cdist, False),
    "cartesian_prod": (cartesian_prod, False), "combinations": (combinations, False),
    "meshgrid": (meshgrid, False), "block_diag": (block_diag, False),
}
