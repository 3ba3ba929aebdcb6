"""Running one graph every way and comparing: the fuzzers' oracle.

``check_graph(g)`` runs the graph

1. eagerly, node by node, comparing each node with NumPy (``Row.np`` on a
   copy of the node's operands, PyTorch's promotion) and with PyTorch when it
   is installed: dtype, shape, NaN positions, values (exact for ints, bools and
   correctly rounded float ops; the row's tolerance otherwise);
2. eagerly as one function, comparing every output and every input's final
   state with the NumPy mirror of the whole graph (which aliases as eager
   mode's views do) where the values are exact;
3. under ``@dj.compile``: several calls of one compiled function (the same
   inputs twice, new values, new layouts, new sizes), and
4. in ``dj.execution_mode("compiled")``, materialized inside or after the block,

comparing 3 and 4 with eager mode bit for bit (NaNs equal whatever their
payload): outputs, inputs' final states, which outputs and inputs share
memory, and that results of earlier calls were not overwritten by later
ones.  If eager mode raises, every mode must raise the same exception type.
A failure raises ``Mismatch`` whose message ends with a standalone reproducer.
"""

from __future__ import annotations

import numpy as np

import fuzz_graph as fg
import fuzz_ops as fo
from fuzz_ops import ROW, OracleError, Undefined

try:
    import torch
except ImportError:        # the fuzzers run without PyTorch
    torch = None


class Mismatch(AssertionError):
    def __init__(self, key, message):
        super().__init__(message)
        self.key = key


# -- comparisons -----------------------------------------------------------------------------------
def _np(t):
    return np.asarray(t.numpy())


def close(got, want, tol):
    """None if got matches want (dtype, shape, NaN positions, values within tol), else why not."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape} != expected {want.shape}"
    if got.dtype.kind != "f":
        if not np.array_equal(got, want):
            return _worst(got, want)
        return None
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    gn, wn = np.isnan(g64), np.isnan(w64)
    if not np.array_equal(gn, wn):
        i = np.argwhere(gn != wn)[0]
        return f"NaN positions differ, e.g. at {tuple(i)}: got {got[tuple(i)]!r}, expected {want[tuple(i)]!r}"
    if tol is None:
        ok = (g64 == w64) | wn
    else:
        rtol, atol = tol
        with np.errstate(all="ignore"):
            ok = (g64 == w64) | wn | (np.abs(g64 - w64) <= atol + rtol * np.abs(w64))
    if not ok.all():
        return _worst(got, want, ~ok)
    return None


def _worst(got, want, bad=None):
    if bad is None:
        bad = ~((got == want) | ((got != got) & (want != want)))
    bad = np.asarray(bad).reshape(got.shape)
    idx = np.argwhere(bad)
    i = tuple(int(x) for x in idx[0]) if len(idx) else ()
    return (f"{len(idx)} of {got.size} elements differ, e.g. at {i}: got {got[i]!r}, expected {want[i]!r}"
            + (f"\n  got:      {np.array2string(got, threshold=40)}\n  expected: {np.array2string(want, threshold=40)}"
               if got.size <= 40 else ""))


def same_bits(a, b):
    """None if a and b are the same bits (any NaN equals any NaN), else why not."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} != eager's {b.dtype}"
    if a.shape != b.shape:
        return f"shape {a.shape} != eager's {b.shape}"
    if a.dtype.kind == "f":
        an, bn = np.isnan(a), np.isnan(b)
        u = np.dtype(f"u{a.dtype.itemsize}")
        eq = (np.array(a, order="C").view(u) == np.array(b, order="C").view(u)) | (an & bn)
    else:
        eq = a == b
    if not np.all(eq):
        return "values differ from eager's: " + _worst(a, b, ~np.asarray(eq))
    return None


# how far a value computed from a float reduction may be from eager's, relative to the largest
# magnitude in the array: the fused loop and the eager kernel may add in different orders
# (n * eps * sum|x| apart), and later ops carry that on; real bugs are far larger
REORDER_RTOL = {2: 2.0 ** -6, 4: 2.0 ** -14, 8: 2.0 ** -40}


