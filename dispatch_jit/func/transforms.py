"""grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian: torch.func's transforms over dj's autograd.

Each call of a transformed function is one level: its inputs become fresh differentiable
aliases (a detached leaf, or a view of an input that an outer level differentiates, so
the outer graph continues through it), the function runs under enable_grad, and
``autograd.grad`` asks for exactly those aliases.  Inside another transform the
gradients are built with ``create_graph`` so the outer level can differentiate them
(``grad(grad(f))``, ``hessian``).  Inside vmap the aliases are BatchedTensors; autograd sits
above the Batched key, so the graph and the backward run on the batched tensors
(per-example gradients).

Forward mode (``jvp``, ``jacfwd``) is the double-vjp construction: with ``g(u) = vjp(f, x)(u)``,
which is linear in the cotangent ``u``, ``J v = vjp(g, u)(v)``.  It is exact (no finite
differences) and needs every op of ``f`` to have a differentiable backward.
"""

from __future__ import annotations

import functools
import threading

from ..autograd import enable_grad
from ..autograd.engine import grad as _autograd_grad
from ..dispatcher import tls as _dispatch_tls
from ..errors import InvalidArgumentError, ShapeError
from ..keys import DispatchKey, key_bits
from ..tensor import Tensor, trace_of
from .pytree import tree_flatten, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"]


class _Depth(threading.local):
    def __init__(self):
        self.n = 0


_depth = _Depth()


class _level:
    """One transform level: while it runs, inner levels build differentiable gradients."""

    def __enter__(self):
        _depth.n += 1

    def __exit__(self, *exc):
        _depth.n -= 1


def _outer_active() -> bool:
    return _depth.n > 1


_TRACER_BIT = key_bits(DispatchKey.Tracer)


def _leaf(t: Tensor) -> Tensor:
    """``t`` (not requiring grad, owned by this level) as a leaf of this level's graph.

    Inside dj.compile's trace a leaf must be a value of the graph: a real tensor that requires
    grad would be lifted as an input of the plan, as a model's parameter is, and the compiled
    call then treated as differentiable from outside (a ``detach()`` of this level aborts it).
    A real ``t`` (a cotangent placeholder, a captured tensor, jacfwd's basis) becomes one by a
    recorded copy, where the trace differentiates its values at a transform's level (a forward
    trace, ``FORWARD``; lazy mode's recorder and a whole step's trace keep the real leaf, as
    before).  A symbolic tensor's own ``requires_grad_`` aborts for the user's code; Tensor's is
    right for a leaf that never leaves the level (``_lower``)."""
    if trace_of(t) is None and _dispatch_tls.include & _TRACER_BIT:
        copy = t.clone()
        if getattr(trace_of(copy), "FORWARD", False):
            t = copy
    if trace_of(t) is not None:
        return Tensor.requires_grad_(t, True)
    return t.requires_grad_(True)


def _lift(x):
    """A differentiable alias of input ``x`` for this level."""
    if not isinstance(x, Tensor):
        return x
    if x.requires_grad:
        return x.view(list(x.shape))      # keeps the outer level's graph flowing through
    return _leaf(x.detach())


def _lower(x, keep: bool):
    return x if keep or not isinstance(x, Tensor) else x.detach()


def _zeros_like(x):
    from ..creation import zeros_like
    return zeros_like(x)


