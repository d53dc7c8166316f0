"""Process control for one attempt's tree: spawn into its own session, find every descendant, kill, reap.

Why this is more than `Popen.terminate()`: a shell task's tree can contain a pipeline, children that ignore SIGTERM,
a leader that exits on SIGTERM while its children keep running (they are then re-parented and vanish from the tree),
and daemons that called setsid or double-forked. So the tree is collected *before* any signal is sent, by three
routes at once: the leader's recursive children, the leader's process group and session, and every process that
carries this attempt's `TUIDAG_RUN_ID`/`TUIDAG_TASK` tag in its environment (inherited through setsid and forks).
Every process is identified by pid *and* create time (psutil objects), or a leader by pid and its run tag, so a recycled
pid is never signalled.
"""
from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import psutil
# psutil itself is imported where it is used: a run in which nothing needs killing never loads it (a tenth of the
# start-up time of a short run).

TAG_RUN = "TUIDAG_RUN_ID"
TAG_TASK = "TUIDAG_TASK"
_PR_SET_CHILD_SUBREAPER = 36


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
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[19]) / _CLOCK_TICKS + _boot_time


def boot_time() -> float:
    """The system's boot time, as psutil computes it (`btime` in /proc/stat)."""
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def tagged_pids(run_id: str) -> list[int]:
    """Processes whose environment carries the run's tag, from a plain /proc scan (it runs at the end of every run,
    so it must not need psutil). The environment a process started with is what /proc shows, and it is inherited
    through setsid, double forks and re-parenting."""
    tag = f"{TAG_RUN}={run_id}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or another user's
            continue
        if tag in environ.split(b"\0"):
            found.append(int(name))
    return found


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


def become_subreaper() -> bool:
    """Make this process adopt orphaned descendants (Linux), so double-forked daemons stay findable."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reap_if_child(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _tagged(proc: psutil.Process, run_id: str, task: str | None) -> bool:
    import psutil

    try:
        env = proc.environ()
    except (psutil.Error, OSError):
        return False
    return env.get(TAG_RUN) == run_id and (task is None or env.get(TAG_TASK) == task)


def collect_tree(
    leader: ProcRef | None, run_id: str | None = None, task: str | None = None, pgid: int | None = None
) -> dict[int, psutil.Process]:
    """Every live process that belongs to an attempt: descendants of the leader, members of its process group or
    session, and processes tagged with (run_id, task). With task=None, every process tagged with run_id."""
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
        if run_id is not None and _tagged(proc, run_id, task):
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


def terminate_tree(procs: dict[int, psutil.Process], grace: float, pgid: int | None = None) -> None:
    """SIGTERM everything, SIGKILL whatever is left after `grace` seconds, and wait until all of it is gone."""
    signal_all(procs, signal.SIGTERM, pgid)
    survivors = wait_gone(procs, time.monotonic() + grace)
    if survivors or (pgid is not None and group_alive(pgid)):
        signal_all(survivors, signal.SIGKILL, pgid)
        wait_gone(survivors, time.monotonic() + 5.0)


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
