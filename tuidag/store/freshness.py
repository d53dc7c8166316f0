"""Run only what needs to run: the engine asks `Freshness.decide` when a task is about to start (its dependencies
have ended) and tells `Freshness.succeeded` when an attempt succeeded; `plan` gives every verdict without running.

The facts of a task (model/freshness.py decides on them) are gathered here, from the DAG and the files: its
definition in parts (command, workdir, dependencies, what it declares, and the whole fingerprint `--resume` uses,
which covers a callable's code), the environment tuidag gives it (the DAG's and the task's `env`, `--env`), the OS
variables it lists in `env_inputs`, the content of its inputs, and the content of its dependencies' outputs as they
are when it starts. A success is recorded in the state dir's index with the facts taken at its start and the outputs
hashed at its end, and its output files go to the content cache.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..model.freshness import FAIL, NO_CACHE, NO_OUTPUTS, RESTORE, RUN, UP_TO_DATE, Facts, Verdict, decide, facts_key
from ..model.spec import DagSpec, sha1
from .content_cache import ContentCache, max_size
from .hashing import ALGORITHM, Gate, Hasher, Missing
from .index import Index, Success
from .journal import kept_value
from .runs import link_log, log_file_name

FORCED = "--force: every task runs"


_ENCODER = json.JSONEncoder(sort_keys=True, default=str)  # json.dumps makes one per call with these options


def _digest(value: Any) -> str:
    return sha1(_ENCODER.encode(value).encode("utf-8", "backslashreplace")).hexdigest()[:16]


class Freshness:
    """One run's view of the state dir's index and content cache. `force`: every task runs (its success is still
    recorded); `run_anyway`: tasks that run even when up to date (`--from`), with the reason to give."""

    def __init__(
        self,
        dag: DagSpec,
        state_dir: Path,
        run_id: str = "",
        log_dir: Path | None = None,
        *,
        force: bool = False,
        run_anyway: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        on_note: Callable[[str], None] | None = None,
    ):
        self.dag = dag
        self.run_id = run_id
        self.log_dir = log_dir
        self.force = force
        self.run_anyway = dict(run_anyway or {})
        self.environ = os.environ if environ is None else environ
        self.index = Index(state_dir)
        self.index.preload(self.task_key(""))
        self._gate = Gate()  # the checks of pool threads one at a time (see hashing.Gate)
        self.hasher = Hasher(self.index, gate=self._gate)
        self.cache = ContentCache(state_dir, self.index, on_note)
        self.on_note = on_note
        self.limit = max_size(dict(self.environ))
        self._lock = threading.Lock()
        self._facts: dict[str, Facts] = {}  # task -> the facts taken when it started (recorded on success)
        self._outputs: dict[str, dict[str, dict[str, str] | None]] = {}  # task -> its outputs once it ended well

    def close(self) -> None:
        self.index.close()

    def task_key(self, name: str) -> str:
        return f"{self.dag.source or self.dag.name}\0{name}"

    def base(self, name: str) -> Path:
        return self.dag.tasks[name].workdir or self.dag.workdir

    # The facts.
    def facts(self, name: str, dep_outputs: Callable[[str], Mapping[str, Any] | None]) -> Facts:
        """The task's facts now. Raises Missing for an input that is not there."""
        task = self.dag.tasks[name]
        env = {**self.dag.env, **task.env, **task.run_env}
        deps = {}
        for dep in sorted(task.depends_on):
            if self.dag.tasks[dep].outputs:
                outputs = dep_outputs(dep) or {}
                deps[dep] = {path: digest for files in outputs.values() for path, digest in (files or {}).items()}
        return {
            "algorithm": ALGORITHM,
            "callable": task.func is not None,
            "definition": {
                "command": _digest([task.run if task.func is None else "callable", task.setup, task.shell]),
                "workdir": _digest(str(self.base(name))),
                "dependencies": _digest(sorted(task.depends_on)),
                "declared": _digest([task.inputs, task.outputs, sorted(task.env_inputs)]),
                "all": self.dag.fingerprints[name],
            },
            "env": {key: _digest(value) for key, value in sorted(env.items())},
            "os_env": {
                key: None if self.environ.get(key) is None else _digest(self.environ[key])
                for key in sorted(task.env_inputs)
            },
            "inputs": self.hasher.inputs(self.base(name), task.inputs),
            "deps": deps,
        }

    def _dep_outputs(self, dep: str) -> Mapping[str, Any] | None:
        with self._lock:
            known = self._outputs.get(dep)
        if known is None:  # ended before this run (carried over by --resume): as its files are now
            known = self.hasher.outputs(self.base(dep), self.dag.tasks[dep].outputs)
            with self._lock:
                self._outputs[dep] = known
        return known

    # What the engine asks.
    def decide(self, name: str) -> Verdict:
        """Called on a pool thread when the task is about to start. An up-to-date task's log is linked in from the
        attempt it stands on; a RESTORE verdict has restored the outputs already (else it is a RUN verdict)."""
        try:
            with self._gate:
                verdict = self._verdict(name, self._dep_outputs)
        except (sqlite3.Error, OSError) as exc:  # the index or an output could not be read: run it
            return Verdict(RUN, f"its earlier outputs could not be checked ({_os_error(exc)})")
        if verdict.action in (UP_TO_DATE, RESTORE):
            if verdict.action == RESTORE:
                problem = self._restore(name, verdict)
                if problem:
                    return Verdict(RUN, problem)
            success: Success = verdict.success
            with self._lock:
                self._outputs[name] = dict(success.outputs)
            if self.log_dir is not None and success.log:
                link_log(success.log, os.path.join(self.log_dir, log_file_name(name)))  # str: no Path per task
        return verdict

    def always_runs(self, name: str) -> str | None:
        """Why the task runs whatever its facts are, if it does."""
        task = self.dag.tasks[name]
        if not task.outputs:
            return NO_OUTPUTS
        if not task.cache:
            return NO_CACHE
        return FORCED if self.force else self.run_anyway.get(name)

    def _verdict(self, name: str, dep_outputs: Callable[[str], Mapping[str, Any] | None]) -> Verdict:
        task = self.dag.tasks[name]
        if not task.outputs and not task.inputs:
            return Verdict(RUN, NO_OUTPUTS)
        try:
            facts = self.facts(name, dep_outputs)
        except Missing as exc:
            return Verdict(FAIL, str(exc))
        except OSError as exc:  # unreadable (permissions, I/O error): nothing to decide on, nothing to run on
            return Verdict(FAIL, f"an input could not be read: {_os_error(exc)}")
        if not task.outputs:
            return Verdict(RUN, NO_OUTPUTS)
        if not task.cache:
            return Verdict(RUN, NO_CACHE)
        with self._lock:
            self._facts[name] = facts
        if self.force:
            return Verdict(RUN, FORCED)
        if name in self.run_anyway:
            return Verdict(RUN, self.run_anyway[name])
        outputs_now = self.hasher.outputs(self.base(name), task.outputs)
        verdict = decide(facts, outputs_now, self.index.successes(self.task_key(name)), self.cache.has)
        if verdict.action in (UP_TO_DATE, RESTORE) and task.func is not None and verdict.success.value is None:
            return Verdict(RUN, "its return value then was not kept (not plain JSON)")
        return verdict

    def value(self, verdict: Verdict) -> Any:
        """The return value of the success an up-to-date callable stands on."""
        text = verdict.success.value if verdict.success is not None else None
        return None if text is None else json.loads(text)

    def _restore(self, name: str, verdict: Verdict) -> str | None:
        """Put back each output file that is missing or differs; why not, if an entry was damaged (it is removed)."""
        base = self.base(name)
        for entry, files in verdict.restore.items():
            folder = os.path.normpath(os.path.join(base, entry))
            for path, digest in files.items():
                full = os.path.normpath(os.path.join(base, path))
                if self.hasher.file(full) == digest:
                    continue
                if not self.cache.restore(digest, full):
                    return f"the cache entry of output {entry} was damaged (removed)"
            if os.path.isdir(folder):  # files the folder did not hold then
                wanted = {os.path.normpath(os.path.join(base, path)) for path in files}
                for root, _, names in os.walk(folder):
                    for file_name in names:
                        full = os.path.join(root, file_name)
                        if full not in wanted:
                            os.unlink(full)
        return None

    def succeeded(self, name: str, log_path: str | None, value: Any = None) -> str | None:
        """An attempt succeeded: hash its outputs, record the success and keep its files in the content cache.
        Returns why the task fails instead: a declared output it did not make."""
        task = self.dag.tasks[name]
        if not task.outputs:
            return None
        try:
            outputs = self.hasher.outputs(self.base(name), task.outputs)
        except OSError as exc:
            return f"a declared output could not be read: {_os_error(exc)}"
        missing = [entry for entry, files in outputs.items() if files is None]
        if missing:
            return f"declared output {missing[0]} was not made"
        with self._lock:
            self._outputs[name] = outputs
            facts = self._facts.get(name)
        if facts is None or not task.cache:
            return None
        base = self.base(name)
        blobs: dict[str, int] = {}
        kept = kept_value(value) if task.func is not None else "null"
        success = Success(self.run_id, _now(), facts, {k: v or {} for k, v in outputs.items()}, log_path, kept)
        try:
            for files in outputs.values():
                for path, digest in (files or {}).items():
                    size = self.cache.store(os.path.normpath(os.path.join(base, path)), digest)
                    if size is not None:
                        blobs[digest] = size
            self.index.record_success(self.task_key(name), facts_key(facts), success, blobs)
            if blobs:
                self.cache.keep_under_cap(self.limit)
        except (sqlite3.Error, OSError) as exc:  # a full state dir: the task did its work; it runs again next time
            if self.on_note is not None:
                self.on_note(f"{name}: its success could not be recorded ({_os_error(exc)}): it will run next time")
        return None


