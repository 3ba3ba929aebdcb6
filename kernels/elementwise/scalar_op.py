"""The two records of the elementwise op tables: ``ScalarOp`` (one op's scalar definition) and
``Check`` (the inputs it refuses), with the dtype-category sets their ``cats`` name.

table.py holds the core rows; the family tables (rows_math.py, rows_activation.py) add theirs, each
importing only this module, so the tables stay separate files without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dispatch_jit.dtypes import BOOL, COMPLEX, FLOAT, INT

__all__ = ["Check", "ScalarOp", "ALL", "NUM", "REAL", "REAL_B", "FLT", "FLT_C", "INTEGRAL", "INTS"]

ALL = frozenset({BOOL, INT, FLOAT, COMPLEX})
NUM = frozenset({INT, FLOAT, COMPLEX})
REAL = frozenset({INT, FLOAT})
REAL_B = frozenset({BOOL, INT, FLOAT})
FLT = frozenset({FLOAT})
FLT_C = frozenset({FLOAT, COMPLEX})
INTEGRAL = frozenset({BOOL, INT})
INTS = frozenset({INT})


@dataclass(frozen=True)
class Check:
    """Inputs an op refuses: where ``guard`` (an expression over x, y, z) holds for any element.

    Loops never raise inside ``prange`` (the exception would be lost with its thread): they count
    the failing elements and, after the loop, raise ``error(message)`` (``error`` names a builtin
    exception; generated code spells it).  Eager CPU kernels count before writing anything.

    ``scalar``: the guard reads only operands that are Python numbers in the call (PyTorch refuses
    ``int_tensor ** -1`` but computes ``int_tensor ** tensor_of_negatives``), as given, before the
    cast to the compute dtype (-1 is no uint8): it is tested once per call, before any loop, even
    for an empty tensor, and not at all where those operands are tensors.
    """

    guard: str
    error: str
    message: str
    scalar: bool = False

    def raise_stmt(self) -> str:
        return f"raise {self.error}({self.message!r})"

    def names(self) -> frozenset:
        """The operands (x, y, z) the guard reads."""
        import ast
        return frozenset(n.id for n in ast.walk(ast.parse(self.guard, mode="eval"))
                         if isinstance(n, ast.Name) and n.id in ("x", "y", "z"))

    def refuses(self, **operands) -> bool:
        """The guard on Python values (a scalar check where no generated loop tests it: CUDA)."""
        return bool(eval(self.guard, {}, operands))      # noqa: S307 - the table's own expression


@dataclass(frozen=True)
class ScalarOp:
    name: str
    arity: int
    expr: str | Callable[[tuple[str, ...]], str]   # callable: given the present inputs' names
    rule: str = "promote"
    cats: frozenset = NUM
    by_cat: dict = field(default_factory=dict)     # category or dtype name -> expression override
    statics: tuple = ()                            # schema fragments of static parameters
    doc: str = ""
    inplace: bool = True
    method: bool = True
    operator: tuple = ()                           # Python operators that map to it
    # compute dtype name -> (expression, guard): a faster form that equals the exact one wherever
    # the guard (an expression over x) holds; eager CPU loops use it on chunks where it holds for all
    fast: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)     # category -> Check (inputs it refuses)
    function: bool = True                          # dj.<name> (False where torch has no torch.<name>)

    def expression(self, category: int, present: tuple[str, ...], dtype_name: str = "") -> str:
        # most specific first: an override for the compute dtype, then its category
        e = self.by_cat.get(dtype_name) or self.by_cat.get(category, self.expr)
        return e(present) if callable(e) else e
