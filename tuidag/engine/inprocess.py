"""Running Python callables as tasks: on the scheduler's pool thread, or (`isolate=True`) in a child process.

In a thread (the default), the callable runs on the pool thread that picked up the task, with its output routed to
the task's log (see `output_routing`). Python cannot stop a thread from outside, so cancelling (or a timeout) is
cooperative: `ctx.cancelled` is set, and the task ends CANCELLED (or FAILED with reason "timeout") when the callable
returns or raises. A callable that never looks at `ctx.cancelled` runs to its end.

With `isolate=True` the callable runs in a child process started by multiprocessing's forkserver (a fork of a clean
server process, never of this multi-threaded one). The child makes itself a session leader and points its file
descriptors 1 and 2 at the log, so everything it and its own children write lands there, and it is killed exactly
like a shell task: `IsolatedAttempt` is a `ShellAttempt` whose leader is the child, so the same tree collection,
SIGTERM, grace period and SIGKILL apply. The return value comes back through a pipe (it must be picklable).
The child imports the function's module again (its `if __name__ == "__main__":` block does not run), so the
function must be defined at module level.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model.errors import describe_exception
from ..model.python_loader import file_spec
from . import orphans, output_routing
from .cgroup import RunCgroups
from .executor import Attempt, AttemptResult, RunningAttempt
from .shell_attempt import ShellAttempt, open_log, write_header


@dataclass(frozen=True)
class TaskContext:
    """What a callable task receives as its one argument."""

    name: str
    run_id: str
    attempt: int  # 1-based attempt number
    results: Mapping[str, Any]  # return values of the dependencies, by task name (None for shell tasks)
    cancelled: threading.Event  # set when the task is cancelled or timed out: stop soon and return
    env: Mapping[str, str]  # the environment a shell task would get (in a thread, os.environ is shared)
    workdir: Path  # the task's working directory (in a thread, the cwd is shared)
    log_path: Path  # this task's log file
    isolated: bool = field(default=False)  # running in its own child process
    matrix: Mapping[str, Any] = field(default_factory=dict)  # a matrix instance's values, by key


def _callable(attempt: Attempt) -> Callable[..., Any]:
    func = attempt.task.func
    assert func is not None  # launch_callable starts only tasks with a callable
    return func


def launch_callable(attempt: Attempt, cgroups: RunCgroups | None = None) -> RunningAttempt:
    """An isolated callable's process gets a cgroup like a shell task's leader; one in a thread runs in tuidag."""
    if attempt.task.func is None:
        raise ValueError(f"task {attempt.task.name!r} has no callable")
    return IsolatedAttempt(attempt, cgroups) if attempt.task.isolate else ThreadAttempt(attempt)


def call_task(func: Callable[..., Any], ctx: TaskContext) -> Any:
    """`func(ctx)`, or `func()` for a callable that takes no arguments."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature: assume they take the context
        return func(ctx)
    takes_arg = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)
    return func(ctx) if takes_arg else func()


