"""The Python front end: a `Dag` object that collects callables and shell commands, and `load_python(path)`, which
imports a file and turns the one `Dag` it defines into the same DagSpec the YAML front ends produce.

    from tuidag import Dag

    dag = Dag("etl", max_parallel=4)

    @dag.task()
    def extract(ctx):
        print("pulling rows")        # into extract's log file
        return 42                    # kept in the journal, and ctx.results["extract"] downstream

    @dag.task(depends_on=[extract], retries=1)
    def transform(ctx):
        ...

    dag.shell("load", "psql -f load.sql", depends_on=[transform])

    if __name__ == "__main__":
        dag.main()                   # the options of `tuidag run`

Mistakes (unknown or duplicate names, cycles, bad options) are collected while the file runs and reported together,
as `FILE:LINE:COL: message` pointing at the decorator or `dag.shell(...)` call, when the DAG is loaded or run.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from .model.counts import counted
from .model.errors import DagError, DagErrors, Location, Note, short_repr
from .model.matrix import Matrix, expand
from .model.python_loader import PythonDag, load_python
from .model.python_options import OptionChecks, is_int
from .model.service import DEFAULT_MAX_RESTARTS, DEFAULT_READY_TIMEOUT
from .model.spec import (
    DEFAULT_KILL_GRACE,
    MAX_COUNT,
    NOTIFY_CHOICES,
    DagSpec,
    FailurePolicy,
    TaskSpec,
    surrogate_problem,
)
from .model.validate import graph_errors, io_errors

if TYPE_CHECKING:  # imported on first use (`__getattr__` below)
    from .engine.inprocess import TaskContext

__all__ = ["Dag", "TaskContext", "load_python"]


def __getattr__(name: str) -> Any:
    if name == "TaskContext":  # the engine is imported when something runs, not to define or validate a DAG
        from .engine.inprocess import TaskContext

        return TaskContext
    raise AttributeError(f"module 'tuidag.api' has no attribute {name!r}")


@dataclass
class _Task:
    """A task as registered, before the DAG is assembled (dependencies may name tasks registered later)."""

    name: str
    location: Location
    depends_on: list[Any]
    options: dict[str, Any] = field(default_factory=dict)
    matrix: Matrix | None = None
    broken: bool = False  # given a matrix too wrong to read (its errors say why)


class Dag(PythonDag):
    """A DAG built in Python. Tasks are callables (`@dag.task()`) or shell commands (`dag.shell(...)`)."""

    def __init__(
        self,
        name: str | None = None,
        *,
        max_parallel: int | None = None,
        on_failure: str | FailurePolicy = FailurePolicy.SKIP_DOWNSTREAM,
        kill_grace: float | str = DEFAULT_KILL_GRACE,
        env: Mapping[str, Any] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        resources: Mapping[str, int] | None = None,
        on_end: str | None = None,
        on_run_failure: str | None = None,
        notify: str | None = None,
    ):
        """`resources` declares slot capacities, e.g. {"gpu": 2}; tasks ask for slots with their `resources`.
        `on_end`/`on_run_failure`: shell commands run after every run / a failed run; `notify`: never, end or
        failure (when a viewer rings the terminal)."""
        self.location = _caller_location()
        self.source: Path | None = _source_file(self.location.file)
        self._errors: list[DagError] = []
        self._checks = OptionChecks(self._errors)
        self._tasks: dict[str, _Task] = {}
        self._by_func: dict[Any, list[str]] = {}
        at = self.location
        self.name: str | None = None
        if name is not None and self._checks.check(
            isinstance(name, str) and name.strip() != "", at, f"Dag name must be a non-empty string, got {name!r}"
        ):
            self.name = name
        self.max_parallel: int | None = None
        if max_parallel is not None and self._checks.check(
            is_int(max_parallel, 1),
            at,
            f"max_parallel must be an integer from 1 to {MAX_COUNT:,}, got {short_repr(max_parallel)}",
        ):
            self.max_parallel = max_parallel
        self.on_failure = FailurePolicy.SKIP_DOWNSTREAM
        choices = [policy.value for policy in FailurePolicy]
        if self._checks.check(
            str(on_failure) in choices, at, f"on_failure must be one of {', '.join(choices)}, got {on_failure!r}"
        ):
            self.on_failure = FailurePolicy(str(on_failure))
        self.kill_grace = self._checks.duration(
            kill_grace, "kill_grace", at, positive=False, default=DEFAULT_KILL_GRACE
        )
        self.env = self._checks.env(env, "env", at)
        self.workdir = self._checks.path(workdir, "workdir", at)
        before = len(self._errors)
        self.resources = self._checks.slots(resources, "resources", at, minimum=0)
        self._capacities_wrong = len(self._errors) > before  # then requests can't be checked against them
        self.on_end = self._checks.command(on_end, "on_end", at)
        self.on_run_failure = self._checks.command(on_run_failure, "on_run_failure", at)
        self.notify: str | None = None
        if notify is not None and self._checks.check(
            notify in NOTIFY_CHOICES, at, f"notify must be one of {', '.join(NOTIFY_CHOICES)}, got {notify!r}"
        ):
            self.notify = notify
        self.notes: list[Note] = []  # remarks on the last spec() that are not errors

    def __repr__(self) -> str:
        return f"<tuidag.Dag {self.name or '(unnamed)'}: {counted(len(self._tasks), 'task')}>"

    @property
    def task_names(self) -> tuple[str, ...]:
        return tuple(self._tasks)

    # --- building -----------------------------------------------------------------------------------------------
    def task(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        depends_on: Iterable[Any] | Any = (),
        retries: int = 0,
        retry_delay: float | str = 0,
        timeout: float | str | None = None,
        env: Mapping[str, Any] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        isolate: bool = False,
        resources: Mapping[str, int] | None = None,
        inputs: Iterable[str | os.PathLike[str]] | str = (),
        outputs: Iterable[str | os.PathLike[str]] | str = (),
        cache: bool = True,
        env_inputs: Iterable[str] | str = (),
        matrix: Mapping[str, Any] | None = None,
        max_parallel: int | None = None,
        instance_name: str | None = None,
        service: bool = False,
    ):
        """Register a callable as a task: `@dag.task()` (or bare `@dag.task`). It is called with a `TaskContext`
        (or with no argument if it takes none) and returns the function unchanged.

        The task is named after the function unless `name` is given. `depends_on` lists functions registered in
        this DAG or task names. It runs on a pool thread of the executor; with `isolate=True` in a child process,
        where it can be killed (then it must be a module-level function and its return value picklable).

        `matrix` ({"lr": [0.01, 0.1], "seed": [1, 2], "include": [...], "exclude": [...]}) makes it one instance per
        combination (`ctx.matrix` holds the instance's values); `max_parallel` limits how many run at once and
        `instance_name` ("train-${{ matrix.lr }}") names them."""
        call_site = _caller_location()

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            at = _function_location(f) or call_site
            if not callable(f):
                self._errors.append(DagError(f"@dag.task() needs a function, got {f!r}", call_site))
                return f
            task_name = name if name is not None else getattr(f, "__name__", None)
            if not isinstance(task_name, str):
                self._errors.append(DagError(f"task name must be a string, got {task_name!r}", call_site))
                return f
            if isolate is not True and isolate is not False:
                self._errors.append(DagError(f"task '{task_name}': isolate must be True or False, got {isolate!r}", at))
            elif isolate:
                from .engine.inprocess import isolate_problem

                problem = isolate_problem(f)
                if problem:
                    self._errors.append(DagError(f"task '{task_name}': isolate=True {problem}", at))
            if service is not False:
                self._errors.append(
                    DagError(
                        f"task '{task_name}': a callable can't be a service (it runs on a thread of tuidag's, which "
                        "can't be stopped or checked like a server): make it a command with "
                        "dag.shell(..., service=True)",
                        at,
                    )
                )
            options = self._checks.options(task_name, at, retries, retry_delay, timeout, env, workdir, resources)
            options.update(self._checks.io_options(task_name, at, inputs, outputs, cache, env_inputs))
            sweep = self._checks.matrix(task_name, at, matrix, max_parallel, instance_name)
            self._add(
                _Task(
                    task_name,
                    at,
                    _dependency_list(depends_on),
                    {"func": f, "isolate": bool(isolate), **options},
                    sweep,
                    broken=matrix is not None and sweep is None,
                ),
                f,
            )
            return f

        return register(func) if func is not None else register

    def shell(
        self,
        name: str,
        run: str,
        *,
        depends_on: Iterable[Any] | Any = (),
        setup: str | None = None,
        env: Mapping[str, Any] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        retries: int = 0,
        retry_delay: float | str = 0,
        timeout: float | str | None = None,
        resources: Mapping[str, int] | None = None,
        inputs: Iterable[str | os.PathLike[str]] | str = (),
        outputs: Iterable[str | os.PathLike[str]] | str = (),
        cache: bool = True,
        env_inputs: Iterable[str] | str = (),
        matrix: Mapping[str, Any] | None = None,
        max_parallel: int | None = None,
        instance_name: str | None = None,
        service: bool = False,
        ready_when: Mapping[str, Any] | None = None,
        ready_timeout: float | str = DEFAULT_READY_TIMEOUT,
        restart: str = "no",
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        restart_delay: float | str = 0,
        interruptible: bool = True,
    ) -> str:
        """Register a shell command (`sh -c`) as a task. Returns its name, to use in other tasks' `depends_on`.
        `matrix`, `max_parallel` and `instance_name` make it a sweep, as for `task()`. `service=True` makes it a
        service, as the YAML key does: `ready_when` ({"port": 5432}, {"http": URL, "status": 200}, {"log": REGEX},
        {"command": CMD}, each with an optional "interval"), `ready_timeout`, `restart` ("no" or "on-failure"),
        `max_restarts` and `restart_delay`. `interruptible=False`: under `--watch`, a running attempt is left to finish
        before the task runs again."""
        at = _caller_location()
        if not isinstance(name, str):
            self._errors.append(DagError(f"task name must be a string, got {name!r}", at))
            return str(name)
        options = self._checks.options(name, at, retries, retry_delay, timeout, env, workdir, resources)
        options.update(self._checks.io_options(name, at, inputs, outputs, cache, env_inputs))
        options.update(self._checks.shell_options(name, at, run, setup, interruptible))
        options.update(
            self._checks.service_options(
                name,
                at,
                (service, ready_when, ready_timeout, restart, max_restarts, restart_delay),
                outputs,
                retries,
                timeout,
            )
        )
        sweep = self._checks.matrix(name, at, matrix, max_parallel, instance_name)
        broken = matrix is not None and sweep is None
        self._add(_Task(name, at, _dependency_list(depends_on), options, sweep, broken), None)
        return name

    def _add(self, task: _Task, func: Callable[..., Any] | None) -> None:
        first = self._tasks.get(task.name)
        if first is not None:
            self._errors.append(
                DagError(f"duplicate task '{task.name}' (first defined on line {first.location.line})", task.location)
            )
            return
        self._tasks[task.name] = task
        if func is not None:
            try:
                self._by_func.setdefault(func, []).append(task.name)
            except TypeError:  # an unhashable callable can only be depended on by name
                pass

    # --- assembling ---------------------------------------------------------------------------------------------
    def spec(self, source: str | os.PathLike[str] | None = None) -> DagSpec:
        """The validated DagSpec. Raises DagErrors listing every mistake, located at the calls that made them.
        `source` is the file the DAG counts as coming from (state dir, default name); default: where `Dag()` ran."""
        src = Path(source) if source is not None else self.source
        folder = src.resolve().parent if src is not None else Path.cwd()
        errors = list(self._errors)
        workdir = (folder / self.workdir).resolve() if self.workdir is not None else folder
        tasks: dict[str, TaskSpec] = {}
        matrices = {task.name: task.matrix for task in self._tasks.values() if task.matrix is not None}
        broken = frozenset(task.name for task in self._tasks.values() if task.broken)
        for task in self._tasks.values():
            deps, where = self._resolve(task, errors)
            options = dict(task.options)
            if options.get("workdir") is not None:
                options["workdir"] = (workdir / options["workdir"]).resolve()
            tasks[task.name] = TaskSpec(
                name=task.name, depends_on=tuple(deps), location=task.location, dep_locations=tuple(where), **options
            )
        if not self._tasks:
            errors.append(DagError("the DAG has no tasks: add some with @dag.task() or dag.shell()", self.location))
        self.notes = []
        expanded = expand(tasks, matrices, errors, self.notes, broken=broken)
        tasks = expanded.tasks
        errors.extend(graph_errors(tasks))
        errors.extend(io_errors(tasks, workdir, folder))
        name = self.name or (src.stem if src is not None else "dag")
        errors.extend(self._surrogates(name, tasks))
        settings: dict[str, Any] = {"max_parallel": self.max_parallel} if self.max_parallel else {}
        # Slot requests are checked against the capacities when it runs (`--resources` may still declare some).
        dag = DagSpec(
            name=name,
            tasks=tasks,
            on_failure=self.on_failure,
            kill_grace=self.kill_grace,
            env=self.env,
            workdir=workdir,
            source=src.resolve() if src is not None else None,
            resources={**self.resources, **expanded.capacities},
            groups=expanded.groups,
            on_end=self.on_end,
            on_run_failure=self.on_run_failure,
            notify=self.notify,
            **settings,
        )
        if errors:
            raise DagErrors(errors, partial=None if self._capacities_wrong else dag)
        return dag

    def _surrogates(self, name: str, tasks: Mapping[str, TaskSpec]) -> list[DagError]:
        """Strings that can't be encoded (a lone surrogate such as "\\ud800"): no terminal, file or command line
        takes them, so they are refused here rather than failing a task or a print later."""
        texts: list[tuple[str, str, Location | None]] = [
            ("Dag name", name, self.location),
            *((f"env value for '{k}'", v, self.location) for k, v in self.env.items()),
        ]
        for task in tasks.values():
            what = f"task '{task.name}': "
            texts += [
                (what + "run", task.run or "", task.location),
                (what + "setup", task.setup or "", task.location),
                (what + "workdir", str(task.workdir or ""), task.location),
            ]
            texts += [(f"{what}env value for '{k}'", v, task.location) for k, v in task.env.items()]
        return [
            DagError(problem, at) for what, text, at in texts if (problem := surrogate_problem(what, text)) is not None
        ]

    def _resolve(self, task: _Task, errors: list[DagError]) -> tuple[list[str], list[Location]]:
        """Dependency names (functions looked up among this DAG's tasks), each located at the task's call."""
        names: list[str] = []
        for dep in task.depends_on:
            if isinstance(dep, str):
                dep_name = dep
            elif callable(dep):
                registered = self._by_func.get(dep, []) if _hashable(dep) else []
                label = getattr(dep, "__qualname__", repr(dep))
                if not registered:
                    errors.append(
                        DagError(
                            f"task '{task.name}' depends on {label}(), which is not a task of this "
                            f"DAG (register it with @dag.task())",
                            task.location,
                        )
                    )
                    continue
                if len(registered) > 1:
                    errors.append(
                        DagError(
                            f"task '{task.name}' depends on {label}(), which is registered as "
                            f"several tasks ({', '.join(registered)}): name the one you mean",
                            task.location,
                        )
                    )
                    continue
                dep_name = registered[0]
            else:
                errors.append(
                    DagError(
                        f"task '{task.name}': depends_on entries must be task functions or task names, got {dep!r}",
                        task.location,
                    )
                )
                continue
            if dep_name in names:
                errors.append(DagError(f"task '{task.name}': depends_on lists '{dep_name}' twice", task.location))
                continue
            names.append(dep_name)
        return names, [task.location] * len(names)

    # --- running ------------------------------------------------------------------------------------------------
    def main(self, argv: Sequence[str] | None = None, *, exit: bool = True) -> int:
        """Run the DAG with the options of `tuidag run` (targets, terminal UI, --no-tui, -j, --state-dir, ...) taken
        from `argv` (default: the command line). Exits with the run's exit code unless `exit=False`."""
        from . import cli, cli_options, run_commands
        from .cli_common import guarded

        argv = sys.argv[1:] if argv is None else list(argv)
        prog = f"python {os.path.basename(self.location.file)}" if self.source else "tuidag"
        parser = argparse.ArgumentParser(prog=prog, description=f"Run the {self.name!r} DAG.")
        cli_options.add_run_options(parser)
        args, rest = parser.parse_known_args(argv)
        cli.take_targets(args, rest, parser)
        code = guarded(
            lambda options: run_commands.run_dag(
                self._checked_spec(options.resources).with_env(dict(options.env)), options
            ),
            args,
            outlives_readers=True,  # as `tuidag run`: a reader that stops early stops the printing, not the run
        )
        if exit:
            sys.exit(code)
        return code

    def _checked_spec(self, resources: Mapping[str, int]) -> DagSpec:
        """The spec, or every mistake at once: with those the slots requested make against the capacities."""
        from .model.resources import with_slot_errors

        try:
            spec = self.spec()
        except DagErrors as exc:
            raise with_slot_errors(exc, resources) from None
        from .views.terminal_text import terminal_line

        for note in self.notes:  # e.g. an exclude that matches no combination
            print(terminal_line(str(note)), file=sys.stderr)
        return spec


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _dependency_list(depends_on: Any) -> list[Any]:
    """One dependency or an iterable of them."""
    if depends_on is None:
        return []
    if isinstance(depends_on, str) or callable(depends_on):
        return [depends_on]
    try:
        return list(depends_on)
    except TypeError:
        return [depends_on]  # reported as a bad entry when the DAG is assembled


def _caller_location() -> Location:
    """Where the user's code called into this module: the first frame outside it."""
    frame: FrameType | None = sys._getframe(1)
    here = __file__
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
    if frame is None:
        return Location("<unknown>", 1, 1)
    return Location(frame.f_code.co_filename, frame.f_lineno, 1)


def _function_location(func: Any) -> Location | None:
    """A function's definition line; for a decorated one, its first decorator's line."""
    try:
        func = inspect.unwrap(func)
    except ValueError:  # a cycle of __wrapped__
        pass
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    return Location(code.co_filename, code.co_firstlineno, 1)


def _source_file(file: str) -> Path | None:
    """The file a Dag was created in, or None when it is not a real file (an interactive session, `python -c`)."""
    if not file or file.startswith("<"):
        return None
    path = Path(file)
    return path if path.is_file() else None
