"""CUDA kernels for the elementwise ops, generated from table.py.

The CUDA twin of cpu.py: same type rules (``type_rule``), same
errors, same broadcasting, same results.  For one op and one resolved
signature ``ElementwiseCUDA.specialize`` returns the callable the dispatcher
memoizes; on each call it picks one of two generated grid-stride kernels
(compiled once per source by ``compile_cuda``, lazily):

* flat: the output and every array operand C-contiguous with the output's
  shape -> each operand's index is ``offset + i``;
* strided: anything else (broadcasting, transposes, slices, ``out=``,
  in-place with overlap) -> the output's linear index is unravelled into one
  flat index per operand (``dispatch_jit.cuda.codegen.unravel``) over broadcast views,
  whose broadcast dimensions have stride 0, so no input is copied.

Operands that are not device arrays become kernel arguments, converted to
their kernel dtype on the host: Python scalars, statics (``alpha``), and a
zero-dim CPU tensor mixed with CUDA tensors (PyTorch's rule; it promotes as
a zero-dim tensor of its dtype, exactly as on the CPU).

float16 is stored as float16 and computed in float32 (as on the CPU), so
float16 results match the CPU kernels bit for bit wherever the float32
function does.

Integer division and remainder by zero, and integers to negative integer
powers, raise on the CPU; a CUDA kernel cannot raise (PyTorch's CUDA kernels
do not either).  Here they give defined values instead: ``x // 0 == 0`` and
``x % 0 == 0`` (NumPy's results; ``MIN // -1`` wraps to MIN as on the CPU), and ``x ** -n`` is ``1 // x**n`` truncated
(1 for x == 1, +-1 for x == -1, 0 otherwise; what PyTorch's CUDA kernel
returns).
"""

from __future__ import annotations

import numpy as np

from dispatch_jit import bf16
from dispatch_jit.dtypes import BF16_STORAGE
from dispatch_jit.errors import DeviceMismatchError, DTypeError, InvalidArgumentError
from dispatch_jit.signature import make_sig
from dispatch_jit.tensor import CUDA_BITS, Tensor, bump_version

from ..support.loops import read_cast, store
from ..support.loops.cuda import CudaNest, cuda_expression, device_globals
from .table import (ElementwiseKernel, ScalarOp, broadcast_shape, check_output, check_statics,
                    kernel_prelude, output_tensor)

__all__ = ["ElementwiseCUDA", "kernel_source", "CUDA_UNSUPPORTED"]

_NAMES = ("x", "y", "z")

# (op, compute dtype name) pairs that Numba's CUDA target cannot compile (checked by compiling
# every op x dtype to PTX for sm_90).  They raise a DTypeError on CUDA; the CPU supports them.
CUDA_UNSUPPORTED: frozenset = frozenset()


def kernel_source(op: ScalarOp, kinds: tuple, casts: tuple, compute, ndim: int, flat: bool,
                  static_names: tuple, simulator: bool | None = None, in_dtypes: tuple = (),
                  out_dtype=None) -> str:
    """One grid-stride kernel named ``ew_kernel``.  ``kinds[i]`` is "array" (a device operand,
    indexed), "scalar" (a kernel argument already in its kernel dtype) or "none".
    ``compute`` is the dtype the expression computes in (float32 for float16 and bfloat16).
    ``in_dtypes``/``out_dtype``: the arrays' dtypes, where bfloat16 is read and stored through its
    words (a uint16 view, see support/loops' ``read_cast`` and ``store``).  ``simulator``
    (default: whether Numba's CUDA simulator is on) picks NumPy over libdevice for rounding."""
    in_dtypes = in_dtypes or (None,) * len(kinds)
    if simulator is None:
        from dispatch_jit.cuda.runtime import is_simulator
        simulator = is_simulator()
    present = tuple(_NAMES[i] for i, k in enumerate(kinds) if k != "none")
    expr = cuda_expression(op, compute, present, simulator)
    nest = CudaNest(flat, ndim, [f"a{i}" for i, k in enumerate(kinds) if k == "array"], ["out"])
    params = []
    for i, k in enumerate(kinds):
        if k == "array":
            params += nest.params(f"a{i}")
        elif k == "scalar":
            params.append(f"a{i}")
    params += list(static_names) + nest.params("out") + nest.sizes()
    prelude = [line[4:] for line in kernel_prelude(static_names)]
    # scalars are converted to the kernel dtype on the host already
    prelude += [f"{_NAMES[i]} = a{i}" for i, k in enumerate(kinds) if k == "scalar"]

    def body(at) -> list:
        reads = [f"{_NAMES[i]} = {read_cast(c, at(f'a{i}'), '_ct', in_dtypes[i], field=False)}"
                 for i, (k, c) in enumerate(zip(kinds, casts)) if k == "array"]
        return reads + [store(at("out"), expr, out_dtype, field=False)]
    return nest.kernel("ew_kernel", params, body, prelude)


