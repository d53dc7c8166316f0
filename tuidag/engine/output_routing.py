"""Per-thread output routing: a callable task's `print`, `sys.stdout`/`sys.stderr` writes and `logging` records go to
that task's log file, while every other thread (the scheduler, the headless reporter, the UI) keeps the real streams.

Threads share one `sys.stdout`, so swapping it while a task runs would capture everybody's output (and a second task
would steal the first one's). Instead `install()` puts a `RoutingStream` in front of `sys.stdout` and `sys.stderr`
once; each write asks which log the *current thread* writes to (a context variable that an attempt sets around its
callable) and goes there, or to the wrapped stream when there is none. Threads a task starts inherit its target:
`threading.Thread.start` and `ThreadPoolExecutor.submit` carry the starting thread's target along (per work item for
pools, so a pool shared by several tasks routes each item to the task that submitted it).

Not routed (documented limits): output written straight to file descriptors 1 and 2 (C extensions, child processes
that inherit them) and writes through a stream object captured before the task started (`out = sys.stdout`). Tasks
that need those run with `isolate=True`, in a child process whose descriptors point at the log.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import thread as _cf_thread
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

#: The format of logging records a task emits when the program did not configure logging itself.
TASK_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LINE_LIMIT = 64 * 1024  # a thread's unterminated line is written out once it gets this long

_P = ParamSpec("_P")
_T = TypeVar("_T")
_current: ContextVar[LogTarget | None] = ContextVar("tuidag_log_target", default=None)
_install_lock = threading.Lock()
_patched = False
_default_logging_done = False


class LogTarget:
    """One attempt's log file, written by any number of threads.

    Text is buffered per thread up to the end of a line and written with one `write(2)` on an O_APPEND descriptor,
    so lines from concurrent threads never interleave mid-line. After `close()` (the attempt is over) a thread the
    task left running can still write: each write then opens the file for itself."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd = self._open()
        self._lock = threading.Lock()
        self._pending: dict[int, str] = {}  # thread ident -> text after its last newline

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW  # never through a symlink
        return os.open(self.path, flags, 0o600)

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            ident = threading.get_ident()
            with self._lock:
                pending = self._pending.pop(ident, "") + text
                cut = pending.rfind("\n") + 1
                if len(pending) - cut > _LINE_LIMIT:
                    cut = len(pending)
                if cut:
                    self._emit(pending[:cut].encode("utf-8", "backslashreplace"))
                if cut < len(pending):
                    self._pending[ident] = pending[cut:]
        return len(text)

    def write_bytes(self, data: bytes) -> int:
        with self._lock:
            pending = self._pending.pop(threading.get_ident(), "")
            self._emit(pending.encode("utf-8", "backslashreplace") + bytes(data))
        return len(data)

    def flush(self) -> None:
        """Write out the calling thread's unterminated line."""
        with self._lock:
            pending = self._pending.pop(threading.get_ident(), "")
            if pending:
                self._emit(pending.encode("utf-8", "backslashreplace"))

    def fileno(self) -> int:
        if self._fd < 0:
            raise io.UnsupportedOperation("the task's attempt is over")
        return self._fd

    def close(self) -> None:
        """Write out every thread's unterminated line and close the descriptor."""
        with self._lock:
            pending, self._pending = self._pending, {}
            for text in pending.values():
                self._emit(text.encode("utf-8", "backslashreplace"))
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _emit(self, data: bytes) -> None:
        fd = self._fd if self._fd >= 0 else self._open()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            if fd != self._fd:
                os.close(fd)


def set_target(target: LogTarget | None) -> Token:
    return _current.set(target)


def reset_target(token: Token) -> None:
    _current.reset(token)


class RoutingStream:
    """Stands in for `sys.stdout`/`sys.stderr`: task threads write to their log, all others to the wrapped stream
    (the terminal, a pipe, or the UI's capture object), which also answers everything else asked of the stream."""

    def __init__(self, wrapped: Any):
        self.__dict__["_wrapped"] = wrapped

    @property
    def wrapped(self) -> Any:
        return self._wrapped

    def write(self, text: str) -> int:
        target = _current.get()
        if target is None:
            return self._wrapped.write(text)
        return target.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        target = _current.get()
        if target is None:
            flush = getattr(self._wrapped, "flush", None)
            if flush is not None:
                flush()
        else:
            target.flush()

    def isatty(self) -> bool:
        target = _current.get()
        return False if target is not None else bool(self._wrapped.isatty())

    def fileno(self) -> int:
        """The log's descriptor for a task thread, so `subprocess.run(..., stdout=sys.stdout)` writes there too.

        A wrapped stream without a descriptor raises `io.UnsupportedOperation`, as a file-like object should, even
        if it answers -1 (Textual's stand-in for stdout/stderr does): a caller handing that number to a child process
        (multiprocessing's resource tracker passes `sys.stderr.fileno()`) would fail instead of going without."""
        target = _current.get()
        if target is None:
            fd = self._wrapped.fileno()
            if not isinstance(fd, int) or fd < 0:
                raise io.UnsupportedOperation(f"{self._wrapped!r} has no file descriptor")
            return fd
        target.flush()
        return target.fileno()

    @property
    def buffer(self) -> Any:
        target = _current.get()
        return self._wrapped.buffer if target is None else _BinaryTarget(target)

    @property
    def encoding(self) -> str:
        target = _current.get()
        return "utf-8" if target is not None else getattr(self._wrapped, "encoding", "utf-8")

    @property
    def errors(self) -> str:
        target = _current.get()
        return "backslashreplace" if target is not None else getattr(self._wrapped, "errors", "strict")

    def __getattr__(self, name: str) -> Any:
        if name == "_wrapped":  # an instance made without __init__ (copy, pickle): nothing to delegate to
            raise AttributeError(name)
        return getattr(self._wrapped, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._wrapped, name, value)

    def __repr__(self) -> str:
        return f"<tuidag RoutingStream over {self._wrapped!r}>"


