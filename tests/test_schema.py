"""Tests for dispatch_jit.schema: parsing, canonical printing, binding."""

import ast
import copy
import doctest
import math
import pickle
import re
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dispatch_jit.schema as schema_mod
from dispatch_jit.errors import SchemaError, SchemaParseError
from dispatch_jit.schema import (NO_DEFAULT, AliasInfo, Argument, FunctionSchema, Return, SchemaType,
                                 bind, format_call, parse_schema)

ADD = "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
SUM = "aten::sum.dim_IntList(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"

# (schema, canonical spelling when it differs from the input)
REAL_SCHEMAS = [
    (ADD, None),
    ("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", None),
    ("aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", None),
    ("aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", None),
    (SUM, None),
    ("aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", None),
    ("aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", None),
    ("aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", None),
    ("aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", None),
    ("aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values)"
     " -> (Tensor(a!) values, Tensor(b!) indices)", None),
    ("aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)", None),
    ("aten::cat(Tensor[] tensors, int dim=0) -> Tensor", None),
    ("aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", None),
    ("aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", None),
    ("aten::clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", None),
    ("aten::var.correction(Tensor self, int[1]? dim=None, *, float? correction=None, bool keepdim=False)"
     " -> Tensor", None),
    ("_foo() -> ()", None),
    ("myops::myadd(Tensor self, Tensor other) -> Tensor", None),
    ("aten::gelu(Tensor self, *, str approximate='none') -> Tensor", None),
    ('aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate="tanh") -> Tensor',
     "aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate='tanh') -> Tensor"),
    ("aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
     "float eps=1e-5, bool cudnn_enable=True) -> Tensor",
     "aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
     "float eps=1e-05, bool cudnn_enable=True) -> Tensor"),
    ("myops::bounded(Tensor self, float lo=-inf, float hi=inf) -> Tensor", None),
    ("aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", None),
    ("aten::unbind.int(Tensor(a) self, int dim=0) -> Tensor(a)[]", None),
    ("aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, "
     "SymInt[2] dilation=1, SymInt groups=1) -> Tensor",
     "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
     "int[2] dilation=1, int groups=1) -> Tensor"),
    ("aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
     "MemoryFormat? memory_format=None) -> Tensor(a)", None),
    ("aten::empty.memory_format(int[] size, *, ScalarType? dtype=None, Layout? layout=None, "
     "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor", None),
    ("aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)", None),
    ("aten::item(Tensor self) -> Scalar", None),
    ("aten::is_nonzero(Tensor self) -> bool", None),
    ("aten::size.int(Tensor self, int dim) -> int", None),
    ("aten::_local_scalar_dense(Tensor self) -> float", None),
    ("aten::_foreach_add.Scalar(Tensor[] self, Scalar scalar) -> Tensor[]", None),
    ("aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()", None),
    ("aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", None),
    ("aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", None),
    ("aten::native_layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, "
     "Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", None),
    ("aten::flip(Tensor self, int[] dims=[0, 1]) -> Tensor", None),
    ("aten::pad(Tensor self, int[] pad, str mode='constant', float? value=None) -> Tensor", None),
]


@pytest.mark.parametrize("s,canonical", REAL_SCHEMAS, ids=[s.split("(")[0] for s, _ in REAL_SCHEMAS])
def test_real_schemas_round_trip(s, canonical):
    parsed = parse_schema(s)
    assert str(parsed) == (canonical or s)
    assert parse_schema(str(parsed)) == parsed
    assert hash(parse_schema(str(parsed))) == hash(parsed)


def test_whitespace_tolerant():
    messy = "  aten :: add . Tensor ( Tensor\tself ,Tensor other,*,Scalar alpha = 1 )->\nTensor  "
    assert parse_schema(messy) == parse_schema(ADD)


def test_data_model_of_add_out():
    s = parse_schema("aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)")
    assert (s.namespace, s.name, s.overload_name) == ("aten", "add", "out")
    assert s.qualname == "aten::add" and s.full_name == "aten::add.out"
    assert [a.name for a in s.positional] == ["self", "other"]
    assert [a.name for a in s.kwarg_only] == ["alpha", "out"]
    assert [a.name for a in s.tensor_arguments] == ["self", "other", "out"]
    out = s.arguments[-1]
    assert out.type == SchemaType("Tensor", alias=AliasInfo("a", True))
    assert out.is_out and out.is_mutable and not out.has_default and s.is_mutable
    assert s.arguments[2].default == 1 and type(s.arguments[2].default) is int
    assert s.returns == (Return(None, SchemaType("Tensor", alias=AliasInfo("a", True))),)
    assert not parse_schema(ADD).is_mutable


