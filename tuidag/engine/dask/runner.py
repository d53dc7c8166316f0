"""The attempt runner: the Dask task that runs on a worker (`run_attempts`), one attempt as a local process tree, and
what the worker says of it on the executor's topic (its start and its end: the events of `wire`).

Runs inside the worker process, so it is an importable module (not `__main__`): `run_attempts` goes to Dask by
reference, and the attempts it starts enter the worker's own `registry` (and, in a process that adopts orphans, the
zombies they leave it are reaped: `reaper`). The attempt itself is a `ShellAttempt`, so a task on a worker gets exactly
what a local one gets: its own session, the run's tags, the tree kill with the SIGTERM -> kill_grace -> SIGKILL
escalation, the timeout; a Python callable runs in a child process of its own as the shell task's leader
(`callable_task`). Its output goes into the worker's own copy of the log (`output`), which the client reads directly
from the worker.

On a cluster tuidag did not start, the worker numbers an attempt's resource slots itself, within what it advertises
(`spec["slots"]`): slot numbers are the devices of the machine that runs the task (CUDA_VISIBLE_DEVICES), which the
client, counting slots cluster-wide, cannot know. Dask never runs more than a worker advertises at once, so its own
numbers never run out.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ...model.resources import format_slots, slot_env
from ..executor import Attempt, AttemptResult, TaskEnvironment
from ..log_headers import HeaderSpan, LogHeaders
from ..shell_attempt import ShellAttempt
from . import reaper, registry
from .callable_task import CallableFiles
from .output import LOG_RETENTION, Output, prune_logs, worker_log_dir
from .watchdog import GUARD_TAG, token
from .wire import ENDED, STARTED, name_to_show, unpack

TAIL_INTERVAL = 0.01  # seconds between the looks that say an attempt runs (STARTED events)
SEND_INTERVAL = 0.001  # seconds the worker's stream to the scheduler may hold messages back to send them together

_lock = threading.Lock()  # the free slots
_free_slots: dict[tuple[str, str], list[int]] = {}  # (worker address, kind) -> its free slot numbers
_folders_made: set[Path] = set()  # the runs' log folders this worker made
_environment: dict[str, str] | None = None  # see _own_environment


class _FirstHeader(LogHeaders):
    """Remembers where the attempt's header ends: the client writes its own header, output follows it."""

    span: HeaderSpan | None = None

    def write(self, fd: int, path: str, header: bytes, new: bool = False) -> HeaderSpan:
        self.span = super().write(fd, path, header, new)
        return self.span


def run_attempts(packs: list[bytes]) -> list[bytes | None]:
    """The Dask task: run its attempts on this worker (`attempt._Group`: one, or on a local cluster several
    launched together), each at once and on its own, and return their values. Each pack is a spec as it travels
    (`wire.pack`).

    A lone attempt's error is the Dask task's (its future says it). Several attempts end one by one, each with its
    end event, an error too: one of them failing to start must not end the others on the client while their trees
    run on here."""
    from distributed import get_worker

    worker = get_worker()
    carrier = worker.get_current_task()
    assert isinstance(carrier, str)  # tuidag names its Dask tasks (`attempt._Group.key`)
    if registry.refused(carrier):  # Dask starts it a second time (see guard): it never runs twice
        return [None] * len(packs)
    if len(packs) == 1:
        return [run_attempt(packs[0], worker, carrier)]
    values: list[bytes | None] = [None] * len(packs)

    def run(i: int) -> None:
        try:
            values[i] = run_attempt(packs[i], worker, carrier)
        except BaseException as exc:
            _failed(packs[i], worker, exc)

    others = [
        threading.Thread(target=run, args=(i,), name="tuidag-dask-attempt", daemon=True) for i in range(1, len(packs))
    ]
    for thread in others:
        thread.start()
    run(0)
    for thread in others:
        thread.join()
    return values


def _failed(packed: bytes, worker: Any, exc: BaseException) -> None:
    """The end event of an attempt of a group that failed on this worker before it could say so itself."""
    spec = unpack(packed)
    reason = " ".join(f"could not run on worker {worker.address}: {type(exc).__name__}: {exc}".split())[:200]
    where = [worker.address, None, shown_name(worker), None]
    worker.log_event(spec["topic"], [ENDED, spec["key"], [False, None, reason, False, where, 0]])


