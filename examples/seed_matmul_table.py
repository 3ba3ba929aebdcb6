"""The seed's matmul dispatch table, run row by row with the dispatch trace.

Each row calls ``dj.matmul`` with inputs of one kind and shows which kernel
the dispatcher picked.  The CUDA rows need a CUDA device: a GPU, or
Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``); without one they are
listed and skipped.

    python examples/seed_matmul_table.py
"""

from __future__ import annotations

import contextlib
import io

import dispatch_jit as dj


def traced(fn):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), dj.show_dispatch_trace():
        out = fn()
    return out, [line for line in buf.getvalue().splitlines() if "aten::matmul" in line]


def rows():
    a32, b32 = dj.rand(4, 3), dj.rand(3, 2)
    yield "(cpu, float32)", lambda: a32 @ b32
    yield "(cpu, float64)", lambda: a32.double() @ b32.double()
    w = dj.rand(3, 2, requires_grad=True)
    yield "(cpu, float32, requires_grad)", lambda: a32 @ w
    qa = dj.quantize_per_tensor(a32, 0.01, 0, dj.qint8)
    qb = dj.quantize_per_tensor(b32, 0.01, 0, dj.qint8)
    yield "(cpu, int8 quantized)", lambda: qa @ qb
    sp = dj.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]).to_sparse_csr()
    yield "(cpu, sparse_csr)", lambda: sp @ b32
    coo = sp.to_sparse()
    yield "(cpu, sparse_coo)", lambda: coo @ b32

    def autocast_row():
        with dj.autocast("cpu"):
            return a32 @ b32
    yield "(cpu, float32, autocast)", autocast_row
    yield from cuda_rows(a32, b32)


CUDA_ROWS = ("(cuda, float32, requires_grad)", "(cuda, float16)", "(cuda, float32, autocast)",
             "(cuda, int8 quantized)", "(cuda, sparse_csr)", "(cuda, sparse_coo)")


def cuda_rows(a32, b32):
    if not dj.cuda.is_available():
        return
    ca, cb = a32.cuda(), b32.cuda()
    cw = dj.rand(3, 2, device="cuda", requires_grad=True)
    yield CUDA_ROWS[0], lambda: ca @ cw
    yield CUDA_ROWS[1], lambda: ca.half() @ cb.half()

    def autocast_row():
        with dj.autocast("cuda"):
            return ca @ cb
    yield CUDA_ROWS[2], autocast_row
    qa = dj.quantize_per_tensor(ca, 0.01, 0, dj.qint8)
    qb = dj.quantize_per_tensor(cb, 0.01, 0, dj.qint8)
    yield CUDA_ROWS[3], lambda: qa @ qb
    sp = dj.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]).cuda().to_sparse_csr()
    yield CUDA_ROWS[4], lambda: sp @ cb
    coo = sp.to_sparse()
    yield CUDA_ROWS[5], lambda: coo @ cb


def main() -> None:
    print("The seed's matmul table: which kernel runs for each kind of input\n")
    for name, fn in rows():
        out, lines = traced(fn)
        print(f"{name:<32} -> result dtype {out.dtype}")
        for line in lines:
            print(f"    {line}")
    if not dj.cuda.is_available():
        for name in CUDA_ROWS:
            print(f"{name:<32} -> skipped: no CUDA device (no GPU, and NUMBA_ENABLE_CUDASIM is not set)")
    print()
    print(dj.dump_table("aten::matmul"))


if __name__ == "__main__":
    main()