def test_default_overload_namespace_and_with_namespace():
    s = parse_schema("myadd(Tensor self, Tensor other) -> Tensor")
    assert s.namespace is None and s.overload_name == "" and s.full_name == s.qualname == "myadd"
    t = s.with_namespace("myops")
    assert t.full_name == "myops::myadd" and str(t) == "myops::myadd(Tensor self, Tensor other) -> Tensor"
    assert s.namespace is None  # frozen: with_namespace copies
    assert repr(t) == "FunctionSchema('myops::myadd(Tensor self, Tensor other) -> Tensor')"


def test_mutable_self_is_not_out():
    a = parse_schema("aten::add_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)").arguments[0]
    assert a.is_mutable and not a.is_out
    b = parse_schema("aten::view(Tensor(a) self, int[] size) -> Tensor(a)").arguments[0]
    assert b.type.alias == AliasInfo("a", False) and not b.is_mutable


@pytest.mark.parametrize("spelling,expected,canonical", [
    ("Tensor", SchemaType("Tensor"), None),
    ("Tensor?", SchemaType("Tensor", optional=True), None),
    ("Tensor[]", SchemaType("Tensor", is_list=True), None),
    ("Tensor?[]", SchemaType("Tensor", is_list=True, elem_optional=True), None),
    ("Tensor(a)", SchemaType("Tensor", alias=AliasInfo("a", False)), None),
    ("Tensor(a!)", SchemaType("Tensor", alias=AliasInfo("a", True)), None),
    ("Tensor(a!)[]", SchemaType("Tensor", is_list=True, alias=AliasInfo("a", True)), None),
    ("Tensor(b!)?", SchemaType("Tensor", optional=True, alias=AliasInfo("b", True)), None),
    ("int", SchemaType("int"), None),
    ("int[]", SchemaType("int", is_list=True), None),
    ("int[2]", SchemaType("int", is_list=True, list_size=2), None),
    ("int?", SchemaType("int", optional=True), None),
    ("int[]?", SchemaType("int", optional=True, is_list=True), None),
    ("int[1]?", SchemaType("int", optional=True, is_list=True, list_size=1), None),
    ("SymInt", SchemaType("int"), "int"),
    ("SymInt[]", SchemaType("int", is_list=True), "int[]"),
    ("float[]", SchemaType("float", is_list=True), None),
    ("bool[]", SchemaType("bool", is_list=True), None),
    ("str", SchemaType("str"), None),
    ("Scalar?", SchemaType("Scalar", optional=True), None),
    ("ScalarType?", SchemaType("ScalarType", optional=True), None),
    ("Device?", SchemaType("Device", optional=True), None),
    ("Layout", SchemaType("Layout"), None),
])
def test_type_spellings(spelling, expected, canonical):
    t = parse_schema(f"f({spelling} x) -> ()").arguments[0].type
    assert t == expected and str(t) == (canonical or spelling)
    assert t.is_tensor_like == (t.base == "Tensor")


@pytest.mark.parametrize("decl,value", [
    ("int x=1", 1), ("int x=-1", -1), ("float x=1e-5", 1e-05), ("float x=0.5", 0.5),
    ("float x=-inf", -math.inf), ("float x=inf", math.inf), ("float x=2", 2.0), ("bool x=True", True),
    ("bool x=False", False), ("int? x=None", None), ("str x='none'", "none"), ('str x="tanh"', "tanh"),
    ("str x='it\\'s'", "it's"), ("int[] x=[0,1]", (0, 1)), ("int[] x=[]", ()), ("int[2] x=1", 1),
    ("float[] x=[1, 2.5]", (1.0, 2.5)), ("bool[3] x=[True, False, True]", (True, False, True)),
    ("Scalar x=1", 1), ("Scalar x=1.0", 1.0), ("Tensor? x=None", None), ("Tensor?[] x=[None]", (None,)),
])
def test_defaults(decl, value):
    a = parse_schema(f"f({decl}) -> ()").arguments[0]
    assert a.default == value and type(a.default) is type(value)
    assert parse_schema(str(parse_schema(f"f({decl}) -> ()"))).arguments[0] == a


