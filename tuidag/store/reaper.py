"""Cleaning up after a tuidag that died mid-run (kill -9, power loss, OOM killer).

Its task processes may still be running. Every attempt's leader is in the journal by pid, every task process
carries `TUIDAG_RUN_ID` in its environment unless it dropped it, a process that dropped it stays in its leader's
process group or session unless it left them too, and where tuidag could create cgroups every attempt's processes are
in the run's cgroup whatever they did. So the next tuidag command on the state dir finds those processes by all four
routes — a journalled pid counts only while it still carries the run's tag (or, for callables in child processes,
has the journalled create time), a group or session only while no other process has its leader's pid, so a process
of another program that reused a pid is never touched — kills them, and records the run as interrupted.
"""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING, NamedTuple

from ..engine import process
from .journal import replay
from .runs import RunDir, RunStore, write_summary

if TYPE_CHECKING:
    import psutil

REAP_GRACE = 2.0


class Reaped(NamedTuple):
    run_id: str
    processes: list[tuple[str, int, str]]  # (task or "?", pid, command name)


def reap_interrupted(store: RunStore, grace: float = REAP_GRACE) -> list[Reaped]:
    """Kill what interrupted runs left behind and close those runs with an `interrupted` summary."""
    if not store.runs_dir.is_dir():
        return []
    reports = []
    try:
        lock = _reap_lock(store)
        lock.__enter__()
    except OSError:  # a read-only state dir: nothing of ours can be running from it
        return []
    try:
        for run in store.runs():
            if not run.summary.exists() and not run.owned():
                reports.append(_reap_run(run, grace))
    finally:
        lock.__exit__()
    return reports


def reap_run(store: RunStore, run: RunDir, grace: float = REAP_GRACE) -> Reaped | None:
    """The same for one run (a viewer whose engine died): None when it has an owner or was closed already."""
    with _reap_lock(store):
        if run.summary.exists() or run.owned():
            return None
        return _reap_run(run, grace)


def _reap_run(run: RunDir, grace: float) -> Reaped:
    import psutil  # only after a crash: an ordinary start never loads it

    from ..engine import cgroup

    rep = replay(run.journal)
    started = rep.started_at
    leftover_cgroup = cgroup.leftover_run(run.run_id)
    groups: dict[int, str] = {}  # journalled leaders whose process group and session are the run's -> task
    victims: dict[int, psutil.Process] = {}
    owners: dict[int, str] = {}
    for task in rep.tasks.values():
        for pid, ctime in task.pids:
            # None if gone or the pid now names another process (another create time, or no tag of this run)
            leader = process.ProcRef(pid, ctime, run.run_id).process()
            if leader is None and _taken(pid, started, rep.last_time):
                continue  # the pid is another process's now, so no group of ours can have that id any more
            groups[pid] = task.name
            if leader is None:
                continue
            try:
                tree = [leader, *leader.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in tree:
                victims[proc.pid] = proc
                owners[proc.pid] = task.name
    # Members of the leaders' groups and sessions, even after a leader exited: processes that dropped the tags
    for pid, (pgid, proc) in process.group_members(set(groups), started).items():
        victims.setdefault(pid, proc)
        owners.setdefault(pid, groups[pgid])

    def collect() -> dict[int, psutil.Process]:
        """Everything else the run started: tagged (whatever it did to its parentage: setsid, double fork), in a
        journalled leader's group or session, or in the run's cgroup."""
        found = process.collect_tree(None, run_id=run.run_id)
        found.update({pid: proc for pid, (_, proc) in process.group_members(set(groups), started).items()})
        if leftover_cgroup is not None:
            found.update(process.descendants(cgroup.pids_recursive(leftover_cgroup)))
        return found

    for pid, proc in collect().items():
        victims.setdefault(pid, proc)
    found = []
    for pid, proc in sorted(victims.items()):
        try:
            name = proc.name()
            owner = owners.get(pid) or proc.environ().get(process.TAG_TASK, "?")
        except psutil.Error:
            continue
        found.append((owner, pid, name))
    process.terminate_tree(victims, grace, collect=collect, cgroup=leftover_cgroup)
    if leftover_cgroup is not None:
        leftover_cgroup.remove()
    counts: dict[str, int] = {}
    for task in rep.tasks.values():
        counts[task.state.value] = counts.get(task.state.value, 0) + 1
    end = rep.last_time or rep.started_at
    try:
        write_summary(
            run,
            {
                "run_id": run.run_id,
                "dag": rep.header.get("dag", "?"),
                "source": rep.header.get("source"),
                "started_at": rep.started_at,
                "finished_at": end,
                "duration": end - rep.started_at if end and rep.started_at else None,
                "counts": counts,
                "outcome": "interrupted",
                "interrupted_by": rep.forced_by or "crash",
                "reaped": [{"task": t, "pid": p, "name": n} for t, p, n in found],
            },
        )
    except OSError:  # a full state dir: the run stays unclosed and the next command tries again
        pass
    return Reaped(run.run_id, found)


def _taken(pid: int, started: float | None, last: float | None) -> bool:
    """Whether `pid` names a process other than the run's leader: any live one (ProcRef did not recognise it), or a
    zombie that did not start while the run went on (the leader itself stays a zombie where nothing reaps it)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
        born = proc.create_time()
    except psutil.Error:
        return False
    return started is None or last is None or not started - 2.0 <= born <= last + 2.0  # btime is whole seconds


class _reap_lock:
    """Two tuidag commands starting at once don't both reap (and kill) the same leftovers."""

    def __init__(self, store: RunStore):
        self.path = store.runs_dir / ".reap.lock"

    def __enter__(self) -> None:
        # OSError: the caller skips reaping
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc) -> None:
        os.close(self.fd)
