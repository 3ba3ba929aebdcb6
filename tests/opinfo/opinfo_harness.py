"""PyTorch's OpInfo database (``op_db``) as an oracle: the name map, the conversions, the judge.

Shared by ``test_opinfo.py`` (one pytest case per (op, dtype)) and ``scripts/opinfo_coverage.py`` (the
coverage table and ``--write-expected-failures``).  Nothing here imports torch at module level: the
suite must collect without it.

A *sample* is one ``SampleInput`` (or one ``ErrorInput``, id ``e<i>``) of an OpInfo entry for one dtype.
Its verdict is one of ``pass``, ``fail`` (with a one-line reason) or ``skip`` (not judged: an argument
with no dispatch_jit counterpart, such as a ``torch.memory_format``).  A sample passes when dispatch_jit
returns the same structure with the same dtypes and shapes and values within
``torch.testing.assert_close``'s default tolerances for the dtype, or raises where PyTorch raises.
"""

import os
import sys
import tomllib
import types
import unittest

import numpy as np

import dispatch_jit as dj

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_FAILURES = os.path.join(HERE, "expected_failures.toml")

# The dtypes judged, when both the OpInfo entry and dispatch_jit support them.  Complex and the narrow
# integer/float types are left out to keep the case count (and the Numba compiles) down.
DTYPE_NAMES = ("float32", "float64", "int64", "bool")

# bfloat16 is judged for the cases whose ops take it (dispatch_jit.bf16.supported_ops) and agree with
# PyTorch; the other ops refuse it with a NoKernelError (docs/bfloat16.md).  Left out: nextafter (refuses
# 16-bit floats), log_softmax (an element an ulp apart), narrow (a tensor start, refused in every dtype)
BF16_CASES = frozenset([
    "abs", "acos", "acosh", "add", "all", "any", "argmax", "argmin", "asin", "asinh", "atan", "atan2", "atanh",
    "cat", "ceil", "clamp", "clone", "conj", "copysign", "cos", "cosh", "div.floor_rounding",
    "div.no_rounding_mode", "div.trunc_rounding", "dot", "eq", "erf", "exp", "expand", "expm1", "flatten",
    "floor", "floor_divide", "ge", "gt", "hypot", "isfinite", "isinf", "isnan", "le", "log", "log10", "log1p",
    "log2", "log_softmax.with_dtype", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "logsumexp", "lt", "matmul", "max.binary", "max.reduction_no_dim", "max.reduction_with_dim", "maximum",
    "mean", "min.binary", "min.reduction_no_dim", "min.reduction_with_dim", "minimum", "mul", "ne", "neg",
    "permute", "pow", "prod", "real", "reciprocal", "remainder", "reshape", "round", "round.decimals_0",
    "round.decimals_3", "round.decimals_neg_3", "rsqrt", "sigmoid", "sign", "signbit", "sin", "sinh",
    "softmax", "softmax.with_dtype", "sqrt", "square", "squeeze", "squeeze.multiple", "stack", "std",
    "std.unbiased", "sub", "sum", "tan", "tanh", "transpose", "trunc", "unsqueeze", "var", "var.unbiased",
    "view", "where",
])

# Samples judged per (op, dtype) case, in the OpInfo's order (error inputs come on top of these).  The
# first samples are the small, plain ones; the cap keeps the suite's compile count and runtime bounded.
MAX_SAMPLES = int(os.environ.get("DISPATCH_JIT_OPINFO_MAX_SAMPLES", "4"))
MAX_ERROR_SAMPLES = 4

# Ops whose values are random or uninitialized: only structure, dtype and shape are compared.
_RANDOM_WORDS = ("dropout", "rrelu", "bernoulli", "normal", "multinomial", "rand", "empty", "uniform",
                 "cauchy", "exponential", "geometric", "log_normal")


class Unconvertible(Exception):
    """A sample argument with no dispatch_jit counterpart: the sample is not judged."""


