"""``dj.func``: composable function transforms, as ``torch.func`` (functorch) and JAX.

``vmap`` vectorizes through the ``Batched`` dispatch key (BatchedTensor, the batching rules
in kernels/batching); ``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jvp``, ``jacfwd`` and
``hessian`` are built on the autograd engine; ``functional_call`` runs a module with other
parameters.  They compose: ``vmap(grad(f))`` gives per-example gradients, ``grad(vmap(f))``
the gradient of a batched computation.  See docs/FUNC.md.

>>> import dispatch_jit as dj
>>> x = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
>>> dj.func.vmap(dj.func.grad(lambda r: (r * r).sum()))(x)
tensor([[2., 4.],
        [6., 8.]])
"""

from __future__ import annotations

from ..errors import VmapError
from .batched import BatchedTensor
from .functional_call import functional_call
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functional_call",
           "BatchedTensor", "VmapError"]
