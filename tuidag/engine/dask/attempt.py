"""One attempt on a Dask cluster, as the client sees it (`DaskAttempt`), and the Dask task that carries one or several
(`_Group`). What travels to the worker and back: `wire`. The executor that makes them, and why it works as it does:
`executor`."""

from __future__ import annotations

import os
import pickle
import threading
from typing import TYPE_CHECKING, Any

from ..executor import Attempt, AttemptResult, RunningAttempt
from ..shell_attempt import open_log, write_header
from .wire import ENDED, OUTPUT_OP, READ_WAIT, STARTED, attempt_key, pack, worker_spec

if TYPE_CHECKING:
    from asyncio import Future as AsyncFuture

    from distributed import Future

    from .executor import DaskExecutor

END_TIMEOUT = 30.0  # seconds to wait for a stopped attempt's end event before giving up on the worker
WAITING_AFTER = 0.05  # seconds after its submission an attempt that has not started is said to wait for a worker


class _Group:
    """Attempts that travel as one Dask task (`runner.run_attempts`): its key, future and value are theirs."""

    future: Future  # set by `DaskExecutor.submit` before any member is handed the group (`DaskAttempt.submitted`)

    def __init__(self, members: list[tuple[DaskAttempt, bytes]]):
        self.members = [attempt for attempt, _ in members]
        self.packs = [packed for _, packed in members]
        first = self.members[0].key
        self.key = first if len(members) == 1 else f"{first}+{len(members) - 1}"
        self._lock = threading.Lock()
        self._cancelled = 0
        self._left = len(members)

    def cancel_unstarted(self) -> None:
        """A member was cancelled before it started: the Dask task is cancelled once every member has been (the
        others still run; the cancelled one never starts: `registry.cancel_key`)."""
        with self._lock:
            self._cancelled += 1
            every = self._cancelled == len(self.members)
        if every:
            self.future.cancel()

    def value(self, member: DaskAttempt) -> Any:
        return self.future.result(timeout=END_TIMEOUT)[self.members.index(member)]

    def forget(self, executor: DaskExecutor, member: DaskAttempt) -> None:
        with self._lock:
            self._left -= 1
            done = not self._left
        if done:
            with executor._lock:
                executor._groups.pop(self.key, None)