PARSE_ERRORS = [
    ("add(Tensor self) Tensor", 17, "expected '->'"),
    ("add(Tensor self)", 16, "expected '->'"),
    ("add(Foo x) -> Tensor", 4, "unknown type 'Foo'"),
    ("add(Tensor self -> Tensor", 16, "expected ',' or ')'"),
    ("add(Tensor self", 15, "found end of input"),
    ("add Tensor self) -> Tensor", 4, "expected '('"),
    ("f() -> (Tensor, Tensor", 22, "expected ',' or ')' in the return list"),
    ("f(*, *, int a) -> ()", 5, "a second '*'"),
    ("f(int a, *) -> ()", 9, "'*' must be followed by keyword-only arguments"),
    ("f(Tensor a, Tensor a) -> ()", 19, "duplicate argument name 'a'"),
    ("f() -> (Tensor a, Tensor a)", 25, "duplicate return name 'a'"),
    ("f(int x=1.5) -> ()", 8, "default 1.5 does not fit type int"),
    ("f(bool b=3) -> ()", 9, "default 3 does not fit type bool"),
    ("f(int x=None) -> ()", 8, "default None does not fit type int"),
    ("f(Tensor x=1) -> ()", 11, "does not fit type Tensor"),
    ("f(int[] x=[1, 2.0]) -> ()", 10, "does not fit type int[]"),
    ("f(str s=1) -> ()", 8, "does not fit type str"),
    ("f(float x=[1]) -> ()", 10, "does not fit type float"),
    ("f(int x=foo) -> ()", 8, "expected a default value"),
    ("f(int x=[[1]]) -> ()", 9, "expected a default value"),
    ("f(int a=1, int b) -> ()", 15, "required argument 'b' follows an argument with a default"),
    ("f() -> Tensor junk", 14, "unexpected text after the return type"),
    ("f() -> Tensor)", 13, "unexpected text"),
    ("f() ->", 6, "expected a type"),
    ("f(int(a) x) -> ()", 5, "alias annotations apply to Tensor only"),
    ("f(Tensor(a|b) x) -> ()", 10, "only (a) and (a!) are supported"),
    ("f(int[0] x) -> ()", 6, "list size must be a positive integer"),
    ("f(int[2 x) -> ()", 8, "expected ']'"),
    ("f(int x=$) -> ()", 8, "unexpected character '$'"),
    ("f(int x,) -> ()", 8, "expected a type"),
    ("::f() -> ()", 0, "expected an operator name"),
    ("aten::f.() -> ()", 8, "expected an overload name"),
    ("f(str s='abc) -> ()", 8, "unexpected character"),
]


@pytest.mark.parametrize("s,pos,what", PARSE_ERRORS, ids=[w for _, _, w in PARSE_ERRORS])
def test_parse_errors(s, pos, what):
    with pytest.raises(SchemaParseError) as info:
        parse_schema(s)
    e = info.value
    assert isinstance(e, ValueError) and e.pos == pos and e.schema == s
    msg = str(e)
    assert what in msg, msg
    lines = msg.splitlines()
    assert lines[-2] == "  " + s and lines[-1] == "  " + " " * pos + "^"


def test_required_kwarg_only_after_default_is_fine():
    s = parse_schema("f(Tensor self, int k=1, *, Tensor(a!) out, bool flag=False, int n) -> ()")
    assert [a.name for a in s.kwarg_only] == ["out", "flag", "n"]


def test_parse_rejects_non_str():
    with pytest.raises(TypeError):
        parse_schema(b"f() -> ()")


# -- bind ------------------------------------------------------------------------
class T:
    """A stand-in tensor; bind learns what a tensor is through is_tensor."""

    shape, dtype = (2, 3), "float32"


def is_t(v):
    return isinstance(v, T)


def test_bind_fills_defaults_in_schema_order():
    t = T()
    out = bind(parse_schema(ADD), (t,), {"other": 2}, is_tensor=is_t)
    assert list(out.items()) == [("self", t), ("other", 2), ("alpha", 1)]
    out = bind(parse_schema(SUM), (t,), {"dtype": "f32", "dim": [0, 1]}, is_tensor=is_t)
    assert out == {"self": t, "dim": (0, 1), "keepdim": False, "dtype": "f32"}


def test_bind_keyword_for_positional_and_kwarg_only():
    t = T()
    out = bind(parse_schema(ADD), (), {"alpha": 2.5, "other": t, "self": t}, is_tensor=is_t)
    assert list(out) == ["self", "other", "alpha"] and out["alpha"] == 2.5


