"""Readiness checks of service tasks (model/service.py's `ReadyCheck`): one probe a call, run by the engine on the
machine the service runs on (the local executor; services are refused on Dask, whose workers are elsewhere).

- `port`: a TCP connection to localhost on that port is accepted.
- `http`: a GET of the URL answers with the expected status (proxies are not used: the service is on this machine).
- `log`: a line the service wrote to its log since this attempt started matches the regular expression.
- `command`: the shell command exits 0 (in the task's workdir and environment).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..model.service import ReadyCheck

if TYPE_CHECKING:
    import urllib.request

# urllib.request (with http.client, email and ssl) and subprocess are imported by the probes that use them: every run
# imports this module, and urllib.request alone took 18 ms of a 90 ms one-task run's start-up.

#: The longest one probe may take: a probe that hangs (a port that never answers) can't hold the check up for long.
PROBE_LIMIT = 5.0
_LOG_CHUNK = 1 << 16


class Probe:
    """Polls one `ReadyCheck` for one attempt: `ready(remaining)` is True once the service is ready. `remaining` is
    the time left before the ready timeout, which bounds each probe."""

    def __init__(
        self,
        check: ReadyCheck,
        *,
        log_path: str,
        log_start: int,
        shell: str,
        workdir: Path,
        env: Mapping[str, str],
    ):
        self.check = check
        self._log_path = log_path
        self._log_at = log_start
        self._partial = b""
        self._pattern = re.compile(check.target) if check.kind == "log" else None
        self._shell = shell
        self._workdir = workdir
        self._env = dict(env)
        self._opener: urllib.request.OpenerDirector | None = None

    def ready(self, remaining: float) -> bool:
        limit = max(0.05, min(PROBE_LIMIT, remaining))
        kind = self.check.kind
        if kind == "port":
            return self._port(int(self.check.target), limit)
        if kind == "http":
            return self._http(limit)
        if kind == "log":
            return self._log()
        return self._command(limit)

    def _port(self, port: int, limit: float) -> bool:
        try:
            with socket.create_connection(("localhost", port), timeout=limit):
                return True
        except OSError:
            return False

    def _http(self, limit: float) -> bool:
        import urllib.error
        import urllib.request

        if self._opener is None:
            self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with self._opener.open(self.check.target, timeout=limit) as reply:
                status = reply.status
        except urllib.error.HTTPError as exc:  # 4xx/5xx: an answer, maybe the one expected
            status = exc.code
        except (OSError, ValueError):  # refused, reset, timed out, a reply that is not HTTP
            return False
        return bool(status == self.check.status)

    def _log(self) -> bool:
        """New complete lines of the log since the last call, matched one by one (the log is the attempt's output
        appended to the task's log file, whose earlier attempts are before `log_start`)."""
        assert self._pattern is not None
        try:
            with open(self._log_path, "rb") as f:
                f.seek(self._log_at)
                data = f.read(_LOG_CHUNK)
        except OSError:
            return False
        self._log_at += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > _LOG_CHUNK:  # a line without end: match what there is, keep no more
            lines.append(self._partial)
            self._partial = b""
        return any(self._pattern.search(line.decode("utf-8", "replace")) for line in lines)

    def _command(self, limit: float) -> bool:
        import subprocess

        try:
            done = subprocess.run(
                [self._shell, "-c", self.check.target],
                cwd=self._workdir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=limit,
                start_new_session=True,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0
