"""`tuidag run --watch`: after the first run, the run stays; a change to a file in a task's `inputs` runs that task and
everything downstream of it again, as a new generation of the same run (engine/rounds.py).

Changes come from watchfiles (inotify on Linux: no polling, no CPU while nothing changes), gathered until STEP_MS
pass without another (at most DEBOUNCE_MS): an editor's save that writes three times, or two inputs written
together, make one batch and one round, of the union of what each change touches. What is watched: for each
input, the folder it names, or the folder a file or glob is in (recursively), and the DAG file's folder; a change is
kept only when it is one of the inputs (or the DAG file) and not under the state dir. A change to a declared output
of a task never re-runs that task or its ancestors (no loops), nor its descendants (they run after it anyway). A
change to the DAG file reloads it (live_dag.py), and what is watched follows the tasks it now has.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from .model.spec import DagSpec

STEP_MS = 200  # a batch ends after this long without a change ...
DEBOUNCE_MS = 1600  # ... or after this long at most
_GLOB = re.compile(r"[*?\[]")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """An absolute glob as inputs are written (`**` for any depth) as a regex over absolute paths."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            c = pattern[i]
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "[":
                end = pattern.find("]", i + 1)
                if end < 0:
                    out.append(re.escape(c))
                else:
                    out.append(fnmatch.translate(pattern[i : end + 1])[4:-3])
                    i = end
            else:
                out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


class _Entry:
    """One `inputs` or `outputs` entry of a task, as an absolute path or glob."""

    def __init__(self, base: Path, text: str):
        path = os.path.realpath(base / text) if not _GLOB.search(text) else os.path.join(os.path.realpath(base), text)
        self.glob = _glob_regex(path) if _GLOB.search(text) else None
        self.path = path
        literal = path if self.glob is None else path[: _GLOB.search(path).start()]  # type: ignore[union-attr]
        self.root = literal if self.glob is None and os.path.isdir(literal) else os.path.dirname(literal.rstrip("/"))

    def matches(self, changed: str) -> bool:
        if self.glob is not None:
            return self.glob.match(changed) is not None
        return changed == self.path or changed.startswith(self.path + "/")


class WatchPlan:
    """What `--watch` looks at for a DAG: each task's inputs and outputs, the DAG file, the state dir to ignore."""

    def __init__(self, dag: DagSpec, state_dir: Path):
        self.dag = dag
        self.state_dir = os.path.realpath(state_dir)
        self.dag_file = os.path.realpath(dag.source) if dag.source is not None else None
        self.base = os.path.dirname(self.dag_file) if self.dag_file else os.path.realpath(dag.workdir)
        self.inputs: dict[str, list[_Entry]] = {}
        self.outputs: dict[str, list[_Entry]] = {}
        for name, task in dag.tasks.items():
            base = task.workdir or dag.workdir
            if task.inputs:
                self.inputs[name] = [_Entry(base, text) for text in task.inputs]
            if task.outputs:
                self.outputs[name] = [_Entry(base, text) for text in task.outputs]

    def roots(self) -> list[str]:
        """The existing folders to watch, none inside another."""
        wanted = {e.root for entries in self.inputs.values() for e in entries}
        if self.dag_file:
            wanted.add(os.path.dirname(self.dag_file))
        found = sorted(r for r in wanted if os.path.isdir(r))
        return [r for r in found if not any(r.startswith(o.rstrip("/") + "/") for o in found if o != r)]

    def wanted(self, path: str) -> bool:
        """A change worth a look: an input of some task or the DAG file, not under the state dir."""
        if path == self.state_dir or path.startswith(self.state_dir + "/"):
            return False
        if path == self.dag_file:
            return True
        return any(e.matches(path) for entries in self.inputs.values() for e in entries)

    def affected(self, paths: Iterable[str]) -> list[str]:
        """The tasks whose inputs the changed `paths` are, leaving out, for each path, a task that declares it as
        an output, that task's ancestors (no loops) and its descendants (they run after it anyway)."""
        hit: set[str] = set()
        for path in paths:
            writers = {n for n, entries in self.outputs.items() if any(e.matches(path) for e in entries)}
            spared = set(writers)
            todo = list(writers)
            while todo:  # ... and their ancestors
                for dep in self.dag.tasks[todo.pop()].depends_on:
                    if dep not in spared:
                        spared.add(dep)
                        todo.append(dep)
            for writer in writers:  # ... and their descendants, which run again after the writer anyway
                spared.update(self.dag.descendants(writer))
            hit.update(
                n for n, entries in self.inputs.items() if n not in spared and any(e.matches(path) for e in entries)
            )
        return [n for n in self.dag.topological_order if n in hit]

    def shown(self, path: str) -> str:
        return os.path.relpath(path, self.base) if path.startswith(self.base + "/") else path