def load_op_db():
    """The OpInfo list, or None when torch (or its testing internals) is not importable."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    try:
        import expecttest  # noqa: F401
    except ImportError:
        # torch's testing internals import expecttest only for a TestCase base class that op_db never
        # uses; CI installs the real package, a bare environment gets this stand-in.
        shim = types.ModuleType("expecttest")
        shim.TestCase = unittest.TestCase
        sys.modules["expecttest"] = shim
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def case_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def is_random(op):
    return any(w in op.name for w in _RANDOM_WORDS)


def resolve(op):
    """(kind, target) for an OpInfo entry: ("function", callable) or ("method", name); None when
    dispatch_jit has no counterpart.  Found by hasattr, so newly added names are picked up."""
    import torch
    name = op.name
    if _is_torch_lambda(op.op) and _lambda_counterpart(op.op):
        # Entries such as einsum, where, randn or nn.functional.embedding wrap torch.X in a lambda that
        # reorders the sample's arguments; the same lambda with `torch` bound to dispatch_jit calls dj.X
        # the same way.
        return ("function", _rebind(op.op))
    for prefix, ns in (("nn.functional.", lambda: dj.nn.functional), ("linalg.", lambda: getattr(dj, "linalg", None)),
                       ("fft.", lambda: getattr(dj, "fft", None)), ("special.", lambda: getattr(dj, "special", None)),
                       ("signal.windows.", lambda: getattr(getattr(dj, "signal", None), "windows", None))):
        if name.startswith(prefix):
            mod = ns()
            fn = getattr(mod, name[len(prefix):], None) if mod is not None else None
            return ("function", fn) if callable(fn) else None
    if type(op.op).__name__ == "OpOverload":
        # an aten overload itself (slice's entry is aten.slice.Tensor): dispatch_jit's op of that name
        ns, packet, overload = str(op.op).split(".")
        fn = getattr(getattr(getattr(dj.ops, ns, None), packet, None), overload, None)
        return ("function", fn) if callable(fn) else None
    if "." in name:
        return None
    # The OpInfo's function variant is torch.<name> for most entries; entries such as "T" or "__radd__"
    # or "float" exist only as Tensor methods and are called as methods here too.
    torch_fn = getattr(torch, name, None)
    fn = getattr(dj, name, None)
    if torch_fn is not None and op.op is torch_fn:
        if callable(fn) and not isinstance(fn, type):
            return ("function", fn)
        return None
    if hasattr(torch.Tensor, name) and hasattr(dj.Tensor, name):
        if isinstance(getattr(torch.Tensor, name), (property, types.GetSetDescriptorType)):
            return ("attribute", name)
        return ("method", name)
    return None


def _is_torch_lambda(f):
    return isinstance(f, types.FunctionType) and f.__name__ == "<lambda>" and f.__globals__.get("torch") is not None


def _lambda_counterpart(f):
    """Whether every torch.<a>.<b> the lambda names exists under dispatch_jit (read from its bytecode's names)."""
    import dis
    chain, ok, seen = None, True, False
    for ins in dis.get_instructions(f):
        if ins.opname == "LOAD_GLOBAL" and ins.argval == "torch":
            chain, seen = dj, True
        elif chain is not None and ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            chain = getattr(chain, ins.argval, None)
            if chain is None:
                return False
        else:
            if chain is dj:
                ok = False
            chain = None
    return ok and seen


def _rebind(f):
    glb = dict(f.__globals__)
    glb["torch"] = dj
    return types.FunctionType(f.__code__, glb, f.__name__, f.__defaults__, f.__closure__)


def dtypes_for(op):
    import torch
    supported = op.supported_dtypes("cpu")
    bf16 = ["bfloat16"] if case_name(op) in BF16_CASES and torch.bfloat16 in supported else []
    return [n for n in DTYPE_NAMES if getattr(torch, n) in supported] + bf16


# ---- conversions ---------------------------------------------------------------------------------

def to_dj(x):
    import torch
    if isinstance(x, torch.Tensor):
        if x.requires_grad:
            x = x.detach()
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        try:
            return dj.from_dlpack(x)
        except Exception:  # an empty tensor, or more dimensions than DLPack import takes: copy via NumPy
            if x.ndim > 32:  # NumPy's limit is 64, dj's DLPack import takes fewer; torch allows more
                raise Unconvertible(f"a tensor of {x.ndim} dimensions") from None
            return dj.tensor(x.numpy())
    if isinstance(x, torch.dtype):
        d = getattr(dj, str(x).split(".")[-1], None)
        if d is None:
            raise Unconvertible(f"dtype {x}")
        return d
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (torch.memory_format, torch.layout, torch.Generator)):
        raise Unconvertible(type(x).__name__)
    if isinstance(x, tuple):
        return tuple(to_dj(v) for v in x)
    if isinstance(x, list):
        return [to_dj(v) for v in x]
    if isinstance(x, dict):
        return {k: to_dj(v) for k, v in x.items()}
    if isinstance(x, (bool, int, float, complex, str, type(None), slice, type(Ellipsis))):
        return x
    raise Unconvertible(type(x).__name__)


