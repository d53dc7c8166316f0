"""Resource slots against real subprocesses: capacities never exceeded, numbered slots in the environment, no
head-of-line blocking, no starvation of large requests, slots released however an attempt ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dags import finish, make_dag, start_run
from slowness import patience
from test_cli import tuidag, write
from tuidag.engine.slots import SlotPool
from tuidag.model.resources import Request, is_cuda_kind
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore

#: A task that holds its slots until the test creates `go` in the work dir (polling, so no fixed sleep decides);
#: bounded (about 30 s of a quiet machine) so that a failed test leaves nothing running.
WAIT_FOR_GO = f"for i in $(seq {round(patience(30) / 0.01)}); do [ -e go ] && break; sleep 0.01; done"


def slotted(dag, requests: dict[str, dict[str, int]], capacities: dict[str, int]):
    """`dag` with slot requests (task -> {kind: count}) and capacities."""
    tasks = {
        name: spec._replace(resources={kind: Request(n) for kind, n in requests.get(name, {}).items()})
        for name, spec in dag.tasks.items()
    }
    return dag.replace(tasks=tasks, resources=capacities)


def read_intervals(folder: Path) -> list[tuple[int, int, str, set[str]]]:
    """(start ns, end ns, task, slots held) from the `<task>.times` files tasks wrote."""
    found = []
    for path in folder.glob("*.times"):
        start, end, held = path.read_text().split("\n")[:3]
        found.append((int(start), int(end), path.stem, {f"gpu{i}" for i in held.split(",") if i}))
    return found


def test_capacity_is_never_exceeded_and_overlapping_tasks_hold_different_slots(tmp_path):
    record = (
        'date +%s%N > "$TUIDAG_TASK.tmp"; sleep 0.05; date +%s%N >> "$TUIDAG_TASK.tmp"; '
        'echo "$TUIDAG_SLOTS_GPU" >> "$TUIDAG_TASK.tmp"; mv "$TUIDAG_TASK.tmp" "$TUIDAG_TASK.times"'
    )
    names = [f"t{i}" for i in range(8)]
    dag = slotted(
        make_dag({name: record for name in names}, max_parallel=8, workdir=tmp_path),
        {name: {"gpu": 2 if i % 3 == 0 else 1} for i, name in enumerate(names)},
        {"gpu": 3},
    )
    scheduler, _ = start_run(dag, tmp_path)
    assert set(finish(scheduler).values()) == {"SUCCEEDED"}
    intervals = read_intervals(tmp_path)
    assert len(intervals) == 8
    for start, _, task, _ in intervals:  # at each start: who holds slots then
        holders = [(t, held) for s, e, t, held in intervals if s <= start < e]
        assert sum(len(held) for _, held in holders) <= 3, holders
        taken = [slot for _, held in holders for slot in held]
        assert len(taken) == len(set(taken)), f"a slot shared at the start of {task}: {holders}"
    assert {len(held) for _, _, task, held in intervals} == {1, 2}


def test_waiting_for_a_gpu_does_not_hold_up_a_cpu_task_behind_it(tmp_path):
    dag = slotted(
        make_dag({"hold": WAIT_FOR_GO, "wants_gpu": "true", "cpu_only": "true"}, max_parallel=2, workdir=tmp_path),
        {"hold": {"gpu": 1}, "wants_gpu": {"gpu": 1}},
        {"gpu": 1},
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("cpu_only", "SUCCEEDED")  # both pool threads were free for it: the GPU waiter holds none
    waiting = scheduler.snapshot()["wants_gpu"]
    assert (waiting.state.value, waiting.reason) == ("QUEUED", "waiting for gpu")
    (tmp_path / "go").touch()
    assert finish(scheduler) == {"hold": "SUCCEEDED", "wants_gpu": "SUCCEEDED", "cpu_only": "SUCCEEDED"}
    assert scheduler.snapshot()["wants_gpu"].reason is None


def test_a_large_request_keeps_its_place_against_later_small_ones(tmp_path):
    """`big` needs both GPUs while `hold` has one: the free GPU is kept for `big`, not given to `small` (which asked
    later), else a stream of small tasks could keep `big` waiting forever. A task of another kind is not held up."""
    dag = slotted(
        make_dag(
            {"hold": WAIT_FOR_GO, "big": "true", "small": "true", "db_task": "true"}, max_parallel=4, workdir=tmp_path
        ),
        {"hold": {"gpu": 1}, "big": {"gpu": 2}, "small": {"gpu": 1}, "db_task": {"db": 1}},
        {"gpu": 2, "db": 1},
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("db_task", "SUCCEEDED")
    snaps = scheduler.snapshot()
    assert (snaps["big"].state.value, snaps["big"].reason) == ("QUEUED", "waiting for gpu")
    assert (snaps["small"].state.value, snaps["small"].reason) == ("QUEUED", "waiting for gpu")
    assert scheduler.slots_in_use() == {"gpu": (1, 2), "db": (0, 1)}
    (tmp_path / "go").touch()
    assert set(finish(scheduler).values()) == {"SUCCEEDED"}
    started = {e.task: e.seq for e in rec.task_events() if e.new.value == "RUNNING"}
    assert started["big"] < started["small"]
    assert scheduler.snapshot()["big"].slots == "gpu:0,1"


def test_slots_are_released_on_failure_timeout_launch_error_retry_and_cancel(tmp_path):
    """One GPU, every task needs it: each runs only if the one before gave it back."""
    dag = slotted(
        make_dag(
            {
                "hang": "sleep 30",
                "fails": "exit 3",
                "times_out": {"run": "sleep 30", "timeout": 0.2},
                "no_workdir": {"run": "true", "workdir": tmp_path / "missing"},
                "retried": {"run": "exit 1", "retries": 1},
                "last": "true",
            },
            max_parallel=6,
            workdir=tmp_path,
        ),
        {name: {"gpu": 1} for name in ("hang", "fails", "times_out", "no_workdir", "retried", "last")},
        {"gpu": 1},
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("hang", "RUNNING")
    assert scheduler.snapshot()["fails"].reason == "waiting for gpu"
    scheduler.cancel("hang")
    assert finish(scheduler) == {
        "hang": "CANCELLED",
        "fails": "FAILED",
        "times_out": "FAILED",
        "no_workdir": "FAILED",
        "retried": "FAILED",
        "last": "SUCCEEDED",
    }
    snaps = scheduler.snapshot()
    assert snaps["no_workdir"].reason.startswith("could not start")
    assert snaps["retried"].attempt == 2
    assert scheduler.slots_in_use() == {"gpu": (0, 1)}


def test_a_task_waiting_out_its_retry_delay_holds_no_slot(tmp_path):
    dag = slotted(
        make_dag(
            {"flaky": {"run": "exit 1", "retries": 1, "retry_delay": 30}, "other": "true"},
            max_parallel=2,
            workdir=tmp_path,
        ),
        {"flaky": {"gpu": 1}, "other": {"gpu": 1}},
        {"gpu": 1},
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("other", "SUCCEEDED")
    assert scheduler.snapshot()["flaky"].state.value == "RETRYING"
    scheduler.cancel("flaky")
    assert finish(scheduler) == {"flaky": "CANCELLED", "other": "SUCCEEDED"}


def test_cancelling_the_waiter_ahead_lets_the_ones_behind_it_start(tmp_path):
    dag = slotted(
        make_dag({"hold": WAIT_FOR_GO, "big": "true", "small": "true"}, max_parallel=3, workdir=tmp_path),
        {"hold": {"gpu": 1}, "big": {"gpu": 2}, "small": {"gpu": 1}},
        {"gpu": 2},
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_for(lambda: scheduler.snapshot()["small"].reason == "waiting for gpu")
    scheduler.cancel("big")
    rec.wait_state("small", "SUCCEEDED")  # its GPU was free: only big's place kept it waiting
    (tmp_path / "go").touch()
    assert finish(scheduler) == {"hold": "SUCCEEDED", "big": "CANCELLED", "small": "SUCCEEDED"}


def test_slots_freed_while_paused_are_handed_out_on_resume(tmp_path):
    dag = slotted(
        make_dag({"hold": WAIT_FOR_GO, "waiter": "true"}, max_parallel=2, workdir=tmp_path),
        {"hold": {"gpu": 1}, "waiter": {"gpu": 1}},
        {"gpu": 1},
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("hold", "RUNNING")
    assert scheduler.pause()
    (tmp_path / "go").touch()
    rec.wait_state("hold", "SUCCEEDED")
    assert scheduler.slots_in_use() == {"gpu": (0, 1)} and scheduler.snapshot()["waiter"].state.value == "QUEUED"
    scheduler.resume()
    assert finish(scheduler) == {"hold": "SUCCEEDED", "waiter": "SUCCEEDED"}


def test_slot_numbers_reach_the_task_environment(tmp_path):
    show = (
        'echo "${TUIDAG_SLOTS_GPU-none} ${TUIDAG_SLOTS_DB-none} ${TUIDAG_SLOTS_V100-none} ${CUDA_VISIBLE_DEVICES-none}"'
    )
    dag = slotted(
        make_dag(
            {"two": show, "after": {"run": show, "depends_on": ["two"]}, "db": show, "v": show},
            max_parallel=4,
            workdir=tmp_path,
        ),
        {"two": {"gpu": 2, "db": 1}, "after": {"gpu": 1}, "db": {"db": 1}, "v": {"V100": 2}},
        {"gpu": 2, "db": 2, "V100": 4},
    )
    scheduler, _ = start_run(dag, tmp_path)
    assert set(finish(scheduler).values()) == {"SUCCEEDED"}
    lines = {
        name: (tmp_path / "logs" / f"{name}.log").read_text().splitlines()[1].split()
        for name in ("two", "after", "db", "v")
    }
    assert lines["two"][0] == "0,1" and lines["two"][1] in ("0", "1") and lines["two"][3] == "0,1"
    assert lines["after"] == ["0", "none", "none", "0"]
    assert lines["db"][0] == "none" and lines["db"][3] == "none"  # a database is not a CUDA device
    assert lines["v"] == ["none", "none", "0,1", "0,1"]


def test_which_kinds_are_cuda_devices():
    assert [is_cuda_kind(kind) for kind in ("gpu", "GPU", "V100", "a100-80gb", "db", "p1", "license")] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    assert is_cuda_kind("Gaudi", accelerator=True) and not is_cuda_kind("tpu-v2-8", accelerator=True)


def test_the_admission_rule_reserves_kinds_for_a_blocked_waiter():
    pool = SlotPool({"gpu": 2, "db": 1})
    assert pool.take({"gpu": 1}) == {"gpu": (0,)}
    admitted, blocked = pool.admit([("big", {"gpu": 2, "db": 1}), ("db", {"db": 1}), ("lic", {})])
    assert admitted == [("lic", {})]
    assert blocked == {"big": ["gpu"], "db": ["db"]}  # the database slot is kept for big, which is short of a GPU
    pool.give_back({"gpu": (0,)})
    admitted, blocked = pool.admit([("big", {"gpu": 2, "db": 1}), ("db", {"db": 1})])
    assert admitted == [("big", {"gpu": (0, 1), "db": (0,)})] and blocked == {"db": ["db"]}


# --- files and the command line --------------------------------------------------------------------------------
SLOTTED_DAG = """\
resources: {gpu: 2, db: 1}
tasks:
  train:
    run: echo "gpus $TUIDAG_SLOTS_GPU cuda $CUDA_VISIBLE_DEVICES"
    resources: {gpu: 2, db: 1}
  load:
    run: echo "db $TUIDAG_SLOTS_DB"
    depends_on: train
    resources:
      db: 1
