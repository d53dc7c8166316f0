"""The Python front end: `Dag`, `load_python`, callables on pool threads and in child processes, per-task output.

Runs go through the real scheduler and executor. Waits poll against deadlines; a threading.Barrier makes the tasks
of the routing test really overlap instead of hoping they do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dags import alive, finish, read_pids, start_run, wait_until
from slowness import patience
from tuidag import Dag
from tuidag.api import load_python
from tuidag.engine import output_routing
from tuidag.launch import RunSession
from tuidag.model import DagErrors, Location
from tuidag.store.journal import read_journal
from tuidag.store.runs import RunStore

REPO = Path(__file__).resolve().parent.parent


def write(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def line_of(path: Path, text: str, occurrence: int = 1) -> int:
    """1-based number of the line holding `text` (its n-th occurrence)."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return hits[occurrence - 1]


def errors_of(path: Path) -> list[str]:
    with pytest.raises(DagErrors) as caught:
        load_python(path)
    return [str(err) for err in caught.value.errors]


def log_lines(tmp_path: Path, task: str) -> list[str]:
    """A task's log without its attempt header lines."""
    text = (tmp_path / "logs" / f"{task}.log").read_text()
    return [line for line in text.splitlines() if not line.startswith("=== tuidag: ")]


def tuidag(*args: str, cwd: Path, python: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
    command = [sys.executable, *args] if python else [sys.executable, "-m", "tuidag", *args]
    return subprocess.run(
        command, cwd=cwd, env={**env, "NO_COLOR": "1"}, capture_output=True, text=True, timeout=patience(60)
    )


# --- building and loading ---------------------------------------------------------------------------------------
ETL = """
from pathlib import Path
from tuidag import Dag

dag = Dag("etl", max_parallel=3, env={"STAGE": "test", "N": 2}, kill_grace="2s")

@dag.task()
def extract(ctx):
    return 42

@dag.task(name="clean", depends_on=[extract], retries=2, retry_delay="500ms", timeout=5, env={"X": True})
def transform(ctx):
    return ctx.results["extract"] + 1

load = dag.shell("load", "echo load", depends_on=[transform, "extract"], setup="echo setup", workdir="out")

if __name__ == "__main__":
    Path("main-ran").touch()
"""


def test_load_python_builds_the_spec_without_running_main(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "etl_build.py", ETL)
    spec = load_python(path)
    assert (spec.name, list(spec.tasks), spec.max_parallel, spec.kill_grace) == (
        "etl",
        ["extract", "clean", "load"],
        3,
        2.0,
    )
    assert spec.env == {"STAGE": "test", "N": "2"}
    assert (spec.source, spec.workdir) == (path.resolve(), tmp_path.resolve())
    extract, clean, load = spec.tasks.values()
    assert extract.func.__name__ == "extract" and extract.run is None and not extract.isolate
    assert clean.func.__name__ == "transform" and clean.depends_on == ("extract",)
    assert (clean.retries, clean.retry_delay, clean.timeout, clean.env) == (2, 0.5, 5.0, {"X": "true"})
    assert (load.run, load.setup, load.depends_on) == ("echo load", "echo setup", ("clean", "extract"))
    assert load.workdir == (tmp_path / "out").resolve()
    assert extract.location == Location(str(path), line_of(path, "@dag.task()"), 1)
    assert clean.location == Location(str(path), line_of(path, '@dag.task(name="clean"'), 1)
    assert load.location == Location(str(path), line_of(path, "dag.shell("), 1)
    assert extract.func.__module__ == "etl_build" and sys.modules["etl_build"].load == "load"
    assert not (tmp_path / "main-ran").exists()


def test_a_dag_without_a_file_and_bare_decorators(tmp_path):
    dag = Dag()

    @dag.task
    def first():  # no ctx parameter: called without arguments
        return 1

    assert first() == 1  # the decorator returns the function itself
    spec = dag.spec(source=tmp_path / "made_up.py")
    assert (spec.name, list(spec.tasks), spec.workdir) == ("made_up", ["first"], tmp_path.resolve())


def test_building_mistakes_are_collected_and_located(tmp_path):
    path = write(
        tmp_path / "bad_build.py",
        """
        from tuidag import Dag

        dag = Dag("bad", on_failure="explode")

        @dag.task(depends_on=["extrac"])
        def transform(ctx): ...

        @dag.task()
        def extract(ctx): ...

        @dag.task(name="extract")
        def extract_again(ctx): ...

        def helper(ctx): ...

        @dag.task(depends_on=[helper], retries=-1, timeout="soon")
        def load(ctx): ...

        def factory():
            @dag.task(isolate=True)
            def inner(ctx): ...

        factory()
        dag.shell("bad name", "echo hi", env={"A": [1]})
    """,
    )
    f = str(path)
    assert errors_of(path) == [
        f"{f}:3:1: on_failure must be one of skip-downstream, finish-running, cancel-all, got 'explode'",
        f"{f}:5:1: task 'transform' depends on unknown task 'extrac' (did you mean 'extract'?)",
        f"{f}:11:1: duplicate task 'extract' (first defined on line 8)",
        f"{f}:16:1: task 'load': retries must be an integer from 0 to 1,000,000, got -1",
        f"{f}:16:1: task 'load': timeout must be a duration like 500ms, 5s, 2m or 1h, got 'soon'",
        f"{f}:16:1: task 'load' depends on helper(), which is not a task of this DAG (register it with @dag.task())",
        f"{f}:20:1: task 'inner': isolate=True needs a function defined at module level "
        f"(the child process imports it by name)",
        f"{f}:24:1: task 'bad name': env value for 'A' must be a string, number or boolean, got [1]",
        f"{f}:24:1: task name 'bad name' may only contain letters, digits, '_', '.' and '-'",
    ]


def test_a_cycle_is_located_at_the_call_that_closes_it(tmp_path):
    path = write(
        tmp_path / "cycle_build.py",
        """
        from tuidag import Dag
        dag = Dag()
        dag.shell("a", "true", depends_on=["c"])
        dag.shell("b", "true", depends_on=["a"])
        dag.shell("c", "true", depends_on=["b"])
    """,
    )
    assert errors_of(path) == [f"{path}:4:1: dependency cycle: a -> b -> c -> a"]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("x = 1\n", '{f}:1:1: no tuidag.Dag found at module level: define one, e.g. dag = Dag("etl")'),
        (
            "from tuidag import Dag\nfirst = Dag('a')\nalias = first\n\nsecond = Dag('b')\n",
            "{f}:5:1: found 2 Dag objects: first = alias (line 2), second (line 5); a file may define only one",
        ),
        ("from tuidag import Dag\ndag = Dag(\n", "{f}:2:10: invalid Python: '(' was never closed"),
        (
            "from tuidag import Dag\n\ndef f():\n    raise ValueError('no config')\n\nf()\n",
            "{f}:4:1: error while importing the file: raised ValueError: no config",
        ),
        (
            "from tuidag import Dag\ndag = Dag()\n",
            "{f}:2:1: the DAG has no tasks: add some with @dag.task() or dag.shell()",
        ),
    ],
)
def test_file_level_errors(tmp_path, source, expected):
    path = tmp_path / "file_level.py"
    path.write_text(source)
    assert errors_of(path) == [expected.format(f=path)]


