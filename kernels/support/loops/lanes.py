"""The fold order of float sums and products: ``LANES`` partial results in a defined order.

A float sum's bits depend on the order of its additions.  Left to LLVM (a loop
compiled with reassociation), that order is whatever the vectorizer picks for
the loop at hand: a flat loop over 12 elements and a 3 x 4 nest over the same 12
round differently, so a fused ``(a * b).sum()`` over a broadcast ``b`` and eager's
sum of the stored product disagreed in the last bit.  Here the order is written
out instead, and every CPU loop that folds a float sum or product follows it:
eager reductions (kernels/reduction/codegen.py) and fused epilogues
(dispatch_jit/compiler/codegen.py), flat or strided, serial or in chunks:

* the reduced elements of one output (of one chunk, see ``parallel.full_chunks``)
  are numbered ``g = 0, 1, ...`` in the order the kernel walks them (C order of
  the reduced dimensions for a contiguous input);
* a fold of ``count`` elements uses ``nl`` lanes: the least power of two from
  ``TAIL`` on with ``4 * nl >= count``, at most ``LANES`` (a short fold pays for
  a short merge);
* element ``g`` is folded into lane ``g % nl``; each lane folds its elements in
  increasing ``g``, starting from the fold's initial value (0 or 1);
* the lanes (those never reached hold the initial value, so that each merge
  with one is exact) are then folded pairwise, ``ln[l] + ln[l + nl/2]`` for
  ``l < nl/2``, halving until one is left; chunk partials are folded after
  that, left to right in chunk order.

Every step is one strict (non-reassociable) ``+`` or ``*`` (``sadd``/``smul``),
so the bits follow from this text and not from the compiler (a kernel that
folds so is compiled without fast-math, which would reach into inlined steps).
Loops that keep one accumulator per output in memory (the column-wise shapes,
where the innermost dimension is kept) fold left to right, also strictly, in
eager and fused loops alike.  The lanes live in a small array: each run of
elements updates a contiguous slice of it, a loop LLVM vectorizes without
reassociating anything.

>>> print("\\n".join(lane_run("t0", "t1", "t", lambda t: ([], f"x[{t}]"), "0.0", "_sadd")))
ta = t0
while ta < t1:
    m = min(t1 - ta, nl - lp)
    tu = np.uint64(ta)
    lu = np.uint64(lp)
    mu = np.uint64(m)
    if fr:
        for u in range(mu):
            t = tu + u
            ln[lu + u] = _sadd(0.0, x[t])
    else:
        for u in range(mu):
            t = tu + u
            ln[lu + u] = _sadd(ln[lu + u], x[t])
    ta += m
    lp += m
    if lp == nl:
        lp -= nl
        fr = False
"""

from __future__ import annotations

from typing import Callable

import numba

__all__ = ["LANES", "TAIL", "ROW_BLOCK", "sadd", "smul", "lane_run", "lane_open", "lane_close", "stage_open", "full_walk",
           "rows_walk"]

# 128 float64 lanes: 16 AVX-512 registers' worth, long enough runs for the vectorized slice
# update and few enough to stay in L1.  Measured against a reassociated single-accumulator
# loop, 3e4 float32 on one core: 16 lanes 8.4 us (no vectorization: Numba turns off the SLP
# vectorizer), 64 lanes 3.0 us, 128 lanes 2.8 us, reassociated 2.3 us; NumPy 7.0 us.
LANES = 128
# the fewest lanes a fold uses (a power of two): the last levels of its merge are straight-line code
TAIL = 16

# strict: these steps keep their order when inlined into a loop compiled with reassociation
sadd = numba.njit(error_model="numpy")(lambda a, b: a + b)
smul = numba.njit(error_model="numpy")(lambda a, b: a * b)


def lane_open(count: str, dtype: str, alloc: bool = True) -> list[str]:
    """Statements starting a fold of ``count`` elements: the lanes ``ln`` (allocated where
    ``alloc``, of the constructor ``dtype``), how many it uses (``nl``, a power of two from
    ``TAIL`` to ``LANES``, a quarter of ``count`` or more), the next lane ``lp`` (0), and ``fr``: the lanes are not started
    (the first round of elements sets them).  The kernel's globals ``LANES`` and ``TAIL``
    have the type of ``count`` (Numba computes uint64 - int64 in float64)."""
    lines = [f"ln = np.empty(LANES, {dtype})"] if alloc else []
    return lines + [f"nc_ = {count}", "nl = nc_ - nc_ + TAIL", "while nl + nl + nl + nl < nc_ and nl < LANES:", "    nl += nl",
                    "lp = nl - nl", "fr = True"]


