"""The dispatch-jit command line (also: python -m dispatch_jit).

  dispatch-jit ops [NAME]    list the operators with their dispatch keys, or one operator's tables
  dispatch-jit demo          a walk through one call's dispatch, with overhead and kernel figures
  dispatch-jit tradeoff      eager against compiled: per-call times, compile time, break-even calls,
                             and a training step per mode
  dispatch-jit warmup [OP]   compile the eager kernels ahead of time into the disk cache

Every user error (an unknown operator or dtype, a bad output directory, flags that exclude each
other) is reported in one line, exit status 2, before any work starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import timeit

__all__ = ["main"]


def _cmd_ops(args) -> int:
    import dispatch_jit as dj
    from ..registry import all_operators
    if args.name:
        print(dj.dump(args.name))
        print()
        print(dj.dump_table(args.name))
        return 0
    ops = sorted(all_operators(), key=lambda o: o.name)
    if args.namespace:
        ops = [o for o in ops if o.schema.namespace == args.namespace]
    width = max(len(o.name) for o in ops)
    for o in ops:
        keys = ", ".join(k.name for k in sorted(o.kernels, key=lambda k: -k.value))
        print(f"{o.name:<{width}}  {keys}")
    print(f"\n{len(ops)} operators")
    return 0


def _samples(fn, number: int, repeat: int = 5) -> list[float]:
    """Seconds per call in each of ``repeat`` samples of ``number`` calls."""
    return [t / number for t in timeit.repeat(fn, number=number, repeat=repeat)]


def _spread(samples, scale: float, digits: int = 1) -> str:
    return " / ".join(f"{x * scale:,.{digits}f}" for x in (min(samples), statistics.median(samples), max(samples)))


def _ratio(r: float, ours: str = "dj") -> str:
    from .training import ratio_text
    return ratio_text(r, f"{ours} faster", f"{ours} slower")


def _cmd_demo(args) -> int:
    import numpy as np
    import dispatch_jit as dj

    from .tradeoff import machine_line
    print(machine_line() + "\n")
    print("== The seed scenario: two float32 CPU tensors, dj.add ==")
    x = dj.tensor([1.0, 2.0], dtype=dj.float32)
    w = dj.tensor([3.0, 4.0], dtype=dj.float32)
    print(f"x = {x}\nw = {w}\ndispatch_keys(x) = {dj.dispatch_keys(x)}")
    with dj.show_dispatch_trace():
        y = dj.add(x, w)
    print(f"dj.add(x, w) = {y}")
    print(f"x * 2 + w.exp() @ w = {x * 2 + w.exp() @ w}")
    print("\n== The same call when w requires grad: Autograd wraps the CPU kernel ==")
    wg = dj.tensor([3.0, 4.0], dtype=dj.float32, requires_grad=True)
    with dj.show_dispatch_trace():
        r = dj.add(x, wg)
    r.sum().backward()
    print(f"r = {r}\nw.grad = {wg.grad}, x.grad = {x.grad}")
    print()
    print(dj.dump_table("aten::add"))
    print()
    print("cache_info(aten::add):", dj.cache_info("aten::add"))

    print("\n== Eager dispatch overhead, 16-element float32, cache hit ==")
    print("   per call, min / median / max of 5 samples; ratio = this call's median / np.add's")
    a = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    ta, tb = dj.asarray(a), dj.asarray(b)
    dj.add(ta, tb)
    rows = [("np.add", lambda: np.add(a, b)), ("dj.add", lambda: dj.add(ta, tb)),
            ("dj tensor + tensor", lambda: ta + tb)]
    try:
        import torch
        pa, pb = torch.ones(16), torch.ones(16)
        rows.append(("torch.add", lambda: torch.add(pa, pb)))
    except ImportError:
        pass
    n = 20000 if args.quick else 100000
    print(f"  {'call':<20} {'ns: min / median / max':>26}   {'this / np.add':>13}")
    base = None
    for name, fn in rows:
        ts = _samples(fn, n)
        base = base or statistics.median(ts)
        print(f"  {name:<20} {_spread(ts, 1e9, 0):>26}   {statistics.median(ts) / base:>12.2f}x")

    print("\n== Kernels at 1e6 float32 elements against NumPy ==")
    print("   per call, min / median / max of 5 samples; ratio of the medians")
    rng = np.random.default_rng(0)
    a = rng.random(1_000_000, dtype=np.float32) + 0.5
    b = rng.random(1_000_000, dtype=np.float32) + 0.5
    ta, tb = dj.asarray(a), dj.asarray(b)
    cases = [("add", lambda: dj.add(ta, tb), lambda: np.add(a, b)),
             ("mul", lambda: ta * tb, lambda: a * b),
             ("exp", lambda: dj.exp(ta), lambda: np.exp(a)),
             ("maximum", lambda: dj.maximum(ta, tb), lambda: np.maximum(a, b)),
             ("sum", lambda: ta.sum(), lambda: a.sum()),
             ("max", lambda: ta.max(), lambda: a.max())]
    print(f"  {'op':<8} {'dj us: min / median / max':>28} {'numpy us: min / median / max':>31}   dj / numpy")
    for name, f_dj, f_np in cases:
        f_dj()  # compile outside the timing
        tdj, tnp = _samples(f_dj, 20), _samples(f_np, 20)
        print(f"  {name:<8} {_spread(tdj, 1e6):>28} {_spread(tnp, 1e6):>31}   "
              f"{_ratio(statistics.median(tdj) / statistics.median(tnp))}")
    print("\ncompiled signatures:", {k: v for k, v in dj.cache_info("aten::add")["compiled"].items()})

    print("\n== Eager vs compiled: f(a, b, c) = maximum((a*b + c)*2 - a, 0) * exp(-b), 1e6 float32 ==")

    def f(a, b, c):
        return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)
    cf = dj.compile(f)
    c = dj.asarray(rng.random(1_000_000, dtype=np.float32))
    cf(ta, tb, c)
    f(ta, tb, c)
    te, tc = _samples(lambda: f(ta, tb, c), 10), _samples(lambda: cf(ta, tb, c), 10)
    print(f"  eager (7 kernels, 7 passes over memory), ms: {_spread(te, 1e3, 2)}")
    print(f"  compiled (one fused loop), ms:               {_spread(tc, 1e3, 2)}")
    print(f"  compiled / eager, medians: {_ratio(statistics.median(tc) / statistics.median(te), 'compiled')}")
    print(f"  {cf.cache_info()}")
    print("\n== A training step per mode (dispatch_jit/tools/training.py) ==")
    from .tradeoff import training_section
    training_section("mlp", 20 if args.quick else 100)
    _demo_cuda()
    return 0


def _demo_cuda() -> None:
    import contextlib
    import io
    import dispatch_jit as dj
    print("\n== CUDA: the same ops on device tensors ==")
    if not dj.cuda.is_available():
        print("  no CUDA device (no GPU, and NUMBA_ENABLE_CUDASIM is not set): skipped.  Run with "
              "NUMBA_ENABLE_CUDASIM=1 to see the CUDA backend on Numba's simulator")
        return
    print(f"  device: {dj.cuda.get_device_name()}")
    a = dj.arange(8.0, device="cuda")
    w = dj.ones(8, device="cuda", requires_grad=True)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), dj.show_dispatch_trace():
        y = (a * w).sum()
    for line in buf.getvalue().splitlines():
        print(f"  {line}")
    y.backward()
    print(f"  (a * w).sum() = {y.item()}   w.grad on {w.grad.device}: {w.grad.tolist()}")
    print(f"  memory: {dj.cuda.memory_stats()}")


def _cmd_tradeoff(args) -> int:
    from .tradeoff import main as tradeoff
    outdir = args.out
    if outdir is None and not args.no_plot:
        outdir = tempfile.mkdtemp(prefix="dispatch_jit_tradeoff_")
    if outdir is not None:
        os.makedirs(outdir, exist_ok=True)
        print(f"plots go to {outdir}\n", flush=True)
    sizes = [args.training_size] + (["gpt"] if args.gpt and args.training_size != "gpt" else [])
    run = "quick" if args.quick else "full" if args.full else "standard"
    return tradeoff(run=run, outdir=outdir, lazy=not args.no_lazy, training=None if args.no_training else sizes,
                    torch_compile=args.torch_compile)


def _cmd_warmup(args) -> int:
    import time
    import dispatch_jit as dj
    from ..jit.diskcache import cache_dir
    from ..kernels.warmup import TRAINING_OPS
    ops = args.ops or None
    t0 = time.perf_counter()
    info = dj.warmup(ops, args.dtype or None, parallel=args.parallel)
    took = time.perf_counter() - t0
    where = cache_dir()
    print(f"warmed up {len(ops or TRAINING_OPS)} ops x {', '.join(args.dtype or ['float32'])}"
          f"{' (serial and parallel)' if args.parallel else ''} in {took:.1f} s: {info.compiled} kernels compiled, "
          f"{info.loaded} loaded from the disk cache")
    print(f"disk cache: {where}" if where is not None else
          "disk cache: off (DISPATCH_JIT_CACHE_DIR); the kernels were compiled for this process only")
    for op, dtype, why in info.skipped:
        print(f"  skipped {op} for {dtype}: {why}")
    return 0


class _Parser(argparse.ArgumentParser):
    """A usage error is one line, what was wrong and what to do, exit status 2 (no usage dump, no
    traceback); subcommands' parsers are of this class too."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _check_ops(p, args) -> None:
    from ..errors import UnknownOperatorError
    from ..registry import all_operators, lookup
    if args.name:
        try:
            lookup(args.name)
        except UnknownOperatorError as e:
            p.error(f"{e}; run 'dispatch-jit ops' for the list")
    if args.namespace:
        spaces = sorted({o.schema.namespace for o in all_operators()})
        if args.namespace not in spaces:
            p.error(f"no operator is in namespace {args.namespace!r}; the namespaces: {', '.join(spaces)}")


