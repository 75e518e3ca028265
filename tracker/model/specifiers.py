"""PEP 440 versions and specifiers as the manifest writes them, parsed once each, and
whether a specifier can match anything at all.

A manifest repeats the same few windows and releases many times (the scale benchmark:
500 entries, a dozen distinct specifiers), so parsing is memoized by text. Parsed values
are shared: nothing may mutate them.
"""

from __future__ import annotations

import functools

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


@functools.lru_cache(maxsize=4096)
def specifier_set(text: str) -> SpecifierSet:
    """``SpecifierSet(text)``, memoized; raises ``InvalidSpecifier`` (not cached) on bad text."""
    return SpecifierSet(text)


@functools.lru_cache(maxsize=4096)
def version(text: str) -> Version:
    """``Version(text)``, memoized; raises ``InvalidVersion`` (not cached) on bad text."""
    return Version(text)


@functools.cache  # a pure function of the specifier, asked for the same windows again and again
def satisfiable(spec: SpecifierSet) -> bool:
    """Whether any release version can satisfy ``spec``.

    The candidates are the versions the clauses name and their immediate
    neighbours (one more in the last place, one less, one more place appended):
    if none of those satisfies every clause, no version does.
    """
    candidates: set[Version] = {Version("0")}
    for clause in spec:
        text = clause.version.rstrip(".*")
        try:
            base = Version(text)
        except InvalidVersion:
            return True  # arbitrary equality (===): nothing to reason about
        release = list(base.release)
        candidates.add(Version(".".join(map(str, release))))
        candidates.add(Version(".".join(map(str, release + [1]))))
        bumped = release[:-1] + [release[-1] + 1]
        candidates.add(Version(".".join(map(str, bumped))))
        if release[-1] > 0:
            lowered = release[:-1] + [release[-1] - 1]
            candidates.add(Version(".".join(map(str, lowered + [999999]))))
    return any(spec.contains(candidate, prereleases=True) for candidate in candidates)
