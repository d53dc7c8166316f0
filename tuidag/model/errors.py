"""Located errors for bad DAG input: every message reads `FILE:LINE:COL: message`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple


class Location(NamedTuple):
    file: str
    line: int  # 1-based
    col: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Note(NamedTuple):
    """Something worth telling that is not an error, e.g. a key that has no effect locally."""

    message: str
    location: Location
    #: A slot kind that makes the note untrue when the run has a capacity for it (`--resources A100=2`: a SkyPilot
    #: task's accelerators then hold slots), and what is true then instead (None: nothing to say).
    unless_kind: str | None = None
    instead: str | None = None

    def __str__(self) -> str:
        return f"{self.location}: note: {self.message}"

    def given(self, capacities: Mapping[str, int]) -> Note | None:
        """The note as it holds for a run with these slot capacities."""
        if self.unless_kind is None or self.unless_kind not in capacities:
            return self
        return None if self.instead is None else Note(self.instead, self.location)


class DagError(Exception):
    """One problem in a DAG definition, with where it is."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class DagErrors(Exception):
    """Every problem found in one DAG definition, in file order. `partial`: the DAG as far as it could be read
    (a DagSpec, or None), for the checks that need what the command line adds (`--resources`), so their errors are
    reported with the others (`resources.with_slot_errors`)."""

    def __init__(self, errors: Iterable[DagError], partial: Any = None):
        self.errors = sorted(errors, key=_order)
        self.partial = partial
        super().__init__("\n".join(map(str, self.errors)))


def _order(err: DagError) -> tuple:
    loc = err.location
    return (0, loc.file, loc.line, loc.col) if loc else (1, "", 0, 0)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` when a close choice exists, else an empty string."""
    import difflib  # only on the way to an error message

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def describe_exception(exc: BaseException) -> str:
    """`raised ValueError: bad row` (first line of the message, kept short): the reason a failed task shows."""
    message = str(exc).strip().splitlines()
    text = f"raised {type(exc).__name__}" + (f": {message[0]}" if message else "")
    return text if len(text) <= 200 else text[:197] + "..."


def short_repr(value: object) -> str:
    """A value as an error message quotes it, cut short: a number may have thousands of digits (and repr() refuses
    ints of over 4,300), a string may be a whole file."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"(a number of about {int(abs(value).bit_length() * 0.30103) + 1} digits)"
    text = repr(value)
    return text if len(text) <= 60 else text[:40] + "..."
