"""scikit-learn on dispatch_jit tensors (``array_api_dispatch=True``): each case of clients.py's
table gives NumPy's answer within its tolerance, as dispatch_jit tensors.  The cases run in one child
process (SciPy must see ``SCIPY_ARRAY_API=1`` before its first import: clients.py says why)."""

import pytest

pytest.importorskip("sklearn", minversion="1.9")   # the version these cases were written against

from clients import TABLES, check, child  # noqa: E402  (pytest puts tests/array_api on sys.path)


@pytest.fixture(scope="module")
def records():
    return child("sklearn")


@pytest.mark.parametrize("name", list(TABLES["sklearn"]))
def test_sklearn_case_matches_numpy(records, name):
    check(records[name])
