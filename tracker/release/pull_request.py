"""``check --pull-request N --repo OWNER/NAME``: a pull request that moves the vLLM pin, checked.

What the pull request changes is read as data through the API: its list of files, then each
pin file (``requirements*.txt``, ``requirements/**.txt``, ``pyproject.toml``) at its base and
head commits; nothing of it is checked out or run. The manifest is the base commit's. When
the vLLM pin (``vllm==X``) moves, both releases are checked as ``check vllm==X`` checks one
(source distributions fetched with pip, never installed or run), and one comment on the PR
lists, one line per workaround, what drifts, starts or stops applying and becomes retirable.
The new release must be fetched (else exit 4); the old one only serves the comparison: when
it cannot be fetched, the comment says so and why, and the new one is checked all the same.
The comment carries a hidden marker: a later push edits it, never adds a second. A PR from a
fork gets a read-only token from GitHub: the same text then goes to the step summary only.
"""

from __future__ import annotations

import base64
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from tracker.model.manifest import Manifest
from tracker.model.pins import xpu_pins
from tracker.model.retirement import retirement
from tracker.model.vocabulary import ExitCode
from tracker.release.compare import ReleaseCheck, check
from tracker.release.errors import NotFetchable
from tracker.release.fetch import Say, silent

if TYPE_CHECKING:  # GitHub code (the github extra), imported when a pull request is checked
    from github import Github
    from github.PullRequest import PullRequest
    from github.Repository import Repository

MARKER = "<!-- xpu-workarounds:upgrade-check -->"
_PINNED = re.compile(r"^(?:requirements[^/]*\.txt|requirements/.+\.txt|(?:.*/)?pyproject\.toml)$")


class UpgradeError(Exception):
    """The pull request or its files cannot be read (exit 4), or say something unusable (exit 2)."""

    def __init__(self, message: str, code: ExitCode = ExitCode.OUTSIDE_SERVICE) -> None:
        super().__init__(message)
        self.code = code


def pin_file(path: str) -> bool:
    return bool(_PINNED.match(path)) and ".." not in PurePosixPath(path).parts