def _os_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)


def _now() -> float:
    import time

    return time.time()


def plan(
    dag: DagSpec,
    state_dir: Path,
    *,
    force: bool = False,
    run_anyway: Mapping[str, str] | None = None,
    tasks: Iterable[str] | None = None,
) -> dict[str, Verdict]:
    """Every task's verdict, in topological order, without running or restoring anything: a task after one with
    outputs that will run will run too (its dependency's outputs are not known yet)."""
    freshness = Freshness(dag, state_dir, force=force, run_anyway=run_anyway)
    freshness.hasher.keep_globs()  # nothing runs: a glob matches the same files for every task that lists it
    wanted = set(dag.topological_order if tasks is None else tasks)
    verdicts: dict[str, Verdict] = {}
    planned: dict[str, Mapping[str, Any] | None] = {}
    try:
        for name in dag.topological_order:
            if name not in wanted:
                continue
            always = freshness.always_runs(name)
            if always is not None:
                verdicts[name] = Verdict(RUN, always)
                continue
            waiting = next(
                (
                    dep
                    for dep in dag.tasks[name].depends_on
                    if dag.tasks[dep].outputs and verdicts.get(dep, Verdict(RUN, "")).action in (RUN, FAIL)
                ),
                None,
            )
            if waiting is not None:
                verdicts[name] = Verdict(RUN, f"its dependency {waiting} will run")
                continue
            verdict = freshness._verdict(name, lambda dep: planned.get(dep) or freshness._dep_outputs(dep))
            if verdict.action in (UP_TO_DATE, RESTORE):
                planned[name] = verdict.success.outputs
            verdicts[name] = verdict
    finally:
        freshness.close()
    return verdicts
