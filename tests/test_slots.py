"""Resource slots against real subprocesses: capacities never exceeded, numbered slots in the environment, no
head-of-line blocking, no starvation of large requests, slots released however an attempt ends."""
from __future__ import annotations

from pathlib import Path

from dags import finish, make_dag, start_run
from tuidag.engine.slots import SlotPool
from tuidag.model.resources import Request

#: A task that holds its slots until the test creates `go` in the work dir (polling, so no fixed sleep decides).
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.01; done"


def slotted(dag, requests: dict[str, dict[str, int]], capacities: dict[str, int]):
    """`dag` with slot requests (task -> {kind: count}) and capacities."""
    tasks = {name: spec._replace(resources={kind: Request(n) for kind, n in requests.get(name, {}).items()})
             for name, spec in dag.tasks.items()}
    return dag.replace(tasks=tasks, resources=capacities)


def read_intervals(folder: Path) -> list[tuple[int, int, str, set[str]]]:
    """(start ns, end ns, task, slots held) from the `<task>.times` files tasks wrote."""
    found = []
    for path in folder.glob("*.times"):
        start, end, held = path.read_text().split("\n")[:3]
        found.append((int(start), int(end), path.stem, {f"gpu{i}" for i in held.split(",") if i}))
    return found


def test_capacity_is_never_exceeded_and_overlapping_tasks_hold_different_slots(tmp_path):
    record = 'date +%s%N > "$TUIDAG_TASK.tmp"; sleep 0.05; date +%s%N >> "$TUIDAG_TASK.tmp"; ' \
             'echo "$TUIDAG_SLOTS_GPU" >> "$TUIDAG_TASK.tmp"; mv "$TUIDAG_TASK.tmp" "$TUIDAG_TASK.times"'
    names = [f"t{i}" for i in range(8)]
    dag = slotted(make_dag({name: record for name in names}, max_parallel=8, workdir=tmp_path),
                  {name: {"gpu": 2 if i % 3 == 0 else 1} for i, name in enumerate(names)}, {"gpu": 3})
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
    dag = slotted(make_dag({"hold": WAIT_FOR_GO, "wants_gpu": "true", "cpu_only": "true"}, max_parallel=2,
                           workdir=tmp_path), {"hold": {"gpu": 1}, "wants_gpu": {"gpu": 1}}, {"gpu": 1})
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
    dag = slotted(make_dag({"hold": WAIT_FOR_GO, "big": "true", "small": "true", "db_task": "true"},
                           max_parallel=4, workdir=tmp_path),
                  {"hold": {"gpu": 1}, "big": {"gpu": 2}, "small": {"gpu": 1}, "db_task": {"db": 1}},
                  {"gpu": 2, "db": 1})
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
    dag = slotted(make_dag({
        "hang": "sleep 30",
        "fails": "exit 3",
        "times_out": {"run": "sleep 30", "timeout": 0.2},
        "no_workdir": {"run": "true", "workdir": tmp_path / "missing"},
        "retried": {"run": "exit 1", "retries": 1},
        "last": "true",
    }, max_parallel=6, workdir=tmp_path), {name: {"gpu": 1} for name in
                                            ("hang", "fails", "times_out", "no_workdir", "retried", "last")},
        {"gpu": 1})
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("hang", "RUNNING")
    assert scheduler.snapshot()["fails"].reason == "waiting for gpu"
    scheduler.cancel("hang")
    assert finish(scheduler) == {"hang": "CANCELLED", "fails": "FAILED", "times_out": "FAILED",
                                 "no_workdir": "FAILED", "retried": "FAILED", "last": "SUCCEEDED"}
    snaps = scheduler.snapshot()
    assert snaps["no_workdir"].reason.startswith("could not start")
    assert snaps["retried"].attempt == 2
    assert scheduler.slots_in_use() == {"gpu": (0, 1)}


def test_slot_numbers_reach_the_task_environment(tmp_path):
    show = 'echo "${TUIDAG_SLOTS_GPU-none} ${TUIDAG_SLOTS_DB-none} ${TUIDAG_SLOTS_V100-none} ' \
           '${CUDA_VISIBLE_DEVICES-none}"'
    dag = slotted(make_dag({"two": show, "after": {"run": show, "depends_on": ["two"]}, "db": show, "v": show},
                           max_parallel=4, workdir=tmp_path),
                  {"two": {"gpu": 2, "db": 1}, "after": {"gpu": 1}, "db": {"db": 1}, "v": {"V100": 2}},
                  {"gpu": 2, "db": 2, "V100": 4})
    scheduler, _ = start_run(dag, tmp_path)
    assert set(finish(scheduler).values()) == {"SUCCEEDED"}
    lines = {name: (tmp_path / "logs" / f"{name}.log").read_text().splitlines()[1].split()
             for name in ("two", "after", "db", "v")}
    assert lines["two"][0] == "0,1" and lines["two"][1] in ("0", "1") and lines["two"][3] == "0,1"
    assert lines["after"] == ["0", "none", "none", "0"]
    assert lines["db"][0] == "none" and lines["db"][3] == "none"  # a database is not a CUDA device
    assert lines["v"] == ["none", "none", "0,1", "0,1"]


def test_the_admission_rule_reserves_kinds_for_a_blocked_waiter():
    pool = SlotPool({"gpu": 2, "db": 1})
    assert pool.take({"gpu": 1}) == {"gpu": (0,)}
    admitted, blocked = pool.admit([("big", {"gpu": 2, "db": 1}), ("db", {"db": 1}), ("lic", {})])
    assert admitted == [("lic", {})]
    assert blocked == {"big": ["gpu"], "db": ["db"]}  # the database slot is kept for big, which is short of a GPU
    pool.give_back({"gpu": (0,)})
    admitted, blocked = pool.admit([("big", {"gpu": 2, "db": 1}), ("db", {"db": 1})])
    assert admitted == [("big", {"gpu": (0, 1), "db": (0,)})] and blocked == {"db": ["db"]}