def _argnums_check(name, argnums, args):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    if isinstance(argnums, tuple) and not argnums:
        raise InvalidArgumentError(f"{name}: argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int):
            raise InvalidArgumentError(f"{name}: argnums must be int or Tuple[int, ...], got: {type(a)}")
        if not -len(args) <= a < len(args):
            raise InvalidArgumentError(f"Got argnums={a}, but only {len(args)} positional inputs")
    return tuple(a % len(args) for a in nums)


def _grads(out, flat_in, cotangents, keep):
    needs = [t for t in flat_in if isinstance(t, Tensor)]
    outs = [o for o in out]
    live = [(o, c) for o, c in zip(outs, cotangents) if isinstance(o, Tensor) and o.requires_grad]
    if not live or not needs:
        return [_zeros_like(t) if isinstance(t, Tensor) else None for t in flat_in]
    gs = _autograd_grad([o for o, _ in live], needs, grad_outputs=[c for _, c in live], retain_graph=True,
                        create_graph=keep, allow_unused=True)
    res, it = [], iter(gs)
    for t in flat_in:
        if isinstance(t, Tensor):
            g = next(it)
            res.append(_zeros_like(t) if g is None else _lower(g, keep))
        else:
            res.append(None)
    return res


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``func``'s gradient with respect to the inputs ``argnums``, and its value
    (``torch.func.grad_and_value``).

    >>> import dispatch_jit as dj
    >>> g, v = dj.func.grad_and_value(lambda x: (x ** 2).sum())(dj.tensor([1.0, 2.0]))
    >>> g, v
    (tensor([2., 4.]), tensor(5.))
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_check("grad_and_value(f)(*args)", argnums, args)
        with _level(), enable_grad():
            keep = _outer_active()
            args = list(args)
            diff = tuple(args[i] for i in nums)
            flat, spec = tree_flatten(diff)
            lifted = [_lift(t) for t in flat]
            keep = keep or any(isinstance(t, Tensor) and t.requires_grad and t.grad_fn is not None
                               for t in lifted)
            new_diff = tree_unflatten(lifted, spec)
            for i, v in zip(nums, new_diff):
                args[i] = v
            out = func(*args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise InvalidArgumentError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                               "(output, aux) if has_aux is True")
                out, aux = out
            if not isinstance(out, Tensor):
                raise InvalidArgumentError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                           f"{type(out)}")
            if out.ndim != 0:
                raise ShapeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                 f"tensor with {out.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs "
                                 f"instead?")
            gs = _grads([out], lifted, [None], keep)
        g = tree_unflatten(gs, spec)
        g = g[0] if not isinstance(argnums, tuple) else g
        value = _lower(out, keep)
        if has_aux:      # unwrapped at this level as torch.func's: no graph of this level's aliases
            flat_aux, aspec = tree_flatten(aux)
            return g, (value, tree_unflatten([_lower(a, keep) for a in flat_aux], aspec))
        return g, value
    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of scalar-valued ``func`` with respect to its inputs ``argnums`` (``torch.func.grad``).

    >>> import dispatch_jit as dj
    >>> dj.func.grad(lambda x: x.sin().sum())(dj.tensor([0.0]))
    tensor([1.])
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` gives the vector-Jacobian product for each
    primal (``torch.func.vjp``).

    >>> import dispatch_jit as dj
    >>> out, vjp_fn = dj.func.vjp(lambda x: x * 3, dj.tensor([1.0, 2.0]))
    >>> vjp_fn(dj.tensor([1.0, 1.0]))
    (tensor([3., 3.]),)
    """
    with _level(), enable_grad():
        keep_outer = _outer_active()
        flat, spec = tree_flatten(primals)
        lifted = [_lift(t) for t in flat]
        out = func(*tree_unflatten(lifted, spec))
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise InvalidArgumentError("vjp(f, *primals): output of function f should be a tuple: "
                                           "(output, aux) if has_aux is True")
            out, aux = out
    flat_out, ospec = tree_flatten(out)
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise InvalidArgumentError(f"vjp(f, *primals): Expected f to be a function that has non-empty output "
                                       f"of Tensors, got {type(o)}")
    keep_graph = keep_outer or any(isinstance(t, Tensor) and t.grad_fn is not None for t in lifted)

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        flat_ct, cspec = tree_flatten(cotangents)
        if len(flat_ct) != len(flat_out):
            raise InvalidArgumentError(f"Expected pytree structure of cotangents to be the same as pytree structure "
                                       f"of outputs to the function: {len(flat_ct)} cotangents for "
                                       f"{len(flat_out)} outputs")
        for c, o in zip(flat_ct, flat_out):
            if tuple(c.shape) != tuple(o.shape):
                raise ShapeError(f"Mismatch in shape: grad_output has a shape of {tuple(c.shape)} and output has "
                                 f"a shape of {tuple(o.shape)}")
        keep = create_graph if create_graph is not None else (
            keep_graph or _depth.n > 0 or any(c.requires_grad for c in flat_ct))
        with _level(), enable_grad():
            gs = _grads(flat_out, lifted, flat_ct, keep)
        return tuple(tree_unflatten(gs, spec))

    value = tree_unflatten([_lower(o, keep_graph) for o in flat_out], ospec)
    if has_aux:      # unwrapped at this level, as torch.func's
        flat_aux, aspec = tree_flatten(aux)
        return value, vjp_fn, tree_unflatten([_lower(a, keep_graph) for a in flat_aux], aspec)
    return value, vjp_fn


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)``: the Jacobian-vector product (``torch.func.jvp``), by the
    double-vjp construction (exact).

    >>> import dispatch_jit as dj
    >>> dj.func.jvp(lambda x: x ** 2, (dj.tensor([1.0, 3.0]),), (dj.tensor([1.0, 1.0]),))
    (tensor([1., 9.]), tensor([2., 6.]))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise InvalidArgumentError("jvp(f, primals, tangents): Expected primals and tangents to be tuples. E.g. "
                                   "jvp(f, (x,), (t,))")
    fp, _ = tree_flatten(primals)
    ft, _ = tree_flatten(tangents)
    if len(fp) != len(ft):
        raise InvalidArgumentError("jvp(f, primals, tangents): Expected primals and tangents to have the same "
                                   "python structure")
    for p, t in zip(fp, ft):
        if tuple(p.shape) != tuple(t.shape):
            raise ShapeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape, "
                             f"got {tuple(p.shape)} and {tuple(t.shape)}")
    with _level(), enable_grad():
        res = vjp(func, *primals, has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        flat_out, ospec = tree_flatten(out)
        us = [_leaf(_zeros_like(o)) for o in flat_out]
        gs = vjp_fn(tree_unflatten(us, ospec), create_graph=True)
        flat_g, _ = tree_flatten(gs)
        live = [(g, t) for g, t in zip(flat_g, ft) if isinstance(g, Tensor) and g.requires_grad]
        keep = _outer_active() or any(isinstance(t, Tensor) and t.requires_grad for t in fp + ft)
        if live:
            jv = _autograd_grad([g for g, _ in live], us, grad_outputs=[t for _, t in live], retain_graph=True,
                                create_graph=keep, allow_unused=True)
        else:
            jv = [None] * len(us)
        jv = [_zeros_like(o) if j is None else _lower(j, keep) for j, o in zip(jv, flat_out)]
    tangent_out = tree_unflatten(jv, ospec)
    out = tree_unflatten([_lower(o, keep) for o in flat_out], ospec)
    if has_aux:      # unwrapped at this level, as torch.func's (vjp kept its graph for this level)
        flat_aux, aspec = tree_flatten(res[2])
        return out, tangent_out, tree_unflatten([_lower(a, keep) for a in flat_aux], aspec)
    return out, tangent_out


def _basis(t):
    """The standard basis of ``t``'s space, shaped (t.numel(), *t.shape)."""
    from ..creation import eye
    n = t.numel()
    return eye(n, dtype=t.dtype).reshape([n] + list(t.shape))


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """The Jacobian of ``func`` by reverse mode: ``vmap`` of its vjp over the outputs' basis
    (``torch.func.jacrev``); shape ``out.shape + in.shape``.

    >>> import dispatch_jit as dj
    >>> dj.func.jacrev(lambda x: x * x)(dj.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    from .vmap import vmap

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_check("jacrev(f)(*args)", argnums, args)

        def part(*diff):
            full = list(args)
            for i, v in zip(nums, diff):
                full[i] = v
            return func(*full, **kwargs)
        res = vjp(part, *[args[i] for i in nums], has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        flat_out, ospec = tree_flatten(out)
        per_out = []
        for j, o in enumerate(flat_out):
            basis = _basis(o)

            def one(ct, j=j):
                cts = [c if k == j else _zeros_like(c) for k, c in enumerate(flat_out)]
                cts[j] = ct
                return vjp_fn(tree_unflatten(cts, ospec))
            rows = vmap(one, chunk_size=chunk_size)(basis)     # per input: (o.numel(), *in.shape)
            jac = tuple(r.reshape(list(o.shape) + list(args[i].shape)) for r, i in zip(rows, nums))
            per_out.append(jac if isinstance(argnums, tuple) else jac[0])
        jac = tree_unflatten(per_out, ospec)
        return (jac, res[2]) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of ``func`` by forward mode: ``vmap`` of its jvp over the inputs' basis
    (``torch.func.jacfwd``); shape ``out.shape + in.shape``.

    >>> import dispatch_jit as dj
    >>> dj.func.jacfwd(lambda x: x.sin())(dj.tensor([0.0, 0.0]))
    tensor([[1., 0.],
            [0., 1.]])
    """
    from .vmap import vmap

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_check("jacfwd(f)(*args)", argnums, args)
        primals = tuple(args[i] for i in nums)

        def part(*diff):
            full = list(args)
            for i, v in zip(nums, diff):
                full[i] = v
            return func(*full, **kwargs)
        jac_per_in = []
        aux = None
        for k, p in enumerate(primals):
            basis = _basis(p)

            def push(t, k=k):
                tangents = tuple(t if m == k else _zeros_like(q) for m, q in enumerate(primals))
                r = jvp(part, primals, tangents, has_aux=has_aux)
                return r[1]
            cols = vmap(push, randomness=randomness)(basis)      # (p.numel(), *out.shape) per output
            flat_cols, ospec = tree_flatten(cols)
            moved = []
            for c in flat_cols:
                out_nd = c.ndim - 1
                c = c.permute(list(range(1, out_nd + 1)) + [0])
                moved.append(c.reshape(list(c.shape[:out_nd]) + list(p.shape)))
            jac_per_in.append((moved, ospec))
        if has_aux:
            aux = jvp(part, primals, tuple(_zeros_like(q) for q in primals), has_aux=True)[2]
        n_out = len(jac_per_in[0][0])
        ospec = jac_per_in[0][1]
        outs = []
        for j in range(n_out):
            per = tuple(m[j] for m, _ in jac_per_in)
            outs.append(per if isinstance(argnums, tuple) else per[0])
        jac = tree_unflatten(outs, ospec)
        return (jac, aux) if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of scalar ``func``: ``jacfwd(jacrev(func))`` (``torch.func.hessian``).

    >>> import dispatch_jit as dj
    >>> dj.func.hessian(lambda x: (x ** 3).sum())(dj.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)
