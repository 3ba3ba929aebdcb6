"""PyTorch's view and shape names over the view ops: movedim, swapaxes, select, unbind, view_as,
expand_as, broadcast_to/tensors/shapes, ravel, unflatten, atleast_1d/2d/3d, adjoint, fliplr,
flipud, rot90, tile, msort and the ``*_copy`` functions.

Python functions over the dispatcher's ops (kernels/surface.py's ``PY_FUNCTIONS``), as PyTorch's
CompositeImplicitAutograd ones are: autograd, vmap and compiled mode see only the ops they call.
A view here is a composition of views (``movedim`` is a ``permute``; ``select`` is the op
itself), so it shares the input's storage and its gradient goes through the view machinery
exactly where PyTorch's does.  ``*_copy`` are the same with ``clone`` after, as PyTorch's.
"""

from __future__ import annotations

from dispatch_jit.broadcast import broadcast_shapes as _broadcast
from dispatch_jit.errors import ShapeError
from dispatch_jit.ops import entries

from .shape.op import normalize_axis

__all__ = ["PY_FUNCTIONS"]

A = entries("aten")


def _dims(dims) -> tuple:
    return (dims,) if isinstance(dims, int) else tuple(dims)


def movedim(input, source, destination):  # noqa: A002  (PyTorch's argument name)
    """The dimensions ``source`` of ``input`` moved to the positions ``destination`` (the others
    keep their order), a view, as ``torch.movedim`` (``moveaxis`` is the same).

    >>> import dispatch_jit as dj
    >>> dj.movedim(dj.zeros(2, 3, 4), 0, -1).shape
    (3, 4, 2)
    >>> dj.zeros(2, 3, 4).movedim((0, 1), (2, 0)).shape
    (3, 4, 2)
    """
    src, dst = _dims(source), _dims(destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
                         f"the same number of dims as destination ({list(dst)} dims)")
    n = input.ndim
    src = [normalize_axis(d, n, "movedim") for d in src]
    dst = [normalize_axis(d, n, "movedim") for d in dst]
    for name, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise ShapeError(f"movedim: repeated dim in `{name}` ({list(ds)})")
    if n == 0:
        return A.reshape(input, ())
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return A.permute(input, tuple(order))


def swapaxes(input, axis0, axis1):  # noqa: A002
    """``input`` with two dimensions exchanged, a view (``transpose``; ``swapdims`` is the same).

    >>> import dispatch_jit as dj
    >>> dj.swapaxes(dj.zeros(2, 3), 0, 1).shape
    (3, 2)
    """
    return A.transpose(input, axis0, axis1)


def swapdims(input, dim0, dim1):  # noqa: A002
    """``input`` with two dimensions exchanged, a view, as ``torch.swapdims``.

    >>> import dispatch_jit as dj
    >>> dj.zeros(2, 3, 1).swapdims(0, 2).shape
    (1, 3, 2)
    """
    return A.transpose(input, dim0, dim1)


