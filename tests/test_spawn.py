"""Starting a task's process: the libc posix_spawn path and the Popen fallback must give a child the same world."""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from slowness import patience
from tuidag.engine import process, spawn
from tuidag.engine.executor import TaskEnvironment

STARTERS = [pytest.param(spawn.start_popen, id="popen")]
if spawn.libc_available():
    STARTERS.append(pytest.param(spawn.start_libc, id="libc"))


@pytest.fixture(params=STARTERS)
def start(request):
    """The starter, with each child it starts counted as a task leader while the test runs, as tuidag counts its own:
    an OrphanReaper another test's executor may still have running in this process must not take its exit status
    (`subprocess` would then report 0)."""
    started: list[int] = []

    def start_leader(*args):
        child = request.param(*args)
        process.LEADERS.add(child.pid)
        started.append(child.pid)
        return child

    yield start_leader
    process.LEADERS.difference_update(started)


def run(start, tmp_path, script: str, env: dict[str, str] | None = None, cwd=None) -> tuple[int, str]:
    log = tmp_path / "out.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def start_and_wait() -> int:
        child = start(
            ["/bin/sh", "-c", script], env if env is not None else dict(os.environ), str(cwd or tmp_path), stdin, fd
        )
        return child.wait()

    # On a thread of its own, as tuidag starts task leaders: a child of the main thread in a session of its own looks
    # like a run's orphan to an OrphanReaper another test's executor may still have running in this process, which
    # would take its exit status (and `subprocess` would then report 0).
    try:
        with ThreadPoolExecutor(1) as pool:
            code = pool.submit(start_and_wait).result()
    finally:
        os.close(fd)
        os.close(stdin)
    return code, log.read_text()


def test_libc_path_is_what_runs_here():
    """This machine has glibc >= 2.34: the fast path must be the one in use (and therefore the one tested)."""
    assert spawn.libc_available()


def test_exit_code_output_and_stderr_land_in_the_log(start, tmp_path):
    code, out = run(start, tmp_path, "echo out; echo err >&2; cat; exit 3")  # cat: stdin is /dev/null, so EOF
    assert code == 3
    assert out == "out\nerr\n"


def test_child_leads_its_own_session_and_group(start, tmp_path):
    code, out = run(start, tmp_path, "cut -d' ' -f6,5 /proc/$$/stat; echo $$")
    pgid, sid, pid = out.split()
    assert code == 0 and pgid == sid == pid


def test_cwd_and_exact_environment(start, tmp_path):
    work = tmp_path / "work dir"
    work.mkdir()
    code, out = run(
        start,
        tmp_path,
        'pwd; echo "$ONLY_HERE"; echo "${HOME-unset}"',
        env={"ONLY_HERE": "yes ü", "PATH": os.defpath},
        cwd=work,
    )
    assert code == 0
    assert out.splitlines() == [str(work), "yes ü", "unset"]