def test_missing_file_is_a_located_error(tmp_path):
    path = tmp_path / "nope.py"
    assert errors_of(path) == [f"{path}:1:1: cannot read file: No such file or directory"]


# --- running callables in threads -------------------------------------------------------------------------------
def test_results_flow_to_dependents_and_values_are_journalled(tmp_path):
    dag = Dag("flow")
    seen = {}

    @dag.task()
    def extract(ctx):
        seen["thread"] = threading.current_thread().name
        seen["pid"] = os.getpid()
        return 42

    @dag.task(depends_on=[extract])
    def transform(ctx):
        seen["results"] = dict(ctx.results)
        seen["ctx"] = (ctx.name, ctx.attempt, ctx.env["TUIDAG_TASK"], ctx.workdir, ctx.log_path.name)
        return {"rows": ctx.results["extract"] * 2}

    dag.shell("load", "echo loaded", depends_on=[transform])

    @dag.task(depends_on=["load"])
    def opaque(ctx):
        seen["load"] = dict(ctx.results)
        return object()  # not JSON: the journal keeps its repr

    session = RunSession.create(dag.spec(source=tmp_path / "flow.py"), tmp_path / "state")
    session.scheduler.start()
    assert session.scheduler.wait(patience(20))
    summary = session.finish()
    assert summary.ok
    assert seen["thread"].startswith("tuidag-task") and seen["pid"] == os.getpid()
    assert seen["results"] == {"extract": 42} and seen["load"] == {"load": None}
    assert seen["ctx"] == ("transform", 1, "transform", tmp_path.resolve(), "transform.log")
    records = {
        r["task"]: r
        for r in read_journal(session.run.journal)
        if r.get("type") == "task" and r.get("to") == "SUCCEEDED"
    }
    assert records["extract"]["value"] == 42 and records["transform"]["value"] == {"rows": 84}
    assert "value" not in records["load"] and records["opaque"]["value_repr"].startswith("<object object at")
    assert summary.snapshots["transform"].value == {"rows": 84}


