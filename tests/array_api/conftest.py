"""Fixtures of the client tests (test_clients_*.py): a test module names its case table in ``TABLE``
("sklearn" or "scipy", clients.TABLES) and gets one test per case, all answered by one child process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("array_api_clients", Path(__file__).resolve().parent / "clients.py")
clients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(clients)


def pytest_generate_tests(metafunc):
    if "client_case" in metafunc.fixturenames:
        metafunc.parametrize("client_case", list(clients.TABLES[metafunc.module.TABLE]))


@pytest.fixture(scope="module")
def client_records(request):
    """Case name -> its record, from one run of the module's table in a child process."""
    return clients.child(request.module.TABLE)


@pytest.fixture
def check_client_case():
    return clients.check
