"""``satisfiable`` (tracker.model.specifiers) against brute force over a grid of release versions: packaging's
``is_unsatisfiable`` and the hand-written candidates both, and where they differ."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tracker.model.specifiers import candidates_satisfiable, satisfiable, specifier_set, version

# Every release version with 1 to 3 parts of 0..5, and with 4 parts of 0..2: between any two
# bounds written with at most two parts of 0..3 (and a few exclusions) there is one of these
# (``>1,<1.0.1`` needs 1.0.0.1), so a specifier over such bounds matches some release version
# exactly when it matches one of these.
GRID = [Version(".".join(map(str, parts))) for length, top in ((1, 6), (2, 6), (3, 6), (4, 3))
        for parts in itertools.product(range(top), repeat=length)]

NUMBERS = st.lists(st.integers(0, 3), min_size=1, max_size=2).map(lambda parts: ".".join(map(str, parts)))
TWO_PARTS = st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda parts: f"{parts[0]}.{parts[1]}")
CLAUSES = st.one_of(
    st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), NUMBERS).map("".join),
    st.tuples(st.sampled_from(["==", "!="]), NUMBERS).map(lambda c: f"{c[0]}{c[1]}.*"),
    TWO_PARTS.map(lambda v: f"~={v}"),
    NUMBERS.map(lambda v: f"==={v}"),
)


def brute_force(spec: SpecifierSet) -> bool:
    return any(spec.contains(candidate, prereleases=True) for candidate in GRID)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(CLAUSES, min_size=1, max_size=3))
@example([">=0.25.0", "<0.23.0"])
@example([">0.24.0", "<0.25.0", "!=0.24.*"])
@example(["===1.2", ">2"])
@example(["~=1.2", "!=1.*"])
@example([">1", "<1.0.1"])
def test_satisfiable_agrees_with_brute_force_over_a_version_grid(clauses):
    spec = SpecifierSet(",".join(clauses))
    assert satisfiable(spec) == brute_force(spec), spec
    assert candidates_satisfiable(spec) == brute_force(spec), spec
    if not any(clause.operator == "===" for clause in spec):
        assert packaging_satisfiable(spec) == brute_force(spec), spec


def packaging_satisfiable(spec: SpecifierSet) -> bool:
    return not SpecifierSet(str(spec), prereleases=False).is_unsatisfiable()


def test_arbitrary_equality_with_text_that_is_no_version_is_where_packaging_differs():
    # packaging: a legacy package could be versioned so; the components here cannot.
    spec = SpecifierSet("===not-a-version")
    assert packaging_satisfiable(spec) and not candidates_satisfiable(spec) and not satisfiable(spec)


@pytest.mark.parametrize("text", ["==0.10.1.post1", "==2.13.0+xpu", ">=0.10.1.post1,<0.10.1.post2"])
def test_post_releases_and_local_versions_satisfy_a_window(text):
    # Beyond the grid: packaging's answer (the candidates never try them).
    assert satisfiable(SpecifierSet(text))


def test_an_empty_range_between_equal_bounds_is_not_satisfiable():
    assert not satisfiable(SpecifierSet(">=0.28.0,<0.28.0"))


def test_arbitrary_equality_matches_only_its_own_version():
    assert satisfiable(SpecifierSet("===2.13.0"))
    assert not satisfiable(SpecifierSet("===2.13.0,<2.13"))
    assert not satisfiable(SpecifierSet("===not-a-version"))


def test_parsing_is_memoized_by_text():
    assert specifier_set("<0.28.0") is specifier_set("<0.28.0")
    assert version("2.13.0") is version("2.13.0")