class _BinaryTarget:
    """`sys.stdout.buffer` as a task thread sees it."""

    def __init__(self, target: LogTarget):
        self._target = target

    def write(self, data: bytes) -> int:
        return self._target.write_bytes(data)

    def flush(self) -> None:
        self._target.flush()

    def fileno(self) -> int:
        return self._target.fileno()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def routed(stream: Any) -> Any:
    """`stream` behind a router: for a program that is about to put `stream` in place of `sys.stdout` or
    `sys.stderr` itself (a UI capturing stray prints), so task threads keep writing to their logs from the very
    first write, rather than from the next `install()`."""
    return stream if isinstance(stream, RoutingStream) else RoutingStream(stream)


def install() -> None:
    """Route task output from now on. Idempotent and cheap, so every callable attempt calls it: if something
    replaced `sys.stdout` since (Textual does while its UI runs, pytest between tests), the new stream is wrapped
    in turn and keeps receiving the output of every thread that is not running a task."""
    global _patched
    with _install_lock:
        if not _patched:
            _patch_thread_start()
            _patch_pool_submit()
            _patched = True
        replaced = []
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, RoutingStream):
                setattr(sys, name, RoutingStream(stream))
                replaced.append(stream)
        if replaced:
            _route_logging_handlers(replaced)
        _default_logging()


# --- threads a task starts --------------------------------------------------------------------------------------
def _patch_thread_start() -> None:
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        target = _current.get()
        # A pool's worker threads outlive the task that happened to create them; pools route per work item instead.
        pool_worker = getattr(self, "pool_worker", False) or getattr(self, "_target", None) is _cf_thread._worker
        if target is not None and not pool_worker:
            run = self.run

            def run_with_target() -> None:
                _current.set(target)
                run()

            # This one thread's `run`: mypy allows no assignment to a method, even on an instance.
            self.run = run_with_target  # type: ignore[method-assign]
        original(self)

    start.__doc__ = original.__doc__
    start.__wrapped__ = original  # type: ignore[attr-defined]
    threading.Thread.start = start  # type: ignore[method-assign]


def _patch_pool_submit() -> None:
    original = ThreadPoolExecutor.submit

    def submit(self: ThreadPoolExecutor, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        target = _current.get()
        if target is None:
            return original(self, fn, *args, **kwargs)
        return original(self, _call_with_target, target, fn, *args, **kwargs)

    submit.__doc__ = original.__doc__
    submit.__wrapped__ = original  # type: ignore[attr-defined]
    # Patching a method is what mypy allows no assignment for; and typeshed gives ThreadPoolExecutor the `submit` of
    # Executor, so one taking the ThreadPoolExecutor it is installed on reads as narrower.
    ThreadPoolExecutor.submit = submit  # type: ignore[method-assign, assignment]


def _call_with_target(target: LogTarget, fn: Callable, /, *args: Any, **kwargs: Any) -> Any:
    token = _current.set(target)
    try:
        return fn(*args, **kwargs)
    finally:
        _current.reset(token)


# --- logging ----------------------------------------------------------------------------------------------------
def _route_logging_handlers(replaced: list[Any]) -> None:
    """Stream handlers created before routing hold the real stream; point them at a router over it, so the
    records a task emits through them land in its log while everybody else's still go where they went."""
    streams = {id(s) for s in (*replaced, sys.__stdout__, sys.__stderr__) if s is not None}
    loggers = [
        logging.getLogger(),
        *(lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)),
    ]
    for logger in loggers:
        for handler in list(logger.handlers):
            if (
                isinstance(handler, logging.StreamHandler)
                and id(handler.stream) in streams
                and not isinstance(handler.stream, RoutingStream)
            ):
                handler.setStream(RoutingStream(handler.stream))


class _TaskAwareLastResort(logging.Handler):
    """Python's last-resort handler (used when logging is not configured: WARNING and above, message only, to
    sys.stderr) for every other thread; for task threads, every record that reaches it, timestamped, into the log."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self._task_format = logging.Formatter(TASK_LOG_FORMAT)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if _current.get() is not None:
                text = self._task_format.format(record)
            elif record.levelno >= logging.WARNING:
                text = record.getMessage()
            else:
                return
            stream = sys.stderr
            if stream is not None:
                stream.write(text + "\n")
        except Exception:
            self.handleError(record)


def _default_logging() -> None:
    """When the program never configured logging, a task's `log.info(...)` would be dropped: let INFO through for
    task threads (into their logs) while every other thread sees exactly Python's default behaviour. Configuring
    logging (basicConfig, dictConfig, handlers on the root logger) still works as usual and takes precedence."""
    global _default_logging_done
    if _default_logging_done:
        return
    _default_logging_done = True
    root = logging.getLogger()
    if root.handlers or root.level != logging.WARNING or logging.lastResort is None:
        return
    if type(logging.lastResort).__name__ != "_StderrHandler":
        return  # someone else replaced it: leave it alone
    logging.lastResort = _TaskAwareLastResort()
    root.setLevel(logging.INFO)


def configure_child_logging() -> None:
    """In an isolated task's child process everything is the task's: unconfigured logging goes to stderr (the log)
    from INFO up."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(TASK_LOG_FORMAT))
        root.addHandler(handler)
        if root.level == logging.WARNING:
            root.setLevel(logging.INFO)
