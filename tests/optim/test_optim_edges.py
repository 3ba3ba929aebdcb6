"""What an optimizer must not trust (issue 25): a ``.grad`` of another shape, dtype or device (refused
at the assignment, as PyTorch's), a gradient that no longer fits after ``p.data =``, a read-only
parameter, and a complex parameter, which PyTorch's Adam updates as its real view.  Each runs in
eager mode, as a whole step under ``@dj.compile`` and under ``dj.execution_mode("compiled")``: the three must
give the same values, or raise the same error before anything is written."""

import numpy as np
import pytest

import dispatch_jit as dj
from dispatch_jit.errors import ArgumentTypeError, AutogradError, DTypeError, ShapeError
from dispatch_jit.kernels.optim import foreach

MODES = ("eager", "compile", "compiled")
X = np.array([[1 + 1j, 0.5j], [-0.25, 2 - 1j]], np.complex64)


def _run(mode, step, n):
    """``n`` calls of ``step`` in ``mode``: eagerly, as one ``@dj.compile`` function, or in compiled mode."""
    f = dj.compile(step) if mode == "compile" else step
    for _ in range(n):
        if mode == "compiled":
            with dj.execution_mode("compiled"):
                f()
        else:
            f()


def _training(w, opt, x):
    def step():
        opt.zero_grad()
        loss = dj.real(w * x).sum()
        loss.backward()
        opt.step()
        return loss
    return step


