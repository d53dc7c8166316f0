"""A Python callable on a Dask worker: the files it travels through (`CallableFiles`, on the worker) and the child
process that calls it (`main`: `python -m tuidag.engine.dask.callable_task CALL RESULT`).

The worker starts the child as a shell task's leader (`runner`), so it runs in its own session with the task's
environment and workdir, its output goes to the log, and the tree kill stops it. CALL holds the callable
(pickled by value on the client with cloudpickle, so the worker needs no copy of the DAG's module) and its context;
RESULT receives `("ok", pickled value)` or `("error", reason)`.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

from ..executor import AttemptResult


class CallableFiles:
    """A Python callable on a worker: run in a child process (`main`) as a shell task's leader would be, so the tree
    kill stops it; the callable and its result travel through two files."""

    def __init__(self, folder: Path, spec: dict[str, Any], log_path: str):
        stem = folder / f"{spec['task']}.{spec['attempt']}"
        self.input = f"{stem}.call"
        self.output = f"{stem}.result"
        payload = {
            "func": spec["func"],
            "name": spec["task"],
            "run_id": spec["run_id"],
            "attempt": spec["attempt"],
            "results": spec["results"],
            "matrix": spec.get("matrix"),
            "workdir": spec["workdir"],
            "log_path": log_path,
            "source": spec.get("source"),
        }
        fd = os.open(self.input, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(payload, f)
        try:
            os.unlink(self.output)
        except FileNotFoundError:
            pass

    def command(self) -> str:
        import shlex

        return (
            f"exec {shlex.quote(sys.executable)} -m tuidag.engine.dask.callable_task "
            f"{shlex.quote(self.input)} {shlex.quote(self.output)}"
        )

    def outcome(self, result: AttemptResult) -> tuple[AttemptResult, bytes | None]:
        """The attempt's result with the callable's own reason (`raised ValueError: ...`) and pickled value."""
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


def main(call_path: str, result_path: str) -> int:
    with open(call_path, "rb") as f:
        spec = pickle.load(f)
    from .. import output_routing
    from ..inprocess import TaskContext, call_task, describe_exception, task_traceback

    output_routing.configure_child_logging()  # as in an isolated task's child: logging from INFO up, formatted
    try:
        import cloudpickle

        func = cloudpickle.loads(spec["func"])
        if spec.get("source"):
            restore_source(func, *spec["source"])
        results = cloudpickle.loads(spec["results"])
        ctx = TaskContext(
            name=spec["name"],
            run_id=spec["run_id"],
            attempt=spec["attempt"],
            results=results,
            cancelled=threading.Event(),
            env=dict(os.environ),
            workdir=Path(spec["workdir"]),
            log_path=Path(spec["log_path"]),
            isolated=True,
            matrix=spec.get("matrix") or {},
        )
        value = call_task(func, ctx)
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            value = None
        else:
            _write(
                result_path, ("error", f"exit code {code}" if isinstance(code, int) else f"raised SystemExit: {code}")
            )
            return code if isinstance(code, int) else 1
    except BaseException as exc:
        sys.stderr.write(task_traceback(exc))
        _write(result_path, ("error", describe_exception(exc)))
        return 1
    try:
        import cloudpickle

        data = cloudpickle.dumps(value)
    except Exception as exc:
        reason = f"the return value cannot be pickled: {type(exc).__name__}: {exc}"
        print(f"tuidag: {reason}", file=sys.stderr)
        _write(result_path, ("error", reason[:200]))
        return 1
    _write(result_path, ("ok", data))
    return 0


DYNAMIC = "<dynamic-code>"  # the file name cloudpickle gives the code it pickles by value


def restore_source(func: Any, path: str, source: str) -> None:
    """Give the code pickled by value (the callable and what its module defines) its file name back, and the file's
    lines to `linecache`, so that a traceback names the file and shows each line, as it does on the client (the
    file need not exist on the worker)."""
    import linecache
    import types

    lines = source.splitlines(True)
    linecache.cache[path] = (len(source), None, lines, path)

    def fixed(code: types.CodeType) -> types.CodeType:
        consts = tuple(fixed(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
        name = path if code.co_filename == DYNAMIC else code.co_filename
        return code.replace(co_filename=name, co_consts=consts)

    seen: set[int] = set()

    def visit(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            if obj.__code__.co_filename == DYNAMIC:
                obj.__code__ = fixed(obj.__code__)
                for value in list(obj.__globals__.values()):
                    visit(value)
        elif isinstance(obj, type):
            for value in list(vars(obj).values()):
                visit(getattr(value, "__func__", value))

    visit(getattr(func, "__func__", func))


def _write(path: str, outcome: tuple) -> None:
    with open(path, "wb") as f:
        pickle.dump(outcome, f)


if __name__ == "__main__":
    assert isinstance(sys.stdout, io.TextIOWrapper)  # the attempt's log file
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main(sys.argv[1], sys.argv[2]))
