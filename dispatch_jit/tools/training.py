"""The compile-vs-eager tradeoff of a training step: the training section of
``dispatch-jit tradeoff`` and of the demo.

One step of an MLP (``N`` samples of ``D`` features, one tanh
hidden layer of ``H`` units, ``C`` classes, ``F.cross_entropy``; ``SIZES``:
"mlp" with ``dj.optim.SGD``, "wide" with ``dj.optim.Adam``), written as a
user writes it (zero_grad, forward, loss, backward, step), run in each mode
from the same initial parameters:

* ``eager``: every op dispatched as it is called;
* ``compile``: the loss under ``@dj.compile`` (the forward and its fused
  backward are compiled plans; the optimizer step stays eager);
* ``step``: the whole step (zero_grad, forward, backward, the optimizer's
  update) under ``@dj.compile``: one plan, one compiled function per call
  (compiler/training/whole_step.py; Adam's first step, which makes its state, runs eagerly
  and the second traces, so the second step's compile is in the median's
  steps, not in "first step");
* ``lazy``: the whole step under ``dj.execution_mode("compiled")`` (recorded, flushed
  when the loss is read);
* ``torch eager`` and, with ``torch_compile=True``, ``torch.compile`` of the
  forward, when torch is installed.

Per mode: the first and the second step (tracing and compiling what this mode
compiles: the whole step's trace waits for Adam's state, made by the first;
eager kernels are compiled by the first mode that runs, eager, so they are not
counted against the compiled modes), the steady per-step time (min, median,
max of the steps after those two), the ratio of its median step to dj eager's,
and the break-even step: after how many steps the mode's first two steps'
extra cost is paid back by its faster steps, against dj eager ("never" when
it is not faster; none for torch's rows, which compile nothing of dj's).
Below the table, each dj mode's median step over torch eager's.  ``check`` is the largest
difference between the mode's parameters and eager mode's after the steps (the
modes must train the same model), ``bitwise`` whether they are equal bit for
bit (dj modes only), and ``note`` what a compiled mode ran eagerly instead.

The GPT of tools/gpt.py (``SIZES`` "gpt", "gpt-tiny") has its own runners in
tools/gpt_training.py; ``measure_training`` times both kinds alike.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import numpy as np

__all__ = ["StepRow", "measure_training", "format_training", "format_vs_torch", "format_notes", "plot_training",
           "ratio_text", "SIZES"]

# size -> (N, D, H, C, optimizer): a small and a wide model ("tiny": for tests)
SIZES = {"mlp": (512, 20, 64, 3, "SGD"), "wide": (8192, 256, 1024, 10, "Adam"), "tiny": (16, 4, 8, 3, "SGD")}
# the optimizers' settings, the same in both libraries
_OPT_ARGS = {"SGD": {"lr": 0.1}, "Adam": {"lr": 1e-3}}


@dataclass
class StepRow:
    mode: str
    first: float           # seconds: the first step in this mode
    step: float            # seconds: median steady step
    check: float           # max |param - eager param| after the same steps (0 for eager; nan: not comparable)
    eager_step: float      # eager mode's median step, for the break-even
    second: float = math.nan     # seconds: the second step (a whole step's trace, after Adam made its state)
    times: tuple = ()            # seconds: every steady step (after the first two)
    bitwise: bool | None = None  # parameters equal to eager's bit for bit (None: not a dj mode)
    note: str = ""               # what a compiled mode ran eagerly instead ("": nothing)

    @property
    def fastest(self) -> float:
        return min(self.times, default=self.step)

    @property
    def slowest(self) -> float:
        return max(self.times, default=self.step)

    @property
    def overhead(self) -> float:
        """What the first two steps cost beyond two steady ones (tracing, compiling)."""
        extra = self.first - self.step + (0.0 if math.isnan(self.second) else self.second - self.step)
        return max(extra, 0.0)

    @property
    def break_even(self) -> float | None:
        """Steps after which this mode has paid for its first step against eager; None: never."""
        gain = self.eager_step - self.step
        if self.mode == "eager":
            return 0.0
        return None if gain <= 0 else self.overhead / gain

    @property
    def is_torch(self) -> bool:
        return self.mode.startswith("torch")


def _data(size: str):
    n, d, h, c, _ = SIZES[size]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, c, n)
    init = [(rng.standard_normal(s) * 0.3).astype(np.float32) for s in [(h, d), (h,), (c, h), (c,)]]
    return x, y, init


def _step(opt, loss_fn, x, y):
    """One training step as a user writes it, in either library: zero_grad, loss, backward, step."""
    def step():
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def _dj_step(mode: str, x, y, init, opt_name: str = "SGD"):
    """(step function, its parameters) for dispatch_jit in ``mode``, with optimizer ``opt_name``."""
    import dispatch_jit as dj
    import dispatch_jit.nn.functional as F
    from dispatch_jit import nn

    model = nn.Sequential(nn.Linear(init[0].shape[1], init[0].shape[0]), nn.Tanh(),
                          nn.Linear(init[2].shape[1], init[2].shape[0]))
    with dj.no_grad():
        for p, a in zip(model.parameters(), init):
            p.copy_(dj.tensor(a))
    opt = getattr(dj.optim, opt_name)(model.parameters(), **_OPT_ARGS[opt_name])
    tx, ty = dj.tensor(x), dj.tensor(y)

    def loss_of(inp, target):
        return F.cross_entropy(model(inp), target)

    loss_fn = dj.compile(loss_of) if mode == "compile" else loss_of
    step = _step(opt, loss_fn, tx, ty)
    if mode == "step":
        def whole(inp, target):
            opt.zero_grad()
            loss = loss_of(inp, target)
            loss.backward()
            opt.step()
            return loss
        compiled = dj.compile(whole)
        return (lambda: compiled(tx, ty).item()), list(model.parameters())

    if mode == "lazy":
        def lazy_step():
            with dj.execution_mode("compiled"):
                return step()
        return lazy_step, list(model.parameters())
    return step, list(model.parameters())


def _torch_step(x, y, init, compiled: bool, opt_name: str = "SGD"):
    import torch
    import torch.nn.functional as F

    w = [torch.tensor(a, requires_grad=True) for a in init]

    def loss_of(inp, target):
        return F.cross_entropy(F.linear(torch.tanh(F.linear(inp, w[0], w[1])), w[2], w[3]), target)

    loss_fn = torch.compile(loss_of) if compiled else loss_of
    opt = getattr(torch.optim, opt_name)(w, **_OPT_ARGS[opt_name])
    return _step(opt, loss_fn, torch.tensor(x), torch.tensor(y)), w


def _time_steps(step, steps: int) -> tuple[float, float, list[float]]:
    """(first step, second step, the ``steps`` steps after them), in seconds; a step's result is
    read (``.item()``) inside its timing, as a training loop logs its loss."""
    times = []
    for _ in range(steps + 2):
        t0 = time.perf_counter()
        out = step()
        if not isinstance(out, float):
            out.item()
        times.append(time.perf_counter() - t0)
    return times[0], times[1], times[2:]


def _runners(x, y, init, opt: str, torch: bool, torch_compile: bool) -> list:
    """(mode, maker) per mode of the MLP; a maker returns (step, parameters, why-eager function)."""
    modes = ("eager", "compile", "step", "lazy")
    runners = [(m, lambda m=m: _dj_step(m, x, y, init, opt) + (lambda: "",)) for m in modes]
    if torch and _torch_available():
        runners.append(("torch eager", lambda: _torch_step(x, y, init, False, opt) + (lambda: "",)))
        if torch_compile:
            runners.append(("torch.compile", lambda: _torch_step(x, y, init, True, opt) + (lambda: "",)))
    return runners


def _torch_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    torch.set_num_threads(2)
    return True


def _gpt_runners(size: str, torch: bool, torch_compile: bool) -> list:
    """(mode, maker) per mode of the GPT (tools/gpt_training.py), as ``_runners``."""
    from ..compiler import lazy_info
    from . import gpt_training as gt
    s = gt.setup(size)

    def dj(mode):
        step, model, compiled = gt.dj_runner(mode, s)
        after_first = []     # compiled mode's counters after the first step (which makes AdamW's state eagerly)

        def run():
            out = step()
            if not after_first:
                out.item()
                after_first.append(lazy_info())
            return out
        return run, list(model.parameters()), lambda: gt.why_eager(mode, compiled, after_first[0])

    def th(compiled):
        step, model = gt.torch_runner(compiled, s)
        return step, list(model.parameters()), lambda: ""

    runners = [(m, lambda m=m: dj(m)) for m in gt.MODES]
    if torch and _torch_available():
        runners.append(("torch eager", lambda: th(False)))
        if torch_compile:
            runners.append(("torch.compile", lambda: th(True)))
    return runners


def measure_training(size: str = "mlp", steps: int = 50, torch: bool = True, torch_compile: bool = False,
                     log=None) -> list[StepRow]:
    """One row per mode (see the module docstring); ``steps`` steady steps each, after the first two.
    ``size``: a key of ``SIZES`` (the MLPs) or of tools/gpt.py's ``SIZES`` (the GPT)."""
    if size.startswith("gpt"):
        runners = _gpt_runners(size, torch, torch_compile)
    else:
        x, y, init = _data(size)
        runners = _runners(x, y, init, SIZES[size][4], torch, torch_compile)
    rows: list[StepRow] = []
    eager_params = None
    eager_step = math.nan
    for mode, make in runners:
        step, params, why = make()
        first, second, times = _time_steps(step, steps)
        values = [np.asarray(p.detach().numpy()) for p in params]
        bitwise = None
        if mode == "eager":
            eager_params, eager_step = values, statistics.median(times)
            check, bitwise = 0.0, True
        else:
            check = max(float(np.max(np.abs(a - b))) for a, b in zip(values, eager_params))
            if not mode.startswith("torch"):
                bitwise = all(np.array_equal(a, b) for a, b in zip(values, eager_params))
        row = StepRow(mode, first, statistics.median(times), check, eager_step, second, tuple(times), bitwise, why())
        rows.append(row)
        if log is not None:
            log(row)
    return rows


