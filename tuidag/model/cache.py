"""Validated DAGs kept between runs, so that running a big DAG again does not parse and validate it again.

For a YAML DAG of 1,000 tasks, importing PyYAML, composing the file and validating it is about 0.1 s, a sixth of the
whole run of a DAG of quick tasks. `tuidag run` therefore keeps the validated model in the state dir
(`cache/<hash of the file's real path>.dag`, one entry per DAG file, rewritten when it changes) in `marshal` form:
plain data, never code, so reading an entry can't do anything but fail.

An entry is used only when everything the loaders' result depends on is what it was when the entry was written:
- the file's bytes (their SHA-1) and its real path (relative workdirs are taken from its folder), and the folder
  tuidag runs in (a SkyPilot file's relative workdirs are taken from there);
- the `--env` values given (they fill a SkyPilot file's envs and workdirs);
- the loaders' code: the size and modification time of every module in `tuidag/model` (an upgrade or an edited
  checkout never reads what other code wrote);
- what the loaders read from the environment: HOME (`~` in workdirs), PATH (which `bash` a SkyPilot pipeline runs
  with) and the CPU count (the default `max_parallel`).
Anything else (another version, a corrupt or unreadable entry) is a miss: the file is loaded as usual and the entry
written again. A file with errors is never cached, so errors always come from the file itself, located as usual.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Sequence
from pathlib import Path

from .errors import Location, Note
from .loader import load_dag
from .matrix import MatrixGroup
from .resources import Request
from .service import ReadyCheck, ServiceSpec
from .source import read_source_bytes
from .spec import DagSpec, FailurePolicy, JobGroup, TaskSpec, sha1

FORMAT = 6
_MODEL_DIR = os.path.dirname(__file__)


def load_dag_cached(
    path: Path, cache_dir: Path, notes: list[Note] | None = None, env: Sequence[tuple[str, str]] = ()
) -> DagSpec:
    """`load_dag(path, notes, env=env)`, from `cache_dir` when it holds this exact file's model. Errors are not
    cached."""
    data = read_source_bytes(path)  # refuses what is not a regular file of a sane size, located as usual
    try:
        real = os.path.realpath(path)
    except OSError:
        return load_dag(path, notes, env=env)
    key = _key(data, real, env)
    entry = _entry(cache_dir, real)
    cached = _read(entry, key)
    if cached is not None:
        dag, found = cached
    else:
        found = []
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None  # load_dag reads it again and reports where the bad byte is
        dag = load_dag(path, found, text, env=env)
        _write(entry, key, dag, found)
    if notes is not None:
        notes.extend(found)
    return dag


def cached_dag(path: Path, cache_dir: Path) -> DagSpec | None:
    """The model `tuidag run` kept of this exact file (without --env), or None; never loads the file nor writes an
    entry (shell completion reads task names this way, and a TAB must not create a state dir)."""
    try:
        data = read_source_bytes(path)
        real = os.path.realpath(path)
    except Exception:  # not a file tuidag would read: no model
        return None
    cached = _read(_entry(cache_dir, real), _key(data, real, ()))
    return None if cached is None else cached[0]


def _entry(cache_dir: Path, real: str) -> Path:
    return cache_dir / f"{sha1(real.encode()).hexdigest()[:20]}.dag"


def _key(data: bytes, real: str, env: Sequence[tuple[str, str]]) -> str:
    stamp = [
        FORMAT,
        real,
        os.getcwd(),
        list(env),
        os.environ.get("HOME", ""),
        os.environ.get("PATH", ""),
        os.cpu_count(),
        code_stamp(_MODEL_DIR),
    ]
    return sha1(repr(stamp).encode() + b"\0" + data).hexdigest()


def code_stamp(folder: str) -> list[tuple[str, int, int]]:
    """Name, size and modification time of every module in `folder`: what an entry made by that code depends on."""
    stamp = []
    with os.scandir(folder) as entries:
        for item in sorted(entries, key=lambda e: e.name):
            if item.name.endswith(".py"):
                info = item.stat()
                stamp.append((item.name, info.st_size, info.st_mtime_ns))
    return stamp


def read_entry(entry: Path, key: str) -> tuple | None:
    """The record `write_entry` stored at `entry` under `key`, or None: missing, written under another key, or not
    readable as one (truncated, corrupt, from other code, a symlink)."""
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        with open(fd, "rb") as f:
            record = marshal.loads(f.read())
        return record if type(record) is tuple and record and record[0] == key else None
    except Exception:
        return None


def write_entry(entry: Path, record: tuple) -> None:
    """Store `record` (marshal-able data whose first item is its key) at `entry`, atomically; best effort: a state
    dir that can't be written is reported by the run store, not here.

    Only into a folder of the user's own that no one else can write to (as the run store requires of the state dir),
    through a new file made with O_EXCL | O_NOFOLLOW next to the entry: never through a symlink planted there."""
    folder = entry.parent
    try:
        folder.parent.mkdir(mode=0o700, exist_ok=True)  # the state dir, on the first run of a DAG next to it
        folder.mkdir(mode=0o700, exist_ok=True)
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    tmp = f".{entry.name}.{os.urandom(6).hex()}"
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            with open(fd, "wb") as f:
                marshal.dump(record, f)
            os.replace(tmp, entry.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # readers see old or new, never half
        except (OSError, ValueError):  # ValueError: something in the record marshal can't store
            os.unlink(tmp, dir_fd=dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _read(entry: Path, key: str) -> tuple[DagSpec, list[Note]] | None:
    record = read_entry(entry, key)
    try:
        return None if record is None else _decode(record)
    except Exception:  # a record of the right key but not of this shape: load the file instead
        return None


def _write(entry: Path, key: str, dag: DagSpec, notes: list[Note]) -> None:
    if any(task.func is not None for task in dag.tasks.values()):
        return  # callables are not data (file loaders never make them, but a DAG with one can't be cached)
    write_entry(entry, _encode(key, dag, notes))


def _loc(location: Location | None) -> tuple | None:
    return None if location is None else tuple(location)


def _encode(key: str, dag: DagSpec, notes: list[Note]) -> tuple:
    tasks = [
        (
            t.name,
            t.run,
            t.depends_on,
            dict(t.env),
            None if t.workdir is None else str(t.workdir),
            t.retries,
            t.retry_delay,
            t.timeout,
            t.setup,
            t.isolate,
            t.shell,
            _loc(t.location),
            tuple(map(_loc, t.dep_locations)),
            dict(t.run_env),
            [(kind, r.count, _loc(r.location), r.accelerator) for kind, r in t.resources.items()],
            (
                t.inputs,
                t.outputs,
                t.cache,
                t.env_inputs,
                tuple(map(_loc, t.input_locations)),
                tuple(map(_loc, t.output_locations)),
            ),
            t.group,
            t.matrix,
            None if t.service is None else (t.service.ready_when and tuple(t.service.ready_when), *t.service[1:]),
        )
        for t in dag.tasks.values()
    ]
    group = None if dag.job_group is None else (dag.job_group.primary, dict(dag.job_group.termination_delay))
    return (
        key,
        dag.name,
        dag.max_parallel if dag.max_parallel_given else None,
        dag.on_failure.value,
        dag.kill_grace,
        dict(dag.env),
        str(dag.workdir),
        None if dag.source is None else str(dag.source),
        tasks,
        [(n.message, tuple(n.location), n.unless_kind, n.instead) for n in notes],
        dag.topological_order,
        dag.fingerprints,
        group,
        dict(dag.resources),
        dag.executor,
        dag.dask_address,
        [(g.name, g.keys, g.instances, g.max_parallel, _loc(g.location)) for g in dag.groups.values()],
        (dag.on_end, dag.on_run_failure, dag.notify),
    )


def _decode(record: tuple) -> tuple[DagSpec, list[Note]]:
    (
        _,
        name,
        max_parallel,
        on_failure,
        kill_grace,
        env,
        workdir,
        source,
        rows,
        notes,
        order,
        prints,
        group,
        capacities,
        executor,
        dask_address,
        groups,
        (on_end, on_run_failure, notify),
    ) = record
    tasks = {}
    for (
        task,
        run,
        deps,
        task_env,
        task_workdir,
        retries,
        retry_delay,
        timeout,
        setup,
        isolate,
        shell,
        location,
        dep_locations,
        run_env,
        requests,
        (inputs, outputs, cache, env_inputs, input_locations, output_locations),
        task_group,
        matrix,
        service,
    ) in rows:
        tasks[task] = TaskSpec(
            task,
            run,
            deps,
            task_env,
            None if task_workdir is None else Path(task_workdir),
            retries,
            retry_delay,
            timeout,
            setup,
            None,
            isolate,
            shell,
            None if location is None else Location(*location),
            tuple(None if where is None else Location(*where) for where in dep_locations),
            run_env,
            {
                kind: Request(count, None if where is None else Location(*where), accelerator)
                for kind, count, where, accelerator in requests
            },
            inputs=inputs,
            outputs=outputs,
            cache=cache,
            env_inputs=env_inputs,
            input_locations=tuple(None if where is None else Location(*where) for where in input_locations),
            output_locations=tuple(None if where is None else Location(*where) for where in output_locations),
            group=task_group,
            matrix=matrix,
            service=None if service is None else ServiceSpec(service[0] and ReadyCheck(*service[0]), *service[1:]),
        )
    dag = DagSpec(
        name,
        tasks,
        max_parallel,
        FailurePolicy(on_failure),
        kill_grace,
        env,
        Path(workdir),
        None if source is None else Path(source),
        None if group is None else JobGroup(*group),
        capacities,
        executor,
        dask_address,
        {
            name: MatrixGroup(name, keys, instances, limit, None if where is None else Location(*where))
            for name, keys, instances, limit, where in groups
        },
        on_end,
        on_run_failure,
        notify,
    )
    dag.prime(topological_order=order, fingerprints=prints)
    return dag, [Note(message, Location(*where), kind, instead) for message, where, kind, instead in notes]