class DaskAttempt(RunningAttempt):
    """One attempt as one Dask task. The local log gets the header here and the output as the worker streams it."""

    def __init__(self, executor: DaskExecutor, attempt: Attempt):
        self.executor = executor
        self.attempt = attempt
        self.key = attempt_key(attempt.run_id, attempt.task.name, attempt.number)
        self.worker: str | None = None  # the address of the worker it runs on
        self.shown: str | None = None  # that worker as the views name it (`wire.name_to_show`)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: AttemptResult | None = None
        self._kill_reason: str | None = None
        self.group: _Group | None = None  # the Dask task that carries it, once `executor.submit` handed it to Dask
        self._read = 0  # bytes of output read from the worker (`_reader`)
        self._usage: tuple[float, int] | None = None  # CPU % and RSS of its tree, as the worker last said
        self._reading = False
        self._reader_task: AsyncFuture[None] | None = None  # the event loop keeps only a weak reference to it
        self._ending: tuple[AttemptResult, int] | None = None  # the end, while output is still being read
        self._fd_lock = threading.Lock()  # the event loop writes output while `wait()` may be closing the log
        self._fd: int | None = open_log(attempt)
        self._headed = False  # the attempt's header is in the log (written when it starts: `_started_on`)
        try:
            packed = pack(
                worker_spec(
                    attempt,
                    self.key,
                    executor.topic,
                    executor.dag_env,
                    workers_number_slots=executor.workers_number_slots,
                )
            )
        except BaseException as exc:
            if not isinstance(exc, OSError):
                self._head()
                os.write(self._fd, f"tuidag: cannot start: {exc}\n".encode())
            os.close(self._fd)
            raise
        with executor._lock:
            executor._attempts[self.key] = self
        executor.submit(self, packed)

    def submitted(self, group: _Group) -> None:
        """On the client's event loop, as the attempt goes to the scheduler."""
        with self._lock:
            self.group = group
            reason = self._kill_reason if self.worker is None and self._result is None else None
        group.future.add_done_callback(self._future_done)
        if self.attempt.on_waiting is not None:
            self.executor.client.loop.call_later(WAITING_AFTER, self._still_waiting)
        if reason is not None:  # cancelled before it was handed to Dask (see `kill`)
            self._cancel_future(reason)

    def _still_waiting(self) -> None:
        if self.worker is None and self._result is None:
            threading.Thread(target=self.attempt.on_waiting, daemon=True, name="tuidag-dask-waiting").start()

    def not_submitted(self, exc: Exception) -> None:
        self._end(AttemptResult(False, None, f"could not start: {exc}"))

    # --- events from the worker (on the client's event loop) ---------------------------------------------------
    def on_event(self, kind: str, payload: Any) -> None:
        if kind == STARTED:
            self._started_on(payload)
            self._read_output(payload[0])
        elif kind == ENDED:
            ok, exit_code, reason, cancelled, where, size = payload
            if where is not None:  # over before it said where it ran
                self._started_on(where, ending=size <= self._read)
            with self._lock:
                if self._kill_reason is not None and not ok:
                    cancelled, reason = True, self._kill_reason
            result = AttemptResult(ok, exit_code, reason, cancelled)
            if size > self._read:
                self._ending = (result, size)
                self._read_output(self.worker or where[0])
            else:
                self._end(result)

    def _read_output(self, worker: str) -> None:
        """Read the attempt's output from its worker (never through the scheduler, see `wire`), appending
        it to the local log as it comes, until the end event's size is reached. On the client's event loop."""
        if self._reading:
            return
        self._reading = True
        import asyncio

        self._reader_task = asyncio.ensure_future(self._reader(worker))

    async def _reader(self, worker: str) -> None:
        read = getattr(self.executor.client.rpc(worker), OUTPUT_OP)
        try:
            while self._result is None:
                try:
                    reply = await read(key=self.key, offset=self._read, wait=READ_WAIT)
                except Exception:  # the worker is gone: the attempt ends as `worker lost` (or already has)
                    break
                usage = reply.get("usage")  # a list: the wire has no tuples
                self._usage = (usage[0], usage[1]) if usage else None
                data = reply["data"]
                if data:
                    with self._fd_lock:
                        if self._fd is not None:
                            os.write(self._fd, data)
                    self._read += len(data)
                end = reply["end"]
                if end == -1 or (end is not None and self._read >= end):
                    break
        finally:
            self._reading = False
            ending, self._ending = self._ending, None
            if ending is not None:
                if self._read < ending[1]:  # (the worker went away before all of it was read)
                    with self._fd_lock:
                        if self._fd is not None:
                            os.write(
                                self._fd,
                                f"\ntuidag: {ending[1] - self._read} bytes of output could not be "
                                f"read from worker {worker}\n".encode(),
                            )
                self._end(ending[0])

    def _head(self) -> None:
        """The attempt's header, once: as it starts on its worker (so its time is the start's, not the time it was
        handed to Dask), or as it ends if it never started."""
        if not self._headed and self._fd is not None:
            self._headed = True
            write_header(self._fd, self.attempt)

    def _started_on(self, where: list, ending: bool = False) -> None:
        worker, slots, name, started = where
        with self._lock:
            first, self.worker = self.worker, self.worker or worker
            self.shown = self.shown or name
            reason = self._kill_reason
        if first is None:
            with self._fd_lock:
                self._head()
            if self.attempt.on_worker is not None:
                self.attempt.on_worker(name, slots, started, ending)
        if first is not None:  # Dask runs it again elsewhere: the worker it ran on is gone
            self._end(AttemptResult(False, None, f"worker lost: {first}"))
            threading.Thread(
                target=self._drop_rerun, args=(worker, f"worker lost: {first}"), daemon=True, name="tuidag-dask-kill"
            ).start()
        elif reason is not None:  # cancelled while it was being started
            self._on_workers_later([worker], reason)

    def worker_lost(self, worker: str) -> None:
        """The worker running this attempt left the cluster (on the event loop): the attempt failed; Dask would run
        it again elsewhere, and that run is stopped (tuidag's own retry decides what runs next)."""
        with self._lock:
            if self._result is not None:
                return
            self.worker = self.worker or worker  # so a run Dask starts again is taken for one (see `_started_on`)
        self._end(AttemptResult(False, None, f"worker lost: {worker}"))
        threading.Thread(
            target=self._drop_rerun, args=(None, f"worker lost: {worker}"), daemon=True, name="tuidag-dask-kill"
        ).start()

    def _future_done(self, future) -> None:
        """On a Dask callback thread. A result is not the end (the end event is, after the output); an error is."""
        if future.status == "finished":
            return
        if future.cancelled():
            if self._kill_reason is None:  # not ours: the scheduler forgot the task (it was lost or restarted)
                self._end(
                    AttemptResult(
                        False, None, f"the Dask scheduler {self.executor.address} is unreachable or dropped the task"
                    )
                )
            return
        self._end(AttemptResult(False, None, describe_error(future.exception(), self.worker)))

    def _end(self, result: AttemptResult) -> None:
        with self._lock:
            if self._result is not None:
                return
            self._result = result
        with self._fd_lock:
            self._head()
        self._done.set()

    def usage(self) -> tuple[float, int] | None:
        """Sampled on the worker, sent with each read of the output (at least every READ_WAIT while it runs)."""
        usage = self._usage
        return usage if usage and self._result is None else None

    # --- control ------------------------------------------------------------------------------------------------
    def kill(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._kill_reason is not None or self._result is not None:
                return
            self._kill_reason = reason
            worker = self.worker
            submitted = self.group is not None
        if worker is not None:
            self._on_workers_later([worker], reason)
        elif submitted:  # else `submitted` will cancel it
            self._cancel_future(reason)

    def _cancel_future(self, reason: str) -> None:
        """From any thread, the event loop's too (`submitted` runs there; `Future.cancel` must not)."""
        threading.Thread(target=self._cancel_unstarted, args=(reason,), daemon=True, name="tuidag-dask-cancel").start()

    def _on_workers_later(self, workers: list[str], reason: str) -> None:
        from .registry import cancel_key

        threading.Thread(
            target=self.executor.run_on_workers,
            args=(cancel_key, self.key, reason),
            kwargs={"workers": workers},
            daemon=True,
            name="tuidag-dask-kill",
        ).start()

    def _drop_rerun(self, worker: str | None, reason: str) -> None:
        """Stop the run Dask started again after a worker was lost (tuidag's own retry decides what runs next), on
        `worker`, or wherever it may start (None)."""
        from .registry import cancel_key

        if self.group is not None:  # (the worker was lost with every attempt of the group)
            self.group.future.cancel()
        self.executor.run_on_workers(cancel_key, self.key, reason, workers=[worker] if worker else None)

    def _cancel_unstarted(self, reason: str) -> None:
        """Make sure no worker starts it, cancel the Dask task (once no attempt of its group is left to run), and if
        a worker had started it already, let its end event end it."""
        from .registry import cancel_key

        answers = self.executor.run_on_workers(cancel_key, self.key, reason)
        assert self.group is not None  # only a submitted attempt's future is cancelled (`kill`, `submitted`)
        self.group.cancel_unstarted()
        if not any(answer is True for answer in answers.values()):
            self._end(AttemptResult(False, None, reason, cancelled=True))

    # --- waiting ------------------------------------------------------------------------------------------------
    def wait(self) -> AttemptResult:
        try:
            self._done.wait()
            result = self._result
            assert result is not None
            if result.ok and self.attempt.task.func is not None:
                result = self._value(result)
            # (a worker lost before the attempt said it ran there is named as the cluster last listed it)
            named = self.executor.names.get(self.worker) if self.worker is not None else None
            return result._replace(worker=self.shown or named or self.worker)
        finally:
            self._forget()

    def _value(self, result: AttemptResult) -> AttemptResult:
        assert self.group is not None  # it succeeded: it went to Dask
        try:
            data = self.group.value(self)
            return result._replace(value=pickle.loads(data) if data is not None else None)
        except Exception as exc:
            return AttemptResult(
                False, result.exit_code, f"the return value could not be read back: {type(exc).__name__}: {exc}"
            )

    def _forget(self) -> None:
        with self.executor._lock:
            self.executor._attempts.pop(self.key, None)
        if self.group is not None:
            self.group.forget(self.executor, self)
        with self._fd_lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)


def describe_error(exc: BaseException | None, worker: str | None) -> str:
    """The reason a Dask-side failure gives: `worker lost: tcp://...`, or the error in one line."""
    from distributed.scheduler import KilledWorker

    if isinstance(exc, KilledWorker):
        last = getattr(exc.last_worker, "address", exc.last_worker)
        return f"worker lost: {worker or last}"
    if exc is None:
        return "unknown Dask error"
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if "deserialization" in text:  # the scheduler or a worker can't import tuidag's task function
        text = "the Dask scheduler or worker cannot load tuidag's task: install tuidag (this version) there too"
    return text if len(text) <= 200 else text[:197] + "..."
