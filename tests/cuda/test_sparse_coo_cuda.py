"""Sparse COO on CUDA: the SparseCUDA key has no kernels yet (docs/cuda.md), so every way of putting
a COO tensor on a CUDA device raises one NoKernelError naming the layout, the device, and the CUDA
sparse layout that has kernels (CSR) with its ops; the CSR route it names works."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import NoKernelError

pytestmark = pytest.mark.skipif(not dj.cuda.is_available(), reason="no CUDA device and no simulator")

MSG = (r"the sparse COO layout has no kernels on CUDA \(the SparseCUDA key is not implemented\).*CSR "
       r"\(SparseCsrCUDA\), with kernels for: .*aten::matmul.*\.to_sparse_csr\(\)\.cuda\(\), or \.to_dense\(\)\.cuda\(\)")


def test_coo_to_cuda_names_the_layout_the_device_and_the_ops_that_exist():
    d = np.array([[0.0, 2.0], [3.0, 0.0]], np.float32)
    a = dj.tensor(d).to_sparse()
    for move in (lambda: a.cuda(), lambda: a.to("cuda"), lambda: a.to("cuda:0", dj.float64),
                 lambda: dj.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2), device="cuda"),
                 lambda: dj.sparse_coo_tensor([[0, 1], [1, 0]], dj.tensor([2.0, 3.0]).cuda(), (2, 2)),
                 lambda: dj.tensor(d).to_sparse_csr().cuda().to_sparse()):
        with pytest.raises(NoKernelError, match=MSG):
            move()
    # the routes the message names
    x = dj.ones(2, 3, device="cuda")
    np.testing.assert_array_equal((a.to_sparse_csr().cuda() @ x).numpy(), d @ np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(a.to_dense().cuda().numpy(), d)
