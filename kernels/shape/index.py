"""Basic indexing's views as dispatcher ops, PyTorch's: ``aten::slice.Tensor`` (``t[a:b:c]``
along one dim) and ``aten::select.int`` (``t[i]`` along one dim, the dim removed), and the
backward ops of their derivatives, ``slice_backward`` and ``select_backward`` (the gradient put
at the view's place in zeros of the input's shape).

``t[1:, 0, None]`` is a chain of these and ``unsqueeze`` (autograd/indexing.py), so each
dispatch key does its part: the CPU kernels make NumPy views of the buffer, the CUDA kernels
the same views of the device layout (shape/cuda.py's phantom arithmetic), the Meta kernels and
the shape rules give the output's shape without data, autograd records SliceBackward and
SelectBackward rows, vmap shifts the dim (batching's ``dims_rule``) and compiled mode records
them as the views they are (their ``view`` tag and shape rule).

One difference from PyTorch, kept from NumPy's indexing that dispatch_jit always had: a negative
step (``t[::-1]``) is a reversed view where PyTorch refuses it.

>>> import dispatch_jit as dj
>>> x = dj.arange(12).reshape(3, 4)
>>> dj.ops.aten.slice(x, 1, 1, None, 2)
tensor([[ 1,  3],
        [ 5,  7],
        [ 9, 11]])
>>> dj.ops.aten.select(x, 0, -1)
tensor([ 8,  9, 10, 11])
"""

from __future__ import annotations

import numpy as np

from dispatch_jit.autograd.kernel import AutogradKernel, Derivative, Grad
from dispatch_jit.errors import OutOfBoundsError, ShapeError
from dispatch_jit.ops import entries
from dispatch_jit.registry import Tag
from dispatch_jit.tensor import wrap_view

from .op import normalize_axis

__all__ = ["SCHEMAS", "RULES", "TAGS", "CPU_KERNELS", "META_KERNELS", "KERNELS", "cuda_kernels", "slice_rule",
           "select_rule"]

A = entries("aten")

SCHEMAS = [
    "slice.Tensor(Tensor(a) self, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor(a)",
    "select.int(Tensor(a) self, int dim, int index) -> Tensor(a)",
    "slice_backward(Tensor grad_output, int[] input_sizes, int dim, int start, int end, int step) -> Tensor",
    "select_backward(Tensor grad_output, int[] input_sizes, int dim, int index) -> Tensor",
]


def _dim(s: tuple, dim: int, op: str) -> int:
    if not s:
        raise OutOfBoundsError(f"{op}() cannot be applied to a 0-dim tensor.")
    return normalize_axis(dim, len(s), op)


def _range(n: int, start, end, step: int) -> range:
    if step == 0:
        raise ShapeError("slice step cannot be zero (PyTorch: step must be greater than zero)")
    return range(n)[slice(start, end, step)]


def slice_rule(s: tuple, dim: int = 0, start=None, end=None, step: int = 1) -> tuple:
    """``t[..., start:end:step]`` at ``dim``: that dim's length is the slice's (clamped as Python's)."""
    d = _dim(s, dim, "slice")
    n = s[d]
    if step == 0:
        _range(0, None, None, 0)
    return s[:d] + (None if n is None else len(_range(n, start, end, step)),) + s[d + 1:]


def select_rule(s: tuple, dim: int, index: int) -> tuple:
    """``t[..., index]`` at ``dim``: that dim removed; the index checked where the size is known."""
    d = _dim(s, dim, "select")
    n = s[d]
    if n is not None and not -n <= index < n:
        raise OutOfBoundsError(f"index {index} is out of bounds for dimension {d} with size {n} (select(): index "
                               f"{index} out of range for tensor of size {list(s)} at dimension {dim})")
    return s[:d] + s[d + 1:]


def slice_view(self, dim=0, start=None, end=None, step=1):
    a = self._data
    d = _dim(a.shape, dim, "slice")
    if step == 0:
        _range(0, None, None, 0)
    return wrap_view(self, a[(slice(None),) * d + (slice(start, end, step),)])


