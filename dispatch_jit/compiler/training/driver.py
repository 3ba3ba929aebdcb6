"""Running a whole step's trace (training/functionalize.py's ``StepTracer``) and dj.optim's view of it.

``trace_step`` makes the real tensors the step reads ``StepTensor``s for the length of the
trace (data reads abort, ``copy_`` and indexing are recorded), binds the arguments as the
first inputs, runs the function with the Tracer key included, rewinds the default generator
if the step drew from it (a trace would replay one draw at every call: the call runs eagerly),
and restores whatever the trace changed (``.grad``, the optimizers' Python state, the classes).
``_Hook`` is what ``optimizer.STEP_TRACE`` holds: the running StepTracer, or, inside a plain
``dj.compile`` trace, an aborter (so the call is traced again as a step), or None (lazy mode).
"""

from __future__ import annotations

from dispatch_jit.dispatcher import IncludeDispatchKeyGuard
from dispatch_jit.keys import DispatchKey
from dispatch_jit.optim import optimizer as _optim
from dispatch_jit.tensor import Tensor

from ..trace.fallback import active, flat_tensors, rewinding
from ..trace.symbolic import TraceAbort, Tracer, _state
from ..trace.symbolic_tensor import STEP_REASONS
from .functionalize import OptionRead, StepTensor, StepTrace, StepTracer

__all__ = ["trace_step"]

_K = DispatchKey


def trace_step(fn, args, kwargs, sources: dict, opts=(), options=True):
    """Trace ``fn(*args, **kwargs)`` as a whole step; ``sources``: id(real tensor) -> how a call
    fetches it (the parameters, gradients and optimizer states the call's guards watch);
    ``opts``: the optimizers the call's key watches; ``options``: their numeric options are
    runtime scalars (else constants of the trace: the key holds their values).
    Returns a StepTrace, or the reason the step cannot be compiled (an ``OptionRead`` where the
    step used an option's value in Python)."""
    tensors = flat_tensors((args, kwargs), [])
    if any(t.is_cuda for t in tensors):
        return "a CUDA argument: a whole step is compiled for CPU tensors only"
    if any(t.__class__ is not Tensor for t in tensors):
        return "an argument is not a plain dense tensor"
    sources = dict(sources)
    for i, t in enumerate(tensors):      # an argument is the call's: fetched by position
        sources[id(t)] = (t, ("arg", i))
    tracer = StepTracer(sources, opts)
    swapped = []
    try:
        if options:
            tracer.stand_in_options()
        with IncludeDispatchKeyGuard(_K.Tracer), active(tracer):
            for t, _ in sources.values():
                if t.__class__ is Tensor:
                    t.__class__ = StepTensor
                    swapped.append(t)
            for t in tensors:            # the arguments are the first inputs, in order
                tracer.sym(t)
            with rewinding(tracer, "the step"):
                out = fn(*args, **kwargs)
            if tracer.aborted:           # the function caught the abort: still abort
                raise TraceAbort(tracer.aborted)
            tracer.close(out)
    except TraceAbort as e:
        why = f"the step's trace aborted: {e.reason}"
        return OptionRead(why) if tracer.options_used else why
    except Exception as e:     # noqa: BLE001  (the step raises for these inputs: eager raises it)
        return f"tracing the step raised {type(e).__name__}: {e}"
    finally:
        for t in swapped:
            t.__class__ = Tensor
        tracer.restore()
        tracer.finish()
    return StepTrace(tracer)


class _PlainTrace:
    """An optimizer stepping inside a plain ``dj.compile`` trace: abort it (before the update
    writes anything), so that the call is traced again as a whole step."""

    @staticmethod
    def _abort(*_):
        _state.tracer.abort(_STEP_CALL)

    step = zero_grad = step_scalars = _abort


class _Hook:
    """dj.optim's view of the running trace (``optimizer.STEP_TRACE``): a StepTracer, a plain
    trace's aborter, or None (lazy mode's recorder: the per-tensor ops are recorded as any)."""

    plain = _PlainTrace()

    def active(self):
        tr = _state.tracer
        if isinstance(tr, StepTracer):
            return tr
        return self.plain if tr.__class__ is Tracer else None


_HOOK = _Hook()
_STEP_CALL = next(r for r in STEP_REASONS if "optimizer" in r)
_optim.STEP_TRACE[0] = _HOOK
