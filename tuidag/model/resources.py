"""Resource slots: scarce things (GPUs, a database, licences) a DAG declares capacities for and tasks hold.

A DAG declares `resources: {gpu: 2}` (capacities, overridable with `--resources gpu=2`); a task asks for
`resources: {gpu: 1}`. Requests are checked against the capacities only once every source of capacities is known
(the file, the command line, the Python API): `resolve` does that and is what every front end calls before a run.

A SkyPilot task's `accelerators: V100:2` is an *optional* request: it becomes 2 `V100` slots when a capacity for
`V100` is declared, and is dropped otherwise (a SkyPilot file written for a cloud still runs locally).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from .counts import counted
from .errors import DagError, DagErrors, Location, short_repr
from .spec import MAX_COUNT

if TYPE_CHECKING:
    from .spec import DagSpec, TaskSpec

#: Slot kinds become parts of environment variable names (TUIDAG_SLOTS_<KIND>) and of `KIND=N` arguments.
KIND_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: Kinds whose slots are CUDA devices: `gpu` and the NVIDIA accelerator names SkyPilot uses (matched whole, any case).
_CUDA_NAMES = re.compile(
    r"(?i)gpu|K80|P4|P100|T4g?|V100(-32GB)?|A10G?|A100(-80GB)?|A40|A6000|L4|L40S?|"
    r"H100(-MEGA|-80GB)?|H200|B100|B200|GB200|RTX\w*"
)


class Request(NamedTuple):
    """Slots of one kind a task asks for. An accelerator request is dropped when no capacity is declared for it."""

    # A field may shadow tuple.count (a Request is never counted in), which mypy reports as an override it can't
    # allow; `request.count` is the name the Python API and its users read.
    count: int  # type: ignore[assignment]
    location: Location | None = None
    accelerator: bool = False  # a SkyPilot accelerator: optional, and its slots are CUDA devices


def kind_problem(kind: str) -> str | None:
    if not KIND_RE.fullmatch(kind):
        return (
            f"resource name {kind!r} may only contain letters, digits, '_', '.' and '-' (and start with a "
            f"letter or digit)"
        )
    return None


def slot_env_name(kind: str) -> str:
    """TUIDAG_SLOTS_<KIND>: the kind upper-cased, characters a shell variable can't hold as '_'."""
    return "TUIDAG_SLOTS_" + re.sub(r"[^A-Z0-9_]", "_", kind.upper())


def is_cuda_kind(kind: str, accelerator: bool = False) -> bool:
    """Slots of this kind are CUDA devices: `gpu`/`GPU`, a known GPU name, or a SkyPilot accelerator (but a TPU)."""
    return bool(_CUDA_NAMES.fullmatch(kind)) or (accelerator and not kind.lower().startswith("tpu"))


def format_slots(held: Mapping[str, tuple[int, ...]]) -> str:
    """`gpu:0,1 db:0`: how snapshots, the journal and the views show the slots an attempt holds."""
    return " ".join(f"{kind}:{','.join(map(str, indices))}" for kind, indices in held.items())


def slot_counts(text: str) -> dict[str, int]:
    """How many slots of each kind `format_slots` text names: `gpu:0,1 db:0` -> {gpu: 2, db: 1}."""
    counts = {}
    for part in text.split():
        kind, _, indices = part.rpartition(":")
        counts[kind] = indices.count(",") + 1
    return counts


def parse_capacities(text: str) -> dict[str, int]:
    """`gpu=2,db=1` (the `--resources` argument). Raises ValueError saying what is wrong."""
    capacities: dict[str, int] = {}
    for part in text.split(","):
        kind, equals, count = part.strip().partition("=")
        count = count.strip()
        if not equals or kind_problem(kind) or not count.isdigit():
            raise ValueError(f"expected KIND=COUNT[,KIND=COUNT...] (e.g. gpu=2,db=1), got {short_repr(text)}")
        if len(count.lstrip("0")) > len(str(MAX_COUNT)) or int(count) > MAX_COUNT:
            raise ValueError(f"{kind}: at most {MAX_COUNT:,} slots, got {short_repr(count)}")
        capacities[kind] = int(count)
    return capacities


