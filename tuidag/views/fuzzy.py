"""Fuzzy matching of a typed query against task names, for the finder (pure, no textual).

A name matches when the query's letters appear in it in order (case-insensitive). Matches are ranked by a score that
rewards what a person means by a query: letters in one run (`api` in `build-api`), letters at the start of the name or
of a word (after `-` `_` `.` `/`: `bal` in `build-api-linux`), few letters skipped; shorter names win ties, then the
order the names were given in (the graph's).

Speed (a finder answers on every keystroke, on 5,000 tasks): the filter and the first alignment are one compiled
regex per query, `[^a]*+(a)[^b]*+(b)…`, matched against every name in C (`map`), which gives the leftmost letters of
each match without a Python loop over the name. Only the names that match are scored, and only from two cheap
alternatives: the same letters pulled as far right as the match end allows (`lin` in `build-api-linux` is
`…-linux`, not `l` of `build`), and the query as one run, at a word start if it is one anywhere. When a query extends
the previous one, only the previous matches are tried. Measured on 5,000 names (2 shared cores): 3-8 ms for a first
letter or two that thousands of names hold, under 1-3 ms once a few letters narrow it (a frame is 16 ms).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress

SEPARATORS = frozenset("-_./")
START_BONUS = 12  # the first letter of the name
WORD_BONUS = 9  # a letter right after a separator
RUN_BONUS = 7  # a letter right after the previous matched letter
GAP_PENALTY = 3  # starting a gap between matched letters
GAP_EXTENSION = 1  # each further letter skipped in a gap (capped, so a long gap costs no more than a short one)
MAX_GAP_COST = 8
LEADING_COST = 1  # each letter before the first match (capped)
MAX_LEADING_COST = 6


@dataclass(frozen=True, slots=True)
class Match:
    """One name that matches: its index in the names given, its score and the positions of the matched letters."""

    index: int
    name: str
    score: int
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Found:
    """The best matches, best first, and how many names matched in all."""

    matches: list[Match]
    count: int


def _same_length_lower(text: str) -> str:
    """`text.lower()`, unless that changes its length (a few non-ASCII letters): then letters whose lower case is
    longer are kept, so positions in the result are positions in `text`."""
    lower = text.lower()
    if len(lower) == len(text):
        return lower
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


class FuzzyFinder:
    """Matches queries against a fixed list of names (the DAG's tasks, in graph order)."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self._lower = [_same_length_lower(n) for n in self.names]
        self._reversed = [n[::-1] for n in self._lower]
        self._last_query = ""
        self._last_hits: list[int] = list(range(len(self.names)))

    def search(self, query: str, limit: int = 50) -> Found:
        """The `limit` best matches of `query` (blanks ignored). An empty query lists the first names in order."""
        query = _same_length_lower("".join(query.split()))
        if not query:
            return Found([Match(i, n, 0, ()) for i, n in enumerate(self.names[:limit])], len(self.names))
        forward = _in_order(query)
        backward = _in_order(query[::-1])
        run_at_word = re.compile(f"(?<![^-_./]){re.escape(query)}")
        pool = self._last_hits if query.startswith(self._last_query) else range(len(self.names))
        lower, reversed_names = self._lower, self._reversed
        found = list(map(forward.match, map(lower.__getitem__, pool)))
        hits = list(compress(pool, found))
        self._last_query, self._last_hits = query, hits
        hit_names = list(map(lower.__getitem__, hits))
        runs = map(run_at_word.search, hit_names)
        size = len(query)
        scored = []
        for i, name, first, run in zip(hits, hit_names, filter(None, found), runs):
            if size == 1:  # a word start if there is one, else the first occurrence: nothing else can score higher
                best_positions = [run.start()] if run else [first.start(1)]
                scored.append((-_score(name, best_positions), len(name), i, best_positions))
                continue
            best_positions = [start for start, _ in first.regs[1:]]
            best = _score(name, best_positions)
            start, end = best_positions[0], best_positions[-1]
            if end - start >= size:  # not one run: try the letters pulled towards its end
                back = backward.match(reversed_names[i], len(name) - 1 - end)
                assert back is not None  # the letters found in order from `end` back are there reversed too
                candidate = [len(name) - 1 - p for p, _ in reversed(back.regs[1:])]
                score = _score(name, candidate)
                if score > best:
                    best, best_positions = score, candidate
            if run is not None and run.start() != start:
                candidate = list(range(run.start(), run.end()))
                score = _score(name, candidate)
                if score > best:
                    best, best_positions = score, candidate
            scored.append((-best, len(name), i, best_positions))
        scored.sort()
        return Found(
            [Match(i, self.names[i], -negative, tuple(positions)) for negative, _, i, positions in scored[:limit]],
            len(hits),
        )


def _in_order(query: str) -> re.Pattern[str]:
    """Matches a text that holds the letters of `query` in order, each in a group, each as early as possible. The
    negated classes make it possessive (nothing to backtrack into): a name that doesn't match fails in one pass."""
    return re.compile("".join(f"[^{_in_class(c)}]*+({re.escape(c)})" for c in query))


def _in_class(char: str) -> str:
    """`char` escaped for use inside a regex character class."""
    return "\\" + char if char in "\\]^-[" else char


def _score(name: str, positions: list[int]) -> int:
    """How well these letters of `name` match: bonuses for the name's start, word starts and runs; costs for gaps
    and for letters skipped before the first match."""
    first = positions[0]
    score = -min(first * LEADING_COST, MAX_LEADING_COST)
    previous = -2
    for p in positions:
        if p == previous + 1:
            score += RUN_BONUS
        elif previous >= 0:
            score -= min(GAP_PENALTY + (p - previous - 2) * GAP_EXTENSION, MAX_GAP_COST)
        if p == 0:
            score += START_BONUS
        elif name[p - 1] in SEPARATORS:
            score += WORD_BONUS
        previous = p
    return score
