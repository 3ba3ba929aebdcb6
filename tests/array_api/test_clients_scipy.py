"""SciPy functions on dispatch_jit tensors (``SCIPY_ARRAY_API=1``): each case of clients.py's
table gives NumPy's answer within its tolerance, as dispatch_jit tensors.  The cases run in one child
process (SciPy must see ``SCIPY_ARRAY_API=1`` before its first import: clients.py says why); the
fixtures are in conftest.py."""

import pytest

pytest.importorskip("scipy", minversion="1.17")   # the version these cases were written against

TABLE = "scipy"


def test_scipy_case_matches_numpy(client_records, client_case, check_client_case):
    check_client_case(client_records[client_case])
