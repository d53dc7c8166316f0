"""A running run's sign of life: its owner touches the journal every half second.

Events are journalled as they happen, but a run whose tasks run quietly for minutes journals nothing meanwhile. If
tuidag is then killed (kill -9, OOM killer, power loss), the journal's last event says the run ended long before it
did. The journal's modification time, kept fresh by this heartbeat, tells the reader (`journal.replay`) when the
owner was last alive, so an interrupted run's duration is honest to within half a second.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

INTERVAL = 0.5


class Heartbeat:
    def __init__(self, path: Path, interval: float = INTERVAL):
        self.path = path
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tuidag-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                os.utime(self.path, follow_symlinks=False)
            except OSError:  # a full or read-only disk: the journal's own writes report that
                pass
