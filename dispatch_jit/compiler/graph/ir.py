"""The graph IR of compiled mode: a flat, typed list of nodes.

A ``Graph`` is what tracing records and what the passes rewrite::

    graph(%0: float32[2d], %1: float32[2d]):
      %2 = aten::mul.Tensor(%0, %1) : float32[2d]
      %3 = aten::add.Tensor(%2, 2.0) : float32[2d]
      return %3

Values are numbered; each node defines one or more of them.  Arguments are
``Var`` references, Python scalars (constants of the trace), runtime scalars
(``RuntimeFloat``/``RuntimeInt``: a Python number the compiled function was
called with, read at every call; shown as ``%s0``), lists of those, or
``None``.  Sizes are never part of the IR: a value's type is its dtype and
ndim only, which is what the cache key of a compiled function fixes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dispatch_jit.dtypes import DType
from dispatch_jit.errors import GraphError

__all__ = ["TensorType", "Var", "Node", "Graph", "GraphError", "vars_in", "rename_vars", "RuntimeFloat", "RuntimeInt",
           "runtime_scalar", "is_runtime_scalar", "scalar_var", "rebuild"]


@dataclass(frozen=True)
class TensorType:
    dtype: DType
    ndim: int
    device: str = "cpu"      # "cpu" or "cuda" (the device index is read from the tensors at run time)

    def __str__(self) -> str:
        dev = "" if self.device == "cpu" else f"@{self.device}"
        return f"{self.dtype.name}[{self.ndim}d]{dev}"


@dataclass(frozen=True)
class Var:
    id: int

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass
class Node:
    """``outs = op(*args, **kwargs)``.  ``op`` is an OpOverload, or one of the
    strings "input" and "const" (``value`` then holds the captured tensor)."""

    op: object
    args: tuple
    kwargs: dict
    outs: tuple            # value ids this node defines
    value: object = None   # "const" nodes: the tensor captured from the function's closure

    @property
    def name(self) -> str:
        return self.op if isinstance(self.op, str) else self.op.name()

    def inputs(self) -> list[int]:
        return [v.id for v in vars_in((self.args, tuple(self.kwargs.values())))]


class RuntimeFloat(float):
    """A float argument of a compiled function, as the graph holds it: the value is the
    call's, read at every call (``Plan.run``'s ``scalars[index]``); the number itself is
    the trace's value, good for type promotion only (float, int and bool promote
    differently, which is why the type is part of the cache key and the value is not).
    Codegen passes it to the loop as a parameter; eager steps read it through
    ``scalar_var(index)`` in their environment."""

    index = -1

    def __repr__(self):
        return f"%s{self.index}"

    __str__ = __repr__


class RuntimeInt(int):
    """An int argument of a compiled function; see ``RuntimeFloat``."""

    index = -1

    def __repr__(self):
        return f"%s{self.index}"

    __str__ = __repr__


def runtime_scalar(value, index: int, cls=None):
    """The graph's stand-in for runtime scalar ``index`` whose trace value is ``value``."""
    cls = cls or (RuntimeFloat if isinstance(value, float) else RuntimeInt)
    r = cls(value)
    r.index = index
    return r


def is_runtime_scalar(x) -> bool:
    return isinstance(x, (RuntimeFloat, RuntimeInt))


def scalar_var(index: int) -> int:
    """The environment slot (a negative value id) of runtime scalar ``index`` in ``Plan.run``."""
    return -1 - index


def vars_in(x) -> list[Var]:
    """Every Var in a nested structure of tuples, lists and dicts, in order."""
    out, stack = [], [x]
    while stack:
        y = stack.pop()
        if isinstance(y, Var):
            out.append(y)
        elif isinstance(y, (list, tuple)):
            stack.extend(reversed(y))
        elif isinstance(y, dict):
            stack.extend(reversed(list(y.values())))
    return out


def rebuild(x, items):
    """A list or tuple like ``x`` holding ``items``; a named tuple (``max``'s (values, indices))
    takes them positionally."""
    items = list(items)
    return type(x)(*items) if hasattr(type(x), "_fields") else type(x)(items)


def rename_vars(x, m: dict[int, int]):
    """``x`` (a nested structure of tuples, lists and dicts) with each Var's id mapped through ``m``."""
    if isinstance(x, Var):
        return Var(m.get(x.id, x.id))
    if isinstance(x, (list, tuple)):
        return rebuild(x, (rename_vars(y, m) for y in x))
    if isinstance(x, dict):
        return {k: rename_vars(v, m) for k, v in x.items()}
    return x


