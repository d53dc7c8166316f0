"""Fuzzy matching for the finder (`views.fuzzy`): which names match, where the matched letters are, and the order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tuidag.views.fuzzy import FuzzyFinder

NAMES = ["build-api-linux", "build-web", "lint", "test-unit", "api", "rapid-api", "deploy.prod", "docs/api_ref"]
LETTERS = st.text(alphabet="abAB-_./]^\\x", max_size=8)


def is_subsequence(query: str, name: str) -> bool:
    letters = iter(name.lower())
    return all(c in letters for c in query.lower())


def best(names: list[str], query: str) -> list[str]:
    return [m.name for m in FuzzyFinder(names).search(query).matches]


@given(st.lists(LETTERS, max_size=12), LETTERS)
def test_a_name_matches_exactly_when_the_query_letters_are_in_it_in_order(names, query):
    found = FuzzyFinder(names).search(query, limit=len(names) or 1)
    query = "".join(query.split())
    expected = sorted(i for i, name in enumerate(names) if is_subsequence(query, name))
    assert sorted(m.index for m in found.matches) == expected
    assert found.count == len(expected)
    for match in found.matches:
        assert list(match.positions) == sorted(set(match.positions))
        assert "".join(match.name[p] for p in match.positions).lower() == query.lower()


@given(st.lists(LETTERS, max_size=12), st.lists(LETTERS, min_size=1, max_size=6))
def test_typing_on_gives_what_a_fresh_search_gives(names, queries):
    """The finder narrows the previous matches when a query extends the last one: never a different answer."""
    typed = FuzzyFinder(names)
    for query in queries:
        assert typed.search(query) == FuzzyFinder(names).search(query)


def test_case_does_not_matter_and_the_name_keeps_its_case():
    [match] = FuzzyFinder(["Build-API"]).search("bapi").matches
    assert match.name == "Build-API" and match.positions == (0, 6, 7, 8)
    assert best(["lint"], "LINT") == ["lint"]


def test_empty_query_lists_names_in_the_given_order_up_to_the_limit():
    found = FuzzyFinder(NAMES).search("  ", limit=3)
    assert [m.name for m in found.matches] == NAMES[:3] and found.count == len(NAMES)
    assert all(m.positions == () for m in found.matches)


def test_letters_in_one_run_beat_scattered_letters():
    assert best(["xaxpxix", "xxapix"], "api") == ["xxapix", "xaxpxix"]


def test_word_starts_beat_letters_inside_words():
    assert best(["xbxaxl", "build-api-linux"], "bal")[0] == "build-api-linux"
    [match] = FuzzyFinder(["test-shard"]).search("s").matches
    assert match.positions == (5,)  # the `s` starting a word, not the one in `test`


def test_the_match_is_pulled_to_a_compact_run_near_its_end():
    [match] = FuzzyFinder(["build-api-linux"]).search("lin").matches
    assert match.positions == (10, 11, 12)  # `linux`, not `l` of `build`, `i` of `api`
    [match] = FuzzyFinder(["rapid-api"]).search("api").matches
    assert match.positions == (6, 7, 8)  # the word `api`, not the letters inside `rapid`


def test_the_start_of_the_name_counts_most_then_shorter_names_win_ties():
    assert best(["xapi", "api-x", "x-api"], "api") == ["api-x", "x-api", "xapi"]
    assert best(["api-server", "api"], "api") == ["api", "api-server"]


def test_ties_keep_the_given_order():
    assert best(["shard-2", "shard-1", "shard-3"], "shard") == ["shard-2", "shard-1", "shard-3"]


def test_regex_characters_in_a_query_are_letters():
    names = ["a.b", "axb", "a]b", "a^b", "a\\b", "a-b"]
    assert best(names, ".") == ["a.b"]
    assert best(names, "a]") == ["a]b"]
    assert best(names, "^b") == ["a^b"]
    assert best(names, "\\") == ["a\\b"]
    assert best(names, "a-") == ["a-b"]


def test_no_match():
    found = FuzzyFinder(NAMES).search("zzz")
    assert found.matches == [] and found.count == 0
