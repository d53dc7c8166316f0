"""Knowing when task logs changed without the UI being called per write (no textual here).

`LogWatcher` turns file-system events into one flag that a UI timer polls; it never calls into the UI.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)


class LogWatcher:
    """One flag raised when any watched file, or anything in a watched folder, changes, for a UI timer to poll with
    `changed()`.

    A daemon thread runs `watchfiles.watch`, which batches file-system events; the UI is never called back per write
    (no message, no `call_from_thread`), it asks at its own pace. If watching fails (no watchfiles, folder missing,
    inotify limits), `changed()` instead answers True every `poll_interval`; while watching it still does every
    `safety_interval`, in case an event is missed (network file systems). For `settle` seconds after `start` it
    answers True on every call: the watch is set up on the thread, and a write before that would otherwise wait for
    the safety interval.
    """

    def __init__(
        self, paths: Iterable[Path], *, poll_interval: float = 0.25, safety_interval: float = 2.0, settle: float = 0.5
    ) -> None:
        self.paths = frozenset(Path(path) for path in paths)
        self.poll_interval, self.safety_interval, self.settle = poll_interval, safety_interval, settle
        self._settled_at = 0.0
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watching = False
        self._last_answer = time.monotonic()

    @property
    def watching(self) -> bool:
        """True while file-system events arrive; False when polling."""
        return self._watching

    def start(self) -> None:
        existing = [str(path) for path in self.paths if path.exists()]
        if not existing or self._thread is not None:
            return
        self._watching = True
        self._settled_at = time.monotonic() + self.settle
        self._thread = threading.Thread(target=self._run, args=(existing,), name="tuidag-log-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def changed(self) -> bool:
        """True if something changed since the last True (or the poll interval passed): then refresh the logs."""
        now = time.monotonic()
        interval = self.safety_interval if self._watching and now >= self._settled_at else self.poll_interval
        if self._changed.is_set() or now < self._settled_at or now - self._last_answer >= interval:
            self._changed.clear()  # before the caller reads, so a write during its refresh is seen next time
            self._last_answer = now
            return True
        return False

    def _run(self, paths: list[str]) -> None:
        try:
            import watchfiles

            for _ in watchfiles.watch(
                *paths,
                watch_filter=None,
                debounce=50,
                step=20,
                rust_timeout=500,
                yield_on_timeout=False,
                stop_event=self._stop,
                raise_interrupt=False,
            ):
                self._changed.set()
        except Exception as error:  # any failure to watch degrades to polling, it must not end the UI
            log.info("watching %s failed (%s); polling instead", paths, error)
        finally:
            self._watching = False
