"""Matrix tasks: one task definition run once per combination of values (a sweep), as GitHub Actions'
`strategy.matrix` does, expanded into plain instances before anything else sees the DAG.

A front end reads a task's `matrix:` into a `Matrix` and leaves the task as a template; `expand` turns every
template into its instances (`train[lr=0.01,seed=2]`, or the task's `name:` template), puts each combination's values
into the instance's environment (`TUIDAG_MATRIX_LR=0.01`) and into the `${{ matrix.KEY }}` placeholders of its
fields, and has dependencies on a matrix task rewritten: on the whole group (every instance: fan-in), paired by shared
keys when both sides are matrices (`eval[seed=2]` waits for `train[lr=*,seed=2]`), or on instances named or selected
by their values (`train[seed=2]`). The engine, the journal and the views then see ordinary tasks; what stays of the
group is `DagSpec.groups` and each instance's `group` and `matrix` values, for counting, controls and results.

A group's `max_parallel` is a slot kind of its own (`train[*]`, see resources.py): each instance holds one slot
while it runs, so the engine's admission and the forecast keep the limit without knowing about matrices. Also here:
how a callable downstream gets a group's results (keyed by values), and `--num-jobs` (a SkyPilot task run N times
as a matrix of ranks). Dependencies on a group are matrix_links.py's.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .errors import DagError, Location, Note
from .resources import Request
from .spec import MAX_COUNT, DagSpec, TaskSpec, task_name_problem

#: The most instances one matrix may have: checked on the counts, before anything is expanded.
MAX_INSTANCES = 100_000
#: `${{ matrix.KEY }}`, GitHub Actions' syntax, which no shell gives a meaning to (`${{` is a bad substitution in sh
#: and bash); `$${{ ... }}` is the text itself, one `$` fewer.
PLACEHOLDER_RE = re.compile(r"\$(\$?)\{\{\s*matrix\.([^\s}]*)\s*\}\}")
KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
#: Characters a value keeps in an instance's name; any other becomes `_` (so names stay log file names).
NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")
#: An instance name or selector: `group[key=value,...]`.
SELECTOR_RE = re.compile(r"([A-Za-z0-9_.-]+)\[([^\[\]]*)\]")
ENV_PREFIX = "TUIDAG_MATRIX_"
GROUP_SLOT_SUFFIX = "[*]"


class Matrix(NamedTuple):
    """A task's `matrix:` as a front end read it. Values are kept as given (YAML: text as written; Python: the
    objects); `location` and the `*_at` fields locate each part for errors (None: at the task)."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    include: tuple[Mapping[str, Any], ...] = ()
    exclude: tuple[Mapping[str, Any], ...] = ()
    max_parallel: int | None = None
    name: str | None = None  # a template for instance names
    location: Location | None = None  # the `matrix:` key
    include_at: tuple[Location | None, ...] = ()
    exclude_at: tuple[Location | None, ...] = ()
    name_at: Location | None = None


class MatrixGroup(NamedTuple):
    """A matrix task once expanded: its instances in order, the keys of its matrix and its own limit."""

    name: str
    keys: tuple[str, ...]
    instances: tuple[str, ...]
    max_parallel: int | None = None
    location: Location | None = None


class _Combo(NamedTuple):
    values: dict[str, Any]
    naming: tuple[str, ...]  # the keys its name shows: those it was made with (not those an include added)


def text_of(value: Any) -> str:
    """A value as an instance's environment and placeholders get it: booleans as YAML writes them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def env_name(key: str) -> str:
    return ENV_PREFIX + re.sub(r"[^A-Z0-9_]", "_", key.upper())


def group_slot_kind(group: str) -> str:
    """The slot kind that holds a group to its `max_parallel` (not a kind a file may declare: it has brackets)."""
    return group + GROUP_SLOT_SUFFIX


# ------------------------------------------------------------------------------------------------- placeholders
def placeholder_keys(text: str) -> list[str]:
    """The keys `${{ matrix.KEY }}` placeholders in `text` name (not the escaped `$${{ ... }}` ones)."""
    if "${{" not in text:
        return []
    return [m.group(2) for m in PLACEHOLDER_RE.finditer(text) if not m.group(1)]


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`text` with each `${{ matrix.KEY }}` replaced by the value of KEY (empty when this combination lacks a key
    only some combinations have, as GitHub does) and each `$${{ ... }}` by `${{ ... }}`. Callers check beforehand
    (`placeholder_problem`) that every key named exists in the matrix. Any text field of a task can be passed."""
    if "${{" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        return m.group(0)[1:] if m.group(1) else values.get(m.group(2), "")

    return PLACEHOLDER_RE.sub(one, text)


