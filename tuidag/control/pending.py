"""Requests a viewer sent on its connection to the engine and waits for, by id, each with its deadline.

The reader thread hands over what the engine says of them (`started`, the reply) and notes when it has delivered
everything that had arrived (`drained`). When a request's deadline passes unanswered, that tells the waiting caller
what it can know: the engine drops a request it had not started by its deadline, and says `started` before it
applies one, so no `started` by the deadline means "not done, and won't be"; only a started request (or a reader
that could not catch up) leaves "may or may not have taken effect".
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

CATCH_UP = 2.0  # seconds after a deadline to wait for the reader to deliver what arrived before it


class Waiter:
    __slots__ = ("answered", "reply", "started")

    def __init__(self) -> None:
        self.answered = threading.Event()
        self.reply: dict[str, Any] | str | None = None  # the engine's reply, or why there will be none
        self.started = False  # the engine said it started the control


class PendingRequests:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, Waiter] = {}
        self.drained = 0.0  # the last time (time.time()) the reader found nothing more to deliver

    def new(self) -> tuple[int, Waiter]:
        waiter = Waiter()
        with self._lock:
            rid = next(self._ids)
            self._waiting[rid] = waiter
        return rid, waiter

    def forget(self, rid: int) -> None:
        with self._lock:
            self._waiting.pop(rid, None)

    def answer(self, message: dict[str, Any]) -> None:
        waiter = self._waiter(message)
        if waiter is not None:
            waiter.reply = message
            waiter.answered.set()

    def started(self, message: dict[str, Any]) -> None:
        waiter = self._waiter(message)
        if waiter is not None:
            waiter.started = True

    def _waiter(self, message: dict[str, Any]) -> Waiter | None:
        """The request `message` is about; None for an id this side never sent (any JSON value: a list can't even be
        looked up)."""
        rid = message.get("id")
        if type(rid) is not int:
            return None
        with self._lock:
            return self._waiting.get(rid)

    def fail_all(self, why: str) -> None:
        with self._lock:
            waiting = list(self._waiting.values())
        for waiter in waiting:
            waiter.reply = why
            waiter.answered.set()

    def wait(self, waiter: Waiter, deadline: float) -> bool:
        """Whether the reply came by the deadline, or (caught up) from what had arrived by then."""
        if waiter.answered.wait(max(0.0, deadline - time.time())):
            return True
        limit = time.monotonic() + CATCH_UP
        while self.drained <= deadline and time.monotonic() < limit and not waiter.answered.is_set():
            time.sleep(0.05)
        return waiter.answered.is_set()

    def unanswered(self, op: str, waiter: Waiter, deadline: float, engine: str, timeout: float) -> str:
        """What a request that got no answer by its deadline means, as far as this side can know."""
        if waiter.started or self.drained <= deadline:
            return (
                f"{engine} {'started the ' + op + ' but ' if waiter.started else ''}did not answer "
                f"{'' if waiter.started else 'the ' + op + ' '}in {timeout:.0f} s: it may or may not have "
                f"taken effect"
            )
        return (
            f"{engine} did not answer in {timeout:.0f} s (stopped, or too busy): {op} not done, and it won't be "
            f"(the engine drops a request whose deadline passed)"
        )
