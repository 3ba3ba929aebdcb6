"""vmap's batching rules for index and index_put (the Batched key): the batched input's batch dim
moved first and a None put in front of the index list, one call for the whole batch.  Where the
index entries are not adjacent, PyTorch's (and NumPy's) rule puts the indexed dims first, so the
batch dim lands after them.  Batched index tensors, and a batched ``values`` there, take the
looping fallback (kernels/batching/core.py)."""

from __future__ import annotations

from ..batching.core import BatchRule, front, invoke

__all__ = ["KERNELS"]


def _is_mask(t) -> bool:
    return t.dtype.name in ("bool", "uint8")


def _layout(x, indices) -> tuple:
    """(the index list for ``x`` with its batch dim first, the batch dim of the indexing result,
    the result's rank)."""
    full = [None, *indices]
    pos = [k for k, t in enumerate(full) if t is not None]
    adv = max((1 if _is_mask(full[k]) else full[k].ndim) for k in pos)   # the index tensors' broadcast rank
    kept = x.ndim - sum(full[k].ndim if _is_mask(full[k]) else 1 for k in pos)
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    return full, (0 if adjacent else adv), adv + kept


def _unbatched(bdims) -> bool:
    return all(b is None for b in (bdims or []))


def index_rule(op, args, bdims):
    x, indices = args
    if bdims[0] is None or not _unbatched(bdims[1]) or all(t is None for t in indices):
        return NotImplemented
    x = front(x, bdims[0])
    full, bdim, _ = _layout(x, indices)
    return invoke(op, [x, full]), bdim


def index_put_rule(op, args, bdims):
    x, indices, values, accumulate = args
    if bdims[0] is None or not _unbatched(bdims[1]) or all(t is None for t in indices):
        return NotImplemented
    x = front(x, bdims[0])
    full, bdim, rank = _layout(x, indices)
    if bdims[2] is not None:
        if bdim != 0:
            return NotImplemented
        # (B, *v) against the result (B, *R): v's own dims right-aligned, as unbatched values broadcast
        values = front(values, bdims[2])
        values = values.reshape((values.shape[0],) + (1,) * (rank - values.ndim) + tuple(values.shape[1:]))
    return invoke(op, [x, full, values, accumulate]), 0


KERNELS = {"Batched": {"index.Tensor": BatchRule(index_rule), "index_put": BatchRule(index_put_rule)}}
