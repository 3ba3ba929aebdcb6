"""Gradients of random float64 graphs (the table's differentiable rows) against finite differences, in
eager mode, under @dj.compile and in dj.execution_mode("compiled"); and compiled/lazy gradients against eager's (bit for
bit, except where additions may be reordered: float reductions, and @dj.compile's fused backward
(compiler/joint.py), which evaluates the same formulas but sums the gradients of a value used three times
or more in its own order; lazy mode records the forward with eager mode's nodes and the backward's ops
(compiler/lazy/grad.py), so its gradients are eager's bit for bit).  Under @dj.compile the backward must be the fused plan, or explain() must say
why it replayed eagerly; so too with the inputs held as a dj.nn.Module's parameters that the compiled
function reads (lifted inputs, compiler/owners.py: mode "captured"); and on a second call of the same
sizes, whose plans run as one compiled function each where they can (compiler/run/function.py: mode "again");
and the third backward of a graph in dj.execution_mode("compiled"), replayed from the records of the walks before it
where it can be (compiler/lazy/backward.py: mode "lazy_again")."""

import numpy as np
from hypothesis import assume, given, strategies as st

import dispatch_jit as dj
import fuzz_check as fc
import fuzz_graph as fg
from fuzz_ops import ROW, ROWS
from fuzz_settings import fuzz_settings

GRAD_ROWS = [r for r in ROWS if r.grad]
# kinks where finite differences are meaningless: operands closer than this to one are rejected
_KINK = 1e-3


def _well_posed(g):
    """Positive operands where the op needs them, away from kinks and ties, everything finite."""
    try:
        vals = fc.run_mirror(g)
    except Exception:      # noqa: BLE001
        return False
    k = len(g.inputs)
    for i, node in enumerate(g.nodes):
        row = ROW[node.op]
        ops = [None if a is None else vals[a[1]] if a[0] == "v" else np.float64(a[1]) for a in node.args]
        out = vals[k + i]
        if out.dtype.kind != "f" or not np.all(np.isfinite(out)) or (out.size and np.max(np.abs(out)) > 1e6):
            return False
        for j in row.pos:
            if j < len(ops) and ops[j] is not None and np.any(np.asarray(ops[j]) <= 0.05):
                return False
        x = ops[0]
        if node.op in ("abs", "relu") and np.any(np.abs(x) < _KINK):
            return False
        if node.op in ("maximum", "minimum") and np.any(np.abs(np.subtract(*np.broadcast_arrays(x, ops[1]))) < _KINK):
            return False
        if node.op == "clamp" and any(b is not None and np.any(np.abs(np.subtract(*np.broadcast_arrays(x, b))) < _KINK)
                                      for b in ops[1:]):
            return False
        if node.op in ("max", "min") and x.size > 1:
            s = np.sort(x.reshape(-1))
            if np.any(np.diff(s) < _KINK):
                return False
        if node.op in ("std",) and np.any(out < 1e-3):
            return False
        if node.op == "pow" and not np.all(np.asarray(ops[0]) > 0.05):
            return False
        if node.op in ("tan",) or (node.op == "atan2" and np.any(np.abs(np.asarray(ops[1])) < 0.05)):
            return False
    return all(vals[o].dtype == np.float64 for o in g.outputs)


def loss_source(g):
    src = fg.function_source(g)
    src += ("\ndef loss(*xs):\n    outs = f(*xs)\n    total = None\n    for i, o in enumerate(outs):\n"
            "        term = (o * (0.5 + i)).sum()\n        total = term if total is None else total + term\n"
            "    return total\n")
    return src


def build_loss(g):
    env = fg._globals()
    exec(compile(loss_source(g), "<fuzz grad graph>", "exec"), env)
    return env["loss"]


def captured(loss, xs):
    """``loss`` compiled with its inputs held as the parameters of a ``dj.nn.Module`` that the compiled
    function reads (a model's parameters: lifted inputs, compiler/owners.py), and those parameters."""
    holder = dj.nn.Module()
    for i, x in enumerate(xs):
        setattr(holder, f"p{i}", dj.nn.Parameter(x.detach()))
    return dj.compile(lambda: loss(*holder.parameters())), list(holder.parameters())


def grads(loss, g, mode):
    xs = fg.make_inputs(g)
    if mode == "captured":
        fn, xs = captured(loss, xs)
        out = fn()
        out.backward()
        _check_backward_mode(fn)
    elif mode == "again":
        # a second call of the same sizes: the fused backward's plans run as one compiled function
        # each where they can (compiler/run/function.py), else explain() says why not
        loss(*fg.make_inputs(g)).backward()
        out = loss(*xs)
        out.backward()
        _check_backward_mode(loss)
        _check_plan_functions(loss)
    elif mode == "lazy":
        with dj.execution_mode("compiled"):
            out = loss(*xs)
            out.backward()
    elif mode == "lazy_again":
        # the third backward of a structure is replayed from the records of the walks before it
        # where it can be (compiler/lazy/backward.py: the second walks with the seed pending)
        for _ in range(2):
            with dj.execution_mode("compiled"):
                loss(*fg.make_inputs(g)).backward()
        with dj.execution_mode("compiled"):
            out = loss(*xs)
            out.backward()
    else:
        out = loss(*xs)
        out.backward()
    if mode == "compile":
        _check_backward_mode(loss)
    return [None if x.grad is None else x.grad.numpy().copy() for x in xs], out.numpy().copy()