def adjoint(input):  # noqa: A002
    """The conjugate transpose of the matrices of ``input`` (its last two dimensions swapped).

    >>> import dispatch_jit as dj
    >>> dj.adjoint(dj.tensor([[1, 2], [3, 4]]))
    tensor([[1, 3],
            [2, 4]])
    """
    if input.ndim < 2:
        raise ShapeError(f"adjoint: tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                         f"{input.ndim}-D tensor.")
    out = A.transpose(input, -2, -1)
    return A.conj(out) if input.dtype.name.startswith("complex") else out


def select(input, dim, index):  # noqa: A002
    """The slice of ``input`` at ``index`` along ``dim`` (that dimension removed), a view, as
    ``torch.select`` (``x.select(0, i)`` is ``x[i]``).

    >>> import dispatch_jit as dj
    >>> dj.arange(6).reshape(2, 3).select(1, -1)
    tensor([2, 5])
    """
    return A.select(input, dim, index)      # the view op (kernels/shape/index.py)


def unbind(input, dim=0):  # noqa: A002
    """The slices of ``input`` along ``dim``, each a view with that dimension removed.

    >>> import dispatch_jit as dj
    >>> dj.unbind(dj.tensor([[1, 2], [3, 4]]), 1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    if input.ndim == 0:
        raise ShapeError("unbind: Dimension specified as 0 but tensor has no dimensions")
    d = normalize_axis(dim, input.ndim, "unbind")
    return tuple(select(input, d, i) for i in range(input.shape[d]))


def view_as(input, other):  # noqa: A002
    """``input.view(other.shape)``.

    >>> import dispatch_jit as dj
    >>> dj.arange(4).view_as(dj.zeros(2, 2))
    tensor([[0, 1],
            [2, 3]])
    """
    return input.view(tuple(other.shape))


def reshape_as(input, other):  # noqa: A002
    """``input.reshape(other.shape)``: a view where the strides allow, else a copy.

    >>> import dispatch_jit as dj
    >>> dj.arange(4).reshape_as(dj.zeros(4, 1)).shape
    (4, 1)
    """
    return A.reshape(input, tuple(other.shape))


def expand_as(input, other):  # noqa: A002
    """``input.expand(other.shape)``, a view.

    >>> import dispatch_jit as dj
    >>> dj.tensor([1, 2]).expand_as(dj.zeros(2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    return A.expand(input, tuple(other.shape))


def broadcast_to(input, size):  # noqa: A002
    """``input`` broadcast to ``size``, a view (``expand``), as ``torch.broadcast_to``.

    >>> import dispatch_jit as dj
    >>> dj.broadcast_to(dj.tensor([1, 2]), (2, 2))
    tensor([[1, 2],
            [1, 2]])
    """
    return A.expand(input, tuple(size))


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to, as ``torch.broadcast_shapes`` (an int is a 1-D
    shape).

    >>> import dispatch_jit as dj
    >>> dj.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    for s in shapes:
        if any(n < 0 for n in s):
            raise ShapeError(f"broadcast_shapes: Trying to create tensor with negative dimension {min(s)}: "
                             f"{list(s)}")
    try:
        return tuple(_broadcast(*shapes)) if shapes else ()
    except ValueError:
        raise ShapeError(f"broadcast_shapes: Shape mismatch: objects cannot be broadcast to a single shape "
                         f"{[list(s) for s in shapes]}") from None


def broadcast_tensors(*tensors):
    """The tensors broadcast to one shape, views (``expand``), as ``torch.broadcast_tensors``.

    >>> import dispatch_jit as dj
    >>> a, b = dj.broadcast_tensors(dj.tensor([[1], [2]]), dj.tensor([3, 4]))
    >>> b
    tensor([[3, 4],
            [3, 4]])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(A.expand(t, shape) for t in tensors)


def _h(self):
    """The conjugate transpose of a matrix (``x.H``; ``x.mH`` for batches of matrices), a view
    for real dtypes.

    >>> import dispatch_jit as dj
    >>> dj.tensor([[1, 2]]).H
    tensor([[1],
            [2]])
    """
    if self.ndim != 2:
        raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return adjoint(self)


def _mh(self):
    if self.ndim < 2:
        raise ShapeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D "
                         f"tensor.")
    return adjoint(self)


def ravel(input):  # noqa: A002
    """``input`` as 1-D: a view where the strides allow, else a copy (``reshape(-1)``).

    >>> import dispatch_jit as dj
    >>> dj.ravel(dj.tensor([[1, 2], [3, 4]]))
    tensor([1, 2, 3, 4])
    """
    return A.reshape(input, (-1,))


def unflatten(input, dim, sizes):  # noqa: A002
    """Dimension ``dim`` of ``input`` split into ``sizes`` (one may be -1), as ``torch.unflatten``.

    >>> import dispatch_jit as dj
    >>> dj.arange(6).unflatten(0, (2, -1)).shape
    (2, 3)
    """
    sizes = tuple(sizes)
    if not sizes:
        raise ShapeError("unflatten: sizes must be non-empty")
    if input.ndim == 0:
        raise ShapeError(f"unflatten: Dimension specified as {dim} but tensor has no dimensions")
    d = normalize_axis(dim, input.ndim, "unflatten")
    n = input.shape[d]
    known = 1
    for s in sizes:
        known *= s if s != -1 else 1
    if sizes.count(-1) > 1 or (-1 not in sizes and known != n) or (-1 in sizes and (known == 0 or n % known)):
        raise ShapeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                         f"({n}) in the input tensor")
    shape = tuple(input.shape)
    return A.view(input, shape[:d] + sizes + shape[d + 1:])


def _atleast(n: int, name: str):
    def grow(t):
        if t.ndim >= n:
            return t
        s = tuple(t.shape)
        # NumPy's rule, as PyTorch's: a vector is a row (1, k), and in 3-D the middle of (1, k, 1)
        shape = {0: (1,) * n, 1: (1,) + s + (1,) * (n - 2), 2: s + (1,)}[len(s)]
        return A.reshape(t, shape)

    def atleast(*tensors):
        if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)):
            return grow(tensors[0])
        seq = tensors[0] if len(tensors) == 1 else tensors
        return tuple(grow(t) for t in seq)
    atleast.__name__ = atleast.__qualname__ = name
    return atleast


atleast_1d = _atleast(1, "atleast_1d")
atleast_1d.__doc__ = """Each tensor viewed with at least 1 dimension (a 0-d one as shape (1,)); one tensor
in gives one out, several (or a list) a tuple, as ``torch.atleast_1d``.

>>> import dispatch_jit as dj
>>> dj.atleast_1d(dj.tensor(1.5))
tensor([1.5000])
"""
atleast_2d = _atleast(2, "atleast_2d")
atleast_2d.__doc__ = """Each tensor viewed with at least 2 dimensions (new dimensions in front), as
``torch.atleast_2d``.

>>> import dispatch_jit as dj
>>> dj.atleast_2d(dj.tensor([1, 2])).shape
(1, 2)
"""
atleast_3d = _atleast(3, "atleast_3d")
atleast_3d.__doc__ = """Each tensor viewed with at least 3 dimensions, as ``torch.atleast_3d`` (NumPy's
rule: shape (n,) becomes (1, n, 1), (m, n) becomes (m, n, 1)).

>>> import dispatch_jit as dj
>>> dj.atleast_3d(dj.tensor([1, 2])).shape
(1, 2, 1)
"""


def fliplr(input):  # noqa: A002
    """``input`` with its columns (dimension 1) in reverse order (a copy, as PyTorch's).

    >>> import dispatch_jit as dj
    >>> dj.fliplr(dj.tensor([[1, 2], [3, 4]]))
    tensor([[2, 1],
            [4, 3]])
    """
    if input.ndim < 2:
        raise ShapeError("fliplr: Input must be >= 2-d.")
    return A.flip(input, (1,))


def flipud(input):  # noqa: A002
    """``input`` with its rows (dimension 0) in reverse order (a copy, as PyTorch's).

    >>> import dispatch_jit as dj
    >>> dj.flipud(dj.tensor([1, 2, 3]))
    tensor([3, 2, 1])
    """
    if input.ndim < 1:
        raise ShapeError("flipud: Input must be >= 1-d.")
    return A.flip(input, (0,))


def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """``input`` rotated by ``k`` quarter turns in the plane ``dims``, from the first dimension
    towards the second, as ``torch.rot90``.

    >>> import dispatch_jit as dj
    >>> dj.rot90(dj.tensor([[1, 2], [3, 4]]))
    tensor([[2, 4],
            [1, 3]])
    """
    dims = tuple(dims)
    if len(dims) != 2:
        raise ShapeError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise ShapeError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = (normalize_axis(d, input.ndim, "rot90") for d in dims)
    if a == b:
        raise ShapeError(f"rot90: expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    k %= 4
    if k == 1:
        return A.transpose(A.flip(input, (b,)), a, b)
    if k == 2:
        return A.flip(input, (a, b))
    if k == 3:
        return A.flip(A.transpose(input, a, b), (b,))
    return A.clone(input)


def tile(input, dims):  # noqa: A002
    """``input`` repeated ``dims[d]`` times along each dimension, as ``torch.tile`` (fewer
    ``dims`` than dimensions are padded with 1s in front, unlike ``repeat``).

    >>> import dispatch_jit as dj
    >>> dj.tile(dj.tensor([[1, 2]]), (2,))
    tensor([[1, 2, 1, 2]])
    """
    dims = _dims(dims)
    return A.repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def msort(input):  # noqa: A002
    """``input`` sorted along its first dimension, as ``torch.msort``.

    >>> import dispatch_jit as dj
    >>> dj.msort(dj.tensor([[3, 1], [2, 4]]))
    tensor([[2, 1],
            [3, 4]])
    """
    if input.ndim == 0:
        return A.clone(input)
    return A.sort(input, 0)[0]


def _copy(name: str, view, doc: str):
    def fn(*args, **kwargs):
        return A.clone(view(*args, **kwargs))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _expand(input, size, *, implicit=False):  # noqa: A002
    return A.expand(input, tuple(size))


def _view(input, size):  # noqa: A002
    if not isinstance(size, (list, tuple)):
        # view(dtype) reinterprets the bytes; view_copy(dtype) is that, copied
        return input.view(size)
    return A.view(input, tuple(size))


def _t(input):  # noqa: A002
    return input.t()


def _unbind_copy(input, dim=0):  # noqa: A002
    return tuple(A.clone(t) for t in unbind(input, dim))


def _squeeze(input, dim=None):  # noqa: A002
    return A.squeeze(input, None if dim is None else _dims(dim))


def _narrow(input, dim, start, length):  # noqa: A002
    if not isinstance(start, int):
        start = int(start.item())
    return A.narrow(input, dim, start, length)


_COPIES = {
    "expand_copy": (_expand, "``input.expand(size)``, copied."),
    "permute_copy": (lambda input, dims: A.permute(input, tuple(dims)), "``input.permute(dims)``, copied."),
    "view_copy": (_view, "``input.view(size)`` (or ``view(dtype)``), copied."),
    "t_copy": (_t, "``input.t()``, copied."),
    "transpose_copy": (lambda input, dim0, dim1: A.transpose(input, dim0, dim1),
                       "``input.transpose(dim0, dim1)``, copied."),
    "unsqueeze_copy": (lambda input, dim: A.unsqueeze(input, dim), "``input.unsqueeze(dim)``, copied."),
    "squeeze_copy": (_squeeze, "``input.squeeze(dim)``, copied."),
    "alias_copy": (lambda input: input, "A copy of ``input`` (PyTorch's alias, copied)."),
    "diagonal_copy": (lambda input, offset=0, dim1=0, dim2=1: A.diagonal(input, offset, dim1, dim2),
                      "``input.diagonal(offset, dim1, dim2)``, copied."),
    "narrow_copy": (_narrow, "``input.narrow(dim, start, length)``, copied (new memory)."),
}
_EXAMPLE = "\n\n>>> import dispatch_jit as dj\n>>> dj.{name}({call})\n{out}\n"
_EXAMPLES = {
    "expand_copy": ("dj.tensor([1, 2]), (2, 2)", "tensor([[1, 2],\n        [1, 2]])"),
    "permute_copy": ("dj.tensor([[1, 2]]), (1, 0)", "tensor([[1],\n        [2]])"),
    "view_copy": ("dj.arange(4), (2, 2)", "tensor([[0, 1],\n        [2, 3]])"),
    "t_copy": ("dj.tensor([[1, 2]])", "tensor([[1],\n        [2]])"),
    "transpose_copy": ("dj.tensor([[1, 2]]), 0, 1", "tensor([[1],\n        [2]])"),
    "unsqueeze_copy": ("dj.tensor([1, 2]), 0", "tensor([[1, 2]])"),
    "squeeze_copy": ("dj.tensor([[1, 2]])", "tensor([1, 2])"),
    "alias_copy": ("dj.tensor([1, 2])", "tensor([1, 2])"),
    "narrow_copy": ("dj.tensor([1, 2, 3]), 0, 1, 2", "tensor([2, 3])"),
    "diagonal_copy": ("dj.tensor([[1, 2], [3, 4]])", "tensor([1, 4])"),
}
COPIES = {name: _copy(name, view, doc + _EXAMPLE.format(name=name, call=_EXAMPLES[name][0], out=_EXAMPLES[name][1]))
          for name, (view, doc) in _COPIES.items()}


def unbind_copy(input, dim=0):  # noqa: A002
    """``unbind(input, dim)``, each slice copied.

    >>> import dispatch_jit as dj
    >>> dj.unbind_copy(dj.tensor([[1, 2], [3, 4]]))
    (tensor([1, 2]), tensor([3, 4]))
    """
    return _unbind_copy(input, dim)


# name -> (function, also a Tensor method?)
PY_FUNCTIONS = {
    "movedim": (movedim, True), "moveaxis": (movedim, True), "swapaxes": (swapaxes, True),
    "swapdims": (swapdims, True), "adjoint": (adjoint, True), "select": (select, True), "unbind": (unbind, True),
    "broadcast_to": (broadcast_to, True), "broadcast_shapes": (broadcast_shapes, False),
    "broadcast_tensors": (broadcast_tensors, False), "ravel": (ravel, True), "unflatten": (unflatten, True),
    "atleast_1d": (atleast_1d, False), "atleast_2d": (atleast_2d, False), "atleast_3d": (atleast_3d, False),
    "fliplr": (fliplr, True), "flipud": (flipud, True), "rot90": (rot90, True), "tile": (tile, True),
    "msort": (msort, True), "unbind_copy": (unbind_copy, False),
    **{name: (fn, name == "narrow_copy") for name, fn in COPIES.items()},
}
# Tensor.<name> only: PyTorch has no torch.view_as, torch.H, ...
METHODS_ONLY = {"view_as": view_as, "reshape_as": reshape_as, "expand_as": expand_as, "H": property(_h),
                "mH": property(_mh)}
