"""A release's census: its sites (``tracker.census.scan``), each matched to the ``[[tracked]]``
entry that covers it, and, for a covered one, whether it is dead at the release's own XPU
pins; and what changed between two releases (``compare``).

An entry covers a site when the site is in the entry's ``file`` and its lines hold the entry's
``marker``. Where no comment makes a site of an entry's marker but the marker is in XPU-only
code (vLLM synchronizes a stream under ``if current_platform.is_xpu():`` and says nothing), that
code is a site because the manifest says it is a workaround. Sites are matched across releases
by what they say and hold, never by line: code moves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

from packaging.version import InvalidVersion, Version

from tracker.census import overrides, pinned
from tracker.census.files import is_xpu_module
from tracker.census.scan import FileScan, Site, collector_paused
from tracker.census.siblings import comment_lines, siblings
from tracker.model.manifest import InlineWorkaround, Manifest
from tracker.model.tracked import dead_at
from tracker.model.vocabulary import SCHEMA

# How alike two sites' words must be to be one site that changed (Jaccard of their word sets):
# in the same file, and across files (a site that moved and changed at once).
SAME_FILE_LIKENESS = 0.5
MOVED_LIKENESS = 0.8
# A site that grew or shrank in the same file: the smaller one's words nearly all in the other's.
GROWN_SHARE = 0.7
GROWN_WORDS = 12
# A word that more sites than this hold (in the index searched) tells no site from another: it is
# not looked up, so that sites made of common words cost no more than the others.
COMMON_WORD_SITES = 64


@dataclass(frozen=True)
class CountedSite:
    site: Site
    tracked: str | None = None  # the id of the [[tracked]] entry that covers it
    dead: bool | None = None  # covered: dead at the release's own XPU pins (None: cannot be told)
    dead_detail: str | None = None  # covered: the sentence why, as the table prints it below itself
    partly_dead: bool = False  # covered: the pins reach its dead_when, but its `remaining` part is needed
    decided_by_pins: str | None = None  # a torch version test guards it, and the release's pins decide it: why

    @property
    def dead_since(self) -> str | None:
        """What the table says of a dead or partly dead site (``dead_detail``); None for any other."""
        return self.dead_detail if self.dead or self.partly_dead else None

    def as_json(self) -> dict[str, Any]:
        site = self.site
        return {"file": site.file, "line": site.line, "end_line": site.end_line, "summary": site.summary,
                "references": list(site.references), "tracked": self.tracked, "dead": self.dead,
                "partly_dead": self.partly_dead, "dead_since": self.dead_since, "kind": site.kind,
                "confidence": site.confidence, "decided_by_pins": self.decided_by_pins}


@dataclass
class Census:
    release: str | None  # vLLM's version, as the source says it
    source: str  # what was read: "vllm-0.34.0.tar.gz", a path
    pins: dict[str, Version]
    sites: list[CountedSite]
    unplaced: list[str] = field(default_factory=list)  # tracked entries whose marker is in no site
    since: Census | None = None
    new: list[CountedSite] = field(default_factory=list)
    gone: list[CountedSite] = field(default_factory=list)
    # The text of each file that holds a site, as read (``census --adopt`` chooses markers in it).
    sources: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def untracked_with_reference(self) -> list[CountedSite]:
        """Trackable and not tracked: untracked sites that name an upstream reference (``--check``)."""
        return [counted for counted in self.sites if counted.tracked is None and counted.site.references]

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"schema": SCHEMA, "release": self.release,
                                 "sites": [counted.as_json() for counted in self.sites]}
        if self.since is not None:
            shown["new"] = [counted.as_json() for counted in self.new]
            shown["gone"] = [counted.as_json() for counted in self.gone]
        return shown


def take(manifest: Manifest, files: Iterable[tuple[str, str]], *, release: str | None, source: str,
         pins: Mapping[str, Version]) -> Census:
    """The census of a release whose ``files`` are (path in the tree, text) pairs."""
    by_file: dict[str, list[InlineWorkaround]] = {}
    for inline in manifest.tracked:
        by_file.setdefault(inline.file, []).append(inline)
    counted: list[CountedSite] = []
    unplaced: list[str] = []
    sources: dict[str, str] = {}
    label = release or "of unknown version"
    tests: dict[str, str] = {}
    for file, text, generic, documented in _with_siblings(files):
        tests.update(pinned.version_tests(text))
        scan = FileScan(file, text, generic, documented)
        entries = by_file.pop(file, [])
        sites = list(scan.sites)
        covering: dict[int, InlineWorkaround] = {}
        for inline in entries:
            marker = _collapsed(inline.marker)
            index = next((i for i, site in enumerate(sites) if marker in site.code), None)
            if index is None:
                index = _uncommented(scan, inline, sites)
            if index is None:
                unplaced.append(f"{inline.id}: {_where_marker(scan, inline)}")
            else:
                covering.setdefault(index, inline)
        if sites:
            sources[file] = scan.source
        for index, site in enumerate(sites):
            cover = covering.get(index)
            if cover is None:
                counted.append(CountedSite(site))
            else:
                verdict = dead_at(cover, pins, label)
                if site.summary.startswith("(no comment) "):  # found by its shape: the entry says what it is
                    site = replace(site, summary=f"(no comment) {cover.title}")
                counted.append(CountedSite(site, cover.id, verdict.dead, verdict.detail, verdict.partly))
    unplaced += [f"{inline.id}: {inline.file} is not in this release" for entries in by_file.values()
                 for inline in entries]
    version = _version(release)
    carried = {inline.id for inline in manifest.tracked
               if version is None or inline.carried_in.contains(version, prereleases=True)}
    unplaced = [line for line in unplaced if line.partition(":")[0] in carried]
    counted = [replace(c, decided_by_pins=pinned.decided(c.site.code, tests, pins)) for c in counted]
    counted.sort(key=lambda c: (c.site.file, c.site.line))
    return Census(release, source, dict(pins), counted, unplaced, sources=sources)


def _with_siblings(files: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str, frozenset[str], frozenset[str]]]:
    """``files`` each with the comment lines of its sibling modules (``siblings.siblings``; none for a
    module that is not XPU-only) and the methods the modules of its folder document as a platform's
    fallback (``overrides.documented``): the XPU-only modules are read last, when every sibling's
    comment lines are known. Each file's comment lines are kept (a small part of its text), never the text."""
    said: dict[str, frozenset[str]] = {}
    documented: dict[str, frozenset[str]] = {}
    deferred: list[tuple[str, str]] = []
    for file, text in files:
        if is_xpu_module(file):
            deferred.append((file, text))
            continue
        said[file] = frozenset(comment_lines(text.splitlines()))
        for folder, names in overrides.documented(file, text).items():
            documented[folder] = documented.get(folder, frozenset()) | names
        yield file, text, frozenset(), frozenset()
    found = siblings([file for file, _ in deferred], said)
    for file, text in deferred:
        yield (file, text, frozenset().union(*(said[other] for other in found.get(file, []))),
               documented.get(str(PurePosixPath(file).parent), frozenset()))


