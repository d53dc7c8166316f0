"""The run's controls from the UI: cancel a task and what is downstream of it (`c`), cancel every unfinished task
(`C`), re-run a finished one (`r`), pause and resume (`p`). Cancels are confirmed first; every control runs on a
worker thread (cancelling kills process trees, and a viewer's request waits for the engine's answer), and a refusal
or an engine that went away is told, not raised."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.markup import escape

from ..control.client import NotLive, Refused
from ..control.protocol import cancel_reason
from ..engine.scheduler import RerunRefused
from ..model.state import TaskState
from .roles import READ_ONLY
from .screens.confirm import ConfirmScreen
from .state_style import LOOKS

if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object

RERUNNABLE = (TaskState.FAILED, TaskState.CANCELLED, TaskState.SKIPPED)


class RunControls(AppHost):
    """Part of `TuidagApp` (ui/app.py): what the control keys do."""

    def action_cancel_branch(self) -> None:
        name = self.selected_task
        if name is None or not self._may_control():
            return
        self._user_acts()
        if self.folding.is_group(name):
            self._cancel_group(name)
            return
        branch = self.source.branch(name)
        if not branch:
            self.notify(f"{name} and everything downstream of it already finished")
            return
        question = f"Cancel [b]{escape(name)}[/b] and everything downstream of it? {_these(branch)} will stop:"
        cancel = partial(self.source.cancel, name, cancel_reason("cancel", "viewer"))
        self.push_screen(
            ConfirmScreen(question, self._describe(branch), "Running tasks get SIGTERM, then SIGKILL."),
            partial(self._confirmed, cancel),
        )

    def _cancel_group(self, group: str) -> None:
        """`c` on a folded matrix group: every unfinished instance (with what depends on them), asked first."""
        snapshots = self.model.snapshots
        unfinished = [i for i in self.folding.groups[group] if not snapshots[i].state.terminal]
        if not unfinished:
            self.notify(f"every instance of {group} already finished")
            return
        count = "its one unfinished instance" if len(unfinished) == 1 else f"its {len(unfinished)} unfinished instances"
        question = f"Cancel the group [b]{escape(group)}[/b]: {count}, and everything downstream of them?"
        cancel = partial(self.source.cancel, group, cancel_reason("cancel", "viewer"))
        self.push_screen(
            ConfirmScreen(question, self._describe(unfinished), "Running tasks get SIGTERM, then SIGKILL."),
            partial(self._confirmed, cancel),
        )

    def action_cancel_all(self) -> None:
        if not self._may_control():
            return
        unfinished = self._unfinished()
        if not unfinished:
            self.notify("every task already finished")
            return
        question = f"Cancel every unfinished task? {_these(unfinished)} will stop:"
        self.push_screen(
            ConfirmScreen(question, self._describe(unfinished), "Running tasks get SIGTERM, then SIGKILL."),
            partial(self._confirmed, partial(self.source.cancel_all, cancel_reason("cancel_all", "viewer"))),
        )

    def _confirmed(self, control: Callable[[], object], yes: bool | None) -> None:
        self._user_acts()
        if yes:
            self.run_worker(partial(self._control, control), thread=True, group="control", description="cancel")

    def action_rerun(self) -> None:
        if self.read_only:
            self._offer_resume()
            return
        name = self.selected_task
        if name is None or self.model.stopping or not self.run_started:
            return
        self._user_acts()
        if self.folding.is_group(name):
            self._rerun_group(name)
            return
        snap = self.model.snapshots[name]
        if snap.state is TaskState.UNTARGETED:
            self.notify(f"{name} is not a target of this run: start a run with it as a target to run it")
            return
        if snap.state not in RERUNNABLE:
            self.notify(f"{name} is {LOOKS[snap.state].word}: only failed, cancelled or skipped tasks re-run")
            return
        self.run_worker(
            partial(self._control, partial(self.source.rerun, name)), thread=True, group="control", description="rerun"
        )

    def _rerun_group(self, group: str) -> None:
        """`r` on a folded matrix group: its failed, cancelled and skipped instances run again."""
        snapshots = self.model.snapshots
        if not any(snapshots[i].state in RERUNNABLE for i in self.folding.groups[group]):
            self.notify(f"no instance of {group} failed, was cancelled or skipped: nothing to re-run")
            return
        self.run_worker(
            partial(self._control, partial(self.source.rerun, group)), thread=True, group="control", description="rerun"
        )

    def action_pause(self) -> None:
        if self._may_control():
            self.run_worker(
                partial(self._control, self._toggle_pause), thread=True, group="control", description="pause"
            )

    def _toggle_pause(self) -> None:
        if self.source.paused:
            self.source.resume()
        elif not self.source.pause():
            self.call_from_thread(
                self.notify, "the run is finished: nothing left to pause (r re-runs the selected task)"
            )

    def _may_control(self) -> bool:
        if self.read_only:
            self.notify(READ_ONLY, timeout=3)
            return False
        if not self.run_started:
            return False
        if self.model.stopping:
            self.notify("stopping: waiting for every process to exit")
            return False
        return True

    def _unfinished(self) -> list[str]:
        live = [n for n, s in self.model.snapshots.items() if s.state.active]
        return live + [n for n, s in self.model.snapshots.items() if not s.state.terminal and not s.state.active]

    def _describe(self, names: list[str]) -> list[str]:
        return [f"{n}  ({LOOKS[self.model.snapshots[n].state].word})" for n in names]

    def _control(self, control: Callable[[], object]) -> None:
        """Run a control on a worker thread; a refusal (or an engine that went away) is told, not raised."""
        try:
            control()
        except (RerunRefused, Refused, NotLive) as exc:
            try:
                self.call_from_thread(self.notify, str(exc), severity="warning")
            except RuntimeError:  # the app is closing
                pass


def _these(names: list[str]) -> str:
    return "This task" if len(names) == 1 else f"These {len(names)} tasks"
