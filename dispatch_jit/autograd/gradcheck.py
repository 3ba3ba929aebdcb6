"""Finite-difference checks of gradients."""

from __future__ import annotations

import warnings

import numpy as np

from ..creation import zeros_like
from ..errors import AutogradError
from ..tensor import Tensor
from .engine import run_backward
from .grad_mode import no_grad

__all__ = ["gradcheck"]


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """Compare ``fn``'s analytical gradients with central finite differences in float64.

    Every input that requires grad is perturbed element by element; the
    analytical Jacobian comes from one backward per output element.  On a
    mismatch it reports the worst element.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([0.5, 1.5], dtype=dj.float64, requires_grad=True)
    >>> dj.autograd.gradcheck(lambda t: (t * t).exp(), (x,))
    True
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise AutogradError("gradcheck: no input requires grad")
    for i in diff:
        if inputs[i].dtype.name != "float64":
            warnings.warn(f"gradcheck: input {i} is {inputs[i].dtype.name}, not float64; finite differences "
                          f"will be imprecise", stacklevel=2)

    def outputs_of(args):
        out = fn(*args)
        return out if isinstance(out, tuple) else (out,)

    outs = outputs_of(inputs)
    for oi, out in enumerate(outs):
        flat_out = out.numpy().reshape(-1)
        for i in diff:
            x = inputs[i]
            xdata = x.numpy()
            numeric = np.zeros((xdata.size, flat_out.size))
            with no_grad():
                for k in range(xdata.size):
                    orig = xdata.flat[k]
                    xdata.flat[k] = orig + eps
                    plus = outputs_of(inputs)[oi].numpy().reshape(-1).astype(np.float64)
                    xdata.flat[k] = orig - eps
                    minus = outputs_of(inputs)[oi].numpy().reshape(-1).astype(np.float64)
                    xdata.flat[k] = orig
                    numeric[k] = (plus - minus) / (2 * eps)
            analytic = np.zeros_like(numeric)
            for j in range(flat_out.size):
                seed = zeros_like(out)
                seed.numpy().reshape(-1)[j] = 1
                g = run_backward([out], [seed], retain_graph=True, create_graph=False, inputs=[x],
                                 allow_unused=True)[0]
                if g is not None:
                    analytic[:, j] = g.numpy().reshape(-1)
            err = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
            if np.any(err > 0):
                k, j = np.unravel_index(np.argmax(err), err.shape)
                msg = (f"gradcheck: Jacobian mismatch for output {oi} with respect to input {i}: at input element "
                       f"{k}, output element {j}: analytical {analytic[k, j]:.8g} vs numerical "
                       f"{numeric[k, j]:.8g} (atol={atol}, rtol={rtol})")
                if raise_exception:
                    raise AutogradError(msg)
                return False
    return True
