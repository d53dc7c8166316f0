"""One cgroup (v2) per attempt, where tuidag may create them: the one way to end a tree that nothing escapes.

A process can leave its process group and session, drop the `TUIDAG_*` tags from its environment and re-launch
itself, but it cannot leave its cgroup (only a process allowed to write to `cgroup.procs` can move it). So on Linux
with the cgroup v2 hierarchy mounted and writable where tuidag runs (as root, or in a subtree delegated to the user),
every run gets a cgroup `tuidag-<run id>` next to tuidag's own, each attempt a child cgroup of that, and ending an
attempt ends with a write of `1` to its `cgroup.kill`: the kernel SIGKILLs every process in it, and a process forked
meanwhile too (the way systemd stops a unit).

A process enters a cgroup by writing to its `cgroup.procs`, and `posix_spawn` runs no code of ours in the child. So a
shell task's shell moves itself, before it runs anything: its command starts with `{ echo 0 >…/cgroup.procs; }`
(`shell_prefix`; POSIX shells only, the only kind tasks use). A leader moved from outside after it started (a
callable's child process, another shell) may fork before the move; what it forks then stays in tuidag's cgroup, and
is still found by the other routes (group, session, tag, subreaper). An attempt's cgroup is reused by a later attempt
once it is empty (creating and removing one costs ~0.1 ms; moving a pid into an existing one ~0.01 ms). Whether it
is empty is read from its `cgroup.events`, open for as long as the cgroup is kept: a `pread` of the open file is one
system call (the kernel writes the file anew for each read), where opening, reading and closing it took nine (open,
fstat, ioctl, two lseeks, fstat, two reads, close), each one a release and retake of the GIL by the attempt's thread;
with eight threads spawning at once that showed as 7-16% of a profile of 1,000 quick tasks.
`TUIDAG_CGROUPS=off` turns all of this off; everything else then still applies.

Moving a process between cgroups takes a lock that, after a quiet spell, first waits for an RCU grace period: the
first shell of a run to move itself waited 7-12 ms here (every later one 0.05 ms, as long as moves keep coming). A
run that has cgroups therefore starts `warm_up` as its executor is made: a thread moves tuidag into the cgroup it is
already in (a move that changes nothing) every few milliseconds until the first attempt takes a cgroup, so that wait
passes during start-up, not in front of the first task (a one-task run: 15 ms of 60).
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time

_POSIX_SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "busybox"})
_SAFE_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")
WARM_EVERY = 0.003  # seconds between moves: well inside a grace period, after which the lock would be cold again
WARM_FOR = 1.0  # seconds at most: a run whose first attempt is late (every task up to date) stops warming anyway
_warming: threading.Event | None = None  # set to stop the thread `warm_up` started


def _mount_point() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on hybrid systems)."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                left, _, right = line.partition(b" - ")
                if right.split(b" ", 1)[0] == b"cgroup2":
                    return os.fsdecode(left.split(b" ")[4]).replace("\\040", " ")
    except OSError:
        pass
    return None


def _own_path() -> str | None:
    """This process's cgroup in the v2 hierarchy (the `0::` line of /proc/self/cgroup)."""
    try:
        with open("/proc/self/cgroup", "rb") as f:
            for line in f:
                if line.startswith(b"0::"):
                    return os.fsdecode(line[3:].rstrip(b"\n"))
    except OSError:
        pass
    return None


def parent_dir() -> str | None:
    """The folder run cgroups are created in: tuidag's own cgroup. None where there is no cgroup v2 or it is off."""
    if os.environ.get("TUIDAG_CGROUPS", "").lower() in ("off", "0", "no", "false"):
        return None
    mount, own = _mount_point(), _own_path()
    if mount is None or own is None or own.endswith(" (deleted)"):
        return None
    path = os.path.normpath(mount + "/" + own.lstrip("/"))
    return path if os.path.isfile(path + "/cgroup.procs") else None


def warm_up() -> None:
    """Start moving this process into its own cgroup every `WARM_EVERY` seconds on a thread, until `warmed` (or
    `WARM_FOR`): see the module's docstring. Nothing where tuidag makes no cgroups."""
    global _warming
    if _warming is not None and not _warming.is_set():
        return  # already warming
    parent = parent_dir()
    if parent is None:
        return
    stop = _warming = threading.Event()
    thread = threading.Thread(
        target=_keep_warm, args=(parent + "/cgroup.procs", stop), name="tuidag-cgroup-warm", daemon=True
    )
    thread.start()


def warmed() -> None:
    """An attempt took a cgroup: its shell's move, and the moves of the attempts after it, keep the lock warm."""
    global _warming
    warming, _warming = _warming, None  # every attempt calls this: the first one stops the thread
    if warming is not None:
        warming.set()


def _keep_warm(procs: str, stop: threading.Event) -> None:
    pid = b"%d" % os.getpid()
    deadline = time.monotonic() + WARM_FOR
    while True:
        try:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        except OSError:  # not allowed to move itself (a delegated subtree's inner cgroup): nothing to warm
            return
        if stop.wait(WARM_EVERY) or time.monotonic() >= deadline:
            return


def run_dir_name(run_id: str) -> str | None:
    """`tuidag-<run id>`, or None for a run id that is no safe folder name (run ids are read back from disk)."""
    return f"tuidag-{run_id}" if _SAFE_RUN_ID.fullmatch(run_id) else None


