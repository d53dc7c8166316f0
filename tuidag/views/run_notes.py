"""A note on the terminal when a run ends (or its first task fails): a bell and a desktop notification (pure, no
textual), written by the viewers (the terminal UI of `tuidag run` and `tuidag attach`) and the headless reporter.

- When: `--notify` (run, attach), else the DAG's `notify:`, else `end`. `end`: once, when the run ends, whatever
  its outcome; `failure`: once, as soon as a task fails (a run that succeeds stays silent); `never`: nothing.
- Where: only on a terminal, never into a pipe or a file, and never under CI (`CI` set, as GitHub Actions, GitLab,
  CircleCI, Travis, Buildkite... set it): a CI log viewer would show the escape sequence as junk.
- How: a bell (BEL) always: every terminal knows it, and tmux flags the window and passes it on. A desktop
  notification only to a terminal known to show one, told from variables that survive into tmux and ssh -t
  sessions started from it: OSC 777 (`notify;TITLE;BODY`, from urxvt's notify extension) for foot, urxvt, VTE
  terminals (GNOME Terminal, Tilix...) and Ghostty; OSC 9 (a single message) for iTerm2, WezTerm, kitty and Windows
  Terminal. An unknown terminal gets the bell only: a sequence it does not know could print as text. Inside tmux
  the OSC is wrapped in tmux's DCS passthrough (`ESC P tmux; ... ESC \\`, each ESC inside doubled), which tmux hands
  to the outer terminal when `allow-passthrough` is on and drops silently when it is off (tmux swallows a bare OSC
  9/777). Inside GNU screen: the bell only.
- What: the DAG's name, the outcome, the counts and the duration. Every part from a DAG file, a task or the journal
  is cleaned: no escape sequence or control character can end the OSC early and reach the terminal as its own
  sequence, and a title holds no `;` (OSC 777's separator).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TextIO

from ..engine.events import TaskSnapshot
from ..model.spec import NOTIFY_CHOICES
from ..model.state import TaskState
from .terminal_text import strip_ansi

DEFAULT_NOTIFY = "end"
BEL = "\x07"
ESC = "\x1b"
TITLE_LIMIT = 80
BODY_LIMIT = 200
# Anything a terminal acts on rather than prints: C0 (tab and newline too: a notification is one line), DEL, C1 (0x9c
# is ST, which ends an OSC), lone surrogates, and the line and paragraph separators.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]+")
assert DEFAULT_NOTIFY in NOTIFY_CHOICES


def notify_choice(option: str | None, dag_key: str | None) -> str:
    """`--notify` wins over the DAG's `notify:`; neither: `end`."""
    return option or dag_key or DEFAULT_NOTIFY


def in_ci(env: Mapping[str, str]) -> bool:
    """Whether this runs under CI: `CI` set to anything but an empty, `0`, `false` or `no` value."""
    value = env.get("CI")
    return value is not None and value.strip().lower() not in ("", "0", "false", "no")


class Channel(NamedTuple):
    """How a terminal is reached: `osc` is "9", "777" or None (the bell only); `tmux`: wrap the OSC for tmux."""

    osc: str | None
    tmux: bool = False


def channel_for(env: Mapping[str, str]) -> Channel:
    """The notification a terminal shows, told from its environment (see the module's docstring)."""
    term = env.get("TERM", "")
    program = env.get("TERM_PROGRAM", "")
    tmux = bool(env.get("TMUX"))
    if not tmux and (env.get("STY") or term.startswith("screen")):
        return Channel(None)  # GNU screen: it passes no OSC on
    # Ghostty's and the others' own variables survive into tmux, where TERM and TERM_PROGRAM are tmux's
    shows_777 = (
        term.startswith(("foot", "rxvt")),
        term == "xterm-ghostty" or program == "ghostty" or bool(env.get("GHOSTTY_RESOURCES_DIR")),
        bool(env.get("VTE_VERSION")),
    )
    shows_9 = (
        program == "iTerm.app" or bool(env.get("ITERM_SESSION_ID")),
        program == "WezTerm" or bool(env.get("WEZTERM_PANE")),
        term == "xterm-kitty" or bool(env.get("KITTY_WINDOW_ID")),
        bool(env.get("WT_SESSION")),  # Windows Terminal
    )
    osc = "777" if any(shows_777) else "9" if any(shows_9) else None
    return Channel(osc, tmux)


