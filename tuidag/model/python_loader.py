"""Loading a DAG written in Python: import the file as a module and take the one `tuidag.Dag` it defines.

Here, below the CLI, so `tuidag run FILE.py` loads a file without the CLI importing the Python front end (which
imports the CLI for `Dag.main()`): the loader looks for instances of `PythonDag`, the base `tuidag.Dag` derives from.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import CodeType, ModuleType, TracebackType

from .errors import DagError, DagErrors, Location, Note, describe_exception
from .source import read_source
from .spec import DagSpec


class PythonDag:
    """What a Python DAG file defines at module level (`tuidag.Dag`): a name, where it was defined, and its spec."""

    name: str | None  # None: named after its file
    location: Location

    def spec(self, source: str | os.PathLike[str] | None = None) -> DagSpec:
        raise NotImplementedError


def load_python(path: str | os.PathLike[str], notes: list[Note] | None = None) -> DagSpec:
    """Import a Python file as a module (its `if __name__ == "__main__":` block does not run) and return the spec of
    the one `Dag` it defines at module level. Raises DagErrors (located) for every problem; remarks that are not
    errors (an exclude that matches nothing) are appended to `notes` when given."""
    path = Path(path)
    try:
        return _slots_shown_as(_load_python(path, notes), path)
    except DagErrors as exc:  # Python records files by absolute path: show this one as it was given, like the
        partial = None if exc.partial is None else _slots_shown_as(exc.partial, path)  # YAML loaders do
        raise DagErrors([_shown_as(err, path) for err in exc.errors], partial) from None


def _shown_as(err: DagError, path: Path) -> DagError:
    return DagError(err.message, _location_as(err.location, path))


def _location_as(loc: Location | None, path: Path) -> Location | None:
    if loc is None or loc.file == str(path) or not _same_file(loc.file, str(path)):
        return loc
    return Location(str(path), loc.line, loc.col)


def _slots_shown_as(dag: DagSpec, path: Path) -> DagSpec:
    """The DAG with its slot requests located in the file as it was given, as its other errors are: checked against
    the capacities later (`--resources`), they must point at the same file."""
    tasks = {}
    for name, task in dag.tasks.items():
        moved = {
            kind: request._replace(location=_location_as(request.location, path))
            for kind, request in task.resources.items()
        }
        tasks[name] = task._replace(resources=moved) if moved != dict(task.resources) else task
    return dag.replace(tasks=tasks) if any(tasks[n] is not t for n, t in dag.tasks.items()) else dag


def _load_python(path: Path, notes: list[Note] | None = None) -> DagSpec:
    file = str(path)
    read_source(path)  # an unreadable file reads like any other DAG error
    module = _import_file(path)
    found: dict[int, tuple[list[str], PythonDag]] = {}
    for attr, value in vars(module).items():
        if isinstance(value, PythonDag):
            found.setdefault(id(value), ([], value))[0].append(attr)
    if not found:
        raise DagErrors(
            [DagError('no tuidag.Dag found at module level: define one, e.g. dag = Dag("etl")', Location(file, 1, 1))]
        )
    dags = list(found.values())
    if len(dags) > 1:
        listed = ", ".join(f"{' = '.join(names)} (line {dag.location.line})" for names, dag in dags)
        second = dags[1][1].location
        where = second if _same_file(second.file, file) else Location(file, 1, 1)
        raise DagErrors([DagError(f"found {len(dags)} Dag objects: {listed}; a file may define only one", where)])
    spec = dags[0][1].spec(source=path)
    if notes is not None:
        notes.extend(getattr(dags[0][1], "notes", ()))
    return spec


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _module_name(path: Path) -> str:
    """The file's stem when that is free to use as a module name (so `__name__` and logger names read naturally
    and child processes can import it by name), else a private name."""
    stem = path.stem
    if stem.isidentifier() and stem not in sys.modules:
        try:
            spec = importlib.util.find_spec(stem)
        except (ImportError, ValueError):
            spec = None
        if spec is None or (spec.origin and _same_file(spec.origin, str(path))):
            return stem
    return "tuidag_dag_" + re.sub(r"\W", "_", stem)


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Imports a DAG file from its source, always: Python would take a cached `.pyc` whose recorded mtime (in whole
    seconds) and size match the file's, so an edit within the same second that keeps the size (`LIMIT = 10` ->
    `LIMIT = 11`) ran the old code, and `--resume` fingerprinted the old code too. No `__pycache__` is written
    into the user's folder either. The DAG file's own imports are imported as Python imports them."""

    def get_code(self, fullname: str) -> CodeType:
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


def file_spec(name: str, file: str) -> ModuleSpec | None:
    """The import spec of a DAG file, loaded by `SourceOnlyLoader`."""
    return importlib.util.spec_from_file_location(name, file, loader=SourceOnlyLoader(name, file))


def _import_file(path: Path) -> ModuleType:
    file = str(path)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # as `python FILE` would: the file's own imports of its neighbours work
    name = _module_name(path)
    spec = file_spec(name, file)
    if spec is None or spec.loader is None:
        raise DagErrors([DagError("cannot import this file as Python", Location(file, 1, 1))])
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (DagErrors, KeyboardInterrupt):
        raise
    except SyntaxError as exc:
        _restore(name, previous)
        where = Location(exc.filename or file, exc.lineno or 1, exc.offset or 1)
        raise DagErrors([DagError(f"invalid Python: {exc.msg}", where)]) from None
    except BaseException as exc:
        _restore(name, previous)
        where = _raise_site(exc.__traceback__, path) or Location(file, 1, 1)
        what = f"exit code {exc.code}" if isinstance(exc, SystemExit) else describe_exception(exc)
        raise DagErrors([DagError(f"error while importing the file: {what}", where)]) from None
    return module


def _restore(name: str, previous: ModuleType | None) -> None:
    if previous is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = previous


def _raise_site(tb: TracebackType | None, path: Path) -> Location | None:
    """The innermost traceback line inside the file being loaded."""
    where = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if _same_file(code.co_filename, str(path)):
            where = Location(str(path), tb.tb_lineno, 1)
        tb = tb.tb_next
    return where
