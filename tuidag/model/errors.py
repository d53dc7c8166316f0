"""Located errors for bad DAG input: every message reads `FILE:LINE:COL: message`."""
from __future__ import annotations

from typing import Iterable, NamedTuple


class Location(NamedTuple):
    file: str
    line: int  # 1-based
    col: int   # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Note(NamedTuple):
    """Something worth telling that is not an error, e.g. a key that has no effect locally."""

    message: str
    location: Location

    def __str__(self) -> str:
        return f"{self.location}: note: {self.message}"


class DagError(Exception):
    """One problem in a DAG definition, with where it is."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class DagErrors(Exception):
    """Every problem found in one DAG definition, in file order."""

    def __init__(self, errors: Iterable[DagError]):
        self.errors = sorted(errors, key=_order)
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