def _buf(a):
    """The device buffer a kernel indexes: a bfloat16 one as its uint16 words (read_cast, store)."""
    b = a.storage.buf
    return b.view(_U16) if b.dtype == BF16_STORAGE else b


def _host_item(a: np.ndarray):
    """The value of a zero-dim CPU array joining a CUDA op (a bfloat16 one widened to float32)."""
    return bf16.to_float32(a)[()] if a.dtype == BF16_STORAGE else a[()]


_U16 = np.dtype(np.uint16)


def _host_value(v, np_dtype: np.dtype):
    """A host number converted to ``np_dtype`` as an unsafe NumPy cast would (ints wrap)."""
    if isinstance(v, np.ndarray):
        v = v[()]
    if np_dtype.kind == "b":
        return np.bool_(v != 0)
    if np_dtype.kind != "c" and isinstance(v, (complex, np.complexfloating)):
        v = v.real
    return np.asarray(v).astype(np_dtype)[()]


def _static_value(v, compute):
    """A static (alpha) as the CPU kernel receives it (int/float/complex by compute category),
    then in the compute dtype (memoized: nearly every call passes alpha=1)."""
    key = (v.__class__, v, compute.name)
    r = _STATICS.get(key)
    if r is None:
        cat = compute.category
        py = complex(v) if cat == 3 else float(v) if cat == 2 else int(v)
        r = _host_value(py, compute.np)
        if len(_STATICS) < 1024:
            _STATICS[key] = r
    return r


_STATICS: dict = {}


class ElementwiseCUDA(ElementwiseKernel):
    """The CUDA kernel of one ScalarOp ("functional" or "inplace", see ElementwiseKernel)."""

    device = "cuda"

    def check(self, r):
        name, compute = self.op.name, r.compute
        if (name, compute.name) in CUDA_UNSUPPORTED:
            raise DTypeError(f"{name}() is not supported for {compute.name} on CUDA (Numba's CUDA target "
                             f"cannot compile it); compute on the CPU (.cpu()) or convert the inputs")

    def plan(self, call, r, kcompute):
        # "host": a zero-dim CPU tensor joining a CUDA computation; read on the host, passed as a scalar
        kinds = tuple("none" if m.kind == "none" else
                      ("host" if m.device == "cpu" else "array") if m.kind == "tensor" else "scalar"
                      for m in r.in_metas)
        in_dtypes = tuple(m.dtype if m.kind == "tensor" else None for m in r.in_metas)
        return _PlanCUDA(self, call.op.name, kinds, r.casts, kcompute, r.result, r.static_names, r.in_idx,
                         r.static_idx, r.out_pos, in_dtypes).run