def _ms(s: float) -> str:
    """Seconds as milliseconds, the training table's one unit."""
    if math.isnan(s):
        return "-"
    ms = s * 1e3
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:,.0f}"


def ratio_text(r: float, faster: str, slower: str) -> str:
    """A ratio of times and which side it favours: ``0.66x, dj faster`` (``faster`` below 1)."""
    if math.isnan(r):
        return "-"
    if r == 1:
        return "1.00x, even"
    figure = f"{r:.2f}" if r >= 0.095 else f"{r:.2g}"      # 0.0047x, not 0.00x
    return f"{figure}x, {faster if r < 1 else slower}"


TRAINING_HEADER = (f"{'mode':<14} {'first step ms':>13} {'2nd step ms':>11} {'per step ms: min / median / max':>32} "
                   f"{'step / dj eager step':>21} {'break-even steps':>17} {'max |param - eager|':>20} {'bits':>5}")


def format_training(row: StepRow) -> str:
    be = row.break_even
    be_s = "-" if row.mode == "eager" or row.is_torch else "never" if be is None else f"{be:,.0f}"
    spread = f"{_ms(row.fastest)} / {_ms(row.step)} / {_ms(row.slowest)}"
    bits = "-" if row.bitwise is None else "equal" if row.bitwise else "DIFF"
    ratio = "1.00x" if row.mode == "eager" else ratio_text(row.step / row.eager_step, "faster", "slower")
    return (f"{row.mode:<14} {_ms(row.first):>13} {_ms(row.second):>11} {spread:>32} "
            f"{ratio:>21} {be_s:>17} {row.check:>20.2e} {bits:>5}")


def format_vs_torch(rows: list[StepRow]) -> list[str]:
    """Each dj mode's median step over torch eager's, when torch ran: which library is faster."""
    torch = next((r for r in rows if r.mode == "torch eager"), None)
    if torch is None:
        return []
    return [f"  dj {r.mode} / torch eager, median step: {ratio_text(r.step / torch.step, 'dj faster', 'dj slower')}"
            for r in rows if not r.is_torch]


def format_notes(rows: list[StepRow]) -> list[str]:
    """One line per mode that ran something eagerly: what, and why."""
    return [f"  {r.mode}: ran eagerly: {r.note}" for r in rows if r.note]


def plot_training(rows: list[StepRow], path: str, steps: int = 2000, model: str = "MLP") -> bool:
    """Cumulative time over ``steps`` training steps per mode; False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4.5))
    n = np.arange(1, steps + 1)
    for r in rows:
        second = r.step if math.isnan(r.second) else r.second
        ax.plot(n, r.first + np.minimum(n - 1, 1) * second + np.maximum(n - 2, 0) * r.step, label=r.mode)
    ax.set(xlabel="training steps", ylabel="seconds (cumulative)", title=f"{model} training: cost of n steps per mode")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
