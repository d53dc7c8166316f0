"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe), with the stdlib only:
load a page, collect what it logged as errors, evaluate JavaScript in it.

The pipe is the browser's fds 3 (commands in) and 4 (replies and events out), each message JSON ending in NUL.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any

from slowness import patience


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="tuidag-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child, before exec: the pipe ends become fds 3 and 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [
                chromium(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--no-default-browser-check",
                f"--user-data-dir={self._profile.name}",
                "--disable-extensions",
                "--disable-background-networking",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=wire,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
        except (OSError, TimeoutError, RuntimeError):
            pass
        try:
            self.proc.wait(patience(10))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Send a command and return its result (events that arrive meanwhile are kept in `events`)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + patience(self.timeout)
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no reply from chromium")
            data = os.read(self._from_browser, 1 << 16)
            if not data:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += data
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str, init_script: str | None = None, size: tuple[int, int] | None = None) -> None:
        """A new page showing `url`, loaded, with its console and log watched from the start; `init_script` runs
        in it before the page's own scripts; `size` is its viewport in CSS pixels."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.target = target
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        if init_script:
            self.send("Page.addScriptToEvaluateOnNewDocument", {"source": init_script})
        if size:
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False},
            )
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + patience(self.timeout)
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._receive(deadline))

    def close_page(self) -> None:
        """Close the page `open` opened (a tab closed: its websockets close with it)."""
        self.send("Target.closeTarget", {"targetId": self.target}, session=False)
        self.session = None

    def type(self, text: str) -> None:
        """Key presses in the focused element, one per character, as a keyboard sends them."""
        for char in text:
            self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": char, "text": char})
            self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": char})

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (a resource that failed to load) so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + params["exceptionDetails"].get("text", ""))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append("log: " + params["entry"].get("text", ""))
        return found

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("text"))
        return result["result"].get("value")
