"""Process control for one attempt's tree: spawn into its own session, find every descendant, kill, reap.

Why this is more than `Popen.terminate()`: a shell task's tree can contain a pipeline, children that ignore SIGTERM,
a leader that exits on SIGTERM while its children keep running (they are then re-parented and vanish from the tree),
daemons that called setsid or double-forked, and processes that re-launch themselves. So the tree is collected
*before* any signal is sent, by several routes at once: the leader's recursive children, the leader's process group
and session, every process that carries this attempt's `TUIDAG_RUN_ID`/`TUIDAG_TASK` tag in its environment
(inherited through setsid and forks), and, where tuidag may create cgroups, the attempt's cgroup (see `cgroup`).
After the grace period, collecting and SIGKILLing repeat until a pass finds nothing alive: a process that starts its
successor just before it exits is caught by the next pass.

tuidag is a child subreaper, so an orphaned descendant (one that dropped the tags and left the group and session) is
re-parented to tuidag itself: orphans.py finds, reaps and ends those.

Every process is identified by pid *and* create time (psutil objects), or a leader by pid and its run tag, so a recycled
pid is never signalled.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import psutil
# psutil itself is imported where it is used: a run in which nothing needs killing never loads it (a tenth of the
# start-up time of a short run).

TAG_RUN = "TUIDAG_RUN_ID"
TAG_TASK = "TUIDAG_TASK"
TAG_ATTEMPT = "TUIDAG_ATTEMPT"


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_boot_time: float | None = None


def create_time(pid: int) -> float | None:
    """What psutil.Process(pid).create_time() returns, without its per-call /proc/stat read (hot path: every spawn)."""
    global _boot_time
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    if _boot_time is None:
        _boot_time = boot_time()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[19]) / _CLOCK_TICKS + _boot_time


def boot_time() -> float:
    """The system's boot time, as psutil computes it (`btime` in /proc/stat)."""
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def environments(containing: bytes) -> Iterator[tuple[int, list[bytes]]]:
    """(pid, its environment's `KEY=VALUE` items) of this user's processes, other than this one, whose environment
    holds `containing`, from a plain /proc scan (it runs at the end of every run, so it must not need psutil). The
    environment a process started with is what /proc shows, and it is inherited through setsid, double forks and
    re-parenting."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:  # os.open/os.read: three system calls a process, where open() made eight (fstat, ioctl, lseeks)
            fd = os.open(f"/proc/{name}/environ", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # gone, or another user's
            continue
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        except OSError:
            continue
        finally:
            os.close(fd)
        environ = b"".join(chunks)
        if containing in environ:
            yield int(name), environ.split(b"\0")


def tagged_pids(run_id: str) -> list[int]:
    """Processes whose environment carries the run's tag."""
    tag = f"{TAG_RUN}={run_id}".encode()
    return [pid for pid, items in environments(tag) if tag in items]


class ProcRef(NamedTuple):
    """A process identity that survives pid reuse: the pid plus either its create time or the run tag it carries in
    its environment (a recycled pid belongs to a process without this run's tag)."""

    pid: int
    create_time: float | None = None
    run_id: str | None = None

    def process(self) -> psutil.Process | None:
        """The live process this ref names, or None if it is gone or the pid now belongs to someone else."""
        import psutil

        try:
            proc = psutil.Process(self.pid)
            if self.create_time is not None and abs(proc.create_time() - self.create_time) > 0.01:
                return None
            if self.create_time is None and (self.run_id is None or not _tagged(proc, self.run_id, None)):
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                _reap_if_child(proc.pid)
                return None
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            return None


def preload_thread_exit() -> None:
    """glibc loads libgcc_s the first time a thread exits (pthread_exit unwinds the thread's stack). Out of file
    descriptors that load fails, and glibc then aborts the whole process; so it is loaded while descriptors are left."""
    import ctypes

    try:
        ctypes.CDLL("libgcc_s.so.1")
    except OSError:  # not glibc, or linked in statically
        pass


