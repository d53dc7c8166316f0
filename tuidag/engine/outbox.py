"""The run's events on their way out: produced under the scheduler's lock into an outbox, delivered outside it.

Part of `Scheduler` (scheduler.py; see there for the whole): `EventOutbox` is the base of its parts and holds the
delivery. Events enter the outbox in order, under the scheduler lock (`_set`, `_run_event`: task_records.py), and
leave it in `_flush`, which runs with no lock held, by whichever thread gets the delivery lock first: observers see a
single ordered stream and may call back into the scheduler. `_flush` also hands the tasks that became ready to the
pool, as they too must leave the lock first.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from .events import Event
from .workers import WorkerPool


def log_exception(message: str, *args: Any) -> None:
    """Log an engine bug with its traceback (logging is imported on the first one: it is not needed otherwise).
    Never raises: out of descriptors, even the import fails, and then a line on stderr is all there is."""
    try:
        import logging

        logging.getLogger("tuidag.engine.scheduler").exception(message, *args)  # the scheduler's, in every part
    except BaseException:
        try:
            os.write(2, f"tuidag: {message % args}\n".encode(errors="replace"))
        except BaseException:
            pass


Observer = Callable[[Event], None]
BatchObserver = Callable[[list[Event]], None]
#: An observer and whether it takes batches (`subscribe`'s overloads pair them).
Subscription = tuple[Observer, Literal[False]] | tuple[BatchObserver, Literal[True]]


class EventOutbox:
    """Subscribing and delivery. Every attribute the scheduler's parts share is set in `Scheduler.__init__`."""

    _lock: threading.Lock  # the scheduler lock: every task record is read and changed with it held
    _deliver_lock: threading.Lock  # held by the one thread delivering events
    _outbox: deque[Event]
    _seq: int  # the number of the last event put in the outbox
    _ready: deque[tuple[str, int]]  # (task, generation) made ready under the lock, submitted to the pool by `_flush`
    _observers: list[Subscription]
    _pool: WorkerPool

    if TYPE_CHECKING:  # task_attempts.py

        def _work(self, name: str, generation: int) -> None: ...

    @overload
    def subscribe(self, observer: Observer, *, batches: Literal[False] = False) -> Callable[[], None]: ...
    @overload
    def subscribe(self, observer: BatchObserver, *, batches: Literal[True]) -> Callable[[], None]: ...
    def subscribe(self, observer: Observer | BatchObserver, *, batches: bool = False) -> Callable[[], None]:
        """Call `observer(event)` for every event from now on, in order, from engine threads. Keep it quick.

        With batches=True the observer gets a list of consecutive events per delivery instead, for observers that
        do I/O per call (the journal writes each batch with one write())."""
        entry = cast(Subscription, (observer, batches))  # paired by the overloads
        with self._lock:
            self._observers = [*self._observers, entry]

        def unsubscribe() -> None:
            with self._lock:
                self._observers = [o for o in self._observers if o is not entry]

        return unsubscribe

    def _flush(self, keep: bool = False) -> tuple[str, int] | None:
        """Submit the tasks that became ready, then deliver queued events in order. Called after every change, never
        with the scheduler lock held. With keep=True (a pool thread whose attempt just ended) the first ready task
        is returned instead of submitted when no older work waits for a thread, for the caller to run itself.

        It takes no scheduler lock either: events enter the outbox in order under that lock, and only the thread
        holding the delivery lock takes them out (deque appends and pops are atomic), so a pool thread that just
        changed a task never waits here for another thread's bookkeeping."""
        kept = None
        ready = self._ready
        while ready:
            try:
                item = ready.popleft()
            except IndexError:  # another thread took the last one
                break
            if keep and kept is None and self._pool.idle():
                kept = item
            else:
                self._pool.submit(self._work, *item)
        outbox = self._outbox
        while outbox:
            if not self._deliver_lock.acquire(blocking=False):
                return kept  # the thread holding it delivers our events too (it re-checks after releasing)
            try:
                while outbox:
                    batch = []
                    try:
                        while True:
                            batch.append(outbox.popleft())
                    except IndexError:
                        pass
                    for subscription in self._observers:
                        if subscription[1]:
                            try:
                                subscription[0](batch)
                            except Exception:
                                log_exception("observer %r failed on %d events", subscription[0], len(batch))
                            continue
                        for event in batch:
                            try:
                                subscription[0](event)
                            except Exception:
                                log_exception("observer %r failed on %r", subscription[0], event)
            finally:
                self._deliver_lock.release()
            # Loop: events another thread queued while we held the delivery lock are ours to deliver.
        return kept
