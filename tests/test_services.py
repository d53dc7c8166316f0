"""Service tasks against real processes and real sockets: readiness (http, port, log, command), a service that dies
before it is ready or is never ready, one that crashes later and is restarted, and the ordered stop at the end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dags import alive, finish, make_dag, start_run
from slowness import patience
from tuidag.engine.scheduler import RunSummary
from tuidag.model.service import SERVICE_STOPPED, ReadyCheck, ServiceSpec

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def service(check: ReadyCheck | None = None, **settings) -> ServiceSpec:
    return ServiceSpec(check, **settings)


def seq_of(rec, task: str, state: str) -> int:
    return next(e.seq for e in rec.task_events(task) if e.is_transition and e.new.value == state)


def test_a_client_fetches_from_an_http_service_started_for_it_and_the_service_is_stopped_after(tmp_path):
    port = free_port()
    (tmp_path / "hello.txt").write_text("hello from the service")
    fetch = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/hello.txt').read().decode())"
    dag = make_dag(
        {
            "web": {
                "run": f"exec {PY} -m http.server {port} --bind 127.0.0.1",
                "service": service(ReadyCheck("http", f"http://127.0.0.1:{port}/hello.txt", 200, 0.05)),
            },
            "client": {"run": f'{PY} -c "{fetch}" > fetched', "depends_on": ["web"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    states = finish(scheduler)
    assert states == {"web": "CANCELLED", "client": "SUCCEEDED"}
    assert (tmp_path / "fetched").read_text().strip() == "hello from the service"
    snaps = scheduler.snapshot()
    assert snaps["web"].reason == SERVICE_STOPPED
    assert RunSummary(snaps).ok and RunSummary(snaps).outcome == "succeeded"  # a stopped service is no failure
    assert rec.states("web") == ["QUEUED", "RUNNING", "READY", "CANCELLING", "CANCELLED"]
    assert seq_of(rec, "web", "READY") < seq_of(rec, "client", "QUEUED")
    assert seq_of(rec, "client", "SUCCEEDED") < seq_of(rec, "web", "CANCELLING")
    ready = next(e for e in rec.task_events("web") if e.new.value == "READY")
    assert ready.snapshot.reason.startswith(f"http http://127.0.0.1:{port}/hello.txt, ")
    assert not alive(snaps["web"].pid, snaps["web"].create_time)


def _slow_listener(folder: Path, port: int) -> str:
    """A server that binds its port a while after it starts (a database's start-up), then serves forever."""
    (folder / "listener.py").write_text(
        "import socket, time\n"
        "time.sleep(0.5)\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port}))\n"
        "s.listen()\n"
        "open('bound', 'w').close()\n"
        "while True:\n"
        "    s.accept()[0].close()\n"
    )
    return f"exec {PY} listener.py"


def test_a_port_check_holds_the_dependents_until_the_port_accepts_connections(tmp_path):
    port = free_port()
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5).close()"
    dag = make_dag(
        {
            "db": {"run": _slow_listener(tmp_path, port), "service": service(ReadyCheck("port", str(port)))},
            "migrate": {"run": f'{PY} -c "{connect}"', "depends_on": ["db"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"db": "CANCELLED", "migrate": "SUCCEEDED"}
    assert rec.states("db")[:3] == ["QUEUED", "RUNNING", "READY"]


def test_a_log_check_and_a_command_check_wait_for_what_they_look_for(tmp_path):
    # Each service makes its file a moment after it starts; its dependent fails if started before the file exists.
    starts = "sleep 0.4; touch {f}; echo 'listening on {f}'; exec sleep 60"
    dag = make_dag(
        {
            "logged": {"run": starts.format(f="a"), "service": service(ReadyCheck("log", r"^listening on \w+$"))},
            "commanded": {"run": starts.format(f="b"), "service": service(ReadyCheck("command", "test -f b"))},
            "use_a": {"run": "test -f a", "depends_on": ["logged"]},
            "use_b": {"run": "test -f b", "depends_on": ["commanded"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    states = finish(scheduler)
    assert states == {"logged": "CANCELLED", "commanded": "CANCELLED", "use_a": "SUCCEEDED", "use_b": "SUCCEEDED"}
    assert "READY" in rec.states("logged") and "READY" in rec.states("commanded")


def test_a_service_that_dies_before_it_is_ready_fails_and_its_dependents_are_skipped(tmp_path):
    dag = make_dag(
        {
            "db": {"run": "exit 3", "service": service(ReadyCheck("port", str(free_port())))},
            "app": {"run": "true", "depends_on": ["db"]},
            "other": "true",
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"db": "FAILED", "app": "SKIPPED", "other": "SUCCEEDED"}
    snaps = scheduler.snapshot()
    assert snaps["db"].reason == "service exited with code 3 (exit code 3)" and snaps["db"].exit_code == 3
    assert not RunSummary(snaps).ok
    assert "READY" not in rec.states("db")


def test_a_service_never_ready_within_its_ready_timeout_is_killed_and_fails(tmp_path):
    dag = make_dag(
        {
            "db": {
                "run": "exec sleep 60",
                "service": service(ReadyCheck("command", "false", interval=0.05), ready_timeout=0.5),
            },
            "app": {"run": "true", "depends_on": ["db"]},
        },
        workdir=tmp_path,
    )
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"db": "FAILED", "app": "SKIPPED"}
    snap = scheduler.snapshot()["db"]
    assert snap.reason == "not ready within 0.5s (command false)"
    assert not alive(snap.pid, snap.create_time)


def test_a_service_that_crashes_later_is_restarted_and_its_dependents_go_on(tmp_path):
    # Attempt 1 is ready, then crashes when told; attempt 2 says it started, is ready a moment later and stays up.
    # `long` runs through the crash; `late` also needs `opener`, which ends once attempt 2 has started, so `late`
    # waits through the restart until the service is ready again.
    svc = (
        'if [ "$TUIDAG_ATTEMPT" = 1 ]; then echo up; while [ ! -f crash ]; do sleep 0.02; done; exit 1; fi; '
        "touch restarted; sleep 0.3; echo up; exec sleep 60"
    )
    dag = make_dag(
        {
            "svc": {
                "run": svc,
                "service": service(ReadyCheck("log", "^up"), restart=True, max_restarts=2, restart_delay=0.3),
            },
            "long": {"run": "while [ ! -f finish ]; do sleep 0.02; done", "depends_on": ["svc"]},
            "opener": "while [ ! -f restarted ]; do sleep 0.02; done",
            "late": {"run": "true", "depends_on": ["svc", "opener"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("long", "RUNNING")
    (tmp_path / "crash").touch()
    rec.wait_for(lambda: rec.states("svc").count("READY") == 2)
    assert scheduler.snapshot()["long"].state.value == "RUNNING"  # it kept running through the crash
    (tmp_path / "finish").touch()
    states = finish(scheduler)
    assert states == {"svc": "CANCELLED", "long": "SUCCEEDED", "opener": "SUCCEEDED", "late": "SUCCEEDED"}
    assert rec.states("svc") == [
        "QUEUED",
        "RUNNING",
        "READY",
        "RETRYING",
        "RUNNING",
        "READY",
        "CANCELLING",
        "CANCELLED",
    ]
    retrying = next(e for e in rec.task_events("svc") if e.new.value == "RETRYING")
    assert retrying.snapshot.reason == "service exited with code 1 (exit code 1): restart 1 of 2"
    # `late` waited for the restarted service: the last move of svc before late was queued is READY again
    late_queued = seq_of(rec, "late", "QUEUED")
    before = [e for e in rec.task_events("svc") if e.is_transition and e.seq < late_queued]
    assert before[-1].new.value == "READY" and before[-1].snapshot.attempt == 2
    assert RunSummary(scheduler.snapshot()).ok


def test_services_are_stopped_after_the_services_that_depend_on_them(tmp_path):
    # Each service notes when SIGTERM reached it and exits; db must hear it only after api has ended.
    stop = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    open(sys.argv[1], 'w').write(repr(time.time())); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('up', flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    (tmp_path / "svc.py").write_text(stop)
    check = ReadyCheck("log", "^up$", interval=0.05)
    dag = make_dag(
        {
            "db": {"run": f"exec {PY} svc.py db.stopped", "service": service(check)},
            "api": {"run": f"exec {PY} svc.py api.stopped", "service": service(check), "depends_on": ["db"]},
            "client": {"run": "true", "depends_on": ["api"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"db": "CANCELLED", "api": "CANCELLED", "client": "SUCCEEDED"}
    snaps = scheduler.snapshot()
    api_heard = float((tmp_path / "api.stopped").read_text())
    db_heard = float((tmp_path / "db.stopped").read_text())
    assert api_heard <= snaps["api"].finished_at <= db_heard <= snaps["db"].finished_at
    assert seq_of(rec, "api", "CANCELLED") < seq_of(rec, "db", "CANCELLING")
    assert not any(alive(snaps[s].pid, snaps[s].create_time) for s in ("db", "api"))


def test_the_headless_run_says_when_a_service_is_ready_and_exits_with_the_code_of_its_other_tasks(tmp_path):
    port = free_port()
    (tmp_path / "dag.yaml").write_text(
        "tasks:\n"
        "  db:\n"
        f"    run: {_slow_listener(tmp_path, port)}\n"
        "    service: true\n"
        f"    ready_when: {{port: {port}, interval: 50ms}}\n"
        "    ready_timeout: 30s\n"
        "  check:\n"
        "    run: test -f bound && exit 4\n"
        "    depends_on: [db]\n"
    )
    proc = subprocess.run(
        [PY, "-m", "tuidag", "run", "--no-tui", "dag.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith(f"[db]    --> ready (port {port}, ") for line in lines), proc.stdout
    assert any("--> CANCELLED" in line and SERVICE_STOPPED in line for line in lines if line.startswith("[db]"))
    journal = next((tmp_path / ".tuidag" / "runs").glob("*/journal.jsonl")).read_text()
    assert '"to": "READY"' in journal or '"to":"READY"' in journal


def test_nothing_a_service_started_is_left_running_after_the_run(tmp_path):
    (tmp_path / "tree.sh").write_text("sleep 60 & echo $! > child; echo up; wait\n")
    dag = make_dag(
        {
            "svc": {"run": "sh tree.sh", "service": service(ReadyCheck("log", "^up$"))},
            "user": {"run": "test -s child", "depends_on": ["svc"]},
        },
        workdir=tmp_path,
    )
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"svc": "CANCELLED", "user": "SUCCEEDED"}
    child = int((tmp_path / "child").read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_the_python_api_makes_a_service_and_locates_its_mistakes(tmp_path):
    from tuidag.api import load_python
    from tuidag.model import DagErrors

    path = tmp_path / "services.py"
    path.write_text(
        "from tuidag import Dag\n"
        "\n"
        "dag = Dag('svc')\n"
        "dag.shell('db', 'exec sleep 60', service=True, ready_when={'log': '^up', 'interval': '50ms'},\n"
        "          restart='on-failure', max_restarts=1)\n"
        "dag.shell('web', 'exec sleep 60', service=True, ready_when={'tcp': 80})\n"
        "dag.shell('api', 'exec sleep 60', service=True, ready_when={'port': 0}, outputs=['x'])\n"
        "dag.shell('job', 'true', ready_when={'port': 80})\n"
        "\n"
        "@dag.task(service=True)\n"
        "def server(ctx): ...\n"
    )
    with pytest.raises(DagErrors) as caught:
        load_python(path)
    f = str(path)
    assert [str(err) for err in caught.value.errors] == [
        f"{f}:6:1: task 'web': ready_when: unknown kind 'tcp': it must be one of port, http, log, command",
        f"{f}:7:1: task 'api': ready_when: port must be a port number (1-65535), got 0",
        f"{f}:8:1: task 'job': ready_when is for a service: add service=True",
        f"{f}:10:1: task 'server': a callable can't be a service (it runs on a thread of tuidag's, which can't be "
        "stopped or checked like a server): make it a command with dag.shell(..., service=True)",
    ]
    path.write_text("\n".join(path.read_text().splitlines()[:5]) + "\ndag.shell('use', 'true', depends_on=['db'])\n")
    dag = load_python(path)
    assert dag.tasks["db"].service == ServiceSpec(ReadyCheck("log", "^up", 200, 0.05), 60.0, True, 1, 0.0)
    assert dag.tasks["use"].service is None


def test_a_service_on_the_dask_executor_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "dag.yaml").write_text(
        "executor: dask-local:1\ntasks:\n  db:\n    run: exec sleep 60\n    service: true\n  use:\n    run: 'true'\n"
    )
    proc = subprocess.run(
        [PY, "-m", "tuidag", "run", "--no-tui", "dag.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("dag.yaml:3:3: task 'db': a service can't run on the Dask executor")
    assert not (tmp_path / ".tuidag" / "runs").exists() or not any((tmp_path / ".tuidag" / "runs").iterdir())


def test_a_service_that_crashes_while_the_run_stops_its_services_is_not_restarted(tmp_path):
    # api, told to stop, first makes db crash (db exits 1 once `api-stopping` exists) and waits to see db gone.
    (tmp_path / "api.py").write_text(
        "import os, signal, sys, time\n"
        "def bye(*_):\n"
        "    open('api-stopping', 'w').close()\n"
        "    while not os.path.exists('db-gone'): time.sleep(0.02)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('up', flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    db = "echo up; while [ ! -f api-stopping ]; do sleep 0.02; done; touch db-gone; exit 1"
    check = ReadyCheck("log", "^up$", interval=0.05)
    dag = make_dag(
        {
            "db": {"run": db, "service": service(check, restart=True, max_restarts=3)},
            "api": {"run": f"exec {PY} api.py", "service": service(check), "depends_on": ["db"]},
            "client": {"run": "true", "depends_on": ["api"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"db": "FAILED", "api": "CANCELLED", "client": "SUCCEEDED"}
    assert "RETRYING" not in rec.states("db") and scheduler.snapshot()["db"].attempt == 1


def test_services_do_not_take_the_threads_their_dependents_need(tmp_path):
    # Two services with max_parallel 2: counted against it, they would leave no thread for the task that uses them.
    check = ReadyCheck("log", "^up$", interval=0.05)
    dag = make_dag(
        {
            "a": {"run": "echo up; exec sleep 60", "service": service(check)},
            "b": {"run": "echo up; exec sleep 60", "service": service(check)},
            "use": {"run": "true", "depends_on": ["a", "b"]},
            "then": {"run": "true", "depends_on": ["use"]},
        },
        workdir=tmp_path,
        max_parallel=2,
    )
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "CANCELLED", "b": "CANCELLED", "use": "SUCCEEDED", "then": "SUCCEEDED"}


def test_the_services_demo_runs_its_tests_against_its_services_and_stops_them_in_order(tmp_path):
    proc = subprocess.run(
        [PY, "-m", "tuidag", "run", "--no-tui", "--state-dir", str(tmp_path), str(REPO / "demos" / "services.yaml")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # `[web]   --> ready (http ..., 0.2s)` -> ("web", "ready"), in the order printed
    moves = [
        (line.split("]")[0].lstrip("["), line.split("--> ")[1].split()[0].rstrip(":"))
        for line in proc.stdout.splitlines()
        if "] " in line and "--> " in line
    ]
    for service_task in ("store", "web"):
        assert moves.index((service_task, "ready")) < moves.index(("test-missing", "RUNNING"))
    assert moves.index(("test-fetch", "SUCCEEDED")) < moves.index(("web", "CANCELLING"))
    assert moves.index(("web", "CANCELLED")) < moves.index(("store", "CANCELLING"))


def test_sigterm_to_a_headless_run_leaves_no_service_running(tmp_path):
    (tmp_path / "dag.yaml").write_text(
        "kill_grace: 1s\n"
        "tasks:\n"
        "  svc:\n"
        "    run: echo $$ > svc.pid; sleep 60 & echo $! > child.pid; echo up; wait\n"
        "    service: true\n"
        "    ready_when: {log: '^up$'}\n"
        "  work:\n"
        "    run: exec sleep 60\n"
        "    depends_on: [svc]\n"
    )
    proc = subprocess.Popen(
        [PY, "-m", "tuidag", "run", "--no-tui", "dag.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the headless output, line by line, until the task that uses the service runs
            if line.startswith("[work] --> RUNNING"):
                break
        refs = []
        for name in ("svc.pid", "child.pid"):
            pid = int((tmp_path / name).read_text())
            refs.append((pid, psutil.Process(pid).create_time()))
        proc.terminate()
        proc.communicate(timeout=patience(30))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + 15
    assert [ref for ref in refs if alive(*ref)] == []


def test_a_run_whose_only_target_is_a_service_keeps_it_up_until_it_is_cancelled(tmp_path):
    dag = make_dag(
        {
            "db": {"run": "echo up; exec sleep 60", "service": service(ReadyCheck("log", "^up$", interval=0.05))},
            "app": {"run": "true", "depends_on": ["db"]},
        },
        workdir=tmp_path,
    )
    scheduler, rec = start_run(dag, tmp_path, targets=["db"])
    rec.wait_state("db", "READY")
    assert not scheduler.finished
    scheduler.cancel_all()
    assert finish(scheduler) == {"db": "CANCELLED", "app": "UNTARGETED"}
    assert scheduler.snapshot()["db"].reason == "cancelled by user"