def _dj_to_torch(x):
    import torch
    if x.dtype is dj.bfloat16:        # no NumPy dtype: its words travel by DLPack (kDLBfloat)
        return torch.from_dlpack(x.contiguous()).clone()
    return torch.from_numpy(np.array(x.numpy(), copy=True))


def compare(actual, expected, exact_values=True, path="result", judges=None):
    """Raise AssertionError naming the first difference between dj's ``actual`` and torch's ``expected``.

    ``judges`` maps a result path (``"result"``, ``"result[1]"``) to a callable that judges that tensor's
    values in place of the exact comparison (an index result among ties, eigenvectors); dtype and shape
    are still compared first."""
    import torch
    if isinstance(expected, torch.Tensor) and expected.layout != torch.strided:
        # A sparse result: the same layout, then the same dense tensor (dj's numpy() refuses a sparse
        # tensor, and two equal sparse tensors may order or coalesce their entries differently).
        want = str(expected.layout).split(".")[-1]
        got = getattr(actual, "layout", None)
        if str(got) != want:
            raise AssertionError(f"{path}: layout dj {got} vs torch {want}")
        if want == "sparse_coo" and actual.sparse_dim() != expected.sparse_dim():
            raise AssertionError(f"{path}: sparse_dim dj {actual.sparse_dim()} vs torch {expected.sparse_dim()}")
        compare(actual.to_dense(), expected.to_dense(), exact_values, path + ".to_dense()", judges)
        return
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, dj.Tensor):
            if isinstance(actual, (bool, int, float)) and expected.ndim == 0:
                torch.testing.assert_close(torch.tensor(actual, dtype=expected.dtype), expected, equal_nan=True,
                                           check_device=False)
                return
            raise AssertionError(f"{path}: dj returned {type(actual).__name__}, torch a Tensor")
        want = str(expected.dtype).split(".")[-1]
        got = str(actual.dtype).split(".")[-1]
        if got != want:
            raise AssertionError(f"{path}: dtype dj {got} vs torch {want}")
        if tuple(actual.shape) != tuple(expected.shape):
            raise AssertionError(f"{path}: shape dj {tuple(actual.shape)} vs torch {tuple(expected.shape)}")
        if exact_values and judges and path in judges:
            judges[path](_dj_to_torch(actual), expected.detach().resolve_conj().resolve_neg(), path)
        elif exact_values:
            try:
                torch.testing.assert_close(_dj_to_torch(actual), expected.detach().resolve_conj().resolve_neg(),
                                           equal_nan=True, check_device=False, check_stride=False)
            except AssertionError as e:
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                raise AssertionError(f"{path}: values: " + "; ".join(lines[:4])) from None
        return
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: dj returned {type(actual).__name__} "
                                 f"{len(actual) if isinstance(actual, (tuple, list)) else ''}, torch a "
                                 f"{type(expected).__name__} of {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, exact_values, f"{path}[{i}]", judges)
        return
    if isinstance(actual, dj.Tensor) and actual.ndim == 0:
        actual = actual.item()
    if isinstance(expected, (bool, int, float, complex)) and exact_values:
        if not isinstance(actual, (bool, int, float, complex, np.generic)):
            raise AssertionError(f"{path}: dj returned {type(actual).__name__}, torch {type(expected).__name__}")
        torch.testing.assert_close(actual, expected, equal_nan=True)
        return
    if exact_values and actual != expected:
        raise AssertionError(f"{path}: dj {actual!r} vs torch {expected!r}")


