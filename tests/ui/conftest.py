"""Fixtures for the UI tests: real runs in a temporary state dir, and Pilot helpers that poll against deadlines."""

from __future__ import annotations

import asyncio
import inspect

import pytest


@pytest.fixture
def new_session(tmp_path):
    """Make a real `RunSession` (state dir and task workdir under tmp_path) from `make_dag`-style tasks."""
    from dags import make_dag
    from tuidag.launch import RunSession

    def make(tasks: dict, **kwargs) -> RunSession:
        kwargs.setdefault("kill_grace", 0.5)
        return RunSession.create(make_dag(tasks, workdir=tmp_path, **kwargs), tmp_path / "state")

    return make


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests in a fresh event loop (Pilot needs one), without an async plugin."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True
