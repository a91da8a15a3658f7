"""Fixtures the kernel tests share."""

from __future__ import annotations

import pytest

from torchedge.kernels.optimized import tuning


@pytest.fixture
def forced():
    """Apply tuning overrides for one test, then restore the defaults."""
    names: list[str] = []

    def apply(overrides):
        for name, value in overrides.items():
            tuning.set_tuning(name, value)
            names.append(name)

    yield apply
    for name in names:
        tuning.set_tuning(name, None)