def test_an_exception_fails_the_task_with_its_traceback_in_the_log(tmp_path):
    dag = Dag("fails")

    @dag.task(retries=1)
    def parse(ctx):
        print(f"attempt {ctx.attempt}")
        raise ValueError("bad row 7\nsecond line")

    dag.shell("after", "true", depends_on=[parse])
    scheduler, rec = start_run(dag.spec(source=tmp_path / "fails.py"), tmp_path)
    assert finish(scheduler) == {"parse": "FAILED", "after": "SKIPPED"}
    assert rec.states("parse") == ["QUEUED", "RUNNING", "RETRYING", "RUNNING", "FAILED"]
    assert scheduler.snapshot()["parse"].reason == "raised ValueError: bad row 7"
    text = (tmp_path / "logs" / "parse.log").read_text()
    assert text.count("Traceback (most recent call last):") == 2
    assert "attempt 1\n" in text and "attempt 2\n" in text and text.count("ValueError: bad row 7\nsecond line") == 2
    assert 'raise ValueError("bad row 7\\nsecond line")' in text


@pytest.mark.parametrize("how", ["thread", "isolate", "dask"])
def test_a_task_traceback_starts_at_the_task_s_own_code(tmp_path, how):
    """tuidag's own frames (the attempt, `call_task`) came first in every traceback and said nothing of the task."""
    path = write(
        tmp_path / "tb_dag.py",
        f"""
        from tuidag import Dag

        dag = Dag("tb")

        def helper():
            raise ValueError("bad row")

        @dag.task({"isolate=True" if how == "isolate" else ""})
        def boom(ctx):
            helper()
        """,
    )
    extra = ["--executor", "dask-local:1"] if how == "dask" else []
    proc = tuidag("run", str(path), "--no-tui", *extra, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = (RunStore(tmp_path / ".tuidag").runs()[-1].logs / "boom.log").read_text().splitlines()
    start = log.index("Traceback (most recent call last):")
    frames = [line for line in log[start:] if line.startswith("  File ")]
    file = path.resolve()  # on Dask too: the function travels by value, its source file named again on the worker
    assert frames == [
        f'  File "{file}", line {line_of(path, "helper()", 2)}, in boom',
        f'  File "{file}", line {line_of(path, "raise ValueError")}, in helper',
    ], log
    assert log[-1] == "ValueError: bad row"


def test_sys_exit_in_a_task(tmp_path):
    dag = Dag("exits")
    dag.task(name="zero")(lambda ctx: sys.exit(0))
    dag.task(name="three")(lambda ctx: sys.exit(3))
    scheduler, _ = start_run(dag.spec(source=tmp_path / "exits.py"), tmp_path)
    assert finish(scheduler) == {"zero": "SUCCEEDED", "three": "FAILED"}
    assert scheduler.snapshot()["three"].reason == "exit code 3"


def test_concurrent_output_of_many_tasks_lands_in_the_right_files(tmp_path, capsys):
    """24 tasks, 12 at a time (a barrier makes them overlap), each writing through print, sys.stdout, sys.stderr,
    sys.stdout.buffer, a logging handler made before the run, a thread it starts and a pool shared by all tasks;
    meanwhile the test's own threads print. Every line must be in exactly the right place, whole."""
    tasks, lines, parallel = 24, 150, 12
    barrier = threading.Barrier(parallel, timeout=patience(20))
    shared_pool = ThreadPoolExecutor(4, thread_name_prefix="shared")
    logger = logging.getLogger("tuidag.test.noisy")
    handler = logging.StreamHandler()  # holds the current sys.stderr, like handlers configured at startup
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    dag = Dag("noisy", max_parallel=parallel)

    def body(ctx):
        barrier.wait()
        name = ctx.name
        for n in range(lines):
            print(f"{name} print {n}")
            if n % 10 == 0:
                sys.stderr.write(f"{name} stderr {n}\n")
                sys.stdout.buffer.write(f"{name} bytes {n}\n".encode())
            if n % 25 == 0:
                logger.info("%s logging %d", name, n)
        child = threading.Thread(target=lambda: [print(f"{name} thread {k}") for k in range(20)])
        child.start()
        child.join()
        list(shared_pool.map(lambda k: print(f"{name} pool {k}"), range(20)))
        print(f"{name} partial", end="")
        sys.stdout.flush()
        print(" line end")
        return name

    for i in range(tasks):
        dag.task(name=f"t{i:02d}")(body)

    def expected(name: str) -> list[str]:
        out = [f"{name} print {n}" for n in range(lines)]
        out += [f"{name} {kind} {n}" for n in range(0, lines, 10) for kind in ("stderr", "bytes")]
        out += [f"{name} logging {n}" for n in range(0, lines, 25)]
        out += [f"{name} thread {k}" for k in range(20)] + [f"{name} pool {k}" for k in range(20)]
        return [*out, f"{name} partial line end"]  # flushed halfway, still one line

    outside = threading.Event()

    def chatter() -> None:
        k = 0
        while not outside.is_set():
            print(f"outside thread {k}")
            k += 1
            outside.wait(0.001)

    noise = threading.Thread(target=chatter)
    noise.start()
    try:
        scheduler, _ = start_run(dag.spec(source=tmp_path / "noisy.py"), tmp_path)
        k = 0
        while not scheduler.wait(0.002):
            print(f"outside main {k}")
            k += 1
        assert set(finish(scheduler).values()) == {"SUCCEEDED"}
        shared_pool.submit(print, "outside pool").result()  # pool workers a task created carry no task
        logger.info("outside logging")
    finally:
        outside.set()
        noise.join()
        shared_pool.shutdown()
        logger.removeHandler(handler)

    for i in range(tasks):
        name = f"t{i:02d}"
        got = log_lines(tmp_path, name)
        assert Counter(got) == Counter(expected(name)), name
        assert [line for line in got if " print " in line] == [f"{name} print {n}" for n in range(lines)]
    out, err = capsys.readouterr()
    assert "outside main 0\n" in out and "outside thread 0\n" in out and "outside pool\n" in out
    assert "outside logging\n" in err
    assert not [line for line in (out + err).splitlines() if line.startswith("t") and line[1:3].isdigit()]


# --- cancellation and timeouts ----------------------------------------------------------------------------------
def test_cancelling_a_running_callable_is_cooperative(tmp_path):
    dag = Dag("cancel")
    started = threading.Event()

    @dag.task()
    def waits(ctx):
        started.set()
        while not ctx.cancelled.wait(0.01):
            pass
        print("saw the cancel, stopping")
        return "partial"

    dag.shell("after", "true", depends_on=[waits])
    scheduler, rec = start_run(dag.spec(source=tmp_path / "cancel.py"), tmp_path)
    assert started.wait(patience(10))
    scheduler.cancel("waits")
    assert finish(scheduler) == {"waits": "CANCELLED", "after": "CANCELLED"}
    assert rec.states("waits") == ["QUEUED", "RUNNING", "CANCELLING", "CANCELLED"]
    snap = scheduler.snapshot()["waits"]
    assert snap.reason == "cancelled by user" and snap.value is None
    assert log_lines(tmp_path, "waits") == [
        "--- tuidag: cancel requested: ctx.cancelled is set, waiting for the callable to return ---",
        "saw the cancel, stopping",
    ]


def test_a_callable_that_ignores_cancellation_stays_cancelling_until_it_returns(tmp_path):
    dag = Dag("stubborn")
    started, release = threading.Event(), threading.Event()

    @dag.task()
    def stubborn(ctx):
        started.set()
        release.wait(patience(20))  # never looks at ctx.cancelled: the documented limit of in-thread tasks

    scheduler, rec = start_run(dag.spec(source=tmp_path / "stubborn.py"), tmp_path)
    assert started.wait(patience(10))
    scheduler.cancel("stubborn")
    rec.wait_state("stubborn", "CANCELLING")
    assert not scheduler.wait(0.2) and scheduler.snapshot()["stubborn"].state.value == "CANCELLING"
    release.set()
    assert finish(scheduler) == {"stubborn": "CANCELLED"}


def test_a_timeout_sets_cancelled_and_fails_the_task(tmp_path):
    dag = Dag("timeouts")

    @dag.task(timeout="200ms")
    def slow(ctx):
        ctx.cancelled.wait(patience(20))
        return "too late"

    scheduler, _ = start_run(dag.spec(source=tmp_path / "timeouts.py"), tmp_path)
    assert finish(scheduler) == {"slow": "FAILED"}
    assert scheduler.snapshot()["slow"].reason == "timeout"


def test_cancel_before_the_callable_starts_never_calls_it(tmp_path):
    from tuidag.engine.executor import Attempt
    from tuidag.engine.inprocess import ThreadAttempt
    from tuidag.model.spec import TaskSpec

    called = []
    task = TaskSpec(name="never", func=lambda ctx: called.append(1))
    attempt = ThreadAttempt(Attempt("r", task, 1, {}, tmp_path, tmp_path / "never.log", None, 1.0))
    attempt.kill()
    result = attempt.wait()
    assert (result.ok, result.cancelled, called) == (False, True, [])
    assert "cancelled before the callable started" in (tmp_path / "never.log").read_text()


# --- isolate=True: a child process ------------------------------------------------------------------------------
ISOLATED = """
import logging
import os
import signal
import subprocess
import time
from tuidag import Dag

dag = Dag("iso", kill_grace="1s")

@dag.task(isolate=True)
def child(ctx):
    print("hello from the child", flush=True)
    subprocess.run(["sh", "-c", "echo from a grandchild; echo grandchild err >&2"])
    os.write(1, b"straight to fd 1\\n")
    logging.getLogger("iso").info("child logging")
    return {"pid": os.getpid(), "sid": os.getsid(0), "cwd": os.getcwd(), "task": os.environ["TUIDAG_TASK"],
            "results": dict(ctx.results), "isolated": ctx.isolated}

@dag.task(isolate=True, depends_on=[child])
def sleeper(ctx):
    sleep = subprocess.Popen(["sleep", "60"])
    with open("sleeper.pids", "w") as f:
        f.write(f"{os.getpid()}\\n{sleep.pid}\\n")
    time.sleep(60)

@dag.task(isolate=True)
def boom(ctx):
    raise RuntimeError("exploded in the child")
"""


def test_isolated_callables_run_in_a_child_that_can_be_killed(tmp_path):
    path = write(tmp_path / "iso_tasks.py", ISOLATED)
    spec = load_python(path)
    scheduler, rec = start_run(spec, tmp_path)
    pids = tmp_path / "sleeper.pids"
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, timeout=30)
    procs = read_pids(pids)
    assert len(procs) == 2 and all(alive(pid, ct) for pid, ct in procs)
    assert rec.wait_state("sleeper", "RUNNING").snapshot.pid == procs[0][0]
    scheduler.cancel("sleeper")
    rec.wait_state("sleeper", "CANCELLED", timeout=15)
    assert not any(alive(pid, ct) for pid, ct in procs)
    assert finish(scheduler) == {"child": "SUCCEEDED", "boom": "FAILED", "sleeper": "CANCELLED"}

    value = scheduler.snapshot()["child"].value
    assert value["pid"] != os.getpid() and value["sid"] == value["pid"]
    assert (value["cwd"], value["task"], value["results"], value["isolated"]) == (
        str(tmp_path.resolve()),
        "child",
        {},
        True,
    )
    log = log_lines(tmp_path, "child")
    assert log[:4] == ["hello from the child", "from a grandchild", "grandchild err", "straight to fd 1"]
    assert log[4].endswith(" INFO iso: child logging") and len(log) == 5

    assert scheduler.snapshot()["boom"].reason == "raised RuntimeError: exploded in the child"
    boom = (tmp_path / "logs" / "boom.log").read_text()
    assert "Traceback (most recent call last):" in boom and "RuntimeError: exploded in the child" in boom


