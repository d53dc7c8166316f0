"""A Python callable's child process on a Dask worker: `python -m tuidag.engine.dask_callable CALL RESULT`.

The worker starts it as a shell task's leader (`dask_worker._CallableFiles`), so it runs in its own session with the
task's environment and workdir, its output goes to the log, and the tree kill stops it. CALL holds the callable
(pickled by value on the client with cloudpickle, so the worker needs no copy of the DAG's module) and its context;
RESULT receives `("ok", pickled value)` or `("error", reason)`.
"""
from __future__ import annotations

import pickle
import sys
import threading
from pathlib import Path
from typing import Any


def main(call_path: str, result_path: str) -> int:
    import os

    with open(call_path, "rb") as f:
        spec = pickle.load(f)
    from . import output_routing
    from .inprocess import TaskContext, call_task, describe_exception, task_traceback

    output_routing.configure_child_logging()  # as in an isolated task's child: logging from INFO up, formatted
    try:
        import cloudpickle

        func = cloudpickle.loads(spec["func"])
        if spec.get("source"):
            restore_source(func, *spec["source"])
        results = cloudpickle.loads(spec["results"])
        ctx = TaskContext(name=spec["name"], run_id=spec["run_id"], attempt=spec["attempt"], results=results,
                          cancelled=threading.Event(), env=dict(os.environ), workdir=Path(spec["workdir"]),
                          log_path=Path(spec["log_path"]), isolated=True)
        value = call_task(func, ctx)
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            value = None
        else:
            _write(result_path, ("error", f"exit code {code}" if isinstance(code, int) else f"raised SystemExit: {code}"))
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
    sys.stdout.reconfigure(line_buffering=True)
    sys.exit(main(sys.argv[1], sys.argv[2]))
