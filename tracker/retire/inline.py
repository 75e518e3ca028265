"""Tracked-only adoption: in the repository that carries vLLM's code (a fork), one issue per
inline XPU workarounds (``[[tracked]]``) that is dead code at that repository's own pins.

The manifest holds only ``[[tracked]]`` entries there: nothing is patched and no code PR is
ever opened. Each run reads, at the base branch, the file of vLLM's tree holding the XPU pins
(``[sources.vllm] pins``, default ``requirements/xpu.txt``) and each entry's file; an entry
whose marker is in its file and that is dead at those pins gets one issue (label
``xpu-workarounds-inline``: the evidence, the file and the marker), updated in place when the
evidence changes; when the marker is gone (or the code is needed again) the issue is closed
with a comment saying why. A person's close is respected until the evidence changes, as for
removal PRs: the issue's hidden marker carries a fingerprint of the evidence.

Only issues the token's own user opened are the bot's (``tracker.upstream.identity``): an issue
someone else wrote, with the label and a copy of the marker, is neither adopted nor edited. Its
marker is the last one in the body (the entry's own ``marker`` text, quoted above it as a code
span, may look like one). The dashboard's cell for each entry comes from its issue's own state,
so that a week in which nothing changed writes the same dashboard again, and sends nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracker.escape import markdown_cell, markdown_code
from tracker.model.manifest import DEFAULT_SOURCES, InlineWorkaround, Manifest
from tracker.model.pins import xpu_pins
from tracker.retire.failures import GITHUB_ERRORS
from tracker.retire.limits import clipped, cut, fitted, shortened
from tracker.retire.limits import title as issue_title
from tracker.retire.removal import Snapshot
from tracker.retire.results import Action, ActionKind
from tracker.retire.texts import marker, read_marker, replace_marker
from tracker.upstream.audit import tracked_verdict
from tracker.upstream.errors import classify
from tracker.upstream.facts import InlineVerdict
from tracker.upstream.fields import numbered
from tracker.upstream.identity import written_by
from tracker.upstream.settings import ClientSettings

INLINE_LABEL = "xpu-workarounds-inline"
INLINE_LABEL_DESCRIPTION = "inline XPU workarounds that are dead code at this repository's pins"
MARKER_GONE = "marker-gone"
NEEDED_AGAIN = "needed-again"
EVIDENCE_SHOWN = 500  # characters of an entry's evidence in its dashboard row (its issue has it whole)


@dataclass(frozen=True)
class InlineState:
    """One ``[[tracked]]`` entry at the base branch: is its marker there, and is it dead at the pins."""

    inline: InlineWorkaround
    present: bool
    verdict: InlineVerdict

    @property
    def dead(self) -> bool:
        return self.present and self.verdict.dead

    @property
    def evidence(self) -> str:
        """A fingerprint of what the issue says: it changes exactly when the evidence does."""
        what = [self.inline.id, self.inline.file, self.inline.marker, self.verdict.evidence, self.dead]
        return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:20]


def tracked_only(manifest: Manifest) -> bool:
    return not manifest.workarounds and bool(manifest.tracked)


def pins_path(manifest: Manifest) -> str:
    return (manifest.sources.get("vllm") or DEFAULT_SOURCES["vllm"]).pins or "requirements/xpu.txt"


def states(manifest: Manifest, snapshot: Snapshot, read: Callable[[str], str]) -> list[InlineState]:
    """Every tracked entry at ``snapshot`` (``read(path)``: a file's text at the base)."""
    path = pins_path(manifest)
    pins = xpu_pins(read(path)) if path in snapshot.blobs else {}
    found = []
    for inline in manifest.tracked:
        present = inline.file in snapshot.blobs and inline.marker in read(inline.file)
        verdict = tracked_verdict(inline, snapshot.branch, pins, {})
        if path not in snapshot.blobs:
            verdict = InlineVerdict(inline.id, snapshot.branch, False, f"{snapshot.branch} has no {path}: its XPU "
                                                                      f"pins are unknown.", tracked=True)
        found.append(InlineState(inline, present, verdict))
    return found


def title(state: InlineState) -> str:
    return issue_title(f"Inline XPU workaround {state.inline.id} is dead code: {state.inline.title}")


def body(state: InlineState, snapshot: Snapshot, pins: str) -> str:
    """The issue's body, within GitHub's limit (``limits.cut``: a manifest's fields are of any length)."""
    inline = state.inline
    return cut("\n".join([
        f"{markdown_code(inline.file)} still carries an XPU workaround that this repository's own pins make dead code.",
        "",
        f"**Evidence** (`{pins}` on `{snapshot.branch}` at `{snapshot.commit[:12]}`): {state.verdict.evidence}",
        "",
        f"**Where:** {markdown_code(inline.file)}, the code containing {markdown_code(inline.marker)}.",
        f"**Waits on:** {inline.reference}." + (f" {inline.note}" if inline.note else ""),
        "",
        "Remove the workaround (and what only it needs); this issue is closed by the next run once the "
        "marker is gone from the file.",
        "",
        "Opened by `xpu-workarounds retire --open-prs` from `[[tracked]]` in the manifest; a later run updates it "
        "in place when the evidence changes. Closing it keeps it closed until the evidence changes.",
        "",
        marker(inline.id, state.evidence, kind="inline"),
    ]) + "\n")


class InlineIssues:
    """Keeps the inline workarounds' issues in one repository on one base snapshot."""

    def __init__(self, repo: Any, settings: ClientSettings, snapshot: Snapshot, *, own: str, dry_run: bool,
                 ensure_label: Callable[[str, str], None]) -> None:
        self.repo = repo
        self.own = own  # the token's login: only its issues are this tool's
        self.cells: dict[str, str] = {}  # entry id -> its dashboard cell, from what its issue is now
        self.settings = settings
        self.snapshot = snapshot
        self.dry_run = dry_run
        self.ensure_label = ensure_label

    def existing(self) -> dict[str, list[Any]]:
        """Entry id -> every issue this tool opened for it, newest first."""
        found: dict[str, list[Any]] = {}
        for issue in self.repo.get_issues(state="all", labels=[INLINE_LABEL]):
            if issue.pull_request is not None or not written_by(issue, self.own):
                continue
            mark = read_marker(issue.body)
            if mark is not None and mark.kind == "inline":
                numbered(issue.number, issue.state, f"the issue of {mark.id}")
                found.setdefault(mark.id, []).append(issue)
        return {key: sorted(issues, key=lambda issue: issue.number, reverse=True) for key, issues in found.items()}

    def keep(self, all_states: list[InlineState], pins: str) -> list[Action]:
        try:
            existing = self.existing()
        except GITHUB_ERRORS as error:
            return [Action("-", ActionKind.FAILED, None, "", str(classify(error, self.settings, "listing issues")))]
        actions = []
        for state in all_states:
            issues = existing.get(state.inline.id, [])
            try:
                action = self.one(state, issues, pins)
            except GITHUB_ERRORS as error:
                action = Action(state.inline.id, ActionKind.FAILED, None, "",
                                str(classify(error, self.settings, f"the issue of {state.inline.id}")))
            self.cells[state.inline.id] = issue_cell(action, issues, self.dry_run)
            if action is not None:
                actions.append(action)
        return actions

    def one(self, state: InlineState, issues: list[Any], pins: str) -> Action | None:
        inline, prefix = state.inline, "would " if self.dry_run else ""
        current = next((issue for issue in issues if issue.state == "open"), None)
        if not state.dead:
            if current is None:
                return None
            why, said, closed = (
                (f"{markdown_code(inline.marker)} is no longer in {markdown_code(inline.file)}",
                 f"{inline.marker} is no longer in {inline.file}", MARKER_GONE) if not state.present
                else (f"it is not dead code at these pins: {state.verdict.evidence}",
                      f"it is not dead code at these pins: {state.verdict.evidence}", NEEDED_AGAIN))
            if not self.dry_run:
                mark = read_marker(current.body)
                current.create_comment(cut(f"Closing: on `{self.snapshot.branch}` at `{self.snapshot.commit[:12]}` "
                                           f"{why}. (`xpu-workarounds retire --open-prs`)"))
                current.edit(state="closed", body=cut(replace_marker(current.body or "", mark.closing(closed)))
                             if mark is not None else current.body)
            verb = "would close" if self.dry_run else "closed"
            return Action(inline.id, ActionKind.CLOSED, current.number, "", f"{verb} #{current.number}: {said}")
        text, heading = body(state, self.snapshot, pins), title(state)
        if current is not None:
            if current.body == text and current.title == heading:
                return Action(inline.id, ActionKind.UNCHANGED, current.number, "", f"#{current.number} is up to date")
            if not self.dry_run:
                current.edit(title=heading, body=text)
            return Action(inline.id, ActionKind.UPDATED, current.number, "",
                          f"{prefix}update #{current.number}: the evidence changed")
        latest = issues[0] if issues else None
        if latest is not None:
            mark = read_marker(latest.body)
            if mark is not None and mark.closed is None and mark.evidence == state.evidence:
                return Action(inline.id, ActionKind.LEFT_CLOSED, latest.number, "",
                              f"#{latest.number} was closed by a person; it stays closed until the evidence changes")
            if not self.dry_run:
                latest.edit(state="open", title=heading, body=text)
            return Action(inline.id, ActionKind.OPENED, latest.number, "", f"{prefix}reopen #{latest.number}: "
                                                                            f"dead code again, or new evidence")
        if self.dry_run:
            return Action(inline.id, ActionKind.OPENED, None, "", "would open an issue")
        self.ensure_label(INLINE_LABEL, INLINE_LABEL_DESCRIPTION)
        issue = self.repo.create_issue(heading, text, labels=[INLINE_LABEL])
        return Action(inline.id, ActionKind.OPENED, issue.number, "", f"opened #{issue.number}")


def issue_cell(action: Action | None, issues: list[Any], dry_run: bool) -> str:
    """The dashboard's "issue" cell of one entry: what this run did to its issue, else where that issue
    stands (``issues``: the entry's, newest first), so that a run that did nothing writes the cell the
    run before wrote."""
    if action is not None and action.action is ActionKind.FAILED:
        return "failed on the last run (see its log)"
    if action is not None and action.pr is None:
        return "would open one" if dry_run and action.action is ActionKind.OPENED else "-"
    if action is not None:
        return f"#{action.pr} {'closed' if action.action in (ActionKind.CLOSED, ActionKind.LEFT_CLOSED) else 'open'}"
    latest = next((issue for issue in issues if issue.state == "open"), issues[0] if issues else None)
    return "-" if latest is None else f"#{latest.number} {'open' if latest.state == 'open' else 'closed'}"


def dashboard_body(snapshot: Snapshot, all_states: list[InlineState], cells: dict[str, str], pins: str,
                   dashboard_marker: str) -> str:
    """The tracked-only dashboard's body, within GitHub's limit (as many entries' rows as fit, the rest counted)."""
    rows = [f"| `{state.inline.id}` | {markdown_cell(markdown_code(state.inline.file))} | {'yes' if state.present else 'no'} | "
            f"**{'dead' if state.dead else 'needed' if state.present else 'gone'}**: "
            f"{markdown_cell(clipped(state.verdict.evidence, EVIDENCE_SHOWN))} | {cells.get(state.inline.id, '-')} |"
            for state in all_states]
    return fitted(lambda shown: "\n".join([
        f"Every inline XPU workaround tracked in `{snapshot.manifest_path}` on `{snapshot.branch}` at "
        f"`{snapshot.commit[:12]}`, judged at this repository's own XPU pins (`{pins}`).",
        "",
        "| inline workaround | file | marker there | at the pins | issue |",
        "|---|---|---|---|---|",
        *shortened(rows, shown, lambda rest: f"| and {rest} more: `xpu-workarounds upstream --offline` lists every "
                                             "one | | | | |"),
        "",
        "Kept current by `xpu-workarounds retire --open-prs`; edits here are overwritten.",
        "",
        dashboard_marker,
    ]) + "\n")
