"""The backward engine: iterative, dependency-counted, in topological order.

No recursion anywhere (a chain of 100,000 ops must work): the graph is
walked once with an explicit stack to count, for every node, how many edges
point at it; then nodes run when all their gradients have arrived.
``backward`` and ``grad`` (``dj.autograd.backward``/``grad``) run it.
"""

from __future__ import annotations

import sys

import numpy as np

from ..creation import ones_like
from ..dtypes import BF16_STORAGE
from ..errors import AutogradError
from ..signature import CONTIGUOUS_BIT
from ..tensor import Tensor, _AUTOGRAD_SIG_BITS, _CUDA_SIG_BITS
from .grad_mode import _set as _set_grad_enabled, is_grad_enabled
from .graph import AccumulateGrad, edge_of

__all__ = ["backward", "grad", "run_backward"]


def _accumulate(buf: list, idx: int, g):
    if g is None:
        return
    cur = buf[idx]
    buf[idx] = g if cur is None else cur + g


def _run_pre_hooks(node, grads: list) -> None:
    for idx, hooks in node.pre_hooks.items():
        if grads[idx] is not None:
            for h in hooks:
                r = h(grads[idx])
                if r is not None:
                    _check_hook_result(h, grads[idx], r)
                    grads[idx] = r


def _check_hook_result(hook, g, r) -> None:
    """A hook may replace a gradient only by one of the same shape, dtype and device (PyTorch's
    rule): anything else would flow on as a silently wrong gradient, or fail far from the hook."""
    name = getattr(hook, "__qualname__", None) or repr(hook)
    what = None
    if not hasattr(r, "_sig"):
        what = f"a {type(r).__name__}, not a Tensor"
    elif tuple(r.shape) != tuple(g.shape):
        what = f"wrong shape: it has changed the size of value from {tuple(g.shape)} to {tuple(r.shape)}"
    elif r.dtype != g.dtype:
        what = f"wrong dtype: it has changed the type of value (was {g.dtype.name} got {r.dtype.name})"
    elif r.device != g.device:
        what = f"wrong device: it has changed the device of value (was {g.device} got {r.device})"
    if what is not None:
        raise AutogradError(f"hook {name!r} returned an invalid value ({what}); return a gradient of the same "
                            f"shape, dtype and device as its argument, or None to keep it")


def _accumulate_into_leaf(node, g, owned: bool = False) -> None:
    """``owned``: the engine's references are the only ones to the gradient ``g`` (the caller
    compares ``sys.getrefcount(g)`` with its own count); then it may become ``.grad`` itself."""
    var = node.variable()
    if var is None:
        return
    # read, add, store: under the leaf's lock, or a backward in another thread that stores
    # between this one's read and store is lost
    with node.lock:
        if var.__class__ is not Tensor:       # a subclass may route .grad elsewhere (CSR: its values')
            var.grad = _accumulated(var.grad, g, False)
            return
        d = var.__dict__          # Tensor.grad's storage, without the property's non-leaf check
        d["_grad"] = _accumulated(d.get("_grad"), g, owned)


def _accumulated(cur, g, owned: bool):
    if cur is None:
        # .grad is the user's to modify in place (zero_(), optimizer steps): never a read-only
        # broadcast view, nor an alias of a tensor the graph or the caller holds (under no_grad
        # this clone records nothing; with create_graph it is differentiable).  A gradient that
        # nothing else can reach is none of these, and becomes .grad as it is, as PyTorch's
        # AccumulateGrad steals it (no copy: 2-3 us per weight per step)
        if owned and _fresh(g) and not is_grad_enabled():
            return g
        return g.clone()
    # without create_graph this runs under no_grad: the sum records nothing, whether or not g
    # requires grad (a user's gradient= may), so g needs no detach()
    return cur + g


def _fresh(g) -> bool:
    """``g`` is a dense tensor with no history whose NumPy array owns its memory, is writeable and
    C-contiguous, and is referenced by ``g`` alone (no other tensor, view or array reaches it)."""
    if g.__class__ is not Tensor or g.grad_fn is not None:
        return False
    a = g._data
    return (a.__class__ is np.ndarray and a.base is None and a.flags.writeable and a.flags.c_contiguous
            and _refs(a) == _ARRAY_REFS)


