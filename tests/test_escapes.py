"""Processes that try to escape the run: daemons that leave the group and session and drop the `TUIDAG_*` tags,
processes that re-launch themselves, orphans that die by the thousand, processes callables start, crashes and forced
exits that leave such processes behind, running out of descriptors, callables raising unusual exceptions.

Each shape runs against real processes, checked by pid and create time (a recycled pid never counts). The engine
tests run twice where the machine allows: with a cgroup per attempt, and with the subreaper alone (the fallback where
tuidag may not create cgroups).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import psutil
import pytest

from dags import Recorder, alive, make_dag, read_pids, wait_until
from slowness import patience
from test_cli import tuidag, write
from tuidag.engine import LocalExecutor, Scheduler, cgroup, orphans, process
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore


def _cgroups_work() -> bool:
    groups = cgroup.RunCgroups.create(f"probe-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    if groups is None:
        return False
    groups.remove()
    return True


CGROUPS = _cgroups_work()
NO_CGROUPS = (
    "no cgroups for tuidag here: cgroup v2 with cgroup.kill (Linux 5.14) writable by this user (root or a "
    "delegated subtree) is needed, and TUIDAG_CGROUPS must not be off"
)
MODES = [
    pytest.param(False, id="subreaper"),
    pytest.param(True, id="cgroup", marks=pytest.mark.skipif(not CGROUPS, reason=NO_CGROUPS)),
]
CLI_MODES = [
    pytest.param("off", id="subreaper"),
    pytest.param("on", id="cgroup", marks=pytest.mark.skipif(not CGROUPS, reason=NO_CGROUPS)),
]


def start(dag, tmp_path: Path, cgroups: bool) -> tuple[Scheduler, Recorder, str]:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    scheduler = Scheduler(dag, LocalExecutor(cgroups=cgroups), run_id, logs)
    recorder = Recorder()
    scheduler.subscribe(recorder)
    scheduler.start()
    return scheduler, recorder, run_id


def recorded(pids: Path, count: int) -> list[tuple[int, float]]:
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) >= count, timeout=15)
    refs = read_pids(pids)
    assert len(refs) == count, f"expected {count} live processes, got {refs}"
    return refs


def in_run_cgroup(pid: int, run_id: str) -> bool:
    with open(f"/proc/{pid}/cgroup") as f:
        return f"/tuidag-{run_id}/" in f.read()


def untagged(pid: int) -> bool:
    return not any(key.startswith("TUIDAG_") for key in psutil.Process(pid).environ())


DAEMON_PY = """\
import os, sys
if os.fork():
    sys.exit(0)