def stage_open(stage: str | None) -> list[str]:
    """The staging buffer ``vb`` of ``lane_run``'s ``cast`` form, of the constructor ``stage`` (none without)."""
    return [f"vb = np.empty(LANES, {stage})"] if stage else []


def lane_run(start: str, stop: str, var: str, value: Callable[[str], tuple[list, str]], init: str,
             step: str, cast: str | None = None) -> list[str]:
    """Statements folding the elements ``var`` in ``[start, stop)`` of one run into the ``nl``
    lanes from lane ``lp`` on; ``value(var)`` gives (statements, expression) of one element, already
    in the accumulator's dtype, ``init`` is the fold's initial value and ``step`` ``"_sadd"``
    or ``"_smul"``.  A slice of lanes never wraps, so it is started (``init`` folded with its
    first element, no separate pass) or continued as a whole.

    With ``cast`` (the accumulator's constructor), the expression is the element's own value:
    one loop computes the run's values into the staging buffer ``vb`` (``stage_open``), a second
    folds them, converted by ``cast``.  A loop that computes float32 values and folds them into
    float64 lanes vectorizes at float64's width, half float32's; staged, the computing loop runs
    at its own (measured: fused (x * y + 1).exp().sum() of 1e6 float32, serial, 0.91 -> 0.60 ms,
    the unfused loop plus eager sum 0.61 ms).  The values, their order and the bits are the same."""
    stmts, expr = value(var)
    compute = ["    for u in range(mu):", f"        {var} = tu + u"] + [f"        {s}" for s in stmts]

    def slice_(acc):
        if cast is not None:
            return ["    for u in range(mu):", f"        ln[lu + u] = {step}({acc}, {cast}(vb[u]))"]
        return compute + [f"        ln[lu + u] = {step}({acc}, {expr})"]

    staged = compute + [f"        vb[u] = {expr}"] if cast is not None else []

    # unsigned indices (the eager kernels' are already; the fused loops' are int64): with signed
    # ones Numba checks each load and lane store for a negative index, and the slice does not
    # vectorize (measured: fused (x * y + 1).exp().sum() of 1e6 float32 5.98 ms -> 0.95 ms)
    return ([f"ta = {start}", f"while ta < {stop}:", f"    m = min({stop} - ta, nl - lp)",
             "    tu = np.uint64(ta)", "    lu = np.uint64(lp)", "    mu = np.uint64(m)"] + staged + ["    if fr:"]
            + ["    " + s for s in slice_(init)] + ["    else:"] + ["    " + s for s in slice_("ln[lu + u]")]
            + ["    ta += m", "    lp += m", "    if lp == nl:", "        lp -= nl", "        fr = False"])


def lane_close(acc: str, init: str, step: str) -> list[str]:
    """Statements folding the lanes into ``acc``: lanes never started set to ``init``, then
    pairwise, lane ``l`` with lane ``l + nl/2``, halving ``nl`` until one is left.  Each level
    above ``TAIL`` is a loop of a constant count (vectorized, no overlap check), the last ones
    straight-line code."""
    lines = ["if fr:", "    for l in range(lp, nl):", f"        ln[l] = {init}"]
    width = LANES // 2
    while width >= TAIL:
        lines += [f"if nl > {width}:", f"    for l in range({width}):",
                  f"        ln[l] = {step}(ln[l], ln[l + {width}])"]
        width //= 2
    width, names = TAIL, [f"ln[{i}]" for i in range(TAIL)]
    while width > 1:
        width //= 2
        lines += [f"t{i}_ = {step}({names[i]}, {names[i + width]})" for i in range(width)]
        names = [f"t{i}_" for i in range(width)]
    return lines + [f"{acc} = t0_"]


Element = Callable[[Callable[[str], str]], tuple[list, str]]