class Cgroup:
    """One cgroup folder."""

    __slots__ = ("_events", "_prefix", "path")

    def __init__(self, path: str):
        self.path = path
        self._events: int | None = None  # cgroup.events, open while the cgroup is kept for attempts (`keep_open`)
        self._prefix: str | None = None

    def shell_prefix(self, shell: str) -> str:
        """What to put before a command for `shell -c` to move the shell into this cgroup before it starts anything
        (an empty string for a shell that may not understand it; then `add` after the start has to do)."""
        if os.path.basename(shell) not in _POSIX_SHELLS:
            return ""
        if self._prefix is None:
            self._prefix = f"{{ echo 0 >{shlex.quote(self.path + '/cgroup.procs')}; }} 2>/dev/null; "
        return self._prefix

    def keep_open(self) -> None:
        """Keep `cgroup.events` open, for `populated` to read with one system call (see the module's docstring)."""
        if self._events is None:
            try:
                self._events = os.open(self.path + "/cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                pass

    def close(self) -> None:
        events, self._events = self._events, None
        if events is not None:
            os.close(events)

    def add(self, pid: int) -> bool:
        """Move `pid` in. False if that failed (the process already exited, or no permission)."""
        try:
            fd = os.open(self.path + "/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            os.write(fd, b"%d" % pid)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def pids(self) -> list[int]:
        try:
            with open(self.path + "/cgroup.procs", "rb") as f:
                return [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            return []

    def populated(self) -> bool:
        """Any live process in it (zombies do not count). A cgroup that cannot be read counts as empty."""
        events = self._events
        try:
            if events is not None:
                return b"populated 1" in os.pread(events, 256, 0)
            with open(self.path + "/cgroup.events", "rb") as f:
                return b"populated 1" in f.read()
        except OSError:
            return False

    def kill(self) -> bool:
        """SIGKILL every process in it, and any it forks meanwhile. False where cgroup.kill is missing
        (Linux < 5.14)."""
        try:
            fd = os.open(self.path + "/cgroup.kill", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            os.write(fd, b"1")
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def remove(self) -> bool:
        """Delete the folder (only an empty cgroup can be deleted); its child cgroups first."""
        try:
            for entry in os.scandir(self.path):
                if entry.is_dir(follow_symlinks=False):
                    Cgroup(entry.path).remove()
            os.rmdir(self.path)
            return True
        except OSError:
            return False


class RunCgroups:
    """A run's cgroup and its attempts' cgroups, with the empty ones kept for reuse."""

    def __init__(self, root: Cgroup):
        self.root = root
        self._lock = threading.Lock()
        self._free: list[Cgroup] = []
        self._all: list[Cgroup] = []

    @classmethod
    def create(cls, run_id: str) -> RunCgroups | None:
        """The run's cgroup, or None where tuidag may not create one (no cgroup v2, not root nor delegated...)."""
        parent, name = parent_dir(), run_dir_name(run_id)
        if parent is None or name is None:
            return None
        path = f"{parent}/{name}"
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError:
            return None
        root = Cgroup(path)
        if not os.path.isfile(path + "/cgroup.kill"):  # no cgroup.kill: no way to end one at once
            root.remove()
            return None
        return cls(root)

    def acquire(self) -> Cgroup | None:
        """An empty cgroup for one attempt."""
        warmed()
        with self._lock:
            if self._free:
                return self._free.pop()
            group = Cgroup(f"{self.root.path}/a{len(self._all)}")
            self._all.append(group)  # under the lock: two attempts never get the same name
        try:
            os.mkdir(group.path)
        except FileExistsError:
            pass
        except OSError:
            return None
        group.keep_open()
        return group

    def release(self, group: Cgroup) -> None:
        """The attempt is over. An empty cgroup is reused; one with processes left (a daemon that outlives a task
        that succeeded) stays theirs until the run ends."""
        if not group.populated():
            with self._lock:
                self._free.append(group)

    def groups(self) -> list[Cgroup]:
        with self._lock:
            return list(self._all)

    def populated(self) -> bool:
        return self.root.populated()  # counts the child cgroups too

    def pids(self) -> list[int]:
        return pids_recursive(self.root)

    def kill(self) -> None:
        """SIGKILL every process of the run's attempts (cgroup.kill covers the child cgroups)."""
        self.root.kill()

    def remove(self) -> None:
        with self._lock:
            groups = self._all
            self._free, self._all = [], []
        for group in groups:
            group.close()
        self.root.remove()


def leftover_run(run_id: str) -> Cgroup | None:
    """The cgroup a run that crashed left behind, if it is where this process would have created it."""
    parent, name = parent_dir(), run_dir_name(run_id)
    if parent is None or name is None or not os.path.isdir(f"{parent}/{name}"):
        return None
    return Cgroup(f"{parent}/{name}")


def pids_recursive(group: Cgroup) -> list[int]:
    """Every process in a cgroup and its child cgroups."""
    found = group.pids()
    try:
        for entry in os.scandir(group.path):
            if entry.is_dir(follow_symlinks=False):
                found.extend(pids_recursive(Cgroup(entry.path)))
    except OSError:
        pass
    return found
