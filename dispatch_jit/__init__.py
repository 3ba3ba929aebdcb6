"""dispatch_jit: an operator dispatch engine in the model of PyTorch's dispatcher,
with Numba kernels compiled lazily per dtype.

>>> import dispatch_jit as dj
>>> x = dj.tensor([1.0, 2.0], dtype=dj.float32)
>>> w = dj.tensor([3.0, 4.0], dtype=dj.float32)
>>> dj.add(x, w)
tensor([4., 6.])
>>> with dj.show_dispatch_trace():
...     _ = dj.add(x, w)
[call] op=[aten::add.Tensor], key=[CPU]
"""

from __future__ import annotations

# first: the threading layer and OpenMP's spin, before anything can start Numba's thread pool
from .jit import threads as _threads

_threads.configure()
from .jit.threads import get_num_threads, set_num_threads  # noqa: E402  PyTorch's intra-op threads

from . import autograd, cuda, errors, library, return_types, utils
from .autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .sparse import SparseCsrTensor, is_sparse_csr, sparse_csr, sparse_csr_tensor, to_sparse_csr
from .sparse_coo import SparseCooTensor, sparse_coo, sparse_coo_tensor
from .autograd import enable_grad, inference_mode, no_grad, set_grad_enabled, is_grad_enabled
from .creation import (Generator, arange, as_tensor, asarray, empty, empty_like, eye, from_numpy, full, full_like,
                       linspace, manual_seed, ones, ones_like, tensor, zeros, zeros_like)
from .random import (bernoulli, multinomial, normal, rand, rand_like, randint, randint_like, randn, randn_like,
                     randperm)
from .defaults import set_default_dtype
from .printing import get_printoptions, set_printoptions
from .serialization import load, save
from .dispatcher import ExcludeDispatchKeyGuard, IncludeDispatchKeyGuard, show_dispatch_trace
from .dtypes import (DType, bfloat16, can_cast, complex64, complex128, finfo, float16, float32, float64,
                     get_default_dtype, iinfo, int8, int16, int32, int64, promote_types, result_type, uint8, uint16,
                     uint32, uint64)
from .dtypes import bool_ as bool  # noqa: A001  (dj.bool, as torch.bool)
from .introspect import cache_info, dump, dump_table, has_kernel, list_operators
from .keys import DispatchKey, DispatchKeySet
from .library import Library
from .modes import DispatchMode
from .ops import OpOverload, OpOverloadPacket, ops
from .registry import Tag
from .tensor import Tensor, device, dispatch_keys, is_tensor, strided

from . import kernels as _kernels  # noqa: E402,F401  defines "aten" and registers its kernels
from ._install import install as _install  # noqa: E402
from .compiler import CompiledFunction, compile  # noqa: E402,A001  registers the Tracer fallback
from .compiler import execution_mode, get_mode, set_mode  # noqa: E402
from .kernels.surface import quantized_add, quantized_linear, quantized_matmul  # noqa: E402
from .kernels.warmup import WarmupInfo, warmup  # noqa: E402
from .quantized import QuantizedTensor, qint8, quantize_per_tensor, quint8  # noqa: E402
from . import nn, optim  # noqa: E402  (above the op library: modules, losses, optimizers)
from . import signal  # noqa: E402  torch.signal.windows
from . import func  # noqa: E402  torch.func's transforms (vmap over the Batched key, grad, jacrev, ...)
from .func import vmap  # noqa: E402

_FUNCTIONS = _install(globals(), _kernels.surface)

from . import array_api  # noqa: E402  the array API namespace (it binds Tensor.__array_namespace__)
from .dlpack import from_dlpack  # noqa: E402
from .dask import from_dask  # noqa: E402  the Dask backend (PrivateUse1), enabled on first use

array_api.install()

# PyTorch's namespaces torch.linalg, torch.fft, torch.special (over the array API layer's kernels);
# also importable as modules: ``import dispatch_jit.linalg``
from .array_api import torch_fft as fft, torch_linalg as linalg, torch_special as special  # noqa: E402
import sys as _sys  # noqa: E402

for _ns in (fft, linalg, special):
    _sys.modules[f"{__name__}.{_ns.__name__.rsplit('_', 1)[-1]}"] = _ns

# PyTorch's dtype aliases (dj.float is float32, dj.long int64, ...); bound last: from here on
# the names float and int in this module are dtypes, not the builtins
from .dtypes import float16 as half, float32 as float, float64 as double, int32 as int, int64 as long  # noqa: E402,A001

__version__ = "0.1.0"

__all__ = [
    # tensors and dtypes
    "Tensor", "tensor", "asarray", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand", "randn", "randint", "manual_seed", "Generator",
    "device", "strided", "is_tensor", "DType", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "float16", "float32", "float64", "complex64", "complex128", "bfloat16", "finfo", "iinfo", "promote_types",
    "result_type", "can_cast", "get_default_dtype", "set_default_dtype", "float", "double", "half", "int", "long",
    "as_tensor", "rand_like", "randn_like", "randint_like", "randperm", "normal", "bernoulli", "multinomial",
    "save", "load", "set_printoptions", "get_printoptions",
    # dispatch
    "func", "vmap",
    "DispatchKey", "DispatchKeySet", "dispatch_keys", "Library", "library", "ops", "OpOverload",
    "OpOverloadPacket", "Tag", "IncludeDispatchKeyGuard", "ExcludeDispatchKeyGuard", "DispatchMode",
    # introspection
    "dump", "dump_table", "has_kernel", "cache_info", "show_dispatch_trace", "list_operators",
    "QuantizedTensor", "qint8", "quint8", "quantize_per_tensor", "quantized_matmul", "quantized_add",
    "quantized_linear",
    "SparseCsrTensor", "sparse_csr", "sparse_csr_tensor", "to_sparse_csr", "is_sparse_csr", "SparseCooTensor",
    "sparse_coo", "sparse_coo_tensor",
    "compile", "CompiledFunction", "warmup", "WarmupInfo", "set_mode", "get_mode", "execution_mode", "autocast", "is_autocast_enabled", "get_autocast_dtype",
    "errors", "return_types", "utils", "autograd", "cuda", "nn", "optim", "array_api", "linalg", "fft", "special", "signal", "from_dlpack", "from_dask", "no_grad", "enable_grad",
    "set_grad_enabled", "is_grad_enabled", "inference_mode", "set_num_threads", "get_num_threads",
] + sorted(_FUNCTIONS)

# DISPATCH_JIT_MODE=compiled applies to the importing thread
from .compiler import init_mode_from_env as _init_mode_from_env  # noqa: E402

_init_mode_from_env()
