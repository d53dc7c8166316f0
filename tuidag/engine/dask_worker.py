"""The part of the Dask executor that runs on a Dask worker: one attempt as a local process tree, the client's reads of
its output, and the kill the client asks for.

Runs inside the worker process, so it is an importable module (not `__main__`): the registry of running attempts
below must be the worker's own, not a copy pickled along with a function. The attempt itself is a `ShellAttempt`,
so a task on a worker gets exactly what a local one gets: its own session, the run's tags, the tree kill with the
SIGTERM -> kill_grace -> SIGKILL escalation, the timeout. Its output goes into the worker's own copy of the log
(`worker_log_dir()`), which the client reads directly from the worker (`read_output`, a request handler the worker's
guard installs, see `dask_guard`): output never passes through the scheduler, which would keep it (it stores every
event of a topic) and let any client of the cluster read it. A chunk is read exactly as it is in the file, so the
client's copy is byte for byte the same.

On a cluster tuidag did not start, the worker numbers an attempt's resource slots itself, within what it advertises
(`spec["slots"]`): slot numbers are the devices of the machine that runs the task (CUDA_VISIBLE_DEVICES), which the
client, counting slots cluster-wide, cannot know. Dask never runs more than a worker advertises at once, so its own
numbers never run out.

Events on the executor's topic (through the scheduler: small, no output), each a list `[kind, key, payload]`:
- `["s", key, [worker address, slots or None, worker's shown name, start time]]`: the attempt runs on that worker
  (holding those slots there; `shown_name`) since that time (the worker's clock); sent
  at the first look after the start, TAIL_INTERVAL later, so that a quick attempt (most of a big DAG's) costs one
  event fewer: one over sooner says it in its end event instead;
- `["e", key, [ok, exit_code, reason, cancelled, [worker address, slots, name, time] or None, output
  size]]`: the attempt and its
  whole tree are gone, with where it ran when no "s" event said so, and how many bytes of output it wrote (the
  client reads what it has not read yet before it ends the attempt).
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..model.resources import format_slots, slot_env
from .executor import Attempt, AttemptResult, TaskEnvironment
from .log_headers import HeaderSpan, LogHeaders
from .dask_watchdog import GUARD_TAG, token
from .shell_attempt import ShellAttempt

TAIL_INTERVAL = 0.01  # seconds between the looks that say an attempt runs ("s" events)
SEND_INTERVAL = 0.001  # seconds the worker's stream to the scheduler may hold messages back to send them together
READ_CHUNK = 1 << 20  # bytes of output one read by the client returns at most
READ_WAIT = 1.0  # seconds a read by the client waits for new output before it answers with none
USAGE_INTERVAL = 0.5  # seconds between samples of a running attempt's CPU and memory
KEPT_OUTPUTS = 10_000  # ended attempts whose output the client may still read (the oldest are forgotten first)

_lock = threading.Lock()
_running: dict[str, ShellAttempt] = {}   # attempt key -> attempt running on this worker
_carriers: dict[str, tuple[str, str]] = {}  # attempt key -> (its worker, the Dask task that carries it): guard_check
_refused: dict[str, None] = {}           # Dask keys never to run here (a second start, see dask_guard)
_outputs: dict[str, "_Output"] = {}      # attempt key -> where its output is, while the client may read it
_guard_killed: set[str] = set()          # attempt keys the guard has stopped
_cancelled: dict[str, str] = {}          # dask keys cancelled before they started here -> reason (see cancel_key)
_starting: set[str] = set()              # dask keys of attempts being started here (not in _running yet)
_free_slots: dict[tuple[str, str], list[int]] = {}  # (worker address, kind) -> its free slot numbers
_folders_made: set[Path] = set()  # the runs' log folders this worker made
_environment: dict[str, str] | None = None  # see _own_environment


def worker_log_dir() -> Path:
    """Where a worker keeps its copy of task logs: $TUIDAG_WORKER_LOG_DIR, or tuidag-worker-logs in the temp dir."""
    return Path(os.environ.get("TUIDAG_WORKER_LOG_DIR") or Path(tempfile.gettempdir()) / "tuidag-worker-logs")


class _FirstHeader(LogHeaders):
    """Remembers where the attempt's header ends: the client writes its own header, output follows it."""

    span: HeaderSpan | None = None

    def write(self, fd: int, path: str, header: bytes) -> HeaderSpan:
        self.span = super().write(fd, path, header)
        return self.span


