"""scikit-learn on dispatch_jit tensors (``array_api_dispatch=True``): each case of clients.py's
table gives NumPy's answer within its tolerance, as dispatch_jit tensors.  The cases run in one child
process (SciPy must see ``SCIPY_ARRAY_API=1`` before its first import: clients.py says why); the
fixtures are in conftest.py."""

import pytest

pytest.importorskip("sklearn", minversion="1.9")   # the version these cases were written against

TABLE = "sklearn"


def test_sklearn_case_matches_numpy(client_records, client_case, check_client_case):
    check_client_case(client_records[client_case])
