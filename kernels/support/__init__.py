"""What every op family's kernels build on: scalar helpers, LLVM intrinsics, vectorizable
float32 sin/cos, and the Numba type tables the compiler imports too."""