def _uncommented(scan: FileScan, inline: InlineWorkaround, sites: list[Site]) -> int | None:
    """The XPU-only code holding ``inline``'s marker as a site of its own (added to ``sites``), when
    no comment made one; None when the marker is not in XPU-only code."""
    line = _marker_line(scan, inline.marker)
    if line is None:
        return None
    site = scan.site_at(line, f"(no comment) {inline.title}")
    if site is None:
        return None
    sites.append(site)
    return len(sites) - 1


def _marker_line(scan: FileScan, marker: str) -> int | None:
    return next((number for number, text in enumerate(scan.lines, 1) if marker in text), None)


def _where_marker(scan: FileScan, inline: InlineWorkaround) -> str:
    line = _marker_line(scan, inline.marker)
    if line is None:
        return f"{inline.file} has no {inline.marker!r}"
    return f"{inline.file}:{line} has {inline.marker!r}, outside any XPU-only code this census reads as a workaround"


def _version(release: str | None) -> Version | None:
    try:
        return Version(release) if release else None
    except InvalidVersion:
        return None


def _collapsed(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ across releases


def compare(new: Census, old: Census) -> Census:
    """``new`` with the sites new since ``old`` and the sites gone from it, matched by content:
    the same [[tracked]] entry; the same words in the same file, then in any file; then words
    alike enough in the same file, then in any file; then, in the same file, a site whose words
    are nearly all in the other's (one that grew or shrank: a comment added to the code it was,
    a part dropped). Each site's words are read once, and alike
    pairs are found through an index of their rarest words: time near-linear in the sites (the
    cycle collector paused meanwhile, as for reading a file: ``scan.collector_paused``)."""
    with collector_paused():
        return _compared(new, old)


def _compared(new: Census, old: Census) -> Census:
    unmatched_new = dict.fromkeys(range(len(new.sites)))  # ordered sets
    unmatched_old = dict.fromkeys(range(len(old.sites)))
    said_new = [_said(counted) for counted in new.sites]
    said_old = [_said(counted) for counted in old.sites]

    def pair(key_new: Callable[[int], Hashable | None], key_old: Callable[[int], Hashable | None]) -> None:
        """Each unmatched new site with the first unmatched old one of the same key, in order."""
        waiting: dict[Hashable, list[int]] = {}
        for j in reversed(unmatched_old):
            key = key_old(j)
            if key is not None:
                waiting.setdefault(key, []).append(j)
        for i in list(unmatched_new):
            key = key_new(i)
            candidates = waiting.get(key) if key is not None else None
            if candidates:
                j = candidates.pop()
                del unmatched_new[i], unmatched_old[j]

    pair(lambda i: new.sites[i].tracked, lambda j: old.sites[j].tracked)
    pair(lambda i: (new.sites[i].site.file, said_new[i]), lambda j: (old.sites[j].site.file, said_old[j]))
    pair(lambda i: said_new[i], lambda j: said_old[j])
    words_new = [_words(counted) for counted in new.sites]
    words_old = [_words(counted) for counted in old.sites]
    for same_file in (True, False):
        _pair_alike(new, old, words_new, words_old, unmatched_new, unmatched_old, same_file=same_file)
    _pair_grown(new, old, words_new, words_old, unmatched_new, unmatched_old)
    new.since = old
    new.new = [new.sites[i] for i in unmatched_new]
    new.gone = [old.sites[j] for j in unmatched_old]
    return new


def _prefixes(words_new: list[frozenset[str]], words_old: list[frozenset[str]], unmatched_new: dict[int, None],
              unmatched_old: dict[int, None], share: float) -> Callable[[frozenset[str]], list[str]]:
    """Prefix filtering: a word set's rarest words (counted over the unmatched sites of both sides),
    as many as two sets alike at ``share`` must have one of in common."""
    frequency: dict[str, int] = {}
    for words in [*(words_new[i] for i in unmatched_new), *(words_old[j] for j in unmatched_old)]:
        for word in words:
            frequency[word] = frequency.get(word, 0) + 1

    def prefix(words: frozenset[str]) -> list[str]:
        ordered = sorted(words, key=lambda word: (frequency[word], word))
        return ordered[:len(ordered) - math.ceil(share * len(ordered) - 1e-9) + 1]

    return prefix


def _pair_alike(new: Census, old: Census, words_new: list[frozenset[str]], words_old: list[frozenset[str]],
                unmatched_new: dict[int, None], unmatched_old: dict[int, None], *, same_file: bool) -> None:
    """Pair the most alike first, each at least as alike as the threshold (Jaccard of word sets).

    Two sets alike at ``t`` share a word among the first ``|x| - ceil(t |x|) + 1`` of each, words
    ordered rarest first (prefix filtering, as set-similarity joins do): only pairs sharing such
    a word, and of sizes within ``t`` of each other, are scored; a word held by more than
    ``COMMON_WORD_SITES`` sites is not looked up (two sites alike only by common words are not
    paired)."""
    threshold = SAME_FILE_LIKENESS if same_file else MOVED_LIKENESS
    prefix = _prefixes(words_new, words_old, unmatched_new, unmatched_old, threshold)

    def place(site: CountedSite) -> str:
        return site.site.file if same_file else ""

    index: dict[tuple[str, str], list[int]] = {}
    for j in unmatched_old:
        for word in prefix(words_old[j]):
            index.setdefault((place(old.sites[j]), word), []).append(j)
    scored = []
    for i in unmatched_new:
        first = words_new[i]
        seen: set[int] = set()
        for word in prefix(first):
            postings = index.get((place(new.sites[i]), word), [])
            for j in postings if len(postings) <= COMMON_WORD_SITES else ():
                if j in seen:
                    continue
                seen.add(j)
                second = words_old[j]
                if not threshold * len(first) <= len(second) <= len(first) / threshold:
                    continue
                union = len(first | second)
                likeness = len(first & second) / union if union else 0.0
                if likeness >= threshold:
                    scored.append((-likeness, i, j))
    for _, i, j in sorted(scored):
        if i in unmatched_new and j in unmatched_old:
            del unmatched_new[i], unmatched_old[j]


def _pair_grown(new: Census, old: Census, words_new: list[frozenset[str]], words_old: list[frozenset[str]],
                unmatched_new: dict[int, None], unmatched_old: dict[int, None]) -> None:
    """Pair sites of the same file, most contained first, when the smaller one's words (at least
    ``GROWN_WORDS`` of them) are nearly all (``GROWN_SHARE``) in the larger one's. The smaller
    one's rarest words are looked up in an index of the other side's words (prefix filtering)."""
    prefix = _prefixes(words_new, words_old, unmatched_new, unmatched_old, GROWN_SHARE)

    def indexed(sites: list[CountedSite], words: list[frozenset[str]], which: dict[int, None]
                ) -> dict[tuple[str, str], list[int]]:
        index: dict[tuple[str, str], list[int]] = {}
        for k in which:
            for word in words[k]:
                index.setdefault((sites[k].site.file, word), []).append(k)
        return index

    by_old, by_new = indexed(old.sites, words_old, unmatched_old), indexed(new.sites, words_new, unmatched_new)
    scored: dict[tuple[int, int], float] = {}
    for sites, side, which, other, flip in ((new.sites, words_new, unmatched_new, by_old, False),
                                             (old.sites, words_old, unmatched_old, by_new, True)):
        for k in which:
            smaller = side[k]
            if len(smaller) < GROWN_WORDS:
                continue
            for word in prefix(smaller):
                postings = other.get((sites[k].site.file, word), [])
                for m in postings if len(postings) <= COMMON_WORD_SITES else ():
                    i, j = (m, k) if flip else (k, m)
                    if (i, j) in scored:
                        continue
                    larger = words_old[j] if not flip else words_new[i]
                    share = len(smaller & larger) / len(smaller)
                    if share >= GROWN_SHARE and len(larger) >= len(smaller):
                        scored[(i, j)] = share
    for (i, j), _ in sorted(scored.items(), key=lambda item: (-item[1], item[0])):
        if i in unmatched_new and j in unmatched_old:
            del unmatched_new[i], unmatched_old[j]


def _said(counted: CountedSite) -> str:
    """What a site says, for matching: its comments and strings, else its code; case and spacing aside."""
    return " ".join((counted.site.said or counted.site.code).lower().split())


def _words(counted: CountedSite) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", f"{counted.site.said} {counted.site.code}".lower()))