COMPLEX_CASES = [
    ("Adam", dict(lr=0.1)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, maximize=True, betas=(0.8, 0.9))),
    ("AdamW", dict(lr=0.1, weight_decay=0.3, amsgrad=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
]


@pytest.mark.parametrize("name, kw", COMPLEX_CASES)
def test_complex_parameters_are_updated_as_their_real_view_in_every_mode(name, kw):
    """Adam/AdamW of a complex parameter: its real and imaginary parts are two independent float
    parameters (PyTorch's view_as_real).  The imaginary part was never updated, amsgrad raised."""
    torch = pytest.importorskip("torch")
    start = np.array([[1 + 0j, 2 - 1j], [0.5j, -1 + 0.25j]], np.complex64)
    got = {}
    for mode in MODES:
        w = dj.nn.Parameter(dj.tensor(start))
        opt = getattr(dj.optim, name)([w], **kw)
        _run(mode, _training(w, opt, dj.tensor(X)), 4)
        got[mode] = w.detach().numpy().copy()
    tw = torch.tensor(start, requires_grad=True)
    topt = getattr(torch.optim, name)([tw], foreach=False, **kw)
    for _ in range(4):
        topt.zero_grad()
        torch.real(tw * torch.tensor(X)).sum().backward()
        topt.step()
    np.testing.assert_allclose(got["eager"], tw.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert np.any(got["eager"].imag != start.imag)
    np.testing.assert_array_equal(got["compile"], got["eager"])
    np.testing.assert_array_equal(got["compiled"], got["eager"])


def test_complex_adam_state_is_complex_and_non_contiguous_parameters_update_alike():
    """The state is complex, as PyTorch's; a non-contiguous complex parameter (the per-tensor form,
    over NumPy views of its parts) gets the same bits as a contiguous one (the loop)."""
    a = np.array([[1 + 2j, -1j, 3], [0.5, 2 - 2j, 1j]], np.complex64)
    g = np.array([[1 + 1j, 2, -1j], [0.5j, -1, 1 + 0.5j]], np.complex64)
    ws = [dj.nn.Parameter(dj.tensor(a)), dj.nn.Parameter(dj.tensor(np.ascontiguousarray(a.T)).T)]
    assert ws[0].is_contiguous() and not ws[1].is_contiguous()
    for w in ws:
        opt = dj.optim.Adam([w], lr=0.1, amsgrad=True)
        for _ in range(3):
            w.grad = dj.tensor(g)
            opt.step()
        assert opt.state[w]["exp_avg"].dtype == dj.complex64
    np.testing.assert_array_equal(ws[0].detach().numpy(), ws[1].detach().numpy())


def test_complex_cuda_parameters_are_refused_by_adam_before_anything_changes():
    """The real view is made of NumPy views: a complex CUDA parameter gets a clear error (its
    imaginary part went silently un-updated), before the step count advances."""
    if not dj.cuda.is_available():
        pytest.skip("no CUDA device (nor the simulator)")
    w = dj.nn.Parameter(dj.tensor(X[0], device="cuda"))
    w.grad = dj.tensor(X[1], device="cuda")
    opt = dj.optim.Adam([w], lr=0.1)
    with pytest.raises(DTypeError, match="parameter 0 of param group 0 is complex.* it is on cuda:0"):
        opt.step()
    assert not opt.state
    np.testing.assert_array_equal(w.detach().cpu().numpy(), X[0])


@pytest.mark.parametrize("name", ["SGD", "Adam"])
@pytest.mark.parametrize("source", ["read-only", "frombuffer"])
def test_a_read_only_parameter_is_refused_in_every_mode(name, source):
    """The optimizers' loops wrote through NumPy's read-only flag (into an immutable ``bytes``, too)."""
    for mode in MODES:
        if source == "read-only":
            a = np.ones((2, 2), np.float32)
            a.flags.writeable = False
        else:
            a = np.frombuffer(bytes(16), np.float32).reshape(2, 2)
        before = a.copy()
        w = dj.from_numpy(a).requires_grad_(True)
        opt = getattr(dj.optim, name)([w], lr=0.1)
        with pytest.raises(ShapeError, match=f"{name}.step\\(\\): parameter 0 of param group 0 .* is read-only"):
            _run(mode, _training(w, opt, dj.ones(2, 2)), 2)
        np.testing.assert_array_equal(a, before)


def test_a_read_only_memmap_parameter_is_refused(tmp_path):
    """On a read-only memmap the loop's write was a segfault."""
    path = tmp_path / "w.bin"
    np.arange(4, dtype=np.float32).tofile(path)
    m = np.memmap(path, np.float32, mode="r", shape=(4,))
    w = dj.from_numpy(m).requires_grad_(True)
    w.grad = dj.ones(4)
    for opt in (dj.optim.SGD([w], lr=0.1, momentum=0.9), dj.optim.Adam([w])):
        with pytest.raises(ShapeError, match="read-only"):
            opt.step()
    assert m.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_grad_assignment_checks_shape_dtype_and_type_as_pytorch():
    torch = pytest.importorskip("torch")
    w, tw = dj.nn.Parameter(dj.ones(8)), torch.ones(8, requires_grad=True)
    for bad, tbad in ((dj.ones(1), torch.ones(1)), (dj.ones(2, 4), torch.ones(2, 4))):
        with pytest.raises(RuntimeError) as theirs:
            tw.grad = tbad
        with pytest.raises(AutogradError) as ours:
            w.grad = bad
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(AutogradError, match="same size"):
        dj.nn.Parameter(dj.ones(2, 3)).grad = dj.ones(3, 2)
    with pytest.raises(AutogradError, match="dtype 'float64' to a tensor with dtype 'float32'"):
        w.grad = dj.ones(8, dtype=dj.float64)
    with pytest.raises(ArgumentTypeError, match="Tensor or None"):
        w.grad = np.ones(8, np.float32)
    assert w.grad is None
    w.grad = dj.ones(8)
    w.grad = None
    assert w.grad is None
    if dj.cuda.is_available():
        with pytest.raises(AutogradError, match="device"):
            w.grad = dj.ones(8, device="cuda")


@pytest.mark.parametrize("name", ["SGD", "Adam"])
@pytest.mark.parametrize("new_shape", [(1,), (2, 4), (16,)])
def test_a_gradient_that_no_longer_fits_its_parameter_is_refused_in_every_mode(name, new_shape):
    """``p.data =`` can change a parameter's shape after its ``.grad`` was set: the loop read past a
    smaller gradient (heap garbage, SIGSEGV), the per-tensor form broadcast it."""
    for mode in MODES:
        w = dj.nn.Parameter(dj.ones(8))
        opt = getattr(dj.optim, name)([w], lr=0.1)

        def step():
            opt.step()
            return w
        w.grad = dj.ones(8)
        w.data = dj.zeros(new_shape)
        with pytest.raises(AutogradError, match=f"gradient of parameter 0 of param group 0 has shape \\(8,\\)"):
            _run(mode, step, 1)
        assert not w.detach().numpy().any()


def test_the_loops_check_every_size_themselves():
    p = np.ones(8, np.float32)
    with pytest.raises(ShapeError, match="not its parameter's"):
        foreach.step("sgd", [p], [np.ones(1, np.float32)], [p[:0]], np.float32, (0.5, 0.0, 1.0, 0.0, 0, 0, 0))
    with pytest.raises(ShapeError, match="not its parameter's"):
        foreach.step("sgd", [p], [p.copy()], [np.ones(3, np.float32)], np.float32, (0.5, 0.9, 1.0, 0.0, 0, 0, 0))
    m, v = np.zeros(8, np.float32), np.zeros(7, np.float32)
    with pytest.raises(ShapeError, match="not its parameter's"):
        foreach.step("adam", [p], [p.copy()], [m], [v], [p[:0]], np.float32,
                     ([0.1], [1.0], 1.0, 0.1, 0.999, 0.001, 1e-8, 0.0, 0, 0, 0))
    assert (p == 1).all()


def test_a_compiled_step_refuses_a_parameter_made_read_only_after_its_trace():
    """The compiled plan writes the parameters and state itself; a flag set after the trace is
    checked per call, before the step's numbers (Adam's step count) advance."""
    a = np.ones((2, 2), np.float32)
    w = dj.from_numpy(a).requires_grad_(True)
    opt = dj.optim.Adam([w], lr=0.1)
    step = dj.compile(_training(w, opt, dj.ones(2, 2)))
    for _ in range(3):
        step()
    assert not step._last.last_reason, step.explain()       # the plan ran
    a.flags.writeable = False
    before, count = a.copy(), opt.state[w]["step"]
    with pytest.raises(ShapeError, match="a compiled step: .* is read-only"):
        step()
    np.testing.assert_array_equal(a, before)
    assert opt.state[w]["step"] == count
