"""A Textual driver that survives the terminal hanging up.

Textual writes the screen from a thread. When the terminal goes away (window closed, ssh dropped: SIGHUP), that
write fails with EIO, the writer thread dies, and the app's shutdown then blocks forever putting into the dead
thread's full queue: tuidag would never exit, so the run could not report its exit code (129). Output for a terminal
that is gone is dropped instead, and the SIGCONT that comes with the hangup does not bring the screen back; the app
stops every task and exits as usual.
"""

from __future__ import annotations

import os
from typing import IO, Any

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver


class _DropAfterHangup:
    """A text stream that swallows write errors once the terminal is gone (and only then writes nothing)."""

    def __init__(self, stream: IO[str]):
        self._stream = stream
        self.hung_up = False

    def write(self, text: str) -> int:
        if not self.hung_up:
            try:
                return self._stream.write(text)
            except OSError:
                self.hung_up = True
        return len(text)

    def flush(self) -> None:
        if not self.hung_up:
            try:
                self._stream.flush()
            except OSError:
                self.hung_up = True

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the real stream's
        return getattr(self._stream, name)


class HangupSafeDriver(LinuxDriver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Textual keeps its output stream here, typed as what it assigns (sys.__stderr__: a TextIOWrapper, or None
        # without one): the wrapper stands in for it, which Textual's annotation cannot say.
        self._file = _DropAfterHangup(self._file)  # type: ignore[assignment, arg-type]

    def _sigcont_application(self, *args: Any) -> None:
        """A hangup comes with SIGCONT, and Textual answers SIGCONT by resuming the screen (new input and output
        threads): on a terminal that is gone the new input thread then spins on end-of-file until tuidag exits. Only
        a terminal that is still there (back from Ctrl+Z) is resumed."""
        if os.isatty(self.fileno):
            super()._sigcont_application(*args)


def in_browser() -> bool:
    """Is this viewer a browser tab's (textual-serve's web driver, which `tuidag serve` starts it with)?"""
    return "web_driver" in os.environ.get("TEXTUAL_DRIVER", "")


def viewer_driver() -> type[Driver] | None:
    """The viewer's driver: HangupSafeDriver in a terminal; Textual's own choice (None) when $TEXTUAL_DRIVER names
    one, as textual-serve does for a viewer in a browser tab (`tuidag serve`: its web driver speaks to the page over
    stdin and stdout, which are pipes, not a terminal)."""
    return None if os.environ.get("TEXTUAL_DRIVER") else HangupSafeDriver
