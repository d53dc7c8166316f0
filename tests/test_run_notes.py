"""The note a run leaves on the terminal (views/run_notes): which escape sequence each terminal gets, how a hostile
name is cleaned, and which notes `--notify never|end|failure` lets through. The real binary on a real terminal is
tested in tests/ui/test_tmux_notes.py."""

from __future__ import annotations

import io
import re

import pytest

from tuidag.views.run_notes import (
    BEL,
    Channel,
    RunNotes,
    channel_for,
    clean,
    in_ci,
    note_sequence,
    notify_choice,
    outcome_word,
)

ESC = "\x1b"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("env", "osc"),
    [
        ({"TERM": "foot"}, "777"),
        ({"TERM": "rxvt-unicode-256color"}, "777"),
        ({"TERM": "xterm-256color", "VTE_VERSION": "7600"}, "777"),
        ({"TERM": "xterm-ghostty", "TERM_PROGRAM": "ghostty"}, "777"),
        ({"TERM": "xterm-256color", "TERM_PROGRAM": "iTerm.app"}, "9"),
        ({"TERM": "xterm-256color", "TERM_PROGRAM": "WezTerm"}, "9"),
        ({"TERM": "xterm-kitty"}, "9"),
        ({"TERM": "xterm-256color", "WT_SESSION": "abc"}, "9"),
        ({"TERM": "xterm-256color"}, None),
        ({"TERM": "linux"}, None),
        ({}, None),
    ],
)
def test_each_terminal_gets_the_notification_it_shows_or_the_bell_alone(env, osc):
    assert channel_for(env) == Channel(osc, tmux=False)


def test_inside_tmux_the_outer_terminal_is_told_from_the_variables_that_survive_into_it():
    env = {"TERM": "tmux-256color", "TERM_PROGRAM": "tmux", "TMUX": "/tmp/tmux-1/default,1,0"}
    assert channel_for(env) == Channel(None, tmux=True)
    assert channel_for({**env, "GHOSTTY_RESOURCES_DIR": "/usr/share/ghostty"}) == Channel("777", tmux=True)
    assert channel_for({**env, "KITTY_WINDOW_ID": "1"}) == Channel("9", tmux=True)
    assert channel_for({**env, "WEZTERM_PANE": "3"}) == Channel("9", tmux=True)


def test_gnu_screen_gets_the_bell_alone():
    assert channel_for({"TERM": "screen-256color", "STY": "1.pts-0", "KITTY_WINDOW_ID": "1"}) == Channel(None)


def test_osc_777_carries_a_title_and_a_body_and_ends_with_a_bell():
    assert note_sequence("tuidag: etl failed", "3 tasks: 2 succeeded, 1 failed in 4.0s", Channel("777")) == (
        f"{ESC}]777;notify;tuidag: etl failed;3 tasks: 2 succeeded, 1 failed in 4.0s{BEL}{BEL}"
    )


def test_osc_9_carries_one_message():
    assert note_sequence("tuidag: etl", "b failed", Channel("9")) == f"{ESC}]9;tuidag: etl: b failed{BEL}{BEL}"


def test_an_unknown_terminal_gets_only_a_bell():
    assert note_sequence("tuidag: etl", "b failed", Channel(None)) == BEL
    assert note_sequence("tuidag: etl", "b failed", Channel(None, tmux=True)) == BEL


def test_inside_tmux_the_osc_is_wrapped_in_the_passthrough_with_each_escape_doubled():
    sequence = note_sequence("t", "b", Channel("777", tmux=True))
    assert sequence == f"{ESC}Ptmux;{ESC}{ESC}]777;notify;t;b{BEL}{ESC}\\{BEL}"


def test_a_title_holds_no_separator_of_osc_777():
    sequence = note_sequence("tuidag: a;b", "x;y", Channel("777"))
    assert sequence == f"{ESC}]777;notify;tuidag: a,b;x;y{BEL}{BEL}"