#: Where tuidag's own frames above a task's code are: they start every traceback otherwise and say nothing about it.
_OWN_FRAMES = {
    os.path.normcase(os.path.abspath(__file__)),
    os.path.normcase(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dask", "callable_task.py")),
}


def task_traceback(exc: BaseException) -> str:
    """The traceback a failed callable's log gets: from the task's own code on, without the frames of tuidag that
    called it (`call_task` and the attempt around it)."""
    tb = exc.__traceback__
    while (
        tb is not None
        and tb.tb_next is not None
        and os.path.normcase(os.path.abspath(tb.tb_frame.f_code.co_filename)) in _OWN_FRAMES
    ):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _exit_result(exc: SystemExit) -> AttemptResult:
    code = exc.code
    if code is None or code == 0:
        return AttemptResult(True, None)
    if isinstance(code, int):
        return AttemptResult(False, code, f"exit code {code}")
    return AttemptResult(False, 1, f"raised SystemExit: {code}")


def _context(attempt: Attempt, cancelled: threading.Event, isolated: bool) -> TaskContext:
    return TaskContext(
        name=attempt.task.name,
        run_id=attempt.run_id,
        attempt=attempt.number,
        results=dict(attempt.results),
        cancelled=cancelled,
        env=dict(attempt.env),
        workdir=Path(attempt.workdir),
        log_path=Path(attempt.log_path),
        isolated=isolated,
        matrix=dict(attempt.task.matrix),
    )


# --- in a thread ------------------------------------------------------------------------------------------------
class ThreadAttempt(RunningAttempt):
    """A callable on the pool thread that calls `wait()`. `kill()` only sets `ctx.cancelled`."""

    def __init__(self, attempt: Attempt):
        self.attempt = attempt
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._kill_reason: str | None = None
        output_routing.install()
        fd = open_log(attempt)  # an unwritable log fails the attempt here
        try:
            write_header(fd, attempt)
        finally:
            os.close(fd)
        self._log = output_routing.LogTarget(attempt.log_path)

    def kill(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._kill_reason is not None:
                return
            self._kill_reason = reason
        what = "timed out" if reason == "timeout" else "cancel requested"
        self._log.write_bytes(
            f"--- tuidag: {what}: ctx.cancelled is set, waiting for the callable to return ---\n".encode()
        )
        self.cancelled.set()

    def wait(self) -> AttemptResult:
        try:
            result = self._run()
        finally:
            self._log.close()
            orphans.adopt_thread_children()  # what the callable started and left running ends with the run
        with self._lock:
            reason = self._kill_reason
        if reason == "timeout":
            return AttemptResult(False, result.exit_code, "timeout")
        if reason is not None:
            return AttemptResult(False, result.exit_code, reason, cancelled=True)
        return result

    def _run(self) -> AttemptResult:
        if self.cancelled.is_set():  # cancelled between launch() and wait(): don't start it at all
            self._log.write_bytes(b"tuidag: cancelled before the callable started\n")
            return AttemptResult(False, None, "cancelled")
        timer = None
        if self.attempt.timeout:
            timer = threading.Timer(self.attempt.timeout, self.kill, args=("timeout",))
            timer.daemon = True
            timer.start()
        ctx = _context(self.attempt, self.cancelled, isolated=False)
        token = output_routing.set_target(self._log)
        try:
            value = call_task(_callable(self.attempt), ctx)
        except SystemExit as exc:
            return _exit_result(exc)
        except BaseException as exc:  # KeyboardInterrupt, GeneratorExit, asyncio.CancelledError...: all end it
            self._log.write(task_traceback(exc))
            return AttemptResult(False, None, describe_exception(exc))
        finally:
            output_routing.reset_target(token)
            if timer is not None:
                timer.cancel()
        return AttemptResult(True, None, value=value)


# --- in a child process -----------------------------------------------------------------------------------------
FunctionRef = tuple[str, "str | None", str]  # (module name, module file, qualified name)


def function_ref(func: Callable[..., Any]) -> FunctionRef:
    """How a child process finds `func` again: its module (by name, or by file) and its qualified name."""
    module = sys.modules.get(func.__module__)
    file: str | None = getattr(module, "__file__", None)
    return (func.__module__, os.path.realpath(file) if file else None, func.__qualname__)


def isolate_problem(func: Callable[..., Any]) -> str | None:
    """Why `func` can't run with isolate=True (the child process must be able to import it), or None."""
    qualname = getattr(func, "__qualname__", None)
    module = getattr(func, "__module__", None)
    if not qualname or not module or "<" in qualname:
        return "needs a function defined at module level (the child process imports it by name)"
    return None


def resolve_function(ref: FunctionRef) -> Callable[..., Any]:
    """The function `ref` names, importing its module if this process does not have it yet."""
    module_name, module_file, qualname = ref
    module = _loaded_module(module_name, module_file)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{module_name}.{qualname} is not callable")
    return obj


def _same_file(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    return os.path.realpath(a) == os.path.realpath(b)


def _loaded_module(name: str, file: str | None):
    candidates = [sys.modules.get(name)]
    if name == "__main__":
        candidates.append(sys.modules.get("__mp_main__"))  # what multiprocessing imports the main script as
    for module in candidates:
        if module is not None and (file is None or _same_file(getattr(module, "__file__", None), file)):
            return module
    if name != "__main__":
        try:  # by name when that finds this very file (packages keep their relative imports working)
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and (file is None or _same_file(spec.origin, file)):
            return importlib.import_module(name)
    if file is None:
        raise ImportError(f"cannot find module {name!r}")
    as_name = "__mp_main__" if name == "__main__" else name
    spec = file_spec(as_name, file)  # from its source, as the parent imported it
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[as_name] = module
    if name == "__main__":
        sys.modules["__main__"] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class _ChildSpec:
    """Everything the child needs, sent over the forkserver's pipe (so: picklable)."""

    name: str
    run_id: str
    attempt: int
    env: dict[str, str]
    workdir: str
    log_path: str
    results: dict[str, Any]
    matrix: dict[str, Any] = field(default_factory=dict)


_mp_lock = threading.Lock()
_mp_ready = False


def _mp_context():
    global _mp_ready
    ctx = multiprocessing.get_context("forkserver")
    with _mp_lock:
        if not _mp_ready:
            # The server imports this module once; every child is forked from it with the module already loaded.
            ctx.set_forkserver_preload([__name__])
            _mp_ready = True
    return ctx


class _ChildHandle:
    """The part of `subprocess.Popen` that ShellAttempt uses, over a multiprocessing child. The forkserver (its
    parent) reaps it and sends the exit status down the sentinel, which must be read exactly once: polls are
    serialised here, and the child is kept out of multiprocessing's own bookkeeping (see `_forget`)."""

    def __init__(self, child: multiprocessing.process.BaseProcess):
        self._child = child
        assert child.pid is not None  # started
        self.pid = child.pid
        self._lock = threading.Lock()
        self._code: int | None = None

    def poll(self) -> int | None:
        with self._lock:
            if self._code is None:
                self._code = self._child.exitcode
            return self._code

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def wait(self, timeout: float | None = None) -> int:
        multiprocessing.connection.wait([self._child.sentinel], timeout)
        code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
        return code


def _forget(child: multiprocessing.process.BaseProcess) -> None:
    """multiprocessing polls every child it started whenever another one starts (and joins them at exit); a second
    reader of the status would take it from us. The attempt owns this child's whole lifecycle instead."""
    children = getattr(multiprocessing.process, "_children", None)
    if isinstance(children, set):
        children.discard(child)


class IsolatedAttempt(ShellAttempt):
    """A callable in a child process, controlled exactly like a shell task's process tree."""

    identify_by_create_time = True  # the forkserver reaps the child, so its pid can be reused before we know

    def __init__(self, attempt: Attempt, cgroups: RunCgroups | None = None):
        self._outcome: tuple[str, Any] | None = None
        self._reader: threading.Thread | None = None
        func = _callable(attempt)
        super().__init__(attempt, [("run", f"{func.__module__}.{func.__qualname__}")], cgroups)

    def _start_step(self, index: int) -> None:
        attempt = self.attempt
        func = _callable(attempt)
        problem = isolate_problem(func)
        fd = open_log(attempt)
        try:
            write_header(fd, attempt)
            if problem:
                raise RuntimeError(f"isolate=True {problem}")
            spec = _ChildSpec(
                attempt.task.name,
                attempt.run_id,
                attempt.number,
                dict(attempt.env),
                str(attempt.workdir),
                str(attempt.log_path),
                dict(attempt.results),
                dict(attempt.task.matrix),
            )
            ctx = _mp_context()
            receiver, sender = ctx.Pipe(duplex=False)
            child = ctx.Process(
                target=_child_main,
                args=(function_ref(func), spec, sender),
                name=f"tuidag-{attempt.task.name}",
            )
            try:
                child.start()  # pickling errors (an unpicklable dependency result...) raise here
            except BaseException:
                receiver.close()
                raise
            finally:
                sender.close()
        except Exception as exc:
            os.write(fd, f"tuidag: cannot start: {exc}\n".encode())
            raise
        finally:
            os.close(fd)
        _forget(child)
        if self._cgroup is not None:
            self._cgroup.add(child.pid)
        self._step = index
        self._track(_ChildHandle(child))
        self._reader = threading.Thread(
            target=self._receive, args=(receiver,), daemon=True, name=f"tuidag-result-{attempt.task.name}"
        )
        self._reader.start()

    def _receive(self, conn: multiprocessing.connection.Connection) -> None:
        """Read the child's one message (it may be large: reading while the child writes avoids a full pipe)."""
        try:
            self._outcome = conn.recv()
        except (EOFError, OSError):
            pass  # killed, or died before reporting
        except Exception as exc:  # the value did not unpickle here
            self._outcome = ("unreadable", f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def wait(self) -> AttemptResult:
        result = super().wait()
        if self._reader is not None:
            self._reader.join(5.0)  # the child and its tree are gone: the pipe is at EOF
        outcome = self._outcome or ("none", None)
        kind, payload = outcome
        if result.ok:
            if kind == "ok":
                return result._replace(value=payload)
            if kind == "unreadable":
                self._note(f"tuidag: the return value could not be read back: {payload}\n")
            return result
        if kind == "error" and not result.cancelled and result.reason != "timeout":
            return result._replace(reason=payload)
        return result

    def _note(self, text: str) -> None:
        fd = open_log(self.attempt)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _child_main(ref: FunctionRef, spec: _ChildSpec, conn: multiprocessing.connection.Connection) -> None:
    """The child process: own session, output into the log, the task's environment and cwd, then the callable."""
    os.setsid()  # pid == pgid == sid, as for a shell task: the tree kill finds everything it starts
    _redirect_output(spec.log_path)
    os.environ.clear()
    os.environ.update(spec.env)  # inherited by whatever the task starts (and tags it for the tree kill)
    outcome: tuple[str, Any]
    exit_code: Any = 0
    try:
        os.chdir(spec.workdir)
        func = resolve_function(ref)
        output_routing.configure_child_logging()
        ctx = TaskContext(
            name=spec.name,
            run_id=spec.run_id,
            attempt=spec.attempt,
            results=spec.results,
            cancelled=threading.Event(),
            env=dict(spec.env),
            workdir=Path(spec.workdir),
            log_path=Path(spec.log_path),
            isolated=True,
            matrix=spec.matrix,
        )
        value = call_task(func, ctx)
    except SystemExit as exc:
        outcome, exit_code = ("exit", exc.code), exc.code
    except BaseException as exc:
        sys.stderr.write(task_traceback(exc))
        outcome, exit_code = ("error", describe_exception(exc)), 1
    else:
        outcome = ("ok", value)
    try:
        conn.send(outcome)
    except Exception as exc:  # an unpicklable return value: the task still succeeded
        print(f"tuidag: the return value could not be sent back: {type(exc).__name__}: {exc}", file=sys.stderr)
        conn.send(("ok", None))
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    if exit_code:
        sys.exit(exit_code)


def _redirect_output(log_path: str) -> None:
    """fd 0 from /dev/null, fds 1 and 2 into the log; fresh sys.stdout/sys.stderr objects on top of them."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )
