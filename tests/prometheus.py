"""Debian's ``prometheus`` package for the tests that use it (promtool, the server): without it
they skip with the reason, and fail when LEDGERPORT_REQUIRE_PROMETHEUS is set (``.ci/run``
installs the package and sets it)."""

from __future__ import annotations

import os
import shutil

import pytest


def prometheus_command(name: str) -> str:
    """The path of ``name`` (``promtool`` or ``prometheus``), or the test skips (or fails)."""
    found = shutil.which(name)
    if found is None:
        reason = f"{name} is missing: apt-get install -y prometheus"
        if os.environ.get("LEDGERPORT_REQUIRE_PROMETHEUS"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found