def run_attempts(packs: list[bytes]) -> list[bytes | None]:
    """The Dask task: run its attempts on this worker (`dask_attempt._Group`: one, or on a local cluster several
    launched together), each at once and on its own, and return their values. Each pack is the pickled spec
    `dask_attempt.worker_spec` made (plain data, the callable already pickled): bytes, which Dask sizes and searches
    for futures in O(1), where it walked every item of a dict (the environment above all) on the client, the
    scheduler and the worker.

    A lone attempt's error is the Dask task's (its future says it). Several attempts end one by one, each with its
    end event, an error too: one of them failing to start must not end the others on the client while their trees
    run on here."""
    from distributed import get_worker

    worker = get_worker()
    carrier = worker.get_current_task()
    with _lock:
        if carrier in _refused:  # Dask starts it a second time (see dask_guard): it never runs twice
            _refused.pop(carrier)
            return [None] * len(packs)
    if len(packs) == 1:
        return [run_attempt(packs[0], worker, carrier)]
    values: list[bytes | None] = [None] * len(packs)

    def run(i: int) -> None:
        try:
            values[i] = run_attempt(packs[i], worker, carrier)
        except BaseException as exc:
            _failed(packs[i], worker, exc)

    others = [threading.Thread(target=run, args=(i,), name="tuidag-dask-attempt", daemon=True)
              for i in range(1, len(packs))]
    for thread in others:
        thread.start()
    run(0)
    for thread in others:
        thread.join()
    return values


def _failed(packed: bytes, worker: Any, exc: BaseException) -> None:
    """The end event of an attempt of a group that failed on this worker before it could say so itself."""
    import pickle

    spec = pickle.loads(packed)
    reason = " ".join(f"could not run on worker {worker.address}: {type(exc).__name__}: {exc}".split())[:200]
    where = [worker.address, None, shown_name(worker), None]
    worker.log_event(spec["topic"], ["e", spec["key"], [False, None, reason, False, where, 0]])


def run_attempt(packed: bytes, worker: Any, carrier: str | None = None) -> bytes | None:
    """Run one attempt on `worker`, stream its output and its outcome (the end event), and return a callable's
    pickled value (None for a shell task: the worker then stores, sizes and reports nothing bigger)."""
    import pickle

    spec: dict[str, Any] = pickle.loads(packed)
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
        output = _Output()
        result, value = _run(spec, address, start, output, carrier or key)
    finally:
        if held is not None:
            _give_back(address, held)
    send("e", [result.ok, result.exit_code, result.reason, result.cancelled, start.unsent(), output.end(key)])
    return value


class _Start:
    """Where the attempt runs, said once: by `announce` (the "s" event), or with the end event (`unsent`)."""

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
            self._send("s", where)

    def unsent(self) -> list | None:
        with self._lock:
            where, self._where = self._where, None
        return where


def shown_name(worker: Any) -> str:
    """How the views name a worker: its `--name` when it was given one, else its host:port."""
    return name_to_show(getattr(worker, "name", None), worker.address)


def name_to_show(name: Any, address: str) -> str:
    if isinstance(name, str) and name and name != address:
        return name
    return address.split("://", 1)[1] if address.startswith(("tcp://", "tls://")) else address


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


def _run(spec: dict[str, Any], address: str, start: _Start, output: _Output,
         carrier: str) -> tuple[AttemptResult, bytes | None]:
    key = spec["key"]
    folder = worker_log_dir() / spec["run_id"]
    if folder not in _folders_made:
        folder.mkdir(parents=True, exist_ok=True)
        _folders_made.add(folder)
        from .dask_guard import LOG_RETENTION, prune_logs  # a new run here: the copies of old ones go

        threading.Thread(target=prune_logs, args=(folder.parent, LOG_RETENTION), daemon=True,
                         name="tuidag-dask-prune").start()
    log_path = str(folder / f"{spec['task']}.log")
    with _lock:
        reason = _cancelled.pop(key, None)
        if reason is None:
            _starting.add(key)
    if reason is not None:
        return AttemptResult(False, None, reason, cancelled=True), None
    try:
        return _start_and_wait(spec, key, folder, log_path, address, start, output, carrier)
    finally:
        with _lock:
            _starting.discard(key)


