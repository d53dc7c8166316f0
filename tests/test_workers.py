"""The scheduler's worker pool: bounded threads, order, errors and shutdown."""

from __future__ import annotations

import threading

import pytest

from slowness import patience
from tuidag.engine import output_routing
from tuidag.engine.workers import WorkerPool


def test_runs_every_item_on_at_most_size_named_threads():
    pool = WorkerPool(3, "unit")
    lock = threading.Lock()
    running, peak, threads, done = [0], [0], set(), []
    gate = threading.Barrier(3, timeout=patience(10))  # the first three items must overlap: three threads exist

    def item(k: int) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            threads.add(threading.current_thread().name)
        if k < 3:
            gate.wait()
        with lock:
            running[0] -= 1
            done.append(k)

    for k in range(50):
        pool.submit(item, k)
    pool.shutdown(wait=True)
    assert sorted(done) == list(range(50))
    assert peak[0] == 3
    assert threads == {"unit-0", "unit-1", "unit-2"}


def test_one_thread_runs_items_in_submission_order():
    pool = WorkerPool(1, "unit")
    seen: list[int] = []
    for k in range(100):
        pool.submit(seen.append, k)
    pool.shutdown(wait=True)
    assert seen == list(range(100))


def test_a_failing_item_does_not_stop_its_thread():
    pool = WorkerPool(1, "unit")
    seen: list[str] = []

    def boom() -> None:
        raise ValueError("boom")

    pool.submit(boom)
    pool.submit(seen.append, "after")
    pool.shutdown(wait=True)
    assert seen == ["after"]


def test_shutdown_finishes_queued_items_then_refuses_new_ones():
    pool = WorkerPool(2, "unit")
    release = threading.Event()
    seen: list[int] = []
    pool.submit(release.wait, patience(10))
    for k in range(10):
        pool.submit(seen.append, k)
    stopper = threading.Thread(target=pool.shutdown)
    stopper.start()
    release.set()
    stopper.join(patience(10))
    assert not stopper.is_alive()
    assert sorted(seen) == list(range(10))
    with pytest.raises(RuntimeError):
        pool.submit(seen.append, 99)


def test_threads_started_while_a_task_writes_do_not_inherit_its_log(tmp_path):
    """A worker thread outlives whatever submitted the item that created it, so output routing must not bind it to
    the task that happened to be current then."""
    output_routing.install()
    target = output_routing.LogTarget(tmp_path / "task.log")
    token = output_routing.set_target(target)
    try:
        pool = WorkerPool(1, "unit")
        pool.submit(lambda: None)
    finally:
        output_routing.reset_target(token)
    seen: list[object] = []
    pool.submit(lambda: seen.append(output_routing._current.get()))
    pool.shutdown(wait=True)
    target.close()
    assert seen == [None]
