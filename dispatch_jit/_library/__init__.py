"""The private package behind ``dj.library`` (dispatch_jit/library.py), one concern a module,
as torch/_library behind torch/library.py:

- registration.py: ``Library`` (define operators, register kernels per key, fallbacks);
- infer_schema.py: a Python function's schema from its type hints;
- custom_op.py: ``custom_op`` / ``CustomOpDef`` (operators from Python functions);
- opcheck.py: ``opcheck``, which tests what an operator's registrations promise.
"""
