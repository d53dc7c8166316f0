"""The terminal UI on a run that lives in its own process (its engine): what `tuidag run` (the foreground viewer),
`tuidag attach` and `tuidag show` open.

- Foreground (the terminal that started the run): `q` asks (stop the run / detach / back, the default: Enter
  never kills tasks), Ctrl+C and SIGINT/SIGTERM/SIGHUP stop the run, and the viewer
  exits with the run's exit code once it ended, printing the run's closing lines. `d` detaches: the viewer exits 0
  at once and the run goes on.
- Attached: `q` asks (detach, the default / stop the run / back); Ctrl+C and signals only close the viewer.
- Post-mortem (the run is over, or its engine died while viewed): the run as its journal recorded it, read-only;
  `r` starts a new run resuming from it (`tuidag run SOURCE --resume RUN_ID`), exec'd once the app has exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from ..control.client import NotLive
from ..control.remote import RemoteRun
from ..control.run_record import journal_snapshots, process_alive
from ..exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, SIGNAL_EXIT
from ..store.history import summary_problem
from ..store.journal import replay
from ..store.runs import RunDir, RunStore, run_command
from ..views.headless import counts_line, recorded_counts_line
from ..views.run_notes import RunNotes, notify_choice, state_counts
from ..views.terminal_text import terminal_line
from .app import TuidagApp
from .roles import DETACHED, RESUME
from .terminal import in_browser, viewer_driver

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CONNECT_WAIT = 3.0  # a run just started may not serve its socket yet
SUMMARY_WAIT = 30.0  # after the run's last task, the engine writes summary.json (a stopping run waits for kills)


def run_viewer(
    run: RunDir,
    *,
    foreground: bool,
    engine_pid: int | None,
    exit_on_finish: bool = False,
    early_signals: list[int] | None = None,
    notify: str | None = None,
) -> int:
    """View `run` until the user leaves; return the exit code of the command (the run's, for the foreground view).
    `early_signals` came before the viewer was called (while the engine was starting): they are passed on too.
    `notify` (--notify, else the DAG's `notify:`): when the terminal gets a note (views/run_notes)."""
    store = RunStore(run.path.parent.parent)
    signals = _OutsideTheApp(foreground)
    signals.received.extend(early_signals or ())
    try:
        remote = _open(run, store, foreground, engine_pid)
    except NotLive as exc:
        print(f"tuidag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    signals.remote = remote
    notes = RunNotes.for_stream(notify_choice(notify, remote.dag.notify), sys.__stdout__, os.environ)
    if foreground and not remote.live:  # the run ended before its viewer reached it: it ended all the same
        _say(
            notes.run_ended(
                remote.dag.name, state_counts(remote.snapshot().values()), max(0.0, remote.ended_at - remote.started)
            )
        )
    if signals.received and not foreground:
        remote.close()  # an attached viewer asked to close before it opened
        return EXIT_OK
    if not (exit_on_finish and not remote.live):
        app = TuidagApp(
            remote,
            exit_on_finish=exit_on_finish,
            signals=SIGNALS,
            driver_class=viewer_driver(),
            early_signals=signals.received,
        )
        app.run_notes = notes
        try:
            result = app.run()
        finally:
            signals.install()  # the app's loop put the default handlers back
            if foreground and remote.live and app.return_value != DETACHED:
                _stop_quietly(remote)  # the app ended some other way (an error): the run must not outlive it
            remote.close()
        if result == DETACHED:
            return _detached(run, store, remote)
        if result == RESUME:
            return _resume(run, store, remote)  # in a terminal, returns only when it could not start
    if not foreground:
        return EXIT_OK
    return _closing_lines(run, remote, engine_pid)


class _OutsideTheApp:
    """Signals while the app is not running (connecting, building it, waiting for the run's summary): a foreground
    viewer passes each on to the engine, as the app does (a second one makes the engine kill every task at once); an
    attached viewer only notes it, and closes. Never a traceback."""

    def __init__(self, foreground: bool):
        self.foreground = foreground
        self.remote: RemoteRun | None = None
        self.received: list[int] = []
        self.install()

    def install(self) -> None:
        for signum in SIGNALS:
            signal.signal(signum, self._received)

    def _received(self, signum: int, _frame) -> None:
        self.received.append(signum)
        remote = self.remote
        if self.foreground and remote is not None and remote.live:
            if remote.interrupted_by is None:  # the app, if it opens now, opens on a stopping run (and stops no more)
                remote.interrupted_by = signal.Signals(signum).name
            threading.Thread(target=_quietly, args=(remote.interrupt, signum), daemon=True).start()

    @property
    def remote(self) -> RemoteRun | None:
        return self._remote

    @remote.setter
    def remote(self, remote: RemoteRun | None) -> None:
        """Signals received before the run was reached are passed on now (the app then opens on a stopping run)."""
        self._remote = remote
        if remote is not None and self.foreground and self.received and remote.live:
            remote.interrupted_by = signal.Signals(self.received[0]).name  # seen by the app before the reply
            threading.Thread(target=_quietly, args=(remote.interrupt, self.received[0]), daemon=True).start()


def _quietly(control, *args) -> None:
    try:
        control(*args)
    except Exception:  # the engine is gone already: nothing left to stop
        pass


def _open(run: RunDir, store: RunStore, foreground: bool, engine_pid: int | None) -> RemoteRun:
    """The live run, or its record when it is over (a foreground run may be over before its viewer connects)."""
    deadline = time.monotonic() + (CONNECT_WAIT if foreground else 0)
    while True:
        try:
            return RemoteRun.attach(run, store, foreground=foreground, engine_pid=engine_pid)
        except NotLive:
            if run.read_summary() is not None or time.monotonic() > deadline or not _alive(engine_pid):
                return RemoteRun.stored(run, store)
        time.sleep(0.05)


def _alive(pid: int | None) -> bool:
    return pid is not None and process_alive(pid)


def _stop_quietly(remote: RemoteRun) -> None:
    _quietly(remote.stop)


def _detached(run: RunDir, store: RunStore, remote: RemoteRun) -> int:
    pid = f" (engine pid {remote.engine_pid})" if remote.engine_pid else ""
    _say(
        f"tuidag: run {run.run_id} goes on in the background{pid}\n"
        f"tuidag: to see it again: {run_command('attach', run.run_id, store.state_dir)}\n"
    )
    return EXIT_OK


def _resume(run: RunDir, store: RunStore, remote: RemoteRun) -> int:
    """Replace this process with `tuidag run SOURCE [TARGET...] [OPTION...] --resume RUN_ID` in the same state dir: a
    run of the same targets with the same options (`--env`, `-j`, the executor, ...); in a browser tab, start it
    detached."""
    source = remote.dag.source
    if source is None or not source.is_file():
        shown = terminal_line(source or "(unknown)")  # the journal's text
        print(f"tuidag: error: can't resume {run.run_id}: its DAG file {shown} is gone", file=sys.stderr)
        return EXIT_USAGE
    argv = [
        sys.executable,
        "-m",
        "tuidag",
        "run",
        str(source),
        *remote.targets,
        *remote.options,
        "--resume",
        run.run_id,
        "--state-dir",
        str(store.state_dir),
    ]
    sys.stdout.flush()
    if in_browser():
        return _resume_detached(argv)
    os.execv(sys.executable, argv)


#: What textual-serve sets for the viewer it starts, none of it meant for a run's tasks.
WEB_VIEWER_ENV = (
    "TEXTUAL_DRIVER",
    "TEXTUAL_FPS",
    "TEXTUAL_COLOR_SYSTEM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "COLUMNS",
    "ROWS",
)


def _resume_detached(argv: list[str]) -> int:
    """In a browser tab (`tuidag serve`) the new run starts detached (`-d`): a tab is no terminal a run could belong
    to, and closing it, or stopping the server, must not stop the run. The tab's session ends (`tuidag serve` serves
    the new run); what `-d` printed goes to the server's output."""
    env = {key: value for key, value in os.environ.items() if key not in WEB_VIEWER_ENV}
    started = subprocess.run([*argv, "-d"], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env)
    for line in (started.stdout + started.stderr).splitlines():
        print(terminal_line(line), file=sys.stderr)
    return started.returncode


def _closing_lines(run: RunDir, remote: RemoteRun, engine_pid: int | None) -> int:
    """What the foreground run printed when it ended, and its exit code (from summary.json)."""
    deadline = time.monotonic() + SUMMARY_WAIT
    summary = run.read_summary()
    while summary is None and time.monotonic() < deadline and _alive(remote.engine_pid or engine_pid):
        time.sleep(0.05)
        summary = run.read_summary()
    if summary is None:
        summary = run.read_summary()
    if summary is not None and summary_problem(summary) is not None:
        summary = None  # not one tuidag wrote: the journal is all there is
    duration = (
        summary["duration"]
        if summary and type(summary.get("duration")) in (int, float)
        else max(0.0, remote.ended_at - remote.started)
    )
    if summary is not None:  # how every task ended, also where the journal stopped early (a full disk)
        counts = recorded_counts_line(summary["counts"], duration)
    else:
        counts = counts_line(journal_snapshots(run, remote.dag.topological_order), duration)
    lines = [f"tuidag: run {run.run_id} of {remote.dag.name}: " + counts]
    forced = replay(run.journal).forced_by if summary is None else None
    if forced is not None:  # a second Ctrl+C: the engine killed every process of the run and exited at once
        lines.append(f"tuidag: interrupted by {forced} twice: every process of the run was killed at once\n")
    elif summary is None:
        lines.append(
            f"tuidag: error: {remote.lost or 'the engine ended'} before recording the run's outcome; "
            f"`tuidag runs` reaps what its tasks left\n"
        )
    elif remote.reaped is not None:  # the summary is the one this viewer wrote as it cleaned up after the engine
        lines.append(
            f"tuidag: error: {remote.lost or 'the engine died'} before recording the run's outcome; "
            f"this view {remote.reaped}\n"
        )
    interrupted = summary.get("interrupted_by") if summary and remote.reaped is None else None
    if type(interrupted) is str:
        lines.append(f"tuidag: interrupted by {interrupted}; every task was stopped\n")
    if remote.store_message:
        lines.append(remote.store_message + "\n")
    outcome = summary.get("outcome") if summary else None
    if summary is not None and type(outcome) is str and outcome.startswith("incomplete: "):
        cause = summary.get("journal_error")
        lines.append(
            f"tuidag: run {outcome}"
            + (f" ({cause})" if type(cause) is str else "")
            + ": its journal stopped early, its summary holds how the tasks ended\n"
        )
    lines.extend(hook_lines(summary, run))
    lines.append(f"tuidag: logs in {run.logs}\n")
    _say("".join(lines))
    if forced is not None:
        return SIGNAL_EXIT[signal.Signals[forced]]
    if summary is None:
        return EXIT_FAILED
    code = summary.get("exit_code")
    if type(code) is int:
        return code
    if type(interrupted) is str and interrupted in signal.Signals.__members__:
        return SIGNAL_EXIT[signal.Signals[interrupted]]
    return EXIT_FAILED


def hook_lines(summary: dict | None, run: RunDir) -> list[str]:
    """A line for each run hook (`on_end:`, `on_run_failure:`) that failed, as the summary recorded it."""
    hooks = summary.get("hooks") if summary else None
    if type(hooks) is not list:
        return []
    return [
        f"tuidag: warning: {terminal_line(str(hook.get('hook')))} hook {terminal_line(hook['problem'])} "
        f"(its output is in {run.path / 'hooks.log'})\n"
        for hook in hooks
        if type(hook) is dict and type(hook.get("problem")) is str
    ]


def _say(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError:  # the terminal is gone (SIGHUP): the exit code still tells
        pass
