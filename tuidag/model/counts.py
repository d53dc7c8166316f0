"""How tuidag writes a count in its messages: one number format everywhere (`3,000`, as the terminal UI writes it),
and the noun in the singular for one (`1 task`, `3,000 tasks`)."""

from __future__ import annotations

from collections.abc import Mapping


def number(n: int) -> str:
    return f"{n:,}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 task`, `2 tasks`, `3,000 tasks`; `plural` where adding an s is wrong (`process`, `processes`)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def states_said(counts: Mapping[str, int]) -> str:
    """`211 succeeded, 1 failed, 3 up to date`: tasks by state (a state's value -> how many), in the order given,
    the states none are in left out."""
    return ", ".join(f"{number(n)} {state.lower().replace('_', ' ')}" for state, n in counts.items() if n)
