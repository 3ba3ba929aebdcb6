"""float32 softmax and log_softmax rows (cpu.py's ``softmax``/``log_softmax`` on float32 arrays,
and so on float16 and bfloat16, computed in float32): exp in float32 arithmetic, as PyTorch's.
cpu.py's float32 cross-entropy and its backward take their exponentials from ``shifted_exps32``.

cpu.py's float64 evaluation spent most of its time in a degree-13 float64 polynomial exp: on
attention's rows (2048 rows of 32 float32, half of them -inf under a causal mask) softmax took
180 us where PyTorch takes 61.  Here, per block of rows:

* each row's max, one strict ``>`` select per element (NaN is not ``>`` anything, so it never
  becomes the max; it reaches the sum through its exp instead and the whole row is NaN, as
  PyTorch's);
* ``x - max`` in float32 (as PyTorch's: rounded once) into a scratch block, then one flat loop
  of vecmath's float32 exp over the block (long enough to vectorize, where one 32-element row
  is not).  An argument below -104 (-inf under the mask) skips the polynomial for 0: exp's
  polynomial there builds a subnormal before flushing it, and subnormal arithmetic doubled
  the loop's time on masked rows;
* the row's sum of those exponentials in float64, in 8 lanes folded pairwise
  (``_sum8``): eight independent add chains instead of one;
* softmax: each exponential times the float64 reciprocal of the sum, rounded once to float32;
  log_softmax: ``(x - max) - log(sum)`` in float64, rounded once.

Every operation is strict IEEE arithmetic in an order fixed by this text, so the bits do not
depend on the compiler: the compiled plans call these same functions (compiler/run/
tensor_rules.py) and agree with eager bit for bit.  Accuracy: within 1 float32 ulp of the exact
softmax where the result is above 1e-3, and a few ulp on tiny results (``x - max`` rounds in
float32 before exp, as PyTorch's does).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..support.numba_types import JIT_HELPERS
from ..support.vecmath.exp_f32 import _EXP_LO as _LO    # below it exp rounds to 0

__all__ = ["softmax_rows32", "sum8", "shifted_exps32", "scratch32"]

_exp_f32 = JIT_HELPERS["_exp_f32"]      # the elementwise exp's own compiled helper
_ZERO = np.float32(0.0)
_BLOCK = 4096                           # float32 scratch elements per block of rows (16 KB)


@numba.njit(boundscheck=False)
def sum8(a, b, c):
    """float64(a[b]) + ... + float64(a[b + c - 1]) as 8 lanes (element j into lane j % 8 for
    j < c - c % 8), folded pairwise (0+4, 2+6, 1+5, 3+7, then those), then the tail left to right."""
    cl = c - c % 8
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for j in range(b, b + cl, 8):
        s0 += np.float64(a[j])
        s1 += np.float64(a[j + 1])
        s2 += np.float64(a[j + 2])
        s3 += np.float64(a[j + 3])
        s4 += np.float64(a[j + 4])
        s5 += np.float64(a[j + 5])
        s6 += np.float64(a[j + 6])
        s7 += np.float64(a[j + 7])
    s = ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))
    for j in range(b + cl, b + c):
        s += np.float64(a[j])
    return s


@numba.njit(boundscheck=False)
def _row_max32(x, i):
    m = np.float32(-np.inf)
    for j in range(x.shape[1]):
        v = x[i, j]
        m = v if v > m else m
    return m


@numba.njit(boundscheck=False)
def scratch32(c):
    """(rows per block of rows of ``c`` elements: at least one; a block's row maxima; its
    exponentials), float32."""
    per = max(1, _BLOCK // max(c, 1))
    return per, np.empty(per, np.float32), np.empty(per * c, np.float32)


@numba.njit(boundscheck=False)
def shifted_exps32(x, i0, per, m, e):
    """For the block of rows i0..i0+r-1 of float32 ``x`` (r = ``per``, fewer at the end): m[k] = the
    row's max, e[k * C + j] = exp(x - max) in float32 (the max and ``x - max`` as described
    above; 0 below -104).  Returns r."""
    c = x.shape[1]
    r = min(per, x.shape[0] - i0)
    for k in range(r):
        mk = _row_max32(x, i0 + k)
        m[k] = mk
        for j in range(c):
            e[k * c + j] = x[i0 + k, j] - mk
    for q in range(r * c):
        d = e[q]
        low = d < _LO
        v = _exp_f32(_ZERO if low else d)
        e[q] = _ZERO if low else v
    return r


@numba.njit(boundscheck=False, error_model="numpy")
def softmax_rows32(x, out, log):
    """softmax (``log`` False) or log_softmax (True) of each row of float32 ``x`` into ``out``."""
    n, c = x.shape
    per, m, e = scratch32(c)
    for i0 in range(0, n, per):
        for k in range(shifted_exps32(x, i0, per, m, e)):
            s = sum8(e, k * c, c)
            if log:
                ls = math.log(s)
                mk = np.float64(m[k])
                for j in range(c):
                    out[i0 + k, j] = (np.float64(x[i0 + k, j]) - mk) - ls
            else:
                inv = 1.0 / s
                for j in range(c):
                    out[i0 + k, j] = np.float64(e[k * c + j]) * inv