os.setsid()
os.execve("/bin/sh", ["sh", "-c", "echo $$ >> {pids}; exec sleep 61"], {{}})
"""


def daemon_command(kind: str, tmp_path: Path, pids: Path) -> str:
    """Start the daemon and wait until it has left (before, it is still in the task's group, and ends with it)."""
    wait = f"until [ -s {pids} ]; do sleep 0.01; done; echo started"
    if kind == "shell":
        return f"(setsid env -i sh -c 'echo $$ >> {pids}; exec sleep 61' &); {wait}"
    script = write(tmp_path / "daemon.py", DAEMON_PY.format(pids=pids))
    return f"{sys.executable} {script}; {wait}"


# --- 5: untagged daemons ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cgroups", MODES)
@pytest.mark.parametrize("kind", ["shell", "python"])
@pytest.mark.parametrize("ending", ["succeeds", "cancelled", "timeout"])
def test_untagged_daemon_ends_with_its_attempt_or_the_run(tmp_path, cgroups, kind, ending):
    """The daemon leaves the group and session and drops the tags. With a cgroup it dies when its attempt is
    cancelled or times out; with the subreaper alone it is ended with the run (it is re-parented to tuidag). A task
    that succeeded may leave a daemon for later tasks: it ends with the run either way."""
    pids = tmp_path / "pids"
    command = daemon_command(kind, tmp_path, pids)
    task = {"run": command if ending == "succeeds" else f"{command}; sleep 60"}
    if ending == "timeout":
        task["timeout"] = 2.0
    dag = make_dag({"t": task, "after": {"run": "true", "depends_on": ["t"]}}, kill_grace=0.3)
    scheduler, rec, run_id = start(dag, tmp_path, cgroups)
    try:
        (ref,) = recorded(pids, 1)
        assert untagged(ref[0]) and os.getsid(ref[0]) != os.getsid(0)
        assert in_run_cgroup(ref[0], run_id) == cgroups
        if ending == "cancelled":
            scheduler.cancel("t")
        expected = {"succeeds": "SUCCEEDED", "cancelled": "CANCELLED", "timeout": "FAILED"}[ending]
        rec.wait_state("t", expected, timeout=20)
        if cgroups and ending != "succeeds":
            assert not alive(*ref), "a cgroup's attempt ended with a process of it alive"
        assert scheduler.wait(patience(20))
    finally:
        scheduler.close()
    assert not alive(*ref), "the daemon outlived the run"


@pytest.mark.skipif(not CGROUPS, reason=NO_CGROUPS)
def test_attempts_running_at_once_have_cgroups_of_their_own(tmp_path):
    """Eight attempts start together: eight cgroups; cancelling one kills nothing of the others."""
    go = tmp_path / "go"
    tasks = {
        f"t{i}": f"tail -1 /proc/$$/cgroup > {tmp_path}/cg{i}; until [ -e {go} ]; do sleep 0.02; done" for i in range(8)
    }
    scheduler, rec, run_id = start(make_dag(tasks, max_parallel=8, kill_grace=0.2), tmp_path, cgroups=True)
    try:
        wait_until(
            lambda: all(
                (tmp_path / f"cg{i}").exists() and (tmp_path / f"cg{i}").read_text().endswith("\n") for i in range(8)
            ),
            timeout=20,
        )
        groups = {(tmp_path / f"cg{i}").read_text() for i in range(8)}
        assert len(groups) == 8 and all(f"/tuidag-{run_id}/a" in g for g in groups), groups
        scheduler.cancel("t0")
        rec.wait_state("t0", "CANCELLED", timeout=10)
        go.touch()
        assert scheduler.wait(patience(20))
    finally:
        scheduler.close()
    assert [s.state.value for s in scheduler.snapshot().values()] == ["CANCELLED"] + ["SUCCEEDED"] * 7


@pytest.mark.skipif(not CGROUPS, reason=NO_CGROUPS)
def test_a_cgroup_goes_to_a_later_attempt_only_once_it_is_empty(tmp_path):
    """An attempt that left a daemon keeps its cgroup (the daemon must not end with a later attempt's cgroup.kill);
    an empty one is reused. Whether it is empty is read again each time from the file kept open: the daemon's end
    makes it reusable."""
    groups = cgroup.RunCgroups.create(f"test-{uuid.uuid4().hex[:12]}")
    assert groups is not None
    daemon = None
    try:
        first = groups.acquire()
        assert first is not None
        daemon = subprocess.Popen(["sh", "-c", f"{first.shell_prefix('sh')}exec sleep 61"])
        wait_until(first.populated)
        groups.release(first)
        second = groups.acquire()
        assert second is not None and second.path != first.path
        assert not second.populated()
        groups.release(second)
        assert groups.acquire() is second
        daemon.kill()
        daemon.wait()
        wait_until(lambda: not first.populated())
        groups.release(first)
        assert groups.acquire() is first
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        groups.remove()
    assert not os.path.exists(groups.root.path)


@pytest.mark.skipif(not CGROUPS, reason=NO_CGROUPS)
def test_warming_the_cgroup_lock_leaves_tuidag_where_it_was_and_stops_with_the_first_attempt(monkeypatch):
    """`warm_up` moves tuidag into the cgroup it is in, over and over until an attempt takes a cgroup: tuidag stays
    in its own cgroup, and the thread ends then (not at its time limit, here out of the test's reach)."""
    monkeypatch.setattr(cgroup, "WARM_FOR", 600.0)

    def own_cgroup() -> str:
        with open("/proc/self/cgroup") as f:
            return f.read()

    def warming() -> bool:
        return any(t.name == "tuidag-cgroup-warm" for t in threading.enumerate())

    before = own_cgroup()
    cgroup.warm_up()
    assert warming()
    groups = cgroup.RunCgroups.create(f"test-{uuid.uuid4().hex[:12]}")
    assert groups is not None
    try:
        assert groups.acquire() is not None
        wait_until(lambda: not warming())
    finally:
        groups.remove()
    assert own_cgroup() == before


# --- 6: a process that re-launches itself -----------------------------------------------------------------------
HOP = """\
trap '' TERM
echo $$ >> {pids}
sleep 0.3
setsid {env} sh {hop} &
"""


def hoppers(folder: Path) -> list[int]:
    """Live generations, from a quick /proc scan (a generation lives 0.3 s: psutil's slower scan can miss them all)."""
    wanted = f"sh\0{folder / 'hop.sh'}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if f.read() == wanted:
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.parametrize("cgroups", MODES)
@pytest.mark.parametrize("tags", ["tagged", "untagged"])
@pytest.mark.parametrize("ending", ["run-ends", "cancelled"])
def test_a_process_that_relaunches_itself_is_ended(tmp_path, cgroups, tags, ending):
    """Each generation ignores SIGTERM and starts its successor in a new session just before it exits: one snapshot
    of the tree misses the successor; the kill passes repeat until one finds nothing alive."""
    pids = tmp_path / "pids"
    hop = write(
        tmp_path / "hop.sh", HOP.format(pids=pids, hop=tmp_path / "hop.sh", env="env -i" if tags == "untagged" else "")
    )
    command = f"setsid sh {hop} & sleep 1" if ending == "run-ends" else f"setsid sh {hop} & sleep 60"
    dag = make_dag({"t": {"run": command}}, kill_grace=0.2)
    scheduler, _rec, _ = start(dag, tmp_path, cgroups)
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) >= 3, timeout=15)  # it has hopped
        if ending == "cancelled":
            scheduler.cancel("t")
        assert scheduler.wait(patience(30))
    finally:
        scheduler.close()
    assert hoppers(tmp_path) == [], "a generation outlived the run"


