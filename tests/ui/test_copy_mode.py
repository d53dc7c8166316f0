"""Copying from the log pane on the shipped path (a real run served on its control socket, viewed as `tuidag run`
views it): copy mode's keys and mouse, what reaches the clipboard (Textual keeps what `copy_to_clipboard` was given
in `app.clipboard`), and the pager, editor and path keys where the view cannot hand its terminal over.

The real terminal (OSC 52 reaching tmux, the pager run with the app suspended) is tested in test_tmux_copy.py."""

from __future__ import annotations

from pilot_helpers import open_app, until
from textual.events import MouseDown, MouseMove, MouseUp

from tuidag.views.log_copy import COPY_LIMIT

# Colours and a progress bar overwritten with `\r`: the clipboard gets the text a person reads.
TALK = "for i in $(seq 1 200); do printf '\\033[32mline %d\\033[0m\\rok line %d\\n' $i $i; done"
# Line 0 is the log's header (the attempt's start); line i the task's i-th.
EXPECTED = ["", *(f"ok line {i}" for i in range(1, 201))]


async def talk_written(app, pilot) -> None:
    await until(pilot, lambda: app.model.finished and app.log_pane.line_count == 201, what="the log written")


async def test_v_moves_and_y_copy_exactly_the_selected_lines_as_plain_text(new_session):
    async with open_app(new_session({"talk": TALK})) as (app, pilot):
        await talk_written(app, pilot)
        log = app.log_pane
        assert log.following
        await pilot.press("v")
        assert log.copying and app.focused is log and not log.following
        assert log.cursor_line == 200 and log.selection == (200, 200)  # the last line on screen
        await pilot.press("k", "k", "up")
        assert log.selection == (197, 200)
        assert "COPY: 4 lines selected" in str(log.border_subtitle)
        await pilot.press("y")
        assert app.clipboard == "\n".join(EXPECTED[197:201])
        assert not log.copying and log.following  # it was following: it follows again
        assert any("copied 4 lines to the clipboard" in n.message for n in app._notifications)

        # g goes to the first line; `v` drops the selection, moves then only move the cursor, `v` anchors again.
        await pilot.press("v", "g")
        assert log.cursor_line == 0 and log.selection == (0, 200) and log.scroll_offset.y == 0
        await pilot.press("v", "j", "j", "v", "j", "down", "pagedown")
        page = log.scrollable_content_region.height - 1
        assert log.selection == (2, 4 + page)
        await pilot.press("y")
        assert app.clipboard == "\n".join(EXPECTED[2 : 5 + page])


async def test_esc_leaves_copy_mode_without_copying_and_shift_arrows_select(new_session):
    async with open_app(new_session({"talk": TALK})) as (app, pilot):
        await talk_written(app, pilot)
        log = app.log_pane
        await pilot.press("v", "v", "k", "k")  # no selection: the cursor moves alone
        assert log.selection is None and log.cursor_line == 198
        await pilot.press("shift+up", "shift+up")
        assert log.selection == (196, 198)
        await pilot.press("escape")
        assert not log.copying and app.clipboard == "" and app.focused is log
        await pilot.press("escape")  # out of copy mode, Esc is the app's again: back to the graph
        assert app.focused is app.canvas
        await pilot.press("v", "y")  # nothing selected but the cursor's line: that line
        assert app.clipboard == "ok line 200"


async def test_dragging_the_mouse_selects_lines_and_y_copies_them(new_session):
    async with open_app(new_session({"talk": TALK})) as (app, pilot):
        await talk_written(app, pilot)
        log = app.log_pane
        region = log.scrollable_content_region
        top = log.scroll_offset.y

        def mouse(event_type, row: int, button: int = 1):
            x, y = region.x + 2, region.y + row
            return event_type(
                widget=None,
                x=x,
                y=y,
                delta_x=0,
                delta_y=0,
                button=button,
                shift=False,
                meta=False,
                ctrl=False,
                screen_x=x,
                screen_y=y,
            )

        await pilot.click(log, offset=(3, region.y - log.region.y + 1))  # a click alone selects nothing
        assert not log.copying
        app.screen._forward_event(mouse(MouseDown, 1))
        for row in (2, 3, 4):
            app.screen._forward_event(mouse(MouseMove, row))
        app.screen._forward_event(mouse(MouseUp, 4))
        await pilot.pause()
        assert log.copying and log.selection == (top + 1, top + 4)
        await pilot.press("y")
        assert app.clipboard == "\n".join(EXPECTED[top + 1 : top + 5])


async def test_search_in_copy_mode_moves_the_cursor_to_the_match(new_session):
    async with open_app(new_session({"talk": TALK})) as (app, pilot):
        await talk_written(app, pilot)
        log = app.log_pane
        await pilot.press("v", "k", "k", "k", "v")  # the cursor on line 197, no selection
        await pilot.press("slash", *"line 5", "enter")  # from after the cursor: wraps around to the top
        assert log.copying and log.cursor_line == 5
        await pilot.press("space", "n")  # the next match after the cursor: line 50; the selection follows
        assert log.selection == (5, 50)
        await pilot.press("G", "N")  # back from the cursor at the end: line 59 (the last with `line 5`)
        assert log.selection == (5, 59)
        await pilot.press("y")
        assert app.clipboard.splitlines() == EXPECTED[5:60]


