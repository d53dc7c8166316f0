"""Starting one process of a task: `posix_spawn` from libc, with the GIL released for the whole call.

Why not `subprocess.Popen` every time: Popen runs a page of Python per spawn and drops and retakes the GIL around five
system calls (its error pipe, the vfork, the read, the closes). With eight pool threads spawning at once those
hand-offs cost about a sixth of the wall time of a DAG of quick tasks. One ctypes call into glibc's `posix_spawn`
does the same work without holding the GIL: a new session, stdin from /dev/null, stdout and stderr into the log,
the working directory, every other descriptor closed, SIGPIPE and SIGXFSZ back to their defaults (Python ignores
them; its children must not).

Where libc lacks a piece of that (not Linux, glibc older than 2.34) `start` is Popen with the same settings.
"""

from __future__ import annotations

import array
import functools
import itertools
import operator
import os
import signal
import sys
import time
from collections.abc import Mapping
from typing import Protocol

from . import process
from .executor import TaskEnvironment


class Child(Protocol):
    """What the executor uses of a started process (Popen has it too)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def start_popen(argv: list[str], env: Mapping[str, str], cwd: str, stdin: int, stdout: int) -> Child:
    import subprocess  # the fallback only: subprocess is not needed otherwise

    child = subprocess.Popen(
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    process.LEADERS.add(child.pid)  # until the attempt has waited for it
    return child


class SpawnedChild:
    """A child started by `start_libc`. `poll` and `wait` are for one thread (the one waiting on the attempt);
    any thread may read `returncode`."""

    def __init__(self, pid: int, argv: list[str]):
        process.LEADERS.add(pid)  # until `_reap`: the orphan reaper leaves a child someone waits for alone
        self.pid = pid
        self.args = argv
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.returncode is None:
                self._reap(0)
            return self.returncode
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                import subprocess  # for its exception only, raised as Popen raises it

                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)
        return code

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): Popen reports 0 then too
            self.returncode = 0
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)
            process.LEADERS.discard(pid)


class _Libc:
    """glibc's posix_spawn and the file actions it needs, bound once. The spawn attributes (new session, default
    SIGPIPE and SIGXFSZ) are the same for every child, so one read-only set serves every thread."""

    FLAGS = 0x80 | 0x04  # POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF (glibc's values)
    BUFFER = 512  # bytes for a posix_spawn_file_actions_t or posix_spawnattr_t (glibc: 80 and 336)

    def __init__(self) -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        self.ctypes = ctypes
        self.spawn = libc.posix_spawn
        self.spawn.argtypes = [
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.actions_init = libc.posix_spawn_file_actions_init
        self.add_dup2 = libc.posix_spawn_file_actions_adddup2
        self.add_chdir = libc.posix_spawn_file_actions_addchdir_np  # glibc 2.29
        self.add_closefrom = libc.posix_spawn_file_actions_addclosefrom_np  # glibc 2.34
        self._actions: dict[tuple[int, int, bytes], object] = {}
        self._shared: dict[int, tuple] = {}  # id(mapping) -> (mapping, buffer, pointers): see shared_environment
        self.attr = ctypes.create_string_buffer(self.BUFFER)
        defaults = ctypes.create_string_buffer(self.BUFFER)  # a sigset_t
        if (
            libc.posix_spawnattr_init(self.attr)
            or libc.sigemptyset(defaults)
            or libc.sigaddset(defaults, int(signal.SIGPIPE))
            or libc.sigaddset(defaults, int(signal.SIGXFSZ))
            or libc.posix_spawnattr_setsigdefault(self.attr, defaults)
            or libc.posix_spawnattr_setflags(self.attr, self.FLAGS)
        ):
            raise OSError("posix_spawn attributes could not be set up")

    def strings(self, items, what: str):
        """A NULL-terminated `char *[]` over one buffer, as (buffer, pointer array); both must outlive the call.

        One encode and one array of addresses, computed by C-level iterators: converting an environment entry by
        entry (`os.fsencode`, then a `c_char_p` each) took a tenth of a millisecond per spawn, more than all the rest
        of the spawn's Python."""
        text = "\0".join(items)
        data = text.encode(_FS_ENCODING, _FS_ERRORS) + b"\0"
        parts = data.split(b"\0")[:-1]  # one per item, the NUL each ends with taken off
        if len(parts) != len(items) + (not items):
            raise ValueError(f"embedded null byte in {what}")
        buffer = self.ctypes.create_string_buffer(data, len(data))
        pointers = array.array(_POINTER_TYPE)
        if items:  # item i starts after items 0..i-1 and their NULs
            starts = itertools.accumulate(
                map(operator.add, map(len, parts[:-1]), itertools.repeat(1)), initial=self.ctypes.addressof(buffer)
            )
            pointers.extend(starts)
        pointers.append(0)
        return buffer, pointers

    def environment(self, env: Mapping[str, str]):
        """`strings` of the `KEY=value` entries, after checking the names."""
        if "=" in "".join(env) or "" in env:
            bad = next(key for key in env if "=" in key or not key)
            raise ValueError(f"illegal environment variable name {bad!r}")
        return self.strings(list(map("=".join, env.items())), "the environment")

    def shared_environment(self, env: Mapping[str, str]):
        """`environment(env)` for a mapping every spawn of a run shares (a `TaskEnvironment`'s `shared`), kept while
        the mapping lives: encoding forty-odd variables was most of a spawn's Python."""
        entry = self._shared.get(id(env))
        if entry is None or entry[0] is not env:
            if len(self._shared) >= 16:
                self._shared.clear()
            entry = self._shared[id(env)] = (env, *self.environment(env))
        return entry[1], entry[2]

    def file_actions(self, stdin: int, stdout: int, cwd: bytes):
        """The file actions for one (stdin, stdout, cwd): dup2 0-2, chdir, close everything else. posix_spawn only
        reads them, so one set serves every spawn with the same three values; descriptor numbers are reused, so a
        run needs a handful of sets, kept here instead of being built and destroyed per spawn."""
        key = (stdin, stdout, cwd)
        actions = self._actions.get(key)
        if actions is None:
            if len(self._actions) >= 256:  # a run that spawns from many workdirs: start over rather than grow
                self._actions.clear()  # the dropped sets are never destroyed: a few bytes each, and no race
            actions = self.ctypes.create_string_buffer(self.BUFFER)
            if (
                self.actions_init(actions)
                or self.add_dup2(actions, stdin, 0)
                or self.add_dup2(actions, stdout, 1)
                or self.add_dup2(actions, stdout, 2)
                or self.add_chdir(actions, cwd)
                or self.add_closefrom(actions, 3)
            ):
                raise OSError(self.ctypes.get_errno(), "posix_spawn file actions could not be set up")
            self._actions[key] = actions
        return actions


