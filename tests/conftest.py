"""Shared test configuration: Hypothesis profiles.

"ci" (the default) keeps property tests bounded; "local" runs many more and longer examples. Pick
one with the environment variable HYPOTHESIS_PROFILE (e.g. ``HYPOTHESIS_PROFILE=local pytest``).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=30, stateful_step_count=30, deadline=None)
settings.register_profile("local", max_examples=300, stateful_step_count=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