def placeholder_problem(text: str, keys: Sequence[str] | None, what: str) -> str | None:
    """Why the placeholders of `text` can't be filled (a key no combination has; `keys` None: the task has no
    matrix), or None."""
    for key in placeholder_keys(text):
        if keys is None:
            return f"{what}: ${{{{ matrix.{key} }}}} but the task has no matrix (write $${{{{ for the text itself)"
        if key not in keys:
            return f"{what}: ${{{{ matrix.{key} }}}} names no key of the matrix (it has {', '.join(keys) or 'none'})"
    return None


# ------------------------------------------------------------------------------------------------- combinations
def instance_count(matrix: Matrix) -> int:
    """An upper bound of the instances, from the counts alone (nothing expanded)."""
    product = math.prod(len(values) for _, values in matrix.axes) if matrix.axes else 0
    return product + len(matrix.include)


def _matches(values: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    return all(key in values and text_of(values[key]) == text_of(value) for key, value in entry.items())


def combinations(task: str, matrix: Matrix, notes: list[Note], errors: list[DagError]) -> list[_Combo]:
    """The combinations, in GitHub Actions' order and meaning: the product of the axes (the first varies slowest),
    less each `exclude` entry's matches, then each `include` entry added to every original combination whose values
    it doesn't change, or as a combination of its own when it fits none."""
    keys = [key for key, _ in matrix.axes]
    where = matrix.location
    for i, entry in enumerate(matrix.exclude):
        unknown = [key for key in entry if key not in keys]
        if unknown:
            at = matrix.exclude_at[i] if i < len(matrix.exclude_at) else where
            errors.append(
                DagError(f"task '{task}': exclude names '{unknown[0]}', which is not a key of the matrix", at)
            )
            return []
    originals: list[_Combo] = []
    excluded = [False] * len(matrix.exclude)
    for row in itertools.product(*(values for _, values in matrix.axes)) if keys else ():
        values = dict(zip(keys, row))
        hit = False
        for i, entry in enumerate(matrix.exclude):
            if _matches(values, entry):
                excluded[i] = hit = True
        if not hit:
            originals.append(_Combo(values, tuple(keys)))
    for i, used in enumerate(excluded):
        if not used:
            at = matrix.exclude_at[i] if i < len(matrix.exclude_at) else where
            shown = ", ".join(f"{k}={text_of(v)}" for k, v in matrix.exclude[i].items())
            notes.append(Note(f"task '{task}': exclude {{{shown}}} matches no combination", at or Location("", 1, 1)))
    added: list[_Combo] = []
    for entry in matrix.include:
        fixed = {key: value for key, value in entry.items() if key in keys}
        extra = {key: value for key, value in entry.items() if key not in keys}
        fitted = False
        for combo in originals:
            if _matches(combo.values, fixed):
                combo.values.update(extra)
                fitted = True
        if not fitted:
            added.append(_Combo(dict(entry), tuple(entry)))
    return originals + added


# ------------------------------------------------------------------------------------------------- expansion
class Expanded(NamedTuple):
    tasks: dict[str, TaskSpec]
    groups: dict[str, MatrixGroup]
    capacities: dict[str, int]  # a slot kind per group with a max_parallel


def expand(
    tasks: Mapping[str, TaskSpec],
    matrices: Mapping[str, Matrix],
    errors: list[DagError],
    notes: list[Note],
    field_at: Mapping[str, Mapping[str, Location]] | None = None,
    broken: frozenset[str] = frozenset(),
) -> Expanded:
    """Every matrix task replaced by its instances (in place, in file order) and every dependency on one rewritten;
    problems appended to `errors` (located where `field_at` says each task's fields are, else at the task),
    remarks to `notes`. Tasks without a matrix are checked for placeholders (they have none to fill) and otherwise
    kept as they are; those in `broken` had a matrix too wrong to read (reported already), and are not."""
    field_at = field_at or {}
    if not matrices:
        plain = {
            name: _counts_only(task) if name in broken else _no_placeholders(task, errors, field_at.get(name, {}))
            for name, task in tasks.items()
        }
        return Expanded(plain, {}, {})
    out: dict[str, TaskSpec] = {}
    groups: dict[str, MatrixGroup] = {}
    capacities: dict[str, int] = {}
    for name, task in tasks.items():
        matrix = matrices.get(name)
        if matrix is None:
            out[name] = _counts_only(task) if name in broken else _no_placeholders(task, errors, field_at.get(name, {}))
            continue
        instances = _instances(task, matrix, errors, notes, field_at.get(name, {}))
        for instance in instances:
            if instance.name in out or (instance.name in tasks and instance.name != name):
                errors.append(
                    DagError(f"task '{name}': instance '{instance.name}' has the name of another task", matrix.location)
                )
                continue
            out[instance.name] = instance
        keys = tuple(key for key, _ in matrix.axes)
        groups[name] = MatrixGroup(name, keys, tuple(i.name for i in instances), matrix.max_parallel, task.location)
        if matrix.max_parallel is not None and instances:
            capacities[group_slot_kind(name)] = matrix.max_parallel
    from .matrix_links import rewire  # after the instances exist: needs them all

    tasks_out = rewire(out, groups, errors)
    return Expanded(tasks_out, groups, capacities)


def _no_placeholders(task: TaskSpec, errors: list[DagError], where: Mapping[str, Location]) -> TaskSpec:
    """A task without a matrix has no values to fill: a placeholder in it is an error, and a slot request written as
    one is dropped (so the checks after this one see only counts)."""
    for what, text in _texts(task):
        problem = placeholder_problem(text, None, f"task '{task.name}': {what}")
        if problem:
            errors.append(DagError(problem, where.get(what.split()[0]) or task.location))
    if not any(isinstance(request.count, str) for request in task.resources.values()):
        return task
    for kind, request in task.resources.items():
        if isinstance(request.count, str):
            problem = placeholder_problem(request.count, None, f"task '{task.name}': resources: '{kind}'")
            errors.append(
                DagError(problem or f"task '{task.name}': resources: '{kind}' must be a count", request.location)
            )
    return _counts_only(task)


def _counts_only(task: TaskSpec) -> TaskSpec:
    """The task without the slot requests written as placeholders (the checks after expansion need counts)."""
    if not any(isinstance(request.count, str) for request in task.resources.values()):
        return task
    counts = {kind: request for kind, request in task.resources.items() if not isinstance(request.count, str)}
    return task._replace(resources=counts)


def _requests(
    task: TaskSpec, texts: Mapping[str, str], label: str, errors: list[DagError]
) -> Mapping[str, Request] | None:
    """The task's slot requests with their placeholders filled (None after an error): a count from a matrix value
    is checked as one written in the file is."""
    requests = {}
    for kind, request in task.resources.items():
        if isinstance(request.count, str):
            text = substitute(request.count, texts).strip()
            if not text.isdigit() or not 1 <= int(text) <= MAX_COUNT:
                errors.append(
                    DagError(
                        f"task '{label}': resources: '{kind}' must be a positive integer (at most {MAX_COUNT:,}), "
                        f"got {text!r}",
                        request.location,
                    )
                )
                return None
            request = request._replace(count=int(text))
        requests[kind] = request
    return requests


def _texts(task: TaskSpec) -> list[tuple[str, str]]:
    """The fields that take placeholders, as (what, text): a new key that takes them is added here and filled in
    `_instances` with `fill_template`."""
    texts = [("run", task.run or ""), ("setup", task.setup or ""), ("workdir", str(task.workdir or ""))]
    texts += [(f"env {key}", value) for key, value in task.env.items()]
    texts += [("inputs", path) for path in task.inputs] + [("outputs", path) for path in task.outputs]
    return texts


def _instances(
    task: TaskSpec, matrix: Matrix, errors: list[DagError], notes: list[Note], where: Mapping[str, Location]
) -> list[TaskSpec]:
    name = task.name
    before = len(errors)
    problem = task_name_problem(name)  # the instances' names start with it (graph_errors checks only plain tasks)
    if problem:
        errors.append(DagError(problem, task.location))
        return []
    count = instance_count(matrix)
    if count > MAX_INSTANCES:
        errors.append(
            DagError(
                f"task '{name}': the matrix makes {count:,} instances: at most {MAX_INSTANCES:,} are allowed",
                matrix.location,
            )
        )
        return []
    combos = combinations(name, matrix, notes, errors)
    if len(errors) > before:
        return []
    if not combos:
        errors.append(
            DagError(f"task '{name}': the matrix leaves no combination (every one is excluded)", matrix.location)
        )
        return []
    all_keys = list(dict.fromkeys(key for combo in combos for key in combo.values))
    templates = _texts(task) + ([("name", matrix.name)] if matrix.name else [])
    templates += [(f"resources '{k}'", str(r.count)) for k, r in task.resources.items() if isinstance(r.count, str)]
    for what, text in templates:
        problem = placeholder_problem(text, all_keys, f"task '{name}': {what}")
        if problem:
            errors.append(DagError(problem, where.get(what.split()[0]) or task.location))
    env_keys: dict[str, str] = {}
    for key in all_keys:
        first = env_keys.setdefault(env_name(key), key)
        if first != key:
            errors.append(
                DagError(f"task '{name}': matrix keys '{first}' and '{key}' both give {env_name(key)}", matrix.location)
            )
    if len(errors) > before:
        return []
    instances: list[TaskSpec] = []
    seen: dict[str, _Combo] = {}
    slot = {group_slot_kind(name): Request(1, matrix.location)} if matrix.max_parallel is not None else {}
    resources = {**task.resources, **slot} if slot else task.resources
    templated_requests = any(isinstance(request.count, str) for request in task.resources.values())
    # Each template split once, filled per instance: a thousand instances cost what a thousand plain tasks do.
    env_names = {key: env_name(key) for key in all_keys}
    fill_name = fill_template(matrix.name) if matrix.name else None
    fill_run, fill_setup = fill_template(task.run), fill_template(task.setup)
    fill_env = [(key, fill_template(value)) for key, value in task.env.items()]
    fill_workdir = fill_template(str(task.workdir)) if task.workdir is not None and "${{" in str(task.workdir) else None
    fill_inputs = [fill_template(path) for path in task.inputs]
    fill_outputs = [fill_template(path) for path in task.outputs]
    in_name: dict[str, str] = {}  # value -> its text in a name
    for combo in combos:
        texts = {key: text_of(value) for key, value in combo.values.items()}
        if fill_name is not None:
            label = fill_name(texts)
        else:
            parts = []
            for key in combo.naming:
                text = texts[key]
                safe = in_name.get(text)
                if safe is None:
                    safe = in_name[text] = NAME_UNSAFE.sub("_", text)
                parts.append(f"{key}={safe}")
            label = f"{name}[{','.join(parts)}]"
        if label in seen:  # the first collision only: a big matrix could have thousands
            errors.append(
                DagError(_collision(name, label, seen[label], combo, matrix), matrix.name_at or matrix.location)
            )
            return []
        if fill_name is not None:
            problem = task_name_problem(label)
            if problem:
                errors.append(DagError(f"task '{name}': name template gives {problem}", matrix.name_at))
                return []
        elif len(label) > 128:
            errors.append(
                DagError(
                    f"task '{name}': instance name '{label[:40]}...' is {len(label)} characters long: at most 128 "
                    "are allowed (give the task a 'name:' template)",
                    matrix.location,
                )
            )
            return []
        seen[label] = combo
        env = {key: fill(texts) for key, fill in fill_env}
        for key, text in texts.items():
            env[env_names[key]] = text
        workdir = task.workdir
        if fill_workdir is not None:
            from pathlib import Path  # only a templated workdir needs it

            workdir = Path(fill_workdir(texts))
        if templated_requests:
            requests = _requests(task, texts, label, errors)
            if requests is None:
                return []
            resources = {**requests, **slot}
        instances.append(
            task._replace(
                name=label,
                run=fill_run(texts),
                setup=fill_setup(texts),
                env=env,
                workdir=workdir,
                resources=resources,
                inputs=tuple(fill(texts) for fill in fill_inputs),
                outputs=tuple(fill(texts) for fill in fill_outputs),
                group=name,
                matrix=tuple(combo.values.items()),
            )
        )
    return instances


def fill_template(text: str | None) -> Callable[[Mapping[str, str]], Any]:
    """`substitute(text, values)` as a function of the values, with `text` split at its placeholders once: what a
    key that takes placeholders calls once per task and then once per instance."""
    if text is None or "${{" not in text:
        return lambda values: text
    last = 0
    pieces: list[tuple[str | None, str]] = []  # (a key whose value goes here, or None: the text itself)
    for m in PLACEHOLDER_RE.finditer(text):
        pieces.append((None, text[last : m.start()]))
        pieces.append((None, m.group(0)[1:]) if m.group(1) else (m.group(2), ""))
        last = m.end()
    pieces.append((None, text[last:]))

    def fill(values: Mapping[str, str]) -> str:
        return "".join(piece if key is None else values.get(key, "") for key, piece in pieces)

    return fill


def _collision(task: str, label: str, first: _Combo, second: _Combo, matrix: Matrix) -> str:
    a = ", ".join(f"{k}={text_of(v)!r}" for k, v in first.values.items())
    b = ", ".join(f"{k}={text_of(v)!r}" for k, v in second.values.items())
    how = "make its name template" if matrix.name else "give the task a 'name:' template to"
    return f"task '{task}': two instances are both named '{label}' ({a} and {b}): {how} tell them apart"


# ------------------------------------------------------------------------------------------------- results
def result_key(group: MatrixGroup, task: TaskSpec) -> Any:
    """How a group's results are keyed for a callable downstream: the values of the matrix's keys, in order, as a
    tuple (None for a key the instance lacks); a one-key matrix's bare value."""
    values = dict(task.matrix)
    key = tuple(values.get(k) for k in group.keys) if group.keys else tuple(values.values())
    return key[0] if len(key) == 1 else key


def with_group_results(
    tasks: Mapping[str, TaskSpec], groups: Mapping[str, MatrixGroup], depends_on: Sequence[str], results: dict[str, Any]
) -> dict[str, Any]:
    """`results` (dependency -> value) with, for each group the dependencies are instances of, the group's name ->
    {result_key: value} of those instances."""
    if not groups:
        return results
    grouped: dict[str, dict[Any, Any]] = {}
    for dep in depends_on:
        spec = tasks.get(dep)
        if spec is not None and spec.group is not None and spec.group in groups:
            grouped.setdefault(spec.group, {})[result_key(groups[spec.group], spec)] = results.get(dep)
    return {**results, **grouped} if grouped else results


# ------------------------------------------------------------------------------------------------- SkyPilot
def num_jobs_problem(dag: DagSpec, count: int) -> str | None:
    """Why `--num-jobs count` can't make a sweep of `dag`, or None."""
    if len(dag.tasks) != 1 or dag.groups:
        return (
            f"--num-jobs runs one task N times (as `sky jobs launch --num-jobs`): {dag.name} has "
            f"{len(dag.tasks)} tasks{' and a matrix' if dag.groups else ''}"
        )
    if not 1 <= count <= MAX_INSTANCES:
        return f"--num-jobs must be from 1 to {MAX_INSTANCES:,}, got {count}"
    return None


def with_num_jobs(dag: DagSpec, count: int) -> DagSpec:
    """The one task of `dag` as a matrix of `count` instances, `task[rank=0]`...: each gets SKYPILOT_JOB_RANK (0 to
    count-1) and SKYPILOT_NUM_JOBS, as SkyPilot sets them for `sky jobs launch --num-jobs`. Check
    `num_jobs_problem` first."""
    ((name, task),) = dag.tasks.items()
    env = {**task.env, "SKYPILOT_JOB_RANK": "${{ matrix.rank }}", "SKYPILOT_NUM_JOBS": str(count)}
    matrix = Matrix((("rank", tuple(range(count))),), location=task.location)
    errors: list[DagError] = []
    expanded = expand({name: task._replace(env=env)}, {name: matrix}, errors, [])
    if errors:  # the task's own text names a matrix key it can't have
        from .errors import DagErrors

        raise DagErrors(errors)
    tasks = {}
    for label, instance in expanded.tasks.items():
        task_id = instance.run_env.get("SKYPILOT_TASK_ID")
        if task_id and "-" in task_id:  # each job its own id, as SkyPilot's `<job name>_<job id>-<task>`
            head, _, tail = task_id.rpartition("-")
            rank = instance.env["SKYPILOT_JOB_RANK"]
            instance = instance._replace(run_env={**instance.run_env, "SKYPILOT_TASK_ID": f"{head}_{rank}-{tail}"})
        tasks[label] = instance
    return dag.replace(tasks=tasks, groups=expanded.groups)
