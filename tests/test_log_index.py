"""The textual-free log reading core: LogIndex, CombinedLog, LogWatcher and the text helpers."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuidag.views import log_index
from tuidag.views.log_index import CombinedLog, LogIndex, LogWatcher
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


# --- CombinedLog --------------------------------------------------------------------------------------------------

def test_combined_interleaves_and_prefixes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    append(a, "=== tuidag: a attempt 1 started at 12:00:00 ===\na1\n")
    combined = CombinedLog({"a": a})
    combined.add("b", b)  # not created yet
    assert combined.refresh() == 2
    append(a, "a2\n")
    combined.refresh()  # each refresh sees one log's new lines: their order is the order they arrived in
    append(b, "b1\nb2")
    combined.refresh()
    assert lines_of(combined) == ["[a] === tuidag: a attempt 1 started at 12:00:00 ===", "[a] a1", "[a] a2", "[b] b1",
                                  "[b] b2"]
    assert combined.complete_lines == 4  # "[b] b2" is still being written
    append(b, "+\rb2 done\n")
    append(a, "progress 1%\r")
    combined.refresh()
    assert lines_of(combined)[4:] == ["[b] b2 done", "[a] progress 1%"]
    assert combined.watched == {tmp_path}


def test_combined_is_bounded(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    append(a, "".join(f"line {i}\n" for i in range(25)))
    combined = CombinedLog({"a": a}, max_lines=10)
    assert combined.refresh() == 25
    assert combined.line_count == 10 and combined.dropped == 15
    assert combined.line(0) == "[a] line 15" and combined.line(9) == "[a] line 24"
    long_lines = CombinedLog({"a": a}, max_chars=40, max_line_chars=6)
    long_lines.refresh()
    assert long_lines.line(long_lines.line_count - 1) == "[a] line 2"  # "line 24" cut to 6 characters
    assert sum(len(line) for line in lines_of(long_lines)) <= 40


def test_combined_bounds_an_endless_unterminated_line(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    combined = CombinedLog({"a": a}, max_line_chars=100)
    for i in range(50):
        append(a, f"progress {i:3d}% " + "#" * 40 + "\r")
        combined.refresh()
    assert combined.line_count == 1 and combined.line(0).startswith("[a] progress  49%")
    append(a, "z" * 1000)
    combined.refresh()
    assert len(combined._tails["a"].pending) <= 400


def test_combined_refresh_in_slices_and_truncation(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    append(a, "".join(f"a{i}\n" for i in range(50_000)))
    append(b, "".join(f"b{i}\n" for i in range(50_000)))
    combined = CombinedLog({"a": a, "b": b})
    rounds = 0
    while True:
        combined.refresh(max_bytes=1 << 16)
        rounds += 1
        if combined.caught_up:
            break
    assert rounds > 2 and combined.line_count == 100_000
    a.write_text("again\n")  # a retried task starting its log over
    combined.refresh()
    assert combined.line(combined.line_count - 1) == "[a] again"


def written(path: Path, lines: list[str], at: float) -> Path:
    """A log holding `lines`, last modified at `at` (wall clock)."""
    append(path, "".join(f"{line}\n" for line in lines))
    os.utime(path, (at, at))
    return path


def test_combined_orders_a_backlog_by_when_it_was_written_not_by_file(tmp_path: Path) -> None:
    """Opened late: a task that finished before another started comes first, whatever order they were added in."""
    export = written(tmp_path / "export.log", ["export 1", "error: disk quota exceeded"], at=1_000_106.0)
    tokenize = written(tmp_path / "tokenize.log", [f"tokenize line {i}" for i in range(3)], at=1_000_090.0)
    combined = CombinedLog()
    combined.add("export", export, started=1_000_105.0)
    combined.add("tokenize", tokenize, started=1_000_080.0)
    combined.refresh()
    assert lines_of(combined) == ["[tokenize] tokenize line 0", "[tokenize] tokenize line 1",
                                  "[tokenize] tokenize line 2", "[export] export 1",
                                  "[export] error: disk quota exceeded"]


def test_combined_interleaves_tasks_that_ran_at_the_same_time(tmp_path: Path) -> None:
    """Lines of a backlog are spread evenly between the task's start and its file's last change: a short task that
    ran in the middle of a long one lands in the middle of it."""
    long = written(tmp_path / "long.log", [f"l{i}" for i in range(10)], at=1_000_110.0)  # l<i> at 101 + i
    short = written(tmp_path / "short.log", ["s0", "s1"], at=1_000_106.4)  # s0 at 105.7, s1 at 106.4
    combined = CombinedLog()
    combined.add("long", long, started=1_000_100.0)
    combined.add("short", short, started=1_000_105.0)
    combined.refresh()
    assert [line.split("] ")[1] for line in lines_of(combined)] == [
        "l0", "l1", "l2", "l3", "l4", "s0", "l5", "s1", "l6", "l7", "l8", "l9"]


def test_combined_catching_up_in_slices_gives_the_same_order(tmp_path: Path) -> None:
    """A backlog read a slice per tick: lines wait until no unread part of another log can precede them."""
    def make(folder: Path) -> CombinedLog:
        folder.mkdir()
        a = written(folder / "a.log", [f"a{i:05d}" for i in range(40_000)], at=1_000_200.0)
        b = written(folder / "b.log", [f"b{i:05d}" for i in range(40_000)], at=1_000_160.0)
        combined = CombinedLog()
        combined.add("a", a, started=1_000_100.0)
        combined.add("b", b, started=1_000_150.0)
        return combined

    whole = make(tmp_path / "whole")
    whole.refresh()
    sliced = make(tmp_path / "sliced")
    rounds = 0
    while True:
        sliced.refresh(max_bytes=1 << 16)
        rounds += 1
        if sliced.caught_up:
            break
    assert rounds > 2
    assert lines_of(sliced) == lines_of(whole)
    first_b = lines_of(whole).index("[b] b00000")
    assert lines_of(whole)[first_b - 1].startswith("[a] a1")  # b's 10 s sit within a's 100 s, after half of it


def test_combined_bounds_a_backlog_larger_than_the_ring(tmp_path: Path) -> None:
    a = written(tmp_path / "a.log", [f"a{i}" for i in range(100)], at=1_000_200.0)
    b = written(tmp_path / "b.log", [f"b{i}" for i in range(100)], at=1_000_200.0)
    combined = CombinedLog(max_lines=10)
    combined.add("a", a, started=1_000_100.0)
    combined.add("b", b, started=1_000_100.0)
    combined.refresh(max_bytes=1 << 16)
    assert combined.line_count == 10 and combined.dropped == 190
    assert lines_of(combined)[-2:] == ["[a] a99", "[b] b99"]


def test_combined_prefixes_in_the_task_colour(tmp_path: Path) -> None:
    a = written(tmp_path / "a.log", ["hello"], at=1_000_100.0)
    combined = CombinedLog()
    combined.add("a", a, colour=32)
    combined.refresh()
    assert combined.line(0) == "\x1b[32m[a]\x1b[0m hello"
    assert combined.search("[a] hello", 0) == 0


def test_combined_search(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    append(a, "compile ok\n\x1b[31mERROR\x1b[0m: boom\n")
    append(b, "test ok\nerror again")
    combined = CombinedLog({"a": a, "b": b})
    combined.refresh()
    assert combined.search("error", 0) == 1
    assert combined.search("error", 2) == 3
    assert combined.search("ok", 3, backwards=True) == 2
    assert combined.search("[b]", 0) == 2
    assert combined.search("missing", 0) is None


def test_combined_shows_only_the_chosen_tasks_in_the_same_order(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    combined = CombinedLog({"a": a, "b": b, "c": c})
    for path, text in [(a, "a1\n"), (b, "b1\n"), (c, "c1\n"), (a, "a2\n"), (b, "b2\nb3 unfinished"), (c, "c2")]:
        append(path, text)
        combined.refresh()  # one log's new lines per refresh: the order is the order of arrival
    everything = lines_of(combined)
    generation = combined.generation
    for path in (a, b, c):
        path.unlink()  # filtering must not read the files again
    combined.show_only(["a", "b"])
    assert lines_of(combined) == ["[a] a1", "[b] b1", "[a] a2", "[b] b2", "[b] b3 unfinished"]
    assert combined.complete_lines == 4 and combined.shown_tasks == {"a", "b"}
    assert combined.generation == generation + 1 and combined.dropped == 0  # renumbered from 0
    assert combined.search("b2", 0) == 3 and combined.search("c1", 0) is None
    combined.add("d", tmp_path / "d.log")  # a task added later is shown if the filter names it
    combined.show_only(["c", "d"])
    append(tmp_path / "d.log", "d1\n")
    combined.refresh()
    append(b, "b4\n")
    combined.refresh()
    assert lines_of(combined) == ["[c] c1", "[d] d1", "[c] c2"]  # c2: c's unfinished line, as before
    combined.show_only(None)
    assert lines_of(combined) == everything[:-2] + ["[d] d1", "[b] b4", "[c] c2"]  # all back, in order


def test_a_filtered_combined_log_drops_only_its_own_lines_from_the_front(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    combined = CombinedLog({"a": a, "b": b}, max_lines=6)
    combined.show_only(["b"])
    for i in range(10):
        append(a if i % 3 else b, f"{'a' if i % 3 else 'b'}{i}\n")
        combined.refresh()
    # the ring holds the last 6 lines of all (i = 4..9): of b's lines (i = 0, 3, 6, 9) only 6 and 9 are left
    assert lines_of(combined) == ["[b] b6", "[b] b9"] and combined.dropped == 2
    combined.show_only(None)
    assert lines_of(combined) == ["[a] a4", "[a] a5", "[b] b6", "[a] a7", "[a] a8", "[b] b9"]


def test_matching_lines_agree_with_search_slice_by_slice(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_index, "CHUNK", 64)
    rng = random.Random(7)
    words = ["apple", "Banana", "\x1b[1mAPP\x1b[0mLE", "old\rnew", "old\r", "crlf apple\r"]
    log.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randrange(0, 4))) for _ in range(300))
                   + "\nunfinished apple")
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


def test_match_count_follows_a_combined_log_losing_lines_and_changing_filter(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    combined = CombinedLog({"a": a, "b": b}, max_lines=10)
    append(a, "".join(f"hit a{i}\n" for i in range(4)))
    combined.refresh()
    append(b, "".join(f"hit b{i}\n" for i in range(4)))
    combined.refresh()
    count = MatchCount("hit")
    count.advance(combined, max_bytes=1 << 20)
    assert count.position(combined, 5) == (6, 8)
    append(a, "".join(f"miss {i}\n" for i in range(5)))  # pushes 3 hits off the front
    combined.refresh()
    count.advance(combined, max_bytes=1 << 20)
    assert combined.dropped == 3 and count.position(combined, 2) == (3, 5)  # "[b] hit b0"
    combined.show_only(["b"])
    assert count.position(combined, 0) == (None, 0)  # renumbered: counted again
    count.advance(combined, max_bytes=1 << 20)
    assert count.position(combined, 0) == (1, 4)


# --- LogWatcher ---------------------------------------------------------------------------------------------------

def wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_watcher_raises_the_flag_on_writes(tmp_path: Path) -> None:
    watcher = LogWatcher([tmp_path], safety_interval=60, settle=0)
    watcher.start()

    def write_and_see() -> bool:  # the first write may come before the watch is set up: write until one is seen
        append(tmp_path / "t.log", "x\n")
        return wait_for(watcher.changed, timeout=0.2)

    try:
        assert wait_for(lambda: watcher.watching)
        assert wait_for(write_and_see)
    finally:
        watcher.stop()
    assert not watcher.watching


def test_a_log_watches_its_folder_until_the_file_exists(tmp_path: Path) -> None:
    index = LogIndex(tmp_path / "t.log")
    assert index.watched == {tmp_path}
    append(tmp_path / "t.log", "x\n")
    assert index.watched == {tmp_path / "t.log"}


def test_a_file_watcher_ignores_other_files_in_its_folder(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine.log", tmp_path / "other.log"
    append(mine, "")
    watcher = LogWatcher([mine], safety_interval=60, settle=0)
    watcher.start()

    def write_and_see(path: Path) -> bool:
        append(path, "x\n")
        return wait_for(watcher.changed, timeout=0.2)

    try:
        assert wait_for(lambda: watcher.watching)
        assert wait_for(lambda: write_and_see(mine))  # the watch is set up
        assert not any(write_and_see(other) for _ in range(5))
        assert write_and_see(mine)
    finally:
        watcher.stop()


def test_a_new_watcher_says_changed_until_its_watch_has_surely_been_set_up(tmp_path: Path) -> None:
    """A write between `start()` and the thread's watch being in place raises no event: the caller rereads on
    every call for the first moments instead of waiting for the safety poll."""
    append(tmp_path / "t.log", "")
    watcher = LogWatcher([tmp_path / "t.log"], safety_interval=60, settle=60)
    watcher.start()
    try:
        assert all(watcher.changed() for _ in range(3))
    finally:
        watcher.stop()


def test_watcher_polls_when_it_cannot_watch(tmp_path: Path) -> None:
    watcher = LogWatcher([tmp_path / "missing"], poll_interval=0.05)
    watcher.start()
    assert not watcher.watching
    assert wait_for(watcher.changed, timeout=1.0)
    assert not watcher.changed()  # answered: the next True comes a poll interval later
    watcher.stop()


def test_importing_the_core_does_not_import_textual() -> None:
    code = "import sys, tuidag.views.log_index; assert 'textual' not in sys.modules, 'textual imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


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