class _PlanCUDA:
    """Everything resolved for one signature; picks and launches the kernel per call."""

    def __init__(self, kern, opname, kinds, casts, kcompute, result, static_names, in_idx, static_idx, out_pos,
                 in_dtypes=()):
        self.kern, self.opname, self.kinds, self.casts = kern, opname, kinds, casts
        self.in_dtypes = in_dtypes
        self.kcompute, self.result = kcompute, result
        self.static_names, self.in_idx, self.static_idx, self.out_pos = static_names, in_idx, static_idx, out_pos
        self.int_compute = kcompute.category < 2
        # kernel kinds: host tensors are scalar arguments
        self.kkinds = tuple("scalar" if k == "host" else k for k in kinds)
        self.kernels: dict = {}
        # the common call (every operand a CUDA tensor, a new output) has a path of its own (run)
        self.all_arrays = (kern.mode == "functional" and not self.int_compute
                           and all(k in ("array", "none") for k in kinds) and "array" in kinds)
        self.array_idx = tuple(in_idx[j] for j, k in enumerate(kinds) if k == "array")
        # a Check on Python-number operands (pow's negative exponent): tested per call, on the host
        check = kern.op.checks.get(kcompute.category)
        scalars = {_NAMES[j] for j, k in enumerate(kinds) if k == "scalar"}
        self.scalar_check = check if check is not None and check.scalar and check.names() <= scalars else None

    def _kernel(self, ndim: int, flat: bool):
        key = (ndim, flat)
        k = self.kernels.get(key)
        if k is None:
            from dispatch_jit.cuda.codegen import compile_cuda
            src = kernel_source(self.kern.op, self.kkinds, self.casts, self.kcompute, ndim, flat,
                                self.static_names, in_dtypes=self.in_dtypes, out_dtype=self.result)
            k = compile_cuda(src, "ew_kernel", {"_ct": self.kcompute.np.type, **device_globals()})
            self.kernels[key] = k
        return k

    def _scalar_dtype(self, j: int) -> np.dtype:
        return np.dtype(np.bool_) if self.casts[j] == "bool" else self.kcompute.np

    def run(self, *args):
        if self.all_arrays and (self.out_pos is None or args[self.out_pos] is None):
            # same-shape C-contiguous operands into a new output: no broadcasting, nothing can
            # overlap the output, so the flat kernel with offsets only (what the general path
            # below would pick, without its per-call checks; it cost most of a tiny op)
            arrs = [args[i]._data for i in self.array_idx]
            a0 = arrs[0]
            shape = a0.shape
            if all(a.shape == shape and a.layout.flags.c_contiguous for a in arrs):
                from dispatch_jit.cuda.array import empty
                from dispatch_jit.cuda.launch import launch
                out_arr = empty(shape, self.result.np, a0.storage.device_index)
                n = out_arr.size
                if n:
                    kargs = []
                    for a in arrs:
                        kargs += (_buf(a), a.offset)
                    kargs += [_static_value(args[i], self.kcompute) for i in self.static_idx]
                    kargs += (_buf(out_arr), 0, n)
                    launch(self._kernel(len(shape), True), n, out_arr.storage.device_index, *kargs)
                return self._wrap(out_arr)
        opname = self.opname
        if self.int_compute:
            check_statics(opname, self.static_idx, self.static_names, args)
        inputs = [args[i] for i in self.in_idx]
        kinds = self.kinds
        if self.scalar_check is not None and self.scalar_check.refuses(
                **{_NAMES[j]: inputs[j] for j, k in enumerate(kinds) if k == "scalar"}):
            # a CUDA kernel cannot raise: refused here, with the CPU loop's message (pow's is a ValueError)
            raise InvalidArgumentError(self.scalar_check.message)
        tens = [x._data for x, k in zip(inputs, kinds) if k in ("array", "host")]
        shape = broadcast_shape(opname, [a.shape for a in tens])
        out_t = output_tensor(self.kern.mode, inputs, args, self.out_pos)
        device_index = next((x._data.device_index for x, k in zip(inputs, kinds) if k == "array"), None)
        if out_t is not None:
            check_output(opname, self.kern.mode == "inplace", self.result, out_t, shape)
            what = "in-place operand" if self.kern.mode == "inplace" else "out="
            if not out_t.is_cuda:
                # only a zero-dim CPU tensor gets here (the dispatcher refuses the others)
                other = f"cuda:{device_index}" if device_index is not None else "cuda:0"
                raise DeviceMismatchError(f"Expected all tensors to be on the same device, but found {other} "
                                          f"and cpu (in {opname}): the {what} of a CUDA computation must be "
                                          f"a CUDA tensor")
            out_arr = out_t._data
            if device_index is None:
                device_index = out_arr.device_index
        else:
            from dispatch_jit.cuda.array import empty
            out_arr = empty(shape, self.result.np, device_index)
        ndim = len(shape)
        n = out_arr.size
        # kernel arguments, operand by operand
        arrays, kargs_scalar = {}, {}
        for j, (x, k) in enumerate(zip(inputs, kinds)):
            if k == "array":
                arrays[j] = x._data
            elif k == "host":
                kargs_scalar[j] = _host_value(_host_item(x._data), self._scalar_dtype(j))
            elif k == "scalar":
                kargs_scalar[j] = _host_value(x, self._scalar_dtype(j))
        if n:
            st = out_arr.storage
            lo, hi = out_arr.extent()
            for j, a in arrays.items():
                # an input overlapping the output in another layout would be read after being
                # written: copy it first (as the CPU kernel and PyTorch do)
                if a is not out_arr and a.storage is st and not (
                        a.offset == out_arr.offset and a.strides == out_arr.strides and a.shape == out_arr.shape):
                    alo, ahi = a.extent()
                    if alo < hi and lo < ahi:
                        from dispatch_jit.cuda.copy import contiguous_copy
                        a = contiguous_copy(a)
                if a.shape != shape:
                    a = a.view_as(lambda l, s=shape: np.broadcast_to(l, s))
                arrays[j] = a
            flat = out_arr.flags.c_contiguous and all(a.flags.c_contiguous for a in arrays.values())
            kargs = []
            for j, k in enumerate(self.kkinds):
                if k == "array":
                    a = arrays[j]
                    kargs += [_buf(a), a.offset] + ([] if flat else list(a.elem_strides()))
                elif k == "scalar":
                    kargs.append(kargs_scalar[j])
            kargs += [_static_value(args[i], self.kcompute) for i in self.static_idx]
            kargs += [_buf(out_arr), out_arr.offset]
            if not flat:
                kargs += list(out_arr.elem_strides()) + list(shape)
            kargs.append(n)
            from dispatch_jit.cuda.launch import launch
            launch(self._kernel(ndim, flat), n, out_arr.device_index, *kargs)
        if out_t is not None:
            bump_version(out_t)
            return out_t
        return self._wrap(out_arr)

    def _wrap(self, out_arr):
        """A new C-contiguous CUDA result as a Tensor."""
        t = Tensor.__new__(Tensor)
        t._data = out_arr
        t._sig = make_sig(CUDA_BITS, self.result, out_arr.ndim, True, out_arr.device_index)
        return t