# --- the command line -------------------------------------------------------------------------------------------
CLI_ETL = """
import logging
from tuidag import Dag

log = logging.getLogger(__name__)
dag = Dag("cli-etl")

@dag.task()
def extract(ctx):
    print("pulling rows")
    log.info("info from extract")
    return 42

@dag.task(depends_on=[extract])
def transform(ctx):
    if ctx.results["extract"] != 42 or FAIL:
        raise SystemExit(4)

FAIL = False

if __name__ == "__main__":
    import sys
    FAIL = "--fail" in sys.argv
    if FAIL:
        sys.argv.remove("--fail")
    print("main block ran")
    dag.main()
"""


@pytest.mark.cli
def test_tuidag_run_imports_the_file_and_uses_the_state_dir_next_to_it(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    write(folder / "cli_etl.py", CLI_ETL)
    proc = tuidag("run", "--no-tui", "project/cli_etl.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "main block ran" not in proc.stdout
    assert "pulling rows" not in proc.stdout.splitlines()  # only the reporter's prefixed copy of the log
    assert "[extract]   pulling rows" in proc.stdout
    runs = list((folder / ".tuidag" / "runs").iterdir())
    assert len(runs) == 1
    extract_log = (runs[0] / "logs" / "extract.log").read_text().splitlines()
    assert extract_log[1] == "pulling rows" and extract_log[2].endswith(" INFO cli_etl: info from extract")
    values = [r.get("value") for r in read_journal(runs[0] / "journal.jsonl") if r.get("to") == "SUCCEEDED"]
    assert values == [42, None]

    assert (
        tuidag("validate", "project/cli_etl.py", cwd=tmp_path).stdout
        == "project/cli_etl.py: ok: cli-etl, 2 tasks, 1 edge\n"
    )


@pytest.mark.cli
def test_python_file_runs_itself_through_dag_main(tmp_path):
    write(tmp_path / "cli_etl.py", CLI_ETL)
    proc = tuidag("cli_etl.py", "--no-tui", "-q", "--fail", cwd=tmp_path, python=True)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("main block ran\n") and "transform  FAILED" in proc.stdout
    assert (tmp_path / ".tuidag" / "runs").is_dir()
    summary = json.loads(next((tmp_path / ".tuidag" / "runs").iterdir()).joinpath("summary.json").read_text())
    assert summary["counts"] == {"SUCCEEDED": 1, "FAILED": 1}
    usage = tuidag("cli_etl.py", "--bogus", cwd=tmp_path, python=True)
    assert usage.returncode == 2 and "usage: python cli_etl.py" in usage.stderr


@pytest.mark.cli
def test_sigint_stops_in_process_and_isolated_tasks(tmp_path):
    write(
        tmp_path / "sig_etl.py",
        """
        import os, time
        from pathlib import Path
        from tuidag import Dag

        dag = Dag("sig", kill_grace="1s")

        @dag.task()
        def polite(ctx):
            Path("polite.started").touch()
            while not ctx.cancelled.wait(0.01):
                pass
            print("polite stops")

        @dag.task(isolate=True)
        def hard(ctx):
            Path("hard.pid").write_text(f"{os.getpid()}\\n")
            time.sleep(60)
    """,
    )
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "sig_etl.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pid_file = tmp_path / "hard.pid"
        wait_until(
            lambda: (
                (tmp_path / "polite.started").exists() and pid_file.exists() and pid_file.read_text().endswith("\n")
            ),
            timeout=30,
        )
        hard = read_pids(pid_file)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=patience(30))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert not any(alive(pid, ct) for pid, ct in hard)
    run = next((tmp_path / ".tuidag" / "runs").iterdir())
    assert (run / "logs" / "polite.log").read_text().endswith("polite stops\n")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"CANCELLED": 2} and summary["interrupted_by"] == "SIGINT"


