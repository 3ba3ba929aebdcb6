"""``dj.compile``: trace once per signature, run the fused plan afterwards.

The hot path of a compiled function builds its key (dispatch state, default
dtype, each tensor's signature int, each Python float/int argument's type,
each other argument's value, and what guards.py's generated reader returns
for the globals, closure variables and attribute chains the function reads),
makes one dict lookup, compares the hooks' epoch with the entry's (one integer:
structure.py checks the containers and hooks the call reached again only when it
moved), and calls the entry.  A miss traces, optimizes, plans
and (lazily, per loop variant) compiles or loads the loop from the disk
cache (dispatch_jit/jit/diskcache.py); or, when the call cannot be compiled, caches an eager
entry that says why.  Sizes are not in the key until a trace reads one of the function's
tensors' sizes (``x.shape``): from then on every tensor's sizes are a sixth part of it and each
trace is a ShapedTracer's (``_sized``; torch.compile's static shapes).  A one-loop plan of positional
tensors runs, once compiled, through straight-line generated code (fastpath.py).
Outputs alias as eager mode's do: cse never merges two values whose memory
the outputs hold (``x * 2, (x * 2).T``: two temporaries in eager mode), so
outputs share memory exactly where the function's views make them.

CUDA tensors: the device is part of each tensor's signature, so CPU and
CUDA calls of one function are separate entries; a fused region on CUDA
tensors is one ``numba.cuda.jit`` grid-stride kernel (compiler/cuda.py),
and everything else runs through the eager dispatcher's CUDA kernels.

Autograd: when grad mode is on and a tensor input requires grad, the call's
joint forward+backward graph is traced per set of input sizes (joint.py: the
derivative table's formulas run on symbolic tensors), split by a min-cut into a
forward plan that also returns what the backward needs and a backward plan
(partition.py), both fused and, after their first run, each one compiled
function where every step allows it (run/function.py, run/call_rules.py: one Python-level
call per plan instead of one per step); the outputs get one node
(``CompiledBackward``) that runs the backward plan.  A whole training step
(``backward()`` and an update: SGD/Adam/AdamW or by hand) is one plan too
(training/whole_step.py, training/functionalize.py); what none can stand for, and a ``create_graph=True``
backward, run eagerly, and ``explain()`` says why.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
import weakref
from collections import namedtuple

from dispatch_jit import registry
from dispatch_jit.dispatcher import tls
from dispatch_jit.dtypes import get_default_dtype
from dispatch_jit.tensor import Tensor

from .backends import backend_entry
from .explain import explain_lines
from .graph.passes import same_graph
from .module_wrapper import compile_module
from .run.cached import CompiledEntry, EagerEntry, entry_for
from .run.steps import Stats
from .trace.argkey import Unhashable, arg_key, leaf_key, perturbed
from .trace.breaks import Breaks, take_site
from .trace.fallback import flat_tensors as _tensors, install_tracer_fallback, trace
from .trace.guards import Unguardable, find_captures, make_reader, writes_outside
from .trace.recompiles import key_change
from .trace.structure import EPOCH, changed, fingerprint
from .trace.symbolic import TraceAbort, _state
from .trace.symbolic_tensor import SIZE_REASONS
from .training.whole_step import is_step, step_entry

__all__ = ["compile", "CompiledFunction", "CacheInfo"]

CacheInfo = namedtuple("CacheInfo", "calls hits traces compiles disk_hits eager_calls entries")
CacheInfo.__doc__ = """Counters of a compiled function: ``calls``; ``hits`` (signature found in the
cache); ``traces``; ``compiles`` (fused loops compiled by Numba); ``disk_hits``
(fused loops loaded from the disk cache instead); ``eager_calls`` (calls run
eagerly); ``entries`` (signatures cached)."""


class _Report(str):
    """A string that shows as text at the REPL."""
    __repr__ = str.__str__


# every CompiledFunction: a trace records what the registrations said (decompositions), so a
# registration change clears their caches, with the dispatch memos (registry.on_change)
_LIVE = weakref.WeakSet()
registry.on_change(lambda: [f._cache.clear() for f in list(_LIVE)])


class CompiledFunction:
    """A function compiled per input signature; see ``compile``."""

    def __init__(self, fn, *, parallel: bool = True, max_recompiles: int = 8):
        functools.update_wrapper(self, fn)
        if "__name__" not in self.__dict__:    # a functools.partial or a callable object
            self.__name__ = getattr(getattr(fn, "func", None), "__name__", None) or type(fn).__name__
        self.fn, self.parallel, self.max_recompiles = fn, parallel, max_recompiles
        self._cache: dict = {}
        _LIVE.add(self)      # its traces depend on registrations: on_change clears them
        self._calls = self._hits = self._traces = 0
        self._compiled = 0             # compiled entries: the recompile limit counts these
        self._stats = Stats()
        self._last = None
        self._last_recompile = "no recompile yet"
        self._warned = False
        self._limit = EagerEntry(f"recompile limit ({max_recompiles}) reached")
        # misses take the lock (one trace at a time, and the cache never changes size under a
        # reader that iterates it); hits never do: a dict lookup is atomic
        self._lock = threading.RLock()
        self._captures: list = []
        self._read = self._first_read  # then guards.make_reader's function, or None
        self._found = False
        self._side_effect = ""         # why a trace cannot stand for every call (guards.writes_outside)
        self._by_value: dict = {}      # ("a", position) / ("k", name) -> why that scalar is keyed by value
        # the function reads sizes (x.shape, len(x)): every tensor's sizes join the key and each
        # trace is made with them (a ShapedTracer), as torch.compile specializes on static shapes
        self._sized = False
        self._breaks = Breaks(self)    # the graph breaks told (trace/breaks.py)
        try:
            self._params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self._params = []

    # -- hot path ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self._calls += 1
        if _state.tracer is not None:     # called inside another trace: inline it
            return self.fn(*args, **kwargs)
        try:
            read = self._read
            ckey, caps = ((), ()) if read is None else read(args)
            if self._by_value or self._sized:
                key = self._key(args, kwargs, ckey, caps)
            else:
                key = (tls.k, get_default_dtype(), tuple([a._sig if a.__class__ is Tensor else arg_key(a) for a in args]),
                       tuple([(k, arg_key(v)) for k, v in kwargs.items()]) if kwargs else (), ckey)
        except (Unhashable, Unguardable, LookupError, AttributeError) as e:
            return self._eager_once(self._unkeyable(e), args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._miss(key, args, kwargs, caps)
        elif entry.epoch != EPOCH[0] and self._restructured(entry, args, caps):   # structure.py
            self._calls -= 1
            return self(*args, **kwargs)      # the captures are found again: the key may differ
        elif entry.stale is not None and entry.stale(args, caps):    # owners.py: a lifted tensor changed
            entry = self._miss(key, args, kwargs, caps, entry)
        else:
            self._hits += 1
        self._last = entry
        return entry(self.fn, args, kwargs, caps)

    # -- miss path -----------------------------------------------------------------------
    def _key(self, args, kwargs, ckey, caps):
        """The key when some scalar arguments are keyed by value (``_by_value``), or when the
        function reads sizes (``_sized``: the sizes of every tensor it gets, a sixth part)."""
        bv = self._by_value
        a = tuple([x._sig if x.__class__ is Tensor else leaf_key(x) if ("a", i) in bv else arg_key(x)
                   for i, x in enumerate(args)])
        k = tuple([(n, leaf_key(v) if ("k", n) in bv else arg_key(v)) for n, v in kwargs.items()])
        if self._sized:
            sizes = tuple([t._data.shape for t in _tensors((args, kwargs, caps), [])])
            return (tls.k, get_default_dtype(), a, k, ckey, sizes)
        return (tls.k, get_default_dtype(), a, k, ckey)

    def _first_read(self, args):
        """The first call: find what the function reads besides its arguments (guards.py)."""
        with self._lock:
            if not self._found:
                visited: list = []
                self._captures = find_captures(self.fn, args, visited)
                self._side_effect = writes_outside(self.fn, visited)
                if self._side_effect:     # every call runs eagerly: nothing to key on (one entry per signature)
                    self._captures = []
                self._read = make_reader(self._captures)
                self._found = True
        return ((), ()) if self._read is None else self._read(args)

    def _unkeyable(self, e) -> str:
        if isinstance(e, Unhashable):
            return f"an argument of type {e} is not hashable (not part of a cache key)"
        if isinstance(e, Unguardable):
            return (f"the function reads a {e} from a global, closure or attribute ("
                    f"{', '.join(c.label for c in self._captures)}), which no cache key can guard: "
                    f"pass it as an argument")
        return (f"reading what the function captured failed ({type(e).__name__}: {e}): "
                f"the call runs eagerly, as the function would")

    def _eager_once(self, reason, args, kwargs):
        entry = EagerEntry(reason)
        self._last = entry
        return entry(self.fn, args, kwargs)

    def _restructured(self, entry, args, caps) -> bool:
        """The hooks' epoch moved since ``entry`` was last checked: is what it walked still the
        same (structure.py)?  If not, every entry is dropped and the captures are found anew
        (a module added may read globals of its own), so the call retraces."""
        why = changed(entry, args, caps, self._captures)
        if not why:
            return False
        with self._lock:
            self._last_recompile = f"what the trace walked changed: {why}"
            self._cache.clear()
            self._found, self._read = False, self._first_read
        return True

    def _miss(self, key, args, kwargs, caps, stale=None):
        with self._lock:
            entry = self._cache.get(key)      # another thread may have built it meanwhile
            if entry is not None and entry is not stale:
                return entry
            if stale is not None:             # a tensor the trace used by identity changed: retrace
                self._last_recompile = stale.stale(args, caps) or "a captured tensor changed"
                self._compiled -= isinstance(self._cache.pop(key, None), CompiledEntry)
            if self._compiled >= self.max_recompiles:
                return self._at_limit()
            elif self._cache and stale is None:     # (a stale entry's reason is told above)
                self._last_recompile = key_change(self._cache, key, self._captures, self._arg_name)
            epoch = EPOCH[0]      # before the trace: a bump during it is checked at the next call
            entry = self._build(key, args, kwargs, caps)
            if entry is self._limit:
                return entry
            entry.epoch, entry.walked = epoch, fingerprint(args, caps, self._captures)
            if self._by_value or self._sized:    # scalars or sizes found to shape the trace: keyed now
                key = self._key(args, kwargs, key[4], caps)
            self._cache[key] = entry
            self._compiled += isinstance(entry, CompiledEntry)
            return entry

    def _at_limit(self):
        """New signatures past the limit run eagerly; they are not stored, so the cache (and
        a miss) stays as small as the limit however many values come."""
        if not self._warned:
            self._warned = True
            warnings.warn(f"{self.__name__}: recompile limit ({self.max_recompiles}) reached; new signatures "
                          f"run eagerly. Last change: {self._last_recompile}", RuntimeWarning, stacklevel=5)
        return self._limit

    def _build(self, key, args, kwargs, caps):
        why = self._side_effect
        if why:
            return EagerEntry(f"the function has a side effect a trace cannot repeat: {why}")
        tensors = _tensors((args, kwargs), [])
        if (backend := backend_entry(self, tensors)) is not None:     # PrivateUse1: the backend's own entry
            return backend
        try:
            graph, paths = self._trace(key, args, kwargs, caps, tensors + _tensors(caps, []))
        except TraceAbort as e:    # a training step (backward, an optimizer): traced as one, training/whole_step.py
            site = take_site()
            if is_step(self.fn, e.reason):
                return step_entry(self, args, caps)
            if e.reason in SIZE_REASONS and not self._sized:    # trace again, keyed by sizes
                self._sized = True
                return self._build(key, args, kwargs, caps)
            self._breaks.tell(f"trace aborted: {e.reason}", site)
            return EagerEntry(f"trace aborted: {e.reason}")
        except Exception as e:     # noqa: BLE001
            # the function raises for this signature (a dtype error found while tracing, say): run
            # it eagerly, so that the error is eager mode's first one (an earlier op may fail first
            # on these values: x % 0 before softmax(int)), never one the trace found out of order
            return EagerEntry(f"tracing raised {type(e).__name__}: {e}")
        # ints: tensor signatures (of the arguments, then of what the function reads from globals)
        direct = not key[3] and all(s.__class__ is int for s in key[2]) and all(s.__class__ is int for s in key[4])
        return entry_for(graph, paths, tensors + _tensors(caps, []), direct, self._stats, self.parallel)

    def _trace(self, key, args, kwargs, caps, tensors):
        """The graph, and where its runtime scalars come from.  A Python float/int argument is
        traced as a runtime scalar (ir.RuntimeFloat); if the function used its value in Python,
        passed it where a constant is needed, or a second trace with another value records
        anything else, that argument is keyed by value from then on (``_by_value``)."""
        paths = [("a", i) for i, k in enumerate(key[2]) if k is float or k is int]
        paths += [("k", n) for n, k in key[3] if k is float or k is int]
        if paths and any(t.is_cuda for t in tensors):
            for p in paths:       # the CUDA kernels take the trace's scalars as constants
                self._by_value[p] = "CUDA loops take scalars as constants"
            paths = []
        for _ in range(len(paths) + 1):
            self._traces += 1
            graph = trace(self.fn, args, kwargs, self._captures, caps, {p: i for i, p in enumerate(paths)},
                          self._sized)
            bad = {paths[i]: why for i, why in graph.tainted.items()}
            if not bad and paths:
                self._traces += 1
                again = self._perturbed_trace(args, kwargs, caps, paths)
                if again is None or not same_graph(graph, again):
                    bad = {p: "a trace with another value differed (it reached the trace as a constant)"
                           for p in paths}
            if not bad:
                return graph, tuple(paths)
            self._by_value.update(bad)
            paths = [p for p in paths if p not in bad]
        raise TraceAbort("the scalar arguments could not be told apart")    # not reached

    def _perturbed_trace(self, args, kwargs, caps, paths):
        args, kwargs = list(args), dict(kwargs)
        for where, k in paths:
            box = args if where == "a" else kwargs
            box[k] = perturbed(box[k])
        try:
            return trace(self.fn, tuple(args), kwargs, self._captures, caps, {p: i for i, p in enumerate(paths)},
                         self._sized)
        except Exception:      # noqa: BLE001  (the other value failed where the call's did not: by value)
            return None

    def _arg_name(self, i) -> str:
        return f"'{self._params[i]}'" if i < len(self._params) else f"#{i}"

    # -- introspection -------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        with self._lock:
            entries = list(self._cache.values())
        # a whole step's entry runs some calls eagerly (its own line says which): counted here too,
        # so that the header and that line agree
        eager = sum(e.calls if isinstance(e, EagerEntry) else getattr(e, "eager_calls", 0) for e in entries) \
            + self._limit.calls
        return CacheInfo(self._calls, self._hits, self._traces, self._stats.compiles, self._stats.disk_hits, eager,
                         len(entries))

    def _entry(self):
        last = self._last
        if isinstance(last, CompiledEntry):
            return last
        with self._lock:
            entries = list(self._cache.values())
        for e in reversed(entries):
            if isinstance(e, CompiledEntry):
                return e
        return None

    def graph(self) -> _Report:
        """The IR of the last compiled signature, before and after the passes."""
        e = self._entry()
        if e is None:
            return _Report("no compiled signature yet")
        return _Report(f"-- traced --\n{e.graph}\n-- after dce, cse, fusion --\n{e.optimized}")

    def code(self, flat: bool = True) -> str:
        """The generated source of every fused loop of the last compiled signature."""
        e = self._entry()
        if e is None:
            return ""
        return "\n".join(f.source(flat) for f in e.plan.fused)

    def show_code(self, flat: bool = True) -> None:
        print(self.code(flat) or "# no fused loops")

    def explain(self) -> _Report:
        """What the last call did, why the last recompile happened, and what ran eagerly."""
        return _Report("\n".join(explain_lines(self)))

    def __repr__(self):
        return f"<compiled {self.__name__}>"


def compile(fn=None, *, parallel: bool = True, max_recompiles: int = 8):
    """Compile ``fn``: trace it once per input signature (dtypes, ndim,
    contiguity; sizes only where the function reads them), fuse its elementwise ops into Numba loops, and
    run everything else through the eager dispatcher.

    What is in the cache key, and what is read at every call:

    * tensor arguments (positional, keyword, or nested in lists/tuples/dicts):
      their dtype, ndim, contiguity, device and requires_grad; their sizes
      too once a trace reads the sizes of one of them (``B, T = x.shape``,
      ``x.size(0)``, ``len(x)``, ``x.numel()``, a ``vmap`` reading its batch
      size): the function is then traced and compiled once per set of sizes,
      as torch.compile's static shapes (``explain()`` says so).
    * Python float and int arguments (top level): their type only; the value
      is a runtime parameter of the loop.  If the function uses the value in
      Python (``if k > 0``, ``math.exp(k)``, ``range(n)``), passes it where a
      constant is needed (an axis, a size, ``alpha=``), or a second trace
      with another value differs, that argument is keyed by value from then
      on (``explain()`` says which and why).  Other arguments: by value.
    * what the function reads from globals, closure variables and attribute
      chains (``W``, ``model.w``, ``self.w``, ``cfg.scale``, a class's
      ``Cfg.scale``, a ``__slots__`` entry; also in the
      functions, lambdas, methods and property getters it calls by such a
      name: ``helper(x)``, ``m.scale(x)``, ``self.layer(x)`` read as
      ``self.layer.w``; a ``functools.partial``'s function and bound
      arguments; a callable object's ``__call__``): a tensor (alone or in a
      list/tuple/dict) is an implicit input, read at every call, its
      signature in the key; a number, bool, string, None, dtype or function
      is guarded by value (identity for functions and other objects): a
      change retraces and ``explain()`` names it with its old and new value.
      What no key can guard (a NumPy array, an unhashable object, an object
      with its own ``__eq__``) runs the call eagerly.
    * reading data (``print``, ``repr``, ``.item()``, ``bool()``,
      ``float()``, ``.numpy()``, ``.tolist()``, ``np.asarray``, iteration)
      of a traced tensor (an argument, or one computed from it), or data or
      sizes of a tensor from outside (a captured tensor however it was
      reached, a default argument value, a partial's bound tensor) runs that
      signature eagerly; ``explain()`` says why.  Nothing read that way is
      ever baked into a trace, and no placeholder's value is ever shown.
      Tensors the function makes itself (``dj.tensor([...])``) are
      constants of the trace.
    * Python side effects: a function that calls ``print``, or assigns a
      global or a closure variable (itself or in a helper it calls by name,
      as followed above), runs eagerly: a trace would do that once; so does
      a signature whose trace drew from the default random generator
      (``dj.rand``; the generator is rewound, so the eager run draws what
      eager mode would; a ``generator=`` of your own or ``np.random`` is not
      seen: its values would be constants of the trace).  Other
      side effects (logging, appending to a list, writing a file, setting an
      attribute) happen only while tracing, not at every call; and when a
      trace aborts partway (a data read), those before the abort have
      happened once more (the eager run that follows does them again).  A
      tensor the function keeps outside itself while tracing (``cache.append
      (y)``) is a placeholder without data: using it raises
      ``EscapedTensorError``.
    * what the call walked: the ``dj.nn`` modules reached (through the
      arguments, the captures, lists, tuples, dicts and optimizers), their
      submodules (a module added to a ``Sequential``: ``add_module``,
      ``append``, a write into ``_modules``), the names of their parameters and
      buffers, their forward hooks and forward pre-hooks (whose globals are
      guarded as a helper's), and the gradient hooks on leaf tensors (a
      compiled training step accumulates ``.grad`` itself: one with a hook
      runs eagerly, so the hook runs).  A change retraces (counted against
      ``max_recompiles``), and ``explain()`` says what changed (``global
      'm': submodule 'extra' added``); checking
      costs one integer comparison per call, a walk only after some module or
      hook changed somewhere.
    * not seen: state reached by computed names (``getattr``, ``globals()``)
      or through subscripts and iteration of containers of objects that are
      not ``dj.nn`` modules (``self.layers[0](x)``, ``for layer in
      self.layers: layer(x)`` over a Python list), and
      functions more than three calls deep: a tensor found that way is used
      by identity (an in-place change shows, a rebinding ``layer.w = ...``
      does not, and a data read of it is baked into the trace); a number
      found that way is baked.  Also not seen: a rebinding of a function's
      ``__defaults__`` (a default tensor's data is read at every call).

    Autograd: the backward of a compiled call replays its traced ops with the
    values its forward used (a global rebound in between does not change the
    gradients), as eager mode's saved tensors do.  A tensor that requires grad
    and is reached by identity (a ``dj.nn`` model's parameters: ``lambda x, y:
    F.cross_entropy(model(x), y)``) is an extra input of the graph: the fused
    backward accumulates its ``.grad`` as eager mode would.  Such tensors, and
    the constants, are checked at every call: one replaced in its module
    (``model[0].weight = ...``) or whose requires_grad flipped retraces; one
    that requires grad but is held by nothing a guard watches runs eagerly.

    Outputs alias each other and the inputs exactly as eager mode's would.
    Calls from several threads are safe: a miss takes a lock, a hit does not.

    Args:
        fn: the function.
        parallel: use ``prange`` for large outputs.
        max_recompiles: signatures to compile before new ones run eagerly
            (those are not cached, so the cache stays bounded).

    >>> import dispatch_jit as dj
    >>> from dispatch_jit.compiler import compile
    >>> @compile
    ... def f(a, b):
    ...     return dj.maximum(a * b + 1.0, 0.0)
    >>> f(dj.tensor([1.0, -2.0]), dj.tensor([3.0, 4.0]))
    tensor([4., 0.])
    >>> f.cache_info().traces
    1
    """
    def make(f):
        return CompiledFunction(f, parallel=parallel, max_recompiles=max_recompiles)
    if fn is None:
        return lambda f: compile_module(f, make) or make(f)
    # a dj.nn.Module: an OptimizedModule (module_wrapper.py), as torch.compile(module) returns
    return compile_module(fn, make) or make(fn)


install_tracer_fallback()