def _check_backward_mode(cf):
    """The compiled backward ran (the fused plan), or explain() says why it replayed eagerly."""
    entry = cf._last
    fused = getattr(entry, "fused", None)
    if fused is None:          # an eager entry: explain() gives its reason
        assert entry.reason and entry.reason in cf.explain(), cf.explain()
        return
    for f in fused.values():
        if isinstance(f, str):
            assert f and f in cf.explain(), cf.explain()
        else:
            assert f.runs > 0 and "fused backward" in cf.explain(), cf.explain()


def _check_plan_functions(cf):
    """Each plan of each fused backward ran as one compiled function, or explain() says why not."""
    for f in getattr(cf._last, "fused", {}).values():
        if isinstance(f, str):
            continue
        for plan in (f.forward, f.backward):
            assert plan.function is not None or plan.function_reason, cf.explain()
            assert plan.describe_function() in cf.explain()


@st.composite
def grad_graphs(draw):
    ch = fg.HypothesisChooser(draw)
    g = fg.gen_graph(ch, rows=GRAD_ROWS, max_nodes=4, dtypes=["float64"], allow_large=False,
                     flavors=("positive",))
    for s in g.inputs:
        s.requires_grad = True
    return g


def _repro(g, check):
    return fg.reproducer(g, loss_source(g).split("\n\n", 1)[1] + "\n" + check, note="gradients")


@fuzz_settings(10)
@given(grad_graphs())
def test_random_graph_gradients(g):
    assume(not g.expect_error and g.outputs and all(s.shape and np.prod(s.shape) <= 24 for s in g.inputs))
    assume(_well_posed(g))
    loss = build_loss(g)
    try:
        eager, value = grads(loss, g, "eager")
    except Exception:      # noqa: BLE001 - errors are test_fuzz_graphs' business
        assume(False)
    assume(any(x is not None for x in eager))
    # finite differences, in each mode
    for mode in ("eager", "compile", "lazy"):
        xs = fg.make_inputs(g)
        fn = dj.compile(loss) if mode == "compile" else loss
        try:
            if mode == "lazy":
                with dj.execution_mode("compiled"):
                    ok = dj.autograd.gradcheck(fn, xs)
            else:
                ok = dj.autograd.gradcheck(fn, xs)
        except Exception as e:      # noqa: BLE001
            raise AssertionError(f"gradcheck failed in {mode} mode: {type(e).__name__}: {e}\n\n" + _repro(
                g, "xs = inputs()\n" + ("with dj.execution_mode('compiled'):\n    " if mode == "lazy" else "") +
                f"print(dj.autograd.gradcheck({'dj.compile(loss)' if mode == 'compile' else 'loss'}, xs))\n")) \
                from None
        assert ok
    # compiled and lazy gradients are eager's ("captured": compiled, the inputs a module's parameters)
    for mode in ("compile", "again", "captured", "lazy", "lazy_again"):
        got, v = grads(dj.compile(loss) if mode in ("compile", "again") else loss, g, mode)
        # the loss is a sum: its fused loop may add in another order than eager's; so may the graph's
        # own float reductions, whose backward reads their results; and the fused backward adds the
        # gradients of a value used three times or more in its graph's order, not in the order the
        # eager engine's nodes happen to finish (a+b+c vs a+c+b: one rounding apart)
        same_grad = fc.same_result if any(g.reordered) or mode in ("compile", "again", "captured") else fc.same_bits
        why = fc.same_result(v, value)
        for i, (a, b) in enumerate(zip(got, eager)):
            if (a is None) != (b is None):
                why = f"x{i}.grad is {'None' if a is None else 'set'} in {mode} mode, {'None' if b is None else 'set'} eagerly"
            elif a is not None:
                why = why or same_grad(a, b)
        if why:
            check = ("xs = inputs(); loss(*xs).backward(); eager = [x.grad for x in xs]\n"
                     + ("ys = inputs(); dj.compile(loss)(*ys).backward()\n" if mode == "compile" else
                        "cf = dj.compile(loss); cf(*inputs()).backward(); ys = inputs(); cf(*ys).backward()\n"
                        if mode == "again" else
                        "from test_fuzz_grad import captured\nfn, ys = captured(loss, inputs()); fn().backward()\n" if mode == "captured" else
                        "for _ in range(2):\n    with dj.execution_mode('compiled'):\n        loss(*inputs()).backward()\n"
                        "ys = inputs()\nwith dj.execution_mode('compiled'):\n    loss(*ys).backward()\n" if mode == "lazy_again" else
                        "ys = inputs()\nwith dj.execution_mode('compiled'):\n    loss(*ys).backward()\n")
                     + "print(eager, [y.grad for y in ys], sep='\\n')\n")
            raise AssertionError(f"{mode} gradients differ from eager's: {why}\n\n" + _repro(g, check))
    if fc.torch is not None:
        _check_torch(g, eager)


