"""PyTorch's in-place index methods that are no op of their own here: ``index_add_``,
``index_copy_``, ``index_fill_``, ``index_reduce_``, ``scatter_reduce_``, ``masked_scatter_``
and ``put_`` (``index_put_`` is an op: advanced.py; ``masked_fill_``, ``scatter_`` and
``scatter_add_`` are dispatch_jit/tensor_methods.py's).

Each computes the functional op's result (composite.py, reduce.py: their checks and errors
are PyTorch's) and writes it into ``self`` with item assignment, ``self[...] = result``,
which carries the in-place rules: the version counter moves, a leaf that requires grad
refuses, a view writes through to its base and rebases its history, and under autograd the
write records CopySlices, so the gradient flows to the functional op's inputs (``self``'s old
value among them), as PyTorch's.
"""

from __future__ import annotations

from dispatch_jit.autograd.grad_mode import is_grad_enabled
from dispatch_jit.errors import AutogradError

from . import composite

__all__ = ["METHODS_ONLY"]


def _write(op: str, self, compute):
    """``self[...] = compute(x)``, ``x`` being ``self`` or, under autograd, a clone of it (the
    functional op may save its input for backward: the write must not change what it saved)."""
    recording = self.requires_grad and is_grad_enabled()
    if recording and self.grad_fn is None:
        raise AutogradError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                            f"do it under dj.no_grad() or on a clone")
    self[...] = compute(self.clone() if recording else self)
    return self


def index_add_(self, dim, index, source, *, alpha=1):
    """``index_add`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).index_add_(0, dj.tensor([0, 2, 0]), dj.tensor([1.0, 2.0, 3.0]))
    tensor([4., 0., 2.])
    """
    return _write("index_add_", self, lambda x: composite.index_add(x, dim, index, source, alpha=alpha))


def index_copy_(self, dim, index, source):
    """``index_copy`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).index_copy_(0, dj.tensor([2, 0]), dj.tensor([1.0, 2.0]))
    tensor([2., 0., 1.])
    """
    return _write("index_copy_", self, lambda x: composite.index_copy(x, dim, index, source))


def index_fill_(self, dim, index, value):
    """``index_fill`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.ones(3).index_fill_(0, dj.tensor([1]), 0.0)
    tensor([1., 0., 1.])
    """
    return _write("index_fill_", self, lambda x: composite.index_fill(x, dim, index, value))


def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """``index_reduce`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.ones(3).index_reduce_(0, dj.tensor([0, 0]), dj.tensor([2.0, 3.0]), "prod")
    tensor([6., 1., 1.])
    """
    return _write("index_reduce_", self, lambda x: composite.index_reduce(x, dim, index, source, reduce,
                                                                include_self=include_self))


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    """``scatter_reduce`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).scatter_reduce_(0, dj.tensor([0, 0, 2]), dj.tensor([1.0, 3.0, 5.0]), "amax")
    tensor([3., 0., 5.])
    """
    return _write("scatter_reduce_", self, lambda x: composite.scatter_reduce(x, dim, index, src, reduce,
                                                                    include_self=include_self))


def masked_scatter_(self, mask, source):
    """``masked_scatter`` written into this tensor (``mask`` broadcasts to its shape, not beyond).

    >>> import dispatch_jit as dj
    >>> dj.zeros(3).masked_scatter_(dj.tensor([True, False, True]), dj.tensor([5.0, 6.0]))
    tensor([5., 0., 6.])
    """
    return _write("masked_scatter_", self, lambda x: composite.masked_scatter(x, mask, source))


def put_(self, index, source, accumulate=False):
    """``put`` written into this tensor.

    >>> import dispatch_jit as dj
    >>> dj.zeros(2, 2).put_(dj.tensor([3, -4]), dj.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 1.]])
    """
    return _write("put_", self, lambda x: composite.put(x, index, source, accumulate))


METHODS_ONLY = {f.__name__: f for f in (index_add_, index_copy_, index_fill_, index_reduce_, scatter_reduce_,
                                        masked_scatter_, put_)}
