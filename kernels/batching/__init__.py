"""vmap's batching rules, registered at the ``Batched`` key like any other kernel.

``core.py`` is the shared machinery (unwrap the innermost level, run the rule, wrap; the
boxed fallback that loops over the batch with a one-time warning); ``rules.py`` the tables,
one per op family.  Ops with a CompositeImplicitAutograd kernel and no rule (mm, bmm, t,
outer, mse_loss, gelu, masked_fill, repeat) decompose at the Batched key into ops that
have rules (keys.ALIAS_EXPANSION).
"""

from __future__ import annotations

from .core import BatchRule, batched_fallback
from .rules import RULES, WRAPPED_RULES, linear_decomposed

__all__ = ["KERNELS", "FALLBACK", "batched_fallback"]

_TABLE = {name: BatchRule(rule, f"batch_rule_{rule.__name__}") for name, rule in RULES.items()}
_TABLE["linear"] = BatchRule(RULES["linear"], "batch_rule_linear", decomposed=linear_decomposed)
_TABLE.update({name: BatchRule(None, f"batch_decomposed_{name}", decomposed=fn)
               for name, fn in WRAPPED_RULES.items()})

KERNELS = {"Batched": _TABLE}
FALLBACK = batched_fallback