def trigger_text(names: list[str]) -> str:
    """`src/model.py changed`, `a.py, b.py changed`, `a.py, b.py, c.py and 4 more changed`."""
    head = ", ".join(names[:3])
    return f"{head}{f' and {len(names) - 3} more' if len(names) > 3 else ''} changed"


class InputWatcher:
    """A thread that turns batches of file changes into rounds (`on_change(tasks, trigger)`), until `stop`. A batch
    with the DAG file in it goes to `on_dag_file(other paths)` instead (with it set), which reloads the DAG and
    returns what to watch from then on (None: as before); the watches are set up again when their folders differ."""

    def __init__(
        self,
        plan: WatchPlan,
        on_change: Callable[[list[str], str], object],
        on_dag_file: Callable[[list[str]], WatchPlan | None] | None = None,
    ):
        self.plan = plan
        self.on_change = on_change
        self.on_dag_file = on_dag_file
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: OSError | None = None  # why the watches could not be set up (no inotify watch left)
        self._thread = threading.Thread(target=self._run, name="tuidag-watch", daemon=True)

    def start(self) -> InputWatcher:
        """Start watching; returns once the watches are in place (a change from then on is seen)."""
        self._thread.start()
        self._ready.wait()
        if self.error is not None:
            raise self.error
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        # watchfiles' low-level watcher rather than `watchfiles.watch`: its watches are in place once it is made,
        # which `start` waits for (with `watch` they are set up at the first iteration, on this thread, unannounced).
        from watchfiles.main import RustNotify

        watched: list[str] = []
        while not self._stop.is_set():
            roots = self.plan.roots()
            if not roots:
                self._ready.set()
                self._stop.wait()
                return
            try:
                notify = RustNotify(roots, False, False, 300, True, True)
            except OSError as exc:
                if not watched:  # at the start: `start` raises it
                    self.error = exc
                    self._ready.set()
                    return
                roots = watched  # a reload asked for more watches than are left: those that were set up before
                notify = RustNotify(roots, False, False, 300, True, True)
            watched = roots
            with notify:
                self._ready.set()
                while not self._batch(notify, roots):
                    pass

    def _batch(self, notify, roots: list[str]) -> bool:
        """Wait for one batch of changes and act on it; True when watching must stop or be set up again."""
        # wakes every 5 s when nothing changes (to see a stop asked meanwhile), else after a batch
        raw = notify.watch(DEBOUNCE_MS, STEP_MS, 5000, self._stop)
        if raw == "stop":
            return True
        if not isinstance(raw, set):
            return False
        plan = self.plan
        paths = sorted({path for _change, path in raw if plan.wanted(path)})
        if self.on_dag_file is not None and plan.dag_file in paths:
            reloaded = self.on_dag_file([p for p in paths if p != plan.dag_file])
            if reloaded is not None:
                self.plan = reloaded
                return reloaded.roots() != roots
            return False
        tasks = plan.affected(paths)
        if tasks:
            self.on_change(tasks, trigger_text([plan.shown(p) for p in paths]))
        return False
