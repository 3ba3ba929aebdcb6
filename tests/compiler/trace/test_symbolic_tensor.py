"""compiler/trace/symbolic_tensor.py: a symbolic tensor's methods are its class's own (issue 28:
none patched on from another module at import time, where a reader of the class would not see
them and the behaviour would depend on import order), and ``Tracer.FORWARD`` is what tells a
forward trace (where ``detach()`` is an alias) from a whole step's walk (where it aborts)."""

import ast
import pathlib

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.compiler.trace.breaks import take_site
from dispatch_jit.compiler.trace.shaped import ShapedTracer
from dispatch_jit.compiler.trace.symbolic import ExternalTensor, TraceAbort, Tracer
from dispatch_jit.compiler.trace.symbolic_tensor import SymbolicTensor
from dispatch_jit.compiler.training.functionalize import StepTracer
from dispatch_jit.tensor import TRACE_MARK

PACKAGE = pathlib.Path(dj.__file__).parent


@pytest.mark.parametrize("cls, names", [
    (SymbolicTensor, ["detach", "__getitem__", "_saved_twin", "backward", "to", "contiguous"]),
    (ExternalTensor, ["to", "__getitem__"]),
])
def test_the_traced_methods_are_defined_in_the_class_body(cls, names):
    for name in names:
        fn = cls.__dict__[name]
        assert fn.__qualname__ == f"{cls.__name__}.{name}", (name, fn.__qualname__, fn.__module__)
        assert fn.__module__ == cls.__module__


def test_no_module_assigns_attributes_onto_the_traced_tensor_classes():
    """``SymbolicTensor.x = ...`` or ``setattr(SymbolicTensor, ...)`` anywhere in the package."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                        t.value.id in ("SymbolicTensor", "ExternalTensor"):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and node.args and isinstance(node.args[0], ast.Name) \
                    and node.args[0].id in ("SymbolicTensor", "ExternalTensor"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, found


def _input(tracer):
    return tracer.add_input(dj.from_numpy(np.zeros(3, np.float32)))


def test_detach_in_a_forward_trace_is_an_alias_of_the_same_value():
    tr = Tracer()
    s = _input(tr)
    try:
        a = s.detach()
    finally:
        tr.finish()
    assert a is not s and a.__class__ is SymbolicTensor
    assert a.__dict__[TRACE_MARK] == (tr, s.__dict__[TRACE_MARK][1]) and a.__dict__["_detached"]
    assert not tr.graph.nodes and tr.detached


def test_detach_aborts_in_a_trace_that_is_not_a_forward_one():
    class Walk(Tracer):
        FORWARD = False

    tr = Walk()
    s = _input(tr)
    try:
        with pytest.raises(TraceAbort, match=r"detach\(\) is not traced yet"):
            s.detach()
    finally:
        tr.finish()
        take_site()          # the abort noted this line for a graph-break warning: forget it
    # the tracers: fallback.trace's and joint.py's are forward ones; a whole step's walk is not
    assert Tracer.FORWARD and ShapedTracer.FORWARD and not StepTracer.FORWARD
