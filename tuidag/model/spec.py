"""The plain DAG model every front end (YAML, SkyPilot pipeline, Python API) produces and the engine consumes.

Records on the way from `tuidag run` to the first task are NamedTuples or plain classes rather than dataclasses:
defining a dataclass costs about a millisecond and importing `dataclasses` (with `inspect`) a dozen more, which was a
tenth of tuidag's start-up.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from enum import Enum
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from .counts import counted
from .errors import Location
from .layering import longest_path_layers

if TYPE_CHECKING:  # `_sha1` has no stubs (its sha1 is hashlib's); resources.py imports this module
    from hashlib import sha1

    from .resources import Request
    from .service import ServiceSpec
else:
    try:  # hashlib loads OpenSSL (5 ms); the built-in SHA-1 gives the same digests (the standard library's `random`
        from _sha1 import sha1  # does the same for SHA-512)
    except ImportError:
        from hashlib import sha1

_FINGERPRINT_ENCODER = json.JSONEncoder()  # json.dumps' settings, without building an encoder per task

#: Task names double as log file names and CLI arguments, so they stay in a conservative alphabet (matched with
#: `fullmatch`: `$` alone would also accept a name ending in a newline).
TASK_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
#: The longest task name: `<name>.log` must fit every file system's name limit (eCryptfs allows 143 bytes, most 255).
MAX_TASK_NAME = 128
#: The largest count a DAG may give (max_parallel, retries, slot capacities and requests): far beyond any machine or
#: cluster, and small enough that every count stays a plain number in the journal and in JSON.
MAX_COUNT = 1_000_000
DEFAULT_KILL_GRACE = 5.0
NOTIFY_CHOICES = ("never", "end", "failure")  # `notify:` / `--notify`: see views/run_notes.py
DEFAULT_SHELL = "/bin/sh"
NO_ENV: Mapping[str, str] = MappingProxyType({})  # the shared default of every `env`: read-only, so it stays empty
NO_CAPACITIES: Mapping[str, int] = MappingProxyType({})  # and of a DAG's `resources`


class FailurePolicy(str, Enum):
    """What the scheduler does to the rest of the DAG when a task fails (after its retries)."""

    SKIP_DOWNSTREAM = "skip-downstream"  # descendants SKIPPED, independent branches go on
    FINISH_RUNNING = "finish-running"  # start nothing new, let running tasks finish, the rest CANCELLED
    CANCEL_ALL = "cancel-all"  # also cancel running tasks

    def __str__(self) -> str:
        return self.value


def task_name_problem(name: str) -> str | None:
    """Why `name` can't be a task name, or None when it can."""
    if not TASK_NAME_RE.fullmatch(name):
        return f"task name {name!r} may only contain letters, digits, '_', '.' and '-'"
    if len(name) > MAX_TASK_NAME:
        return f"task name '{name[:20]}...' is {len(name)} characters long: at most {MAX_TASK_NAME} are allowed"
    if name in (".", "..") or ".." in name:
        return f"task name {name!r} may not be '.' or contain '..'"
    return None


def nul_problem(what: str) -> str:
    """The message for text holding a NUL character: no command, path or environment variable can contain one
    (the operating system ends C strings there), so it is refused when the DAG is read, not when the task starts."""
    return f"{what} contains a NUL character (\\0), which no command, path or environment variable can hold"


#: A UTF-16 surrogate on its own (YAML's "\\ud800", a Python string): not a character, so no file, terminal or command
#: line can hold it, and encoding it anywhere fails.
_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_problem(what: str, text: str) -> str | None:
    """Why `text` can't be used (it holds a lone surrogate), or None when it can."""
    found = None if text.isascii() else _SURROGATE.search(text)
    if found is None:
        return None
    return (
        f"{what} contains a lone surrogate (\\u{ord(found.group()):04x} at character {found.start() + 1}), "
        f"which is not a character: write the character itself or its \\U escape"
    )


