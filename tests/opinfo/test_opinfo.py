"""PyTorch's OpInfo database as an oracle (needs torch; skipped without it).

One case per (OpInfo entry, dtype) that dispatch_jit has a counterpart for (opinfo_harness.resolve); its
samples are judged inside (opinfo_harness.run_case).  A failing sample must be listed in
expected_failures.toml with its reason, and a listed one must still fail (strict), so the file shrinks as
dispatch_jit catches up.  The last tests keep docs/opinfo_coverage.md and the expected-failures file honest.
"""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import opinfo_harness as h  # noqa: E402

REPO = os.path.dirname(os.path.dirname(h.HERE))
OP_DB = h.load_op_db()
CASES = [(op, dt) for op in OP_DB if h.resolve(op) is not None for dt in h.dtypes_for(op)]
EXPECTED = h.load_expected_failures()


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{h.case_name(op)}-{dt}" for op, dt in CASES])
def test_opinfo(op, dtype):
    message = h.verdict_against_expected(EXPECTED, h.case_name(op), dtype, h.run_case(op, dtype))
    assert message is None, message


def test_expected_failures_are_reasoned_and_current():
    names = {(h.case_name(op), dt) for op, dt in CASES}
    cases = {c for c, _ in names}
    for (case, dtype), entry in EXPECTED.items():
        assert entry["reason"].strip() and "TO BE REVIEWED" not in entry["reason"], \
            f"expected_failures.toml: {case} ({dtype}) needs a reason in words"
        assert (case, dtype) in names or (dtype == "*" and case in cases), \
            f"expected_failures.toml: {case} ({dtype}) is not a case any more; remove the entry"


def test_coverage_page_names_are_current():
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import opinfo_coverage
    finally:
        sys.path.pop(0)
    with open(opinfo_coverage.DOC) as f:
        page = opinfo_coverage.parse_doc_names(f.read())
    now = {case: where for case, where, _ in opinfo_coverage.name_rows(OP_DB)}
    stale = sorted(c for c in now if page.get(c) != now[c])
    assert not stale, (f"docs/opinfo_coverage.md is out of date for {stale[:10]} ({len(stale)} entries): "
                       "run python scripts/opinfo_coverage.py")
