"""The compile-vs-eager tradeoff, measured: ``dispatch-jit tradeoff``.

For elementwise chains of 1, 4 and 16 ops on float32 vectors (1e2 .. 1e6
elements; ``--quick``: 1e2, 1e4 and 1e6 with shorter timings; ``--full``:
up to 1e7 with longer ones): the per-call time in eager mode, with
``dj.compile`` (cache hit), and in global compiled mode (record + flush per
call), each as min / median / max over 5 samples; the ratio compiled /
eager of the medians; the cold compile time of the fused loop (one run);
and the number of calls after which compiling pays off,
``compile / (eager - compiled)`` of the medians ("never" when compiled is
not faster).  Printed as a table; with matplotlib (the ``plot`` extra) also
saved as PNGs in a directory the caller names.

A chain of one op is not fused (its eager kernel is already one loop), so
its compiled time is the eager time plus the compiled function's overhead.
Loops are compiled once per (chain, flat/strided, serial/parallel) variant
and shared process-wide, so a row's compile time is its variant's cold
compile, measured where that variant first ran.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

from .training import ratio_text

__all__ = ["Row", "chain", "measure", "format_table", "plot", "machine_line", "QUICK_SIZES", "SIZES", "FULL_SIZES",
           "CHAINS", "RUNS"]

CHAINS = (1, 4, 16)
SIZES = (10**2, 10**3, 10**4, 10**5, 10**6)
QUICK_SIZES = (10**2, 10**4, 10**6)
FULL_SIZES = SIZES + (10**7,)
# run -> (sizes' name in this module, timing budget per measurement in seconds, training steps)
RUNS = {"quick": ("QUICK_SIZES", 0.05, 20), "standard": ("SIZES", 0.12, 50), "full": ("FULL_SIZES", 0.4, 300)}


def chain(x, length: int):
    """``length`` cheap elementwise ops (bandwidth-bound when run eagerly)."""
    import dispatch_jit as dj
    for i in range(length):
        k = i % 4
        if k == 0:
            x = x * 1.0001
        elif k == 1:
            x = x + 0.5
        elif k == 2:
            x = dj.maximum(x, -1.0)
        else:
            x = x - 0.25
    return x


def _make(length: int):
    def fn(x):
        return chain(x, length)
    fn.__name__ = fn.__qualname__ = f"chain{length}"
    return fn


def _samples(fn, budget: float, repeat: int = 5) -> tuple[float, ...]:
    """Seconds per call in each of ``repeat`` samples, each about budget/repeat long."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(budget / repeat / one))
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return tuple(out)


def _median(xs) -> float:
    return statistics.median(xs) if xs else math.nan


@dataclass
class Row:
    """One chain length at one size; times are seconds per call, each a tuple of samples."""
    length: int
    size: int
    eager: tuple
    compiled: tuple       # dj.compile, cache hit
    lazy: tuple           # global compiled mode: record + flush (empty: not measured)
    compile_time: float   # cold compile of this row's loop variant, one run (0 when nothing is fused)

    @property
    def ratio(self) -> float:
        """Compiled / eager, of the medians (below 1: compiled is faster)."""
        return _median(self.compiled) / _median(self.eager)

    @property
    def break_even(self) -> float | None:
        """Calls after which compiling has paid for itself; None when it never does."""
        gain = _median(self.eager) - _median(self.compiled)
        if gain <= 0:
            return None
        return self.compile_time / gain


