"""What the engine does with each op of the control protocol: one function per op, found by name in a table.

Two tables, by the thread that answers:
- `AT_ONCE`: ops that only read the run and never block (hello, status, subscribe, branch), answered on the serving
  thread as soon as they are read; each queues its own answer (a subscription's reply, snapshot and the events that
  came meanwhile go out together).
- `CONTROLS`: ops that change the run (cancel, pause, ...) and may block (cancelling waits for kills to be sent), run
  one at a time on the control thread (`server.py`), which sends the reply they return.
An op of the protocol in neither table is answered "unknown op". What an op does to the run is a `Scheduler` method,
under its lock; here it is only checked and put into a reply.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..engine.scheduler import RerunRefused
from ..model.matrix_links import named_instances
from . import protocol, transport
from .connection import Connection

if TYPE_CHECKING:
    from .server import ControlServer


# ------------------------------------------------------------------------------------ answered on the serving thread
def hello(server: ControlServer, client: Connection, request: dict) -> None:
    server.transport.send(
        client,
        protocol.reply(request.get("id"), version=protocol.VERSION, run_id=server.session.run.run_id, pid=os.getpid()),
    )


def status(server: ControlServer, client: Connection, request: dict) -> None:
    server.transport.send(client, protocol.reply(request.get("id"), **server.status()))


def subscribe(server: ControlServer, client: Connection, request: dict) -> None:
    rid = request.get("id")
    if client.viewer:
        server.transport.refuse(client, rid, "already subscribed")
    elif server.viewers >= transport.MAX_VIEWERS:
        server.transport.refuse(client, rid, f"too many viewers: this run has {transport.MAX_VIEWERS} already")
    else:
        server.stream_to(client, rid)


def branch(server: ControlServer, client: Connection, request: dict) -> None:
    task, rid = request["task"], request.get("id")
    if task not in server.session.dag.tasks:
        server.transport.refuse(client, rid, f"no task named {task[:80]!r}")
    else:
        server.transport.send(client, protocol.reply(rid, tasks=server.scheduler.branch(task)))


AT_ONCE: dict[str, Callable[[ControlServer, Connection, dict], None]] = {
    "hello": hello,
    "status": status,
    "subscribe": subscribe,
    "branch": branch,
}


# ---------------------------------------------------------------------------------- run on the control thread
def _unknown_task(server: ControlServer, request: dict) -> bytes | None:
    """The refusal of a request naming a task the DAG doesn't have (None: it names none). A matrix task's name
    names its group of instances, a selection (`train[seed=2]`) the instances it selects."""
    dag = server.session.dag
    unknown = [t for t in request["tasks"] if t not in dag.tasks and not named_instances(dag, t)]
    return protocol.reply(request.get("id"), False, error=f"no task named {unknown[0][:80]!r}") if unknown else None


def _tasks_named(server: ControlServer, names: list[str], rerun: bool = False) -> list[str]:
    """The tasks a request means: a matrix task's name (or a selection of it) means each of its instances (for a
    re-run, those that ended without succeeding: the others are left as they are)."""
    dag = server.session.dag
    if not dag.groups:
        return names
    snapshot = server.scheduler.snapshot() if rerun else {}
    tasks: list[str] = []
    for name in names:
        instances = named_instances(dag, name) if name not in dag.tasks else []
        if not instances:
            tasks.append(name)
        elif rerun:
            tasks += [i for i in instances if snapshot[i].state.value in ("FAILED", "CANCELLED", "SKIPPED")]
        else:
            tasks += instances
    return tasks


def cancel(server: ControlServer, request: dict) -> bytes:
    refusal = _unknown_task(server, request)
    if refusal is not None:
        return refusal
    cancelled: dict[str, None] = {}  # an ordered set: a list's `in` made cancelling a big branch quadratic
    reason = protocol.cancel_reason(request["op"], request.get("origin"))
    for task in _tasks_named(server, request["tasks"]):
        cancelled.update(dict.fromkeys(server.scheduler.cancel(task, reason)))
    return protocol.reply(request.get("id"), changed=list(cancelled))


def cancel_all(server: ControlServer, request: dict) -> bytes:
    """`cancel_all` and `stop`: every task that has not ended is cancelled (the reason says which op it was)."""
    reason = protocol.cancel_reason(request["op"], request.get("origin"))
    return protocol.reply(request.get("id"), changed=server.scheduler.cancel_all(reason))


def stop(server: ControlServer, request: dict) -> bytes:
    """`tuidag stop`, the UI's stop (and `q` on a finished run in watch mode): watch mode ends too."""
    server.session.end_watch()
    return cancel_all(server, request)


def rerun(server: ControlServer, request: dict) -> bytes:
    refusal = _unknown_task(server, request)
    if refusal is not None:
        return refusal
    rid, scheduler = request.get("id"), server.scheduler
    again: dict[str, None] = {}
    try:
        for task in _tasks_named(server, request["tasks"], rerun=True):
            if task not in again:  # re-run already with an instance it is downstream of
                again.update(dict.fromkeys(scheduler.rerun(task)))
    except RerunRefused as refused:
        return protocol.reply(rid, False, error=str(refused), changed=list(again))
    changed = list(again)
    if not changed:
        snapshot = scheduler.snapshot()
        states = {t: _state_of(server, snapshot, t) for t in request["tasks"]}
        return protocol.reply(
            rid,
            False,
            error="nothing to re-run: only failed, cancelled or skipped tasks "
            "re-run (" + ", ".join(f"{t} is {s}" for t, s in states.items()) + ")",
            changed=[],
        )
    return protocol.reply(rid, changed=changed)


def _state_of(server: ControlServer, snapshot: dict, name: str) -> str:
    """A task's state in words; a group's, as the states of its instances (`3 succeeded, 1 running`)."""
    group = server.session.dag.groups.get(name)
    if group is None:
        return snapshot[name].state.value.lower()
    counts: dict[str, int] = {}
    for instance in group.instances:
        state = snapshot[instance].state.value.lower()
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in counts.items())


def pause(server: ControlServer, request: dict) -> bytes:
    rid = request.get("id")
    if server.scheduler.paused:
        return protocol.reply(rid, changed=False)
    if not server.scheduler.pause():
        return protocol.reply(rid, False, error="the run is finished: nothing left to pause")
    return protocol.reply(rid, changed=True)


def resume(server: ControlServer, request: dict) -> bytes:
    was = server.scheduler.paused
    server.scheduler.resume()
    return protocol.reply(request.get("id"), changed=was)


def interrupt(server: ControlServer, request: dict) -> bytes:
    server.session.interrupt(getattr(signal, request["signal"]))
    return protocol.reply(request.get("id"))


CONTROLS: dict[str, Callable[[ControlServer, dict], bytes]] = {
    "cancel": cancel,
    "cancel_all": cancel_all,
    "stop": stop,
    "rerun": rerun,
    "pause": pause,
    "resume": resume,
    "interrupt": interrupt,
}
