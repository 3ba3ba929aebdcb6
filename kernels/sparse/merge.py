"""CSR + CSR: the row merge, written once for both targets.

Adding two CSR matrices walks each row's two sorted column lists together,
as a merge does: once to count the output's entries per row, then (after a
prefix sum gives the row starts) to write them.  The walk is written once
(``_walk``); the two passes differ only in what each step does.  The bodies
below are the whole algorithm; each target wraps them in its own loop over rows: a
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

def _walk(first: str, a_only: str, b_only: str, both: str, last: str, k: str) -> str:
    """Row ``i``'s merge: ``p`` walks a's entries, ``q`` b's, in column order; each step takes a's
    entry alone, b's alone, or both (same column), runs that case's lines and advances ``k``.
    ``first`` and ``last`` run before and after the walk."""
    def block(lines: str) -> str:
        return "".join(f"        {line}\n" for line in lines.split("\n") if line)
    return (f"p = ca[i]\npe = ca[i + 1]\nq = cb[i]\nqe = cb[i + 1]\n{first}\n"
            f"while p < pe or q < qe:\n"
            f"    if q >= qe or (p < pe and ia[p] < ib[q]):\n{block(a_only)}        p += 1\n"
            f"    elif p >= pe or ib[q] < ia[p]:\n{block(b_only)}        q += 1\n"
            f"    else:\n{block(both)}        p += 1\n        q += 1\n"
            f"    {k} += 1\n{last}")


# the first pass counts each row's merged entries
COUNT_SIGNATURE = "csr_add_count(ca, ia, cb, ib, counts, rows)"
COUNT = _walk("n = 0", "", "", "", "counts[i] = n\n", "n")

# the second writes them from the row starts ``crow`` (the counts' prefix sum)
FILL_SIGNATURE = "csr_add_fill(ca, ia, va, cb, ib, vb, alpha, crow, col, val, rows)"
FILL = _walk("o = crow[i]",
             "col[o] = ia[p]\nval[o] = va[p]",
             "col[o] = ib[q]\nval[o] = _dt(alpha * vb[q])",
             "col[o] = ia[p]\nval[o] = _dt(va[p] + alpha * vb[q])",
             "", "o")


def serial(signature: str, n: str, body: str, index: str = "i") -> str:
    """The source of a CPU function ``def signature:`` running ``body`` (at column 0) for each
    ``index`` in [0, n): the serial counterpart of cuda/codegen.py's ``grid_stride``."""
    lines = [f"def {signature}:", f"    for {index} in range({n}):"]
    lines += ["        " + line if line else line for line in body.rstrip("\n").split("\n")]
    return "\n".join(lines + [""])