def same_result(a, b):
    """None if a and b are the same up to the order of a float reduction's additions (same
    dtype, shape, NaN positions, and values within REORDER_RTOL), else why not."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f" or a.dtype != b.dtype or a.shape != b.shape:
        return same_bits(a, b)
    an, bn = np.isnan(a), np.isnan(b)
    fa, fb = np.where(an, 0, a).astype(np.float64), np.where(bn, 0, b).astype(np.float64)
    inf = np.isinf(fa) | np.isinf(fb)
    with np.errstate(all="ignore"):
        scale = np.max(np.abs(fb[~inf]), initial=0.0)
        ok = (an == bn) & np.where(inf, fa == fb, np.abs(fa - fb) <= REORDER_RTOL[a.dtype.itemsize] * scale)
    if not np.all(ok):
        return "values differ from eager's beyond a reduction's reordering: " + _worst(a, b, ~ok)
    return None


def _shares(x, y):
    try:
        return bool(np.shares_memory(x, y, max_work=10 ** 5))
    except np.exceptions.TooHardError:
        return True


def alias_relation(outs, inputs):
    arrs = [_np(t) for t in list(outs) + list(inputs)]
    n = len(arrs)
    return {(i, j) for i in range(n) for j in range(i + 1, n) if arrs[i].size and arrs[j].size
            and _shares(arrs[i], arrs[j])}


# -- the NumPy mirror of a whole graph --------------------------------------------------------------
def run_mirror(g, specs=None):
    """Every value of the graph computed in NumPy (views alias); raises OracleError / Undefined."""
    specs = specs or g.inputs
    vals = [fg.layout_np(s.array(), s.layout) for s in specs]
    vals = [v.copy() if s.layout == "c" else v for v, s in zip(vals, specs)]
    with np.errstate(all="ignore"):
        for node in g.nodes:
            row = ROW[node.op]
            args = [None if a is None else vals[a[1]] if a[0] == "v" else a[1] for a in node.args]
            try:
                r = row.np(args, node.params)
            except (ValueError, IndexError, TypeError, np.exceptions.AxisError) as e:
                if isinstance(e, OracleError):
                    raise
                raise OracleError(f"{type(e).__name__}: {e}") from None
            vals.append(np.asarray(r) if not isinstance(r, np.ndarray) else r)
    return vals


# -- running a graph in one mode ---------------------------------------------------------------------
class Run:
    """One call: outputs, inputs after the call, error, alias relation, and snapshots."""

    def __init__(self, outs=None, inputs=None, error=None):
        self.error = error
        self.outs = outs or []
        self.inputs = inputs or []
        self.out_np = [_np(t).copy() for t in self.outs]
        self.in_np = [_np(t).copy() for t in self.inputs]
        self.alias = alias_relation(self.outs, self.inputs) if error is None else set()

    def still_intact(self):
        """Outputs still hold what they held right after the call (no buffer reused under them)."""
        for i, (t, snap) in enumerate(zip(self.outs, self.out_np)):
            why = same_bits(_np(t), snap)
            if why:
                return i, why
        return None


def call_eager(f, g, specs):
    inputs = fg.make_inputs(g, specs)
    try:
        outs = f(*inputs)
    except Exception as e:      # noqa: BLE001 - any exception is a result to compare
        return Run(error=e)
    return Run(list(outs), inputs)


def call_lazy(f, g, specs, inside: bool):
    import dispatch_jit as dj
    inputs = fg.make_inputs(g, specs)
    try:
        with dj.execution_mode("compiled"):
            outs = f(*inputs)
            if inside:
                for t in outs:
                    t.numpy()
    except Exception as e:      # noqa: BLE001
        return Run(error=e)
    return Run(list(outs), inputs)


# -- the checks --------------------------------------------------------------------------------------
def _fail(g, key, why, check, variants=None, note=""):
    repro = fg.reproducer(g, check, variants, note)
    raise Mismatch(key, f"{why}\n\n----- standalone reproducer -----\n{repro}")


def _wanted_literal(want):
    a = np.asarray(want)
    if a.size <= 40:
        return f"np.array({a.tolist()!r}, dtype=np.{a.dtype.name})".replace("nan", "nan")
    return f"<array of shape {a.shape}, dtype {a.dtype}>"


def check_nodes(g, use_torch=True):
    """Eager mode node by node against NumPy (and PyTorch); returns the eager error of the last node
    or None."""
    vals = fg.make_inputs(g)
    last = len(g.nodes) - 1
    for k, node in enumerate(g.nodes):
        row = ROW[node.op]
        fn, names = fg.node_function(g, k)
        snaps = {i: _np(vals[i]).copy() for i in names}
        args = [None if a is None else snaps[a[1]].copy() if a[0] == "v" else a[1] for a in node.args]
        targs = None
        if use_torch and torch is not None and row.torch is not None and all(
                a is None or not isinstance(a, np.ndarray) or a.dtype.name in fo.TORCH_DTYPES for a in args) and not (
                row.torch_skip and row.torch_skip(args, node.params)):
            targs = [torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
        try:
            r = fn(*[vals[i] for i in names])
        except Exception as e:      # noqa: BLE001
            if k == last and g.expect_error:
                return e
            sub = _sub_graph(g, k)
            _fail(sub, ("eager-error", node.op), f"eager mode raised {type(e).__name__}: {e}\nat node {k}: "
                  f"{fg.node_lines(g, k)[0]}\nbut NumPy with PyTorch's semantics computes it",
                  "print(f(*inputs()))\n", note="eager mode raises where it should compute")
        if k == last and g.expect_error:
            sub = _sub_graph(g, k)
            _fail(sub, ("missing-error", node.op), f"eager mode returned a value where PyTorch's semantics "
                  f"raise ({g.expect_error})\nat node {k}: {fg.node_lines(g, k)[0]}",
                  "print(f(*inputs()))  # expected an exception\n", note="silently accepted invalid call")
        vals.append(r)
        got = _np(r)
        with np.errstate(all="ignore"):
            try:
                want = np.asarray(row.np(args, node.params))
            except (OracleError, Undefined):
                continue        # (a variant's values can hit what generation avoided)
            tol = row.tol(args, node.params, want) if row.tol is not None else None
        why = close(got, want, tol)
        if why:
            sub = _sub_graph(g, k)
            _fail(sub, ("numpy", node.op, str(want.dtype)),
                  f"eager result of node {k} `{fg.node_lines(g, k)[0]}` differs from NumPy: {why}",
                  f"got = f(*inputs())[0]\nprint(got)\nexpected = {_wanted_literal(want)}  # NumPy, float64 "
                  f"reference\n", note=f"{node.op} vs NumPy")
        if targs is not None:
            try:
                tr = row.torch(targs, node.params)
            except Exception:     # noqa: BLE001 - PyTorch refuses: nothing to compare
                continue
            tw = tr.detach().numpy()
            ttol = tol
            if tw.dtype.kind == "f":
                t2 = fo.ulps(4)(args, node.params, tw)
                ttol = t2 if tol is None else (tol[0] * 2 + t2[0], tol[1] * 2 + t2[1])
            why = close(got, tw, ttol)
            if why:
                sub = _sub_graph(g, k)
                _fail(sub, ("torch", node.op, str(tw.dtype)),
                      f"eager result of node {k} `{fg.node_lines(g, k)[0]}` differs from PyTorch: {why}",
                      f"got = f(*inputs())[0]\nprint(got)\nexpected = {_wanted_literal(tw)}  # torch\n",
                      note=f"{node.op} vs PyTorch")
    return None


def _sub_graph(g, k):
    """The graph up to node k, returning value k."""
    sub = fg.Graph(g.inputs, g.nodes[:k + 1], [len(g.inputs) + k], None, g.exact[:len(g.inputs) + k + 1],
                   g.reordered[:len(g.inputs) + k + 1])
    return sub


def variants(g):
    """(name, input specs) for the calls of the compiled function after the first."""
    out = [("inputs", g.inputs)]
    out.append(("inputs", g.inputs))            # the same again: the cache-hit (fast) path
    out.append(("new_values", [fg.Input(s.shape, s.dtype, s.layout, s.seed + 7919, s.flavor) for s in g.inputs]))

    def relayout(s):
        lay = "c" if s.layout != "c" else ("T" if len(s.shape) >= 2 else "S" if len(s.shape) >= 1 else "c")
        return fg.Input(s.shape, s.dtype, lay, s.seed, s.flavor)
    out.append(("new_layout", [relayout(s) for s in g.inputs]))
    if any(x >= 2 for s in g.inputs for x in s.shape) and max(np.prod(s.shape) for s in g.inputs) < 1 << 16:
        out.append(("new_sizes", [fg.Input(tuple(x + 1 if x >= 2 else x for x in s.shape), s.dtype, s.layout,
                                           s.seed + 1, s.flavor) for s in g.inputs]))
    return out


def _mode_check_src(mode, calls, k):
    """Script lines: eager vs the mode for the call sequence calls[:k+1]."""
    lines = []
    if mode == "compile":
        lines.append("fc = dj.compile(f)")
        for i, name in enumerate(calls[:k + 1]):
            lines.append(f"r{i} = [t.numpy().copy() for t in fc(*{name}())]   # call {i + 1}")
        lines.append(f"eager = [t.numpy() for t in f(*{calls[k]}())]")
        lines.append(f"for got, want in zip(r{k}, eager):")
    else:
        lines.append(f"eager = [t.numpy() for t in f(*{calls[k]}())]")
        lines.append('with dj.execution_mode("compiled"):')
        lines.append(f"    lazy = f(*{calls[k]}())")
        lines.append("lazy = [t.numpy() for t in lazy]")
        lines.append("for got, want in zip(lazy, eager):")
    lines.append("    print(got, want, sep='\\n')")
    lines.append("    np.testing.assert_array_equal(got, want)")
    return "\n".join(lines) + "\n"


def _error_check_src(mode, calls, k):
    call = {"compile": f"dj.compile(f)(*{calls[k]}())", "lazy": None}[mode] if mode == "compile" else None
    lines = ["def outcome(run):", "    try:", "        r = run()", "        return [t.numpy() for t in r]",
             "    except Exception as e:", "        return type(e).__name__ + ': ' + str(e)",
             f"print('eager:', outcome(lambda: f(*{calls[k]}())))"]
    if mode == "compile":
        lines.append(f"fc = dj.compile(f)")
        for i in range(k):
            lines.append(f"outcome(lambda: fc(*{calls[i]}()))")
        lines.append(f"print('compiled:', outcome(lambda: fc(*{calls[k]}())))")
    else:
        lines += ["def lazy():", '    with dj.execution_mode("compiled"):', f"        r = f(*{calls[k]}())",
                  "    return r", "print('lazy:', outcome(lazy))"]
    del call
    return "\n".join(lines) + "\n"


def compare_runs(g, mode, calls, k, var_specs, ref: Run, got: Run):
    names = {n: s for n, s in zip(calls, var_specs)}
    variants_src = {n: s for n, s in names.items() if n != "inputs"}
    what = f"{mode} (call {k + 1}: {calls[k]})"
    if ref.error is not None or got.error is not None:
        if ref.error is None:
            _fail(g, (mode, "raises", calls[k]), f"{what} raised {type(got.error).__name__}: {got.error}; eager "
                  f"mode did not", _error_check_src(mode, calls, k), variants_src, f"{mode} raises, eager does not")
        if got.error is None:
            _fail(g, (mode, "no-error", calls[k]), f"eager mode raised {type(ref.error).__name__}: {ref.error}; "
                  f"{what} returned a value", _error_check_src(mode, calls, k), variants_src,
                  f"{mode} silently returns where eager raises")
        if type(ref.error) is not type(got.error):
            _fail(g, (mode, "error-type", calls[k]), f"eager mode raised {type(ref.error).__name__}: {ref.error}; "
                  f"{what} raised {type(got.error).__name__}: {got.error}", _error_check_src(mode, calls, k),
                  variants_src, f"{mode} raises another exception type")
        return
    for i, (a, b) in enumerate(zip(got.out_np, ref.out_np)):
        why = (same_result if g.reordered[g.outputs[i]] else same_bits)(a, b)
        if why:
            _fail(g, (mode, "value", calls[k]), f"{what}: output {i} ({fg.vname(g, g.outputs[i])}): {why}",
                  _mode_check_src(mode, calls, k), variants_src, f"{mode} != eager")
    for i, (a, b) in enumerate(zip(got.in_np, ref.in_np)):
        why = (same_result if g.reordered[i] else same_bits)(a, b)
        if why:
            _fail(g, (mode, "input-state", calls[k]), f"{what}: input x{i} after the call: {why}",
                  _mode_check_src(mode, calls, k).replace("t.numpy()", "t.numpy()") +
                  "# (compare the inputs after the calls: keep references to inputs() results)\n",
                  variants_src, f"{mode}: inputs after the call differ from eager's")
    if got.alias != ref.alias:
        n = len(got.outs)
        lab = [fg.vname(g, i) for i in g.outputs] + [f"input x{i}" for i in range(len(got.inputs))]
        fmt = lambda rel: sorted(f"{lab[i]}~{lab[j]}" for i, j in rel) or "none"   # noqa: E731
        del n
        _fail(g, (mode, "aliasing", calls[k]), f"{what}: which outputs/inputs share memory differs: eager "
              f"{fmt(ref.alias)}, {mode} {fmt(got.alias)}",
              "# shares memory, eager vs " + mode + "\n" + _mode_check_src(mode, calls, k), variants_src,
              f"{mode} aliasing differs from eager's")


def check_mirror(g, specs, run: Run, label):
    """Eager outputs and inputs after the call against the NumPy mirror, where the values are exact."""
    try:
        vals = run_mirror(g, specs)
    except (OracleError, Undefined):
        return
    for i, v in enumerate(g.outputs):
        want = vals[v]
        got = run.out_np[i]
        why = close(got, want, None) if g.exact[v] else (
            None if (got.dtype, got.shape) == (want.dtype, want.shape) else
            f"dtype/shape {got.dtype}{got.shape} != expected {want.dtype}{want.shape}")
        if why:
            _fail(g, ("mirror", "output", label), f"eager output {fg.vname(g, v)} ({label}) differs from the NumPy "
                  f"mirror of the whole graph: {why}", f"print(f(*inputs()))\n# expected {fg.vname(g, v)} = "
                  f"{_wanted_literal(want)}\n", note="eager end-to-end vs NumPy (aliasing/in-place semantics)")
    for i in range(len(g.inputs)):
        if g.exact[i]:
            why = close(run.in_np[i], vals[i], None)
            if why:
                _fail(g, ("mirror", "input", label), f"input x{i} after the eager call ({label}) differs from NumPy's "
                      f"(in-place semantics): {why}",
                      f"xs = inputs()\nf(*xs)\nprint(xs[{i}])\n# expected {_wanted_literal(vals[i])}\n",
                      note="input state after eager in-place ops vs NumPy")


def live_only(g):
    """``g`` with every dead node (not read by an output or an in-place statement, directly or
    not) replaced by a clone of input 0: compiled modes never compute dead values (README), so
    an error only a dead node raises is no mismatch."""
    k = len(g.inputs)
    need = set(g.outputs) | {k + i for i, n in enumerate(g.nodes) if ROW[n.op].statement}
    for i in range(len(g.nodes) - 1, -1, -1):
        if k + i in need:
            need.update(a[1] for a in g.nodes[i].args if a is not None and a[0] == "v")
    nodes = [n if k + i in need else fg.Node("clone", [("v", 0)], {}, 0) for i, n in enumerate(g.nodes)]
    return fg.Graph(g.inputs, nodes, g.outputs, g.expect_error, g.exact, g.reordered)


def check_graph(g, modes=("compile", "lazy"), use_torch=True, n_variants=None, rng=None):
    """All the checks of the module docstring; raises Mismatch."""
    import dispatch_jit as dj
    src = fg.function_source(g)
    f = fg.build_function(src)
    eager_err = check_nodes(g, use_torch)
    var = variants(g)
    if n_variants is not None:
        var = var[:n_variants]
    calls = [n if n == "inputs" else n for n, _ in var]
    specs = [s for _, s in var]
    keep = []
    refs = []
    for k, s in enumerate(specs):
        ref = call_eager(f, g, s)
        refs.append(ref)
        if k == 0 and (ref.error is None) != (eager_err is None):
            _fail(g, ("eager", "inconsistent"), f"eager mode node by node {'raised' if eager_err else 'ran'}, "
                  f"as one function {'raised ' + repr(ref.error) if ref.error else 'ran'}", "print(f(*inputs()))\n")
        if ref.error is None and calls[k] != "inputs" or k == 0:
            if ref.error is None:
                check_mirror(g, s, ref, calls[k])
    # where eager mode raises only in a dead node, a compiled mode may return (README): compare it with
    # eager mode on the live nodes instead
    live_f, live_refs = None, {}
    for k, s in enumerate(specs):
        if refs[k].error is not None:
            live_f = live_f or fg.build_function(fg.function_source(live_only(g)))
            live = call_eager(live_f, g, s)
            if live.error is None:
                live_refs[k] = live

    def ref_for(k, got):
        return live_refs[k] if got.error is None and k in live_refs else refs[k]
    if "compile" in modes:
        fc = dj.compile(f)
        for k, s in enumerate(specs):
            got = call_eager(fc, g, s)
            keep.append(got)
            compare_runs(g, "compile", calls, k, specs, ref_for(k, got), got)
        for i, r in enumerate(keep):
            bad = r.still_intact() if r.error is None else None
            if bad:
                _fail(g, ("compile", "overwritten"), f"compile: output {bad[0]} of call {i + 1} changed after later "
                      f"calls: {bad[1]}", _mode_check_src("compile", calls, len(keep) - 1) +
                      f"print(r{i})  # compare with its value right after call {i + 1}\n",
                      {n: s for n, s in zip(calls, specs) if n != "inputs"}, "compiled outputs overwritten")
    if "lazy" in modes:
        lazy_keep = []
        for k, s in enumerate(specs):
            if calls[k] == "inputs" and k == 1:
                continue
            inside = bool((k + len(g.nodes)) % 2)
            got = call_lazy(f, g, s, inside)
            lazy_keep.append(got)
            compare_runs(g, "lazy", calls, k, specs, ref_for(k, got), got)
        for r in lazy_keep:
            bad = r.still_intact() if r.error is None else None
            if bad:
                _fail(g, ("lazy", "overwritten"), f"lazy: output {bad[0]} changed after later calls: {bad[1]}",
                      _mode_check_src("lazy", calls, 0), None, "lazy outputs overwritten")
    return refs