def vllm_pin(path: str, text: str) -> Version | None:
    """The ``vllm==X`` pin a requirements file or a pyproject.toml names (None: none)."""
    if path.endswith(".toml"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        project: Any = data.get("project")
        project = project if isinstance(project, dict) else {}
        found: list[Any] = list(project.get("dependencies") or []) if isinstance(project.get("dependencies"), list) \
            else []
        optional: Any = project.get("optional-dependencies")
        for extra in (optional.values() if isinstance(optional, dict) else ()):
            found += extra if isinstance(extra, list) else []
        text = "\n".join(item for item in found if isinstance(item, str))
    return xpu_pins(text).get("vllm")


@dataclass
class PinMove:
    path: str
    old: Version | None
    new: Version


def _text(repo: Repository, path: str, ref: str) -> str | None:
    from github import GithubException

    try:
        content = repo.get_contents(path, ref=ref)
    except GithubException as error:
        if error.status == 404:
            return None
        raise
    if isinstance(content, list):
        return None
    return base64.b64decode(content.content or "").decode("utf-8", "replace")


def pin_moves(repo: Repository, pr: PullRequest) -> list[PinMove]:
    """The pin files the PR changes whose vLLM pin moves (base commit -> head commit)."""
    moves = []
    for changed in pr.get_files():
        if not pin_file(changed.filename):
            continue
        head = _text(repo, changed.filename, pr.head.sha)
        new = vllm_pin(changed.filename, head) if head is not None else None
        if new is None:
            continue
        base = _text(repo, changed.filename, pr.base.sha)
        old = vllm_pin(changed.filename, base) if base is not None else None
        if old != new:
            moves.append(PinMove(changed.filename, old, new))
    return moves


# ------------------------------------------------------------------------------ the text


def _decisions(result: ReleaseCheck | None) -> dict[str, str]:
    if result is None:
        return {}
    return {w.id: w.decision["decision"] for w in result.workarounds if w.decision is not None}


def verdicts(manifest: Manifest, move: PinMove, new: ReleaseCheck, old: ReleaseCheck | None) -> dict[str, list[str]]:
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
        if decided is not None and before.get(w.id) == "skip" and after.get(w.id) == "apply":
            said.append(f"**starts applying** ({decided['reason']})")
        if decided is not None and before.get(w.id) == "apply" and after.get(w.id) == "skip":
            said.append(f"**stops applying** ({decided['reason']})")
        if retirement(w, floors).retirable and not retirement(w, manifest.support).retirable:
            said.append(f"**becomes retirable** once vLLM {move.new} and its XPU pins are the oldest supported")
        if said:
            found[w.id] = said
    return found


def comment_text(manifest: Manifest, move: PinMove, new: ReleaseCheck, old: ReleaseCheck | None,
                 manifest_path: str, old_unavailable: str | None = None) -> str:
    """The PR comment; ``old_unavailable``: why the old release could not be fetched (None: it was,
    or there was no old pin)."""
    before = _decisions(old)
    pins = ", ".join(f"{name} {pin}" for name, pin in new.pins.items()) or "none found"
    was = f"vLLM {move.old}" if move.old is not None else "no vLLM pin"
    lines = [f"### XPU workarounds at vLLM {move.new}", "",
             f"`{move.path}` moves {was} to **vLLM {move.new}** (its XPU pins: {pins}); every workaround in "
             f"`{manifest_path}` was checked against that release's source.", ""]
    if old_unavailable is not None:
        why = " ".join(old_unavailable.split())
        lines += [f"**{was} could not be compared**, so what starts or stops applying is not known: {why}", ""]
    drift = new.problems
    lines += [f"**Drift** ({len(drift)}): the workaround would be left unapplied, or patch something else."
              if drift else "**No drift**: every target is where the manifest says, with the same signature.", ""]
    changes = verdicts(manifest, move, new, old)
    if changes:
        lines += [f"What changes at vLLM {move.new}, one line per workaround:", "",
                  *[f"- `{w}`: " + "; ".join(said) for w, said in changes.items()], ""]
    else:
        lines += [f"Nothing changes at vLLM {move.new}: no workaround drifts, starts or stops applying, or becomes "
                  "retirable.", ""]
    rows = []
    for w in new.workarounds:
        decided = f"{w.decision['decision']} ({w.decision['reason']})" if w.decision else "-"
        was_decided = before.get(w.id, "-")
        targets = ", ".join(sorted({t.found for t in w.targets})) or "-"
        rows.append(f"| `{w.id}` | {was_decided} | {decided} | {targets} |")
    if rows:
        lines += ["<details><summary>Every workaround</summary>", "",
                  f"| workaround | at {was} | at vLLM {move.new} | targets |", "|---|---|---|---|", *rows, "",
                  "</details>", ""]
    lines += ["Kept current by `xpu-workarounds check --pull-request`: a later push edits this comment.", "", MARKER]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- the pull request


@dataclass
class Checked:
    text: str | None  # None: the pin did not move
    drift: list[str]
    comment: str  # what happened to the comment: created, updated, unchanged, summary only, none
    note: str
    warnings: list[str] = field(default_factory=list)  # worth a line, not a failure (the old release unfetched)


def check_pull_request(gh: Github, repository: str, number: int, manifest_path: str, *,
                       progress: Say = silent, warn: Say = silent) -> Checked:
    """Check PR ``number`` of ``repository`` (each release as ``compare.check`` checks one); keep
    its one comment (see the module docstring)."""
    from github import GithubException

    from tracker.retire.removal import manifest_from_text

    repo = gh.get_repo(repository)
    pr = repo.get_pull(number)
    base_text = _text(repo, manifest_path, pr.base.sha)
    if base_text is None:
        raise UpgradeError(f"{repository}@{pr.base.ref} has no {manifest_path} (the manifest)", ExitCode.BAD_INPUT)
    manifest = manifest_from_text(base_text, f"{repository}@{pr.base.ref}", manifest_path)
    moves = pin_moves(repo, pr)
    if not moves:
        return Checked(None, [], "none", f"#{number} does not move the vLLM pin: nothing to check")
    move = moves[0]
    new = check(manifest, f"vllm=={move.new}", progress=progress, warn=warn)  # unfetchable: exit 4
    old, unavailable, warnings = None, None, []
    if move.old is not None:
        try:
            old = check(manifest, f"vllm=={move.old}", progress=progress, warn=warn)
        except NotFetchable as error:  # only the comparison is lost
            unavailable = " ".join(str(error).split())
            warnings.append(f"vLLM {move.old} could not be compared: {unavailable}")
    text = comment_text(manifest, move, new, old, manifest_path, unavailable)

    def checked(comment: str, note: str) -> Checked:
        return Checked(text, new.problems, comment, note, warnings)

    fork = pr.head.repo is None or pr.head.repo.full_name.lower() != repo.full_name.lower()
    if fork:
        return checked("summary only", "a PR from a fork gets a read-only token: the text is in the step summary")
    mine = [comment for comment in pr.get_issue_comments() if MARKER in (comment.body or "")]
    try:
        if mine:
            if mine[0].body == text:
                return checked("unchanged", f"the comment on #{number} is up to date")
            mine[0].edit(text)
            return checked("updated", f"updated the comment on #{number}")
        pr.create_issue_comment(text)
        return checked("created", f"commented on #{number}")
    except GithubException as error:
        if error.status != 403:
            raise
        return checked("summary only", "the token may not comment (403): the text is in the step summary")


__all__ = ["MARKER", "Checked", "PinMove", "UpgradeError", "check_pull_request", "comment_text",
           "pin_file", "pin_moves", "verdicts", "vllm_pin"]


