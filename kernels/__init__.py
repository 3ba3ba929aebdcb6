"""dispatch_jit's operator library (installed as ``dispatch_jit.kernels``).

Importing it defines the "aten" namespace and registers its kernels; the
engine imports it once, from ``dispatch_jit/__init__.py``.
"""

from . import aten  # noqa: F401  (registers everything)
from . import autocast_policy  # noqa: F401,E402  (autocast kernels for the aten ops)
from .sparse import cpu as sparse  # noqa: F401,E402  (SparseCsrCPU kernels)
from .quantized import cpu as quantized  # noqa: F401,E402  (QuantizedCPU kernels)