# ---- results unique only up to a choice ------------------------------------------------------------

def _dim_arg(pos, default):
    return lambda args, kwargs: kwargs.get("dim", args[pos] if len(args) > pos else default)


# Ops that return the index of an element (argmax, sort, topk, ...): among equal elements the index is
# unspecified (the array API standard says so for argmax/argmin/argsort unless stable; PyTorch documents
# it for sort, topk, max(dim), mode, median, kthvalue), so an index result is judged by what it
# selects: the input's values gathered at dj's indices must equal those at torch's, and the indices of a
# permutation (sort, argsort) or a selection (topk) must be distinct along the dim.  The values result
# is still compared exactly.  {case: (index result's path, dim from (args, kwargs), distinct)}
_INDEX_RESULTS = {
    "sort": ("result[1]", _dim_arg(0, -1), True),
    "argsort": ("result", _dim_arg(0, -1), True),
    "topk": ("result[1]", _dim_arg(1, -1), True),
    "argmax": ("result", _dim_arg(0, None), False),
    "argmin": ("result", _dim_arg(0, None), False),
    "max.reduction_with_dim": ("result[1]", _dim_arg(0, None), False),
    "min.reduction_with_dim": ("result[1]", _dim_arg(0, None), False),
    "mode": ("result[1]", _dim_arg(0, -1), False),
    "median": ("result[1]", _dim_arg(0, None), False),
    "nanmedian": ("result[1]", _dim_arg(0, None), False),
    "kthvalue": ("result[1]", _dim_arg(1, -1), False),
    "cummax": ("result[1]", _dim_arg(0, None), False),
    "cummin": ("result[1]", _dim_arg(0, None), False),
}


def _index_judge(inp, dim, distinct):
    import torch

    def judge(got, want, path):
        if torch.equal(got, want):
            return
        x = inp.detach()
        if x.ndim == 0:
            x = x.reshape(1)
        if dim is None:  # an index into the flattened input
            x, d, g, w = x.reshape(-1), 0, got.reshape(-1), want.reshape(-1)
        else:
            d = dim % x.ndim
            g, w = (got, want) if got.ndim == x.ndim else (got.unsqueeze(d), want.unsqueeze(d))
            if g.ndim != x.ndim:  # the 0-d input's index
                g, w = g.reshape(-1), w.reshape(-1)
        if g.numel() and (g.min() < 0 or g.max() >= x.shape[d]):
            raise AssertionError(f"{path}: dj's indices leave the range [0, {x.shape[d]})")
        picked, wanted = torch.take_along_dim(x, g, d), torch.take_along_dim(x, w, d)
        if not torch.equal(picked.isnan(), wanted.isnan()) or not torch.equal(
                picked.nan_to_num(0), wanted.nan_to_num(0)):
            raise AssertionError(f"{path}: values: dj's indices select other values than torch's "
                                 "(not just another choice among equal elements)")
        if distinct and g.shape[d] > 1 and (g.sort(dim=d).values.diff(dim=d) == 0).any():
            raise AssertionError(f"{path}: dj's indices repeat an element along dim {d}")
    return judge


def _eigenvector_judge(got, want, path):
    """Eigenvectors (the columns) are unique only up to a scalar of modulus one (a sign when real): each
    column of both is divided by the phase of torch's largest-magnitude component, then compared with
    assert_close's default tolerances (as PyTorch's own eig/eigh tests normalize before comparing)."""
    import torch
    if want.numel():
        k = want.abs().argmax(dim=-2, keepdim=True)
        ref = torch.take_along_dim(want, k, -2)
        phase = ref / ref.abs()
        got_ref = torch.take_along_dim(got, k, -2)
        got_phase = got_ref / got_ref.abs()
        got, want = got / got_phase, want / phase
    try:
        torch.testing.assert_close(got, want, equal_nan=True, check_device=False, check_stride=False)
    except AssertionError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        raise AssertionError(f"{path}: values (up to each eigenvector's phase): " + "; ".join(lines[:4])) from None


