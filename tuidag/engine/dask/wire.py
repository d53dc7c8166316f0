"""What travels between the client (`executor`, `attempt`), the scheduler (`guard.AttemptsRunOnce`) and the workers
(`runner`, `output`, `registry`): an attempt's identity, its spec, its events, the handlers a worker answers. Both
ends import it, so they agree by construction (a worker of another tuidag version is refused at connection:
`cluster.check_versions`). Imports nothing beyond the standard library at load: the scheduler and every worker
import it.

Identity: every Dask key and topic of tuidag's starts with KEY_PREFIX, which is how the scheduler plugin tells
tuidag's tasks from other clients'. An attempt's key is `tuidag-RUN-TASK-NUMBER` (`attempt_key`); a Dask task that
carries several is named after its first (`attempt._Group`). A run's events go on a topic of its own,
`tuidag-CLIENT-UNIQUE` (`new_topic`), so the scheduler can tell whose it is once that client is gone
(`topic_client`).

The spec (`worker_spec`, pickled by `pack`): plain data, the environment the DAG's and the task's only (the worker's
own goes under it there), a callable pickled by value with its module's source, so a worker needs neither the
client's environment nor the DAG's modules. Bytes, which Dask sizes and searches for futures in O(1), where it
walked every item of a dict (the environment above all) on the client, the scheduler and the worker.

Events on the executor's topic (through the scheduler: small, no output), each a list `[kind, key, payload]`:
- `[STARTED, key, [worker address, slots or None, worker's shown name, start time]]`: the attempt runs on that worker
  (holding those slots there; `name_to_show`) since that time (the worker's clock); sent at the first look after the
  start, `runner.TAIL_INTERVAL` later, so that a quick attempt (most of a big DAG's) costs one event fewer: one over
  sooner says it in its end event instead;
- `[ENDED, key, [ok, exit_code, reason, cancelled, [worker address, slots, name, time] or None, output size]]`: the
  attempt and its whole tree are gone, with where it ran when no STARTED event said so, and how many bytes of output
  it wrote (the client reads what it has not read yet before it ends the attempt).

Output never travels through the scheduler (which would keep it, and let any client of the cluster read it): the
client asks the worker for it directly, through the worker's OUTPUT_OP handler (`output.read_output`), each request
waiting up to READ_WAIT for new output.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..executor import Attempt

KEY_PREFIX = "tuidag-"
STARTED = "s"  # the event saying where and since when an attempt runs
ENDED = "e"  # the event saying an attempt and its whole tree are gone
REFUSE_OP = "tuidag-refuse"  # the scheduler's stream message to a worker: never run this Dask task (see `guard`)
OUTPUT_OP = "tuidag_output"  # the worker's request handler through which the client reads an attempt's output
READ_WAIT = 1.0  # seconds a read by the client waits for new output before it answers with none
SOURCE_LIMIT = 1 << 20  # bytes of a DAG module's source sent along with its callables, at most


def attempt_key(run_id: str, task: str, number: int) -> str:
    """The Dask key of an attempt, and its name in every event about it."""
    return f"{KEY_PREFIX}{run_id}-{task}-{number}"


def ours(key: object) -> bool:
    """Whether a Dask key is tuidag's (the scheduler plugin leaves the others alone)."""
    return isinstance(key, str) and key.startswith(KEY_PREFIX)


def new_topic(client_id: str) -> str:
    """A run's topic, for its attempts' events (the scheduler drops it when the client leaves)."""
    import uuid

    return f"{KEY_PREFIX}{client_id}-{uuid.uuid4().hex}"


def topic_client(topic: str) -> str:
    """The id of the client whose run a topic of `new_topic`'s is."""
    return topic[len(KEY_PREFIX) :].rpartition("-")[0]


def name_to_show(name: Any, address: str) -> str:
    """How the views name a worker: its `--name` when it was given one, else its host:port."""
    if isinstance(name, str) and name and name != address:
        return name
    return address.split("://", 1)[1] if address.startswith(("tcp://", "tls://")) else address


def pack(spec: dict[str, Any]) -> bytes:
    """A `worker_spec` as it travels: one Dask task's argument (`runner.run_attempts`)."""
    return pickle.dumps(spec, protocol=5)


def unpack(packed: bytes) -> dict[str, Any]:
    return pickle.loads(packed)


def worker_spec(
    attempt: Attempt, key: str, topic: str, dag_env: Mapping[str, str], *, workers_number_slots: bool = False
) -> dict[str, Any]:
    """What the worker needs, as plain data: the environment is the DAG's and the task's (with the TUIDAG_*
    tags) only, put over the worker's own; a callable travels pickled by value. With `workers_number_slots`, the
    worker numbers the task's slots itself (`slots`, and `cuda`: the kind that makes CUDA_VISIBLE_DEVICES)."""
    from ...model.resources import cuda_kind, requests
    from ..executor import TaskEnvironment

    task = attempt.task
    own = attempt.env.own if isinstance(attempt.env, TaskEnvironment) else attempt.env
    env = {**dag_env, **own, "TUIDAG_RUN_ID": attempt.run_id}
    steps = [("setup", task.setup)] if task.setup else []
    if task.run is not None:
        steps.append(("run", task.run))
    spec = {
        "key": key,
        "topic": topic,
        "run_id": attempt.run_id,
        "task": task.name,
        "attempt": attempt.number,
        "steps": steps,
        "shell": task.shell,
        "env": env,
        "workdir": str(attempt.workdir),
        "timeout": attempt.timeout,
        "kill_grace": attempt.kill_grace,
        "func": None,
        "results": None,
        "slots": None,
        "cuda": None,
    }
    if workers_number_slots and task.resources:
        spec["slots"], spec["cuda"] = requests(task), cuda_kind(task)
    if task.func is not None:
        import cloudpickle

        try:
            spec["func"] = pickle_by_value(task.func)
        except Exception as exc:
            raise RuntimeError(
                f"the callable cannot be pickled for a Dask worker: {type(exc).__name__}: {exc}"
            ) from None
        spec["source"] = function_source(task.func)
        try:
            spec["results"] = cloudpickle.dumps(dict(attempt.results))
            spec["matrix"] = dict(task.matrix)
        except Exception as exc:
            raise RuntimeError(
                f"a dependency's result cannot be pickled for a Dask worker: {type(exc).__name__}: {exc}"
            ) from None
    return spec


_pickle_lock = threading.Lock()


def pickle_by_value(func: Any) -> bytes:
    """`func` pickled with its module's code, not a reference to the module: a worker has tuidag installed, not the
    DAG's own modules."""
    import cloudpickle

    module = sys.modules.get(getattr(func, "__module__", None) or "")
    if module is None or module.__name__ == "__main__":  # __main__ always travels by value
        return cloudpickle.dumps(func)
    with _pickle_lock:  # the registry is global
        cloudpickle.register_pickle_by_value(module)
        try:
            return cloudpickle.dumps(func)
        finally:
            cloudpickle.unregister_pickle_by_value(module)


def function_source(func: Any) -> tuple[str, str] | None:
    """The file and source text of the module a callable comes from, for the worker's tracebacks: cloudpickle names
    the file of code it pickles by value `<dynamic-code>`, so a traceback on the worker had neither the file nor
    its lines (`callable_task.restore_source` puts both back)."""
    module = sys.modules.get(getattr(func, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if not path:
        return None
    try:
        if os.path.getsize(path) > SOURCE_LIMIT:
            return None
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except (OSError, UnicodeDecodeError):
        return None