_refs = sys.getrefcount
_ARRAY_REFS = 3   # in _fresh: g's attribute, the local ``a`` and getrefcount's argument


def _seed(t):
    """The implicit gradient of a one-element root: ones of its shape and dtype.  A dense CPU
    root's is made here (its signature is the root's, less autograd, contiguous); others'
    by ones_like."""
    if t.__class__ is Tensor and not t._sig & _CUDA_SIG_BITS and t._data.dtype != BF16_STORAGE:   # (1's words)
        a = np.empty(t._data.shape, t._data.dtype)
        a[...] = 1          # np.ones is a Python function: 10x this on a one-element array
        g = _new(Tensor)
        g._data = a
        g._sig = (t._sig & ~_AUTOGRAD_SIG_BITS) | CONTIGUOUS_BIT
        return g
    return ones_like(t)


_new = object.__new__


def _own_backward(root) -> bool:
    """A tensor subclass may run a plain ``t.backward()`` of its own (``t`` one element, no
    gradient=, retain_graph, create_graph or inputs=): its class's ``__backward__(t)``, True when
    it did (compiled mode's pending tensors replay a compiled backward), False to walk the graph
    here as always."""
    own = getattr(root.__class__, "__backward__", None)
    return own is not None and own(root)


def run_backward(roots, grad_roots, retain_graph: bool, create_graph: bool, inputs=None,
                 allow_unused: bool = False):
    """Backpropagate from ``roots``.  With ``inputs`` (autograd.grad), return
    their gradients instead of accumulating into ``.grad``."""
    if (len(roots) == 1 and roots[0].__class__ is not Tensor and inputs is None and grad_roots[0] is None
            and not retain_graph and not create_graph and _own_backward(roots[0])):
        return None
    root_edges = _root_edges(roots, grad_roots)
    deps = _count_dependencies(root_edges)
    capture = want = None
    if inputs is not None:
        capture, want = {}, {}
        for i, t in enumerate(inputs):
            e = edge_of(t)
            if e is None:
                raise AutogradError(f"input {i} of autograd.grad does not require grad")
            want.setdefault(e, []).append(i)

    # per node, its incoming gradients (one slot per output), summed as they arrive
    buffers: dict = {}
    for (node, idx), g in root_edges:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.metadata.get("num_outputs", 1)
        _accumulate(buf, idx, g)
    ready = [n for n in buffers if deps[n] == 0]

    # grad mode for the formulas: recorded with create_graph, else not (grad_mode's no_grad and
    # enable_grad, without their context objects)
    prev_mode = is_grad_enabled()
    _set_grad_enabled(create_graph)
    try:
        _run_nodes(ready, buffers, deps, capture, want, not retain_graph)
    finally:
        _set_grad_enabled(prev_mode)
    if capture is not None:
        result = []
        for i, t in enumerate(inputs):
            g = capture.get(i)
            if g is None and not allow_unused:
                raise AutogradError(f"One of the differentiated Tensors (input {i}) appears to not have been "
                                    f"used in the graph. Set allow_unused=True if this is the desired behavior.")
            result.append(g)
        return tuple(result)
    return None


def _root_edges(roots, grad_roots) -> list:
    """((node, output index), gradient) of each root; the implicit gradient of a one-element root."""
    if len(roots) == 1 and grad_roots[0] is None:
        # t.backward() of a scalar result, inlined (the common call)
        t = roots[0]
        fn = t.grad_fn if t.__class__ is Tensor else None
        if fn is not None and t._data.size == 1:
            return [((fn, t.__dict__.get("_output_nr", 0)), _seed(t))]
    root_edges = []
    for i, (t, g) in enumerate(zip(roots, grad_roots)):
        e = edge_of(t)
        if e is None:
            raise AutogradError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise AutogradError(f"grad can be implicitly created only for scalar outputs; the output has "
                                    f"shape {tuple(t.shape)}: pass gradient= of that shape")
            g = _seed(t)
        elif tuple(g.shape) != tuple(t.shape):
            raise AutogradError(f"gradient has shape {tuple(g.shape)} but the output has shape {tuple(t.shape)}")
        root_edges.append((e, g))
    return root_edges