def clean(text: object, limit: int) -> str:
    """`text` as one line of plain text for a notification: escape sequences removed, every other control character
    (a newline too) a space, runs of spaces one, at most `limit` characters (an ellipsis when cut)."""
    text = _UNPRINTABLE.sub(" ", strip_ansi(str(text)))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def note_sequence(title: str, body: str, channel: Channel) -> str:
    """What is written to the terminal for one note: the OSC (if the terminal shows one; wrapped for tmux) and a bell.
    `title` and `body` are cleaned here, whatever the caller did."""
    title, body = clean(title, TITLE_LIMIT), clean(body, BODY_LIMIT)
    if channel.osc == "777":
        osc = f"{ESC}]777;notify;{title.replace(';', ',')};{body}{BEL}"
    elif channel.osc == "9":
        # ConEmu and Windows Terminal read `9;N;...` (N a number) as a command of theirs: the message starts with
        # the title, a name, never a number followed by `;`.
        osc = f"{ESC}]9;{title}: {body}{BEL}"
    else:
        return BEL
    if channel.tmux:
        osc = f"{ESC}Ptmux;" + osc.replace(ESC, ESC + ESC) + f"{ESC}\\"
    return osc + BEL


def outcome_word(counts: Mapping[str, int], interrupted: bool = False) -> str:
    """How the run went, in one word, from state -> count: interrupted, failed, cancelled or succeeded."""
    if interrupted:
        return "interrupted"
    if counts.get(TaskState.FAILED.value) or counts.get(TaskState.SKIPPED.value):
        return "failed"
    if counts.get(TaskState.CANCELLED.value):
        return "cancelled"
    return "succeeded"


def state_counts(snapshots: Iterable[TaskSnapshot]) -> dict[str, int]:
    """state -> how many tasks are in it, as summary.json counts them."""
    counts: dict[str, int] = {}
    for snap in snapshots:
        counts[snap.state.value] = counts.get(snap.state.value, 0) + 1
    return counts


class RunNotes:
    """Which notes a run gets: `task_failed` and `run_ended` answer what to write to the terminal ("" for nothing).
    A failure is noted once (the first); an end each time the run ends (a live UI's re-run ends it again). `channel`
    None: not a terminal (or CI), so never anything."""

    def __init__(self, choice: str, channel: Channel | None):
        self.choice = choice
        self.channel = channel
        self._failure_sent = False

    @classmethod
    def for_stream(cls, choice: str, stream: TextIO | None, env: Mapping[str, str]) -> RunNotes:
        """Notes for a view writing to `stream`: none unless it is a terminal and this is not CI."""
        return cls(choice, channel_for(env) if _is_terminal(stream) and not in_ci(env) else None)

    @property
    def awaits_failure(self) -> bool:
        """Whether a task's failure would be noted now (views skip looking for one otherwise)."""
        return self.channel is not None and self.choice == "failure" and not self._failure_sent

    def task_failed(self, dag: str, task: str, reason: str | None) -> str:
        """A task failed (after its retries): the note when notes are for failures and none went out yet."""
        if self.channel is None or not self.awaits_failure:
            return ""
        self._failure_sent = True
        body = f"{task} failed" + (f": {reason}" if reason else "")
        return note_sequence(f"tuidag: {dag}", body, self.channel)

    def run_ended(self, dag: str, counts: Mapping[str, int], duration: float, interrupted: bool = False) -> str:
        """The run ended: the note when notes are for the end of the run."""
        if self.channel is None or self.choice != "end":
            return ""
        from .headless import recorded_counts_line  # (headless imports this module)

        line = recorded_counts_line(dict(counts), duration).strip().splitlines()[-1]
        return note_sequence(f"tuidag: {dag} {outcome_word(counts, interrupted)}", line, self.channel)


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed
        return False
