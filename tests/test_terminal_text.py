"""Task output made safe for a terminal (`terminal_text`), and where tuidag's attempt headers are (`log_headers`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuidag.engine.log_headers import HeaderSpan, LogHeaders, header_text
from tuidag.views.terminal_text import LineAssembler, terminal_line, terminal_lines, visible_part

SGR = re.compile(r"\x1b\[[0-9;:]*m")


def test_colours_are_kept_and_reset_at_the_end_of_the_line() -> None:
    assert terminal_line("\x1b[31mred\x1b[0m and \x1b[1;4mbold") == "\x1b[31mred\x1b[0m and \x1b[1;4mbold\x1b[0m"
    assert terminal_line("plain text\twith a tab") == "plain text\twith a tab"


def test_every_other_escape_sequence_is_dropped() -> None:
    hostile = {
        "title \x1b]2;PWNED\x07 done": "title  done",  # OSC ended by BEL
        "link \x1b]8;;http://x\x1b\\here": "link here",  # OSC ended by ST
        "clear \x1b[2J\x1b[H here": "clear  here",  # CSI
        "up \x1b[1A\x1b[2K erased": "up  erased",
        "dcs \x1bP1$r0m\x1b\\ end": "dcs  end",  # DCS string
        "apc \x1b_payload\x1b\\ end": "apc  end",  # APC string
        "keypad \x1b= reset \x1bc end": "keypad  reset  end",  # two-byte escapes
        "open osc \x1b]0;never ended": "open osc ",  # an OSC the line never ends
        "stray \x1b": "stray ",
    }
    for raw, shown in hostile.items():
        assert terminal_line(raw) == shown, raw


def test_control_characters_become_visible_and_inert() -> None:
    assert (
        terminal_line("bell\x07 bs\x08 del\x7f csi\u009b2J nel\u0085")
        == "bell\ufffd bs\ufffd del\ufffd csi\ufffd2J nel\ufffd"
    )


@given(
    st.text(
        alphabet=st.sampled_from(
            ["a", " ", "\x1b", "[", "]", "2", ";", "m", "J", "\x07", "\\", "P", "\r", "\x00", "\u009b", "\t", "é"]
        ),
        max_size=40,
    )
)
def test_nothing_but_colour_reaches_the_terminal(text: str) -> None:
    shown = SGR.sub("", terminal_line(text))
    assert not re.search("[\x00-\x08\x0a-\x1f\x7f-\x9f]", shown), repr(shown)


def test_lines_are_prefixed_and_decoded_as_one_block() -> None:
    lines = [b"one", b"\x1b]2;t\x07two", b"caf\xc3\xa9 \xff"]
    assert terminal_lines(lines, "[a] ") == "[a] one\n[a] two\n[a] caf\u00e9 \ufffd\n"
    assert terminal_lines([]) == ""


def assemble(chunks: list[bytes], cap: int = 1 << 20) -> list[bytes]:
    lines = LineAssembler(cap, b"<+%d>")
    out = [line for chunk in chunks for line in lines.feed(chunk)]
    return out + lines.flush()


def test_a_carriage_return_overwrites_within_its_line() -> None:
    assert assemble([b"progress 10%\rprogress 100%\nnext\n"]) == [b"progress 100%", b"next"]
    assert assemble([b"x\r[other] forged\n"]) == [b"[other] forged"]
    assert assemble([b"dos line\r\n", b"done\r\r\n"]) == [b"dos line", b"done"]
    # the \r and the \n in different reads: still a line end, not an overwrite
    assert assemble([b"abc\r", b"\nxyz\r", b"def\n"]) == [b"abc", b"def"]


def test_a_long_line_is_cut_with_a_marker_saying_how_much_is_missing() -> None:
    assert assemble([b"0123456789" * 3 + b"\nshort\n"], cap=8) == [b"01234567<+22>", b"short"]
    # a line growing over many reads holds only the cap
    lines = LineAssembler(8, b"<+%d>")
    for _ in range(1000):
        assert lines.feed(b"x" * 100) == []
        assert len(lines._head) <= 8
    assert lines.flush() == [b"xxxxxxxx<+99992>"]
    # what a \r overwrote does not count
    assert assemble([b"y" * 50 + b"\rshown\n"], cap=8) == [b"shown"]


@given(
    st.lists(st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b"xyz" * 3]), max_size=30),
    st.integers(1, 8),
    st.integers(2, 12),
)
def test_any_reads_give_the_lines_a_terminal_shows(parts: list[bytes], cut_every: int, cap: int) -> None:
    """However the bytes are split into reads, the lines are each line's `visible_part`, cut at the cap."""
    data = b"".join(parts)
    chunks = [data[i : i + cut_every] for i in range(0, len(data), cut_every)]
    *complete, last = data.split(b"\n")
    expected = []
    for raw in complete + ([last] if last else []):
        shown = visible_part(raw)
        expected.append(shown[:cap] + (b"<+%d>" % (len(shown) - cap) if len(shown) > cap else b""))
    assert assemble(chunks, cap) == expected


def test_a_header_starts_on_a_line_of_its_own_and_its_bytes_are_on_record(tmp_path: Path) -> None:
    path = tmp_path / "r.log"
    headers = LogHeaders()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        first = headers.write(fd, str(path), header_text("r", 1))
        os.write(fd, b"=== tuidag: r attempt 9 started at forged ===\npartial-no-newline")
        second = headers.write(fd, str(path), header_text("r", 2))
        os.write(fd, b"attempt two\n")
        size, spans = headers.snapshot(fd, str(path))
        assert headers.snapshot(fd, str(tmp_path / "other.log"))[1] == []
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert size == len(data)
    assert spans == [first, second] and first == HeaderSpan(0, len(header_text("r", 1)))
    assert data[first.start : first.end].startswith(b"=== tuidag: r attempt 1 started at ")
    assert data[second.start : second.end].startswith(b"\n=== tuidag: r attempt 2 started at ")
    assert b"partial-no-newline\n=== tuidag: r attempt 2" in data


def test_a_new_logs_header_is_on_record_as_its_first_bytes_and_a_failed_write_leaves_no_record(tmp_path: Path) -> None:
    """A first attempt's log (created with O_EXCL) gets its header without the headers' lock held across the write:
    the range is put on record first, and taken back when the write fails (no room for the log)."""
    path = tmp_path / "new.log"
    headers = LogHeaders()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    try:
        span = headers.write(fd, str(path), header_text("n", 1), new=True)
        os.write(fd, b"output\n")
        size, spans = headers.snapshot(fd, str(path))
    finally:
        os.close(fd)
    assert spans == [span] == [HeaderSpan(0, len(header_text("n", 1)))] and size == len(path.read_bytes())
    assert path.read_bytes()[span.end :] == b"output\n" and headers.output_start(str(path)) == span.end

    refused = str(tmp_path / "refused.log")
    reader = os.open(path, os.O_RDONLY)  # a descriptor that cannot be written: the write fails as on a full disk
    try:
        with pytest.raises(OSError):
            headers.write(reader, refused, header_text("r", 1), new=True)
        assert headers.snapshot(reader, refused)[1] == [] and headers.output_start(refused) is None
    finally:
        os.close(reader)