def _reap_if_child(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _tagged(proc: psutil.Process, run_id: str, task: str | None, attempt: int | None = None) -> bool:
    import psutil

    try:
        env = proc.environ()
    except (psutil.Error, OSError):
        return False
    return (
        env.get(TAG_RUN) == run_id
        and (task is None or env.get(TAG_TASK) == task)
        and (attempt is None or env.get(TAG_ATTEMPT, str(attempt)) == str(attempt))
    )


def collect_tree(
    leader: ProcRef | None,
    run_id: str | None = None,
    task: str | None = None,
    pgid: int | None = None,
    attempt: int | None = None,
) -> dict[int, psutil.Process]:
    """Every live process that belongs to an attempt: descendants of the leader, members of its process group or
    session, and processes tagged with (run_id, task, attempt): another attempt of the same task (one Dask started
    again elsewhere on this host, a retry while the first attempt's leftovers die) is not this one's. With
    task=None, every process tagged with run_id; with attempt=None, every attempt of the task."""
    import psutil

    found: dict[int, psutil.Process] = {}
    me = os.getpid()
    lead = leader.process() if leader else None
    if lead is not None:
        found[lead.pid] = lead
        try:
            for child in lead.children(recursive=True):
                found[child.pid] = child
        except psutil.Error:
            pass
    if pgid is None and leader is not None:
        pgid = leader.pid  # leaders are spawned with start_new_session, so pid == pgid == sid
    for proc in psutil.process_iter():
        if proc.pid in found or proc.pid == me:
            continue
        try:
            if pgid is not None and (os.getpgid(proc.pid) == pgid or os.getsid(proc.pid) == pgid):
                found[proc.pid] = proc
                continue
        except OSError:
            continue
        if run_id is not None and _tagged(proc, run_id, task, attempt):
            found[proc.pid] = proc
    return found


def group_alive(pgid: int) -> bool:
    """Cheap check (one syscall) whether any process is still in the group."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def signal_all(procs: dict[int, psutil.Process], sig: int, pgid: int | None = None) -> None:
    import psutil

    if pgid is not None:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    for proc in procs.values():
        try:
            proc.send_signal(sig)  # psutil checks the create time, so a recycled pid is safe
        except (psutil.Error, OSError):
            pass


def wait_gone(procs: dict[int, psutil.Process], deadline: float, poll: float = 0.02) -> dict[int, psutil.Process]:
    """Wait until every process exited (reaping the ones that are our children) or the deadline passed.
    Returns the survivors."""
    import psutil

    alive = dict(procs)
    while alive:
        for pid, proc in list(alive.items()):
            try:
                gone = not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
            except psutil.Error:
                gone = True
            if gone:
                if proc.pid != os.getpid():
                    _reap_if_child(pid)
                del alive[pid]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(poll)
    return alive


def terminate_tree(
    procs: dict[int, psutil.Process],
    grace: float,
    pgid: int | None = None,
    collect: Callable[[], dict[int, psutil.Process]] | None = None,
    cgroup=None,
) -> None:
    """SIGTERM everything, wait up to `grace` seconds, then `kill_until_empty` what is left (and what `collect` finds
    anew: a process may have started a successor meanwhile)."""
    signal_all(procs, signal.SIGTERM, pgid)
    if cgroup is not None:
        signal_pids(cgroup.pids(), signal.SIGTERM)
    survivors = wait_gone(procs, time.monotonic() + grace)
    kill_until_empty(survivors, pgid, collect, cgroup)


KILL_PASSES_DEADLINE = 10.0  # seconds of SIGKILL passes before giving up on a tree that keeps forking


def kill_until_empty(
    known: dict[int, psutil.Process],
    pgid: int | None = None,
    collect: Callable[[], dict[int, psutil.Process]] | None = None,
    cgroup=None,
) -> None:
    """SIGKILL `known`, the group `pgid`, the cgroup and whatever `collect()` finds, again and again until a pass finds
    nothing alive. One snapshot is not enough: a process that forks its successor and exits between the snapshot and
    the signal would survive it (a SIGKILLed process forks no more, so this ends unless new processes keep coming from
    outside the routes). Returns once everything found is gone, or after `KILL_PASSES_DEADLINE` seconds."""
    deadline = time.monotonic() + KILL_PASSES_DEADLINE
    targets = dict(known)
    while True:
        if cgroup is not None and cgroup.populated():
            cgroup.kill()
        if collect is not None:
            targets.update(collect())
        targets = {pid: p for pid, p in targets.items() if is_alive(p)}
        group = pgid is not None and group_alive(pgid)
        if not targets and not group:
            break
        signal_all(targets, signal.SIGKILL, pgid if group else None)
        wait_gone(targets, min(deadline, time.monotonic() + 5.0))
        if time.monotonic() >= deadline:
            break
        targets = {}
    if cgroup is not None:  # cgroup.kill is asynchronous: wait for its processes to be gone
        end = min(deadline, time.monotonic() + 5.0)
        while cgroup.populated() and time.monotonic() < end:
            time.sleep(0.005)


def signal_pids(pids: list[int], sig: int) -> None:
    """Signal bare pids just read from a cgroup (a cgroup keeps a pid from being reused while it is listed)."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def is_alive(proc: psutil.Process) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _stat_fields(pid: int) -> list[bytes] | None:
    """/proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...] (field 3 onwards)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


LEADERS: set[int] = set()  # leaders tuidag waits for itself: never reaped by OrphanReaper (see ShellAttempt._track)


def descendants(pids: list[int]) -> dict[int, psutil.Process]:
    """psutil objects for `pids` and all their descendants (alive ones)."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            found[pid] = proc
            for child in proc.children(recursive=True):
                found[child.pid] = child
        except psutil.Error:
            continue
    return found


def group_members(pgids: set[int], created_after: float | None) -> dict[int, tuple[int, psutil.Process]]:
    """Live processes in any of the process groups or sessions `pgids` (leader pids), created at or after
    `created_after`, as pid -> (the leader pid, process); one /proc scan for all of them. While any process is in group
    or session P, pid P cannot be given to a new process, so for a leader that exited these are still its own group's
    members; the create time rules out a group that was emptied and later re-made under a reused pid."""
    import psutil

    found: dict[int, tuple[int, psutil.Process]] = {}
    if not pgids:
        return found
    me = os.getpid()
    for name in _listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        fields = _stat_fields(int(name))
        if not fields or fields[0] == b"Z":
            continue
        pgid = int(fields[2]) if int(fields[2]) in pgids else int(fields[3])
        if pgid not in pgids:
            continue
        try:
            proc = psutil.Process(int(name))
            if created_after is None or proc.create_time() >= created_after - 2.0:  # btime is whole seconds
                found[proc.pid] = (pgid, proc)
        except psutil.Error:
            continue
    return found


def tree_usage(procs: list[psutil.Process]) -> tuple[float, int]:
    """(CPU percent since the previous call on the same Process objects, RSS bytes) summed over a tree."""
    import psutil

    cpu, rss = 0.0, 0
    for proc in procs:
        try:
            with proc.oneshot():
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
        except psutil.Error:
            pass
    return cpu, rss
