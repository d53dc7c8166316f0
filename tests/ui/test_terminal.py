"""The hangup-safe driver: writes to a terminal that is gone are dropped, and SIGCONT resumes only a live terminal."""

from __future__ import annotations

import os
import signal

import pytest
from textual.app import App

from tuidag.ui.terminal import HangupSafeDriver, _DropAfterHangup


@pytest.mark.parametrize("terminal, resumed", [("pty", True), ("pipe", False)])
async def test_sigcont_resumes_only_a_terminal_that_is_still_there(monkeypatch, terminal, resumed):
    """A hung-up tty is no longer a tty to isatty(); a pipe stands in for it."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}  # the driver sets both
    a, b = os.openpty() if terminal == "pty" else os.pipe()
    try:
        driver = HangupSafeDriver(App())
        calls = []
        monkeypatch.setattr(driver, "resume_application_mode", lambda: calls.append(True))
        monkeypatch.setattr(driver, "fileno", b)
        driver._sigcont_application(signal.SIGCONT, None)
    finally:
        os.close(a)
        os.close(b)
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert calls == ([True] if resumed else [])


def test_writes_after_a_hangup_are_dropped():
    class Gone:
        def __init__(self):
            self.writes = 0

        def write(self, text):
            self.writes += 1
            raise OSError(5, "Input/output error")

        def flush(self):
            raise OSError(5, "Input/output error")

    stream = Gone()
    wrapped = _DropAfterHangup(stream)
    assert wrapped.write("frame") == 5
    assert wrapped.hung_up
    wrapped.write("next frame")
    wrapped.flush()
    assert stream.writes == 1
