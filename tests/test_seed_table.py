"""The seed's matmul dispatch table: each CPU row lands on the kernel the seed names."""

import importlib.util
from pathlib import Path

import pytest

import dispatch_jit as dj

_spec = importlib.util.spec_from_file_location(
    "seed_matmul_table", Path(__file__).resolve().parent.parent / "examples" / "seed_matmul_table.py")
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)

EXPECTED = {
    "(cpu, float32)": (["[call] op=[aten::matmul], key=[CPU]"], dj.float32),
    "(cpu, float64)": (["[call] op=[aten::matmul], key=[CPU]"], dj.float64),
    "(cpu, float32, requires_grad)": (["[call] op=[aten::matmul], key=[AutogradCPU]",
                                       " [redispatch] op=[aten::matmul], key=[CPU]"], dj.float32),
    "(cpu, int8 quantized)": (["[call] op=[aten::matmul], key=[QuantizedCPU]"], dj.qint8),
    "(cpu, sparse_csr)": (["[call] op=[aten::matmul], key=[SparseCsrCPU]"], dj.float32),
    "(cpu, sparse_coo)": (["[call] op=[aten::matmul], key=[SparseCPU]"], dj.float32),
    "(cpu, float32, autocast)": (["[call] op=[aten::matmul], key=[AutocastCPU]",
                                  " [call] op=[aten::matmul], key=[CPU]"], dj.bfloat16),
    # on a GPU, or on the CUDA simulator (tests/conftest.py)
    "(cuda, float32, requires_grad)": (["[call] op=[aten::matmul], key=[AutogradCUDA]",
                                        " [redispatch] op=[aten::matmul], key=[CUDA]"], dj.float32),
    "(cuda, float16)": (["[call] op=[aten::matmul], key=[CUDA]"], dj.float16),
    "(cuda, float32, autocast)": (["[call] op=[aten::matmul], key=[AutocastCUDA]",
                                   " [call] op=[aten::matmul], key=[CUDA]"], dj.float16),
    "(cuda, int8 quantized)": (["[call] op=[aten::matmul], key=[QuantizedCUDA]"], dj.qint8),
    "(cuda, sparse_csr)": (["[call] op=[aten::matmul], key=[SparseCsrCUDA]"], dj.float32),
    "(cuda, sparse_coo)": (["[call] op=[aten::matmul], key=[SparseCUDA]"], dj.float32),
}


@pytest.mark.parametrize("name,fn", list(table.rows()), ids=[n for n, _ in table.rows()])
def test_row_dispatches_to_the_seed_kernel(name, fn):
    out, lines = table.traced(fn)
    want_lines, want_dtype = EXPECTED[name]
    assert lines == want_lines
    assert out.dtype is want_dtype


def test_dump_table_shows_every_row_key():
    text = dj.dump_table("aten::matmul")
    for key in ("CPU", "CUDA", "QuantizedCPU", "SparseCsrCPU", "SparseCPU", "AutocastCPU", "AutogradCPU", "AutocastCUDA",
                "AutogradCUDA", "QuantizedCUDA", "SparseCsrCUDA", "SparseCUDA"):
        line = next(l for l in text.splitlines() if l.strip().startswith(key + " "))
        assert "[missing]" not in line, line


def test_example_runs(capsys):
    table.main()
    out = capsys.readouterr().out
    assert "key=[QuantizedCPU]" in out
    assert ("key=[AutocastCUDA]" in out) == dj.cuda.is_available()