def run_attempt(packed: bytes, worker: Any, carrier: str | None = None) -> bytes | None:
    """Run one attempt on `worker`, stream its output and its outcome (the end event), and return a callable's
    pickled value (None for a shell task: the worker then stores, sizes and reports nothing bigger)."""
    spec: dict[str, Any] = unpack(packed)
    key, topic = spec["key"], spec["topic"]
    address = worker.address
    stream = getattr(worker, "batched_stream", None)
    if stream is not None and getattr(stream, "interval", 0) > SEND_INTERVAL:
        # It batches what it sends the scheduler for 2 ms: each end event of a chain of quick tasks waited for it.
        stream.interval = SEND_INTERVAL

    def send(kind: str, payload: Any) -> None:
        worker.log_event(topic, [kind, key, payload])

    held = _take_slots(worker, spec["slots"]) if spec.get("slots") else None
    try:
        if held is not None:
            spec = {**spec, "env": {**spec["env"], **slot_env(held, spec["cuda"])}}
        start = _Start(send, [address, format_slots(held) if held else None, shown_name(worker), None])
        output = Output()
        result, value = _run(spec, address, start, output, carrier or key)
    finally:
        if held is not None:
            _give_back(address, held)
    send(ENDED, [result.ok, result.exit_code, result.reason, result.cancelled, start.unsent(), output.end(key)])
    return value


class _Start:
    """Where the attempt runs, said once: by `announce` (the STARTED event), or with the end event (`unsent`)."""

    def __init__(self, send, where: list):
        self._send = send
        self._where: list | None = where
        self._lock = threading.Lock()

    def started(self) -> None:
        """The attempt's process has started (now, by this worker's clock)."""
        with self._lock:
            if self._where is not None:
                self._where[3] = time.time()

    def announce(self) -> None:
        where = self.unsent()
        if where is not None:
            self._send(STARTED, where)

    def unsent(self) -> list | None:
        with self._lock:
            where, self._where = self._where, None
        return where


def shown_name(worker: Any) -> str:
    """How the views name a worker: its `--name` when it was given one, else its host:port."""
    return name_to_show(getattr(worker, "name", None), worker.address)


