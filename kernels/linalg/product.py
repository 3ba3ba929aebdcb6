"""The float matrix product's one kernel choice: BLAS, or the i-k-j loop nest for skinny products.

A product with a few rows (``m <= SKINNY_M``), a moderate depth (``k <= SKINNY_MAX_K``) and a
wide result (``n >= SKINNY_MIN_N``) runs in the loop nest: linear's weight gradient of a
classification head (3 x 512 @ 512 x 64) took BLAS 9-15 us and the i-k-j nest 5 us (min of 15;
1-8 rows x k 64..4096 x n 8..256 measured: the nest won or tied for m <= 4, k <= 1024, n >= 32,
and lost up to 7x for k = 4096 with n < 32).  Everything else goes to BLAS (gemm.py).

The two round differently, so the choice is made here once, by ``skinny``, for every caller:
eager matmul, linear and linear_backward (cpu.py's plans and ``matrix_product``) and compiled
mode's plan functions (compiler/run/call_rules.py calls ``product_into`` from inside its njit code).
That is what keeps a ``@dj.compile``d loss's gradients equal to eager mode's bit for bit.  The
loop nest computes each output row with the same operations whatever the operands' layouts or
how rows are split among threads (no fastmath: LLVM neither reassociates nor contracts to FMA),
so a copy to C order or a parallel split does not change its bits.
"""

from __future__ import annotations

import numba

from dispatch_jit.kernels.linalg.gemm import dot_into

__all__ = ["SKINNY_M", "SKINNY_MAX_K", "SKINNY_MIN_N", "skinny", "ikj_rows", "product_into"]

SKINNY_M, SKINNY_MAX_K, SKINNY_MIN_N = 4, 1024, 32

# Block sizes of the i-k-j loop nest: a KB x JB tile of b (512 KB of int32)
# stays in L2 while every row of a streams past it; measured on 1024^2 and
# 2048^2 int32 as 20-30% faster than the unblocked nest, flat around this choice.
_KB, _JB = 128, 1024


def skinny(m: int, k: int, n: int) -> bool:
    """Whether an (m, k) @ (k, n) float product runs in the loop nest rather than BLAS.

    >>> skinny(3, 512, 64), skinny(512, 64, 3)
    (True, False)
    """
    return m <= SKINNY_M and k <= SKINNY_MAX_K and n >= SKINNY_MIN_N


_skinny_jit = numba.njit(skinny)   # the same predicate, callable from njit code


# Ranges whose start is not a literal 0 are written over slices: Numba cannot prove `j >= 0` for
# range(j0, j1), and its negative-index wraparound select stops vectorization.
@numba.njit(boundscheck=False)
def ikj_rows(a, b, out, i0, i1):
    """out[i0:i1] = a[i0:i1] @ b, blocked over k and j, k unrolled by 4."""
    k = a.shape[1]
    n = b.shape[1]
    out[i0:i1, :] = 0
    for j0 in range(0, n, _JB):
        j1 = min(j0 + _JB, n)
        w = j1 - j0
        for k0 in range(0, k, _KB):
            k1 = min(k0 + _KB, k)
            k4 = k0 + (k1 - k0) // 4 * 4
            for i in range(i0, i1):
                o = out[i, j0:j1]
                for kk in range(k0, k4, 4):
                    x0, x1, x2, x3 = a[i, kk], a[i, kk + 1], a[i, kk + 2], a[i, kk + 3]
                    b0, b1 = b[kk, j0:j1], b[kk + 1, j0:j1]
                    b2, b3 = b[kk + 2, j0:j1], b[kk + 3, j0:j1]
                    for j in range(w):
                        o[j] += x0 * b0[j] + x1 * b1[j] + x2 * b2[j] + x3 * b3[j]
                for kk in range(k4, k1):
                    x0, b0 = a[i, kk], b[kk, j0:j1]
                    for j in range(w):
                        o[j] += x0 * b0[j]


@numba.njit(boundscheck=False)
def product_into(a, b, out):
    """out = a @ b for 2-D float or complex arrays of one dtype (any layout; out C-contiguous),
    by the kernel ``skinny`` chooses: eager mode's bits."""
    m, k = a.shape
    if _skinny_jit(m, k, b.shape[1]):
        ikj_rows(a, b, out, 0, m)
    else:
        dot_into(a, b, out)