def full_walk(nest, element: Element, init: str, dtype: str, step: str, stage: str | None = None) -> list[str]:
    """A full reduction over ``nest`` (a ``Nest``, flat or strided) in the lane order, its flat
    index range split into ``nc`` chunks of ``blk`` (the eager kernel's chunks: ``nc`` is a
    variable of the kernel, from ``parallel.full_chunks``), ``prange`` over the chunks; chunk
    ``ch``'s fold is stored in ``p0[ch]``.  Each chunk unravels its first index once, then
    walks runs of the innermost dimension, carrying into the outer ones.  ``element(at)``
    gives the statements and the accumulator-dtype value of the element at the index ``at``
    maps an array parameter to; with ``stage`` (a constructor: ``Fold.stage``), the value in that
    dtype, staged per run (``lane_run``'s ``cast``)."""
    nd = 1 if nest.kind == "flat" else nest.ndim
    idx = [f"i{d}" for d in range(nd - 1)] + ["il"]
    at = lambda name: f"{nest.views[name]}[{', '.join(idx)}]"
    last = f"n{nd - 1}"
    if nd == 1:
        unravel, carry = ["j = lo"], []
    else:
        unravel = ["q = lo", f"j = q % {last}", f"q //= {last}"]
        unravel += [s for d in range(nd - 2, 0, -1) for s in (f"i{d} = q % n{d}", f"q //= n{d}")] + ["i0 = q"]
        # flat, not nested: an index reaches its size only where the one inside it has just carried
        carry = [f"i{nd - 2} += 1"] + [s for d in range(nd - 2, 0, -1)
                                       for s in (f"if i{d} == n{d}:", f"    i{d} = 0", f"    i{d - 1} += 1")]
    walk = (unravel + ["g = lo", "while g < hi:", f"    e = min({last} - j, hi - g)"]
            + [f"    {s}" for s in lane_run("j", "j + e", "il", lambda v: element(at), init, step,
                                           dtype if stage else None)]
            + ["    g += e", "    j = 0"] + [f"    {s}" for s in carry])
    lines = ["cnt = " + " * ".join(f"n{d}" for d in range(nd)), "nc = p0.shape[0]", "blk = (cnt + nc - 1) // nc",
             f"for ch in {nest.par}(nc):", "    lo = ch * blk", "    hi = min(lo + blk, cnt)"]
    lines += [f"    {s}" for s in stage_open(stage) + lane_open("max(hi - lo, 0)", dtype)]
    lines += ["    if lo < hi:"] + [f"        {s}" for s in walk]
    lines += [f"    {s}" for s in lane_close("acc", init, step)] + ["    p0[ch] = acc"]
    return [f"    {s}" for s in lines]


def rows_walk(nest, axes: tuple, element: Element, init: str, dtype: str, step: str, store: Callable[[str], list],
              stage: str | None = None):
    """A reduction over ``axes`` (the last dimension among them, a kept one before them) of a
    strided ``nest`` in the lane order: one fold per output element, its reduced elements in C
    order; ``store(acc)`` gives the statements storing a fold at the kept indices.  The lanes
    are allocated once per block of ``ROW_BLOCK`` indices of the first kept dimension, the
    ``prange``; ``stage`` as ``full_walk``'s."""
    nd = nest.ndim
    kept = [d for d in range(nd) if d not in axes]
    k0, red = kept[0], [d for d in axes if d != nd - 1]
    idx = [f"i{d}" if d != nd - 1 else "il" for d in range(nd)]
    at = lambda name: f"{nest.views[name]}[{', '.join(idx)}]"
    lines = ["cnt = " + " * ".join(f"n{d}" for d in axes),
             f"for kb in {nest.par}((n{k0} + {ROW_BLOCK - 1}) // {ROW_BLOCK}):", f"    ln = np.empty(LANES, {dtype})"]
    lines += [f"    {s}" for s in stage_open(stage)]
    lines.append(f"    for i{k0} in range(kb * {ROW_BLOCK}, min(kb * {ROW_BLOCK} + {ROW_BLOCK}, n{k0})):")
    pad = "        "
    for d in kept[1:]:
        lines.append(f"{pad}for i{d} in range(n{d}):")
        pad += "    "
    lines += [pad + s for s in lane_open("cnt", dtype, alloc=False)]
    inner = pad
    for d in red:
        lines.append(f"{inner}for i{d} in range(n{d}):")
        inner += "    "
    lines += [inner + s for s in lane_run("0", f"n{nd - 1}", "il", lambda v: element(at), init, step,
                                          dtype if stage else None)]
    lines += [pad + s for s in lane_close("acc", init, step) + store("acc")]
    return [f"    {s}" for s in lines]


# indices of the first kept dimension per lane array (and per task) of ``rows_walk``
ROW_BLOCK = 64
