"""The two tutorial programs (examples/tutorial_mlp.py, examples/tutorial_gpt.py) run unchanged on
dispatch_jit, their only difference from the PyTorch run being the import lines, and train: the
loss falls, and with PyTorch installed it follows PyTorch's run of the same program (the two
libraries draw different random numbers, so the curves agree in level, not in value)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same_body(path: Path) -> None:
    # the program after the imports is one text for both backends: nothing branches on it
    body = path.read_text().split("# ---- from here on, the program is the same on both backends ----")[1]
    assert "backend" not in body.split("if __name__")[0]


def test_mlp_trains_as_torch_does():
    _same_body(EXAMPLES / "tutorial_mlp.py")
    mlp = _load("tutorial_mlp")
    dj_run = mlp.run("dj", epochs=4, verbose=False)
    assert dj_run["losses"][-1] < 0.5 * dj_run["losses"][0] and dj_run["accuracy"] > 0.8
    pytest.importorskip("torch")
    torch_run = mlp.run("torch", epochs=4, verbose=False)
    assert abs(dj_run["losses"][-1] - torch_run["losses"][-1]) < max(0.6 * torch_run["losses"][-1], 0.15)
    assert abs(dj_run["accuracy"] - torch_run["accuracy"]) < 0.08


def test_gpt_trains_as_torch_does():
    _same_body(EXAMPLES / "tutorial_gpt.py")
    gpt = _load("tutorial_gpt")
    dj_run = gpt.run("dj", steps=40, verbose=False)
    late = float(np.mean(dj_run["losses"][-10:]))
    assert late < dj_run["losses"][0] - 1.0 and len(dj_run["sample"]) == 81
    pytest.importorskip("torch")
    torch_late = float(np.mean(gpt.run("torch", steps=40, verbose=False)["losses"][-10:]))
    assert abs(late - torch_late) < 0.35
