"""tuidag on a Dask cluster started with the `dask` command line (a scheduler and two workers, each a process group of
its own, one advertising `gpu=2`), its parts killed with real signals: an attempt runs once whatever Dask would do,
nothing an attempt started outlives it on the worker's host when its worker, its client or its scheduler dies, the
scheduler keeps no output, and a wrong address is said clearly and soon."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest

from dags import alive, read_pids, wait_until
from dask_cluster import CliCluster, free_port
from slowness import patience
from test_cli import tuidag, write
from tuidag.engine import process
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore

pytestmark = [
    pytest.mark.cli,
    pytest.mark.xdist_group("dask_cluster"),
]  # one worker: the module-scoped fixtures are made once


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Started once for the module (a few seconds); a test that kills a worker waits for its nanny to restart it."""
    cluster = CliCluster(tmp_path_factory.mktemp("cluster"), [("w1", 2, None), ("w2", 2, "gpu=2")])
    yield cluster
    cluster.stop()


def start(dag, cluster, tmp_path, *options) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuidag",
            "run",
            str(dag),
            "--no-tui",
            "--executor",
            "dask",
            "--dask-address",
            cluster.address,
            *options,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    process.LEADERS.add(proc.pid)  # (see test_dask_cli: an engine test's OrphanReaper must not take its status)
    return proc


def test_a_lost_worker_fails_its_attempt_once_and_its_tree_dies_on_that_host_while_the_retry_runs(cluster, tmp_path):
    """`kill -9` of the worker process only (its nanny lives on and restarts it): Dask would start attempt 1 again
    on the other worker (allowed-failures) and the tree of the lost one would run on, re-parented to init. Attempt 1
    starts once, its processes (leader and child) die while the retry runs (it waits for that, then succeeds), the
    journal says `worker lost`."""
    marks, pids = tmp_path / "marks", tmp_path / "pids"
    dag = write(
        tmp_path / "dag.yaml",
        f"""\
tasks:
  long:
    retries: 1
    run: |
      echo "$TUIDAG_ATTEMPT $PPID" >> {marks}
      if [ "$TUIDAG_ATTEMPT" = 1 ]; then sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; wait; fi
      for i in $(seq {int(300 * patience(1))}); do  # the retry ends once attempt 1's tree is gone (the run ends
        # all trees at its end); a killed process left a zombie until its new parent reaps it (a test process may be
        # that parent, as a child subreaper), so only a process that is not a zombie counts as alive
        ps -o stat= -p "$(paste -sd, {pids})" | grep -qv '^Z' || exit 0
        sleep 0.05
      done
      exit 3
  after: {{run: "echo done", depends_on: long}}
""",
    )
    run = start(dag, cluster, tmp_path)
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, timeout=60)
        tree = read_pids(pids)
        worker_pid = int(marks.read_text().split()[1])
        os.kill(worker_pid, signal.SIGKILL)
        wait_until(lambda: not any(alive(*ref) for ref in tree), timeout=30)
        out, err = run.communicate(timeout=patience(60))
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        process.LEADERS.discard(run.pid)
    assert run.returncode == 0, out + err
    assert [line.split()[0] for line in marks.read_text().splitlines()] == ["1", "2"]  # each attempt started once
    (stored,) = RunStore(tmp_path / ".tuidag").runs()
    ends = [
        r
        for r in read_journal(stored.journal)
        if r.get("type") == "task" and r["task"] == "long" and r["to"] in ("RETRYING", "FAILED", "SUCCEEDED")
    ]
    assert ends[0]["to"] == "RETRYING" and ends[0]["reason"].startswith("worker lost: tcp://127.0.0.1:")
    assert ends[-1]["to"] == "SUCCEEDED"
    # The report says where the run ran and which worker ran each attempt.
    state = str(tmp_path / ".tuidag")
    facts = json.loads(tuidag("report", "--state-dir", state, "--format", "json", "-o", "-", cwd=tmp_path).stdout)
    assert facts["run"]["executor"] == f"dask {cluster.address}"
    (long,) = [task for task in facts["tasks"] if task["name"] == "long"]
    assert set(long["workers"]) == {"1", "2"} and set(long["workers"].values()) <= {"w1", "w2"}
    html = tuidag("report", "--state-dir", state, "-o", "-", cwd=tmp_path).stdout
    assert f"executor dask {cluster.address}" in html and "<th>workers</th>" in html
    runs = tuidag("runs", "--state-dir", state, cwd=tmp_path).stdout.splitlines()
    assert runs[0].split()[-1] == "EXECUTOR" and runs[1].endswith(f"dask {cluster.address}")
    cluster.wait_for_workers(2)


