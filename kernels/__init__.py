"""dispatch_jit's operator library (installed as ``dispatch_jit.kernels``).

Importing it defines the "aten" namespace and registers its kernels; the
engine imports it once, from ``dispatch_jit/__init__.py``.
"""

from . import aten  # noqa: F401  (registers everything)
from . import autocast_policy  # noqa: F401,E402  (autocast kernels for the aten ops)
from . import sparse  # noqa: F401,E402  (SparseCsrCPU kernels)
from . import quantized  # noqa: F401,E402  (QuantizedCPU kernels)
from . import engine_hooks  # noqa: F401,E402  (the CUDA conversions and scalar helpers the engine calls)