def _check_tradeoff(p, args) -> None:
    if args.no_plot and args.out is not None:
        p.error("--out names where the plots go and --no-plot writes none: drop one of them")
    if args.no_training and (args.gpt or args.torch_compile or args.training_size != "mlp"):
        flag = "--gpt" if args.gpt else "--torch-compile" if args.torch_compile else "--training-size"
        p.error(f"{flag} configures the training section, which --no-training skips: drop one of them")
    if args.out is not None:
        out = os.path.abspath(args.out)
        if os.path.exists(out) and not os.path.isdir(out):
            p.error(f"--out {args.out}: a file is there; name a directory (it is created if missing)")
        parent = out if os.path.isdir(out) else os.path.dirname(out)
        if not os.path.isdir(parent):
            p.error(f"--out {args.out}: its parent directory {parent} does not exist; create it or name another")
        if not os.access(parent, os.W_OK):
            p.error(f"--out {args.out}: {parent} is not writable; name a directory you can write to")
    if not args.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            if args.out is not None:
                p.error("--out: the plots need matplotlib, which is not installed; "
                        "pip install 'dispatch_jit[plot]', or pass --no-plot")
            args.no_plot = True
            print("no plots: matplotlib is not installed (pip install 'dispatch_jit[plot]')", flush=True)


