"""The seed tutorial, "Extending PyTorch with Custom Operators Using the
Dispatcher", done in Python with dispatch_jit.

Each step registers what the C++ walkthrough registers and prints the
dispatch trace of a call, so you can watch the dispatcher's choice change:

1. the schema: ``TORCH_LIBRARY(myops, m) { m.def(...) }``
2. CPU and CUDA kernels: ``TORCH_LIBRARY_IMPL(myops, CPU/CUDA, m)``
3. no autograd kernel yet: the autograd fallback runs, the output does not
   require grad and backward names the op; then a fallthrough at Autograd
   (the seed's section 3)
4. a real autograd kernel: ``MyAddFunction`` registered at Autograd, calling
   the op again under an ``ExcludeDispatchKeyGuard`` (section 4)
5. the same operator in one decorator: ``dj.library.custom_op``, checked by
   ``dj.library.opcheck``

The seed's autocast section (5) waits for dispatch_jit's autocast kernels.

Run: ``python examples/custom_op.py``
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda

import dispatch_jit as dj


def step(title: str) -> None:
    print(f"\n== {title} ==")


# -- 1. the schema -------------------------------------------------------------------------------
step("1. define myops::myadd")
myops = dj.Library("myops", "DEF")
myops.define("myadd(Tensor self, Tensor other) -> Tensor")
print(dj.ops.myops.myadd.default.schema)


# -- 2. backend kernels --------------------------------------------------------------------------
@numba.njit(cache=False)
def _add_loop(a, b, out):
    for i in range(out.size):
        out[i] = a[i] + b[i]


def myadd_cpu(self, other):
    """The CPU kernel: a Numba loop over the (broadcast) inputs."""
    a, b = np.broadcast_arrays(self.numpy(), other.numpy())
    out = np.empty(a.shape, np.result_type(a, b))
    _add_loop(np.ascontiguousarray(a, out.dtype).reshape(-1), np.ascontiguousarray(b, out.dtype).reshape(-1),
              out.reshape(-1))
    return dj.from_numpy(out)


@cuda.jit
def _add_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


def myadd_cuda(self, other):
    """The CUDA kernel: one thread per element.  dispatch_jit has no CUDA
    tensors yet, so no call reaches the CUDA key; the registration is real."""
    if not cuda.is_available():
        raise dj.errors.CudaUnavailableError("myadd_cuda needs a CUDA GPU (numba.cuda.is_available() is False)")
    a, b = np.broadcast_arrays(self.numpy(), other.numpy())
    out = np.empty(a.shape, np.result_type(a, b))
    d_a = cuda.to_device(np.ascontiguousarray(a, out.dtype).reshape(-1))
    d_b = cuda.to_device(np.ascontiguousarray(b, out.dtype).reshape(-1))
    d_out = cuda.device_array(out.size, out.dtype)
    _add_kernel[(out.size + 127) // 128, 128](d_a, d_b, d_out)
    return dj.from_numpy(d_out.copy_to_host().reshape(out.shape))


step("2. CPU and CUDA kernels")
myops_cpu = dj.Library("myops", "IMPL", "CPU")      # TORCH_LIBRARY_IMPL(myops, CPU, m)
myops_cpu.impl("myadd", myadd_cpu)
myops_cuda = dj.Library("myops", "IMPL", "CUDA")    # TORCH_LIBRARY_IMPL(myops, CUDA, m)
myops_cuda.impl("myadd", myadd_cuda)
print("has_kernel(CPU):", dj.has_kernel("myops::myadd", "CPU"))
print("has_kernel(CUDA):", dj.has_kernel("myops::myadd", "CUDA"))
print(dj.dump_table("myops::myadd"))

x = dj.tensor([1.0, 2.0], dtype=dj.float32)
y = dj.tensor([3.0, 4.0], dtype=dj.float32)
print("trace of myadd(x, y), no input requires grad:")
with dj.show_dispatch_trace():
    z = dj.ops.myops.myadd(x, y)
print("myadd(x, y) =", z)


# -- 3. operators without autograd ---------------------------------------------------------------
step("3a. no Autograd kernel: the autograd fallback")
w = dj.tensor([1.0, 2.0], dtype=dj.float32, requires_grad=True)
print("trace of myadd(w, y), w requires grad:")
with dj.show_dispatch_trace():
    z = dj.ops.myops.myadd(w, y)
print("requires_grad:", z.requires_grad)
try:
    z.backward(dj.ones_like(z))
except dj.errors.AutogradError as e:
    print("backward raised:", e)

step("3b. a fallthrough at Autograd")
myops_autograd = dj.Library("myops", "IMPL", "Autograd")   # TORCH_LIBRARY_IMPL(myops, Autograd, m)
handle = myops_autograd.impl("myadd", dj.library.fallthrough_kernel)
print("trace of myadd(w, y):")
with dj.show_dispatch_trace():
    z = dj.ops.myops.myadd(w, y)
print("requires_grad:", z.requires_grad)


# -- 4. a real autograd kernel -------------------------------------------------------------------
_myadd_op = dj.ops.myops.myadd.default   # looked up once, like the seed's static op handle


def myadd(self, other):
    """The dispatching function (the seed's section 4.1)."""
    return _myadd_op(self, other)


class MyAddFunction(dj.autograd.Function):
    @staticmethod
    def forward(ctx, self, other):
        # the seed's AutoNonVariableTypeMode: call the op again below autograd
        with dj.ExcludeDispatchKeyGuard(dj.DispatchKey.AutogradCPU):
            return myadd(self, other)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, grad_output


def myadd_autograd(self, other):
    return MyAddFunction.apply(self, other)


step("4. an autograd kernel: MyAddFunction at Autograd")
handle.remove()
myops_autograd.impl("myadd", myadd_autograd)
v = dj.tensor([3.0, 4.0], dtype=dj.float32, requires_grad=True)
print("trace of myadd(w, v):")
with dj.show_dispatch_trace():
    z = myadd(w, v)
print("myadd(w, v) =", z)
z.sum().backward()
print("w.grad =", w.grad)
print("v.grad =", v.grad)
a = dj.tensor([0.5, 1.5], dtype=dj.float64, requires_grad=True)
b = dj.tensor([2.0, -1.0], dtype=dj.float64, requires_grad=True)
print("gradcheck:", dj.autograd.gradcheck(myadd, (a, b)))


# -- 5. the same, in one decorator ---------------------------------------------------------------
step("5. dj.library.custom_op")


@dj.library.custom_op("myops::myadd2", mutates_args=(), device_types="cpu")
def myadd2(self: dj.Tensor, other: dj.Tensor) -> dj.Tensor:
    return myadd_cpu(self, other)


myadd2.register_kernel("cuda", myadd_cuda)
myadd2.register_fake(lambda self, other: dj.empty(np.broadcast_shapes(self.shape, other.shape),
                                                  dtype=dj.result_type(self, other)))
myadd2.register_autograd(lambda ctx, g: (g, g))
print(myadd2.schema)
print("trace of myadd2(w, v):")
with dj.show_dispatch_trace():
    z = myadd2(w, v)
w.grad = v.grad = None
z.sum().backward()
print("w.grad =", w.grad)
print("opcheck:", dj.library.opcheck(myadd2, (w, v)))