def test_bind_int_lists_accept_bare_ints():
    s = parse_schema("f(int[] a, int[2] b, int[1]? c=None, int[2] d=1, int[] e=[3, 4], SymInt[3] g=[1]) -> ()")
    out = bind(s, (5, 6), {"c": 7})
    assert out == {"a": (5,), "b": (6, 6), "c": (7,), "d": (1, 1), "e": (3, 4), "g": (1,)}
    assert bind(s, ([1, 2], (3, 4, 5)), {})["b"] == (3, 4, 5)  # like PyTorch: no length check


def test_bind_list_defaults_are_not_shared():
    s = parse_schema("f(int[] e=[3, 4]) -> ()")
    a, b = bind(s, (), {})["e"], bind(s, (), {})["e"]
    assert a == b == (3, 4) and isinstance(a, tuple)  # immutable: nothing to share
    assert s.arguments[0].default == (3, 4)


def test_bind_tensor_values():
    s = parse_schema("f(Tensor a, Tensor? b, Tensor[] c, Tensor?[] d) -> ()")
    t = T()
    for number in (1, 2.5, True, 1j, np.float32(1), np.int64(3), np.bool_(True)):
        assert bind(s, (number, None, [t], [None, t]), {}, is_tensor=is_t)["a"] is number
    assert bind(s, (t, t, (t, t), ()), {}, is_tensor=is_t)["c"] == (t, t)
    with pytest.raises(SchemaError, match=r"argument 'c' must be Tensor\[\], but element 1 is int \(3\)"):
        bind(s, (t, t, [t, 3], []), {}, is_tensor=is_t)
    with pytest.raises(SchemaError, match=r"argument 'c' must be Tensor\[\], but element 0 is NoneType"):
        bind(s, (t, t, [None], []), {}, is_tensor=is_t)
    with pytest.raises(SchemaError, match=r"argument 'a' must be Tensor, not str \('x'\)"):
        bind(s, ("x", t, [t], []), {}, is_tensor=is_t)
    with pytest.raises(SchemaError, match=r"argument 'a' must be Tensor, not NoneType \(None\)"):
        bind(s, (None, t, [t], []), {}, is_tensor=is_t)
    with pytest.raises(SchemaError, match=r"argument 'c' must be Tensor\[\], not T"):
        bind(s, (t, t, t, []), {}, is_tensor=is_t)


@pytest.mark.parametrize("typ,good,bad", [
    ("int", [0, -3, np.int32(2), 10**30], [True, 1.0, "1", None, np.float64(1), [1]]),
    ("float", [1, 1.5, np.float32(2), np.int8(1)], [True, np.bool_(False), "1", 1j, None]),
    ("bool", [True, False, np.bool_(True)], [1, 0, "True", None]),
    ("str", ["", "x"], [1, None, b"x"]),
    ("Scalar", [1, 1.5, True, 2j, np.float16(1), np.uint8(1)], ["1", None, [1], T()]),
    ("ScalarType", ["float32", object(), 1], [None]),
    ("Device", ["cpu", object()], [None]),
    ("Layout", ["strided"], [None]),
    ("int?", [None, 1], [1.5]),
    ("Scalar?", [None, 1.5], ["x"]),
    ("ScalarType?", [None, "f"], []),
    ("int[]", [1, [1, 2], (np.int64(1),), []], [1.5, [1.5], [None], "12", None, [True]]),
    ("int[]?", [None, [1]], [[None]]),
    ("float[]", [[1, 2.5], ()], [1.5, [True], ["x"]]),
    ("bool[]", [[True, np.bool_(False)]], [[1], True]),
])
def test_bind_type_checks(typ, good, bad):
    s = parse_schema(f"f({typ} x) -> ()")
    t = s.arguments[0].type
    for v in good:
        out = bind(s, (v,), {})["x"]
        if v is None or not t.is_list:
            assert out is v
        else:
            assert out == (tuple(v) if isinstance(v, (list, tuple)) else (v,)) and type(out) is tuple
    for v in bad:
        with pytest.raises(SchemaError, match=re.escape(f"argument 'x' must be {typ}, ")):
            bind(s, (v,), {})