def _start_and_wait(spec: dict[str, Any], key: str, folder: Path, log_path: str, address: str, start: _Start,
                    output: _Output, carrier: str) -> tuple[AttemptResult, bytes | None]:
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
        call = _CallableFiles(folder, spec, log_path)
        steps = [("run", call.command())]
    from ..model.spec import TaskSpec

    headers = _FirstHeader()
    attempt = Attempt(run_id=spec["run_id"], task=TaskSpec(spec["task"], shell=spec["shell"]),
                      number=spec["attempt"], env=env, workdir=Path(workdir), log_path=log_path,
                      timeout=spec["timeout"], kill_grace=spec["kill_grace"], log_headers=headers)
    tail = _Tail(start.announce)
    try:
        running = ShellAttempt(attempt, steps)
        start.started()
    except Exception as exc:
        output.follow(key, log_path, headers.span.end if headers.span else None)
        return AttemptResult(False, None, f"could not start on worker {address}: {exc}"), None
    output.follow(key, log_path, headers.span.end if headers.span else None)
    tail.start()
    with _lock:
        _running[key] = running
        _carriers[key] = (address, carrier)
        late = _cancelled.pop(key, None)  # a cancel that came while it was starting
    if late is not None:
        running.kill(late)
    try:
        result = running.wait()
    finally:
        with _lock:
            _running.pop(key, None)
            _carriers.pop(key, None)
            _guard_killed.discard(key)
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


class _Output:
    """Where an attempt's output is in the worker's copy of its log (from the end of its header on), for the
    client's reads (`read_output`), kept after the attempt's end until the client has read it all."""

    def __init__(self):
        self.path: str | None = None
        self.start = 0
        self.size: int | None = None  # set at the end: the bytes of output the attempt wrote
        self.note_bytes = b""  # what the worker itself says when the attempt could not start (no log of its own)

    def follow(self, key: str, path: str, start: int | None) -> None:
        self.path = path
        self.start = start if start is not None else os.stat(path).st_size
        with _lock:
            _outputs[key] = self

    def note(self, key: str, text: bytes) -> None:
        self.note_bytes = text
        with _lock:
            _outputs[key] = self

    def end(self, key: str) -> int:
        if self.path is not None:
            try:
                self.size = max(0, os.stat(self.path).st_size - self.start)
            except OSError:
                self.size = 0
        else:
            self.size = len(self.note_bytes)
        with _lock:
            if not self.size:
                _outputs.pop(key, None)  # nothing to read
            while len(_outputs) > KEPT_OUTPUTS:
                _outputs.pop(next(iter(_outputs)))
        return self.size

    _sampled = 0.0
    _usage: tuple[float, int] | None = None

    def usage(self, running: ShellAttempt | None) -> tuple[float, int] | None:
        now = time.monotonic()
        if running is not None and now - self._sampled >= USAGE_INTERVAL:
            self._sampled = now
            try:
                self._usage = running.usage()
            except Exception:
                self._usage = None
        return self._usage

    def read(self, offset: int) -> bytes:
        if self.path is None:
            return self.note_bytes[offset:offset + READ_CHUNK]
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            limit = READ_CHUNK if self.size is None else min(READ_CHUNK, self.size - offset)
            return os.pread(fd, limit, self.start + offset) if limit > 0 else b""
        finally:
            os.close(fd)


async def read_output(key: str, offset: int, wait: float = READ_WAIT) -> dict[str, Any]:
    """Request handler on the worker (`dask_guard.HostGuard` installs it): the attempt's output from `offset` on,
    as soon as there is some, or none after `wait` seconds; `end` is the attempt's output size once it has ended
    (None while it runs, -1 when this worker knows nothing of the attempt); `usage` the CPU % and RSS of its tree
    while it runs (sampled at most every USAGE_INTERVAL, as the views ask locally). The file is read on the worker's
    event loop: a read of at most READ_CHUNK from the page cache takes well under a millisecond."""
    import asyncio

    deadline = time.monotonic() + wait
    while True:
        with _lock:
            output = _outputs.get(key)
            running = _running.get(key)
        if output is None:
            return {"data": b"", "end": -1, "usage": None}
        end = output.size
        try:
            data = output.read(offset)
        except OSError:
            data = b""
        if end is not None and offset + len(data) >= end:
            with _lock:
                if _outputs.get(key) is output:
                    del _outputs[key]  # all read
        if data or end is not None or time.monotonic() >= deadline:
            return {"data": data, "end": end, "usage": output.usage(running) if end is None else None}
        await asyncio.sleep(TAIL_INTERVAL)


