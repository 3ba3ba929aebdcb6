"""``dj.func.vmap``: torch.func.vmap over the Batched key.

vmap pushes a level, wraps each mapped input as a BatchedTensor of that level (the batch
at its in_dim), calls the function (every op on a wrapped tensor runs its batching rule),
then unwraps the outputs of that level, moving the batch to each out_dim.  An output that
does not depend on the mapped inputs is expanded to the batch, as torch.func's.
"""

from __future__ import annotations

import functools

from ..errors import InvalidArgumentError
from ..tensor import Tensor
from ..errors import VmapError
from .batched import BatchedTensor, pop_level, push_level, unwrap_at, wrap_batched
from .pytree import tree_flatten, tree_unflatten, broadcast_prefix

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """Vectorize ``func`` over a batch dimension of its inputs (``torch.func.vmap``).

    Args:
        func: a function of tensors (and nested tuples/lists/dicts of them) returning the same.
        in_dims: for each positional input, the dim to map over, or None to pass it unmapped; an
            int applies to all inputs, a nested structure matches the inputs' structure.
        out_dims: where the batch dim goes in each output (an int, or one per output).
        randomness: "error" (random ops inside raise), "same" (one draw shared by the batch) or
            "different" (each example its own draw: the draw is made once at the batch's shape).
        chunk_size: run the batch in chunks of this many examples (less memory), then concatenate.

    >>> import dispatch_jit as dj
    >>> x = dj.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> dj.func.vmap(lambda r: r.sum())(x)
    tensor([3., 7.])
    >>> dj.func.vmap(dj.dot, in_dims=(0, None))(x, dj.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    if randomness not in _RANDOMNESS:
        raise InvalidArgumentError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                                   f"Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise InvalidArgumentError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return wrapped


def _fname(func) -> str:
    return getattr(func, "__name__", repr(func))


def _flat_in_dims(func, in_dims, args):
    if not isinstance(in_dims, (int, tuple)) and in_dims is not None:
        raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or "
                        f"a (potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise VmapError(f"vmap({_fname(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
                        f"are trying to vmap over a function with no inputs. The latter is unsupported.")
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
                        f"the structure of `inputs`. in_dims has structure {len(in_dims)} but inputs has "
                        f"structure {len(args)} (one entry per positional input).")
    flat_args, spec = tree_flatten(args)
    try:
        flat_dims = broadcast_prefix(in_dims, args)
    except InvalidArgumentError:
        raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with "
                        f"the structure of `inputs`.") from None
    return flat_args, spec, flat_dims


def _batch_size(func, in_dims, flat_args, flat_dims, names):
    size = None
    for i, (a, d) in enumerate(zip(flat_args, flat_dims)):
        if d is None:
            continue
        if not isinstance(d, int):
            raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims must be int or None "
                            f"for each input, got {d!r} for {names[i]}")
        if not isinstance(a, Tensor):
            raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input "
                            f"but the input is of type {type(a)}. We cannot vmap over non-Tensor arguments, please "
                            f"use None as the respective in_dim")
        if not -max(a.ndim, 1) <= d < max(a.ndim, 1) or a.ndim == 0:
            raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, "
                            f"but that input is a Tensor of dimensionality {a.ndim} so expected in_dim to satisfy "
                            f"-{a.ndim} <= in_dim < {a.ndim}.")
        n = a.shape[d]
        if size is None:
            size = n
        elif n != size:
            raise VmapError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                            f"{size} and {n} for the mapped dimension ({names[i]} has size {n})")
    if size is None:
        raise VmapError(f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>): at least one input must be a "
                        f"Tensor mapped over a dim (in_dims all None or no tensors among the inputs)")
    return size


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    flat_args, spec, flat_dims = _flat_in_dims(func, in_dims, args)
    names = [f"input {i}" for i in range(len(flat_args))]
    B = _batch_size(func, in_dims, flat_args, flat_dims, names)
    if chunk_size is None or chunk_size >= B:
        return _run(func, flat_args, spec, flat_dims, out_dims, randomness, B, kwargs)
    from ..registry import lookup
    cat = lookup("aten::cat").entry
    pieces = []
    for start in range(0, B, chunk_size):
        n = min(chunk_size, B - start)
        chunk = [a if d is None else a.narrow(d, start, n) for a, d in zip(flat_args, flat_dims)]
        pieces.append(_run(func, chunk, spec, flat_dims, out_dims, randomness, n, kwargs))
    flat0, ospec = tree_flatten(pieces[0])
    odims = broadcast_prefix(out_dims, pieces[0])
    flats = [tree_flatten(p)[0] for p in pieces]
    out = [cat([f[j] for f in flats], o if o is not None else 0) if o is not None else flat0[j]
           for j, o in enumerate(odims)]
    return tree_unflatten(out, ospec)


def _run(func, flat_args, spec, flat_dims, out_dims, randomness, B, kwargs):
    from . import randomness as _random
    level = push_level(B, randomness)
    try:
        wrapped = [a if d is None else wrap_batched(a, d, level) for a, d in zip(flat_args, flat_dims)]
        with _random.vmap_randomness(randomness, B, level):
            out = func(*tree_unflatten(wrapped, spec), **kwargs)
        return _unwrap_outputs(func, out, out_dims, level, B)
    except _random.NeedsLoop as e:
        if e.level != level:
            raise
    finally:
        pop_level(level)
    return _run_per_example(func, flat_args, spec, flat_dims, out_dims, B, kwargs)


def _run_per_example(func, flat_args, spec, flat_dims, out_dims, B, kwargs):
    """randomness="different" with a random draw inside: one call per example, each drawing its
    own values, the outputs stacked at out_dims."""
    from . import randomness as _random
    from ..registry import lookup
    stack = lookup("aten::stack").entry
    outs = []
    with _random.per_example():
        for i in range(B):
            ex = [a if d is None else _take(a, d, i)
                  for a, d in zip(flat_args, flat_dims)]
            outs.append(func(*tree_unflatten(ex, spec), **kwargs))
    flats = [tree_flatten(o)[0] for o in outs]
    ospec = tree_flatten(outs[0])[1]
    odims = broadcast_prefix(out_dims, outs[0])
    res = []
    for j, d in enumerate(odims):
        if d is None:
            res.append(flats[0][j])
        else:
            res.append(stack([f[j] for f in flats], d))
    return tree_unflatten(res, ospec)


def _take(a, d, i):
    return a.narrow(d, i, 1).squeeze(d)


def _unwrap_outputs(func, out, out_dims, level, B):
    flat, ospec = tree_flatten(out)
    try:
        odims = broadcast_prefix(out_dims, out)
    except InvalidArgumentError:
        raise VmapError(f"vmap({_fname(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
                        f"with the structure of `outputs`.") from None
    res = []
    for o, d in zip(flat, odims):
        if not isinstance(o, Tensor):
            raise VmapError(f"vmap({_fname(func)}, ...): `{_fname(func)}` must only return Tensors, got type "
                            f"{type(o)}. Did you mean to set out_dims= to None for output?")
        value, bdim = unwrap_at(o, level)
        if d is None:
            if bdim is not None:
                raise VmapError(f"vmap({_fname(func)}, ..., out_dims={out_dims})(<inputs>): can not return a "
                                f"BatchedTensor when out_dim is None")
            res.append(value)
            continue
        if bdim is None:        # the same for every example: expanded to the batch
            value = value.unsqueeze(0).expand((B,) + tuple(value.shape))
            bdim = 0
        nd = value.ndim
        if not -nd <= d < nd:
            raise VmapError(f"vmap: out_dim {d} is out of range for an output of {nd - 1} dims (with the batch: "
                            f"expected -{nd} <= out_dim < {nd})")
        d %= nd
        if bdim != d:
            perm = [i for i in range(nd) if i != bdim]
            perm.insert(d, bdim)
            value = value.permute(perm)
        res.append(value)
    return tree_unflatten(res, ospec)


__all__ += ["BatchedTensor"]