def test_a_worker_retired_in_an_orderly_way_does_not_get_its_attempt_run_again_by_dask(cluster, tmp_path):
    """`retire_workers` removes the worker as expected (no failure counted), so Dask sends its running task to
    another worker at once: that second start is refused there before it runs, and tuidag's retry runs instead."""
    from distributed import Client

    marks = tmp_path / "marks"
    dag = write(
        tmp_path / "dag.yaml",
        f"""\
tasks:
  long:
    retries: 1
    run: |
      echo "$TUIDAG_ATTEMPT $PPID" >> {marks}
      if [ "$TUIDAG_ATTEMPT" = 1 ]; then exec sleep 60; fi
""",
    )
    run = start(dag, cluster, tmp_path)
    try:
        wait_until(lambda: marks.exists() and marks.read_text().strip(), timeout=60)
        with Client(cluster.address, timeout="20s") as client:
            (busy,) = [worker for worker, keys in client.processing().items() if keys]
            name = client.scheduler_info(n_workers=-1)["workers"][busy]["name"]
            client.retire_workers([busy], close_workers=True)
        out, err = run.communicate(timeout=patience(60))
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        process.LEADERS.discard(run.pid)
    assert run.returncode == 0, out + err
    # (Dask's second start of attempt 1 comes at the retirement, before tuidag even hears of it: before attempt 2.)
    assert [line.split()[0] for line in marks.read_text().splitlines()] == ["1", "2"]
    cluster.workers[name].wait(timeout=patience(30))
    cluster.add_worker(name, 2, "gpu=2" if name == "w2" else None)
    cluster.wait_for_workers(2)


def test_a_killed_client_leaves_nothing_running_on_the_workers(cluster, tmp_path):
    """`kill -9` of tuidag mid-run: the scheduler drops its tasks as the client's connection closes, and each worker's
    guard kills their trees (a child that ignores SIGTERM and a grandchild in a session of its own included)."""
    pids = tmp_path / "pids"
    dag = write(
        tmp_path / "dag.yaml",
        f"""\
kill_grace: 200ms
tasks:
  a:
    run: sh -c 'trap "" TERM; echo $$ >> {pids}; sleep 60' & echo $$ >> {pids}; wait
  b:
    run: setsid sleep 60 & echo $! >> {pids}; wait
""",
    )
    run = start(dag, cluster, tmp_path)
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, timeout=60)
        tree = read_pids(pids)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    finally:
        process.LEADERS.discard(run.pid)
    wait_until(lambda: not any(alive(*ref) for ref in tree), timeout=30)


def test_a_silent_client_is_dropped_and_its_trees_killed(tmp_path):
    """A client whose machine vanished keeps its connection open but sends no heartbeat (here: tuidag stopped with
    SIGSTOP): after the stated silence (8 s here, 60 s by default) the scheduler drops it, and the worker kills its
    tasks' trees. A cluster of its own: the silence is the scheduler's setting."""
    small = CliCluster(tmp_path, [("w1", 2, None)], env={"TUIDAG_DASK_CLIENT_SILENCE": "8"})
    pids = tmp_path / "pids"
    dag = write(tmp_path / "dag.yaml", f"tasks:\n  a: {{run: 'sleep 60 & echo $! >> {pids}; wait'}}\n")
    run = start(dag, small, tmp_path)
    try:
        wait_until(lambda: pids.exists() and pids.read_text().strip(), timeout=60)
        tree = read_pids(pids)
        os.kill(run.pid, signal.SIGSTOP)
        wait_until(lambda: not any(alive(*ref) for ref in tree), timeout=40)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        process.LEADERS.discard(run.pid)
        small.stop()