def measure(sizes=QUICK_SIZES, chains=CHAINS, budget: float = 0.15, lazy: bool = True, log=None) -> list[Row]:
    import dispatch_jit as dj
    from dispatch_jit.kernels.elementwise.cpu import PARALLEL_MIN
    from ..compiler.codegen import compiled_loops
    from ..compiler.lazy import mode

    rng = np.random.default_rng(0)
    rows = []
    variant_cost: dict = {}
    # warm-up at the largest size: Numba's thread pool, and malloc's adaptive mmap threshold
    # (the first large allocations are fresh pages; later ones are reused), outside any timing
    big = dj.from_numpy(rng.standard_normal(max(sizes)).astype(np.float32))
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min(1.0, 20 * budget):
        chain(big, 4)
    del big
    for length in chains:
        fn = _make(length)
        for n in sizes:
            x = dj.from_numpy(rng.standard_normal(n).astype(np.float32))
            eager = _samples(lambda: fn(x), budget)
            cf = dj.compile(fn)
            before = compiled_loops()
            t0 = time.perf_counter()
            cf(x)
            first = time.perf_counter() - t0
            compiled = _samples(lambda: cf(x), budget)
            variant = (length, n >= PARALLEL_MIN)
            if compiled_loops() > before:
                variant_cost[variant] = max(first - min(compiled), 0.0)
            cost = variant_cost.get(variant, 0.0)
            lz = ()
            if lazy:
                def run_lazy():
                    with mode("compiled"):
                        fn(x).numpy()
                lz = _samples(run_lazy, budget)
            row = Row(length, n, eager, compiled, lz, cost)
            rows.append(row)
            if log is not None:
                log(row)
    return rows


def _num(x: float) -> str:
    """A figure without an exponent, to about three significant digits."""
    if x != x:
        return "-"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def spread(samples, scale: float = 1.0) -> str:
    """``min / median / max`` of ``samples`` times ``scale``; "-" when there are none."""
    if not samples:
        return "-"
    return f"{_num(min(samples) * scale)} / {_num(_median(samples) * scale)} / {_num(max(samples) * scale)}"


_W = 24
HEADER = (f"{'chain':>5} {'size':>7} {'eager us':>{_W}} {'compiled us':>{_W}} {'lazy mode us':>{_W}} "
          f"{'compiled / eager':>23} {'compile ms':>10} {'break-even calls':>22}")
SUBHEADER = f"{'':>13} {'min / median / max':>{_W}} {'min / median / max':>{_W}} {'min / median / max':>{_W}} " \
            f"{'(medians)':>23} {'(one run)':>10}"


def format_row(r: Row) -> str:
    be = r.break_even
    be_s = "never" if be is None else ("0 (nothing to compile)" if r.compile_time == 0 else f"{be:,.0f}")
    return (f"{r.length:>5} {r.size:>7.0e} {spread(r.eager, 1e6):>{_W}} {spread(r.compiled, 1e6):>{_W}} "
            f"{spread(r.lazy, 1e6):>{_W}} {ratio_text(r.ratio, 'compiled faster', 'eager faster'):>23} "
            f"{_num(r.compile_time * 1e3):>10} {be_s:>22}")


def format_table(rows: list[Row]) -> str:
    return "\n".join([HEADER, SUBHEADER] + [format_row(r) for r in rows])


