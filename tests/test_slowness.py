"""The suite's own deadlines: measured once per session, handed to every pytest-xdist worker, applied by the waits."""

from __future__ import annotations

import os
import time

import pytest

import slowness
from dags import wait_until


def test_a_wait_lasts_as_many_times_longer_as_the_machine_is_slower(monkeypatch):
    """On a machine measured 10 times slower, a 0.1 s deadline of a quiet machine waits for a condition that takes
    0.5 s (fixed deadlines made a loaded machine fail tests that pass on a quiet one)."""
    monkeypatch.setattr(slowness, "slowness", lambda: 10.0)
    ready = time.monotonic() + 0.5
    wait_until(lambda: time.monotonic() > ready, timeout=0.1)


def test_every_worker_uses_the_measurement_of_the_sessions_start():
    """Measured once in the controller and inherited, so workers agree and none pays for measuring again."""
    assert float(os.environ[slowness.ENV]) == pytest.approx(slowness.slowness(), abs=0.01)
    assert slowness.slowness() >= 1