"""


def test_quiet_output_and_the_journal_record_the_slots_each_attempt_held(tmp_path):
    dag = write(tmp_path / "dag.yaml", SLOTTED_DAG)
    proc = tuidag("run", "-q", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[train] --> RUNNING [slots gpu:0,1 db:0]" in proc.stdout
    assert "[load]  --> RUNNING [slots db:0]" in proc.stdout
    run = RunStore(tmp_path / ".tuidag").runs()[-1]
    running = {r["task"]: r.get("slots") for r in read_journal(run.journal) if r.get("to") == "RUNNING"}
    assert running == {"train": "gpu:0,1 db:0", "load": "db:0"}
    assert replay(run.journal).tasks["train"].slots == "gpu:0,1 db:0"
    assert (run.logs / "train.log").read_text().splitlines()[1] == "gpus 0,1 cuda 0,1"


def test_a_request_for_an_undeclared_kind_or_over_capacity_is_a_located_error_and_nothing_starts(tmp_path):
    dag = write(
        tmp_path / "dag.yaml",
        "resources: {gpu: 1}\ntasks:\n  a:\n    run: touch started\n    resources: {gpu: 2, db: 1}\n",
    )
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"{dag}:5:17: task 'a' asks for 2 'gpu' slots, more than the capacity of 1",
        f"{dag}:5:25: task 'a' asks for 1 'db' slot, but no capacity for 'db' is declared: add it to the DAG's "
        f"'resources' or pass --resources db=N",
    ]
    assert not (tmp_path / "started").exists() and not RunStore(tmp_path / ".tuidag").runs()
    assert tuidag("validate", str(dag), cwd=tmp_path).returncode == 2
    # the command line declares and raises capacities
    proc = tuidag("validate", "--resources", "gpu=2,db=1", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


MIXED_SLOT_MISTAKES = """\
resources: {gpu: 2}
tasks:
  a:
    run: touch started
    resources: {gpu: 0.5}
  b:
    run: touch started
    resources: {gpu: 3}
  c:
    run: touch started
    resources: {tpu: 1}