def plot(rows: list[Row], path: str) -> bool:
    """Save per-call time and break-even plots; False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for length in sorted({r.length for r in rows}):
        rs = [r for r in rows if r.length == length]
        ns = [r.size for r in rs]
        line, = ax1.loglog(ns, [_median(r.eager) for r in rs], "--", label=f"eager, chain {length}")
        ax1.loglog(ns, [_median(r.compiled) for r in rs], "-", color=line.get_color(),
                   label=f"compiled, chain {length}")
        be = [(r.size, r.break_even) for r in rs if r.break_even]
        if be:
            ax2.loglog(*zip(*be), "o-", color=line.get_color(), label=f"chain {length}")
    ax1.set(xlabel="elements (float32)", ylabel="seconds per call (median of 5)", title="per-call time")
    ax2.set(xlabel="elements (float32)", ylabel="calls", title="calls until compiling pays off")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def machine_line() -> str:
    """When and where a report was measured: the date, the machine, its load, the versions."""
    import datetime
    import platform
    import numba
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    versions = f"numba {numba.__version__}, numpy {np.__version__}"
    try:
        import torch
        versions += f", torch {torch.__version__}"
    except ImportError:
        pass
    return f"measured {when} on {platform.system()} {platform.machine()}, {os.cpu_count()} cores{load}; {versions}"


def main(run: str = "standard", outdir: str | None = None, lazy: bool = True,
         training: str | list | None = "mlp", torch_compile: bool = False) -> int:
    """The report: the elementwise chains, then a training section per size in ``training`` (a
    size or a list of them: "mlp", "wide", "gpt"; None: none).  ``run``: a key of ``RUNS``;
    ``outdir``: where the plots go (None: no plots)."""
    sizes_name, budget, steps = RUNS[run]
    sizes = globals()[sizes_name]
    print(machine_line())
    print(f"eager vs compiled, float32 elementwise chains ({run} run: sizes "
          f"{', '.join(f'{n:.0e}' for n in sizes)}; per call, min / median / max of 5 samples)")
    print("lazy mode = `with dj.execution_mode('compiled')`: record the chain, flush at .numpy()\n")
    print(HEADER)
    print(SUBHEADER, flush=True)
    rows = measure(sizes, CHAINS, budget, lazy, log=lambda r: print(format_row(r), flush=True))
    if outdir:
        path = os.path.join(outdir, "tradeoff.png")
        if plot(rows, path):
            print(f"\nplot saved to {path}")
    for size in ([training] if isinstance(training, str) else training or []):
        training_section(size, steps, outdir, torch_compile)
    return 0


def _describe(size: str, steps: int) -> tuple[str, str, str]:
    """(title, what the modes are, the model's name) of a training section."""
    if size.startswith("gpt"):
        from .gpt import SIZES as GPT_SIZES, GPTConfig
        over, batch = GPT_SIZES[size]
        c = GPTConfig(**over)
        return (f"training step: character-level GPT (tools/gpt.py: {c.n_layer} blocks, width {c.n_embd}, "
                f"{c.n_head} heads, block {c.block_size}, batch {batch}, the Zen of Python), F.cross_entropy, "
                f"clip_grad_norm_, AdamW ({steps} steps per mode; the same source on torch at 2 threads when "
                f"installed, from the same weights)",
                "compile = the model's forward under dj.compile (forward and fused backward); step = the whole "
                "step under @dj.compile; lazy = the whole step under dj.execution_mode('compiled'); torch.compile = the "
                "model under torch.compile", "GPT")
    from .training import SIZES
    n, d, h, c, opt = SIZES[size]
    return (f"training step: MLP {n}x{d} -> tanh({h}) -> {c} classes, F.cross_entropy, dj.optim.{opt} "
            f"({steps} steps per mode; torch at 2 threads when installed)",
            "compile = the loss under @dj.compile (forward and fused backward); step = the whole step under "
            "@dj.compile (one plan); lazy = the whole step under dj.execution_mode('compiled')", "MLP")


def training_section(size: str = "mlp", steps: int = 50, outdir: str | None = None,
                     torch_compile: bool = False) -> list:
    """Print (and plot into ``outdir``) the training step per mode: tools/training.py."""
    from .training import (TRAINING_HEADER, format_notes, format_training, format_vs_torch, measure_training,
                           plot_training)
    title, modes, model = _describe(size, steps)
    print(f"\n{title}")
    print(f"{modes}\nbits = the parameters after the same steps equal eager's bit for bit\n")
    print(TRAINING_HEADER, flush=True)
    rows = measure_training(size, steps, torch_compile=torch_compile,
                            log=lambda r: print(format_training(r), flush=True))
    vs_torch = format_vs_torch(rows)
    if vs_torch:
        print("\n" + "\n".join(vs_torch))
    notes = format_notes(rows)
    if notes:
        print("\nwhat the compiled modes ran eagerly (graph breaks):")
        print("\n".join(notes))
    if outdir:
        path = os.path.join(outdir, f"training_{size}.png")
        if plot_training(rows, path, model=model):
            print(f"\nplot saved to {path}")
    return rows
