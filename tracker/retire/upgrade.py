"""``check --pull-request N --repo OWNER/NAME``: a pull request that moves the vLLM pin, checked.

The check believes only itself. What the pull request changes is read as data through the API:
its list of files, then each pin file at its base and head commits; nothing of it is checked out
or run. Pin files are those ``[layout] pins`` names in the base commit's manifest (by default the
root's ``pyproject.toml``, ``requirements*.txt``, ``uv.lock`` and ``pylock*.toml``; ``pin_moves``,
which reads them as ``tracker.model.pin_contents`` does, ``-r`` / ``-c`` includes too). Every pin
file whose vLLM requirement changes is read, and every release they move to (and from) is opened
once and checked, as ``check vllm==X`` checks one (source distributions fetched with pip, never
installed or run), its census read from the same opened release; pin files that move to different
releases disagree, which the comment says and ``--fail-on-drift`` fails on. A requirement that
names no release the index can give (a URL, a path, a wildcard, ``===``, a range no pinned release
holds, not a version) is never checked as another: the comment names it with why, and the step
fails. The new releases must be fetched (else exit 4); an old one only serves the comparison: when
it cannot be fetched, the comment says so and why.

One comment on the PR lists, one line per workaround, what drifts, starts or stops applying and
becomes retirable, then vLLM's own inline XPU workarounds the new release brings or drops (its
census since the old one). It is the comment the token's own user wrote with the hidden marker (a
stranger's comment carrying the marker is not it): a later push edits it, never adds a second.
Every name and text taken from the PR is quoted as a Markdown code span, so that it renders as
text. A PR from a fork gets a read-only token from GitHub: the same text then goes to the step
summary only. A changed file that is not a pin file but moves vLLM gets no comment: the step
summary names it, with the ``[layout] pins`` line that would count it. A changed pin file the
check cannot read, or that no longer names vLLM, is a notice the comment carries (``PinNotice``);
one that never named vLLM, a notice in the step summary.

What a PR makes the check do is bounded by ``pin_moves.REQUESTS`` (requests spent reading files at
its base and head: pin files, their includes, other files that could pin vLLM) and
``RELEASES_OPENED`` (distinct releases fetched and checked, each named once however many files name
it): a pin file or a release past either bound is never passed but named as not checked, and the
step fails, as on any pin it cannot check.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.version import Version

from tracker.census.count import Census, CountedSite, compare
from tracker.escape import markdown_code, markdown_text
from tracker.model.manifest import Layout, Manifest
from tracker.model.pin_files import is_glob
from tracker.model.retirement import retirement
from tracker.model.vocabulary import Choice, ErrorKind, ToolError
from tracker.release.census import census_opened
from tracker.release.compare import DecisionAtPins, Disagreement, ReleaseCheck, check_opened, needed_files
from tracker.release.errors import NotFetchable
from tracker.release.fetch import Say, silent
from tracker.release.opened import OpenedRelease, open_release
from tracker.release.redact import published_to
from tracker.retire.limits import clipped, fitted, shortened
from tracker.retire.pin_moves import (
    PinMove,
    PinNotice,
    elsewhere_lines,
    elsewhere_text,
    file_text,
    notice_lines,
    notices_text,
    pin_moves,
)
from tracker.retire.release_moves import RELEASES_OPENED, ReleaseMove, release_moves, with_unread, within_budget
from tracker.upstream.identity import public, token_login, written_by

if TYPE_CHECKING:  # GitHub code (the github extra), imported when a pull request is checked
    from github import Github
    from github.Repository import Repository

    from tracker.upstream.settings import ClientSettings

MARKER = "<!-- xpu-workarounds:upgrade-check -->"
IN_SUMMARY = ": the whole list is in this check's step summary"  # where a list the comment shortens is whole
SUMMARY_SHOWN = 300  # characters of a site's summary in the comment
REFERENCES_SHOWN = 5  # references named per site in the comment
class UpgradeError(ToolError):
    """The pull request or its files cannot be read (an outside service's), or say something
    unusable (bad input)."""

    kind = ErrorKind.OUTSIDE_SERVICE

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.OUTSIDE_SERVICE) -> None:
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------------------ the text


def _requirement(move: PinMove, quoted: bool) -> str:
    """``move``'s requirement after its path (nothing: a pin file not read)."""
    if not move.requirement.text:
        return ""
    return f" {markdown_code(move.requirement.text)}:" if quoted else f" {move.requirement.text!r} was"


def _decided(decision: DecisionAtPins | None) -> str:
    """A workaround's decision at a release as the comment's table shows it: ``apply (affected)``."""
    return f"{decision['decision']} ({decision['reason']})" if decision else "-"


def _decisions(result: ReleaseCheck | None) -> dict[str, Choice]:
    if result is None:
        return {}
    return {w.id: w.decision["decision"] for w in result.workarounds if w.decision is not None}


def verdicts(manifest: Manifest, move: ReleaseMove, new: ReleaseCheck, old: ReleaseCheck | None) -> dict[str, list[str]]:
    """What changes for each workaround at the new release, in the manifest's order: drift (each
    problem), starts or stops applying (not known without ``old``), becomes retirable."""
    before, after = _decisions(old), _decisions(new)
    floors = {**manifest.support, "vllm": max(manifest.support.get("vllm", move.new), move.new),
              **{name: max(manifest.support.get(name, pin), pin) for name, pin in new.pins.items()}}
    checked = {w.id: w for w in new.workarounds}
    found: dict[str, list[str]] = {}
    for w in manifest.workarounds:
        said = []
        if w.id in checked and checked[w.id].problems:
            said.append("**drift**: " + "; ".join(checked[w.id].problems))
        decided = checked[w.id].decision if w.id in checked else None
        if decided is not None and before.get(w.id) == Choice.SKIP and after.get(w.id) == Choice.APPLY:
            said.append(f"**starts applying** ({decided['reason']})")
        if decided is not None and before.get(w.id) == Choice.APPLY and after.get(w.id) == Choice.SKIP:
            said.append(f"**stops applying** ({decided['reason']})")
        if retirement(w, floors).retirable and not retirement(w, manifest.support).retirable:
            said.append(f"**becomes retirable** once vLLM {move.new} and its XPU pins are the oldest supported")
        if said:
            found[w.id] = said
    return found


def release_text(manifest: Manifest, move: ReleaseMove, new: ReleaseCheck, old: ReleaseCheck | None,
                 manifest_path: str, old_unavailable: str | None = None, inline: Census | None = None,
                 shown: int | None = None) -> list[str]:
    """The comment's part about one release; ``old_unavailable``: why the old release could not be
    fetched (None: it was, or there was no old pin); ``inline``: its census since the old one;
    ``shown``: how many items each of its lists shows, the rest counted (None: every one)."""
    pins = ", ".join(f"{name} {pin}" for name, pin in new.pins.items()) or "none found"
    was = f"vLLM {move.old}" if move.old is not None else "no vLLM pin"
    files = ", ".join(markdown_code(path) for path in move.paths)
    lines = [f"### XPU workarounds at vLLM {move.new}", "",
             f"{files} {'moves' if len(move.paths) == 1 else 'move'} {was} to **vLLM {move.new}** (its XPU pins: "
             f"{pins}); every workaround in {markdown_code(manifest_path)} was checked against that release's source.", ""]
    if old_unavailable is not None:
        why = markdown_text(" ".join(old_unavailable.split()))  # pip's words and the index's: text, never Markdown
        lines += [f"**{was} could not be compared**, so what starts or stops applying is not known: {why}", ""]
    drift = new.problems
    lines += [f"**Drift** ({len(drift)}): the workaround would be left unapplied, or patch something else."
              if drift else "**No drift**: every target is where the manifest says, with the same signature.", ""]
    changes = verdicts(manifest, move, new, old)
    if changes:
        lines += [f"What changes at vLLM {move.new}, one line per workaround:", "",
                  *shortened([f"- `{w}`: " + "; ".join(said) for w, said in changes.items()], shown,
                             lambda rest: f"- and {rest} more workarounds{IN_SUMMARY}"), ""]
    else:
        lines += [f"Nothing changes at vLLM {move.new}: no workaround drifts, starts or stops applying, or becomes "
                  "retirable.", ""]
    if inline is not None:
        lines += inline_lines(move, inline, shown)
    rows = []
    said_before = {w.id: _decided(w.decision) for w in old.workarounds} if old is not None else {}
    # Without the old release's check, the column says why: no pin before, or the release not compared.
    missing = "no pin" if move.old is None else "not compared" if old is None else "not in its manifest"
    for w in new.workarounds:
        decided = _decided(w.decision)
        was_decided = said_before.get(w.id, missing)
        targets = ", ".join(sorted({t.found for t in w.targets})) or "-"
        rows.append(f"| `{w.id}` | {was_decided} | {decided} | {targets} |")
    if rows:
        lines += ["<details><summary>Every workaround</summary>", "",
                  f"| workaround | at {was} | at vLLM {move.new} | targets |", "|---|---|---|---|",
                  *shortened(rows, shown, lambda rest: f"| and {rest} more{IN_SUMMARY} | | | |"), "",
                  "</details>", ""]
    return lines


def inline_lines(move: ReleaseMove, inline: Census, shown: int | None = None) -> list[str]:
    """vLLM's own inline XPU workarounds the new release brings or drops (``census --since`` the
    old one): one list item per site, an untracked one that names a reference flagged; with
    ``shown``, that many of each list, the rest counted."""
    if not inline.new and not inline.gone:
        return [f"vLLM's own inline XPU workarounds: none new at vLLM {move.new}, none gone since vLLM {move.old}.", ""]
    lines = [f"vLLM's own inline XPU workarounds: {len(inline.new)} new at vLLM {move.new}, {len(inline.gone)} gone "
             f"since vLLM {move.old} (`xpu-workarounds census`):", ""]
    command = f"`xpu-workarounds census vllm=={move.new} --since vllm=={move.old}`"
    for change, sites in (("new", inline.new), ("gone", inline.gone)):
        def rest(count: int, sites: list[CountedSite] = sites, change: str = change) -> str:
            flagged = sum(1 for counted in sites[len(sites) - count:] if not counted.tracked and counted.site.references)
            return (f"- and {count} more {change} ({flagged} of them not tracked and naming a reference){IN_SUMMARY}; "
                    f"{command} lists them")
        lines += shortened([_site_item(change, counted) for counted in sites], shown, rest)
    untracked = sum(1 for counted in inline.new if not counted.tracked and counted.site.references)
    if untracked:
        lines += ["", f"`xpu-workarounds census vllm=={move.new} --adopt` prints the `[[tracked]]` entries of the "
                      f"{untracked} new {'site' if untracked == 1 else 'sites'} not tracked that name a reference."]
    return [*lines, ""]


def _site_item(change: str, counted: CountedSite) -> str:
    site = counted.site
    refs = ", ".join(markdown_code(ref) for ref in site.references[:REFERENCES_SHOWN])
    if len(site.references) > REFERENCES_SHOWN:
        refs += f" and {len(site.references) - REFERENCES_SHOWN} more"
    tracked = (f"tracked as `{counted.tracked}`" if counted.tracked else
               f"**not tracked**, names {refs}" if refs else "not tracked, names no reference")
    return (f"- {change}: {markdown_code(site.where)} "
            f"{markdown_text(clipped(site.summary, SUMMARY_SHOWN))} ({tracked})")


def disagreement(moves: list[ReleaseMove]) -> str | None:
    """One sentence when the pin files move to different releases (None: they agree)."""
    if len(moves) < 2:
        return None
    return "the pin files disagree: " + "; ".join(
        f"{', '.join(move.paths)} {'pins' if len(move.paths) == 1 else 'pin'} vLLM {move.new}" for move in moves)


def unchecked_lines(moves: list[PinMove]) -> list[str]:
    """One line per requirement no release can be checked for: the file, the requirement, why."""
    return [f"{move.path}:{_requirement(move, False)} not checked: "
            f"{move.requirement.why}" for move in moves if move.new is None]


def comment_text(parts: list[list[str]], moves: list[PinMove], releases: list[ReleaseMove],
                 shown: int | None = None, notices: list[PinNotice] | None = None) -> str:
    """The PR comment: the pin files the PR changed that could not be read or lost vLLM (``notices``),
    what no release could be checked for and whether the pin files agree, then one part per release
    (``release_text``), then the marker; ``shown``: as in ``release_text``."""
    lines: list[str] = notices_text(notices or [])
    unchecked = [move for move in moves if move.new is None]
    if unchecked:
        lines += ["### vLLM requirements that were not checked", "",
                  "The check fetches a release from the package index by its version, and reads or fetches only so "
                  "many for one PR; for these it did not, so what they would install is not known:", "",
                  *shortened([f"- {markdown_code(move.path)}:{_requirement(move, True)} "
                              f"{move.requirement.why}" for move in unchecked], shown,
                             lambda rest: f"- and {rest} more{IN_SUMMARY}"), ""]
    if len(releases) > 1:
        lines += ["**The pin files disagree**: " + "; ".join(
            f"{', '.join(markdown_code(path) for path in move.paths)} {'pins' if len(move.paths) == 1 else 'pin'} "
            f"vLLM {move.new}" for move in releases) + ". Each release is checked below.", ""]
    for part in parts:
        lines += part
    lines += ["Kept current by `xpu-workarounds check --pull-request`: a later push edits this comment.", "", MARKER]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the pull request


@dataclass
class Checked:
    text: str | None  # None: the pin did not move
    drift: list[Disagreement]
    comment: str  # what happened to the comment: created, updated, unchanged, summary only, none
    note: str
    warnings: list[str] = field(default_factory=list)  # worth a line, not a failure (the old release unfetched)
    unchecked: list[str] = field(default_factory=list)  # requirements that name no release: the step fails
    disagreement: str | None = None  # the pin files move to different releases
    elsewhere: list[str] = field(default_factory=list)  # files that move vLLM and are not pin files: a notice
    notice: str | None = None  # the step summary's text about them and the pin files' notices (Markdown)
    summary: str | None = None  # the step summary's text: the comment with every list whole (None: no comment)
    pin_notices: list[str] = field(default_factory=list)  # pin files not read, or with no vLLM in them


Part = tuple[ReleaseMove, ReleaseCheck, ReleaseCheck | None, str | None, Census | None]


def read_releases(manifest: Manifest, releases: list[ReleaseMove], *, progress: Say = silent,
                  warn: Say = silent) -> tuple[list[Part], list[Disagreement], list[str]]:
    """What the comment says of each release (the move, the new release's check, the old one's or
    why it could not be compared, the census since it), the drift, the warnings. Each release is opened once
    (``opened.open_release``, kept open until every part is written) for its check and its census; a
    new release that cannot be fetched stops the check (exit 4), an old one only loses the comparison."""
    with contextlib.ExitStack() as stack:
        return _read(manifest, releases, stack, progress, warn)


def _read(manifest: Manifest, releases: list[ReleaseMove], stack: contextlib.ExitStack,
          progress: Say, warn: Say) -> tuple[list[Part], list[Disagreement], list[str]]:
    read: dict[Version, tuple[OpenedRelease, ReleaseCheck] | NotFetchable] = {}
    censuses: dict[Version, Census] = {}

    def checked(version: Version, needed: bool) -> ReleaseCheck | None:
        if version not in read:
            try:
                opened = stack.enter_context(open_release(f"vllm=={version}", also=needed_files(manifest),
                                                          reader="the check and the census", progress=progress,
                                                          warn=warn))
                read[version] = (opened, check_opened(manifest, opened, progress=progress))
            except NotFetchable as error:
                read[version] = error
        found = read[version]
        if isinstance(found, NotFetchable):
            if needed:
                raise found
            return None
        return found[1]

    def census_of(version: Version) -> Census:
        found = read[version]
        assert not isinstance(found, NotFetchable)
        if version not in censuses:
            censuses[version] = census_opened(manifest, found[0], progress=progress, warn=warn)
        return censuses[version]

    parts: list[Part] = []
    drift: list[Disagreement] = []
    warnings: list[str] = []
    for move in releases:
        new = checked(move.new, True)
        assert new is not None
        old, unavailable, inline = None, None, None
        if move.uncompared is not None:  # past the releases one run opens: only the comparison is lost
            unavailable = move.uncompared
            warnings.append(f"vLLM {move.old} could not be compared: {unavailable}")
        elif move.old is not None:
            old = checked(move.old, False)
            if old is None:  # only the comparison is lost
                unavailable = " ".join(str(read[move.old]).split())
                warnings.append(f"vLLM {move.old} could not be compared: {unavailable}")
            else:  # what vLLM's own XPU code brings or drops (``census --since``): news, never a failure
                inline = compare(dataclasses.replace(census_of(move.new)), census_of(move.old))
        parts.append((move, new, old, unavailable, inline))
        drift += [problem for problem in new.problems if problem not in drift]
    return parts, drift, warnings


def check_pull_request(gh: Github, settings: ClientSettings, repository: str, number: int, manifest_path: str, *,
                       progress: Say = silent, warn: Say = silent) -> Checked:
    """Check PR ``number`` of ``repository`` (each release as ``compare.check`` checks one); keep
    its one comment (see the module docstring). What GitHub or its client fails with is a
    ``GitHubError`` naming the PR."""
    from tracker.retire.failures import GITHUB_ERRORS
    from tracker.upstream.errors import classify

    try:
        return _check_pull_request(gh, settings, repository, number, manifest_path, progress=progress, warn=warn)
    except GITHUB_ERRORS as error:
        raise classify(error, settings, f"{repository}#{number}") from None


def _check_pull_request(gh: Github, settings: ClientSettings, repository: str, number: int, manifest_path: str, *,
                        progress: Say = silent, warn: Say = silent) -> Checked:
    repo = gh.get_repo(repository)
    with published_to(public(repo)):  # on a public repository, pip's words name no index host either
        return _check_in(gh, settings, repo, repository, number, manifest_path, progress, warn)


def _check_in(gh: Github, settings: ClientSettings, repo: Repository, repository: str, number: int,
              manifest_path: str, progress: Say, warn: Say) -> Checked:
    from github import GithubException

    from tracker.retire.removal import manifest_from_text

    pr = repo.get_pull(number)
    base_text = file_text(repo, manifest_path, pr.base.sha)
    if base_text is None:
        raise UpgradeError(f"{repository}@{pr.base.ref} has no {manifest_path} (the manifest)", ErrorKind.BAD_INPUT)
    manifest = manifest_from_text(base_text, f"{repository}@{pr.base.ref}", manifest_path)
    layout = manifest.layout
    pins = layout.pins
    named = tuple(path for path in pins if not is_glob(path)) if pins != Layout().pins else ()  # the manifest's own
    found = pin_moves(repo, pr, pins, named)
    moves, elsewhere = with_unread(found), elsewhere_lines(found, pins)
    quiet = [notice for notice in found.notices if not notice.loud]
    notice = "".join(text for text in ("\n".join(notices_text(quiet)) + "\n" if quiet else None,
                                       elsewhere_text(found, pins)) if text) or None
    if not moves and not found.loud:
        return Checked(None, [], "none", f"#{number} does not move the vLLM pin: nothing to check",
                       elsewhere=elsewhere, notice=notice, pin_notices=notice_lines(found))
    moves, releases = within_budget(moves, release_moves(moves))
    parts, drift, warnings = read_releases(manifest, releases, progress=progress, warn=warn)

    def written(shown: int | None) -> str:
        return comment_text([release_text(manifest, move, new, old, manifest_path, unavailable, inline, shown)
                             for move, new, old, unavailable, inline in parts], moves, releases, shown, found.loud)

    text, whole = fitted(written), written(None)  # the comment within GitHub's limit; every list in the summary
    unchecked, disagree = unchecked_lines(moves), disagreement(releases)
    note_moved = "" if moves else f"#{number} moves no vLLM pin the check can read: "

    def outcome(comment: str, note: str) -> Checked:
        return Checked(text, drift, comment, note_moved + note, warnings, unchecked, disagree, elsewhere, notice,
                       whole, notice_lines(found))

    fork = pr.head.repo is None or pr.head.repo.full_name.lower() != repo.full_name.lower()
    if fork:
        return outcome("summary only", "a PR from a fork gets a read-only token: the text is in the step summary")
    own = token_login(gh, settings)  # the comment is the one this token's user wrote, whatever else carries the marker
    mine = [comment for comment in pr.get_issue_comments()
            if written_by(comment, own) and MARKER in (comment.body or "")]
    try:
        if mine:
            if mine[0].body == text:
                return outcome("unchanged", f"the comment on #{number} is up to date")
            mine[0].edit(text)
            return outcome("updated", f"updated the comment on #{number}")
        pr.create_issue_comment(text)
        return outcome("created", f"commented on #{number}")
    except GithubException as error:
        if error.status != 403:
            raise
        return outcome("summary only", "the token may not comment (403): the text is in the step summary")


__all__ = ["MARKER", "RELEASES_OPENED", "Checked", "ReleaseMove", "UpgradeError", "check_pull_request", "comment_text", "inline_lines",
           "read_releases", "release_text", "verdicts"]
