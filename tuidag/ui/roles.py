"""What the view is to its run, and what leaving it does: foreground (the terminal that started the run), attached,
or post-mortem (the run is over, or its engine died: read-only).

- Foreground: `q` asks (stop the run / detach / back, the default: Enter never kills tasks); Ctrl+C and
  SIGINT/SIGTERM/SIGHUP stop the run; `d` detaches.
- Attached: `q` asks (detach, the default / stop the run / back); Ctrl+C and signals only close the view.
- Post-mortem: `q` closes; `r` offers a new run resuming from this one.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.markup import escape

from ..control.remote import ANSWERING, NOT_ANSWERING
from ..model.state import TaskState
from .messages import EngineNews
from .screens.choice import ChoiceScreen
from .screens.confirm import ConfirmScreen

S = TaskState
DETACHED = "detach"  # the app's result when the user left the run running
RESUME = "resume"  # ... when the user asked for a new run resuming from this one
READ_ONLY = "read-only: the run is over"


if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class Roles(AppHost):
    """Part of `TuidagApp` (ui/app.py): the header's role, quitting, detaching, signals, the engine going away."""

    @property
    def read_only(self) -> bool:
        """The post-mortem view: the run is over (or its engine died); nothing can be controlled."""
        return not self.source.live

    def _role(self) -> str:
        """What the header says of this view besides the run: foreground, attached or post-mortem (nothing for a
        frozen scene, which no engine runs)."""
        source = self.source
        if self.read_only:
            return "post-mortem" + (f" · {source.lost}" if source.lost else "") + " · read-only"
        if source.engine_pid is None:
            return ""
        silent = " · not answering" if source.not_answering else ""
        return f"{'foreground' if source.foreground else 'attached'} · engine pid {source.engine_pid}{silent}"

    async def action_quit(self) -> None:
        if not self.run_active:
            self.exit()
            return
        self._ask_viewer_quit()

    def action_interrupt(self) -> None:
        """Ctrl+C: the user wants the run stopped, now. Recorded as SIGINT (exit code 130), like the headless view."""
        if self.run_active:
            self._on_signal(signal.SIGINT)
        else:
            self.exit()

    def _on_signal(self, signum: int) -> None:
        """SIGINT/SIGTERM/SIGHUP: the engine cancels everything (on a worker thread here), then exit. A viewer
        attached to a run it did not start only closes: the run goes on."""
        if self.read_only or not self.source.foreground:
            self.exit(None if self.read_only else DETACHED)
            return
        self._stop(partial(self.source.interrupt, signum))

    def _stop(self, cancel: Callable[[], object]) -> None:
        if not self.run_active:
            self.exit()
            return
        self.model.stopping = True
        self.header.refresh()
        self.run_worker(partial(self._control, cancel), thread=True, group="control", description="stop")

    def action_detach(self) -> None:
        """`d`: close this view and leave the run running in its own process."""
        if self.read_only:
            self.exit()
        else:
            self.exit(DETACHED)

    def _ask_viewer_quit(self) -> None:
        """`q` on a live run of another process. Enter takes the safe answer, never the one that kills tasks: the
        terminal that started the run stays on it (stopping it is `s`); a viewer that attached later detaches."""
        if self.model.stopping:
            self.notify("stopping: waiting for every process to exit")
            return
        # Going back is Esc (any dialog's way out); `c` would read as cancelling tasks, which it is not.
        stop, detach, back = ("stop", "Stop the run", "s"), ("detach", "Detach", "d"), ("back", "Back", "Esc")
        unfinished = len(self._unfinished())
        question = (
            f"Close this view of run [b]{escape(self.source.run.run_id)}[/b]? It is not finished: "
            f"{unfinished} task{'' if unfinished == 1 else 's'} to go."
        )
        note = (
            "Detach: the run goes on in the background (tuidag attach shows it again). Stop: every task is cancelled."
        )
        if self.source.foreground:
            self.push_screen(ChoiceScreen(question, [stop, detach, back], "back", note), self._viewer_quit_chosen)
        else:
            self.push_screen(ChoiceScreen(question, [detach, stop, back], "detach", note), self._viewer_quit_chosen)

    def _viewer_quit_chosen(self, answer: str | None) -> None:
        if answer == "detach":
            self.exit(DETACHED)
        elif answer == "stop" and self.run_active:
            self._stop(self.source.stop)

    def on_engine_gone(self) -> None:
        """The engine ended the run, or died: what the journal recorded is on screen; nothing can be controlled."""
        self._drain()
        self.header.role = self._role()
        self.header.refresh()
        self.footer.refresh()  # the controls that only answer "read-only" leave it
        if self.model.stopping:
            self.exit()
        elif self.source.lost:
            self.notify(
                f"{self.source.lost}: this is the run as its journal recorded it (read-only; r starts a "
                f"new run resuming from it)",
                title="Engine gone",
                severity="error",
                timeout=24 * 3600,
            )

    def on_engine_news(self, news: EngineNews) -> None:
        """The engine stopped answering (SIGSTOP) or answers again; or, dead, its tasks' leftovers were killed."""
        self.header.role = self._role()
        self.header.refresh()
        if news.kind == NOT_ANSWERING:
            self.notify(
                f"{news.detail}: showing what the journal recorded; this view goes on live when it answers",
                title="Not answering",
                severity="warning",
                timeout=10,
                markup=False,
            )
        elif news.kind == ANSWERING:
            self.notify("the engine answers again: this view is live", timeout=5)
        else:
            self.notify(
                f"the run's engine died; this view {news.detail}",
                title="Cleaned up",
                severity="warning",
                timeout=24 * 3600,
                markup=False,
            )

    def _offer_resume(self) -> None:
        """`r` in the post-mortem view: a new run of the same file that reuses what succeeded here."""
        source = self.source.dag.source
        if source is None or not source.is_file():
            self.notify(f"can't resume: the DAG file {source or '(unknown)'} is gone", severity="warning")
            return
        question = (
            f"Start a new run of [b]{escape(str(source))}[/b] resuming from "
            f"[b]{escape(self.source.run.run_id)}[/b]?"
        )  # markup, with what it names escaped
        snapshots = self.model.snapshots
        items = [f"{name}  ({_on_resume(snapshots[name].state)})" for name in self.source.dag.topological_order]
        self.push_screen(
            ConfirmScreen(
                question,
                items,
                "Tasks that succeeded here are reused unless their definition changed; the others run again.",
            ),
            lambda yes: self.exit(RESUME) if yes else None,
        )


def _on_resume(state: TaskState) -> str:
    """What a resumed run (of the same targets) does with a task that ended in `state` here."""
    if state is S.UNTARGETED:
        return "not a target"
    return "reused if unchanged" if state is S.SUCCEEDED else "runs again"