_EIGENVECTORS = {"linalg.eig": "result[1]", "linalg.eigh": "result[1]"}


def _as_accurate_judge(op, sample):
    """A float result whose rounding depends on the order of a long sum (addbmm: PyTorch adds one addmm per
    batch, dj sums the batch in one GEMM; which of the two lands nearer, and whether within assert_close's
    tolerance of the other, depends on the CPU's BLAS kernel): passes where each element is within the
    default tolerance of torch's, or at least as near as torch's to the float64 result of the same call."""
    import torch

    def judge(got, want, path):
        try:
            torch.testing.assert_close(got, want, equal_nan=True, check_device=False, check_stride=False)
            return
        except AssertionError:
            pass
        def f64(v):
            return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        exact = op(f64(sample.input), *[f64(a) for a in sample.args],
                   **{k: f64(v) for k, v in sample.kwargs.items()})
        ours, theirs = (got.double() - exact).abs(), (want.double() - exact).abs()
        rtol, atol = _default_tolerances().get(got.dtype, (0.0, 0.0))
        close = torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        if not bool((close | (ours <= theirs)).all()):
            worst = float((ours - theirs)[~close].max())
            raise AssertionError(f"{path}: values: dj is further than torch from the float64 result "
                                 f"(by up to {worst:.3g}) and outside assert_close's tolerance of torch's")
    return judge


_ORDER_DEPENDENT_SUMS = {"addbmm"}


def _default_tolerances():
    import torch    # assert_close's defaults per dtype: an element within them of torch's needs no other test
    return {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
            torch.float64: (1e-7, 1e-7)}


def _judges(case, sample, op=None):
    """The result paths of this case's sample that are judged by what they mean, not bit for bit."""
    if case in _EIGENVECTORS:
        return {_EIGENVECTORS[case]: _eigenvector_judge}
    if case in _ORDER_DEPENDENT_SUMS and op is not None:
        return {"result": _as_accurate_judge(op, sample)}
    entry = _INDEX_RESULTS.get(case)
    if entry is None or sample.kwargs.get("stable"):  # a stable sort's order is defined
        return None
    path, dim_of, distinct = entry
    return {path: _index_judge(sample.input, dim_of(tuple(sample.args), dict(sample.kwargs)), distinct)}


def _short(e):
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg[:160]}"


def _call(kind, target, inp, args, kwargs):
    if kind == "attribute":
        return getattr(inp, target)
    if kind == "method":
        return getattr(inp, target)(*args, **kwargs)
    return target(inp, *args, **kwargs)


