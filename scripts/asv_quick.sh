#!/usr/bin/env bash
# The quick asv suite: one target per area (benchmarks/__init__.py's QUICK), each measured once
# (repeat=1), against the dispatch_jit installed in this Python (pip install -e ".[bench]"), with
# the results saved under .asv/results for the current commit.  A few minutes on two cores.
# Extra arguments go to asv run.  Then: asv publish (HTML into .asv/html), asv preview (serve it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
QUICK=$("$PY" -c 'from benchmarks import QUICK; print(QUICK)')
asv machine --yes >/dev/null
asv run -E "existing:$("$PY" -c 'import sys; print(sys.executable)')" --set-commit-hash "$(git rev-parse HEAD)" -b "$QUICK" -a repeat=1 \
    --show-stderr "$@"
echo "results saved under .asv/results for commit $(git rev-parse --short HEAD); asv publish && asv preview to browse"
