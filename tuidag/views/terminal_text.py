"""Task output made safe for a terminal, and log bytes cut into display lines in bounded memory (pure, no textual).

A task's output is untrusted: printed raw, `ESC ] 2 ; … BEL` sets the terminal's title, `ESC [ 2 J` clears the screen,
`ESC [ 1 A` moves up over lines already printed, and a `\\r` moves back over the `[task]` prefix so a line can pose as
another task's. Every view that puts task output on a terminal (the headless reporter, `tuidag logs`, the log pane)
goes through here:

- colour (SGR, `ESC [ … m`) is kept; every other escape sequence (CSI, OSC, DCS, SOS, PM, APC, two-byte escapes, a
  stray ESC) is dropped; any other control character (C0 but tab, DEL, C1) becomes U+FFFD, visible but inert;
- a bare `\\r` overwrites the line, as the log pane shows it: only the text after the last one is kept (progress bars
  don't pile up), and a `\\r\\n` ending is an ordinary line end;
- `LineAssembler` cuts a byte stream into such lines holding at most one capped line at a time, so a 200 MB line costs
  the cap, not 200 MB; a cut line ends with a marker that says how much is missing.
"""

from __future__ import annotations

import re

# Any escape sequence: CSI (colours, cursor moves); OSC (titles, hyperlinks), DCS, SOS, PM and APC strings up to BEL,
# ST or the end of the line; two-byte escapes; a stray ESC.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[ -/]*[0-~])?")
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
# Characters a terminal would act on rather than print (tab and ESC excepted), plus the ones `str.splitlines` breaks
# on: left in, they would corrupt the screen or split one log line into several rendered lines.
# Lone surrogates (from a name a hostile journal holds) too: no terminal encoding can write them.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1a\x1c-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# Anything `terminal_line` would change, newlines between lines apart: text without it is printed as it is.
_NEEDS_WORK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_RESET = "\x1b[0m"


def strip_ansi(text: str) -> str:
    """The text a person reads: every escape sequence removed."""
    return _ESCAPE.sub("", text) if "\x1b" in text else text


def printable(text: str) -> str:
    """Text safe to hand to `rich.text.Text.from_ansi`: colour (SGR) escapes only, control characters made visible."""
    if "\x1b" in text:
        text = _ESCAPE.sub(_keep_sgr, text)
    return _CONTROL.sub("\ufffd", text)


def _keep_sgr(match: re.Match[str]) -> str:
    return match.group() if _SGR.fullmatch(match.group()) else ""


def terminal_line(text: object) -> str:
    """One line safe to print on a terminal: `printable` (a newline in it too is made visible, so it cannot start a
    line that poses as tuidag's), and a colour it sets is reset at its end, so it cannot bleed into the next line or
    into tuidag's own output. Every string from a DAG file, the journal or a task (names, reasons, paths, commands)
    goes through here, or through `terminal_lines`, before a terminal sees it."""
    text = str(text)
    if "\n" not in text and not _NEEDS_WORK.search(text):
        return text
    text = printable(text)
    return text + _RESET if "\x1b" in text else text


def terminal_lines(lines: list[bytes], prefix: str = "") -> str:
    """Lines (as `LineAssembler` gives them) decoded, made safe with `terminal_line`, each after `prefix` and ending
    with a newline. Lines that need no change, nearly all of them, are handled as one block."""
    if not lines:
        return ""
    text = b"\n".join(lines).decode("utf-8", "replace")
    if _NEEDS_WORK.search(text):
        text = "\n".join(map(terminal_line, text.split("\n")))
    if prefix:
        text = prefix + text.replace("\n", "\n" + prefix)
    return text + "\n"


def visible_part(raw: bytes) -> bytes:
    """What a terminal would show of one line: the text after its last bare carriage return, without the ending."""
    raw = raw.rstrip(b"\r\n")
    return raw[raw.rfind(b"\r") + 1 :]


class LineAssembler:
    """Cuts a byte stream into display lines (`visible_part` of each), in memory bounded by `cap`.

    `feed` returns the lines that data completed; `flush` the incomplete last one, if any. Of a line's visible part
    only the first `cap` bytes are kept; when more followed, `marker % missing_bytes` is appended to them.
    """

    __slots__ = ("_cr", "_extra", "_head", "_started", "cap", "marker")

    def __init__(self, cap: int, marker: bytes = b" \xe2\x80\xa6 [%d more bytes]") -> None:
        self.cap, self.marker = cap, marker
        self._head = bytearray()  # the visible part so far, at most `cap` bytes
        self._extra = 0  # visible bytes beyond the cap
        self._cr = False  # the data so far ends with `\r`: an overwrite, or a `\r\n` ending
        self._started = False  # bytes of an unfinished line were fed

    def feed(self, data: bytes) -> list[bytes]:
        if not data:
            return []
        if b"\r" in data or self._cr or len(data) > self.cap:
            return self._feed_pieces(data)
        # the common case: no carriage return, so every line but the first is whole in `data` and within the cap
        *lines, last = data.split(b"\n")
        if lines:
            self._add(lines[0])
            lines[0] = self._finish()
        self._add(last)
        return lines

    def flush(self) -> list[bytes]:
        """The incomplete last line (the writer is done with this stream, or a header of tuidag's comes next)."""
        return [self._finish()] if self._started else []

    def _feed_pieces(self, data: bytes) -> list[bytes]:
        lines = []
        *complete, last = data.split(b"\n")
        for piece in complete:
            self._add_overwriting(piece)
            lines.append(self._finish())
        self._add_overwriting(last)
        return lines

    def _add_overwriting(self, piece: bytes) -> None:
        """Add a piece of one line that may hold `\\r`s: text after one replaces the text before it."""
        if not piece:
            return
        self._started = True
        text = piece.rstrip(b"\r")
        if not text:  # only carriage returns: they overwrite if more text follows, else they end the line
            self._cr = True
            return
        cr = text.rfind(b"\r")
        if self._cr or cr != -1:
            self._head.clear()
            self._extra = 0
        self._cr = len(text) < len(piece)
        self._add(text[cr + 1 :])

    def _add(self, text: bytes) -> None:
        if not text:
            return
        self._started = True
        room = self.cap - len(self._head)
        if len(text) <= room:
            self._head += text
        else:
            self._head += text[: max(room, 0)]
            self._extra += len(text) - max(room, 0)

    def skip(self, count: int) -> None:
        """`count` bytes of the current line were jumped over, not fed (a reader that looked at its start and its
        end only): they count as cut."""
        if count > 0:
            self._started = True
            self._extra += count

    def _finish(self) -> bytes:
        line = bytes(self._head)
        if self._extra:
            line += self.marker % self._extra
        self._head.clear()
        self._extra, self._cr, self._started = 0, False, False
        return line
