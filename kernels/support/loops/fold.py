"""Reduction epilogues: how a loop folds values into an accumulator, as eager's kernels do.

A fused region that ends in ``sum``/``mean``/``prod``/``max``/``min`` folds each reduced
value into an accumulator of the eager kernel's accumulator dtype (float64 for float32
sums) instead of storing it.  ``Fold`` writes those statements for the CPU loops
(``Nest.loop_chunks`` / ``Nest.loop(level=...)``) and, with ``target="cuda"``, for the
grid-stride kernels and their shared-memory tree.

>>> from dispatch_jit.dtypes import float32, float64
>>> Fold("sum", float64, float32).step("acc", "v")     # strict: a float sum's order is written (lanes.py)
['acc = _sadd(acc, _t_float64(v))']
"""

from __future__ import annotations

import numba
import numpy as np

from dispatch_jit.dtypes import BOOL, FLOAT, DType, bfloat16

from .nest import type_fn

__all__ = ["Fold", "radd", "rmul", "FOLD_IMPORTS"]

# accumulator steps with reassociation allowed: LLVM inlines them into the strictly compiled
# loop and vectorizes the reduction (measured: 3.7 ms against 6.4 ms for 1e7 float32 on one core)
radd = numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy")(lambda a, b: a + b)
rmul = numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy")(lambda a, b: a * b)

# (value dtype, accumulator dtype) of the ordered folds whose runs are staged (lanes.lane_run's
# cast): float32 values into float64 lanes, computed at float32's vector width, not float64's
STAGED = {("float32", "float64")}

# the first lines of a CPU source that folds (its module-level names for radd and rmul)
FOLD_IMPORTS = ["from dispatch_jit.kernels.support.loops.fold import radd as _radd, rmul as _rmul",
                "from dispatch_jit.kernels.support.loops.lanes import LANES, TAIL, sadd as _sadd, smul as _smul", ""]


class Fold:
    """The statements of one reduction ``kind`` accumulating in dtype ``acc``, stored as ``result``.
    ``target="cuda"``: float steps call the device functions ``_cadd``/``_cmul``, infinities ``_inf``."""

    def __init__(self, kind: str, acc: DType, result: DType, target: str = "cpu"):
        self.kind, self.acc, self.result, self.target = kind, acc, result, target

    @property
    def ordered(self) -> bool:
        """A float sum or product: it folds in the explicit lane order of lanes.py (CPU), every
        step strict, as eager's kernels do; max and min take no order, integers are exact."""
        return self.kind in ("sum", "mean", "prod") and self.acc.category == FLOAT and self.target == "cpu"

    @property
    def lane_step(self) -> str:
        """The strict step of an ordered fold, by name: ``"_sadd"`` or ``"_smul"``."""
        return "_smul" if self.kind == "prod" else "_sadd"

    def stage(self, value: DType) -> str | None:
        """The constructor of the buffer that stages a run of this fold's ``value``-dtype elements
        before they fold (``lanes.lane_run``), or None: they fold as computed."""
        return type_fn(value.name) if self.ordered and (value.name, self.acc.name) in STAGED else None

    def value(self, value: str) -> str:
        """``value`` converted to the accumulator's dtype."""
        return f"{type_fn(self.acc.name)}({value})"

    def init(self) -> str:
        """The accumulator's starting value."""
        a, kind = self.acc, self.kind
        if kind in ("sum", "mean"):
            lit = "0"
        elif kind == "prod":
            lit = "1"
        elif a.category == FLOAT:
            inf = "_inf" if self.target == "cuda" else "math.inf"
            lit = f"-{inf}" if kind == "max" else inf
        elif a.category == BOOL:
            lit = "False" if kind == "max" else "True"
        else:
            info = np.iinfo(a.np)
            lit = str(int(info.min if kind == "max" else info.max))
        return f"{type_fn(a.name)}({lit})"

    def step(self, acc: str, value: str, merge: bool = False) -> list[str]:
        """Statements folding ``value`` (an element, or another partial when ``merge``) into ``acc``."""
        x = value if merge else f"{type_fn(self.acc.name)}({value})"
        if self.kind in ("max", "min"):
            cmp = ">" if self.kind == "max" else "<"
            # NaN propagates as in the eager kernel: a NaN is taken, and nothing replaces it
            return [f"xr = {x}", f"if xr {cmp} {acc} or xr != xr:", f"    {acc} = xr"]
        add = self.kind in ("sum", "mean")
        if self.ordered:                    # one strict step (a column's fold in memory, chunks' merge)
            return [f"{acc} = {self.lane_step}({acc}, {x})"]
        if self.acc.category == FLOAT:
            fn = ("_cadd" if add else "_cmul") if self.target == "cuda" else ("_radd" if add else "_rmul")
            return [f"{acc} = {fn}({acc}, {x})"]
        return [f"{acc} {'+' if add else '*'}= {x}"]

    def final(self, acc: str, count: str) -> str:
        """The value stored from the accumulator ``acc`` of ``count`` elements (a bfloat16 result:
        float32's, which the store rounds, as eager rounds float32's result once)."""
        rt = type_fn("float32" if self.result is bfloat16 else self.result.name)
        if self.kind == "mean":   # eager: the sum stored in the result dtype, then divided in it
            return f"{rt}({rt}({acc}) / {rt}({count}))"
        return acc if self.kind in ("max", "min") else f"{rt}({acc})"
