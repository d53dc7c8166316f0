"""Load: many random 50-task DAGs with random exit codes, 0-50 ms durations and random cancels from another thread.
Every run must keep the scheduler's invariants, leave no process behind, and have a journal that replays to the
final states the engine reported. TUIDAG_STRESS_EXAMPLES sets how many DAGs: 60 by default (3,000 task processes,
about 10 s of CPU here; 200 were a tenth of the whole suite's CPU time), more for a deeper run before a release."""

from __future__ import annotations

import os
import random
import threading

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dags import Recorder, make_dag
from slowness import patience
from test_properties import check_invariants
from tuidag.engine import LocalExecutor, Scheduler
from tuidag.engine.process import TAG_RUN, ProcRef
from tuidag.store.journal import JournalWriter, replay

EXAMPLES = int(os.environ.get("TUIDAG_STRESS_EXAMPLES", "60"))


@st.composite
def stress_case(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    tasks = {}
    for i in range(50):
        deps = rng.sample(range(i), k=min(i, rng.randint(0, 3)))
        code = rng.choice([0] * 8 + [1, 2])
        tasks[f"t{i}"] = {
            "run": f"sleep 0.{rng.randint(0, 50):03d}; exit {code}",
            "depends_on": [f"t{d}" for d in deps],
        }
    cancels = [(rng.randrange(50), rng.uniform(0, 0.3)) for _ in range(rng.randint(0, 4))]
    policy = rng.choice(["skip-downstream", "finish-running", "cancel-all"])
    return seed, tasks, cancels, policy


@pytest.mark.timeout(patience(max(120, EXAMPLES // 2)))  # 120 s covers 200 examples, not 1,000
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stress_case())
def test_stress(tmp_path_factory, case):
    seed, tasks, cancels, policy = case
    tmp = tmp_path_factory.mktemp("stress")
    (tmp / "logs").mkdir()
    dag = make_dag(tasks, on_failure=policy, max_parallel=8, kill_grace=0.5)
    run_id = f"stress-{seed}"
    scheduler = Scheduler(dag, LocalExecutor(), run_id, tmp / "logs")
    journal = JournalWriter(tmp / "journal.jsonl", {"run_id": run_id, "tasks": list(dag.topological_order)})
    rec = Recorder()
    scheduler.subscribe(journal.record, batches=True)
    scheduler.subscribe(rec)
    scheduler.start()

    def canceller():
        for index, delay in sorted(cancels, key=lambda c: c[1]):
            threading.Event().wait(delay / 4)
            scheduler.cancel(f"t{index}")

    thread = threading.Thread(target=canceller)
    thread.start()
    assert scheduler.wait(patience(60))
    thread.join()
    scheduler.close()
    journal.close()
    final = {name: snap.state for name, snap in scheduler.snapshot().items()}
    check_invariants(dag, rec.task_events(), 8)
    assert {n: t.state for n, t in replay(tmp / "journal.jsonl").tasks.items()} == final
    leaders = [ProcRef(s.pid, s.create_time, run_id) for s in scheduler.snapshot().values() if s.pid]
    assert not [ref for ref in leaders if ref.process() is not None]
    tagged = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(TAG_RUN) == run_id and proc.status() != psutil.STATUS_ZOMBIE:
                tagged.append(proc.pid)
        except psutil.Error:
            pass
    assert tagged == []
