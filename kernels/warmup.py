"""Compiling the eager kernels ahead of time: ``dj.warmup`` (and ``dispatch-jit warmup``).

A kernel compiles on its first call, once per dtype signature and loop shape (see
elementwise/cpu.py: flat or strided, serial or parallel; the reductions' variants), and is
then kept on disk (dispatch_jit/jit/diskcache.py), so a later process loads it in a few
milliseconds.  Warming up makes those first calls now: each named op is called, for each
dtype, in the layouts a model's calls take (the rules below: a matrix, a vector broadcast
against it, Python scalars on either side, in place for the optimizer's updates), and for
float dtypes its backward runs too, so that the derivative formulas' kernels are ready as
well.  Calling the ops, rather than listing kernels, warms exactly what a call will look up.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dispatch_jit.autograd import no_grad
from dispatch_jit.creation import tensor
from dispatch_jit.dispatcher import ExcludeDispatchKeyGuard
from dispatch_jit.dtypes import FLOAT, INT, as_dtype, float16, float32
from dispatch_jit.errors import DispatchJitError, UnknownOperatorError
from dispatch_jit.jit import cache
from dispatch_jit.keys import DispatchKey
from dispatch_jit.registry import lookup

from .elementwise.table import ELEMENTWISE_SCHEMAS, SCALAR_OPS
from .reduction.table import REDUCTIONS
from .surface import FUNCTIONS

__all__ = ["warmup", "WarmupInfo", "TRAINING_OPS", "PARALLEL_SIZE"]

# The ops of a training step (an MLP's forward and backward, the loss, SGD's and Adam's updates)
TRAINING_OPS = ("add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "square", "tanh", "relu", "sigmoid",
                "tanh_backward", "sigmoid_backward",
                "gelu", "silu", "maximum", "where", "matmul", "linear", "sum", "mean", "amax", "logsumexp",
                "softmax", "log_softmax", "mse_loss", "nll_loss", "cross_entropy_loss")

# a matrix of this many rows and columns reaches the parallel loops (elementwise PARALLEL_MIN = 2**18)
PARALLEL_SIZE = 512


def _call(*args, **kwargs):
    return args, kwargs


def _unary(m, v, z):
    return [_call(a) for a in (m, v, z)]


def _binary(m, v, z):
    # per rank (a loss is 0-d, a bias 1-d): same shape, and a Python scalar on either side (int and
    # float: each is its own kernel signature); then a vector broadcast against a matrix
    return [_call(*p) for a in (m, v, z) for p in ((a, a), (a, 2), (a, 0.5), (0.5, a))] + [_call(m, v), _call(v, m)]


def _reduce(m, v, z):
    return [_call(m), _call(m, axis=1), _call(m, axis=0), _call(v)]


def _softmax(m, v, z):
    return [_call(m, axis=1), _call(m, axis=0), _call(v, axis=0)]


# op -> the calls that warm it up (argument tuples and keywords), over a square matrix m, a vector v
# and a 0-d tensor z of the dtype
RULES = {
    **{name: (_unary if op.arity == 1 else _binary) for name, op in SCALAR_OPS.items() if op.arity <= 2},
    "where": lambda m, v, z: [_call(m > v, m, v), _call(m > v, m, 0.0)],
    "clamp": lambda m, v, z: [_call(m, v, None), _call(m, None, v), _call(m, v, m)],
    **{name: _reduce for name in REDUCTIONS},
    "amax": _reduce, "amin": _reduce,
    "softmax": _softmax, "log_softmax": _softmax,
    "gelu": _unary, "silu": _unary,
    "mse_loss": lambda m, v, z: [_call(m, m), _call(v, v)],
    "matmul": lambda m, v, z: [_call(m, m), _call(m, v), _call(v, m), _call(v, v)],
    "dot": lambda m, v, z: [_call(v, v)],
    "linear": lambda m, v, z: [_call(m, m), _call(m, m, v)],
    # losses over class indices (m's rows as logits or log-probabilities, 3 classes)
    "nll_loss": lambda m, v, z: [_call(m, _classes()), _call(m, _classes(), reduction="sum")],
    "cross_entropy_loss": lambda m, v, z: [_call(m, _classes()), _call(m, _classes(), reduction="sum")],
}
RULES.pop("max", None), RULES.pop("min", None)   # the reductions' public names are amax and amin


def _classes():
    """Class indices (int64) for the losses, one per row of m."""
    return tensor(np.array([0, 2, 1]))


def _overload(name: str) -> str | None:
    """The overload a warm-up name calls: its public function's (``amax`` -> ``max``), or the op
    of that name (``cross_entropy_loss``, which dj.nn.functional.cross_entropy calls)."""
    full = FUNCTIONS.get(name, name)
    try:
        lookup("aten::" + full)
    except LookupError:
        return None
    return full


def _inplace(name: str):
    """The in-place op's entry (``add_``), for the calls an optimizer's update makes, or None."""
    schemas = ELEMENTWISE_SCHEMAS.get(name)
    if not schemas or not schemas[1] or SCALAR_OPS[name].arity != 2:
        return None
    return lookup("aten::" + schemas[1].split("(")[0]).entry


class WarmupInfo(NamedTuple):
    """What ``warmup`` did: kernels compiled, kernels loaded from the disk cache, and the
    (op, dtype, reason) it skipped because the op refuses that dtype."""
    compiled: int
    loaded: int
    skipped: list


def _inputs(dt, n: int, grad: bool):
    # positive, nonzero and below 1: in the domain of log, sqrt, asin, integer division, ...
    base = (np.arange(1, n * n + 1).reshape(n, n) % 7 + 1) / 8
    if dt.category <= INT:         # bool and integers: small positive values
        base = np.arange(1, n * n + 1).reshape(n, n) % 5 + 1
    return tuple(tensor(a.astype(dt.np), requires_grad=grad) for a in (base, base[0], base[0, 0]))


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0]


def _warm(name: str, dt, n: int) -> str | None:
    """Make ``name``'s calls for ``dt`` (forward, backward where differentiable, in place); None,
    or why the op refuses the dtype (every call refused)."""
    f = lookup("aten::" + _overload(name)).entry
    grad = dt.category >= FLOAT and dt is not float16     # float16's backward computes in float32's kernels
    try:
        calls = RULES[name](*_inputs(dt, n, grad))       # (m > v, for where, is a call too)
    except DispatchJitError as e:
        return _first_line(e)
    outs, refused = [], None
    for args, kwargs in calls:
        try:
            outs.append(f(*args, **kwargs))
        except DispatchJitError as e:   # this dtype with that scalar (bitwise_and(int, 0.5)): refused, as in torch
            refused = refused or e
    if not outs:
        return _first_line(refused)
    diff = [o for o in outs if getattr(o, "requires_grad", False)]
    if diff:
        loss = diff[0].sum()
        for o in diff[1:]:
            loss = loss + o.sum()
        try:
            loss.backward()
        except DispatchJitError as e:      # an op without a derivative: its forward is warm
            return "backward: " + _first_line(e)
    inplace = _inplace(name)
    if inplace is not None:
        with no_grad():
            m, v, _ = _inputs(dt, n, False)
            for target, other in ((m, m), (m, v), (m, 0.5), (m, 2), (v, v), (v, 0.5), (v, 2)):
                try:
                    inplace(target.clone(), other)
                except DispatchJitError:
                    pass                    # e.g. an int tensor updated by a float: refused, as in torch
    return None


def warmup(ops=None, dtypes=None, *, parallel: bool = False) -> WarmupInfo:
    """Compile (or load from the disk cache) the eager CPU kernels of ``ops`` for ``dtypes`` now,
    instead of on their first calls.

    Args:
        ops: public op names (``"add"``, ``"matmul"``, ``"log_softmax"``, ...); default
            ``TRAINING_OPS``, what a training step calls (forward, backward, loss, optimizer).
        dtypes: dtypes or their names; default ``float32``.
        parallel: also the parallel variants, which large tensors use (from 2**18 elements).

    Each op runs in the layouts model code uses (contiguous, broadcast, with Python scalars, in
    place) and, for float dtypes, backward, so its derivative's kernels are warm too.  The
    kernels stay in memory for this process and on disk (``DISPATCH_JIT_CACHE_DIR``) for the
    next ones.  Runs eagerly even in compiled mode.  ``dispatch-jit warmup`` does the same from
    the command line.

    Returns:
        ``WarmupInfo(compiled, loaded, skipped)``: how many kernels were compiled and how many
        loaded from disk (those already in memory count in neither), and the (op, dtype,
        reason) pairs skipped because the op refuses the dtype.

    >>> import dispatch_jit as dj
    >>> info = dj.warmup(["add", "tanh"], ["float32", "int64"])
    >>> dj.warmup(["add", "tanh"], ["float32", "int64"]).compiled   # all in memory now
    0
    >>> dj.warmup(["bitwise_and"], ["float32"]).skipped[0][:2]
    ('bitwise_and', 'float32')
    """
    names = list(TRAINING_OPS if ops is None else ([ops] if isinstance(ops, str) else ops))
    unknown = [n for n in names if n not in RULES or _overload(n) is None]
    if unknown:
        raise UnknownOperatorError(f"warmup: no op named {', '.join(map(repr, unknown))}; the ops it can warm up: "
                                   f"{', '.join(sorted(n for n in RULES if _overload(n) is not None))}")
    dts = [float32] if dtypes is None else [as_dtype(d) for d in ([dtypes] if isinstance(dtypes, str) else dtypes)]
    before = cache.totals()
    skipped = []
    sizes = (3, PARALLEL_SIZE) if parallel else (3,)
    # compiled mode records ops into a graph (the Tracer key): warm-up runs the eager kernels
    with ExcludeDispatchKeyGuard(DispatchKey.Tracer):
        for name in names:
            for dt in dts:
                for n in sizes:
                    why = _warm(name, dt, n)
                    if why is not None:
                        skipped.append((name, dt.name, why))
                        break
    after = cache.totals()
    return WarmupInfo(after["compiled"] - before["compiled"], after["disk"] - before["disk"], skipped)