def select_view(self, dim, index):
    a = self._data
    select_rule(a.shape, dim, index)
    d = dim % a.ndim
    # the trailing ``...`` keeps a 0-d result a view (NumPy gives a scalar for a full integer index)
    return wrap_view(self, a[(slice(None),) * d + (index, Ellipsis)])


def _backward(view, copy):
    """``slice_backward``/``select_backward`` over the key's view kernel and copy: zeros of the
    input's shape with the gradient written at the view's place.  ``end`` is a range's stop,
    which is -1 for a reversed slice that runs to the front (not "the last element")."""
    def kernel(grad_output, input_sizes, *args):
        from dispatch_jit.creation import zeros
        out = zeros(*input_sizes, dtype=grad_output.dtype, device=grad_output.device)
        if len(args) == 4 and args[2] < 0:
            args = (args[0], args[1], None, args[3])
        copy(view(out, *args), grad_output)
        return out
    kernel.__name__ = view.__name__.replace("_view", "_backward")
    return kernel


def _copy_cpu(dst, src) -> None:
    np.copyto(dst._data, src._data)


def _copy_cuda(dst, src) -> None:
    from dispatch_jit.cuda.copy import copy_into
    copy_into(dst._data, src._data)



def _meta(rule):
    def kernel(self, *args):
        from dispatch_jit.creation import empty
        return empty(*rule(tuple(self.shape), *args), dtype=self.dtype, device=self.device)
    kernel.__name__ = f"{rule.__name__}_meta"
    return kernel


def _backward_meta(grad_output, input_sizes, *args):
    from dispatch_jit.creation import empty
    return empty(*input_sizes, dtype=grad_output.dtype, device=grad_output.device)


RULES = {"slice.Tensor": slice_rule, "select.int": select_rule}
TAGS = {"slice.Tensor": (Tag.view,), "select.int": (Tag.view,)}
CPU_KERNELS = {"slice.Tensor": slice_view, "select.int": select_view,
               "slice_backward": _backward(slice_view, _copy_cpu), "select_backward": _backward(select_view, _copy_cpu)}
META_KERNELS = {"slice.Tensor": _meta(slice_rule), "select.int": _meta(select_rule),
                "slice_backward": _backward_meta, "select_backward": _backward_meta}


def cuda_kernels(view_kernel) -> dict:
    """The CUDA kernels: the CPU views' arithmetic on the device layout (``view_kernel``: shape/cuda.py's)."""
    sl, se = view_kernel(slice_view), view_kernel(select_view)
    return {"slice.Tensor": sl, "select.int": se, "slice_backward": _backward(sl, _copy_cuda),
            "select_backward": _backward(se, _copy_cuda)}


def _span(c) -> tuple:
    """slice's (start, end, step) as the range it selects (non-negative start, Python's clamping)."""
    r = range(c["shapes"][0][c["dim"] % len(c["shapes"][0])])[slice(c["start"], c["end"], c["step"])]
    return r.start, r.stop, r.step


def _slice_grad(g, s, c):
    return A.slice_backward(g, list(c["shapes"][0]), c["dim"], *_span(c))


def _slice_backward_grad(g, s, c):
    return A.slice(g, c["dim"], c["start"], None if c["end"] < 0 else c["end"], c["step"])


def _select_grad(g, s, c):
    return A.select_backward(g, list(c["shapes"][0]), c["dim"], c["index"])


# the rows of derivatives.yaml: slice's and select's gradient is their backward op, whose own
# gradient (create_graph) is the view again
DERIVATIVES = {
    "slice.Tensor": Derivative("SliceBackward", (Grad(_slice_grad),), unbroadcast=False),
    "select.int": Derivative("SelectBackward", (Grad(_select_grad),), unbroadcast=False),
    "slice_backward": Derivative("SliceBackwardBackward", (Grad(_slice_backward_grad),), unbroadcast=False),
    "select_backward": Derivative("SelectBackwardBackward", (Grad(lambda g, s, c: A.select(g, c["dim"], c["index"])),),
                                  unbroadcast=False),
}
# (their batching rules, the dim shifted past the batch dim, are beside the other views' in
# kernels/batching/rules.py)
KERNELS = {"Autograd": {name: AutogradKernel(d) for name, d in DERIVATIVES.items()}}
