"""Many tasks' logs interleaved into one bounded view (CombinedLog)."""

from __future__ import annotations

import os
from pathlib import Path

from test_log_index import append, lines_of
from tuidag.views.combined_log import CombinedLog
from tuidag.views.match_count import MatchCount

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
    assert lines_of(combined) == [
        "[a] === tuidag: a attempt 1 started at 12:00:00 ===",
        "[a] a1",
        "[a] a2",
        "[b] b1",
        "[b] b2",
    ]
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
    assert lines_of(combined) == [
        "[tokenize] tokenize line 0",
        "[tokenize] tokenize line 1",
        "[tokenize] tokenize line 2",
        "[export] export 1",
        "[export] error: disk quota exceeded",
    ]


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
        "l0",
        "l1",
        "l2",
        "l3",
        "l4",
        "s0",
        "l5",
        "s1",
        "l6",
        "l7",
        "l8",
        "l9",
    ]


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
    assert lines_of(combined) == [*everything[:-2], "[d] d1", "[b] b4", "[c] c2"]  # all back, in order


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


def test_one_task_log_and_a_combined_log_are_read_through_the_same_surface(tmp_path: Path) -> None:
    """The log pane and the match count are typed against `LogLines`; both kinds of log must offer all of it."""
    from tuidag.views.log_index import LogIndex
    from tuidag.views.log_lines import LogLines

    append(tmp_path / "a.log", "one\n")
    assert isinstance(LogIndex(tmp_path / "a.log"), LogLines)
    assert isinstance(CombinedLog({"a": tmp_path / "a.log"}), LogLines)