"""


def test_every_slot_mistake_of_a_file_is_reported_with_the_others(tmp_path):
    """A count that is not a whole number is found while reading the file, a request over its capacity and an
    undeclared kind once the capacities are known (the command line may add some): all three at once."""
    dag = write(tmp_path / "dag.yaml", MIXED_SLOT_MISTAKES)
    bad_count = f"{dag}:5:22: task 'a': resources: 'gpu' must be a positive integer, got 0.5"
    undeclared = (
        f"{dag}:11:17: task 'c' asks for 1 'tpu' slot, but no capacity for 'tpu' is declared: add it "
        f"to the DAG's 'resources' or pass --resources tpu=N"
    )
    for command in ("run", "validate"):
        proc = tuidag(command, str(dag), cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.splitlines() == [
            bad_count,
            f"{dag}:8:17: task 'b' asks for 3 'gpu' slots, more than the capacity of 2",
            undeclared,
        ]
    proc = tuidag("run", "--resources", "gpu=4", str(dag), cwd=tmp_path)  # judged by the capacities given
    assert proc.returncode == 2 and proc.stderr.splitlines() == [bad_count, undeclared]
    assert not (tmp_path / "started").exists() and not RunStore(tmp_path / ".tuidag").runs()
    # capacities that are wrong themselves can't judge a request: no follow-on errors
    write(dag, MIXED_SLOT_MISTAKES.replace("{gpu: 2}", "{gpu: two}"))
    proc = tuidag("validate", str(dag), cwd=tmp_path)
    assert proc.returncode == 2 and [line.split(": ", 1)[0] for line in proc.stderr.splitlines()] == [
        f"{dag}:1:18",
        f"{dag}:5:22",
    ]


def test_every_slot_mistake_of_a_python_dag_is_reported_with_the_others(tmp_path):
    script = write(
        tmp_path / "py_dag.py",
        "from tuidag import Dag\n"
        "dag = Dag('py', resources={'gpu': 2})\n"
        "dag.shell('a', 'touch started', resources={'gpu': 0.5})\n"
        "dag.shell('b', 'touch started', resources={'gpu': 3})\n"
        "dag.shell('c', 'touch started', resources={'tpu': 1})\n"
        "if __name__ == '__main__':\n    dag.main()\n",
    )
    # as given (relative) to `tuidag run`, every error names the file the same way
    for shown, command in (
        ("py_dag.py", [sys.executable, "-m", "tuidag", "run", "py_dag.py"]),
        (str(script), [sys.executable, str(script)]),
    ):
        proc = subprocess.run(
            [*command, "--no-tui"], cwd=tmp_path, capture_output=True, text=True, timeout=patience(60)
        )
        assert proc.returncode == 2, proc.stderr
        assert [line.split(": ", 1)[0] for line in proc.stderr.splitlines()] == [
            f"{shown}:3:1",
            f"{shown}:4:1",
            f"{shown}:5:1",
        ], proc.stderr
        assert "more than the capacity of 2" in proc.stderr and "no capacity for 'tpu'" in proc.stderr
    assert not (tmp_path / "started").exists()


def test_resources_flag_below_a_request_names_the_task_and_the_flag(tmp_path):
    dag = write(tmp_path / "dag.yaml", SLOTTED_DAG)
    proc = tuidag("run", "--resources", "gpu=1", str(dag), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"--resources gpu=1 is less than the 2 'gpu' slots task 'train' asks for ({dag}:5:17)\n"
    proc = tuidag("run", "--resources", "gpu:1", str(dag), cwd=tmp_path)
    assert proc.returncode == 2 and "expected KIND=COUNT" in proc.stderr and "Traceback" not in proc.stderr


def test_python_api_declares_capacities_and_requests(tmp_path):
    from tuidag.api import Dag
    from tuidag.model.errors import DagErrors
    from tuidag.model.resources import resolve

    dag = Dag("py", resources={"gpu": 2})
    dag.shell("a", "true", resources={"gpu": 2})
    spec = dag.spec()
    assert spec.resources == {"gpu": 2} and spec.tasks["a"].resources["gpu"].count == 2
    bad = Dag("py", resources={"gpu": 1})
    bad.shell("a", "true", resources={"gpu": 2, "db": 1})
    try:
        resolve(bad.spec())
    except DagErrors as exc:
        assert [e.location.line for e in exc.errors] == [bad._tasks["a"].location.line] * 2
        assert "more than the capacity of 1" in str(exc) and "no capacity for 'db'" in str(exc)
    else:
        raise AssertionError("an over-capacity request was accepted")


def test_a_python_dag_runs_with_capacities_from_the_command_line(tmp_path):
    script = write(
        tmp_path / "py_dag.py",
        "from tuidag import Dag\ndag = Dag('py')\ndag.shell('a', 'echo gpu=$TUIDAG_SLOTS_GPU', resources={'gpu': 2})\n",
    )
    proc = tuidag("run", "-q", str(script), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"{script}:3:1: task 'a' asks for 2 'gpu' slots, but no capacity")
    proc = tuidag("run", "-q", "--resources", "gpu=2", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[a] --> RUNNING [slots gpu:0,1]" in proc.stdout


SKYPILOT_PIPELINE = """\
name: sky
---
name: first
resources:
  accelerators: V100:2