def run_case(op, dtype_name, max_samples=MAX_SAMPLES):
    """Judge the samples of one (op, dtype) case.  Returns [(sample_id, verdict, reason)]."""
    import torch
    res = resolve(op)
    if res is None:
        raise LookupError(f"{case_name(op)} has no dispatch_jit counterpart")
    kind, target = res
    dtype = getattr(torch, dtype_name)
    exact = not is_random(op)
    out = []
    torch.manual_seed(0)
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
    except Exception as e:  # an OpInfo that cannot build samples here is nothing to judge
        return [("s*", "skip", f"sample_inputs raised {_short(e)}")]
    for i, s in enumerate(samples):
        sid = f"s{i}"
        try:
            d_in, d_args, d_kwargs = to_dj(s.input), to_dj(tuple(s.args)), to_dj(dict(s.kwargs))
        except Unconvertible as e:
            out.append((sid, "skip", f"argument with no dj counterpart: {e}"))
            continue
        try:
            expected = op(s.input, *s.args, **s.kwargs)
        except Exception as e:
            expected, torch_exc = None, e
        else:
            torch_exc = None
        try:
            actual = _call(kind, target, d_in, d_args, d_kwargs)
        except Exception as e:
            if torch_exc is not None:
                out.append((sid, "pass", ""))
            else:
                out.append((sid, "fail", f"dj raised {_short(e)}"))
            continue
        if torch_exc is not None:
            out.append((sid, "fail", f"dj returned where torch raised {_short(torch_exc)}"))
            continue
        try:
            # an attention sample with dropout draws random masks: its values cannot agree
            compare(actual, expected, exact and not s.kwargs.get("dropout_p"), judges=_judges(case_name(op), s, op))
        except AssertionError as e:
            out.append((sid, "fail", str(e)[:300]))
        except Exception as e:
            out.append((sid, "fail", f"comparing: {_short(e)}"))
        else:
            out.append((sid, "pass", ""))
    try:
        errors = list(op.error_inputs("cpu"))[:MAX_ERROR_SAMPLES] if op.error_inputs_func is not None else []
    except Exception:
        errors = []
    for i, ei in enumerate(errors):
        s = ei.sample_input
        if not (isinstance(s.input, torch.Tensor) and s.input.dtype == dtype):
            continue
        sid = f"e{i}"
        try:
            d_in, d_args, d_kwargs = to_dj(s.input), to_dj(tuple(s.args)), to_dj(dict(s.kwargs))
        except Unconvertible as e:
            out.append((sid, "skip", f"argument with no dj counterpart: {e}"))
            continue
        try:
            expected = op(s.input, *s.args, **s.kwargs)
        except Exception:
            torch_raises = True
        else:
            # Some generic error inputs do not raise in torch itself (make_error_inputs_elementwise_binary's
            # Python-scalar `other` for clamp_min/clamp_max, which have a Scalar overload): torch is the
            # oracle, so such a sample is judged as an ordinary one, against torch's result.
            torch_raises = False
        try:
            actual = _call(kind, target, d_in, d_args, d_kwargs)
        except Exception as e:
            out.append((sid, "pass", "") if torch_raises else (sid, "fail", f"dj raised {_short(e)}"))
            continue
        if torch_raises:
            out.append((sid, "fail", f"dj returned where torch raises {ei.error_type.__name__}"))
            continue
        try:
            compare(actual, expected, exact)
        except AssertionError as e:
            out.append((sid, "fail", str(e)[:300]))
        else:
            out.append((sid, "pass", ""))
    return out


# ---- expected failures ---------------------------------------------------------------------------

def load_expected_failures(path=EXPECTED_FAILURES):
    """{(case, dtype): {"samples": set or None, "reason": str}}.  dtype "*" covers every dtype."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    table = {}
    for entry in data.get("failure", []):
        key = (entry["op"], entry.get("dtype", "*"))
        samples = entry.get("samples")
        table[key] = {"samples": set(samples) if samples is not None else None, "reason": entry["reason"]}
    return table


def expected_for(table, case, dtype_name):
    return table.get((case, dtype_name)) or table.get((case, "*"))


def verdict_against_expected(table, case, dtype_name, verdicts):
    """None when the case's failures are exactly what expected_failures.toml lists for it (nothing when it
    is not listed), else the message to fail with: an unlisted failure, or a listed one that now passes."""
    judged = {sid for sid, v, _ in verdicts if v != "skip"}
    fails = {sid: reason for sid, v, reason in verdicts if v == "fail"}
    entry = expected_for(table, case, dtype_name)
    listing = "\n".join(f"  {sid}: {r}" for sid, r in sorted(fails.items()))
    if entry is None:
        if not fails:
            return None
        return (f"{case} ({dtype_name}) disagrees with PyTorch on {len(fails)} of {len(judged)} samples:\n"
                f"{listing}\nfix it, or list it in tests/opinfo/expected_failures.toml with its reason")
    want = entry["samples"] if entry["samples"] is not None else judged
    if set(fails) == want and fails:
        return None
    return (f"{case} ({dtype_name}) is listed in expected_failures.toml ({entry['reason']}) as failing on "
            f"{sorted(want)}, but now fails on {sorted(fails)}:\n{listing}\nupdate or remove the entry")
