"""How long each task is expected to take, learned from the runs in the state dir.

A task's expected duration is the median of its last successful attempts (`LAST`) in earlier complete runs (that ended
by themselves: succeeded or failed, not cancelled or interrupted) of the same DAG with the same definition (the
fingerprint `--resume` uses: a changed command is a different task), else of its last successful attempts under the
same name whatever their definition, else unknown: the forecast says "no history" rather than guess. An attempt's
duration is from its RUNNING to its SUCCEEDED record (a retry's earlier attempts and delays are not part of it), and
results carried over by `--resume` are not attempts at all.

Cost: the runs are scanned newest first and the scan stops once every task has `LAST` samples of its definition,
or after `MAX_RUNS` runs of the DAG. A run's facts are read once per process (only the lines that move a task to
RUNNING or SUCCEEDED are parsed) and kept while its journal is unchanged; other DAGs' runs are told apart by their
summary.json, which is small, so a state dir shared by many DAGs does not cost a header read per run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from statistics import median
from typing import Any, NamedTuple

from ..model.state import COMPLETE_OUTCOMES
from .history import read_summary
from .journal import open_stored, read_header
from .journal_records import record_problem
from .runs import RunDir, RunStore

LAST = 5
MAX_RUNS = 30


class Expected(NamedTuple):
    seconds: float
    samples: int  # how many attempts the median is of
    same_definition: bool  # False: learned from the task's name only (its definition changed since)


class _RunFacts(NamedTuple):
    stamp: tuple[int, int]  # the journal's (mtime_ns, size) when read
    dag: str
    source: str
    fingerprints: dict[str, str]
    durations: dict[str, list[float]]  # task -> its successful attempts' durations, in the order they ended


_facts: dict[str, _RunFacts] = {}  # journal path -> what it says (see the module's docstring)


def expected_for_run(store: RunStore, header: Mapping[str, Any], exclude: str | None = None) -> dict[str, Expected]:
    """Expected durations for a stored run, from its journal's header (`exclude`: that run's id)."""
    prints = header.get("fingerprints")
    return expected_durations(
        store,
        str(header.get("dag") or ""),
        str(header.get("source") or ""),
        prints if isinstance(prints, dict) else {},
        tasks=header.get("tasks") or (),
        exclude=exclude,
    )


def expected_durations(
    store: RunStore,
    dag: str,
    source: str,
    fingerprints: Mapping[str, str],
    *,
    tasks: Any = (),
    exclude: str | None = None,
    last: int = LAST,
    max_runs: int = MAX_RUNS,
) -> dict[str, Expected]:
    """task -> Expected for the tasks (`fingerprints`' keys, and `tasks`) with history; the others are left out.
    Runs of the same DAG: the same DAG file when `source` is known, else the same DAG name."""
    names = list(dict.fromkeys([*fingerprints, *tasks]))
    same: dict[str, list[float]] = {name: [] for name in names}  # newest first
    named: dict[str, list[float]] = {name: [] for name in names}
    wanting = set(names)
    seen = 0
    for run in reversed(store.runs()):
        if not wanting or seen >= max_runs:
            break
        if run.run_id == exclude or not _complete_run_of(run, dag, source):
            continue
        facts = _read(run)
        if facts is None or not _matches(facts, dag, source):
            continue
        seen += 1
        for name, durations in facts.durations.items():
            if name not in same:
                continue
            newest_first = durations[::-1]
            if fingerprints.get(name) is not None and facts.fingerprints.get(name) == fingerprints[name]:
                same[name].extend(newest_first[: last - len(same[name])])
                if len(same[name]) >= last:
                    wanting.discard(name)
            named[name].extend(newest_first[: last - len(named[name])])
    result = {}
    for name in names:
        if same[name]:
            result[name] = Expected(median(same[name]), len(same[name]), True)
        elif named[name]:
            result[name] = Expected(median(named[name]), len(named[name]), False)
    return result


def seconds(expected: Mapping[str, Expected]) -> dict[str, float]:
    """The plain durations `model.forecast.simulate` takes."""
    return {name: e.seconds for name, e in expected.items()}


def _matches(facts: _RunFacts, dag: str, source: str) -> bool:
    return facts.source == source if source else facts.dag == dag


def _complete_run_of(run: RunDir, dag: str, source: str) -> bool:
    """Whether `run` is a run of this DAG that ran to its end by itself (see `COMPLETE_OUTCOMES`: a run cancelled
    after 0.3 s, or one still going, says nothing of how long tasks take), from its summary: a quick no for other
    DAGs' runs too. A summary is written once, at the end of its run, so what it says is kept for the life of the
    process; a run without one (still running, or died and not reaped yet) is not complete."""
    known = _summaries.get(str(run.summary))
    if known is None:
        summary = read_summary(run) if run.summary.exists() else None
        if summary is None:
            return False
        found = summary.get("source")
        known = _summaries[str(run.summary)] = (
            str(summary.get("dag")),
            found if isinstance(found, str) else "",
            summary.get("outcome") in COMPLETE_OUTCOMES,
        )
    if not known[2]:
        return False
    if source and known[1]:
        return known[1] == source
    return known[0] == dag


_summaries: dict[str, tuple[str, str, bool]] = {}  # summary.json path -> (DAG name, source, complete) it says


_RUNNING = b'"to":"RUNNING"'
_SUCCEEDED = b'"to":"SUCCEEDED"'


def _read(run: RunDir) -> _RunFacts | None:
    """The run's facts, from the cache while its journal is unchanged. Malformed records are skipped (quietly:
    `tuidag logs` and the report say which ones when the run itself is looked at)."""
    path = run.journal
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _facts.get(str(path))
    if cached is not None and cached.stamp == stamp:
        return cached
    header = read_header(path)
    if not header:
        return None
    try:
        with open_stored(path) as f:
            data = f.read()
    except OSError:
        return None
    started: dict[str, tuple[int, float]] = {}  # task -> (attempt, when it started running)
    durations: dict[str, list[float]] = {}
    for line in data.split(b"\n"):
        if _RUNNING not in line and _SUCCEEDED not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if record_problem(rec) or rec.get("type") != "task" or "t" not in rec:
            continue
        name, attempt = rec["task"], rec.get("attempt", 0)
        if rec["to"] == "RUNNING":
            started[name] = (attempt, rec["t"])
        elif rec["to"] == "SUCCEEDED" and not rec.get("reused"):
            begun = started.pop(name, None)
            if begun is not None and begun[0] == attempt and rec["t"] >= begun[1]:
                durations.setdefault(name, []).append(rec["t"] - begun[1])
    prints = header.get("fingerprints")
    facts = _RunFacts(
        stamp,
        str(header.get("dag") or ""),
        str(header.get("source") or ""),
        prints if isinstance(prints, dict) else {},
        durations,
    )
    _facts[str(path)] = facts
    return facts
