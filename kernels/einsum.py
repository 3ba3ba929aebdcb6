"""``einsum`` by reduction to the ops autograd and the compiler already know: each operand's
repeated letters become a diagonal (a ``where`` against an identity mask, summed), letters no
other operand and not the output has are summed away, and the operands are contracted pairwise
as one batched ``matmul`` each: (batch, free_a, summed) @ (batch, summed, free_b), by
permute and reshape.  ``...`` stands for the same leading dimensions in every operand
(broadcast as matmul broadcasts them).  The output's letters, explicit after ``->`` or, without
it, the letters used once in alphabetical order, as NumPy and PyTorch.
"""

from __future__ import annotations

import math
import string

from dispatch_jit.errors import DTypeError, SchemaError, ShapeError
from dispatch_jit.ops import entries

__all__ = ["einsum"]

A = entries("aten")
_LETTERS = set(string.ascii_letters)


def _parse(equation: str, operands) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise SchemaError(f"einsum: the equation {equation!r} has {len(terms)} operand(s) but {len(operands)} "
                          f"tensor(s) were given")
    # '...' becomes upper-case-free private letters: one per broadcast dimension, shared by all terms
    nell = max((t.ndim - (len(s) - 3) for s, t in zip(terms, operands) if "..." in s), default=0)
    used = set(eq) - {".", ",", "-", ">"}
    bad = used - _LETTERS
    if bad:
        raise SchemaError(f"einsum: {equation!r} uses {''.join(sorted(bad))!r}; subscripts are letters a-z, A-Z "
                          f"and '...'")
    spare = [c for c in string.ascii_letters if c not in used][:nell]
    if len(spare) < nell:
        raise SchemaError(f"einsum: {equation!r} leaves too few free letters for its '...' dimensions")
    ell = "".join(spare)
    fixed = []
    for s, t in zip(terms, operands):
        if "..." in s:
            k = t.ndim - (len(s) - 3)
            if k < 0:
                raise ShapeError(f"einsum: operand {s!r} has fewer dimensions ({t.ndim}) than its subscripts")
            s = s.replace("...", ell[nell - k:])
        if len(s) != t.ndim:
            raise ShapeError(f"einsum: subscripts {s!r} name {len(s)} dimensions but the operand has shape "
                             f"{tuple(t.shape)}")
        fixed.append(s)
    if arrow:
        out = out.replace("...", ell)
        if "." in out or len(set(out)) != len(out) or set(out) - set("".join(fixed)):
            raise SchemaError(f"einsum: the output {out!r} of {equation!r} must name distinct letters of the "
                              f"inputs")
    else:
        counts = {c: "".join(fixed).count(c) for c in set("".join(fixed))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return fixed, out


def _diagonal(t, s: str):
    """``t`` with each repeated letter of ``s`` kept once (the diagonal over its dimensions)."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise ShapeError(f"einsum: subscript {c!r} repeats over dimensions of sizes {t.shape[i]} and "
                             f"{t.shape[j]}")
        order = [k for k in range(t.ndim) if k not in (i, j)] + [i, j]
        # a select, not a multiply by the identity: NaN off the diagonal must not leak in
        t = A.sum(A.where(_eye_mask(t.shape[i]), A.permute(t, order), 0), -1)
        s = "".join(s[k] for k in order[:-2]) + c
    return t, s


def _eye_mask(n: int):
    from dispatch_jit.creation import eye
    from dispatch_jit.dtypes import bool_
    return eye(n, dtype=bool_)


def _sum_out(t, s: str, keep: set):
    axes = [k for k, c in enumerate(s) if c not in keep]
    if axes:
        t = A.sum(t, axes)
        s = "".join(c for c in s if c in keep)
    return t, s


def _contract(a, sa: str, b, sb: str, keep: set):
    """a (subscripts sa) times b (sb), summed over the letters they share that ``keep`` lacks."""
    sizes = {}
    for t, s in ((a, sa), (b, sb)):
        for c, n in zip(s, t.shape):
            if sizes.setdefault(c, n) != n and 1 not in (n, sizes[c]):
                raise ShapeError(f"einsum: subscript {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes[c], n)
    batch = [c for c in sa if c in sb and c in keep]
    summed = [c for c in sa if c in sb and c not in keep]
    fa = [c for c in sa if c not in sb]
    fb = [c for c in sb if c not in sa]
    pa = A.permute(a, [sa.index(c) for c in batch + fa + summed])
    pb = A.permute(b, [sb.index(c) for c in batch + summed + fb])
    bshape = [max(a.shape[sa.index(c)], b.shape[sb.index(c)]) for c in batch]
    na, nb, ns = (math.prod(sizes[c] for c in part) for part in (fa, fb, summed))
    pa = A.reshape(A.expand(pa, bshape + list(pa.shape[len(batch):])), bshape + [na, ns])
    pb = A.reshape(A.expand(pb, bshape + list(pb.shape[len(batch):])), bshape + [ns, nb])
    r = A.matmul(pa, pb)
    return A.reshape(r, bshape + [sizes[c] for c in fa + fb]), "".join(batch + fa + fb)


def einsum(equation, *operands):
    """Sum of products over the subscripts of ``equation`` (NumPy's and PyTorch's notation).

    >>> import dispatch_jit as dj
    >>> a = dj.tensor([[1., 2.], [3., 4.]])
    >>> dj.einsum("ij,jk->ik", a, a)      # matmul
    tensor([[ 7., 10.],
            [15., 22.]])
    >>> dj.einsum("ii", a)                # trace
    tensor(5.)
    >>> dj.einsum("ij->j", a)             # column sums
    tensor([4., 6.])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise SchemaError(f"einsum: the first argument is the equation (a str), got {type(equation).__name__}")
    if len({t.dtype for t in operands}) > 1:
        raise DTypeError(f"einsum: expected all operands to have the same dtype (as PyTorch's), got "
                         f"{[t.dtype.name for t in operands]}; convert them: t.to(dtype)")
    terms, out = _parse(equation, operands)
    ts = []
    for k, (t, s) in enumerate(zip(operands, terms)):
        t, s = _diagonal(t, s)
        # a letter only this operand has, and not the output, is summed away before any product
        elsewhere = set(out).union(*(set(o) for m, o in enumerate(terms) if m != k))
        ts.append(_sum_out(t, s, elsewhere))
    # contract left to right; a letter is summed once no later operand and not the output has it
    t, s = ts[0]
    for k in range(1, len(ts)):
        keep = set(out).union(*(set(ss) for _, ss in ts[k + 1:]))
        b, sb = ts[k]
        t, s = _contract(t, s, b, sb, keep)
    t, s = _sum_out(t, s, set(out))
    return A.permute(t, [s.index(c) for c in out]) if s != out else t