def test_bind_error_too_many_positional():
    with pytest.raises(SchemaError) as info:
        bind(parse_schema("f(Tensor a, Tensor b) -> ()"), (1, 2, 3), {})
    assert str(info.value) == "f(Tensor a, Tensor b) -> (): takes 2 positional arguments but 3 were given"
    with pytest.raises(SchemaError, match="takes 0 positional arguments but 1 was given"):
        bind(parse_schema("f() -> ()"), (1,), {})
    with pytest.raises(SchemaError, match="takes 1 positional argument but 4 were given"):
        bind(parse_schema("f(Tensor a, *, int b=1) -> ()"), (1, 2, 3, 4), {})


def test_bind_error_kwarg_only_given_positionally():
    with pytest.raises(SchemaError) as info:
        bind(parse_schema(ADD), (1, 2, 3), {})
    msg = str(info.value)
    assert msg.startswith(ADD + ": ") and "'alpha' is keyword-only; pass alpha=..." in msg
    assert "takes 2 positional arguments but 3 were given" in msg
    s = parse_schema("f(Tensor a, *, int b=1, int c=2) -> ()")
    with pytest.raises(SchemaError, match="arguments 'b', 'c' are keyword-only; pass b=..., c=..."):
        bind(s, (1, 2, 3), {})


def test_bind_error_missing():
    with pytest.raises(SchemaError) as info:
        bind(parse_schema(ADD), (1,), {})
    assert str(info.value) == f"{ADD}: missing required argument 'other'"
    with pytest.raises(SchemaError, match="missing required arguments 'self', 'other'"):
        bind(parse_schema(ADD), (), {"alpha": 2})
    with pytest.raises(SchemaError, match="missing required argument 'out'"):
        bind(parse_schema("f(Tensor a, *, Tensor(a!) out) -> Tensor(a!)"), (1,), {})


def test_bind_error_unknown_keyword():
    with pytest.raises(SchemaError) as info:
        bind(parse_schema(ADD), (1, 2), {"alpah": 2})
    assert str(info.value) == f"{ADD}: unknown keyword argument 'alpah'; did you mean 'alpha'?"
    with pytest.raises(SchemaError, match="unknown keyword argument 'zzz'; valid names: self, other, alpha"):
        bind(parse_schema(ADD), (1, 2), {"zzz": 2})


def test_bind_error_both_positional_and_keyword():
    with pytest.raises(SchemaError, match=r"argument 'other' given both positionally and by keyword"):
        bind(parse_schema(ADD), (1, 2), {"other": 3})


def test_bind_error_wrong_type_quotes_schema():
    with pytest.raises(SchemaError) as info:
        bind(parse_schema(ADD), (1, 2), {"alpha": "x"})
    assert str(info.value) == f"{ADD}: argument 'alpha' must be Scalar, not str ('x')"
    assert isinstance(info.value, TypeError)
    with pytest.raises(SchemaError, match=r"argument 'out' must be Tensor, not str"):  # alias not shown
        bind(parse_schema("f(*, Tensor(a!) out) -> ()"), (), {"out": "x"})


def test_bind_error_truncates_long_reprs():
    with pytest.raises(SchemaError) as info:
        bind(parse_schema("f(int x) -> ()"), ("y" * 1000,), {})
    assert len(str(info.value)) < 150


def test_format_call():
    s = parse_schema(ADD)
    text = format_call(s, (np.zeros((2, 3), np.float32), 1.0), {"alpha": "x", "l": [1, 2, 3, 4, 5], "n": None})
    assert text.startswith("aten::add.Tensor(ndarray(shape=(2, 3), dtype=float32")
    assert text.endswith(", 1.0, alpha='x', l=[1, 2, 3, 4, ...], n=None)")
    assert format_call(s, (T(), object()), {}) == "aten::add.Tensor(T(shape=(2, 3), dtype=float32), object)"


def test_no_default_sentinel():
    assert repr(NO_DEFAULT) == "NO_DEFAULT"
    assert copy.deepcopy(NO_DEFAULT) is NO_DEFAULT and pickle.loads(pickle.dumps(NO_DEFAULT)) is NO_DEFAULT
    s = parse_schema(ADD)
    assert pickle.loads(pickle.dumps(s)) == s and copy.deepcopy(s) == s