def test_missing_cwd_names_the_directory(start, tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        run(start, tmp_path, "true", cwd=tmp_path / "nope")
    assert str(info.value.filename) == str(tmp_path / "nope")


def test_missing_program_names_the_program(start, tmp_path):
    stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        with pytest.raises(FileNotFoundError) as info:
            start(["/no/such/shell", "-c", "true"], dict(os.environ), str(tmp_path), stdin, stdin)
    finally:
        os.close(stdin)
    assert info.value.filename == "/no/such/shell"


def test_no_descriptor_of_ours_leaks_into_the_child(start, tmp_path):
    read, write = os.pipe()
    os.set_inheritable(write, True)  # as if tuidag's own parent had passed it down
    try:
        code, out = run(start, tmp_path, f"ls /proc/$$/fd; if test -e /proc/$$/fd/{write}; then echo LEAK; fi")
    finally:
        os.close(read)
        os.close(write)
    assert code == 0
    assert "LEAK" not in out
    assert sorted(out.split()) == ["0", "1", "2"]


def test_sigpipe_is_back_to_default(start, tmp_path):
    """Python ignores SIGPIPE; a child that inherited that would see EPIPE errors instead of dying quietly in a
    pipeline like `yes | head -1`."""
    code, out = run(start, tmp_path, "grep SigIgn /proc/$$/status")
    ignored = int(out.split()[1], 16)
    assert code == 0
    assert not ignored & (1 << (13 - 1)), "SIGPIPE ignored in the child"
    assert not ignored & (1 << (25 - 1)), "SIGXFSZ ignored in the child"


def test_poll_and_wait_with_a_timeout(start, tmp_path):
    flag = tmp_path / "go"
    fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        child = start(
            ["/bin/sh", "-c", f"while [ ! -e '{flag}' ]; do sleep 0.01; done; exit 7"],
            dict(os.environ),
            str(tmp_path),
            fd,
            fd,
        )
    finally:
        os.close(fd)
    assert child.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.05)
    flag.touch()
    deadline = time.monotonic() + patience(10)
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.returncode == 7
    assert child.wait() == 7


def test_bad_environment_is_refused_before_anything_starts(start, tmp_path):
    with pytest.raises(ValueError):
        run(start, tmp_path, "true", env={"BAD": "a\0b"})


def test_environment_and_arguments_arrive_entry_for_entry(start, tmp_path):
    env = {f"VAR_{i}": "x" * i for i in range(40)}
    env.update({"EMPTY": "", "EQUALS": "a=b=c", "UNICODE": "çà ✓", "PATH": os.defpath})
    script = 'printf "%s\\n" "$0" "$1" "$2"; exec env'
    log = tmp_path / "out.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        child = start(["/bin/sh", "-c", script, "", "two words", "ü"], env, str(tmp_path), fd, fd)
    finally:
        os.close(fd)
    assert child.wait() == 0
    lines = log.read_text().splitlines()
    assert lines[:3] == ["", "two words", "ü"]
    seen = dict(line.split("=", 1) for line in lines[3:])
    seen.pop("PWD", None)  # the shell exports its working directory
    assert seen == env


@pytest.mark.parametrize(
    "argv, env",
    [
        (["/bin/sh", "-c", "echo a\0b"], {}),
        (["/bin/sh", "-c", "true"], {"A=B": "c"}),
    ],
)
def test_unrepresentable_arguments_are_refused(start, tmp_path, argv, env):
    with pytest.raises(ValueError):
        start(argv, env, str(tmp_path), 0, 1)


@pytest.mark.parametrize(
    "own",
    [{"TASK": "one", "EMPTY_OWN": ""}, {"SHARED_1": "overridden", "TASK": "two"}],
    ids=["own-beside-shared", "own-overrides-shared"],
)
def test_a_task_environment_arrives_as_the_mapping_it_reads_as(start, tmp_path, own):
    """The run's variables are encoded once and reused (libc path); what the child sees is exactly the mapping."""
    shared = {f"SHARED_{i}": f"value {i}" for i in range(30)} | {"PATH": os.defpath}
    for round_ in range(2):  # the second spawn reuses the encoded shared part
        env = TaskEnvironment(shared, {**own, "ROUND": str(round_)})
        log = tmp_path / f"env-{round_}.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            child = start(["/bin/sh", "-c", "exec env"], env, str(tmp_path), fd, fd)
        finally:
            os.close(fd)
        assert child.wait() == 0
        seen = dict(line.split("=", 1) for line in log.read_text().splitlines())
        seen.pop("PWD", None)
        assert seen == dict(env) == {**shared, **own, "ROUND": str(round_)}


def test_a_bad_name_in_a_task_environment_is_refused(start, tmp_path):
    with pytest.raises(ValueError):
        start(["/bin/sh", "-c", "true"], TaskEnvironment({"PATH": os.defpath}, {"A=B": "c"}), str(tmp_path), 0, 1)