class TaskSpec(NamedTuple):
    """One task. Exactly one of `run` (a shell command) or `func` (an in-process callable) is the action;
    `setup` is an optional shell command that runs before `run` and fails the task with reason `setup failed`."""

    name: str
    run: str | None = None
    depends_on: tuple[str, ...] = ()
    env: Mapping[str, str] = NO_ENV
    workdir: Path | None = None
    retries: int = 0
    retry_delay: float = 0.0
    timeout: float | None = None
    setup: str | None = None
    func: Callable[..., Any] | None = None
    isolate: bool = False
    shell: str = DEFAULT_SHELL  # runs `run` and `setup` as `shell -c COMMAND` (SkyPilot pipelines use bash)
    location: Location | None = None
    dep_locations: tuple[Location | None, ...] = ()
    #: Variables whose values depend on the run: `{run_id}` in each value is replaced by the run's id when an attempt
    #: starts (a SkyPilot task's SKYPILOT_TASK_ID). Kept as written in fingerprints, so runs can resume each other.
    run_env: Mapping[str, str] = NO_ENV
    #: Slots held while an attempt runs: kind -> resources.Request (checked against the DAG's capacities by
    #: resources.resolve).
    resources: Mapping[str, Request] = MappingProxyType({})
    #: Files, folders and globs (relative to the task's workdir) whose content the task depends on, and the files and
    #: folders it makes: a task with `outputs` is skipped as UP_TO_DATE when nothing it depends on changed (see
    #: freshness.py). `cache=False` opts it out; `env_inputs` names OS environment variables it depends on.
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    cache: bool = True
    env_inputs: tuple[str, ...] = ()
    #: Under `--watch`, whether a running attempt is killed and started again when its inputs change (False: the
    #: re-run waits for the attempt to end).
    interruptible: bool = True
    #: Where each entry of `inputs` and `outputs` is written, for located errors (None: at the task).
    input_locations: tuple[Location | None, ...] = ()
    output_locations: tuple[Location | None, ...] = ()
    #: The matrix task this is an instance of (model/matrix.py), and its values there as (key, value) pairs.
    group: str | None = None
    matrix: tuple[tuple[str, Any], ...] = ()
    #: A service task (service.py): runs until the run ends, its dependents start once it is ready. None: a task
    #: that ends by itself.
    service: ServiceSpec | None = None

    def dep_location(self, index: int) -> Location | None:
        if index < len(self.dep_locations) and self.dep_locations[index]:
            return self.dep_locations[index]
        return self.location


RUN_ID_PLACEHOLDER = "{run_id}"


def _callable_action(func: Callable[..., Any], memo: dict) -> str:
    """What a callable task does: its fingerprint names it too (by its file, not by the name its module was
    imported under, which `python etl.py` and `tuidag run etl.py` give differently)."""
    from .code_print import callable_fingerprint  # only DAGs with callables need it

    return f"callable {callable_fingerprint(func, memo)}"


class JobGroup(NamedTuple):
    """Tasks that run side by side, all started at once (a SkyPilot job group): once every task in `primary` has
    ended, each other task still running is stopped after its delay in `termination_delay` (seconds; 0 when not
    listed). Stopped tasks end CANCELLED with JOB_GROUP_STOPPED as reason and don't make the run fail."""

    primary: tuple[str, ...]
    termination_delay: Mapping[str, float] = MappingProxyType({})


JOB_GROUP_STOPPED = "job group: primary tasks ended"


