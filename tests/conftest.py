"""Test-suite settings: hypothesis runs without per-example deadlines (the CI machine is shared,
so timing is noisy; speed is measured in benchmarks/, not in tests)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("rxstream", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rxstream")