def test_imports_only_stdlib_and_errors():
    # schema sits low in the import graph: no numpy, no tensor/dispatcher modules
    tree = ast.parse(open(schema_mod.__file__).read())
    imported = {(node.level, node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {(0, a.name) for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    for level, name in imported:
        assert (level, name) == (1, "errors") or level == 0 and name.split(".")[0] in sys.stdlib_module_names


def test_doctests():
    result = doctest.testmod(schema_mod)
    assert result.attempted >= 4 and result.failed == 0


# -- property: random schemas from the grammar ------------------------------------
NAMES = st.from_regex(r"[a-z_][a-zA-Z0-9_]{0,5}", fullmatch=True)
BASES = ["Tensor", "int", "float", "bool", "str", "Scalar", "ScalarType", "Device", "Layout"]


@st.composite
def schema_types(draw):
    base = draw(st.sampled_from(BASES))
    alias = draw(st.none() | st.builds(AliasInfo, st.sampled_from("abc"), st.booleans())) \
        if base == "Tensor" else None
    is_list = draw(st.booleans())
    return SchemaType(base, draw(st.booleans()), is_list,
                      draw(st.none() | st.integers(1, 4)) if is_list else None, alias,
                      is_list and base == "Tensor" and draw(st.booleans()))


def _scalar_default(draw, base):
    """(value as the schema stores it, spelling), or None where no literal fits."""
    if base == "int":
        v = draw(st.integers(-10**6, 10**6))
        return v, str(v)
    if base == "float":
        v = draw(st.floats(allow_nan=False, width=64))
        return v, draw(st.sampled_from([repr(v), f"{v:.17g}"]))
    if base == "bool":
        v = draw(st.booleans())
        return v, str(v)
    if base == "str":
        v = draw(st.text(max_size=6))
        return v, repr(v)
    if base == "Scalar":
        v = draw(st.integers(-99, 99) | st.floats(allow_nan=False) | st.booleans())
        return v, repr(v)
    return None


def _default(draw, t):
    if t.optional and draw(st.booleans()):
        return None, "None"
    if not t.is_list:
        return _scalar_default(draw, t.base)
    if t.base == "int" and draw(st.booleans()):
        return _scalar_default(draw, "int")
    items = []
    for _ in range(draw(st.integers(0, 3))):
        item = (None, "None") if t.elem_optional and draw(st.booleans()) else _scalar_default(draw, t.base)
        if item is None:
            return None
        items.append(item)
    return tuple(v for v, _ in items), "[" + ",".join(text for _, text in items) + "]"


def _spell(draw, t):
    """Non-canonical spellings of the same type."""
    text = str(t)
    if t.base == "int" and draw(st.booleans()):
        text = "SymInt" + text[3:]
    return text


@st.composite
def schemas_and_text(draw):
    """A FunctionSchema and a messy spelling of it, built independently of __str__."""
    rnd = draw(st.randoms(use_true_random=False))
    names = draw(st.lists(NAMES, unique=True, max_size=6))
    n_pos = draw(st.integers(0, len(names)))
    args, parts, defaulted = [], [], False
    for i, name in enumerate(names):
        t = draw(schema_types())
        kw = i >= n_pos
        d = _default(draw, t) if (defaulted and not kw) or draw(st.booleans()) else None
        if d is None and defaulted and not kw:
            t = replace(t, optional=True)
            d = (None, "None")
        defaulted |= d is not None and not kw
        if kw and i == n_pos:
            parts.append("*")
        args.append(Argument(name, t, NO_DEFAULT if d is None else d[0], kw))
        parts.append(f"{_spell(draw, t)}{rnd.choice(['', ' '])} {name}" + ("" if d is None else f" = {d[1]}"))
    rets = tuple(Return(n, draw(schema_types()))
                 for n in draw(st.lists(st.none() | NAMES, max_size=3, unique_by=lambda n: n or object())))
    if len(rets) == 1 and rets[0].name is None and draw(st.booleans()):
        ret_text = str(rets[0].type)
    else:
        ret_text = "(" + " ,".join(str(r.type) + (f" {r.name}" if r.name else "") for r in rets) + ")"
    ns = draw(st.none() | NAMES)
    overload = draw(st.just("") | NAMES)
    head = (f"{ns} :: " if ns else "") + draw(NAMES)
    name = head.split()[-1] if ns else head
    sep = rnd.choice([",", " , ", ",\n\t"])
    text = f"{head}{'.' + overload if overload else ''}({sep.join(parts)}){rnd.choice(['->', ' -> '])}{ret_text}"
    return FunctionSchema(ns, name, overload, tuple(args), rets), text


@settings(max_examples=300, deadline=None)
@given(schemas_and_text())
def test_random_schemas_round_trip(pair):
    expected, text = pair
    parsed = parse_schema(text)
    assert parsed == expected
    assert parse_schema(str(parsed)) == parsed
    assert str(parse_schema(str(parsed))) == str(parsed)