async def test_a_huge_selection_copies_its_first_lines_up_to_the_cap_and_says_so(new_session):
    session = new_session({"big": "seq 1 100000"})
    async with open_app(session) as (app, pilot):
        log = app.log_pane
        await until(pilot, lambda: app.model.finished and log.line_count == 100_001, 30, what="100,000 lines")
        await pilot.press("v", "g", "y")
        copied = app.clipboard.split("\n")
        assert copied[0].startswith("=== tuidag: big attempt 1") and copied[1:] == [
            str(i) for i in range(1, len(copied))
        ]
        assert len(app.clipboard.encode()) <= COPY_LIMIT < len(app.clipboard.encode()) + len(f"\n{len(copied)}")
        assert any(f"copied the first {len(copied):,} of 100,001 lines" in n.message for n in app._notifications)


async def test_e_E_and_Y_where_the_terminal_cannot_be_handed_over(new_session, monkeypatch, tmp_path):
    """Pilot's headless driver cannot suspend (neither can a browser's): `e` says so and where the log is."""
    monkeypatch.setenv("PAGER", "true")
    async with open_app(new_session({"talk": TALK})) as (app, pilot):
        await talk_written(app, pilot)
        path = app.source.run.log_path("talk").absolute()
        await pilot.press("e")
        assert any("$PAGER cannot run here" in n.message and str(path) in n.message for n in app._notifications)
        monkeypatch.setenv("EDITOR", "no-such-editor-here")
        await pilot.press("E")
        assert any("$EDITOR: no-such-editor-here not found" in n.message for n in app._notifications)
        await pilot.press("Y")
        assert app.clipboard == str(path)


async def test_copy_mode_holds_a_live_log_still_and_leaving_follows_again(new_session):
    session = new_session({"live": "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.01; done"})
    async with open_app(session) as (app, pilot):
        log = app.log_pane
        await until(pilot, lambda: log.line_count > 50, what="output")
        await pilot.press("v", "k")
        top, cursor, count = log.scroll_offset.y, log.cursor_line, log.line_count
        await until(pilot, lambda: log.line_count > count + 30, what="more output")
        assert log.scroll_offset.y == top and log.cursor_line == cursor and not log.following
        log.scroll_to(y=log.max_scroll_y, animate=False)  # as the mouse wheel does: at the bottom, still not following
        await pilot.pause()
        count = log.line_count
        await until(pilot, lambda: log.line_count > count + 30, what="more output")
        assert not log.following and log.cursor_line == cursor and log.scroll_offset.y < log.max_scroll_y
        count = log.line_count
        await pilot.press("end")  # End in copy mode moves the cursor to the last line; it does not follow
        assert log.cursor_line >= count - 1 and not log.following
        await pilot.press("escape")
        assert log.following
        await until(pilot, lambda: log.scroll_offset.y == log.max_scroll_y, what="the end followed")


async def test_copy_mode_in_wrap_mode_keeps_the_cursor_line_whole_on_screen(new_session):
    session = new_session({"wide": "for i in $(seq 1 60); do printf 'row %d %0200d\\n' $i 0; done"})
    async with open_app(session, size=(80, 24)) as (app, pilot):
        log = app.log_pane
        await until(pilot, lambda: app.model.finished and log.line_count == 61, what="the log written")
        await pilot.press("w", "v", "g", "space")  # the selection from the first line
        assert log.cursor_line == 0 and log.scroll_offset.y == 0 and log.selection == (0, 0)
        for _ in range(10):
            await pilot.press("j")
            rows = [line for line, _ in log._wrapped_rows()]
            assert log.cursor_line in rows  # on screen, and whole: not the last row unless the screen has room
            assert rows[-1] != log.cursor_line or len(rows) < log.scrollable_content_region.height
        assert log.scroll_offset.y > 0  # it had to scroll (each line is 3 or 4 rows here)
        await pilot.press("y")
        copied = app.clipboard.split("\n")
        assert len(copied) == 11 and copied[1] == f"row 1 {0:0200d}" and copied[10] == f"row 10 {0:0200d}"


async def test_the_combined_log_copies_its_lines_with_their_task_prefixes(new_session):
    session = new_session({"one": "echo from one", "two": "echo from two"})
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run over")
        await pilot.press("a")
        log = app.log_pane
        await until(pilot, lambda: log.line_count >= 4, what="the combined log")
        await pilot.press("v", "g", "y")
        copied = app.clipboard.split("\n")  # the prefixes are coloured on screen, plain here
        assert len(copied) == 4 and {"[one] from one", "[two] from two"} <= set(copied)