def _count_dependencies(root_edges) -> dict:
    """Node -> how many edges point at it, counted iteratively; a node is seen once it has a
    count (roots: 0)."""
    deps: dict = {}
    stack = []
    for (node, _), _g in root_edges:
        if node not in deps:
            deps[node] = 0
            stack.append(node)
    get = deps.get
    while stack:
        for e in stack.pop().next_functions:
            if e is not None:
                nxt = e[0]
                n = get(nxt)
                if n is None:
                    deps[nxt] = 1
                    stack.append(nxt)
                else:
                    deps[nxt] = n + 1
    return deps


# sys.getrefcount of a gradient that only _run_nodes holds: from the ready list (the popped
# buffer, getrefcount's argument), or passed on directly (the node's result tuple, zip's reused
# result tuple, the loop variable, getrefcount's argument).  tests/autograd checks both counts: a miscount only ever
# copies (too low) or lets a held gradient become .grad (too high: the test fails).
_READY_REFS, _DIRECT_REFS = 2, 4


def _run_nodes(ready: list, buffers: dict, deps: dict, capture, want, release: bool) -> None:
    """Run each node once all its gradients are in.  This loop runs once per recorded op
    (100,000 times for a long chain): the common steps are inlined, the rare ones guarded."""
    pop, push, take, get = ready.pop, ready.append, buffers.pop, buffers.get
    while ready:
        node = pop()
        grads = take(node)
        if node.pre_hooks:
            _run_pre_hooks(node, grads)
        if capture is not None:
            for idx, g in enumerate(grads):
                for i in want.get((node, idx), ()):
                    capture[i] = g
        if node.__class__ is AccumulateGrad:
            if capture is None and grads[0] is not None:
                owned = _refs(grads[0]) == _READY_REFS
                _accumulate_into_leaf(node, grads[0], owned)
            continue
        if grads[0] is None and (len(grads) == 1 or all(g is None for g in grads)):
            out = (None,) * len(node.next_functions)
        else:
            out = node.apply(tuple(grads))
            if release:
                # Node.release, inlined
                node._released = True
                if node.saved:
                    node.saved = None
        for e, g in zip(node.next_functions, out):
            if e is None:
                continue
            nxt, idx = e
            if (nxt.__class__ is AccumulateGrad and deps[nxt] == 1 and capture is None and not nxt.pre_hooks
                    and nxt not in buffers):
                # a leaf this is the only gradient for (a weight used once): into .grad now, not
                # through a buffer and the ready list
                deps[nxt] = 0
                if g is not None:
                    owned = _refs(g) == _DIRECT_REFS
                    _accumulate_into_leaf(nxt, g, owned)
                continue
            buf = get(nxt)
            if buf is None:
                buf = buffers[nxt] = [None] * nxt.metadata.get("num_outputs", 1)
            if g is not None:
                cur = buf[idx]
                buf[idx] = g if cur is None else cur + g
            left = deps[nxt] - 1
            deps[nxt] = left
            if left == 0:
                push(nxt)


def _as_seq(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate gradients of ``tensors`` into the leaves' ``.grad``."""
    ts = _as_seq(tensors)
    gs = _as_seq(grad_tensors) or [None] * len(ts)
    run_backward(ts, gs, retain_graph=create_graph if retain_graph is None else retain_graph,
                 create_graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated into ``.grad``).

    >>> import dispatch_jit as dj
    >>> x = dj.tensor(3.0, requires_grad=True)
    >>> (g,) = dj.autograd.grad(x * x * x, x, create_graph=True); g
    tensor(27., grad_fn=<AddBackward>)
    >>> dj.autograd.grad(g, x)[0]
    tensor(18.)
    """
    outs = _as_seq(outputs)
    gs = _as_seq(grad_outputs) or [None] * len(outs)
    return run_backward(outs, gs, retain_graph=create_graph if retain_graph is None else retain_graph,
                        create_graph=create_graph, inputs=_as_seq(inputs), allow_unused=allow_unused)