@pytest.mark.cli
def test_invalid_python_dag_exits_2_with_located_errors(tmp_path):
    write(
        tmp_path / "bad_cli.py",
        """
        from tuidag import Dag
        dag = Dag("bad")

        @dag.task(depends_on=["nothing"])
        def only(ctx): ...
    """,
    )
    proc = tuidag("run", "--no-tui", "bad_cli.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "bad_cli.py:4:1: task 'only' depends on unknown task 'nothing'\n"
    assert not (tmp_path / ".tuidag").exists()


def test_import_tuidag_stays_light():
    code = (
        "import sys, tuidag; light = 'tuidag.api' not in sys.modules; from tuidag import Dag, TaskContext; "
        "print(light, 'textual' in sys.modules, Dag.__module__)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.stdout.split() == ["True", "False", "tuidag.api"], proc.stderr


def test_demo_loads():
    spec = load_python(REPO / "demos" / "etl.py")
    assert list(spec.tasks) == ["extract", "transform", "score", "load"] and spec.tasks["score"].isolate


# --- under the terminal UI --------------------------------------------------------------------------------------
def test_routing_while_the_textual_ui_owns_stdout(tmp_path):
    """Textual swaps sys.stdout for its own capture object while it runs; task output must still go to the logs,
    and everything else to Textual."""
    from tuidag.control.remote import RemoteRun
    from tuidag.ui.app import TuidagApp

    dag = Dag("ui", max_parallel=4)

    def body(ctx):
        for n in range(50):
            print(f"{ctx.name} {n}")
        return ctx.name

    for i in range(4):
        dag.task(name=f"u{i}")(body)
    session = RunSession.create(dag.spec(source=tmp_path / "ui.py"), tmp_path / "state")
    captured: list[str] = []
    wrapped: list[str] = []

    async def drive() -> None:
        session.serve_control()  # served and viewed as `tuidag run` views it (its engine here in this process)
        remote = RemoteRun.attach(session.run, session.store, foreground=True)
        session.scheduler.start()
        app = TuidagApp(remote)
        app._print = lambda text, stderr=False: captured.append(text)
        async with app.run_test(headless=True, size=(120, 40)) as pilot:
            deadline = asyncio.get_running_loop().time() + 20
            print("from the app's thread")
            while not session.scheduler.finished:
                assert asyncio.get_running_loop().time() < deadline, "run did not finish"
                print("from the app's thread")
                await pilot.pause(0.02)
            wrapped.append(
                type(output_routing.RoutingStream.wrapped.fget(sys.stdout)).__name__
                if isinstance(sys.stdout, output_routing.RoutingStream)
                else type(sys.stdout).__name__
            )
        remote.close()
        session.finish()

    asyncio.run(drive())
    assert wrapped == ["_PrintCapture"]
    assert "from the app's thread" in "".join(captured)
    assert not any(text.startswith("u") and text[1].isdigit() for text in captured)
    for i in range(4):
        lines = [line for line in session.run.log_path(f"u{i}").read_text().splitlines() if not line.startswith("===")]
        assert lines == [f"u{i} {n}" for n in range(50)]
