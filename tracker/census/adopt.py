"""``census --adopt``: the ``[[tracked]]`` entries a maintainer would write for a release's sites.

For each site adopted (by default every untracked one that names an upstream reference; or
those chosen by a line they hold), one entry:

- ``id``: ``vllm-``, the file's name, then the number of the issue or pull request it waits on
  (else the first words of its summary), unique in the manifest;
- ``title``: the site's summary, on one line;
- ``file``, and a ``marker``: a fragment of one of the site's lines, found verbatim in the file and
  unique in it where one is: the reference as the comment writes it, else the comment's words,
  else the statement that is the workaround (``marker_of``);
- ``carried_in``: from the releases the census read (``carried_in``);
- ``waits_on`` (the first ``owner/repo#N``; any other named in ``note``), else ``link`` (an
  ``https://`` address); ``dead_when`` from a ``TODO(torch>=2.14)``-style condition.

``entries_text`` writes them as TOML (each with a comment naming its site); ``with_tracked``
adds them to a manifest's text with tomlkit, every comment and byte of the manifest kept.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import tomlkit
from packaging.version import InvalidVersion, Version

from tracker import echoed, one_line
from tracker.census.count import Census, CountedSite
from tracker.census.notes import lines as numbered_lines
from tracker.census.wording import SHORT_NAMES
from tracker.escape import toml_string
from tracker.model.keys import LENGTH_LIMITS, REF, RELEASED_IN, TRACKED_FILE
from tracker.model.manifest import Manifest
from tracker.model.versions import COMPONENTS
from tracker.model.vocabulary import ErrorKind, ToolError

MARKER_LENGTH = 200  # the longest marker taken whole from a line; a longer line gives its beginning
TITLE_LENGTH = 120
ID_LENGTH = LENGTH_LIMITS["id"] - 4  # an adopted id's base: room for "-NNN" within lint's limit
_STOP_WORDS = frozenset({"a", "an", "the", "to", "of", "on", "in", "for", "and", "or", "is", "are", "be", "it",
                         "this", "that", "we", "so", "if", "no", "not", "with", "as", "by", "at", "note"})
# A line that only opens or closes a platform check's branch: vLLM keeps it after dropping a workaround.
_PLATFORM_CHECK = re.compile(r"^(?:if|elif|else|match|case)\b.*(?:xpu|XPU)|^else\s*:")
_CONDITION = re.compile(r"TODO\([^)\n]{1,100}\)")


class NotAdoptable(ToolError, ValueError):
    """What was asked cannot be adopted: a ``--site`` that no site holds or one already tracked, a
    release of unknown version."""

    kind = ErrorKind.BAD_INPUT


@dataclass(frozen=True)
class Adopted:
    """One site and the ``[[tracked]]`` entry written for it (its keys in the manifest's order), and
    what a maintainer must know of it (None: nothing)."""

    counted: CountedSite
    entry: dict[str, str]
    warning: str | None = None

    @property
    def id(self) -> str:
        return self.entry["id"]


def adopted(census: Census, manifest: Manifest, chosen: list[tuple[str, int]] | None = None) -> list[Adopted]:
    """The entries for ``census``'s untracked sites that name an upstream reference, or for the
    sites holding the ``chosen`` (file, line) pairs; ``NotAdoptable`` for a pair no untracked site
    holds, or a release whose version is unknown (``carried_in`` could not be said)."""
    if census.release is None or _version(census.release) is None:
        raise NotAdoptable(f"{census.source} declares no vLLM version (PKG-INFO or vllm/_version.py), so "
                           "carried_in cannot be said")
    if chosen is None:
        sites = census.untracked_with_reference
    else:
        sites = []
        for file, line in chosen:
            found = next((c for c in census.sites if c.site.file == file and c.site.line <= line <= c.site.end_line),
                         None)
            if found is None:
                raise NotAdoptable(f"--site {echoed(f'{file}:{line}', quoted=False)}: no site of vLLM "
                                   f"{echoed(census.release, quoted=False)} holds that line (`xpu-workarounds census` "
                                   "lists them)")
            if found.tracked is not None:
                raise NotAdoptable(f"--site {echoed(f'{file}:{line}', quoted=False)}: that site is tracked already, as "
                                   f"{found.tracked}")
            if found not in sites:
                sites.append(found)
    taken = {entry.id for entry in manifest.tracked} | set(manifest.ids)  # an id names one entry, of either kind
    written = []
    for counted in sites:
        if not TRACKED_FILE.fullmatch(counted.site.file):
            raise NotAdoptable(f"{one_line(counted.site.file)}: a [[tracked]] entry's file is a .py path of letters, "
                               "digits, '_' and '/' under vllm/, which this is not")
        identifier = _id(counted, taken)
        taken.add(identifier)
        entry = _entry(census, counted, identifier)
        written.append(Adopted(counted, entry, _elsewhere(census, counted, entry["marker"])))
    return written


def _elsewhere(census: Census, counted: CountedSite, marker: str) -> str | None:
    """A warning when ``marker`` is first found before the site (no line of the site is in it alone):
    the entry would cover the other site, as the census matches a marker to the first site holding it."""
    source, site = census.sources.get(counted.site.file, ""), counted.site
    at = source.find(marker)
    line = source.count("\n", 0, at) + 1 if at >= 0 else None
    if line is None or line >= site.line:
        return None
    return (f"{site.where}: no line of it is in this file once, and its marker is first found at line {line}, "
            "before it: the entry covers the site there; give it a marker only this site holds")


def carried_note(census: Census) -> str:
    """One line: which releases ``carried_in`` was judged from, and which were not read."""
    since = census.since.release if census.since is not None else None
    older, newer = _version(since or ""), _version(census.release or "")
    if older is not None and newer is not None and older < newer:
        read, unread = f"vLLM {since} and {census.release}", f"releases before {since}, and any between the two,"
    else:
        read, unread = f"vLLM {census.release}", f"releases before {census.release}"
    return (f"carried_in holds for the releases read ({read}); {unread} were not read: `xpu-workarounds check "
            "vllm==W` on an earlier release W says whether it carries each marker")


def _entry(census: Census, counted: CountedSite, identifier: str) -> dict[str, str]:
    site = counted.site
    marker = marker_of(counted, census.sources.get(site.file, ""))
    entry = {"id": identifier, "title": _title(counted), "file": site.file, "marker": marker,
             "carried_in": carried_in(census, counted, marker)}
    numbered = [ref for ref in site.references if REF.fullmatch(ref)]
    if numbered:
        entry["waits_on"] = numbered[0]
    else:
        link = next((ref for ref in site.references if ref.startswith("https://") and ref.isprintable()), None)
        if link is not None:
            entry["link"] = link
    condition = next((ref for ref in site.references if (found := RELEASED_IN.fullmatch(ref)) is not None
                      and found["component"] in COMPONENTS and _version(found["version"]) is not None), None)
    if condition is not None:
        entry["dead_when"] = condition
    if len(numbered) > 1:
        entry["note"] = "the site also names " + ", ".join(numbered[1:])
    return entry


def carried_in(census: Census, counted: CountedSite, marker: str) -> str:
    """``>=X`` from the first release read that carries the site's ``marker``: the release whose
    census this is, or, with ``--since`` an older one, that one where a site of the same file there
    holds the marker too (a site ``--since`` shows as new arrived in this release)."""
    since = census.since
    if since is not None and since.release is not None and counted not in census.new:
        older, newer = _version(since.release), _version(census.release or "")
        marker = " ".join(marker.split())
        if older is not None and newer is not None and older < newer and any(
                other.site.file == counted.site.file and marker in other.site.code for other in since.sites):
            return f">={since.release}"
    return f">={census.release}"


def marker_of(counted: CountedSite, source: str) -> str:
    """A fragment of one of the site's lines, verbatim in ``source`` (its file's text), that the
    census finds in this site: the first of the candidates (``_candidates``) that is unique in the
    file, else the first whose first occurrence is in the site, else the first."""
    site = counted.site
    every, starts = _numbered(source)
    lines = every[site.line - 1:site.end_line]
    candidates = [text for text in _candidates(counted, lines) if " ".join(text.split()) in site.code]
    if not candidates:
        stripped = next((line.strip() for line in lines if line.strip()), site.code)
        return stripped[:MARKER_LENGTH].rstrip()
    offset = starts[min(site.line, len(starts)) - 1]
    first_in_site = None
    for text in candidates:
        at = source.find(text)
        if at >= 0 and source.find(text, at + 1) < 0:
            return text
        if first_in_site is None and at >= offset:
            first_in_site = text
    return first_in_site or candidates[0]


@functools.lru_cache(maxsize=4)
def _numbered(source: str) -> tuple[list[str], list[int]]:
    """A file's lines as the census numbers them, and where each begins in its text (read once per file)."""
    lines = numbered_lines(source)
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    return lines, starts


