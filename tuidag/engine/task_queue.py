"""From ready to a pool thread: a task whose dependencies succeeded is QUEUED, held while the run is paused, kept
back while no worker can run it (an executor's `placement_problem`) or until it has its resource slots (slots.py),
and then submitted to the pool.

Part of `Scheduler` (scheduler.py): every method here runs with the scheduler lock held, but `_recheck_placement`
(the executor calls it), which takes it.
"""

from __future__ import annotations

from ..model.resources import cuda_kind, format_slots, slot_env
from ..model.spec import TaskSpec
from ..model.state import MET
from .executor import RunningAttempt
from .task_records import WAITING, S, TaskRecord, TaskRecords


class TaskQueue(TaskRecords):
    """Ready tasks on their way to the pool."""

    def _drop_pending_work(self, t: TaskRecord) -> None:
        if t.timer is not None:
            t.timer.cancel()
            t.timer = None
        self._held.pop(t.snap.name, None)

    def _cancel_one(self, t: TaskRecord, reason: str, to_kill: list[RunningAttempt]) -> bool:
        """A waiting task CANCELLED, a running (or ready) one CANCELLING with its attempt put in `to_kill` (killed
        by the caller, outside the lock); False for a task in any other state, which this leaves alone."""
        if t.state in WAITING:
            self._drop_pending_work(t)
            self._set(t, S.CANCELLED, reason=reason, finished_at=self.clock())
        elif t.state in (S.RUNNING, S.READY):
            t.cancel_reason = reason
            self._set(t, S.CANCELLING, reason=reason)
            if t.running is not None:
                to_kill.append(t.running)
        else:
            return False
        return True

    def _deps_succeeded(self, name: str) -> bool:
        return all(self._tasks[d].state in MET for d in self.dag.tasks[name].depends_on)

    def _enqueue(self, t: TaskRecord) -> None:
        self._set(t, S.QUEUED)
        self._submit(t)

    def _submit(self, t: TaskRecord) -> None:
        if self._paused:
            self._held[t.snap.name] = None
            return
        problem = self.executor.placement_problem(self.dag.tasks[t.snap.name])
        if problem is not None:  # waits here, holding no slot, until the executor says workers changed
            self._unplaced.append((t.snap.name, t.generation))
            if t.held is not None:
                self._release(t)
            if t.state is S.QUEUED and t.snap.reason != problem:
                self._set(t, S.QUEUED, reason=problem)
                self._unplaced_reasons.add(t.snap.name)
            return
        if self._unplaced_reasons and t.snap.name in self._unplaced_reasons:
            self._unplaced_reasons.discard(t.snap.name)
            if t.state is S.QUEUED and t.snap.reason is not None:
                self._set(t, S.QUEUED, reason=None)  # placed: no longer waiting for a worker
        if t.held is None and t.snap.name in self._requests:
            self._slot_waiters.append((t.snap.name, t.generation))
            self._admit()
            return
        self._ready.append((t.snap.name, t.generation))  # submitted by _flush, once the lock is released

    def _admit(self) -> None:
        """Give free slots to the tasks waiting for them that may have them (slots.py says which) and queue those
        for a pool thread; the others that are QUEUED say what they wait for."""
        if self._paused or self._stopping or not self._slot_waiters:
            return
        tasks = self._tasks
        live = [
            (name, generation)
            for name, generation in self._slot_waiters
            if tasks[name].generation == generation
            and tasks[name].held is None
            and tasks[name].state in (S.QUEUED, S.RETRYING)
        ]
        admitted, blocked = self.slots.admit((item, self._requests[item[0]]) for item in live)
        self._slot_waiters = [item for item in live if item in blocked]
        for item, held in admitted:
            t = tasks[item[0]]
            t.held = held
            self._set(t, t.state, slots=format_slots(held), reason=None if t.state is S.QUEUED else t.snap.reason)
            self._ready.append(item)
        for (name, _), kinds in blocked.items():
            t = tasks[name]
            reason = "waiting for " + ", ".join(kinds)
            if t.state is S.QUEUED and t.snap.reason != reason:
                self._set(t, S.QUEUED, reason=reason)

    def _recheck_placement(self) -> None:
        """The executor's workers changed: try again the tasks no worker could run (see `_submit`)."""
        with self._lock:
            waiting, self._unplaced = self._unplaced, []
            for name, generation in waiting:
                t = self._tasks[name]
                if t.generation != generation or t.state not in (S.QUEUED, S.RETRYING):
                    continue  # cancelled, re-run or stopped meanwhile
                self._submit(t)
        self._flush()

    def _release(self, t: TaskRecord) -> None:
        """`t` moved to a state that holds no slots: give back the ones it had, and let the waiters have them (a
        waiter that left waits no more either, and may have been keeping others behind it)."""
        if t.held is not None:
            self.slots.give_back(t.held)
            t.held = None
        self._admit()

    def _slot_env(self, spec: TaskSpec, held: dict[str, tuple[int, ...]] | None) -> dict[str, str]:
        """TUIDAG_SLOTS_<KIND> for each kind held, and CUDA_VISIBLE_DEVICES with the first GPU kind's numbers."""
        return slot_env(held, cuda_kind(spec)) if held else {}
