"""The examples run as scripts, and print what they promise."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_python(*argv: str, timeout: float = 120, **env_extra: str) -> list[str]:
    env = dict(os.environ, **env_extra)
    # this checkout's dispatch_jit, whatever copy is installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("DISPATCH_JIT_SHOW_DISPATCH_TRACE", None)
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def run_example(name: str) -> list[str]:
    return run_python(str(ROOT / "examples" / name))


# examples/custom_op.py as __main__, then its CUDA kernel called under Numba's CUDA simulator: one
# interpreter for both (each start re-imports dispatch_jit, seconds on CI)
CUSTOM_OP = ("import runpy\n"
             "g = runpy.run_path('examples/custom_op.py', run_name='__main__')\n"
             "import dispatch_jit as dj\n"
             "print('== the CUDA kernel ==')\n"
             "print(g['myadd_cuda'](dj.tensor([1.0, 2.0, 3.0]), dj.tensor([10.0, 20.0, 30.0])))\n")


@pytest.fixture(scope="module")
def custom_op_lines():
    return run_python("-c", CUSTOM_OP, NUMBA_ENABLE_CUDASIM="1")


def section(lines: list[str], title: str) -> list[str]:
    start = lines.index(f"== {title} ==")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("== ")), len(lines))
    return [ln for ln in lines[start + 1:end] if ln]


def test_seed_steps_print_their_dispatch_traces(custom_op_lines):
    lines = custom_op_lines
    assert section(lines, "1. define myops::myadd") == ["myops::myadd(Tensor self, Tensor other) -> Tensor"]

    s2 = section(lines, "2. CPU and CUDA kernels")
    assert "has_kernel(CPU): True" in s2 and "has_kernel(CUDA): True" in s2
    assert any(re.fullmatch(r" +CUDA +myadd_cuda +\[kernel\]", ln) for ln in s2)
    assert any(re.fullmatch(r" +CPU +myadd_cpu +\[kernel\]", ln) for ln in s2)
    i = s2.index("trace of myadd(x, y), no input requires grad:")
    assert s2[i + 1:i + 3] == ["[call] op=[myops::myadd], key=[CPU]", "myadd(x, y) = tensor([4., 6.])"]

    s3a = section(lines, "3a. no Autograd kernel: the autograd fallback")
    assert s3a[1:4] == ["[call] op=[myops::myadd], key=[AutogradCPU]",
                        " [redispatch] op=[myops::myadd], key=[CPU]",
                        "requires_grad: True"]     # the seed: "preserves gradient requirements ... raises
    # errors on backward pass" (PyTorch's NotImplemented node)
    assert s3a[4].startswith("backward raised:") and "'myops::myadd'" in s3a[4] and "register_autograd" in s3a[4]

    s3b = section(lines, "3b. a fallthrough at Autograd")
    assert s3b[1:] == ["[call] op=[myops::myadd], key=[CPU]", "requires_grad: False"]

    s4 = section(lines, "4. an autograd kernel: MyAddFunction at Autograd")
    assert s4[1:] == ["[call] op=[myops::myadd], key=[AutogradCPU]",
                      " [call] op=[myops::myadd], key=[CPU]",
                      "myadd(w, v) = tensor([4., 6.], grad_fn=<MyAddFunctionBackward>)",
                      "w.grad = tensor([1., 1.])",
                      "v.grad = tensor([1., 1.])",
                      "gradcheck: True"]


def test_custom_op_step(custom_op_lines):
    s5 = section(custom_op_lines, "5. dj.library.custom_op")
    assert s5[0] == "myops::myadd2(Tensor self, Tensor other) -> Tensor"
    assert s5[2:4] == ["[call] op=[myops::myadd2], key=[AutogradCPU]",
                       " [redispatch] op=[myops::myadd2], key=[CPU]"]
    assert "w.grad = tensor([1., 1.])" in s5
    assert s5[-1] == ("opcheck: {'test_schema': 'SUCCESS', 'test_autograd_registration': 'SUCCESS', "
                      "'test_faketensor': 'SUCCESS', 'test_mutation': 'SUCCESS'}")


def test_custom_op_cuda_kernel_under_the_simulator(custom_op_lines):
    # no call can reach the CUDA key yet (no CUDA tensors), so call the kernel itself;
    # Numba's CUDA simulator runs it where there is no GPU
    assert section(custom_op_lines, "the CUDA kernel") == ["tensor([11., 22., 33.])"]


def test_train_mlp_learns():
    """examples/train_mlp.py: a real training loop with dj.nn and dj.optim reaches a useful accuracy."""
    lines = run_example("train_mlp.py")
    assert lines[0].startswith("data: ")
    losses = [float(ln.split()[-1]) for ln in lines if ln.startswith("epoch")]
    assert len(losses) >= 2 and losses[-1] < losses[0]
    acc = float(next(ln for ln in lines if ln.startswith("test accuracy")).split()[2])
    assert acc > 0.75, lines


def test_train_gpt_trains_in_every_mode_with_eagers_bits(monkeypatch, capsys):
    """examples/train_gpt.py: the loss falls in each mode, the compiled modes' parameters equal
    eager's bit for bit, and the trained model samples text."""
    # run as __main__ in this process, not a fresh one: a fresh process re-imports dispatch_jit and
    # loads (or, run alone, compiles) every kernel the GPT's three modes call, which the suite holds in
    # memory here.  A fresh process running each example, against the installed wheel, is .ci/run's
    # wheel check.
    script = str(ROOT / "examples" / "train_gpt.py")
    # the tiny model: the suite's GPT tests train the same one, so its plans compile once per run
    monkeypatch.setattr(sys, "argv", [script, "--steps", "12", "--sample", "40", "--size", "gpt-tiny"])
    runpy.run_path(script, run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("text: the Zen of Python")
    for mode in ("eager", "step", "lazy"):
        part = section(lines, mode)
        losses = [float(ln.split()[-1]) for ln in part if ln.lstrip().startswith("step ")]
        assert len(losses) >= 4 and losses[-1] < losses[0], part
        if mode != "eager":
            assert "  parameters equal eager's bit for bit: True" in part
    sample = section(lines, "sample (eager model)")
    assert sample and sample[0].startswith("B")