run: echo "first ${TUIDAG_SLOTS_V100-none} ${CUDA_VISIBLE_DEVICES-none} $SKYPILOT_NUM_GPUS_PER_NODE"
---
name: second
resources:
  accelerators: {V100: 1}
run: echo "second ${TUIDAG_SLOTS_V100-none} ${CUDA_VISIBLE_DEVICES-none}"
"""


def test_skypilot_accelerators_hold_slots_only_when_a_capacity_is_declared(tmp_path):
    dag = write(tmp_path / "sky.yaml", SKYPILOT_PIPELINE)
    proc = tuidag("run", "-q", "--resources", "V100=4", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "note:" not in proc.stderr  # nothing of 'resources' is ignored: the accelerators hold slots
    assert (
        "[first]  --> RUNNING [slots V100:0,1]" in proc.stdout and "[second] --> RUNNING [slots V100:0]" in proc.stdout
    )
    logs = RunStore(tmp_path / ".tuidag").runs()[-1].logs
    assert (logs / "first.log").read_text().splitlines()[-1] == "first 0,1 0,1 2"
    assert (logs / "second.log").read_text().splitlines()[-1] == "second 0 0"

    proc = tuidag("run", "-q", str(dag), cwd=tmp_path)  # no capacity: ignored, with the note, as before
    assert proc.returncode == 0, proc.stderr
    assert f"{dag}:4:1: note: 'resources' is ignored when running locally" in proc.stderr
    assert "slots" not in proc.stdout
    logs = RunStore(tmp_path / ".tuidag").runs()[-1].logs
    assert (logs / "first.log").read_text().splitlines()[-1] == "first none none 2"

    proc = tuidag("run", "--resources", "V100=1", str(dag), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        f"--resources V100=1 is less than the 2 'V100' slots task 'first' asks for ({dag}:5:17)"
    )


def test_the_skypilot_resources_note_says_what_is_ignored_given_the_capacities(tmp_path):
    dag = write(
        tmp_path / "sky.yaml",
        "resources:\n  accelerators: A100:1\n  cpus: 4+\n  cloud: aws\nrun: echo $CUDA_VISIBLE_DEVICES\n",
    )
    for command in ("validate", "run"):
        proc = tuidag(command, str(dag), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert f"{dag}:1:1: note: 'resources' is ignored when running locally\n" in proc.stderr
        proc = tuidag(command, "--resources", "A100=2", str(dag), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (
            f"{dag}:1:1: note: 'resources' other than accelerators is ignored when running locally (cpus, cloud)\n"
        ) in proc.stderr
    assert (RunStore(tmp_path / ".tuidag").runs()[-1].logs / "sky.log").read_text().splitlines()[-1] == "0"
