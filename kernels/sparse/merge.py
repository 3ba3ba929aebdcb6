"""CSR + CSR: the row merge, written once for both targets.

Adding two CSR matrices walks each row's two sorted column lists together,
as a merge does: once to count the output's entries per row, then (after a
prefix sum gives the row starts) to write them.  The loop bodies below are
the whole algorithm; each target wraps them in its own loop over rows: a
serial ``for`` compiled with ``numba.njit`` (cpu.py) and a grid-stride loop
compiled with ``numba.cuda.jit`` (cuda.py, through dispatch_jit/cuda/codegen.py),
one row per thread.  ``_dt`` is the output values' scalar type.

>>> print(serial("csr_add_count(ca, ia, cb, ib, counts, rows)", "rows", "counts[i] = 0"), end="")
def csr_add_count(ca, ia, cb, ib, counts, rows):
    for i in range(rows):
        counts[i] = 0
"""

from __future__ import annotations

__all__ = ["COUNT_SIGNATURE", "COUNT", "FILL_SIGNATURE", "FILL", "serial"]

COUNT_SIGNATURE = "csr_add_count(ca, ia, cb, ib, counts, rows)"
COUNT = """\
p = ca[i]
pe = ca[i + 1]
q = cb[i]
qe = cb[i + 1]
n = 0
while p < pe or q < qe:
    if q >= qe or (p < pe and ia[p] < ib[q]):
        p += 1
    elif p >= pe or ib[q] < ia[p]:
        q += 1
    else:
        p += 1
        q += 1
    n += 1
counts[i] = n
"""

FILL_SIGNATURE = "csr_add_fill(ca, ia, va, cb, ib, vb, alpha, crow, col, val, rows)"
FILL = """\
p = ca[i]
pe = ca[i + 1]
q = cb[i]
qe = cb[i + 1]
o = crow[i]
while p < pe or q < qe:
    if q >= qe or (p < pe and ia[p] < ib[q]):
        col[o] = ia[p]
        val[o] = va[p]
        p += 1
    elif p >= pe or ib[q] < ia[p]:
        col[o] = ib[q]
        val[o] = _dt(alpha * vb[q])
        q += 1
    else:
        col[o] = ia[p]
        val[o] = _dt(va[p] + alpha * vb[q])
        p += 1
        q += 1
    o += 1
"""


def serial(signature: str, n: str, body: str, index: str = "i") -> str:
    """The source of a CPU function ``def signature:`` running ``body`` (at column 0) for each
    ``index`` in [0, n): the serial counterpart of cuda/codegen.py's ``grid_stride``."""
    lines = [f"def {signature}:", f"    for {index} in range({n}):"]
    lines += ["        " + line if line else line for line in body.rstrip("\n").split("\n")]
    return "\n".join(lines + [""])