def test_kill_passes_repeat_until_one_finds_nothing_new():
    """The race the re-launcher above wins only now and then, made certain: each scan finds the last process, and a
    successor appears right after it, where a single snapshot never looks. Passes go on until one finds nothing."""
    spawned = [subprocess.Popen(["sleep", "60"])]
    procs = [psutil.Process(spawned[0].pid)]  # kept by create time: a pid reused meanwhile is not ours

    def collect() -> dict[int, psutil.Process]:
        if spawned[-1].poll() is not None:
            return {}  # the last one is gone: a scan finds nothing more
        found = {spawned[-1].pid: psutil.Process(spawned[-1].pid)}
        if len(spawned) < 4:
            spawned.append(subprocess.Popen(["sleep", "60"]))  # started after the scan, before the SIGKILL
            procs.append(psutil.Process(spawned[-1].pid))
        return found

    try:
        process.kill_until_empty({}, None, collect)
        assert len(spawned) == 4 and not any(process.is_alive(p) for p in procs)
    finally:
        for p in spawned:
            p.kill()
            p.wait()


# --- 8: orphans are reaped as they die ---------------------------------------------------------------------------
def zombie_orphans() -> list[int]:
    me, session = os.getpid(), os.getsid(0)
    found = []
    for pid in orphans.own_children(main_thread_only=True):
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE and os.getsid(pid) != session and proc.ppid() == me:
                found.append(pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_orphans_are_reaped_while_the_task_runs_and_exit_codes_stay_true(tmp_path):
    """500 short-lived orphans are re-parented to tuidag; they are reaped while the task that makes them still
    runs, and no leader's exit status is taken meanwhile (tasks exiting 0-4 alongside report exactly that)."""
    done = tmp_path / "done"
    # zombies an earlier test in this process left (its executor gone) are not this run's: its reaper leaves them
    earlier = set(zombie_orphans())
    tasks = {"zombies": f"i=0; while [ $i -lt 500 ]; do ( /bin/true & ); i=$((i+1)); done; touch {done}; sleep 60"}
    tasks.update({f"exit{i}": f"sleep 0.0{i % 10}; exit {i % 5}" for i in range(40)})
    scheduler, rec, _ = start(make_dag(tasks, max_parallel=8, kill_grace=0.2), tmp_path, cgroups=False)
    try:
        wait_until(done.exists, timeout=120)
        wait_until(lambda: set(zombie_orphans()) <= earlier, timeout=10)
        assert scheduler.snapshot()["zombies"].state.value == "RUNNING"
        for i in range(40):
            event = rec.wait_state(f"exit{i}", "SUCCEEDED" if i % 5 == 0 else "FAILED", timeout=30)
            assert event.snapshot.exit_code == i % 5
        scheduler.cancel("zombies")
        assert scheduler.wait(patience(20))
    finally:
        scheduler.close()


# --- 9: processes callables start -------------------------------------------------------------------------------
def test_processes_a_callable_starts_end_with_the_run(tmp_path):
    pids = tmp_path / "pids"

    def spawner(ctx):
        child = subprocess.Popen(["sleep", "73"])
        pids.write_text(f"{child.pid}\n")
        return subprocess.run(["sh", "-c", "exit 7"]).returncode  # its own child's status is its own

    dag = make_dag({"py": {"func": spawner}})
    scheduler, rec, _ = start(dag, tmp_path, cgroups=CGROUPS)
    try:
        assert rec.wait_state("py", "SUCCEEDED", timeout=20).snapshot.value == 7
        (ref,) = read_pids(pids)
        assert alive(*ref)  # the task succeeded: what it started may serve later tasks until the run ends
        assert scheduler.wait(patience(20))
    finally:
        scheduler.close()
    assert not alive(*ref)


# --- 15: every BaseException ends the attempt ---------------------------------------------------------------------
@pytest.mark.parametrize("exc", [asyncio.CancelledError, KeyboardInterrupt, GeneratorExit])
def test_any_exception_from_a_callable_fails_its_attempt(tmp_path, exc):
    def raiser():
        raise exc("from the task")

    scheduler, rec, _ = start(
        make_dag({"py": {"func": raiser}, "after": {"run": "true", "depends_on": ["py"]}}), tmp_path, cgroups=False
    )
    try:
        event = rec.wait_state("py", "FAILED", timeout=10)
        assert event.snapshot.reason == f"raised {exc.__name__}: from the task"
        assert scheduler.wait(patience(10))
    finally:
        scheduler.close()
    assert scheduler.snapshot()["after"].state.value == "SKIPPED"
    assert f"{exc.__name__}: from the task" in (tmp_path / "logs" / "py.log").read_text()


# --- 14: out of file descriptors ----------------------------------------------------------------------------------
LOW_LIMIT = """\
import resource, sys, time, uuid
from pathlib import Path
sys.path.insert(0, {tests!r})
from dags import make_dag
from tuidag.engine import LocalExecutor, Scheduler, scheduler as scheduler_module
from slowness import patience

resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
scheduler_module.parallel_limit = lambda: (None, None)  # no cap: starting must fail cleanly instead
go = Path({logs!r}).parent / "go"
gate = f"until [ -e {{go}} ]; do sleep 0.05; done"
dag = make_dag({{f"t{{i}}": {{"run": gate, "timeout": patience(60)}} for i in range(100)}},
               max_parallel=100)
logs = Path({logs!r}); logs.mkdir()
run = Scheduler(dag, LocalExecutor(), f"test-{{uuid.uuid4().hex[:8]}}", logs)
run.start()
while any(s.state.value in ("PENDING", "QUEUED") or (s.state.value == "RUNNING" and s.pid is None)
          for s in run.snapshot().values()):  # every attempt started or failed to: all at once
    time.sleep(0.05)
print("started", flush=True)  # the test creates `go` (this process may have no descriptor left to do it)
finished = run.wait(patience(120))
run.close()
states = [s.state.value for s in run.snapshot().values()]
reasons = {{s.reason for s in run.snapshot().values() if s.state.value == "FAILED"}}
print(finished, states.count("SUCCEEDED"), states.count("FAILED"), len(states), sorted(map(str, reasons))[:3])
"""


def test_out_of_descriptors_fails_attempts_instead_of_hanging(tmp_path):
    """More attempts than descriptors (the cap turned off): each one that cannot start fails with its reason, no pool
    thread dies, and the run ends."""
    script = write(tmp_path / "low.py", LOW_LIMIT.format(tests=str(Path(__file__).parent), logs=str(tmp_path / "logs")))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "started\n"
        (tmp_path / "go").touch()
        stdout, stderr = proc.communicate(timeout=patience(180))
    finally:
        if proc.poll() is None:
            proc.kill()
    out = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finished, succeeded, failed, total, reasons = out.stdout.split(" ", 4)
    assert (finished, total) == ("True", "100"), out.stdout + out.stderr
    assert int(succeeded) + int(failed) == 100
    assert int(failed) > 0 and "Too many open files" in reasons, out.stdout
    assert "Traceback" not in out.stderr, out.stderr


def test_parallelism_is_capped_by_the_descriptor_limit(tmp_path):
    """300 tasks with a timeout at -j 300 under `ulimit -n 256`: all run, 64 at a time, and tuidag says so."""
    tasks = "".join(f"  t{i}:\n    run: sleep 0.05\n    timeout: 30\n" for i in range(300))
    dag = write(tmp_path / "dag.yaml", "tasks:\n" + tasks)
    proc = subprocess.run(
        [
            "sh",
            "-c",
            'ulimit -n 256 && exec "$@"',
            "sh",
            sys.executable,
            "-m",
            "tuidag",
            "run",
            "--no-tui",
            "--quiet",
            "-j",
            "300",
            str(dag),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=patience(240),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "max_parallel 300 capped to 64 by the open-file limit (256" in proc.stderr
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    started = [r for r in read_journal(run.journal) if r.get("event") == "started"]
    assert "capped to 64" in started[0]["detail"]


# --- 7: what a crash or a forced exit leaves ----------------------------------------------------------------------
def _yaml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_headless(dag: Path, mode: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`tuidag run --no-tui DAG` in DAG's folder, with cgroups on or off (`mode`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", str(dag)],
        cwd=dag.parent,
        env={**os.environ, "TUIDAG_CGROUPS": mode},
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
    )


def crash(tmp_path: Path, command: str, mode: str) -> Path:
    """Run `command` as a task in a tuidag, then kill -9 that tuidag once the task recorded its processes."""
    written = [tmp_path / "pids", tmp_path / "leader"]
    dag = write(tmp_path / "dag.yaml", f"kill_grace: 0.3\ntasks:\n  t:\n    run: {_yaml(command)}\n")
    proc = run_headless(dag, mode, stderr=subprocess.DEVNULL)

    def journalled() -> bool:  # the leader's pid is in the journal, as a crash after that leaves it
        runs = RunStore(tmp_path / ".tuidag").runs()
        return bool(runs) and bool(replay(runs[0].journal).tasks.get("t") and replay(runs[0].journal).tasks["t"].pids)

    try:
        wait_until(
            lambda: all(f.exists() and f.read_text().endswith("\n") for f in written) and journalled(), timeout=15
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(patience(10))
    return dag


@pytest.mark.parametrize("mode", CLI_MODES)
def test_reaper_kills_the_leaders_group_after_the_leader_exited(tmp_path, mode):
    """`env -i sleep & sleep 2`, tuidag killed at once: once the leader exits, the untagged sleep is found only as a
    member of the journalled leader's process group (or in the run's cgroup)."""
    pids, leader = tmp_path / "pids", tmp_path / "leader"
    crash(tmp_path, f"env -i sh -c 'echo $$ >> {pids}; exec sleep 62' & echo $$ > {leader}; sleep 2", mode)
    (ref,) = read_pids(pids)
    (leader_ref,) = read_pids(leader)
    wait_until(lambda: not alive(*leader_ref), timeout=10)
    assert alive(*ref)
    listing = tuidag("runs", cwd=tmp_path, env={"TUIDAG_CGROUPS": mode})
    assert "killed 1 leftover process" in listing.stderr, listing.stderr
    assert "t: pid" in listing.stderr
    wait_until(lambda: not alive(*ref), timeout=10)


@pytest.mark.skipif(not CGROUPS, reason=NO_CGROUPS)
def test_reaper_kills_what_only_the_cgroup_still_holds(tmp_path):
    """A daemon that left the group and session and dropped the tags before tuidag crashed: the run's cgroup is the
    one route left, and the next command uses it (and removes the cgroup)."""
    pids, leader = tmp_path / "pids", tmp_path / "leader"
    crash(tmp_path, f"(setsid env -i sh -c 'echo $$ >> {pids}; exec sleep 61' &); echo $$ > {leader}; sleep 30", "on")
    (ref,) = read_pids(pids)
    assert untagged(ref[0])
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    group = cgroup.leftover_run(run.run_id)
    assert group is not None and ref[0] in cgroup.pids_recursive(group)
    listing = tuidag("runs", cwd=tmp_path)
    assert "killed 3 leftover processes" in listing.stderr, listing.stderr  # the daemon, the leader, its sleep
    wait_until(lambda: not alive(*ref), timeout=10)
    assert not os.path.exists(group.path)


@pytest.mark.parametrize("mode", CLI_MODES)
def test_second_sigint_kills_untagged_processes_too(tmp_path, mode):
    """`trap '' TERM; env -i sleep & sleep`: a second Ctrl+C kills the untagged sleep in the leader's group too."""
    pids = tmp_path / "pids"
    command = f"trap '' TERM; env -i sh -c 'echo $$ >> {pids}; exec sleep 51' & echo $$ >> {pids}; sleep 52"
    dag = write(tmp_path / "dag.yaml", f"kill_grace: 60s\ntasks:\n  a:\n    run: {_yaml(command)}\n")
    proc = run_headless(dag, mode)
    try:
        refs = recorded(pids, 2)
        proc.send_signal(signal.SIGINT)
        (run,) = RunStore(tmp_path / ".tuidag").runs()
        wait_until(lambda: any(r.get("to") == "CANCELLING" for r in read_journal(run.journal)))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=patience(20))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert [r for r in refs if alive(*r)] == []
    # no summary (tuidag exited at once): the next command closes the run as the user stopped it, not as a crash
    listing = tuidag("runs", cwd=tmp_path, env={"TUIDAG_CGROUPS": mode})
    assert listing.returncode == 0 and "interrupted" in listing.stdout
    assert json.loads(run.summary.read_text())["interrupted_by"] == "SIGINT"


@pytest.mark.parametrize("mode", CLI_MODES)
def test_untagged_daemon_ends_with_a_headless_run(tmp_path, mode):
    """The whole program, not just the engine: a succeeded task's untagged daemon is gone when tuidag exits."""
    pids = tmp_path / "pids"
    seen = tmp_path / "seen"  # the task ends once the test has recorded its daemon (else tuidag may end it first)
    command = (
        f"(setsid env -i sh -c 'echo $$ >> {pids}; exec sleep 61' &); until [ -s {pids} ]; do sleep 0.01; done; "
        f"until [ -e {seen} ]; do sleep 0.01; done"
    )
    dag = write(tmp_path / "dag.yaml", f"tasks:\n  a:\n    run: {_yaml(command)}\n")
    proc = run_headless(dag, mode)
    try:
        (ref,) = recorded(pids, 1)
        seen.touch()
        _, err = proc.communicate(timeout=patience(30))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert not alive(*ref)


# Documented, not prevented: `os._exit()` in a thread callable ends tuidag itself at once. The next command reaps,
# also what the callable started (it carries the run's tag from tuidag's own environment).
def test_os_exit_in_a_callable_leaves_nothing_after_the_next_command(tmp_path):
    pids = tmp_path / "pids"
    source = write(
        tmp_path / "exits.py",
        textwrap.dedent(f"""\
        import os, subprocess, time
        from pathlib import Path
        from tuidag import Dag

        dag = Dag("exits")
        dag.shell("long", "echo $$ >> {pids}; env -i sleep 63 & echo $! >> {pids}; wait")

        @dag.task()
        def bye(ctx):
            while not Path({str(pids)!r}).exists() or len(Path({str(pids)!r}).read_text().split()) < 2:
                time.sleep(0.02)
            child = subprocess.Popen(["sleep", "64"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open({str(pids)!r}, "a") as f:
                f.write(f"{{child.pid}}\\n")
            os._exit(3)

        if __name__ == "__main__":
            dag.main()
        """),
    )
    proc = subprocess.run(
        [sys.executable, str(source), "--no-tui"], cwd=tmp_path, capture_output=True, text=True, timeout=patience(60)
    )
    assert proc.returncode == 3
    refs = read_pids(pids)
    assert len(refs) == 3 and all(alive(*r) for r in refs)
    listing = tuidag("runs", cwd=tmp_path)
    assert "killed 3 leftover processes" in listing.stderr, listing.stderr
    wait_until(lambda: not any(alive(*r) for r in refs), timeout=10)
