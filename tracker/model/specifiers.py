"""PEP 440 versions and specifiers as the manifest writes them, parsed once each, and
whether a specifier can match anything at all.

A manifest repeats the same few windows and releases many times (the scale benchmark:
500 entries, a dozen distinct specifiers), so parsing is memoized by text. Parsed values
are shared: nothing may mutate them.
"""

from __future__ import annotations

import functools
import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tracker import echoed

# No real version has a number of more than 20 digits; Python refuses to convert one of
# more than 4300 (a ValueError, not packaging's InvalidVersion), so such text is refused here.
_TOO_LONG = re.compile(r"\d{21}")
LENGTH_LIMIT = 256


def bounded(text: str) -> str:
    """``text`` if a version or specifier could be written so; raises ``ValueError`` otherwise."""
    if len(text) > LENGTH_LIMIT:
        raise ValueError(f"longer than {LENGTH_LIMIT} characters")
    if _TOO_LONG.search(text):
        raise ValueError("a number of more than 20 digits")
    return text


@functools.lru_cache(maxsize=4096)
def specifier_set(text: str) -> SpecifierSet:
    """``SpecifierSet(text)``, memoized; raises ``InvalidSpecifier`` (not cached) on bad text."""
    try:
        bounded(text)
    except ValueError as error:
        raise InvalidSpecifier(f"{echoed(text)}: {error}") from None
    return SpecifierSet(text)


@functools.lru_cache(maxsize=4096)
def version(text: str) -> Version:
    """``Version(text)``, memoized; raises ``InvalidVersion`` (not cached) on bad text."""
    try:
        bounded(text)
    except ValueError as error:
        raise InvalidVersion(f"{echoed(text)}: {error}") from None
    return Version(text)


@functools.cache  # a pure function of the specifier, asked for the same windows again and again
def satisfiable(spec: SpecifierSet) -> bool:
    """Whether any version that is not a pre-release can satisfy ``spec``.

    packaging's ``is_unsatisfiable`` (its pre-releases excluded) answers, except where a
    clause is arbitrary equality (``===X``): packaging counts any string ``X`` as a version a
    legacy package might have, where the components here have PEP 440 versions only, so
    ``===`` is answered by ``candidates_satisfiable``. (tests/test_specifiers.py checks both
    against brute force over a version grid, and names the cases where they differ.)
    """
    if any(clause.operator == "===" for clause in spec):
        return candidates_satisfiable(spec)
    return not SpecifierSet(str(spec), prereleases=False).is_unsatisfiable()


def candidates_satisfiable(spec: SpecifierSet) -> bool:
    """Whether any release version can satisfy ``spec``, by trying candidates.

    The candidates are the versions the clauses name and their immediate
    neighbours (one more in the last place, one less, one more place appended):
    if none of those satisfies every clause, no release version does. Arbitrary equality
    (``===X``) matches the one version spelled exactly ``X``, if ``X`` is one. Post-releases
    and local versions are not candidates (packaging's answer covers them: ``satisfiable``).
    """
    candidates: set[Version] = {Version("0")}
    for clause in spec:
        if clause.operator == "===":
            try:
                return spec.contains(Version(clause.version), prereleases=True)
            except InvalidVersion:
                return False
        text = clause.version.rstrip(".*")
        try:
            base = Version(text)
        except InvalidVersion:
            return True  # not a version packaging accepts in a specifier: nothing to reason about
        release = list(base.release)
        candidates.add(Version(".".join(map(str, release))))
        candidates.add(Version(".".join(map(str, release + [1]))))
        bumped = release[:-1] + [release[-1] + 1]
        candidates.add(Version(".".join(map(str, bumped))))
        if release[-1] > 0:
            lowered = release[:-1] + [release[-1] - 1]
            candidates.add(Version(".".join(map(str, lowered + [999999]))))
    return any(spec.contains(candidate, prereleases=True) for candidate in candidates)
