"""Random op graphs: generation, the NumPy mirror, running them in the three modes, reproducers.

A graph is a list of inputs (shape, dtype, layout, value seed and flavor) and
a list of nodes, each a row of fuzz_ops.ROWS applied to earlier values
(or Python scalars) with static parameters.  It renders to the source of one
plain Python function ``f(x0, x1, ...)`` of dj calls, which is what runs
eagerly, under ``@dj.compile`` and in ``dj.execution_mode("compiled")``, and what a
reproducer prints.

Generation runs every node in NumPy as it goes (``fuzz_ops.Row.np`` on the
mirror values, which alias as eager mode's tensors do), so it knows every
value's shape and dtype and never keeps a node whose result is undefined; a
node that PyTorch's semantics make an error ends the graph
(``expect_error``).

The generator takes a ``Chooser`` (ints, choices, coins), so the same code is
driven by hypothesis in the test suite (shrinking included) and by a seeded
``random.Random`` in the long runs (longrun.py).
"""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass, field

import numpy as np

import fuzz_ops as fo
from fuzz_ops import ROW, ROWS, OracleError, Undefined

# -- choosers ---------------------------------------------------------------------------------------


class RandomChooser:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def int(self, lo, hi):
        return self.r.randint(lo, hi)

    def choice(self, seq):
        seq = list(seq)
        return seq[self.r.randrange(len(seq))]

    def coin(self, p=0.5):
        return self.r.random() < p


class HypothesisChooser:
    """Draws through hypothesis, so failures shrink (towards small ints, first choices, False)."""

    def __init__(self, draw):
        from hypothesis import strategies as st
        self.draw, self.st = draw, st

    def int(self, lo, hi):
        return self.draw(self.st.integers(lo, hi))

    def choice(self, seq):
        seq = list(seq)
        return seq[self.draw(self.st.integers(0, len(seq) - 1))]

    def coin(self, p=0.5):
        return self.draw(self.st.integers(0, 999)) < int(p * 1000)


# -- graphs -----------------------------------------------------------------------------------------
@dataclass
class Input:
    shape: tuple
    dtype: str
    layout: str = "c"        # c contiguous, T transposed memory, S every second element, R reversed (x[::-1])
    seed: int = 0
    flavor: str = "small"
    requires_grad: bool = False

    def array(self):
        return fo.make_values(self.shape, self.dtype, self.seed, self.flavor)


@dataclass
class Node:
    op: str
    args: list                # ("v", index) | ("s", python scalar) | None
    params: dict
    form: int = 0


@dataclass
class Graph:
    inputs: list
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    expect_error: str | None = None      # the oracle's error, when the last node is one
    exact: list = field(default_factory=list)   # per value: computed by exact ops only (ints, bools, exact floats)
    # per value: depends on a float reduction, whose fused loop may add in another order than the
    # eager kernel (README, "Compiled and eager CPU results"): compared with a tolerance, not bits
    reordered: list = field(default_factory=list)

    @property
    def n_values(self):
        return len(self.inputs) + len(self.nodes)


LAYOUT_SRC = {
    "T": "def T(a):  # same values, transposed memory\n    return dj.from_numpy(np.ascontiguousarray(a.T)).T\n",
    "S": ("def S(a):  # same values, every second element of a larger buffer\n"
          "    b = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)\n    b[..., ::2] = a\n"
          "    return dj.from_numpy(b)[..., ::2]\n"),
    "R": ("def R(a):  # same values, reversed memory along axis 0\n"
          "    return dj.from_numpy(np.ascontiguousarray(a[::-1]))[::-1]\n"),
}


def layout_np(a, layout):
    """NumPy array with the given layout and a's values (what the dj input wraps)."""
    if layout == "T":
        return np.ascontiguousarray(a.T).T
    if layout == "S":
        b = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        b[..., ::2] = a
        return b[..., ::2]
    if layout == "R":
        return np.ascontiguousarray(a[::-1])[::-1]
    return a


def make_inputs(graph, specs=None):
    """Fresh dj tensors for the graph's inputs (or ``specs``), each with its own memory."""
    import dispatch_jit as dj
    out = []
    for spec in specs or graph.inputs:
        a = spec.array()
        if spec.layout == "T":
            t = dj.from_numpy(np.ascontiguousarray(a.T)).T
        elif spec.layout == "S":
            b = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
            b[..., ::2] = a
            t = dj.from_numpy(b)[..., ::2]
        elif spec.layout == "R":
            t = dj.from_numpy(np.ascontiguousarray(a[::-1]))[::-1]
        else:
            t = dj.from_numpy(a)
        if spec.requires_grad:
            t.requires_grad_(True)
        out.append(t)
    return out


