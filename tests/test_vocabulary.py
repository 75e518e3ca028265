"""The closed vocabularies' one check that is code rather than a list: what an id may be."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.model.vocabulary import entry_label, is_id

# The documented rule for an id (docs/manifest.md), as the regular expression it was before is_id replaced it.
ID_RULE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
ALPHABET = st.sampled_from("az09-_A\n .é٣ⅷ")  # near misses: other cases, separators, non-ASCII digits/letters


@given(st.one_of(st.text(ALPHABET, max_size=12), st.from_regex(ID_RULE, fullmatch=True), st.text(max_size=8)))
def test_is_id_is_the_rule(value):
    assert is_id(value) == (ID_RULE.fullmatch(value) is not None)


@pytest.mark.parametrize(("value", "expected"), [
    ("some-workaround", True), ("a", True), ("a1-2b-3", True), ("three-word-id", True),
    ("", False), ("-a", False), ("a-", False), ("a--b", False), ("1a", False), ("A", False), ("a_b", False),
    ("a b", False), ("é", False), ("a٣", False), ("abc\n", False), (":", False), (None, False), (7, False),
])
def test_is_id_cases(value, expected):
    assert is_id(value) is expected


def test_an_entry_is_named_by_its_id_only_when_well_formed():
    assert entry_label("workaround", "some-workaround", 3) == "workaround[some-workaround]"
    assert entry_label("workaround", "bad\nid", 3) == "workaround[3]"