class DagSpec:
    """A whole DAG: its tasks (insertion order = file order) and run settings. Immutable once built; the graph
    queries below are computed on first use."""

    _FIELDS = (
        "name",
        "tasks",
        "max_parallel",
        "on_failure",
        "kill_grace",
        "env",
        "workdir",
        "source",
        "job_group",
        "resources",
        "executor",
        "dask_address",
        "groups",
        "on_end",
        "on_run_failure",
        "notify",
    )
    # Declared for type checkers (annotations only: no class attributes, no start-up cost); set once in __init__.
    name: str
    tasks: Mapping[str, TaskSpec]
    max_parallel: int
    on_failure: FailurePolicy
    kill_grace: float
    env: Mapping[str, str]
    workdir: Path
    source: Path | None
    job_group: JobGroup | None
    resources: Mapping[str, int]  # slot kind -> capacity (see resources.py)
    executor: str | None  # `executor:` as written (local, dask, dask-local[:N]); None: local
    dask_address: str | None  # the Dask scheduler for `executor: dask`
    max_parallel_given: bool  # max_parallel was given, not this machine's CPU count
    groups: Mapping[str, Any]  # matrix task -> matrix.MatrixGroup (its instances are in `tasks`)
    on_end: str | None  # a shell command run after every run (engine/run_hooks.py)
    on_run_failure: str | None  # ... after a run that failed
    notify: str | None  # when a viewer rings the terminal: never, end or failure (NOTIFY_CHOICES); None: the default

    def __init__(
        self,
        name: str,
        tasks: Mapping[str, TaskSpec],
        max_parallel: int | None = None,
        on_failure: FailurePolicy = FailurePolicy.SKIP_DOWNSTREAM,
        kill_grace: float = DEFAULT_KILL_GRACE,
        env: Mapping[str, str] = NO_ENV,
        workdir: Path | None = None,
        source: Path | None = None,
        job_group: JobGroup | None = None,
        resources: Mapping[str, int] = NO_CAPACITIES,
        executor: str | None = None,
        dask_address: str | None = None,
        groups: Mapping[str, Any] = NO_ENV,
        on_end: str | None = None,
        on_run_failure: str | None = None,
        notify: str | None = None,
    ):
        set_field = super().__setattr__
        set_field("name", name)
        set_field("tasks", tasks)
        set_field("max_parallel", max_parallel or os.cpu_count() or 1)
        # Whether max_parallel was given (the file, the API): when not, an executor may say its own (a Dask
        # cluster's worker threads) instead of this machine's CPU count.
        set_field("max_parallel_given", max_parallel is not None)
        set_field("on_failure", on_failure)
        set_field("kill_grace", kill_grace)
        set_field("env", env)
        set_field("workdir", workdir if workdir is not None else Path.cwd())
        set_field("source", source)
        set_field("job_group", job_group)
        set_field("resources", resources)
        set_field("executor", executor)
        set_field("dask_address", dask_address)
        set_field("groups", groups)
        set_field("on_end", on_end)
        set_field("on_run_failure", on_run_failure)
        set_field("notify", notify)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"DagSpec is immutable: use replace({name}=...)")

    def replace(self, **changes: Any) -> DagSpec:
        """A copy with some settings changed."""
        fields = {name: changes.get(name, getattr(self, name)) for name in self._FIELDS}
        if "max_parallel" not in changes and not self.max_parallel_given:
            fields["max_parallel"] = None  # still the default
        return DagSpec(**fields)

    def with_env(self, env: Mapping[str, str]) -> DagSpec:
        """A copy whose every task also gets `env` (`--env KEY=VALUE`), over what the task sets itself."""
        if not env:
            return self
        tasks = {name: task._replace(env={**task.env, **env}) for name, task in self.tasks.items()}
        return self.replace(tasks=tasks)

    def prime(self, **computed: Any) -> None:
        """Fill in graph queries already known (the cache stores them): `topological_order=...`."""
        for name, value in computed.items():
            if not isinstance(getattr(type(self), name, None), cached_property):
                raise AttributeError(f"DagSpec has no computed property {name!r}")
            self.__dict__[name] = value

    def __repr__(self) -> str:
        return f"DagSpec(name={self.name!r}, {counted(len(self.tasks), 'task')}, source={self.source})"

    # Graph queries. A DagSpec is immutable, so these are computed once.
    @cached_property
    def children(self) -> dict[str, tuple[str, ...]]:
        kids: dict[str, list[str]] = {name: [] for name in self.tasks}
        for task in self.tasks.values():
            for dep in task.depends_on:
                kids[dep].append(task.name)
        return {name: tuple(v) for name, v in kids.items()}

    def parents(self, name: str) -> tuple[str, ...]:
        return self.tasks[name].depends_on

    def descendants(self, name: str) -> list[str]:
        """All tasks downstream of `name`, in topological order (excluding `name`)."""
        seen: set[str] = set()
        stack = list(self.children[name])
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(self.children[node])
        return [n for n in self.topological_order if n in seen]

    @cached_property
    def topological_order(self) -> tuple[str, ...]:
        """Kahn's algorithm, stable with respect to file order. Assumes the DAG was validated (no cycles)."""
        indeg = {name: len(t.depends_on) for name, t in self.tasks.items()}
        order: list[str] = [n for n, d in indeg.items() if d == 0]
        i = 0
        while i < len(order):
            for child in self.children[order[i]]:
                indeg[child] -= 1
                if indeg[child] == 0:
                    order.append(child)
            i += 1
        return tuple(order)

    @cached_property
    def fingerprints(self) -> dict[str, str]:
        """A hash of what each task does, so --resume only reuses results of tasks whose definition is unchanged.
        A callable counts by its name and what `code_print.callable_fingerprint` reads of its code and data."""
        prints = {}
        encode = _FINGERPRINT_ENCODER.encode
        memo: dict = {}  # what the callables' globals hold, described once for all of them
        for name, task in self.tasks.items():
            action = task.run if task.func is None else _callable_action(task.func, memo)
            fields: list[object] = [
                action,
                task.setup,
                sorted(task.depends_on),
                sorted({**self.env, **task.env}.items()),
                str(task.workdir or self.workdir),
                task.isolate,
            ]
            if task.run_env:  # only then: fingerprints of earlier runs stay valid
                fields.append(sorted(task.run_env.items()))
            if task.inputs or task.outputs or task.env_inputs:  # likewise
                fields.append([list(task.inputs), list(task.outputs), sorted(task.env_inputs), task.shell])
            if task.service is not None:  # likewise
                fields.append(["service", *task.service])
            data = encode(fields)
            prints[name] = sha1(data.encode()).hexdigest()[:16]
        return prints

    @cached_property
    def shared_digests(self) -> dict[str, str]:
        """Short hashes of what every task's definition shares: each environment variable all tasks get with the
        same value (`env KEY`), and their working directory (`workdir`) when it is the same for all. Kept in the
        journal, so a resumed run can say which of them changed every task's definition."""
        common: dict[str, str] | None = None
        workdirs = set()
        for task in self.tasks.values():
            env = {**self.env, **task.env}
            common = env if common is None else {k: v for k, v in common.items() if env.get(k) == v}
            workdirs.add(str(task.workdir or self.workdir))
        shared = {f"env {key}": value for key, value in sorted((common or {}).items())}
        if len(workdirs) == 1:
            shared["workdir"] = workdirs.pop()
        return {what: sha1(value.encode("utf-8", "backslashreplace")).hexdigest()[:8] for what, value in shared.items()}

    @cached_property
    def depth(self) -> dict[str, int]:
        """Longest-path layer of each task: 0 for roots, 1 + max(depth of dependencies) otherwise."""
        return longest_path_layers((name, self.tasks[name].depends_on) for name in self.topological_order)
