"""The scheduler's worker threads: at most `size` threads taking `(function, args)` items from one queue.

Why not `concurrent.futures.ThreadPoolExecutor`: the scheduler keeps no futures (its own task records are the source
of truth), and the Future, the work item and the condition variables the executor creates and signals for every
item cost about a tenth of tuidag's time on a DAG of quick tasks. Here an item is one put on a C `SimpleQueue`.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any


class _PoolThread(threading.Thread):
    pool_worker = True  # output routing: work items, not this thread, belong to tasks


class WorkerPool:
    """Threads start on demand, one per `submit` until there are `size`; they run items in submission order."""

    def __init__(self, size: int, name: str):
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # only for starting threads and shutting down
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> None:
        if self._closed:
            raise RuntimeError("cannot submit work after shutdown")
        self._queue.put((fn, args))
        if len(self._threads) < self.size:
            with self._lock:
                if len(self._threads) < self.size and not self._closed:
                    self._start_thread()

    def resize(self, size: int) -> None:
        """At most `size` threads from now on: more start at once for items waiting; fewer, as threads finish their
        current item (none is interrupted)."""
        with self._lock:
            if self._closed:
                return
            self.size = size
            waiting = self._queue.qsize()
            while len(self._threads) < size and waiting > 0:
                self._start_thread()
                waiting -= 1

    def _start_thread(self) -> None:
        thread = _PoolThread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def idle(self) -> bool:
        """No submitted item is waiting for a thread."""
        return self._queue.empty()

    def shutdown(self, wait: bool = True) -> None:
        """Let every thread finish the items already submitted, then stop (joining them when `wait`)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                for _ in self._threads:
                    self._queue.put(None)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _work(self) -> None:
        get = self._queue.get
        while True:
            if len(self._threads) > self.size and self._retire():
                return
            item = get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except BaseException:  # the items catch their own errors; this keeps the thread alive regardless
                _report(fn)

    def _retire(self) -> bool:
        """This thread ends: the pool was made smaller (`resize`)."""
        with self._lock:
            if len(self._threads) <= self.size or self._closed:
                return False
            self._threads.remove(threading.current_thread())
            return True


def _report(fn: Callable[..., Any]) -> None:
    """Log a failed item. Never raises (out of descriptors, `import logging` itself fails): a pool thread never dies."""
    try:
        import logging

        logging.getLogger(__name__).exception("worker item %r failed", fn)
    except BaseException:
        try:
            os.write(2, f"tuidag: worker item {fn!r} failed\n".encode(errors="replace"))
        except BaseException:
            pass