HOSTILE = [
    "etl\x1b]0;owned\x07",  # sets the window's title
    "etl\x07\x1b]777;notify;fake;fake\x07",  # ends the note early and starts one of its own
    "etl\x1b\\\x1b[2J",  # ST, then clears the screen
    "etl\x9c\x9b2J",  # C1 ST and CSI
    "etl\nline\r\ttab\x00nul\x7f",
    "etl\u2028\ud800",
]


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("osc", ["9", "777"])
@pytest.mark.parametrize("tmux", [False, True])
def test_no_control_character_of_a_name_reaches_the_terminal_inside_the_note(name, osc, tmux):
    notes = RunNotes("failure", Channel(osc, tmux))
    sequence = notes.task_failed(name, name, name)
    payload = sequence.removesuffix(BEL)
    if tmux:
        payload = payload.removeprefix(f"{ESC}Ptmux;").removesuffix(f"{ESC}\\").replace(ESC + ESC, ESC)
    prefix = f"{ESC}]{osc};"
    assert payload.startswith(prefix) and payload.endswith(BEL)
    text = payload.removeprefix(prefix).removesuffix(BEL)
    assert not re.search("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]", text), repr(text)
    assert "etl" in text


def test_a_long_name_is_cut():
    assert clean("x" * 500, 80) == "x" * 79 + "…"
    assert len(note_sequence("t" * 500, "b" * 500, Channel("777"))) < 320


def test_the_option_wins_over_the_dag_key_and_the_default_is_the_end():
    assert notify_choice("never", "failure") == "never"
    assert notify_choice(None, "failure") == "failure"
    assert notify_choice(None, None) == "end"


def test_end_notes_the_end_whatever_its_outcome_and_no_failure():
    notes = RunNotes("end", Channel("9"))
    assert notes.task_failed("etl", "b", "exit code 3") == ""
    ended = notes.run_ended("etl", {"SUCCEEDED": 2, "FAILED": 1}, 4.0)
    assert ended == f"{ESC}]9;tuidag: etl failed: 3 tasks: 2 succeeded, 1 failed in 4.0s{BEL}{BEL}"
    assert notes.run_ended("etl", {"SUCCEEDED": 3}, 4.0).startswith(f"{ESC}]9;tuidag: etl succeeded: ")


def test_failure_notes_the_first_failure_only():
    notes = RunNotes("failure", Channel("777"))
    assert (
        notes.task_failed("etl", "b", "exit code 3") == f"{ESC}]777;notify;tuidag: etl;b failed: exit code 3{BEL}{BEL}"
    )
    assert notes.task_failed("etl", "c", "exit code 1") == ""
    assert notes.run_ended("etl", {"FAILED": 2}, 1.0) == ""


def test_never_notes_nothing():
    notes = RunNotes("never", Channel("777"))
    assert notes.task_failed("etl", "b", None) == "" and notes.run_ended("etl", {"FAILED": 1}, 1.0) == ""


def test_the_outcome_says_how_the_run_went():
    assert outcome_word({"SUCCEEDED": 1, "UP_TO_DATE": 2, "UNTARGETED": 1}) == "succeeded"
    assert outcome_word({"SUCCEEDED": 1, "SKIPPED": 1, "FAILED": 1}) == "failed"
    assert outcome_word({"SUCCEEDED": 1, "CANCELLED": 1}) == "cancelled"
    assert outcome_word({"CANCELLED": 2}, interrupted=True) == "interrupted"


def test_nothing_is_noted_into_a_pipe_or_under_ci():
    env = {"TERM": "foot"}
    assert RunNotes.for_stream("end", Tty(), env).run_ended("etl", {"SUCCEEDED": 1}, 1.0).endswith(BEL)
    assert RunNotes.for_stream("end", io.StringIO(), env).run_ended("etl", {"SUCCEEDED": 1}, 1.0) == ""
    for_ci = RunNotes.for_stream("failure", Tty(), {**env, "CI": "true"})
    assert for_ci.task_failed("etl", "b", None) == ""
    assert RunNotes.for_stream("end", None, env).run_ended("etl", {}, 1.0) == ""


def test_ci_is_told_from_its_variable():
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and in_ci({"CI": "woodpecker"})
    assert not in_ci({}) and not in_ci({"CI": ""}) and not in_ci({"CI": "false"}) and not in_ci({"CI": "0"})