# -- generation ------------------------------------------------------------------------------------
SHAPES = [(), (1,), (0,), (5,), (3, 4), (2, 1, 3), (4, 1), (1, 5), (0, 3), (2, 3, 4), (3, 1, 1), (2, 2)]
LARGE = [(1 << 18,), (512, 512), (1024, 512)]
DTYPE_WEIGHTS = ["float32"] * 4 + ["float64"] * 3 + ["int64"] * 2 + ["int32", "int8", "uint8", "int16", "bool",
                                                                     "bool", "float16", "uint16", "uint32",
                                                                     "uint64"]
FLOAT_ONLY_DTYPES = ["float32", "float64"]


def _related_shape(ch, base):
    r = ch.int(0, 4)
    if r == 0 or not base:
        return ch.choice(SHAPES)
    if r == 1:
        return base
    s = list(base[ch.int(0, len(base)):])          # drop leading dims
    return tuple(1 if ch.coin(0.4) else x for x in s)


def _pick_layout(ch, shape):
    opts = ["c", "c", "c"]
    if len(shape) >= 2:
        opts.append("T")
    if len(shape) >= 1:
        opts += ["S", "R"]
    return ch.choice(opts)


def gen_inputs(ch, dtypes=None, allow_large=True, flavors=("small", "small", "special", "nonzero"),
               max_inputs=3):
    n = ch.int(1, max_inputs)
    if allow_large and ch.coin(0.03):
        base = ch.choice(LARGE)
    else:
        base = ch.choice(SHAPES)
    same = ch.coin(0.5)
    dt0 = ch.choice(dtypes or DTYPE_WEIGHTS)
    inputs = []
    for i in range(n):
        shape = base if i == 0 else (_related_shape(ch, base) if max(base or (0,)) < 1000 else base)
        dt = dt0 if same else ch.choice(dtypes or DTYPE_WEIGHTS)
        inputs.append(Input(tuple(shape), dt, _pick_layout(ch, shape), ch.int(0, 2 ** 20), ch.choice(flavors)))
    return inputs


def _scalar_for(ch, cat):
    return ch.choice(fo.SCALARS[cat])


# float reductions whose fused epilogue may add or multiply in another order than the eager kernel
REORDERING = frozenset(["sum", "prod", "mean", "var", "std", "logsumexp", "softmax", "log_softmax", "mse_loss",
                        "cross_entropy", "nll_loss"])


def _reorders(row, result):
    return row.name in REORDERING and isinstance(result, np.ndarray) and result.dtype.kind == "f"


def _is_exact(row, args, result):
    if row.tol is fo.EXACT:
        return True
    return isinstance(result, np.ndarray) and result.dtype.kind != "f"