def resolve(dag: DagSpec, overrides: Mapping[str, int] | None = None, flag: str = "--resources") -> DagSpec:
    """The DAG with `overrides` over its capacities and every request checked against them: optional requests
    without a capacity dropped, the rest kept. Raises DagErrors: a request for an undeclared kind or more slots than
    its capacity, located at the request (a capacity the command line lowered names the task and `flag`).
    Resolving a resolved DAG again changes nothing."""
    overrides = overrides or {}
    if not overrides and not any(task.resources for task in dag.tasks.values()):
        return dag  # the common case, on every run of a big DAG
    capacities = {**dag.resources, **overrides}
    errors: list[DagError] = []
    tasks = {}
    changed = bool(overrides)
    for name, task in dag.tasks.items():
        if not task.resources:
            tasks[name] = task
            continue
        kept = {}
        for kind, request in task.resources.items():
            slots = counted(request.count, f"'{kind}' slot")
            if kind not in capacities:
                if request.accelerator:
                    continue
                errors.append(
                    DagError(
                        f"task '{name}' asks for {slots}, but no capacity "
                        f"for '{kind}' is declared: add it to the DAG's 'resources' or pass "
                        f"{flag} {kind}=N",
                        request.location,
                    )
                )
            elif request.count > capacities[kind]:
                if kind in overrides:
                    where = f" ({request.location})" if request.location else ""
                    errors.append(
                        DagError(
                            f"{flag} {kind}={capacities[kind]} is less than the {slots} task '{name}' asks for{where}"
                        )
                    )
                else:
                    errors.append(
                        DagError(
                            f"task '{name}' asks for {slots}, more than the capacity of {capacities[kind]}",
                            request.location,
                        )
                    )
            else:
                kept[kind] = request
        if kept != dict(task.resources):
            changed = True
            tasks[name] = task._replace(resources=kept)
        else:
            tasks[name] = task
    if errors:
        raise DagErrors(errors)
    return dag.replace(tasks=tasks, resources=capacities) if changed else dag


def with_slot_errors(exc: DagErrors, overrides: Mapping[str, int] | None = None) -> DagErrors:
    """`exc` with the errors `resolve` finds in the DAG as far as it was read (its `partial`), so that a file with a
    bad count, a request over its capacity and an undeclared kind hears of all three at once."""
    if exc.partial is None:
        return exc
    try:
        resolve(exc.partial, overrides)
    except DagErrors as more:
        return DagErrors([*exc.errors, *more.errors])
    return exc


def cuda_kind(task: TaskSpec) -> str | None:
    """The kind of the task's requests whose slot numbers become CUDA_VISIBLE_DEVICES: the first CUDA one."""
    for kind, request in task.resources.items():
        if is_cuda_kind(kind, request.accelerator):
            return kind
    return None


def slot_env(held: Mapping[str, tuple[int, ...]], cuda: str | None) -> dict[str, str]:
    """TUIDAG_SLOTS_<KIND> for each kind held, and CUDA_VISIBLE_DEVICES with the numbers of kind `cuda`."""
    env = {
        slot_env_name(kind): ",".join(map(str, indices))
        for kind, indices in held.items()
        if not kind.endswith("[*]")  # a matrix group's own limit (matrix.group_slot_kind): no device to name
    }
    if cuda is not None and cuda in held:
        env["CUDA_VISIBLE_DEVICES"] = env[slot_env_name(cuda)]
    return env


def requests(task: TaskSpec) -> dict[str, int]:
    """Slot counts a (resolved) task holds while it runs."""
    return {kind: request.count for kind, request in task.resources.items()}
