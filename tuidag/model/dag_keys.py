"""Every key of tuidag's YAML DAG format, in one table: its scope, value type, default, what it does and an example.

The YAML loader's known keys (which keys it takes, and the did-you-mean of an unknown one) are built from it, the
JSON schema (dag_schema.py) and the reference page (docs/gen_dag_file.py) are generated from it, and
tests/test_schema.py fails when the loader takes a key the table lacks, or the table a key the loader lacks. A key
added to the format is added here first.

Types are named here and defined in dag_schema.py (`TYPES`): this module is read on every load of a YAML file, so
it holds strings only.
"""

from __future__ import annotations

from typing import NamedTuple

from .service import DEFAULT_INTERVAL, DEFAULT_MAX_RESTARTS, DEFAULT_READY_TIMEOUT
from .spec import DEFAULT_KILL_GRACE

#: The scopes, in the order the reference shows them, with their headings there.
SCOPES = {
    "dag": "DAG settings (the top level)",
    "task": "Task keys",
    "service": "Service keys (a task with `service: true`)",
    "ready_when": "`ready_when`: when a service is ready",
    "matrix": "`matrix`: one task run for every combination of values",
}


class Key(NamedTuple):
    """One key. `type` names a value type of dag_schema.TYPES; `default` is what applies without the key, as the
    reference says it ("" when the key is required or absence is its meaning); `example` is a value as written in
    YAML after `name: `; `needs` is another key's setting this key is only taken with."""

    name: str
    scope: str
    type: str
    default: str
    description: str
    example: str
    needs: str = ""


def _as_written(seconds: float) -> str:
    """A default duration as a DAG file would write it: 200ms, 5s."""
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"


