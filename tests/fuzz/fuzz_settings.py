"""Hypothesis settings shared by the fuzz tests (the profile itself comes from tests/conftest.py)."""

import os

from hypothesis import HealthCheck, Phase, settings


def examples(default: int) -> int:
    return int(os.environ.get("DISPATCH_JIT_FUZZ_EXAMPLES", default))


def fuzz_settings(default_examples: int):
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("DISPATCH_JIT_FUZZ_SHRINK") == "1":
        phases.append(Phase.shrink)
    return settings(max_examples=examples(default_examples), deadline=None, phases=phases,
                    suppress_health_check=list(HealthCheck))
