"""LogView under Pilot: tailing, following, wrapping, searching, colours, progress bars, a snapshot.

Waits poll the app against a deadline (`until`); nothing sleeps a fixed time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pilot_helpers import until
from textual.app import App, ComposeResult

from tuidag.ui.widgets.log import search
from tuidag.ui.widgets.log.view import LogView
from tuidag.views.combined_log import CombinedLog

SIZE = (60, 14)  # the view gets 58 x 12 inside its border


class LogApp(App[None]):
    """A host like the real app: the view in a border; the letter keys belong to the app."""

    CSS = "LogView { height: 1fr; border: round $accent; }"
    BINDINGS = [("n", "next"), ("N", "prev"), ("f", "follow"), ("w", "wrap"), ("g", "top"), ("G", "bottom")]

    def __init__(self, show: Callable[[LogView], None]) -> None:
        super().__init__()
        self._show = show

    def compose(self) -> ComposeResult:
        yield LogView(id="log")

    def on_mount(self) -> None:
        view = self.query_one(LogView)
        view.focus()
        self._show(view)

    def action_next(self) -> None:
        self.query_one(LogView).search_next()

    def action_prev(self) -> None:
        self.query_one(LogView).search_prev()

    def action_follow(self) -> None:
        self.query_one(LogView).toggle_follow()

    def action_wrap(self) -> None:
        self.query_one(LogView).toggle_wrap()

    def action_top(self) -> None:
        self.query_one(LogView).scroll_home()

    def action_bottom(self) -> None:
        self.query_one(LogView).scroll_end()


def file_app(path: Path, title: str = "task") -> LogApp:
    return LogApp(lambda view: view.show_file(path, title))


def rows(view: LogView) -> list[str]:
    """The text on screen, row by row."""
    return [view.render_line(y).text.rstrip() for y in range(view.scrollable_content_region.height)]


def at_bottom(view: LogView) -> bool:
    return view.scroll_offset.y == view.max_scroll_y


def write_lines(path: Path, lines, mode: str = "a") -> None:
    with open(path, mode) as f:
        f.writelines(f"{line}\n" for line in lines)


async def test_tails_a_growing_file(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    write_lines(log, [f"line {i}" for i in range(5)])
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 5)
        assert rows(view)[:5] == [f"line {i}" for i in range(5)]
        write_lines(log, [f"line {i}" for i in range(5, 105)])
        await until(pilot, lambda: view.line_count == 105 and at_bottom(view), what="new lines shown")
        assert rows(view)[-1] == "line 104" and view.following
        assert "105 lines" in str(view.border_subtitle) and str(log) in str(view.border_title)
        with open(log, "a") as f:
            f.write("partial")
        await until(pilot, lambda: rows(view)[-1] == "partial", what="partial line shown")
        with open(log, "a") as f:
            f.write(" and done\n")
        await until(pilot, lambda: rows(view)[-1] == "partial and done", what="partial line completed")


async def test_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        assert view.line_count == 0 and view.path == log
        write_lines(log, ["hello"])
        await until(pilot, lambda: rows(view)[0] == "hello", what="file picked up")
        await until(
            pilot,
            lambda: view._watcher is not None and view._watcher.paths == {log},
            what="the file itself watched once it exists",
        )
        write_lines(log, ["again"])
        await until(pilot, lambda: rows(view)[1] == "again", what="a write to the watched file shown")


async def test_follow_stops_when_scrolled_up_and_resumes_with_end(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    write_lines(log, [f"line {i}" for i in range(200)])
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 200 and at_bottom(view))
        await pilot.press("up")
        assert not view.following
        top = view.scroll_offset.y
        write_lines(log, [f"more {i}" for i in range(50)])
        await until(pilot, lambda: view.line_count == 250, what="growth while paused")
        await pilot.pause()
        assert view.scroll_offset.y == top and not view.following  # the screen stays where the user put it
        await pilot.press("end")
        assert view.following and at_bottom(view) and rows(view)[-1] == "more 49"
        await pilot.press("home")
        assert not view.following and view.scroll_offset.y == 0
        await pilot.press("G")  # the app's key calls scroll_end()
        assert view.following and at_bottom(view)
        await pilot.press("f")
        assert not view.following
        await pilot.press("f")
        assert view.following
        await pilot.press("g", "down", "down")
        assert not view.following and view.scroll_offset.y == 2
        view.scroll_to(y=view.max_scroll_y - 1, animate=False)  # as dragging the scrollbar does
        assert not view.following
        await pilot.press("down")  # the user's own scroll reaching the bottom follows again
        assert view.following


async def test_wrap_toggle(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    long = "".join(f"{i:03d}|" for i in range(60))  # 240 characters
    write_lines(log, ["short", long, "end"])
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        width = view.scrollable_content_region.width
        await until(pilot, lambda: view.virtual_size.width == 240, what="wide line scrollable")
        assert rows(view)[1] == long[:width]
        await pilot.pause()  # the horizontal scrollbar appears in the next layout
        view.scroll_to(x=100, animate=False)
        await pilot.pause()
        assert rows(view)[1] == long[100 : 100 + width]
        await pilot.press("w")
        await pilot.pause()
        assert view.wrap and view.scroll_offset.x == 0
        wrapped = rows(view)
        assert wrapped[0] == "short"
        assert "".join(wrapped[1:6]) == long and wrapped[6] == "end"
        assert view.virtual_size.width == width
        await pilot.press("w")
        await pilot.pause()
        assert not view.wrap and rows(view)[:3] == ["short", long[:width], "end"]


async def test_wrap_reaches_the_end_of_long_logs(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    write_lines(log, [f"{i:04d} " + "x" * 150 for i in range(100)])  # each wraps to 3 rows
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await pilot.press("w")
        await until(pilot, lambda: view.wrap and at_bottom(view))
        assert rows(view)[-3].startswith("0099 ") and view.following
        await pilot.press("home")
        assert rows(view)[0].startswith("0000 ")
        await pilot.press("down")
        assert rows(view)[0].startswith("0001 ")  # scrolling is by lines, not rows


async def test_search_finds_far_lines_and_n_N_move(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    lines = [f"line {i}" for i in range(5000)]
    for i in (100, 2500, 3000):
        lines[i] = f"line {i} \x1b[31mNee\x1b[0mdle here"
    write_lines(log, lines)
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 5000 and at_bottom(view))
        assert view.search("needle")  # nothing below the screen: wraps around to the first one
        assert view.match_line == 100 and not view.following
        assert any(row.startswith("line 100 Needle") for row in rows(view))
        row = next(view.render_line(y) for y in range(12) if view.render_line(y).text.startswith("line 100 "))
        styles = {segment.text: segment.style for segment in row}
        assert styles["Nee"].bgcolor == styles["dle"].bgcolor != styles["line 100 "].bgcolor
        for key, expected in [("n", 2500), ("n", 3000), ("n", 100), ("N", 3000), ("N", 2500)]:
            await pilot.press(key)
            assert view.match_line == expected, key
            top = view.scroll_offset.y
            assert top <= expected < top + 12
        assert "line 2,501" in str(view.border_subtitle)
        assert not view.search("haystack") and view.match_line is None


def match_styles(view: LogView, y: int, word: str) -> list:
    """The style of each cell of each occurrence of `word` (any case) in screen row `y`, one list per occurrence."""
    cells = [(char, segment.style) for segment in view.render_line(y) for char in segment.text]
    text = "".join(char for char, _ in cells).lower()
    starts = [i for i in range(len(text)) if text.startswith(word, i)]
    return [[style for _, style in cells[i : i + len(word)]] for i in starts]


async def test_search_counts_matches_and_highlights_every_one_on_screen(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    lines = [f"line {i}" for i in range(40)]
    for i in (2, 5, 9, 30):
        lines[i] = f"line {i} \x1b[32mfo\x1b[0mO and foo"
    write_lines(log, lines)
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 40)
        await pilot.press("g")
        assert view.search("foo") and view.match_line == 2
        assert view.match_count == (1, 4, True) and "“foo” 1/4 at line 3" in str(view.border_subtitle)
        current = [style for match in match_styles(view, 2, "foo") for style in match]
        other = [style for y in (5, 9) for match in match_styles(view, y, "foo") for style in match]
        plain = next(iter(view.render_line(4))).style
        assert len(current) == 6 and len(other) == 12  # both matches of each line on screen, coloured or not
        assert len({style.bgcolor for style in other}) == 1 and other[0].bgcolor != plain.bgcolor
        assert len({style.bgcolor for style in current}) == 1 and current[0].bgcolor != other[0].bgcolor
        assert all(style.bold for style in current) and not any(style.bold for style in other)  # it stands out
        for key, expected in [("n", 2), ("n", 3), ("n", 4), ("n", 1), ("N", 4)]:
            await pilot.press(key)
            assert view.match_count[:2] == (expected, 4), key
            assert f"“foo” {expected}/4 at line" in str(view.border_subtitle)
        assert not view.search("nothing") and "“nothing” not found" in str(view.border_subtitle)


async def test_the_count_stays_right_while_the_log_grows(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    write_lines(log, ["an error", "fine"])
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 2)
        assert view.search("ERROR") and view.match_count == (1, 1, True)
        write_lines(log, ["fine", "another error", "fine"])
        with open(log, "a") as f:
            f.write("error still being writ")
        await until(pilot, lambda: view.match_count == (1, 3, True), what="the new matches counted")
        assert "“ERROR” 1/3 at line 1" in str(view.border_subtitle)
        await pilot.press("N")
        assert view.match_line == 5 and view.match_count == (3, 3, True)  # the unfinished last line counts too


async def test_a_big_log_is_counted_over_several_ticks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(search, "COUNT_BUDGET", 0.0)  # one slice a tick: as a 100 MB log is counted
    log = tmp_path / "big.log"
    line = b"2024-01-01 12:00:00 INFO worker processed item %07d\n"
    count = 60_000  # 3 MB: a dozen slices
    log.write_bytes(b"".join(line % i for i in range(count)))
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == count)
        await pilot.press("g")
        assert view.search("ITEM") and view.match_line == 0
        index, total, done = view.match_count
        assert index == 1 and not done and 0 < total < count  # the first slice only
        assert f"“ITEM” 1/{total:,}… at line 1" in str(view.border_subtitle)
        await until(pilot, lambda: view.match_count[2], what="the count done")
        assert view.match_count == (1, count, True) and "1/60,000 at line 1" in str(view.border_subtitle)


async def test_ansi_colours_are_rendered(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    write_lines(log, ["\x1b[31mred\x1b[0m plain \x1b[1;32mgreen\x1b[0m", "bell\x07 \x1b]0;title\x07done\x1b[K"])
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 2)
        segments = {segment.text: segment.style for segment in view.render_line(0) if segment.text.strip()}
        assert segments["red"].color.number == 1
        assert segments["green"].color.number == 2 and segments["green"].bold
        assert segments[" plain "].color is None or segments[" plain "].color.number not in (1, 2)
        assert rows(view)[1] == "bell\ufffd done"  # no raw control characters reach the terminal


async def test_progress_bar_shows_only_its_last_state(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    with open(log, "w") as f:
        f.write("downloading\nprogress 10%\rprogress 50%\r")
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 2)
        assert rows(view)[:2] == ["downloading", "progress 50%"]
        with open(log, "a") as f:
            f.write("progress 100%\n")
        await until(pilot, lambda: rows(view)[1] == "progress 100%", what="bar finished")
        assert view.line_count == 2


async def test_truncated_file_is_shown_anew(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    write_lines(log, [f"first run {i}" for i in range(50)])
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 50)
        write_lines(log, ["second run"], mode="w")
        await until(pilot, lambda: view.line_count == 1 and rows(view)[0] == "second run", what="reindexed")


async def test_combined_view(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    write_lines(a, ["a one"])
    combined = CombinedLog({"a": a})
    app = LogApp(lambda view: view.show_combined(combined))
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await until(pilot, lambda: view.line_count == 1)
        combined.add("b", b)
        write_lines(b, ["b one", "b two"])
        await until(pilot, lambda: view.line_count == 3, what="second task shown")
        assert rows(view)[:3] == ["[a] a one", "[b] b one", "[b] b two"]
        assert view.path is None and "all tasks" in str(view.border_title)


async def test_a_huge_backlog_is_indexed_in_short_ticks(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    line = b"2024-01-01 12:00:00 INFO worker processed item %07d\n"
    count = 300_000  # 15 MB: more than one tick's budget
    log.write_bytes(b"".join(line % i for i in range(count)))
    app = file_app(log)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(LogView)
        await pilot.pause()
        view.show_file(log, "again")
        assert view.line_count < count  # the rest comes in the next ticks
        await until(pilot, lambda: view.line_count == count and at_bottom(view), what="backlog indexed")
        assert rows(view)[-1].endswith(f"item {count - 1:07d}")


def test_snapshot_of_coloured_log(snap_compare, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the title shows the path: keep it the same on every machine
    lines = [
        "=== tuidag: build attempt 1 started at 12:00:00 ===",
        "\x1b[1mCompiling\x1b[0m tuidag v0.1.0",
        "\x1b[32m   ok\x1b[0m test_index",
        "\x1b[31m FAIL\x1b[0m test_view: \x1b[33mexpected 3, got 4\x1b[0m",
        "\x1b[44;97m note \x1b[0m background colours too",
        "progress 10%\rprogress 100%",
        "tabs\tare\texpanded",
        "a very long line " + "that goes on " * 10,
    ]
    write_lines(tmp_path / "build.log", lines)
    assert snap_compare(file_app(Path("build.log"), "build"), terminal_size=(60, 12))
