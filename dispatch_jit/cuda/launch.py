"""Launch configuration, chosen from the device's attributes, and the launch itself.

Elementwise kernels use grid-stride loops, so the grid never needs to cover
the whole array: enough blocks to fill every multiprocessor a few times is
as fast and launches faster.  The simulator runs one Python thread per CUDA
thread, so there blocks are one warp.

Every generated kernel is launched through ``run``.  The first launch of a
kernel for a tuple of argument types goes through ``numba.cuda``'s
dispatcher (which compiles); later ones skip its per-call work (typing every
argument, searching overloads, wrapping arrays, a launch configuration
object), which costs tens of microseconds a launch, measured on an H100
machine: the arguments are packed as the dispatcher packs them
(``_Kernel._prepare_args``: an array is meminfo, parent, size, itemsize,
data pointer, shape, strides) and handed to the same ``cuda.core`` launch.
Only what our kernels take is packed directly (1-D C-contiguous device
arrays, integers, float32/float64, bool); a kernel with anything else, a
machine with several GPUs, or a numba-cuda whose internals differ, keeps the
dispatcher.
"""

from __future__ import annotations

import ctypes
import functools

from .runtime import device_attributes, device_count, is_simulator

__all__ = ["elementwise_config", "launch", "run", "BLOCKS_PER_SM", "direct_launches"]

BLOCKS_PER_SM = 8


@functools.lru_cache(maxsize=4096)
def elementwise_config(n: int, device_index: int = 0) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride loop over ``n`` elements."""
    a = device_attributes(device_index)
    threads = 32 if a.simulated else min(256, a.max_threads)
    if n <= 0:
        return 1, threads
    blocks = min(-(-n // threads), a.sm_count * (1 if a.simulated else BLOCKS_PER_SM))
    return max(blocks, 1), threads


def launch(kernel, n: int, device_index: int, *args) -> None:
    """Run a grid-stride ``kernel`` over ``n`` elements (nothing when ``n`` is 0)."""
    if n == 0:
        return
    blocks, threads = elementwise_config(n, device_index)
    run(kernel, blocks, threads, args)


def run(kernel, grid, block, args: tuple) -> None:
    """``kernel[grid, block](*args)``, directly once the kernel is compiled for these argument types."""
    table = _DIRECT.get(kernel)
    if table is not None:
        entry = table.get(tuple([(a.__class__, getattr(a, "dtype", None)) for a in args]))
        if entry is not None and entry(grid, block, args):
            return
    kernel[grid, block](*args)
    if _enabled():
        _learn(kernel, args)


def direct_launches() -> int:
    """Launches that skipped numba.cuda's dispatcher in this process (tests)."""
    return _COUNT[0]


# ---------------------------------------------------------------- the direct path

_DIRECT: dict = {}          # numba dispatcher -> {argument key: _Direct or None}
_COUNT = [0]


@functools.lru_cache(maxsize=None)
def _enabled() -> bool:
    # a compiled kernel's CUfunction belongs to one device's context: with several devices the
    # dispatcher picks the current one at every launch
    if is_simulator() or device_count() != 1:
        return False
    try:
        _core()
    except Exception:       # another numba-cuda: its dispatcher does every launch
        return False
    return True


@functools.lru_cache(maxsize=None)
def _core():
    """(launch, LaunchConfig factory, default stream) as numba.cuda's dispatcher uses them."""
    from numba.cuda import dispatcher as nd
    from numba.cuda._compat import CUDA_CORE_GE_1_0
    from numba.cuda.cudadrv import driver
    coop = "is_cooperative" if CUDA_CORE_GE_1_0 else "cooperative_launch"

    @functools.lru_cache(maxsize=1024)
    def config(grid, block):
        return nd.LaunchConfig(grid=grid, block=block, shmem_size=0, **{coop: False})

    return nd.launch, config, driver._to_core_stream(0)


def _learn(kernel, args) -> None:
    table = _DIRECT.setdefault(kernel, {})
    key = tuple([(a.__class__, getattr(a, "dtype", None)) for a in args])
    if key in table:
        return
    entry = None
    try:
        argtypes = tuple(kernel.typeof_pyval(a) for a in args)
        compiled = kernel.overloads.get(argtypes)
        if compiled is not None:
            entry = _Direct.build(compiled)
    except Exception:
        entry = None
    table[key] = entry


_SCALARS = {"float32": ctypes.c_float, "float64": ctypes.c_double}


class _Direct:
    """One compiled kernel's launch without the dispatcher."""

    __slots__ = ("kinds", "cufunc")

    @classmethod
    def build(cls, compiled):
        from numba.cuda import types
        if compiled.extensions or compiled.debug or getattr(compiled, "cooperative", False):
            return None
        kinds = []
        for t in compiled.argument_types:
            if isinstance(t, types.Array):
                if t.ndim != 1 or t.layout != "C":
                    return None
                kinds.append(None)
            elif isinstance(t, types.Integer):
                kinds.append(getattr(ctypes, f"c_{t}"))
            elif t == types.boolean:
                kinds.append(bool)
            elif str(t) in _SCALARS:
                kinds.append(_SCALARS[str(t)])
            else:
                return None
        self = cls()
        self.kinds, self.cufunc = tuple(kinds), compiled._codelibrary.get_cufunc()
        return self

    def __call__(self, grid, block, args) -> bool:
        packed = []
        for conv, a in zip(self.kinds, args):
            if conv is None:
                p = _packed(a)
                if p is None:
                    return False
                packed += p
            else:
                packed.append(conv(a))
        core_launch, config, stream = _core()
        core_launch(stream, config(grid, block), self.cufunc.kernel, *packed)
        _COUNT[0] += 1
        return True


def _packed(a):
    """A 1-D C-contiguous device array as the kernel ABI takes it (None: anything else)."""
    try:
        return a._dj_packed
    except AttributeError:
        pass
    if a.ndim != 1 or (a.shape[0] > 1 and a.strides[0] != a.dtype.itemsize):
        return None
    p = a._dj_packed = (0, 0, a.size, a.dtype.itemsize, a.device_ctypes_pointer.value or 0,
                        a.shape[0], a.strides[0])
    return p