def test_the_scheduler_keeps_no_output_of_a_run(cluster, tmp_path):
    """Output goes from the worker to the client directly: the local log is byte for byte the task's output, and
    the scheduler holds none of it, during the run or after it (no topic of tuidag's is left)."""
    dag = write(
        tmp_path / "dag.yaml",
        """\
tasks:
  big: {run: "python3 -c \\"import sys; sys.stdout.buffer.write(bytes(range(256)) * 20000)\\""}
""",
    )
    proc = tuidag(
        "run", str(dag), "--no-tui", "--quiet", "--executor", "dask", "--dask-address", cluster.address, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (stored,) = RunStore(tmp_path / ".tuidag").runs()
    log = (stored.logs / "big.log").read_bytes()
    assert bytes(range(256)) * 20000 in log
    from distributed import Client

    def topic_sizes(dask_scheduler=None) -> dict[str, int]:  # (nested: pickled by value, run in the scheduler)
        import pickle

        return {name: len(pickle.dumps(list(topic.events))) for name, topic in dask_scheduler._broker._topics.items()}

    with Client(cluster.address, timeout="20s") as client:
        topics = client.run_on_scheduler(topic_sizes)
    assert not [topic for topic in topics if topic.startswith("tuidag-")]
    assert sum(topics.values()) < 200_000, topics  # 5 MB of output went by


class _Talker(threading.Thread):
    """A service that sends first (as SSH does)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            conn.close()


@pytest.mark.parametrize("where", ["dashboard", "talker", "closed"])
def test_a_wrong_address_is_said_clearly_within_the_timeout(cluster, tmp_path, where):
    """The scheduler's dashboard (HTTP: it waits for a request), a service that sends first, a closed port: exit 2
    with a message naming the address and what is there, well within a few seconds, no traceback."""
    talker = None
    if where == "dashboard":
        from distributed import Client

        with Client(cluster.address, timeout="20s") as client:
            port = client.scheduler_info()["services"]["dashboard"]
        expected = "an HTTP server"
    elif where == "talker":
        talker = _Talker()
        talker.start()
        port = talker.port
        expected = "a service that sent 'SSH-2.0-OpenSSH_9.6..'"
    else:
        port = free_port()
        expected = "cannot reach the Dask scheduler"
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a: {run: 'true'}\n")
    began = time.monotonic()
    try:
        proc = tuidag(
            "run",
            str(dag),
            "--no-tui",
            "--executor",
            "dask",
            "--dask-address",
            f"tcp://127.0.0.1:{port}",
            "--dask-timeout",
            "1s",
            cwd=tmp_path,
            timeout=60,
        )
    finally:
        if talker is not None:
            talker.sock.close()
    took = time.monotonic() - began
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"tcp://127.0.0.1:{port}" in proc.stderr and expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < 30, took  # (not a speed figure: the hang it replaces was 607 s)
    assert not (tmp_path / ".tuidag").exists() or not RunStore(tmp_path / ".tuidag").runs()


def test_a_scheduler_that_starts_listening_within_the_timeout_is_found(monkeypatch):
    """`dask scheduler` and `tuidag run` started together (one script): the port refuses until the scheduler
    listens, and tuidag tries again until --dask-timeout instead of giving up at the first refusal."""
    from tuidag.engine.dask import cluster as dask_cluster

    tries = []
    real_connect = socket.create_connection

    def counted(*args, **kwargs):
        tries.append(time.monotonic())
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(dask_cluster.socket, "create_connection", counted)
    port = free_port()
    outcome = []

    def probe():
        try:
            dask_cluster.probe(f"tcp://127.0.0.1:{port}", patience(30))
            outcome.append("found")
        except dask_cluster.DaskUnreachable as exc:
            outcome.append(str(exc))

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    wait_until(lambda: len(tries) >= 2 or bool(outcome))  # refused at least once, and still trying
    assert not outcome, outcome
    with socket.socket() as listener:  # the scheduler comes up: it greets first, as Dask's handshake does
        listener.bind(("127.0.0.1", port))
        listener.listen()
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"\x00\x00handshake pickle-protocol 5")
            prober.join(timeout=patience(30))
    assert outcome == ["found"]


def test_another_tuidag_version_on_the_cluster_is_named_host_by_host():
    """Checked at connect: which host has which version (a task would otherwise fail to deserialise)."""
    from tuidag import __version__
    from tuidag.engine.dask.cluster import DaskUnreachable, check_versions

    class Client:
        class scheduler:
            address = "tcp://10.0.0.1:8786"

        def get_versions(self, packages):
            return {
                "scheduler": {"packages": {"tuidag": __version__}},
                "workers": {
                    "tcp://10.0.0.2:4000": {"packages": {"tuidag": "0.0.9"}},
                    "tcp://10.0.0.3:4000": {"packages": {"tuidag": None}},
                    "tcp://10.0.0.4:4000": {"packages": {"tuidag": __version__}},
                },
            }

    with pytest.raises(DaskUnreachable) as caught:
        check_versions(Client())
    assert str(caught.value) == (
        f"this tuidag is {__version__}, but worker tcp://10.0.0.2:4000 has 0.0.9; "
        f"worker tcp://10.0.0.3:4000 has no tuidag: install tuidag {__version__} there"
    )


def test_killing_an_attempt_leaves_another_attempt_of_the_same_task_running(tmp_path):
    """Two attempts of one task on one host (a retry beside what is left of the attempt before it): each carries the
    same run and task tags, so a kill that picked processes by those alone killed the other attempt too (`long -->
    FAILED: killed by SIGKILL` 1-5 s into the retry). An attempt's tree is its run, task and attempt number."""
    from tuidag.engine.executor import Attempt
    from tuidag.engine.shell_attempt import ShellAttempt
    from tuidag.model.spec import TaskSpec

    pids = tmp_path / "pids"

    def attempt(number: int) -> ShellAttempt:
        env = {**os.environ, "TUIDAG_RUN_ID": "r1", "TUIDAG_TASK": "t", "TUIDAG_ATTEMPT": str(number)}
        spec = Attempt(
            run_id="r1",
            task=TaskSpec("t"),
            number=number,
            env=env,
            workdir=tmp_path,
            log_path=str(tmp_path / f"t.{number}.log"),
            timeout=None,
            kill_grace=0.2,
        )
        # A child in a session of its own: found only by its tags.
        return ShellAttempt(spec, [("run", f"setsid sleep 60 & echo $! >> {pids}; wait")])

    first, second = attempt(1), attempt(2)
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    refs = read_pids(pids)
    first.kill()
    assert first.wait().cancelled
    survivors = [ref for ref in refs if alive(*ref)]
    assert len(survivors) == 1, "the kill of attempt 1 took attempt 2's process too (or left its own)"
    assert second.usage() is not None  # attempt 2 still runs
    second.kill()
    second.wait()
    assert not any(alive(*ref) for ref in refs)


def test_a_task_is_queued_until_its_process_starts_on_a_worker_and_shows_what_it_got(cluster, tmp_path):
    """-j 6 on 4 worker threads: the tasks Dask holds back are QUEUED, saying why, and RUNNING only from their start,
    so each `sleep 1` runs about 1 s, not its wait too. Two `gpu: 2` tasks (tuidag's cluster-wide slots 0,1 and 2,3)
    run one after the other on the worker with gpu=2: the RUNNING line, the journal and the task all say 0,1, and
    the worker is named by its --name."""
    dag = write(
        tmp_path / "dag.yaml",
        """\
resources: {gpu: 4}
tasks:
  g1: {run: "echo $CUDA_VISIBLE_DEVICES; sleep 1", resources: {gpu: 2}}
  g2: {run: "echo $CUDA_VISIBLE_DEVICES; sleep 1", resources: {gpu: 2}}
  c1: {run: "sleep 1"}
  c2: {run: "sleep 1"}
  c3: {run: "sleep 1"}
  c4: {run: "sleep 1"}
""",
    )
    proc = tuidag(
        "run", str(dag), "--no-tui", "-j", "6", "--executor", "dask", "--dask-address", cluster.address, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (stored,) = RunStore(tmp_path / ".tuidag").runs()
    records = [r for r in read_journal(stored.journal) if r.get("type") == "task"]
    waited = {r["task"] for r in records if r["to"] == "QUEUED" and r.get("reason") == "waiting for a Dask worker"}
    assert len(waited) >= 2  # 6 launched at once, 4 threads (and one gpu=2 worker for g1 and g2)
    tasks = replay(stored.journal).tasks
    for name, task in tasks.items():
        assert task.finished_at - task.started_at < 1.8, (name, task.finished_at - task.started_at)
    assert {tasks["g1"].worker, tasks["g2"].worker} == {"w2"}
    assert {tasks["g1"].slots, tasks["g2"].slots} == {"gpu:0,1"}
    running = [line for line in proc.stdout.splitlines() if line.startswith(("[g1]", "[g2]")) and "RUNNING" in line]
    assert len(running) == 2 and all("[slots gpu:0,1]" in line for line in running), running
    assert "[g1] 0,1" in proc.stdout and "[g2] 0,1" in proc.stdout
    assert f"(6 tasks on dask {cluster.address})" in proc.stdout.splitlines()[0]  # and in the run record:
    assert next(read_journal(stored.journal))["executor"] == f"dask {cluster.address}"


LOGGING_DAG = """
import logging
from tuidag import Dag

dag = Dag("etl")
log = logging.getLogger("etl")

@dag.task(isolate=True)
def extract():
    log.info("info line")
    log.warning("careful: %s", "formatted")
    raise ValueError("bad row")
"""


def test_a_callable_on_a_worker_logs_as_an_isolated_one_does_locally(cluster, tmp_path):
    """Its INFO lines and formatted WARNINGs, and a traceback naming the DAG's file with its source lines (the code
    travels pickled by value, which names its file `<dynamic-code>`)."""
    dag = write(tmp_path / "etl.py", LOGGING_DAG)
    logs = {}
    for options in ([], ["--executor", "dask", "--dask-address", cluster.address]):
        proc = tuidag("run", str(dag), "--no-tui", "--quiet", *options, cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        stored = RunStore(tmp_path / ".tuidag").runs()[-1]
        text = (stored.logs / "extract.log").read_text()
        logs[bool(options)] = _without_tuidag_frames(
            [line.split(" ", 2)[-1] if line[:2].isdigit() else line for line in text.splitlines()[1:]]
        )  # (times differ)
    assert logs[True] == logs[False]
    assert "INFO etl: info line" in logs[True] and "WARNING etl: careful: formatted" in logs[True]
    assert f'  File "{dag}", line 12, in extract' in logs[True]
    assert '    raise ValueError("bad row")' in logs[True]


def _without_tuidag_frames(lines: list[str]) -> list[str]:
    """The lines without the traceback frames of tuidag's own code (the function that calls the task differs)."""
    kept, skipping = [], False
    for line in lines:
        if line.startswith("  File "):
            skipping = "/tuidag/engine/" in line
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return kept


def test_a_starting_worker_kills_what_dead_workers_of_its_host_left_and_old_log_copies(tmp_path):
    """A process tagged by a worker process that no longer exists (a worker killed with its watchdog) is killed by
    the next guard that starts on the host; one whose worker lives is left alone. Log copies of runs not written to
    for the retention time are removed, recent ones kept."""
    from tuidag.engine.dask import output, watchdog

    def tagged_sleep(token: str) -> subprocess.Popen:
        return subprocess.Popen(["sleep", "60"], env={**os.environ, watchdog.GUARD_TAG: token}, start_new_session=True)

    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = tagged_sleep(f"{dead.pid}-12345.0")  # (no process has that pid and start time)
    kept = tagged_sleep(watchdog.token())
    try:
        watchdog.kill_tagged(None)  # (a worker starting meanwhile, another test's, may have killed it first)
        orphan.wait(timeout=patience(5))
        assert kept.poll() is None
    finally:
        for proc in (orphan, kept):
            proc.kill()
            proc.wait()
    old, recent = tmp_path / "run-old", tmp_path / "run-recent"
    for run in (old, recent):
        run.mkdir()
        (run / "a.log").write_text("x")
    for path in (old, old / "a.log"):
        os.utime(path, (time.time() - 3 * 86400,) * 2)
    output.prune_logs(tmp_path, output.LOG_RETENTION)
    assert not old.exists() and recent.exists()


def test_a_remote_task_has_its_cpu_and_memory_sampled_on_its_worker(cluster, tmp_path, monkeypatch):
    """As locally (`Scheduler.usage`, which the views show): the worker samples the task's tree and says so with the
    output it sends; nothing once the task has ended."""
    import dags
    from dags import finish, make_dag, start_run
    from tuidag.engine.dask.executor import DaskExecutor

    go = tmp_path / "go"
    spin = f"import os; x = bytearray(80 << 20)\nwhile not os.path.exists('{go}'): pass"
    dag = make_dag({"busy": f'python3 -c "{spin}"'})
    monkeypatch.setattr(dags, "new_executor", lambda dag: DaskExecutor(cluster.address, dag_env=dag.env))
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("busy", "RUNNING", timeout=30)
    samples = []
    wait_until(
        lambda: (
            samples.append(scheduler.usage("busy"))
            or (samples[-1] is not None and samples[-1][0] > 20 and samples[-1][1] > 80 << 20)
        ),
        timeout=15,
    )
    go.touch()
    assert finish(scheduler) == {"busy": "SUCCEEDED"}
    assert scheduler.usage("busy") is None


def test_without_max_parallel_a_run_follows_the_cluster_s_worker_threads(cluster, tmp_path):
    """No -j and no max_parallel in the file: the default is the cluster's worker threads (4, not this machine's
    CPU count), said at the start and in the run record, and followed as a worker joins (a run event and the
    headless output say so, and that many tasks run at once)."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    tasks = "".join(
        f"  t{i}: {{run: 'echo {i} >> {started}; while [ ! -e {gate} ]; do sleep 0.05; done'}}\n" for i in range(8)
    )
    dag = write(tmp_path / "dag.yaml", "tasks:\n" + tasks)
    run = start(dag, cluster, tmp_path)
    try:
        wait_until(lambda: started.exists() and len(started.read_text().split()) == 4, timeout=60)
        cluster.add_worker("w3", 2)
        wait_until(lambda: len(started.read_text().split()) == 6, timeout=60)
        gate.touch()
        out, err = run.communicate(timeout=patience(60))
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        process.LEADERS.discard(run.pid)
        gate.touch()
        proc = cluster.workers.pop("w3", None)
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert run.returncode == 0, out + err
    assert "max_parallel 4: the Dask cluster's worker threads" in out.splitlines()[0]
    assert "tuidag: max_parallel 6 (the Dask cluster's worker threads)" in out
    (stored,) = RunStore(tmp_path / ".tuidag").runs()
    records = list(read_journal(stored.journal))
    assert records[0]["max_parallel"] == 4
    assert [r["detail"] for r in records if r.get("event") == "parallel"] == [
        "max_parallel 6 (the Dask cluster's worker threads)"
    ]


def test_ctrl_c_while_connecting_says_so_without_a_traceback(cluster, tmp_path):
    """Waiting on the dashboard's port (with a long --dask-timeout), the user presses Ctrl+C: exit 130, a line
    saying what was interrupted, no KeyboardInterrupt traceback, no run."""
    from distributed import Client

    with Client(cluster.address, timeout="20s") as client:
        port = client.scheduler_info()["services"]["dashboard"]
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a: {run: 'true'}\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuidag",
            "run",
            str(dag),
            "--no-tui",
            "--executor",
            "dask",
            "--dask-address",
            f"tcp://127.0.0.1:{port}",
            "--dask-timeout",
            "60s",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(
        lambda: any(conn.raddr and conn.raddr.port == port for conn in psutil.Process(proc.pid).net_connections()),
        timeout=30,
    )
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=patience(30))
    assert proc.returncode == 130, out + err
    assert f"tuidag: interrupted while connecting to the Dask scheduler at tcp://127.0.0.1:{port}" in err
    assert "Traceback" not in err


def test_the_task_thread_pool_grows_at_once_and_shrinks_as_threads_finish():
    """What following the cluster's worker threads rests on: a larger pool starts threads for waiting items at once;
    a smaller one lets running items finish and then runs no more at once than its new size."""
    from tuidag.engine.workers import WorkerPool

    pool = WorkerPool(1, "test")
    lock, running, peak, release = threading.Lock(), [0], [0], threading.Event()

    def item() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1

    try:
        for _ in range(3):
            pool.submit(item)
        wait_until(lambda: running[0] == 1)
        pool.resize(3)
        wait_until(lambda: running[0] == 3)
        pool.resize(1)
        release.set()
        wait_until(lambda: running[0] == 0 and pool.idle())
        release.clear()
        peak[0] = 0
        for _ in range(3):
            pool.submit(item)
        wait_until(lambda: running[0] == 1)
        assert peak[0] == 1
        release.set()
        wait_until(lambda: running[0] == 0 and pool.idle())
        assert peak[0] == 1
    finally:
        release.set()
        pool.shutdown()