class _Gen:
    def __init__(self, ch, graph, vals, rows, max_nodes):
        self.ch, self.g, self.vals, self.rows, self.max_nodes = ch, graph, vals, rows, max_nodes

    def pick_value(self, pred=None):
        idx = [i for i, v in enumerate(self.vals) if pred is None or pred(v)]
        if not idx:
            return None
        # favour recent values: chains rather than fans
        if self.ch.coin(0.6):
            return idx[-1]
        return self.ch.choice(idx)

    def operand(self, first, allow_scalar=True):
        """A second operand: a value broadcast-compatible with ``first`` (usually), or a Python scalar."""
        ch = self.ch
        if allow_scalar and ch.coin(0.3):
            return ("s", _scalar_for(ch, ch.choice([fo.cat_of(first.dtype), fo.cat_of(first.dtype), 0, 1, 2])))

        def ok(v):
            try:
                np.broadcast_shapes(v.shape, first.shape)
                return True
            except ValueError:
                return ch.coin(0.02)
        i = self.pick_value(ok)
        return ("v", i) if i is not None else ("s", 1)

    def args_for(self, row):
        ch = self.ch
        i0 = self.pick_value()
        a0 = self.vals[i0]
        if row.kind in ("unary", "reduce", "view", "cast"):
            return [("v", i0)]
        if row.kind == "ternary" and row.name == "where":
            ci = self.pick_value(lambda v: v.dtype == np.bool_) if ch.coin(0.9) else i0
            if ci is None:
                return None
            c = self.vals[ci]
            return [("v", ci), self.operand(c), self.operand(c)]
        if row.kind == "ternary":     # clamp: min and/or max, each None, a scalar or a tensor
            lo = None if ch.coin(0.3) else self.operand(a0)
            hi = None if (lo is not None and ch.coin(0.3)) else self.operand(a0)
            return [("v", i0), lo, hi]
        if row.kind == "list":
            k = ch.int(1, 3)
            same = [i for i, v in enumerate(self.vals) if v.shape == a0.shape or
                    (row.name == "cat" and v.ndim == a0.ndim and v.ndim and ch.coin(0.3))]
            return [("v", i0)] + [("v", ch.choice(same)) for _ in range(k - 1)]
        if row.kind == "matmul":
            def ok(v):
                return v.ndim >= 1 and a0.ndim >= 1 and a0.shape[-1] == (v.shape[-2] if v.ndim >= 2 else v.shape[0])
            j = self.pick_value(ok)
            return None if j is None else [("v", i0), ("v", j)]
        if row.kind in ("inplace", "setitem"):
            return [("v", i0), self.operand(a0)]
        return [("v", i0), self.operand(a0)]

    def arg_values(self, args):
        return [None if a is None else self.vals[a[1]] if a[0] == "v" else a[1] for a in args]

    def step(self):
        ch = self.ch
        for _attempt in range(12):
            row = ch.choice(self.rows)
            args = self.args_for(row)
            if args is None:
                continue
            avals = self.arg_values(args)
            a0 = avals[0]
            if row.cats != "bif" and fo._cat_letter(a0.dtype) not in row.cats and not ch.coin(0.05):
                continue
            params = {}
            if row.params is not None:
                params = row.params(ch, [a for a in avals])
                if params is None:
                    continue
            node = Node(row.name, args, params, ch.int(0, len(row.forms) - 1))
            try:
                with np.errstate(all="ignore"):
                    res = row.np(avals, params)
            except Undefined:
                continue
            except (OracleError, ValueError, IndexError, TypeError, np.exceptions.AxisError) as e:
                if ch.coin(0.7):           # most of the time, try for a graph that runs
                    continue
                self.g.nodes.append(node)
                self.g.expect_error = f"{type(e).__name__}: {e}"
                # its value (where another variant's inputs let it run) is compared loosely
                self.g.exact.append(False)
                self.g.reordered.append(True)
                return False
            res = np.asarray(res) if not isinstance(res, np.ndarray) else res
            self.g.nodes.append(node)
            self.vals.append(res)
            ex = _is_exact(row, avals, res) and all(self.g.exact[a[1]] for a in args if a is not None and a[0] == "v")
            self.g.exact.append(ex)
            ro = (_reorders(row, res) or any(self.g.reordered[a[1]] for a in args if a is not None and a[0] == "v"))
            self.g.reordered.append(ro)
            if row.statement:   # the target, and whatever aliases it, changed
                self.g.exact = [e and ex for e in self.g.exact]
                self.g.reordered = [r or ro for r in self.g.reordered]
            return True
        return True


def gen_graph(ch, rows=None, max_nodes=5, dtypes=None, allow_large=True, flavors=None):
    rows = rows or ROWS
    kw = {} if flavors is None else {"flavors": flavors}
    inputs = gen_inputs(ch, dtypes, allow_large, **kw)
    g = Graph(inputs)
    g.exact = [True] * len(inputs)
    g.reordered = [False] * len(inputs)
    vals = [layout_np(s.array(), s.layout) for s in inputs]
    vals = [v.copy() if s.layout == "c" else v for v, s in zip(vals, inputs)]
    gen = _Gen(ch, g, vals, rows, max_nodes)
    n = ch.int(1, max_nodes)
    for _ in range(n):
        if not gen.step():
            break
    if not g.nodes:
        # at least one node: a cheap one
        g.nodes.append(Node("neg" if fo.cat_of(inputs[0].dtype) else "logical_not", [("v", 0)], {}, 0))
        g.exact.append(True)
        g.reordered.append(False)
    pick_outputs(ch, g)
    return g


def pick_outputs(ch, g):
    k = len(g.inputs)
    used = set()
    for n in g.nodes:
        for a in n.args:
            if a is not None and a[0] == "v":
                used.add(a[1])
    n_ok = len(g.nodes) - (1 if g.expect_error else 0)
    sinks = [k + i for i in range(n_ok) if k + i not in used]
    others = [k + i for i in range(n_ok) if k + i in used]
    outs = sinks[-2:]
    if others and ch.coin(0.3):
        outs.append(ch.choice(others))
    if not outs and n_ok:
        outs = [k + n_ok - 1]
    if g.expect_error:
        # the failing node is an output, so no mode may skip it as dead code
        outs.append(k + len(g.nodes) - 1)
    g.outputs = sorted(set(outs))


