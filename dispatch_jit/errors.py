"""Every exception dispatch_jit raises on purpose.

Each class subclasses the builtin a Python user would catch for the same
mistake (``LookupError`` for a missing kernel, ``TypeError`` for a call that
does not fit a schema, ...), so ``except TypeError`` keeps working, while the
message says what failed, the values seen, and what to do instead.
"""

from __future__ import annotations

import pickle

__all__ = ["VmapError", 
    "DispatchJitError",
    "SchemaParseError",
    "SchemaError",
    "RegistrationError",
    "NoKernelError",
    "UnknownOperatorError",
    "DeviceMismatchError",
    "DTypeError",
    "CastingError",
    "BroadcastError",
    "ShapeError",
    "AxisError",
    "OutOfBoundsError",
    "SizeDependentError",
    "AutogradError",
    "CudaUnavailableError",
    "CudaOutOfMemoryError",
    "EscapedTensorError",
    "SparseLayoutError",
    "SchemaInferenceError",
    "OpCheckError",
    "GraphError",
    "TargetError",
    "StateDictError",
    "InvalidArgumentError",
    "ArgumentTypeError",
    "TensorStateError",
    "InterpreterError",
    "ValueOverflowError",
    "LoadError",
    "CompileWarning",
]


class DispatchJitError(Exception):
    """Base class of every error raised by dispatch_jit on purpose."""


class SchemaParseError(DispatchJitError, ValueError):
    """A schema string is malformed; the message points at the position."""

    def __init__(self, schema: str, pos: int, what: str):
        self.schema, self.pos = schema, pos
        caret = " " * pos + "^"
        super().__init__(f"invalid schema at position {pos}: {what}\n  {schema}\n  {caret}")


class SchemaError(DispatchJitError, TypeError):
    """A call does not fit the operator's schema; the message quotes it."""


class RegistrationError(DispatchJitError, RuntimeError):
    """A definition or registration conflicts with an existing one."""


class NoKernelError(DispatchJitError, LookupError):
    """No kernel is registered for the dispatch key a call resolved to."""


class UnknownOperatorError(DispatchJitError, LookupError):
    """A name given where an operator's public name is expected names none; the message lists
    the names accepted there."""


class DeviceMismatchError(DispatchJitError, RuntimeError):
    """Tensors of one call live on different devices."""


class DTypeError(DispatchJitError, TypeError):
    """An operator does not support the dtype(s) it was called with."""


class CastingError(DispatchJitError, TypeError):
    """A result cannot be stored in the requested dtype (in-place or out=)."""


class BroadcastError(DispatchJitError, ValueError):
    """Shapes cannot be broadcast together."""


class ShapeError(DispatchJitError, ValueError):
    """A shape, axis or size argument is invalid for the tensor it applies to."""


class SizeDependentError(ShapeError):
    """An output's shape, or its rank, depends on sizes that were not given (tracing without sizes:
    ``squeeze`` drops the size-1 dimensions, which only the sizes tell)."""


class AxisError(ShapeError, IndexError):
    """An axis outside the tensor's dimensions, where the Python array API standard asks for an
    IndexError (``expand_dims``, ``take``): catchable as ValueError too, as NumPy's AxisError."""


class OutOfBoundsError(DispatchJitError, IndexError):
    """An index (in an index tensor given to ``take``, ``index_select``, ...) outside the axis it indexes."""


class AutogradError(DispatchJitError, RuntimeError):
    """Gradient computation cannot proceed."""


class CudaUnavailableError(DispatchJitError, RuntimeError):
    """A CUDA tensor or kernel was requested where no CUDA device exists."""


class CudaOutOfMemoryError(DispatchJitError, MemoryError):
    """The device has no memory left for an allocation, even after emptying the cache."""


class EscapedTensorError(DispatchJitError, RuntimeError):
    """A tensor made while ``dj.compile`` traced a function was kept outside it (in a global, an
    attribute or a container): it is a placeholder without data, so any use of it fails."""


class SparseLayoutError(ShapeError):
    """Dense-style access to a sparse tensor."""


class SchemaInferenceError(DispatchJitError, ValueError):
    """A function's signature cannot be turned into a schema."""


class OpCheckError(DispatchJitError, AssertionError):
    """``opcheck`` found a registration that does not match the kernel's behaviour."""


class GraphError(AssertionError):
    """A graph failed ``Graph.check()``: a pass or the tracer produced a malformed graph.

    An internal invariant (a bug in a compiler pass), not a user error: it is no DispatchJitError."""


class TargetError(DispatchJitError, IndexError):
    """A loss's class-index target holds a value that is no class (nor its ignore_index)."""


class StateDictError(DispatchJitError, RuntimeError):
    """``Module.load_state_dict`` got missing or unexpected keys (strict), or tensors of the wrong shape."""


class InvalidArgumentError(DispatchJitError, ValueError):
    """An argument's value is outside what the call accepts (a negative size, an unknown option,
    a malformed index array); the message names the argument, the value seen and what is accepted."""


class VmapError(InvalidArgumentError):
    """A vmap used wrongly (torch.func's messages): in_dims/out_dims that do not fit the inputs,
    batch sizes that disagree, a random op in randomness="error" mode, reading a batched tensor's data."""


class ArgumentTypeError(DispatchJitError, TypeError):
    """An argument of a type the call does not take (or a Python protocol a tensor cannot serve,
    such as ``len()`` of a 0-d tensor)."""


class TensorStateError(DispatchJitError, RuntimeError):
    """The tensor's state does not allow the request: the truth value of a tensor of several
    elements, or a value whose pending compiled-mode graph failed to run."""


class InterpreterError(DispatchJitError, RuntimeError):
    """This Python interpreter does not behave as a measurement the library makes at import
    assumes (reference counts): the library cannot run here."""


class ValueOverflowError(DispatchJitError, OverflowError):
    """A Python number that does not fit the dtype asked for (``asarray(2**40, dtype=int32)``)."""


class LoadError(DispatchJitError, pickle.UnpicklingError):
    """``dj.load`` refused a file: not a regular file, not an archive ``dj.save`` writes, a member
    that declares one size and holds another, or a pickle asking for what ``weights_only`` refuses.
    It is a ``pickle.UnpicklingError``, as ``torch.load``'s refusals are."""


class CompileWarning(UserWarning):
    """``dj.compile`` ran a call eagerly where it could not trace it (a graph break): the warning
    names the function, the reason and the user's source line, once per function and line (as
    ``torch.compile`` reports graph breaks); ``explain()`` lists every break."""
