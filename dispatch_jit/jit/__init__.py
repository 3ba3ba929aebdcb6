"""Compiling Numba code, once: the one source -> entry-point cache (``cache.py``), the
on-disk store of compiled CPU kernels it uses (``diskcache.py``: fused loops and eager
kernels alike), the fingerprints that key it (``fingerprint.py``) and the checks and per-user
key that decide which entries it may load (``trust.py``, docs/CACHE.md), and the 512-bit vectors of the
generated loops where the CPU has AVX-512 (``vectors.py``).

Every part of the library that compiles goes through ``cache``: the eager kernels
(``kernels/*/cpu.py``, ``kernels/*/cuda.py``), the engine's CUDA helpers
(``dispatch_jit/cuda``) and the compiler's fused loops (``dispatch_jit/compiler``).
"""
