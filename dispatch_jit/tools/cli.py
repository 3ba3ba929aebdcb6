"""Command line: ``dispatch-jit ops [NAME]``, ``dispatch-jit demo``, ``dispatch-jit tradeoff`` and
``dispatch-jit warmup``.

Also ``python -m dispatch_jit ...``.
"""

from __future__ import annotations

import argparse
import sys
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


def _time(fn, number: int) -> float:
    """Best of 5 repeats, seconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def _cmd_demo(args) -> int:
    import numpy as np
    import dispatch_jit as dj

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

    print("\n== Eager dispatch overhead, 16-element float32, cache hit (best of 5) ==")
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
    base = None
    for name, fn in rows:
        t = _time(fn, n)
        base = base or t
        print(f"  {name:<20} {t * 1e9:8.0f} ns   {t / base:5.2f}x np.add")

    print("\n== Kernels at 1e6 float32 elements vs NumPy (best of 5) ==")
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
    for name, f_dj, f_np in cases:
        f_dj()  # compile outside the timing
        tdj, tnp = _time(f_dj, 20), _time(f_np, 20)
        print(f"  {name:<8} dj {tdj * 1e6:8.1f} us   numpy {tnp * 1e6:8.1f} us   ratio {tdj / tnp:5.2f}")
    print("\ncompiled signatures:", {k: v for k, v in dj.cache_info("aten::add")["compiled"].items()})

    print("\n== Eager vs compiled: f(a, b, c) = maximum((a*b + c)*2 - a, 0) * exp(-b), 1e6 float32 ==")

    def f(a, b, c):
        return dj.maximum((a * b + c) * 2.0 - a, 0.0) * dj.exp(-b)
    cf = dj.compile(f)
    c = dj.asarray(rng.random(1_000_000, dtype=np.float32))
    cf(ta, tb, c)
    f(ta, tb, c)
    te, tc = _time(lambda: f(ta, tb, c), 10), _time(lambda: cf(ta, tb, c), 10)
    print(f"  eager {te * 1e3:7.2f} ms (7 kernels, 7 passes over memory)   compiled {tc * 1e3:7.2f} ms "
          f"(one fused loop)   speedup {te / tc:4.1f}x")
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
    sizes = [args.training_size] + (["gpt"] if args.gpt and args.training_size != "gpt" else [])
    return tradeoff(quick=not args.full, plot_path=None if args.no_plot else args.plot, lazy=not args.no_lazy,
                    training=None if args.no_training else sizes, torch_compile=args.torch_compile)


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dispatch-jit", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("ops", help="list operators with their keys, or dump one operator's tables")
    o.add_argument("name", nargs="?", help="an operator, e.g. aten::add")
    o.add_argument("--namespace", help="only this namespace")
    d = sub.add_parser("demo", help="the seed scenario, dispatch tables and overhead figures")
    d.add_argument("--quick", action="store_true", help="fewer timing iterations")
    t = sub.add_parser("tradeoff", help="eager vs compiled per-call time, compile time and break-even calls")
    t.add_argument("--quick", action="store_true", default=True,
                   help="sizes 1e2..1e6, short timings (the default; under a minute)")
    t.add_argument("--full", action="store_true", help="sizes 1e2..1e7, longer timings")
    t.add_argument("--plot", default="tradeoff.png", metavar="PATH",
                   help="PNG to write when matplotlib is installed (default: tradeoff.png)")
    t.add_argument("--no-plot", action="store_true", help="do not write a plot")
    t.add_argument("--no-lazy", action="store_true", help="skip the global compiled mode column")
    t.add_argument("--no-training", action="store_true", help="skip the training-step section")
    t.add_argument("--training-size", choices=("mlp", "wide", "gpt"), default="mlp",
                   help="the training section's model: issue 14's MLP with SGD (default), the wide MLP with Adam, "
                        "or the character-level GPT with AdamW (tools/gpt.py)")
    t.add_argument("--gpt", action="store_true",
                   help="a GPT section after the MLP one (its compiled modes compile for a while the first time)")
    t.add_argument("--torch-compile", action="store_true",
                   help="also time torch.compile in the training section (its first compile takes a while)")
    w = sub.add_parser("warmup", help="compile (or load) the eager kernels ahead of time, into the disk cache",
                       description="Compile the eager CPU kernels of the named ops now and keep them in the disk "
                                   "cache (DISPATCH_JIT_CACHE_DIR), so that a fresh process loads them instead of "
                                   "compiling on first use.")
    w.add_argument("ops", nargs="*", help="public op names (default: the ops of a training step)")
    w.add_argument("--dtype", action="append", help="a dtype name (repeatable; default: float32)")
    w.add_argument("--parallel", action="store_true", help="also the parallel variants large tensors use")
    args = p.parse_args(argv)
    return {"ops": _cmd_ops, "demo": _cmd_demo, "tradeoff": _cmd_tradeoff, "warmup": _cmd_warmup}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
