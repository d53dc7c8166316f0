"""One task's log indexed in place (LogIndex), its search, and the text helpers."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tuidag.views import log_index
from tuidag.views.combined_log import CombinedLog
from tuidag.views.log_index import LogIndex
from tuidag.views.match_count import MatchCount
from tuidag.views.terminal_text import printable, strip_ansi, visible_part


def append(path: Path, data: bytes | str) -> None:
    with open(path, "ab") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def lines_of(source) -> list[str]:
    return [source.line(i) for i in range(source.line_count)]


def reference_lines(data: bytes) -> list[str]:
    """What LogIndex should show for `data`, computed the slow obvious way."""
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    return [visible_part(raw).decode("utf-8", errors="replace") for raw in raw_lines]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "task.log"


# --- LogIndex -----------------------------------------------------------------------------------------------------


def test_lines_and_partial_last_line_grow(log: Path) -> None:
    append(log, "one\n\nthree\npar")
    index = LogIndex(log)
    assert index.refresh() == 4
    assert lines_of(index) == ["one", "", "three", "par"]
    assert index.complete_lines == 3
    append(log, "tial")
    assert index.refresh() == 0
    assert index.line(3) == "partial"
    append(log, "\nfive\n")
    assert index.refresh() == 1
    assert lines_of(index) == ["one", "", "three", "partial", "five"]
    assert index.complete_lines == index.line_count == 5


def test_refresh_reads_only_new_bytes(log: Path) -> None:
    append(log, "a\nb\n")
    index = LogIndex(log)
    index.refresh()
    version = index.version
    assert index.refresh() == 0 and index.version == version  # nothing new: nothing read
    append(log, "c\n")
    assert index.refresh() == 1 and index.size == 6


def test_missing_file_reads_empty_until_it_appears(log: Path) -> None:
    index = LogIndex(log)
    assert index.refresh() == 0 and index.line_count == 0 and index.caught_up
    with pytest.raises(IndexError):
        index.line(0)
    append(log, "hello\n")
    assert index.refresh() == 1 and index.line(0) == "hello"


def test_carriage_returns_overwrite_the_line(log: Path) -> None:
    append(log, "10%\r50%\r100%\nwindows\r\n\x1b[32mok\x1b[0m\rdone\n")
    index = LogIndex(log)
    index.refresh()
    assert lines_of(index) == ["100%", "windows", "done"]
    append(log, "dl 1%\r")
    index.refresh()
    assert index.line(3) == "dl 1%"  # a bar ending in \r keeps showing until overwritten
    append(log, "dl 2%\r")
    index.refresh()
    assert index.line(3) == "dl 2%" and index.line_count == 4


def test_slices_index_like_one_read(log: Path) -> None:
    rng = random.Random(1)
    data = b"".join(b"x" * rng.randrange(0, 300) + rng.choice([b"\n", b"\r", b"\r\n"]) for _ in range(2000))
    log.write_bytes(data)
    whole, sliced = LogIndex(log), LogIndex(log)
    whole.refresh()
    added = 0
    while True:
        added += sliced.refresh(max_bytes=777)
        if sliced.caught_up:
            break
    assert added == sliced.line_count == whole.line_count
    assert lines_of(sliced) == lines_of(whole) == reference_lines(data)


def test_truncation_and_replacement_reindex(log: Path, tmp_path: Path) -> None:
    append(log, "old 1\nold 2\nold 3\n")
    index = LogIndex(log)
    index.refresh()
    log.write_text("new\n")  # truncated in place: smaller than what was indexed
    assert index.refresh() == 1
    assert lines_of(index) == ["new"] and index.generation == 1
    replacement = tmp_path / "next.log"
    replacement.write_text("other 1\nother 2\nother 3\nother 4\n")  # bigger than before: only the inode tells
    os.replace(replacement, log)
    assert index.refresh() == 4
    assert lines_of(index) == ["other 1", "other 2", "other 3", "other 4"] and index.generation == 2


def test_invalid_utf8_and_binary_garbage_do_not_crash(log: Path) -> None:
    rng = random.Random(7)
    garbage = bytes(rng.randrange(256) for _ in range(200_000))
    log.write_bytes(b"caf\xc3\xa9 \xff\xfe ok\n" + garbage)
    index = LogIndex(log)
    index.refresh()
    assert index.line(0) == "café \ufffd\ufffd ok"
    assert lines_of(index) == reference_lines(log.read_bytes())
    for line in lines_of(index):
        shown = printable(line)
        assert not any(ord(c) < 32 and c not in "\t\x1b" for c in shown)
    assert index.search("no such text anywhere", 0) is None


def test_single_5mb_line(log: Path) -> None:
    body = b"y" * (5 << 20)
    log.write_bytes(b"start " + body + b" needle-at-the-end\nafter\n")
    index = LogIndex(log)
    index.refresh()
    assert index.line_count == 2
    assert len(index.line(0)) == 6 + len(body) + 18
    assert index.line(0, max_chars=10) == "start yyyy"
    assert index.search("NEEDLE-at", 0) == 0
    assert index.search("after", 0) == 1
    assert index.search("needle", 1, backwards=True) == 0


def test_long_line_overwritten_by_carriage_return(log: Path) -> None:
    log.write_bytes(b"z" * (3 << 20) + b"\r" + b"w" * (2 << 20) + b"\r\r\n")
    index = LogIndex(log)
    index.refresh()
    assert index.line(0) == "w" * (2 << 20)
    assert index.line(0, max_chars=3) == "www"
    assert index.search("zzz", 0) is None


def test_large_file_indexes_with_bounded_memory(log: Path) -> None:
    line = b"2024-01-01 12:00:00 INFO message number %07d\n"
    log.write_bytes(b"".join(line % i for i in range(200_000)))
    index = LogIndex(log)
    assert index.refresh() == 200_000
    assert index.line(123_456) == "2024-01-01 12:00:00 INFO message number 0123456"
    assert index._starts.itemsize * len(index._starts) < 2 * 8 * 200_000  # offsets only, no text kept


# --- search -------------------------------------------------------------------------------------------------------


def test_search_ignores_case_and_ansi_and_overwritten_text(log: Path) -> None:
    append(log, "alpha\n\x1b[31mFoo\x1b[0mBar\nhidden\rshown\nlast alpha")
    index = LogIndex(log)
    index.refresh()
    assert index.search("foobar", 0) == 1
    assert index.search("ALPHA", 1) == 3
    assert index.search("alpha", 3, backwards=True) == 3  # the start line itself counts
    assert index.search("alpha", 2, backwards=True) == 0
    assert index.search("hidden", 0) is None
    assert index.search("shown", 0) == 2
    assert index.search("31m", 0) is None  # escapes are not text
    assert index.search("", 0) is None


@pytest.mark.parametrize("chunk", [1 << 20, 64, 7])
def test_search_matches_brute_force_across_chunks(log: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(log_index, "CHUNK", chunk)
    rng = random.Random(chunk)
    words = ["apple", "Banana", "cherry", "\x1b[1mAPP\x1b[0mLE", "old\rnew", "date", "\xe9t\xe9"]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randrange(0, 6))) for _ in range(400))
    log.write_text(text)
    index = LogIndex(log)
    index.refresh()
    plain = [strip_ansi(line).lower() for line in lines_of(index)]
    for query in ["apple", "cherry date", "old", "new", "été", "zzz"]:
        for start in [0, 1, 57, 200, len(plain) - 1]:
            forward = next((i for i in range(start, len(plain)) if query in plain[i]), None)
            backward = next((i for i in range(start, -1, -1) if query in plain[i]), None)
            assert index.search(query, start) == forward, (query, start)
            assert index.search(query, start, backwards=True) == backward, (query, start)


def test_search_across_real_chunk_boundaries(log: Path) -> None:
    filler = b"filler line that is long enough to make a few chunks of data\n"
    count = (3 * log_index.CHUNK) // len(filler)
    lines = [filler] * count
    targets = [1, count // 3, count // 3 + 1, 2 * count // 3, count - 1]
    for i in targets:
        lines[i] = b"the TARGET line\n"
    log.write_bytes(b"".join(lines))
    index = LogIndex(log)
    index.refresh()
    found, line = [], 0
    while (line := index.search("target", line)) is not None:
        found.append(line)
        line += 1
    assert found == targets
    found, line = [], count - 1
    while (line := index.search("target", line, backwards=True)) is not None:
        found.append(line)
        line -= 1
    assert found == targets[::-1]


# --- helpers ------------------------------------------------------------------------------------------------------


def test_printable_keeps_colour_only() -> None:
    assert printable("a\x1b[31mred\x1b[0m") == "a\x1b[31mred\x1b[0m"
    assert printable("a\x1b[2Kb\x1b]0;title\x07c\x1b]8;;http://x\x1b\\d") == "abcd"
    assert printable("bell\x07 nul\x00 ff\x0c tab\t esc\x1b") == "bell\ufffd nul\ufffd ff\ufffd tab\t esc"
    assert strip_ansi("\x1b[1;32mok\x1b[0m done") == "ok done"


def test_matching_lines_agree_with_search_slice_by_slice(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_index, "CHUNK", 64)
    rng = random.Random(7)
    words = ["apple", "Banana", "\x1b[1mAPP\x1b[0mLE", "old\rnew", "old\r", "crlf apple\r"]
    log.write_text(
        "\n".join(" ".join(rng.choice(words) for _ in range(rng.randrange(0, 4))) for _ in range(300))
        + "\nunfinished apple"
    )
    index = LogIndex(log)
    index.refresh()
    plain = [strip_ansi(line).lower() for line in lines_of(index)]
    for query in ["apple", "old", "new", "zzz"]:
        found, line, slices = [], 0, 0
        while line < index.complete_lines:
            hits, line = index.matching_lines(query, line, max_bytes=100)
            found += hits
            slices += 1
        assert found == [i for i in range(index.complete_lines) if query in plain[i]], query
        assert slices > 10  # it really went a slice at a time
    assert index.matching_lines("apple", index.complete_lines) == ([], index.complete_lines)


def test_match_count_counts_a_growing_log_in_slices(log: Path) -> None:
    append(log, "".join(("match" if i % 10 == 3 else "other") + f" {i}\n" for i in range(1000)))
    index = LogIndex(log)
    index.refresh()
    count = MatchCount("MATCH")
    slices = 0
    while not count.counted(index):
        count.advance(index, max_bytes=500)
        slices += 1
    assert slices > 5
    assert count.position(index, 3) == (1, 100) and count.position(index, 993) == (100, 100)
    assert count.position(index, 4) == (None, 100)  # not a match
    append(log, "match 1000\nmatch part")
    index.refresh()
    assert not count.counted(index)
    assert count.position(index, 1001) == (None, 101)  # the unfinished line counts; the new one not yet
    count.advance(index, max_bytes=500)
    assert count.counted(index) and count.position(index, 1001) == (102, 102)
    log.write_text("match again\n")  # truncated: a new log
    index.refresh()
    count.advance(index, max_bytes=500)
    assert count.position(index, 0) == (1, 1)


def test_a_log_watches_its_folder_until_the_file_exists(tmp_path: Path) -> None:
    index = LogIndex(tmp_path / "t.log")
    assert index.watched == {tmp_path}
    append(tmp_path / "t.log", "x\n")
    assert index.watched == {tmp_path / "t.log"}


def test_a_slice_boundary_is_not_shown_as_a_line(log: Path) -> None:
    append(log, "".join(f"line {i}\n" for i in range(10_000)))  # more than one 64 KiB share of CombinedLog
    index = LogIndex(log)
    index.refresh(max_bytes=100)  # ends mid-line
    assert not index.caught_up and lines_of(index) == [f"line {i}" for i in range(index.line_count)]
    combined = CombinedLog({"a": log})
    combined.refresh(max_bytes=100)
    assert not combined.caught_up
    assert all(line.startswith("[a] line ") and len(line) >= 10 for line in lines_of(combined))
    assert combined.complete_lines == combined.line_count
