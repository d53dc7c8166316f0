"""Whether a task needs to run, and why, in the user's terms: the decision alone, from facts gathered elsewhere.

A task that declares `outputs` is up to date when an earlier successful attempt had the same facts (its definition,
the environment tuidag gives it, the OS variables it lists in `env_inputs`, the content of its inputs and of its
dependencies' outputs) and every output is there with the content that attempt left. When the facts match but
outputs are missing or differ, they are restored from the content cache if it holds every file, else the task runs.
Otherwise it runs, and the reason names the first fact that differs from its latest success.

Facts are plain JSON (`{"algorithm", "definition", "env", "os_env", "inputs", "deps"}`, each a mapping of a name to
a short hash), gathered by store/freshness.py when the task is about to start; this module reads no file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .spec import sha1

RUN = "run"
UP_TO_DATE = "up to date"
RESTORE = "restore"
FAIL = "fail"  # an input is missing: the task fails without running

Facts = dict[str, Any]
Outputs = Mapping[str, Mapping[str, str] | None]  # declared output -> its files -> hash (None: not there)

NO_OUTPUTS = "it declares no outputs"
NO_CACHE = "cache: false"
NEVER = "no earlier success with this definition"

#: How each part of the definition is named in a reason.
_DEFINITION_WORDS = {
    "command": "its command",
    "workdir": "its workdir",
    "dependencies": "its dependencies",
    "declared": "its inputs, outputs or env_inputs",
    "all": "its definition",
}


class Verdict(NamedTuple):
    action: str  # RUN, UP_TO_DATE, RESTORE or FAIL
    reason: str  # why, in the user's terms (`input data/train.csv changed (was 1a2b…, now 3c4d…)`)
    run_id: str | None = None  # the run of the earlier success it stands on (up to date, restore)
    restore: Mapping[str, Mapping[str, str]] = {}  # for RESTORE: declared output -> its files -> hash to restore
    success: Any = None  # the earlier success (store.index.Success) it stands on

    def describe(self) -> str:
        """`up to date (run R)`, `restore: output x is missing` or `run: input y changed (...)`."""
        if self.action == UP_TO_DATE:
            return f"up to date (run {self.run_id})"
        return f"{self.action}: {self.reason}"


_ENCODER = json.JSONEncoder(sort_keys=True)  # what json.dumps(sort_keys=True) makes anew on every call


def facts_key(facts: Facts) -> str:
    """One hash of every fact: equal keys, equal facts."""
    return sha1(_ENCODER.encode(facts).encode()).hexdigest()


def short(digest: str | None) -> str:
    return "none" if digest is None else digest[:8] + "…"


def decide(
    facts: Facts,
    outputs_now: Outputs,
    earlier: list[Any],
    in_cache: Callable[[str], bool],
) -> Verdict:
    """The verdict for a task with outputs. `earlier`: its recorded successes (store.index.Success: `facts`,
    `outputs`, `run_id`, `key`: their facts_key, or "" to compute it), newest first; `in_cache(hash)`: whether the
    content cache holds that content."""
    key = facts_key(facts)
    match = next((s for s in earlier if (s.key or facts_key(s.facts)) == key), None)
    if match is None:
        return Verdict(RUN, explain(facts, earlier[0] if earlier else None))
    differing: dict[str, Mapping[str, str]] = {}
    why = []
    for entry, files in match.outputs.items():
        now = outputs_now.get(entry)
        if now == files:
            continue
        differing[entry] = files
        why.append(f"output {entry} {'is missing' if not now else 'changed since then'}")
    if set(outputs_now) - set(match.outputs):  # an output declared since (the facts hold the declarations)
        return Verdict(RUN, "its outputs changed")
    if not differing:
        return Verdict(UP_TO_DATE, f"up to date (run {match.run_id})", match.run_id, success=match)
    missing = [digest for files in differing.values() for digest in files.values() if not in_cache(digest)]
    if missing:
        return Verdict(RUN, f"{why[0]} and the cache does not hold it", match.run_id, success=match)
    return Verdict(RESTORE, f"{why[0]}: restored from the cache", match.run_id, differing, match)


def explain(facts: Facts, latest: Any) -> str:
    """Why `facts` differ from those of the latest success (None: there is none), naming the first difference."""
    if latest is None:
        return NEVER
    old: Facts = latest.facts
    if old.get("algorithm") != facts["algorithm"]:
        return f"file hashes are now made with {facts['algorithm']} (were {old.get('algorithm')})"
    old_def, new_def = old.get("definition", {}), facts["definition"]
    for part, words in _DEFINITION_WORDS.items():
        if old_def.get(part) != new_def.get(part):
            if part == "all" and facts.get("callable"):
                return "its code changed"
            return f"{words} changed"
    for name in sorted({*old.get("env", {}), *facts["env"]}):
        if old.get("env", {}).get(name) != facts["env"].get(name):
            return f"its env {name} changed"
    for name in sorted({*old.get("os_env", {}), *facts["os_env"]}):
        was, now = old.get("os_env", {}).get(name), facts["os_env"].get(name)
        if was != now:
            state = "unset" if now is None else "set" if was is None else "changed"
            return f"environment variable {name} {'was ' + state if state != 'changed' else 'changed'}"
    change = _file_change("input ", old.get("inputs", {}), facts["inputs"])
    if change:
        return change
    old_deps, deps = old.get("deps", {}), facts["deps"]
    for dep in sorted({*old_deps, *deps}):
        change = _file_change("output ", old_deps.get(dep, {}), deps.get(dep, {}), f" of its dependency {dep}")
        if change:
            return change
    return NEVER


def _file_change(what: str, old: Mapping[str, str], new: Mapping[str, str], suffix: str = "") -> str | None:
    for path in sorted({*old, *new}):
        was, now = old.get(path), new.get(path)
        if was == now:
            continue
        if was is None:
            return f"{what}{path}{suffix} is new"
        if now is None:
            return f"{what}{path}{suffix} is gone"
        return f"{what}{path}{suffix} changed (was {short(was)}, now {short(now)})"
    return None
