"""`tuidag serve` as a user runs it, and its page in a real headless Chromium (tests/browser.py): read what the
terminal in the page shows, press keys in it.

textual-serve's page draws the app with xterm.js on a canvas, so the screen's text is in no DOM node. The page's
script keeps its xterm `Terminal` in a property `terminal` of an object of its own: a setter on Object.prototype,
installed before the page's scripts run, catches that assignment and keeps the terminal in `window.__terminal`, whose
buffer then gives the screen's lines (`translateToString`), as a screen reader would get them.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from browser import Browser
from slowness import patience

REPO = Path(__file__).resolve().parent.parent

CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, 'terminal', {
  configurable: true,
  set(value) {
    window.__terminal = value;
    Object.defineProperty(this, 'terminal', {value, writable: true, configurable: true, enumerable: true});
  },
});
"""
SCREEN = """(() => {
  const t = window.__terminal;
  if (!t) return null;
  const lines = [];
  for (let y = 0; y < t.rows; y++) {
    const line = t.buffer.active.getLine(y);
    lines.push(line ? line.translateToString(true) : '');
  }
  return lines.join('\\n');
})()"""


class Served:
    """`tuidag serve ARGS` in `workdir` (--port 0: any free port): its URL, read from what it printed."""

    def __init__(self, workdir: Path, *args: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuidag", "serve", "--port", "0", *args],
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            start_new_session=True,  # its own process group, as in a terminal: `stop` sends what Ctrl+C sends
        )
        self.out = ""
        deadline = time.monotonic() + patience(20)
        while "Ctrl+C stops serving" not in self.out:
            left = deadline - time.monotonic()
            if self.proc.poll() is not None or left <= 0:
                raise AssertionError(f"tuidag serve did not start: {self.out}{self.stop()[1]}")
            if select.select([self.proc.stdout], [], [], left)[0]:
                self.out += os.read(self.proc.stdout.fileno(), 1 << 16).decode()
        self.url = re.search(r"https?://\S+", self.out).group()
        self.base = self.url.split("/?token=")[0]
        port = psutil.Process(self.proc.pid).net_connections("tcp")[0].laddr.port
        self.direct = f"http://127.0.0.1:{port}"  # where it listens (behind a proxy, not its URL)

    def viewers(self) -> list[psutil.Process]:
        """Its viewer processes (each tab's `tuidag attach`), with what they started."""
        try:
            return [p for p in psutil.Process(self.proc.pid).children(recursive=True) if p.status() != "zombie"]
        except psutil.Error:
            return []

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        """`signum` sent to its process group (SIGINT: Ctrl+C in its terminal); its exit code and what it wrote to
        stderr."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signum)
        try:
            _, err = self.proc.communicate(timeout=patience(20))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err.decode()


def open_tab(browser: Browser, url: str, size: tuple[int, int] = (1400, 900)) -> None:
    browser.open(url, init_script=CATCH_TERMINAL, size=size)


def screen(browser: Browser) -> str:
    return browser.evaluate(SCREEN) or ""


def wait_for_text(browser: Browser, text: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + patience(timeout)
    while True:
        shown = screen(browser)
        if text in shown:
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not in the browser's terminal before the deadline; it shows:\n{shown}")
        time.sleep(0.05)


def press(browser: Browser, keys: str) -> None:
    """Keys typed into the page's terminal, as a keyboard would (it has the focus first)."""
    browser.evaluate("window.__terminal.focus()")
    browser.type(keys)


def press_escape(browser: Browser) -> None:
    browser.evaluate("window.__terminal.focus()")
    for kind in ("keyDown", "keyUp"):
        browser.send(
            "Input.dispatchKeyEvent", {"type": kind, "key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27}
        )


def resize(browser: Browser, columns: int, rows: int) -> None:
    """The page's terminal made `columns` x `rows` cells (xterm tells the app, as a resized window does)."""
    browser.evaluate(f"window.__terminal.resize({columns}, {rows})")