def _check_warmup(p, args) -> None:
    from ..dtypes import as_dtype
    from ..errors import DTypeError
    from ..kernels.warmup import RULES, _overload
    unknown = [n for n in args.ops if n not in RULES or _overload(n) is None]
    if unknown:
        p.error(f"no op named {', '.join(map(repr, unknown))} to warm up; the ops: "
                f"{', '.join(sorted(n for n in RULES if _overload(n) is not None))}")
    for d in args.dtype or []:
        try:
            as_dtype(d)
        except DTypeError as e:
            p.error(f"--dtype {d}: {e}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dispatch-jit", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{ops,demo,tradeoff,warmup}")
    o = sub.add_parser("ops", help="list operators with their keys, or dump one operator's tables",
                       description="With no NAME: every operator and the dispatch keys it has kernels for. "
                                   "With NAME: that operator's schema, kernels and computed dispatch table.")
    o.add_argument("name", nargs="?", help="an operator, e.g. aten::add or add (default namespace: aten)")
    o.add_argument("--namespace", help="list only the operators of this namespace, e.g. aten")
    d = sub.add_parser("demo", help="the seed scenario, dispatch tables and overhead figures",
                       description="One call's walk through the dispatcher (dispatch keys, the trace, the "
                                   "computed table), eager overhead against NumPy (and torch when installed), "
                                   "kernels at 1e6 elements, eager against compiled, a training step per mode, "
                                   "and the CUDA backend when a GPU (or the simulator) is there.")
    d.add_argument("--quick", action="store_true", help="fewer timing iterations and training steps")
    t = sub.add_parser("tradeoff", help="eager vs compiled per-call time, compile time and break-even calls",
                       description=_TRADEOFF_DESCRIPTION)
    size = t.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="sizes 1e2, 1e4 and 1e6, 0.05 s per measurement, 20 training steps (a minute or two)")
    size.add_argument("--full", action="store_true",
                      help="sizes 1e2 to 1e7, 0.4 s per measurement, 300 training steps")
    t.add_argument("--out", metavar="DIR",
                   help="directory for the PNG plots, created if missing (default: a new temporary directory, "
                        "printed first)")
    t.add_argument("--no-plot", action="store_true", help="write no plots")
    t.add_argument("--no-lazy", action="store_true", help="skip the global compiled mode column")
    t.add_argument("--no-training", action="store_true", help="skip the training-step section")
    t.add_argument("--training-size", choices=("mlp", "wide", "gpt"), default="mlp",
                   help="the training section's model: a 512x20 MLP with SGD (default), a wide 8192x256 MLP with "
                        "Adam, or the character-level GPT of dispatch_jit/tools/gpt.py with AdamW")
    t.add_argument("--gpt", action="store_true",
                   help="a GPT section after the MLP one (its compiled modes compile for a while the first time)")
    t.add_argument("--torch-compile", action="store_true",
                   help="also time torch.compile in the training section (its first compile takes a while)")
    w = sub.add_parser("warmup", help="compile (or load) the eager kernels ahead of time, into the disk cache",
                       description="Compile the eager CPU kernels of the named ops now and keep them in the disk "
                                   "cache (DISPATCH_JIT_CACHE_DIR), so that a fresh process loads them instead of "
                                   "compiling on first use.")
    w.add_argument("ops", nargs="*", help="public op names, e.g. add matmul (default: the ops of a training step)")
    w.add_argument("--dtype", action="append", help="a dtype name, e.g. float64 (repeatable; default: float32)")
    w.add_argument("--parallel", action="store_true", help="also the parallel variants large tensors use")
    p.subcommands = {"ops": o, "demo": d, "tradeoff": t, "warmup": w}
    return p


_TRADEOFF_DESCRIPTION = """\
Eager against compiled, measured on this machine:

1. elementwise chains of 1, 4 and 16 ops on float32 vectors: per-call time in eager mode, under
   dj.compile (cache hit) and in the global compiled mode (record and flush per call), each as
   min / median / max of 5 samples; compiled / eager of the medians; the fused loop's cold compile
   time (one run); and the calls after which compiling pays for itself;
2. a training step (zero_grad, forward, loss, backward, optimizer step) in each mode, from the same
   weights, against torch when installed: first and second step, min / median / max per step,
   the ratio to dj eager's median step, break-even steps, and whether the parameters equal eager's
   bit for bit.

Default: sizes 1e2 to 1e6 (a few minutes).  Plots (with matplotlib) go to --out DIR or to a new
temporary directory, printed first."""


_CHECKS = {"ops": _check_ops, "tradeoff": _check_tradeoff, "warmup": _check_warmup}


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    check = _CHECKS.get(args.cmd)
    if check is not None:
        check(p.subcommands[args.cmd], args)
    return {"ops": _cmd_ops, "demo": _cmd_demo, "tradeoff": _cmd_tradeoff, "warmup": _cmd_warmup}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
