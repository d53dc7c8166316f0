import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from slowness import ENV, measure, slowness


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Measure the machine once, in the session's controller (pytest-xdist workers inherit the environment), and
    give each test as many times the configured timeout: before pytest-timeout reads it."""
    if not hasattr(config, "workerinput") and not os.environ.get(ENV):
        os.environ[ENV] = f"{measure():.2f}"
    timeout = config.getini("timeout")
    if config.getoption("timeout", None) is None and not os.environ.get("PYTEST_TIMEOUT") and timeout:
        config.option.timeout = float(timeout) * slowness()


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        f"machine slowness {slowness():.2f}: deadlines that wait for processes, and the test timeout, were scaled by it"
    )


#: Set by .ci/run: there every test must run (the Debian packages a test needs, tmux, zsh, chromium, are installed
#: first), so a skipped test fails the session instead of hiding what it would have caught.
NO_SKIPS = "TUIDAG_CI_NO_SKIPS"
_skipped: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and os.environ.get(NO_SKIPS):
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if _skipped and not hasattr(session.config, "workerinput"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nci: {len(_skipped)} test(s) skipped, and every test must run here: {', '.join(_skipped[:10])}")
