#!/usr/bin/env bash
# The test command: install dispatch_jit with its test and clients extras, then run the
# whole suite (CUDA kernels run under Numba's CUDA simulator where there is
# no GPU).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check -e ".[test,clients]" >/dev/null
# PyTorch's OpInfo database is tests/opinfo's oracle: the CPU build, pinned, into the test environment only
# (the library never needs torch); expecttest is what torch's testing internals import.
"$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0" expecttest >/dev/null
exec "$PY" -m pytest --durations=25 "$@"
