"""``dj.library``: define operators and register kernels, as ``torch.library`` does.

The public facade over dispatch_jit/_library/ (registration, schema inference,
custom_op, opcheck).

>>> import dispatch_jit as dj
>>> lib = dj.Library("doc_demo", "DEF")
>>> lib.define("twice(Tensor self) -> Tensor")
'doc_demo::twice'
>>> h = lib.impl("twice", lambda x: dj.add(x, x), "CPU")
>>> dj.ops.doc_demo.twice(dj.tensor([1.0, 2.0]))
tensor([2., 4.])
>>> lib._destroy()
"""

from __future__ import annotations

from ._library.custom_op import CustomOpDef, custom_op, register_fake
from ._library.infer_schema import infer_schema
from ._library.opcheck import OpCheckError, opcheck
from ._library.registration import Library, fallthrough_kernel

__all__ = ["Library", "fallthrough_kernel", "custom_op", "CustomOpDef", "opcheck", "OpCheckError", "register_fake",
           "infer_schema"]