# -- rendering ------------------------------------------------------------------------------------
def vname(g, i):
    return f"x{i}" if i < len(g.inputs) else f"v{i}"


def arg_src(g, a):
    if a is None:
        return "None"
    return vname(g, a[1]) if a[0] == "v" else fo.lit(a[1])


def node_lines(g, k):
    """Source lines of node k (value index len(inputs) + k)."""
    node = g.nodes[k]
    row = ROW[node.op]
    a = [arg_src(g, x) for x in node.args]
    src = row.forms[node.form % len(row.forms)](a, node.params)
    name = vname(g, len(g.inputs) + k)
    if row.statement:
        if row.kind == "setitem" and "=" in src and ".copy_(" not in src:
            return [src, f"{name} = {a[0]}"]
        return [f"{name} = {src}"]
    return [f"{name} = {src}"]


def function_source(g, upto=None, outputs=None):
    nodes = len(g.nodes) if upto is None else upto
    params = ", ".join(vname(g, i) for i in range(len(g.inputs)))
    lines = [f"def f({params}):"]
    for k in range(nodes):
        lines += ["    " + s for s in node_lines(g, k)]
    outs = g.outputs if outputs is None else outputs
    lines.append(f"    return ({''.join(vname(g, i) + ', ' for i in outs)})")
    return "\n".join(lines) + "\n"


def _first(r):
    return r[0] if isinstance(r, tuple) else r


def _globals():
    import dispatch_jit as dj
    return {"dj": dj, "np": np, "nan": float("nan"), "inf": float("inf"), "_first": _first}


def build_function(src):
    env = _globals()
    exec(compile(src, "<fuzz graph>", "exec"), env)
    return env["f"]


def node_function(g, k):
    """Node k alone, as a function of its operands' values."""
    node = g.nodes[k]
    names = sorted({a[1] for a in node.args if a is not None and a[0] == "v"})
    lines = [f"def n({', '.join(vname(g, i) for i in names)}):"]
    lines += ["    " + s for s in node_lines(g, k)]
    lines.append(f"    return {vname(g, len(g.inputs) + k)}")
    env = _globals()
    exec(compile("\n".join(lines) + "\n", "<fuzz node>", "exec"), env)
    return env["n"], names


# -- reproducers ----------------------------------------------------------------------------------
def _array_src(a: np.ndarray) -> str:
    if a.size <= 64:
        body = repr(a.tolist())
        body = body.replace("nan", "nan").replace("inf", "inf")
        return f"np.array({body}, dtype=np.{a.dtype.name})" + ("" if a.ndim else "")
    return None


def inputs_source(g, specs=None, name="inputs"):
    specs = specs or g.inputs
    lines = [f"def {name}():", "    return ["]
    needs_make = False
    for s in specs:
        a = s.array()
        src = _array_src(a)
        if src is None:
            needs_make = True
            src = f"make_values({s.shape!r}, {s.dtype!r}, {s.seed!r}, {s.flavor!r})"
        elif a.ndim == 0:
            src = f"{src}.reshape(())"
        if s.layout == "c":
            t = f"dj.from_numpy({src})"
        else:
            t = f"{s.layout}({src})"
        if s.requires_grad:
            t += ".requires_grad_(True)"
        lines.append(f"        {t},")
    lines.append("    ]")
    return "\n".join(lines) + "\n", needs_make


def reproducer(g, check: str, variants=None, note: str = "") -> str:
    """A standalone script: imports, input builders, the graph as plain dj calls, and ``check`` (code that
    fails the way the fuzzer saw it fail)."""
    parts = ["# dispatch_jit fuzz reproducer" + (f": {note}" if note else ""),
             "import numpy as np", "import dispatch_jit as dj", "", 'nan, inf = float("nan"), float("inf")',
             "def _first(r):  # max/min with an axis: values (a tensor, or the (values, indices) tuple)",
             "    return r[0] if isinstance(r, tuple) else r", ""]
    layouts = {s.layout for s in g.inputs} | {s.layout for v in (variants or {}).values() for s in v}
    for lay in sorted(layouts - {"c"}):
        parts.append(LAYOUT_SRC[lay])
    src, needs = inputs_source(g)
    bodies = [src]
    for name, specs in (variants or {}).items():
        s, n2 = inputs_source(g, specs, name)
        bodies.append(s)
        needs = needs or n2
    if needs:
        parts.append(inspect.getsource(fo.make_values))
    parts += bodies
    parts.append(function_source(g))
    parts.append(check)
    return "\n".join(parts)