@functools.cache
def _loaded() -> _Libc | None:
    """glibc's spawn functions, bound on the first spawn (not at import: `tuidag graph` or `runs` never spawns)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _Libc()
    except (OSError, AttributeError):  # no such library or function
        return None


_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()  # what os.fsencode uses
_POINTER_TYPE = "Q" if array.array("Q").itemsize == 8 else "L"  # a C pointer, for the argv/envp arrays


def start_libc(argv: list[str], env: Mapping[str, str], cwd: str, stdin: int, stdout: int) -> Child:
    """`start_popen`, done by one posix_spawn call. Raises OSError (FileNotFoundError naming `cwd` or the program)
    when the process cannot start, ValueError for a NUL byte or an illegal variable name."""
    libc = _loaded()
    if libc is None:
        raise OSError("posix_spawn_file_actions_addchdir_np/addclosefrom_np are not available")
    ctypes = libc.ctypes
    program = argv[0]
    if "/" not in program:  # Popen looks it up in the child's PATH
        import shutil  # here: shutil (with bz2 and lzma) costs every run 2 ms of start-up, and shells are paths

        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(2, os.strerror(2), program)
        program = found
    argv_buffer, c_argv = libc.strings([program, *argv[1:]], "an argument")
    if type(env) is TaskEnvironment and env.own.keys().isdisjoint(env.shared):
        _shared_buffer, c_shared = libc.shared_environment(env.shared)  # encoded once per run
        _own_buffer, c_own = libc.environment(env.own)  # the buffers stay referenced until the spawn
        c_env = c_shared[:-1] + c_own  # the run's entries, then the task's, then the NULL
    else:
        _env_buffer, c_env = libc.environment(env)
    workdir = os.fsencode(cwd)
    if b"\0" in workdir:
        raise ValueError("embedded null byte in the working directory")
    pid = ctypes.c_int()
    # argv_buffer starts with the program's path: it is also the path argument
    err = libc.spawn(
        ctypes.byref(pid),
        ctypes.addressof(argv_buffer),
        libc.file_actions(stdin, stdout, workdir),
        libc.attr,
        c_argv.buffer_info()[0],
        c_env.buffer_info()[0],
    )
    if err:
        missing = cwd if err in (2, 20) and not os.path.isdir(cwd) else program  # ENOENT, ENOTDIR
        raise OSError(err, os.strerror(err), missing)
    return SpawnedChild(pid.value, argv)


def start(argv: list[str], env: Mapping[str, str], cwd: str, stdin: int, stdout: int) -> Child:
    """Start `argv` in a new session with stdin from `stdin`, stdout and stderr into `stdout`, in `cwd`, with
    exactly `env`, and no other descriptor of ours. The child's pid is in `process.LEADERS` until it is reaped
    (by whoever waits for it; the orphan reaper leaves it alone)."""
    if _loaded() is None:
        return start_popen(argv, env, cwd, stdin, stdout)
    return start_libc(argv, env, cwd, stdin, stdout)


def libc_available() -> bool:
    return _loaded() is not None
