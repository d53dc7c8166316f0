"""A viewer's controls of a live run (cancel, re-run, pause, stop, interrupt): requests on its connection to the
engine, each waiting for its own reply, so they are never called on the UI thread. The engine words the reason a
control records, and that it came from a viewer. Part of `RemoteRun` (control/remote.py), which keeps the state
read here.
"""

from __future__ import annotations

from typing import Any

from ..engine.scheduler import RerunRefused
from .client import NotLive, Refused
from .engine_connection import EngineConnection


class RemoteControls(EngineConnection):
    """The controls of `RemoteRun`: `_live`, `not_answering` and `interrupted_by` are its state."""

    _live: bool
    not_answering: str | None
    interrupted_by: str | None

    def cancel(self, name: str, reason: str = "") -> list[str]:
        return self.request("cancel", tasks=[name], origin="viewer")["changed"]

    def cancel_all(self, reason: str = "") -> list[str]:
        return self.request("cancel_all", origin="viewer")["changed"]

    def stop(self) -> list[str]:
        """Cancel every task and end the run (as `tuidag stop` does)."""
        return self.request("stop", origin="viewer")["changed"]

    def rerun(self, name: str) -> list[str]:
        """As Scheduler.rerun: RerunRefused says why not."""
        try:
            return self.request("rerun", tasks=[name])["changed"]
        except Refused as refused:
            raise RerunRefused(str(refused)) from None

    def pause(self) -> bool:
        try:
            self.request("pause")
        except Refused:
            return False
        return True

    def resume(self) -> None:
        self.request("resume")

    def interrupt(self, signum: int) -> None:
        """Stop the run as that signal would stop it (the engine records it, and exits with 128 + N)."""
        import signal

        name = signal.Signals(signum).name
        self.interrupted_by = self.interrupted_by or name
        self.request("interrupt", signal=name)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send `op` and wait for its reply (never call this on the UI thread). Refused when the engine says no,
        NotLive when it is gone."""
        if not self._live:
            raise NotLive("read-only: the run is over")
        if self.not_answering is not None:
            raise NotLive(f"{self.not_answering}: {op} not sent")
        return self._ask(op, fields)