class _Tails:
    """The one thread of a worker process that looks at its running attempts' logs every TAIL_INTERVAL; it starts
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


class _CallableFiles:
    """A Python callable on a worker: run in a child process (`python -m tuidag.engine.dask_callable`) as a shell
    task's leader would be, so the tree kill stops it; the callable and its result travel through two files."""

    def __init__(self, folder: Path, spec: dict[str, Any], log_path: str):
        stem = folder / f"{spec['task']}.{spec['attempt']}"
        self.input = f"{stem}.call"
        self.output = f"{stem}.result"
        import pickle

        payload = {"func": spec["func"], "name": spec["task"], "run_id": spec["run_id"], "attempt": spec["attempt"],
                   "results": spec["results"], "workdir": spec["workdir"], "log_path": log_path,
                   "source": spec.get("source")}
        fd = os.open(self.input, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(payload, f)
        try:
            os.unlink(self.output)
        except FileNotFoundError:
            pass

    def command(self) -> str:
        import shlex

        return f"exec {shlex.quote(sys.executable)} -m tuidag.engine.dask_callable " \
               f"{shlex.quote(self.input)} {shlex.quote(self.output)}"

    def outcome(self, result: AttemptResult) -> tuple[AttemptResult, bytes | None]:
        """The attempt's result with the callable's own reason (`raised ValueError: ...`) and pickled value."""
        import pickle

        try:
            with open(self.output, "rb") as f:
                kind, payload = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            return result, None
        finally:
            for path in (self.input, self.output):
                try:
                    os.unlink(path)
                except OSError:
                    pass
        if result.cancelled or result.reason == "timeout":
            return result, None
        if kind == "ok":
            return result, payload
        return AttemptResult(False, result.exit_code, payload), None


def cancel_key(key: str, reason: str) -> bool:
    """Run on a worker by `Client.run`: stop the attempt `key` if it runs here (the SIGTERM -> SIGKILL escalation
    goes on in the attempt), or make sure it never starts here. Returns whether it runs here, being started
    included (its processes may exist already: it is stopped as soon as it is, and its end event says when the tree
    is gone, so the client must wait for that). Never blocks: `Client.run` calls it on the worker's event loop."""
    with _lock:
        running = _running.get(key)
        if running is None:
            if len(_cancelled) > 10_000:  # keys of attempts that never came here: keep the set bounded
                _cancelled.clear()
            _cancelled[key] = reason
            return key in _starting
    running.kill(reason)
    return True


def kill_all(run_id: str) -> int:
    """Run on every worker by `Client.run` (a second Ctrl+C): SIGKILL every process of the run here at once."""
    from . import process

    procs = process.collect_tree(None, run_id=run_id)
    process.signal_all(procs, 9)
    return len(procs)



def refuse(key: str) -> None:
    """Stream handler on the worker (see `dask_guard`): the Dask task `key`, which the scheduler is about to send
    here again, must not run."""
    with _lock:
        if len(_refused) > 10_000:
            _refused.pop(next(iter(_refused)))
        _refused[key] = None


def guard_check(worker: Any) -> None:
    """On the worker's event loop, every `dask_guard.CHECK_INTERVAL`: stop the attempts no client wants any more
    (their Dask task was released: the client died, or cancelled it) and, once the worker has lost its scheduler,
    every attempt (nobody could see them end). The kills run on threads of their own: a tree kill reads /proc."""
    comm = getattr(getattr(worker, "batched_stream", None), "comm", None)
    lost = comm is None or comm.closed()
    with _lock:
        running = list(_running.items())
        carriers = dict(_carriers)
    if not running:
        return
    tasks = worker.state.tasks
    for key, attempt in running:
        where, carrier = carriers.get(key, (None, None))
        if key in _guard_killed or where != worker.address:  # (workers of one process share this module)
            continue
        if lost:
            reason = "the Dask scheduler is unreachable from the worker"
        else:
            state = tasks.get(carrier)
            if state is not None and state.state in ("executing", "long-running"):
                continue
            reason = "the run's Dask client is gone"
        _guard_killed.add(key)
        threading.Thread(target=attempt.kill, args=(reason,), daemon=True, name="tuidag-dask-guard").start()


def kill_running(worker: Any, reason: str) -> None:
    """Stop every attempt running on `worker` (it closes)."""
    with _lock:
        running = [_running[key] for key, (where, _) in _carriers.items() if where == worker.address]
    threads = [threading.Thread(target=attempt.kill, args=(reason,), daemon=True) for attempt in running]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