KEYS = (
    # The top level.
    Key(
        "name",
        "dag",
        "text",
        "the file's name without .yaml",
        "The DAG's name: in the UI, the run list, reports and notes.",
        "pipeline",
    ),
    Key(
        "max_parallel",
        "dag",
        "count",
        "the number of CPUs (on a Dask cluster: its worker threads)",
        "How many tasks run at once; `-j` on the command line overrides it.",
        "4",
    ),
    Key(
        "on_failure",
        "dag",
        "failure-policy",
        "skip-downstream",
        "What happens to the rest of the DAG when a task fails after its retries.",
        "finish-running",
    ),
    Key(
        "kill_grace",
        "dag",
        "duration",
        _as_written(DEFAULT_KILL_GRACE),
        "Time between SIGTERM and SIGKILL when a task is cancelled or times out.",
        "10s",
    ),
    Key("env", "dag", "env", "none", "Variables added to every task's environment.", "{DATA: /srv/data, EPOCHS: 3}"),
    Key(
        "workdir",
        "dag",
        "path",
        "the DAG file's folder",
        "Where tasks run; relative to the DAG file's folder.",
        "build/",
    ),
    Key(
        "resources",
        "dag",
        "capacities",
        "none",
        "Slot capacities: how many of each resource the tasks share; `--resources` overrides them.",
        "{gpu: 2, db: 1}",
    ),
    Key(
        "executor",
        "dag",
        "executor",
        "local",
        "Where attempts run: this machine, a Dask cluster, or a Dask cluster of N workers started for the run.",
        "dask-local:4",
    ),
    Key(
        "dask_address",
        "dag",
        "text",
        "`--dask-address`, else `$DASK_SCHEDULER_ADDRESS`",
        "The Dask scheduler that `executor: dask` uses.",
        "tcp://10.0.0.5:8786",
    ),
    Key(
        "on_end",
        "dag",
        "command",
        "none",
        "A shell command run after every run, with the run's facts in `TUIDAG_*` variables.",
        './notify.sh "$TUIDAG_DAG $TUIDAG_OUTCOME"',
    ),
    Key(
        "on_run_failure",
        "dag",
        "command",
        "none",
        "A shell command run after a run that failed, as `on_end` is.",
        "./page-me.sh",
    ),
    Key(
        "notify",
        "dag",
        "notify",
        "end",
        "When the terminal gets a bell and a desktop note; `--notify` overrides it.",
        "failure",
    ),
    Key("tasks", "dag", "tasks", "required", "The tasks, by name.", "{fetch: {run: ./fetch.sh}}"),
    # A task.
    Key("run", "task", "command", "required", "The task's shell command (`sh -c`).", "python train.py --epochs 3"),
    Key(
        "depends_on",
        "task",
        "task-names",
        "none",
        "Tasks that must succeed before this one starts (a service: be ready).",
        "[fetch, prepare]",
    ),
    Key("env", "task", "env", "none", "Variables added to the task's environment, over the DAG's.", "{EPOCHS: 3}"),
    Key("workdir", "task", "path", "the DAG's workdir", "Where the task runs; relative to the DAG's workdir.", "ml/"),
    Key("retries", "task", "count-or-zero", "0", "Extra attempts after a failure.", "2"),
    Key("retry_delay", "task", "duration", "0s", "Time between a failure and the next attempt.", "5s"),
    Key(
        "timeout",
        "task",
        "positive-duration",
        "none",
        "Longest an attempt may run: then its process tree is killed and it fails with the reason `timeout`.",
        "10m",
    ),
    Key(
        "resources",
        "task",
        "requests",
        "none",
        "Slots the task holds while it runs, of the DAG's capacities.",
        "{gpu: 1}",
    ),
    Key(
        "inputs",
        "task",
        "inputs",
        "none",
        "Files, folders and globs the task reads (relative to its workdir): a change makes it run again.",
        "[data/*.csv, train.py]",
    ),
    Key(
        "outputs",
        "task",
        "outputs",
        "none",
        "Files and folders the task makes (relative to its workdir): with them, an up-to-date task does not run.",
        "[out/model.pt]",
    ),
    Key(
        "cache",
        "task",
        "flag",
        "true",
        "`false`: always run the task, even when it is up to date.",
        "false",
    ),
    Key(
        "env_inputs",
        "task",
        "variable-names",
        "none",
        "Variables of tuidag's environment the task depends on: a change makes it run again.",
        "[CUDA_VERSION]",
    ),
    Key(
        "interruptible",
        "task",
        "flag",
        "true",
        "`false`: under `--watch`, a running attempt finishes before the task runs again.",
        "false",
    ),
    Key(
        "matrix",
        "task",
        "matrix",
        "none",
        "Run the task once per combination of these values (see below).",
        "{lr: [0.01, 0.1], seed: [1, 2, 3]}",
    ),
    Key(
        "max_parallel",
        "task",
        "count",
        "no limit of its own",
        "How many instances of the matrix run at once.",
        "2",
        needs="matrix",
    ),
    Key(
        "name",
        "task",
        "text",
        "`task[key=value,...]`",
        "The instances' names, with `${{ matrix.KEY }}` placeholders.",
        "train-${{ matrix.lr }}",
        needs="matrix",
    ),
    Key(
        "service",
        "task",
        "flag",
        "false",
        "`true`: a server the run keeps up until its other tasks end; dependents start once it is ready.",
        "true",
    ),
    # A service task.
    Key(
        "ready_when",
        "service",
        "ready-check",
        "ready once started",
        "How to tell the service is ready: polled every `interval` from its start.",
        "{port: 5432}",
    ),
    Key(
        "ready_timeout",
        "service",
        "positive-duration",
        _as_written(DEFAULT_READY_TIMEOUT),
        "A service not ready by then fails.",
        "30s",
    ),
    Key("restart", "service", "restart", "no", "`on-failure`: start the service again when it fails.", "on-failure"),
    Key(
        "max_restarts",
        "service",
        "count-or-zero",
        str(DEFAULT_MAX_RESTARTS),
        "How many times the service is restarted.",
        "5",
        needs="restart: on-failure",
    ),
    Key(
        "restart_delay",
        "service",
        "duration",
        "0s",
        "Time between a failure and the restart.",
        "1s",
        needs="restart: on-failure",
    ),
    # A service's readiness check: one of port, http, log and command.
    Key("port", "ready_when", "port", "", "Ready once localhost accepts a TCP connection on this port.", "5432"),
    Key(
        "http",
        "ready_when",
        "url",
        "",
        "Ready once a GET of this URL answers with `status` (proxies are not used).",
        "http://127.0.0.1:8000/health",
    ),
    Key(
        "status", "ready_when", "http-status", "200", "The HTTP status an `http` check waits for.", "204", needs="http"
    ),
    Key(
        "log",
        "ready_when",
        "regex",
        "",
        "Ready once a line the service wrote since it started matches this regular expression.",
        "listening on",
    ),
    Key(
        "command",
        "ready_when",
        "command",
        "",
        "Ready once this command exits 0 (`sh -c`, in the task's workdir and environment).",
        "pg_isready",
    ),
    Key("interval", "ready_when", "positive-duration", _as_written(DEFAULT_INTERVAL), "Time between two polls.", "1s"),
    # A matrix.
    Key(
        "<key>",
        "matrix",
        "matrix-values",
        "",
        "Any other key: its values, which reach each instance as `${{ matrix.KEY }}` and `$TUIDAG_MATRIX_KEY`.",
        "[0.01, 0.1]",
    ),
    Key(
        "exclude",
        "matrix",
        "combinations",
        "none",
        "Combinations to leave out: each entry drops every combination it matches.",
        "[{lr: 0.01, seed: 3}]",
    ),
    Key(
        "include",
        "matrix",
        "combinations",
        "none",
        "Values added to the combinations an entry fits, or a combination of its own when it fits none.",
        "[{lr: 0.1, seed: 1, epochs: 5}]",
    ),
)

#: Task keys a service can't have (it never ends: no outputs, no retries, no timeout).
NOT_FOR_SERVICES = ("outputs", "retries", "retry_delay", "timeout")


def keys_of(scope: str) -> tuple[str, ...]:
    """The names of a scope's keys, in the table's order."""
    return tuple(key.name for key in KEYS if key.scope == scope)


ROOT_KEYS = keys_of("dag")
SERVICE_KEYS = keys_of("service")
#: Every key a task may have, a service's included.
TASK_KEYS = keys_of("task") + SERVICE_KEYS
