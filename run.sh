#!/usr/bin/env bash
# The main job: install dispatch_jit (and its dependencies) and run the
# built-in demo report: the seed's dispatch walk-through, the computed tables,
# and eager dispatch overhead measured against NumPy (and PyTorch if present).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check -e . >/dev/null
exec "$PY" -m dispatch_jit demo "$@"