def test_skinny_linear_gradients():
    """A skinny linear (3 rows, 32 and 64 wide), which the random graphs' inputs of at most 24 elements
    never reach: its forward and input gradient run in kernels/linalg/product.py's loop nest instead of
    BLAS, in eager mode and in the compiled plans alike.  Finite differences in eager mode; compiled
    ("again": the plan functions) and lazy gradients equal eager's bit for bit."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in ((3, 64), (32, 64), (32,))]

    def inputs():
        return [dj.tensor(a, requires_grad=True) for a in arrays]

    def loss(x, w, b):
        return (dj.tanh(dj.linear(x, w, b)) * 0.5).sum()

    assert dj.autograd.gradcheck(loss, inputs())
    results = {}
    for mode in ("eager", "compile", "again", "lazy"):
        xs = inputs()
        fn = dj.compile(loss) if mode in ("compile", "again") else loss
        if mode == "again":
            fn(*inputs()).backward()
        if mode == "lazy":
            with dj.execution_mode("compiled"):
                fn(*xs).backward()
        else:
            fn(*xs).backward()
        if mode == "again":
            _check_plan_functions(fn)
            assert all(f.backward.function is not None for f in fn._last.fused.values()), fn.explain()
        results[mode] = [x.grad.numpy() for x in xs]
    for mode, got in results.items():
        for i, (a, b) in enumerate(zip(got, results["eager"])):
            why = fc.same_bits(a, b)
            assert why is None, f"{mode}: the gradient of input {i} differs from eager's: {why}"


def _check_torch(g, eager):
    """PyTorch's gradients for the elementwise/reduction part of the graph, where every node has a torch
    function (views are evaluated with NumPy-equivalent torch calls only for the ops listed here)."""
    torch = fc.torch
    k = len(g.inputs)
    xs = [torch.from_numpy(s.array().copy()).requires_grad_(True) for s in g.inputs]
    vals = list(xs)
    for node in g.nodes:
        row = ROW[node.op]
        args = [None if a is None else vals[a[1]] if a[0] == "v" else a[1] for a in node.args]
        try:
            t = _torch_view(node, args)
        except Exception:      # noqa: BLE001 - e.g. a negative step, which PyTorch has not
            return
        if t is None:
            if row.torch is None:
                return
            try:
                t = row.torch(args, node.params)
            except Exception:      # noqa: BLE001
                return
        vals.append(t)
    total = None
    for i, o in enumerate(g.outputs):
        term = (vals[o] * (0.5 + i)).sum()
        total = term if total is None else total + term
    total.backward()
    for i, x in enumerate(xs):
        if eager[i] is None:
            continue
        want = np.zeros_like(eager[i]) if x.grad is None else x.grad.numpy()
        np.testing.assert_allclose(eager[i], want, rtol=1e-7, atol=1e-9,
                                   err_msg=f"x{i}.grad vs PyTorch\n\n" + _repro(g, "xs = inputs(); loss(*xs).backward(); "
                                                                                  "print([x.grad for x in xs])\n"))
    del k


def _torch_view(node, args):
    p = node.params
    x = args[0]
    try:
        if node.op == "transpose":
            return x.transpose(p["d0"], p["d1"])
        if node.op == "T":
            return x.T
        if node.op == "permute":
            return x.permute(*p["dims"])
        if node.op == "unsqueeze":
            return x.unsqueeze(p["axis"])
        if node.op == "squeeze":
            return x.squeeze() if p["axis"] is None else x.squeeze(p["axis"])
        if node.op == "expand":
            return x.expand(*p["size"])
        if node.op == "narrow":
            return x.narrow(p["axis"], p["start"], p["length"])
        if node.op == "slice":
            return fc.torch.ops.aten.slice(x, p["dim"], p["start"], p["end"], p["step"])
        if node.op == "reshape":
            return x.reshape(p["shape"])
        if node.op == "flatten":
            return x.flatten(p["start"], p["end"])
        if node.op in ("clone", "contiguous"):
            return x.clone()
        if node.op == "getitem":
            if any(isinstance(i, slice) and i.step is not None and i.step < 0 for i in p["idx"]):
                raise NotImplementedError
            return x[p["idx"]]
    except Exception:      # noqa: BLE001
        raise
    if node.op in ("getitem",):
        return None
    return None