def _fmt(x) -> str:
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_fmt(y) for y in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, DType):
        return x.name
    if isinstance(x, slice):     # basic indexing (getitem nodes): 1:, ::2
        s = f"{'' if x.start is None else x.start}:{'' if x.stop is None else x.stop}"
        return s if x.step is None else f"{s}:{x.step}"
    if x is Ellipsis:
        return "..."
    return repr(x)


@dataclass
class Graph:
    """Inputs, nodes in execution order, outputs (a nested structure of Vars
    and constants), and the type of every value."""

    inputs: list[int] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    outputs: object = None
    types: dict[int, TensorType] = field(default_factory=dict)
    next_id: int = 0
    notes: dict[int, str] = field(default_factory=dict)   # value id -> why a pass left its node alone
    # the dj.autograd.Functions traced through: the graph keeps their forward ops, not their backward
    functions: list[str] = field(default_factory=list)
    # real tensors that require grad, found by identity (a model's parameters): inputs after the
    # arguments' and the captures' (trace/symbolic.py ``to_arg``; owners.py guards where they live)
    lifted: list = field(default_factory=list)
    # value id -> its sizes, where the trace knew them (a ShapedTracer's: a whole step, a joint
    # graph); the fusion pass keeps a value smaller than its loop out of that loop (passes.py)
    shapes: dict = field(default_factory=dict)

    def new_value(self, ty: TensorType) -> int:
        vid = self.next_id
        self.next_id += 1
        self.types[vid] = ty
        return vid

    def copy(self) -> "Graph":
        return Graph(list(self.inputs), [Node(n.op, n.args, dict(n.kwargs), n.outs, n.value) for n in self.nodes],
                     self.outputs, dict(self.types), self.next_id, dict(self.notes), shapes=self.shapes)

    def uses(self) -> dict[int, int]:
        """How many times each value is read (by nodes and by the outputs)."""
        count: dict[int, int] = {}
        for n in self.nodes:
            for v in n.inputs():
                count[v] = count.get(v, 0) + 1
        for v in vars_in(self.outputs):
            count[v.id] = count.get(v.id, 0) + 1
        return count

    def check(self) -> "Graph":
        """Every value is defined once, before use, and has a type."""
        defined = set(self.inputs)
        for v in self.inputs:
            if v not in self.types:
                raise GraphError(f"input %{v} has no type")
        for i, n in enumerate(self.nodes):
            for v in n.inputs():
                if v not in defined:
                    raise GraphError(f"node {i} ({n.name}) reads %{v} before it is defined")
            for v in n.outs:
                if v in defined:
                    raise GraphError(f"node {i} ({n.name}) redefines %{v}")
                if v not in self.types:
                    raise GraphError(f"node {i} ({n.name}) defines %{v} without a type")
                defined.add(v)
        for v in vars_in(self.outputs):
            if v.id not in defined:
                raise GraphError(f"output %{v.id} is never defined")
        return self

    def __str__(self) -> str:
        ins = ", ".join(f"%{v}: {self.types[v]}" for v in self.inputs)
        lines = [f"graph({ins}):"]
        for n in self.nodes:
            lhs = ", ".join(f"%{v}" for v in n.outs)
            args = [_fmt(a) for a in n.args] + [f"{k}={_fmt(v)}" for k, v in n.kwargs.items() if v is not None]
            if n.op == "const":
                args = [f"<tensor shape={tuple(n.value.shape)}>"]
            ty = ", ".join(str(self.types[v]) for v in n.outs)
            name = f"fused#{n.value.index}" if n.op == "fused" else n.name
            lines.append(f"  {lhs} = {name}({', '.join(args)}) : {ty}")
            if n.op == "fused":   # the region's body, one line per node, its epilogue last
                red = getattr(n.value, "reduce", None)
                for m in n.value.nodes + ([red.node] if red is not None else []):
                    margs = [_fmt(a) for a in m.args] + [f"{k}={_fmt(v)}" for k, v in m.kwargs.items()
                                                         if v is not None]
                    mty = ", ".join(str(self.types[v]) for v in m.outs)
                    tag = "   (epilogue: accumulated in the loop)" if red is not None and m is red.node else ""
                    lines.append(f"      %{m.outs[0]} = {m.name}({', '.join(margs)}) : {mty}{tag}")
        lines.append(f"  return {_fmt(self.outputs)}")
        return "\n".join(lines)