def _candidates(counted: CountedSite, lines: list[str]) -> list[str]:
    """What a marker can be, best first: each reference as a line writes it, then each comment's words
    (they go with the workaround they describe), then each line of code that is not a platform
    check; every one printable, on one line."""
    found = [fragment for ref in counted.site.references for line in lines
             if (fragment := _reference_fragment(line, ref)) is not None]
    code, comments = [], []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            words = stripped.lstrip("#").strip()
            if len(words) >= 12:
                comments.append(words)
        elif len(stripped) >= 8 and re.search(r"[A-Za-z_]{3}", stripped) and not _PLATFORM_CHECK.match(stripped):
            code.append(stripped)
    summary = " ".join(counted.site.summary.split())
    comments.sort(key=lambda words: " ".join(words.split()) not in summary)  # the sentence that makes it a site first
    shortened = [text if len(text) <= MARKER_LENGTH else text[:MARKER_LENGTH // 2].rstrip()
                 for text in [*found, *comments, *code]]
    return [text for text in dict.fromkeys(shortened) if text and text.isprintable()]


def _reference_fragment(line: str, ref: str) -> str | None:
    """``ref`` as ``line`` writes it (``pytorch#123``, a GitHub address, "pytorch issue 123",
    ``TODO(torch>=2.14)``), or None when the line does not name it."""
    if ref in line:
        return ref
    named = re.fullmatch(r"(?P<repository>[^#\s]+)#(?P<number>[0-9]+)", ref)
    if named is None:  # a version condition
        return next((found.group() for found in _CONDITION.finditer(line)
                     if "".join(found.group()[5:-1].split()) == ref), None)
    repository, number = named["repository"], named["number"]
    names = "|".join(re.escape(name) for name in [repository, *(short for short, full in SHORT_NAMES.items()
                                                                  if full == repository)])
    for pattern in (rf"{re.escape(repository)}/(?:issues|pull)/{number}(?!\d)",
                    rf"(?<![\w/.-])(?:{names})#{number}(?!\d)",
                    rf"(?<![\w/.-])(?:{names})[ \t]{{1,3}}(?:issues?|PRs?|pull requests?|pulls?|bugs?)[ \t]{{0,3}}:?"
                    rf"[ \t]{{0,3}}#?[ \t]?{number}(?!\d)"):
        found = re.search(pattern, line, re.IGNORECASE)
        if found is not None:
            return found.group()
    return None


def at_a_word(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut after a whole word (an ellipsis where it was)."""
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _title(counted: CountedSite) -> str:
    summary = counted.site.summary.removeprefix("(no comment) ")
    text = at_a_word(" ".join("".join(char if char.isprintable() else " " for char in summary).split()).rstrip("."),
                     TITLE_LENGTH + 1)
    return text or f"vLLM's inline XPU workaround in {counted.site.file}"


def _id(counted: CountedSite, taken: set[str]) -> str:
    path = PurePosixPath(counted.site.file)
    name = path.parent.name if path.stem == "__init__" else path.stem
    numbered = next((REF.fullmatch(ref) for ref in counted.site.references if REF.fullmatch(ref)), None)
    if numbered is not None:
        tail = numbered["number"]
    else:
        summary = counted.site.summary.removeprefix("(no comment) ").replace("'", "").lower()
        words = [word for word in re.findall(r"[a-z0-9]+", summary) if word not in _STOP_WORDS]
        tail = "-".join(words[:3]) or "workaround"
    base = "-".join(re.findall(r"[a-z0-9]+", f"vllm {name} {tail}".lower()))
    if len(base) > ID_LENGTH:  # lint's limit, with room for a number that tells two apart
        base = base[:ID_LENGTH].rsplit("-", 1)[0] if "-" in base[:ID_LENGTH] else base[:ID_LENGTH]
    identifier, count = base, 1
    while identifier in taken:
        count += 1
        identifier = f"{base}-{count}"
    return identifier


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


# ------------------------------------------------------------------------------ TOML


def _tables(adopted: list[Adopted], release: str) -> list[Any]:
    tables = []
    for one in adopted:
        table = tomlkit.table()
        site = one.counted.site
        table.add(tomlkit.comment(at_a_word(one_line(f"{site.where} in vLLM {release}: {site.summary}"),
                                            MARKER_LENGTH)))
        for key, value in one.entry.items():
            if not value.isprintable():  # a marker taken from the release: what is not printable, escaped
                table.add(key, tomlkit.parse(f"value = {toml_string(value)}")["value"])
                continue
            literal = ('"' in value or "\\" in value) and "'" not in value
            table.add(key, tomlkit.string(value, literal=literal))
        table.add(tomlkit.nl())
        tables.append(table)
    return tables


def entries_text(adopted: list[Adopted], release: str) -> str:
    """The entries as TOML, ready to append to a manifest: each ``[[tracked]]`` with a comment naming
    its site in ``release``."""
    return "".join(f"[[tracked]]\n{table.as_string()}" for table in _tables(adopted, release)).rstrip("\n") + "\n"


def with_tracked(data: bytes, adopted: list[Adopted], release: str, where: object = "the manifest") -> str:
    """``data`` (a manifest's bytes) as text with the entries after its last ``[[tracked]]`` (at its
    end when it has none), every other line kept; ``NotAdoptable`` naming ``where`` when it is no
    longer UTF-8 TOML, or tomlkit cannot add them without changing the rest."""
    try:
        text = data.decode("utf-8")
        expected = tomllib.loads(text)
        document = tomlkit.parse(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError) as error:
        raise NotAdoptable(f"{where} not written: {error}") from None
    expected.setdefault("tracked", []).extend(one.entry for one in adopted)
    if "tracked" in document and not isinstance(document["tracked"], tomlkit.items.AoT):
        raise NotAdoptable(f"{where} not written: its tracked is written as an inline array (tracked = [...]): "
                           "write each entry as a [[tracked]] table to add to it")
    if "tracked" in document:
        array = document["tracked"]
        if isinstance(array, tomlkit.items.AoT) and array and not array[-1].as_string().endswith("\n\n"):
            array[-1].add(tomlkit.nl())  # a blank line before the first added entry
        for table in _tables(adopted, release):
            array.append(table)
        edited = tomlkit.dumps(document).rstrip("\n") + "\n"
    else:
        edited = text.rstrip("\n") + "\n\n" + entries_text(adopted, release)
    if tomllib.loads(edited) != expected:
        raise NotAdoptable(f"{where} not written: the entries could not be added without changing the rest of "
                           "the manifest")
    return edited


__all__ = ["Adopted", "NotAdoptable", "adopted", "carried_in", "carried_note", "entries_text", "marker_of",
           "with_tracked"]