def _take_slots(worker: Any, request: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """The lowest free numbers of this worker's own slots of each kind (it advertises how many it has)."""
    total = getattr(getattr(worker, "state", None), "total_resources", {})
    held = {}
    with _lock:
        for kind, count in request.items():
            free = _free_slots.setdefault((worker.address, kind), list(range(int(total.get(kind, count)))))
            held[kind] = tuple(free[:count])
            del free[:count]
    return held


def _give_back(address: str, held: dict[str, tuple[int, ...]]) -> None:
    with _lock:
        for kind, numbers in held.items():
            free = _free_slots[(address, kind)]
            free.extend(numbers)
            free.sort()


def _own_environment() -> dict[str, str]:
    """The worker's own environment, under every task's: read once per worker process, so that spawning encodes it
    once (`TaskEnvironment`), as a local run does with its own."""
    global _environment
    if _environment is None:
        _environment = dict(os.environ)
    return _environment


def _run(
    spec: dict[str, Any], address: str, start: _Start, output: Output, carrier: str
) -> tuple[AttemptResult, bytes | None]:
    key = spec["key"]
    folder = worker_log_dir() / spec["run_id"]
    if folder not in _folders_made:
        folder.mkdir(parents=True, exist_ok=True)
        _folders_made.add(folder)
        # a new run here: the copies of old ones go
        threading.Thread(
            target=prune_logs, args=(folder.parent, LOG_RETENTION), daemon=True, name="tuidag-dask-prune"
        ).start()
    log_path = str(folder / f"{spec['task']}.log")
    reason = registry.starting(key)
    if reason is not None:
        return AttemptResult(False, None, reason, cancelled=True), None
    try:
        return _start_and_wait(spec, key, folder, log_path, address, start, output, carrier)
    finally:
        registry.not_starting(key)


def _start_and_wait(
    spec: dict[str, Any],
    key: str,
    folder: Path,
    log_path: str,
    address: str,
    start: _Start,
    output: Output,
    carrier: str,
) -> tuple[AttemptResult, bytes | None]:
    workdir = spec["workdir"]
    if not os.path.isdir(workdir):
        message = f"workdir {workdir} does not exist on worker {address}"
        output.note(key, f"tuidag: cannot start: {message}\n".encode())
        return AttemptResult(False, None, message), None
    # Never the client's PATH or HOME; the worker's tag, by which its guard finds what is left of the attempt.
    env = TaskEnvironment(_own_environment(), {**spec["env"], GUARD_TAG: token()})
    call = None
    steps = spec["steps"]
    if spec.get("func") is not None:
        call = CallableFiles(folder, spec, log_path)
        steps = [("run", call.command())]
    from ...model.spec import TaskSpec

    headers = _FirstHeader()
    attempt = Attempt(
        run_id=spec["run_id"],
        task=TaskSpec(spec["task"], shell=spec["shell"]),
        number=spec["attempt"],
        env=env,
        workdir=Path(workdir),
        log_path=log_path,
        timeout=spec["timeout"],
        kill_grace=spec["kill_grace"],
        log_headers=headers,
    )
    tail = _Tail(start.announce)
    try:
        running = ShellAttempt(attempt, steps)
        start.started()
    except Exception as exc:
        output.follow(key, log_path, headers.span.end if headers.span else None)
        return AttemptResult(False, None, f"could not start on worker {address}: {exc}"), None
    output.follow(key, log_path, headers.span.end if headers.span else None)
    tail.start()
    late = registry.runs(key, running, address, carrier)  # a cancel that came while it was starting
    reaper.watch()  # (in a process that adopts the tree's orphans)
    if late is not None:
        running.kill(late)
    try:
        result = running.wait()
    finally:
        registry.ended(key)
        tail.stop()
    value = None
    if call is not None:
        result, value = call.outcome(result)
    return result, value


class _Tail:
    """Says the attempt runs (`tick`, once) at the first look, TAIL_INTERVAL after the start, until `stop`. The
    looking is done by one thread per worker process for all its attempts (`_Tails`): most attempts of a big DAG are
    over before the first look, and a thread of their own (a start, a join, a wake-up) cost the worker more than
    their whole run."""

    def __init__(self, tick):
        self._tick = tick
        self._lock = threading.Lock()
        self._since: float | None = None

    def start(self) -> None:
        self._since = time.monotonic()
        _TAILS.add(self)

    def look(self, now: float) -> None:
        """One look (on the looking thread). Never after `stop` (which waits for a look under way): the end event
        must come last."""
        if self._since is None or now - self._since < TAIL_INTERVAL:
            return
        with self._lock:
            if self._since is not None:
                self._tick()
                self._since = None
        _TAILS.discard(self)

    def stop(self) -> None:
        _TAILS.discard(self)
        with self._lock:
            self._since = None


class _Tails:
    """The one thread of a worker process that looks at its running attempts every TAIL_INTERVAL; it starts
    with the first attempt and waits, idle, while none runs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._tails: set[_Tail] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, tail: _Tail) -> None:
        with self._lock:
            self._tails.add(tail)
            if self._thread is None or not self._thread.is_alive():  # (a forked worker has no thread of its parent's)
                self._thread = threading.Thread(target=self._follow, name="tuidag-dask-tails", daemon=True)
                self._thread.start()
        self._wake.set()

    def discard(self, tail: _Tail) -> None:
        with self._lock:
            self._tails.discard(tail)

    def _follow(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(TAIL_INTERVAL)  # the pace of the looks, not a wait for something to happen
            with self._lock:
                tails = list(self._tails)
                if not tails:
                    self._wake.clear()
            now = time.monotonic()
            for tail in tails:
                try:
                    tail.look(now)
                except Exception:  # one attempt's log (gone, unreadable) must not stop the others' output
                    pass


_TAILS = _Tails()
