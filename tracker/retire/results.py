"""What a ``retire --open-prs`` run did, per workaround and for the dashboard; ``--json`` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tracker.model.vocabulary import SCHEMA
from tracker.upstream.clock import iso
from tracker.upstream.facts import Report
from tracker.upstream.floors import Floors


class ActionKind(StrEnum):
    OPENED = "opened"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    CLOSED = "closed"
    LEFT_CLOSED = "left-closed"
    FAILED = "failed"


@dataclass
class Action:
    id: str
    action: ActionKind
    pr: int | None
    branch: str
    detail: str
    unproven: str | None = None  # why the removal was not proposed: its copy did not pass the tests (``proofs``)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "action": str(self.action), "pr": self.pr, "branch": self.branch,
                "detail": self.detail}


@dataclass
class DashboardResult:
    issue: int | None
    action: ActionKind  # opened | updated | unchanged | failed
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"issue": self.issue, "action": str(self.action), "detail": self.detail}


@dataclass(frozen=True)
class FactsResult:
    """Which upstream facts the verdicts were judged with."""

    source: str  # live | cache (GitHub's answers, refreshed) | manifest (as written)
    checked_at: str | None
    requests: int
    unchecked: tuple[str, ...]  # references whose facts could not be learned
    note: str | None  # why the manifest alone was used

    @classmethod
    def of(cls, report: Report | None, note: str | None = None) -> FactsResult:
        if report is None:
            return cls("manifest", None, 0, (), note)
        return cls(report.source, iso(report.checked_at), len(report.requests),
                   tuple(f.ref for f in report.references if f.state is None), None)

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "checked_at": self.checked_at, "requests": self.requests,
                "unchecked": list(self.unchecked), "note": self.note}


@dataclass(frozen=True)
class LookAheadSection:
    """The dashboard's section about the newest vLLM release (the look-ahead, ``tracker.retire.lookahead``):
    the Markdown (its lists shortened to the dashboard's share), why it could not look (None: it
    did), what it found, for ``--json``, and the Markdown with every list whole, for the step
    summary (None: the same)."""

    section: str
    failure: str | None
    found: dict[str, Any]
    whole: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {**self.found, "failure": self.failure}


@dataclass
class RetireResult:
    repository: str
    base: str
    base_commit: str
    dry_run: bool
    retirable: list[dict[str, str]] = field(default_factory=list)  # [{"id", "evidence"}]
    kept: list[dict[str, str]] = field(default_factory=list)  # [{"id", "reason"}]
    actions: list[Action] = field(default_factory=list)
    dashboard: DashboardResult | None = None
    floors: Floors | None = None
    facts: FactsResult | None = None
    facts_pr: Action | None = None
    halted: str | None = None  # why nothing was written (the refresh could not reach GitHub)
    html_url: str | None = None  # the repository's web address (for links to its PRs)
    issues: list[Action] = field(default_factory=list)  # tracked-only: the dead inline workarounds' issues
    next_release: LookAheadSection | None = None  # the look-ahead's section (None: it was not asked for)

    @property
    def failed(self) -> bool:
        return self.halted is not None or any(a.action is ActionKind.FAILED for a in [*self.actions, *self.issues]) or (
            self.dashboard is not None and self.dashboard.action is ActionKind.FAILED) or (
            self.facts_pr is not None and self.facts_pr.action is ActionKind.FAILED) or (
            self.next_release is not None and self.next_release.failure is not None)

    def as_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "repository": self.repository, "base": self.base, "base_commit": self.base_commit,
                "dry_run": self.dry_run, "retirable": self.retirable, "kept": self.kept,
                "floors": self.floors.as_json() if self.floors else None,
                "floors_note": self.floors.note if self.floors else None,
                "facts": self.facts.as_json() if self.facts else None,
                "facts_pr": self.facts_pr.as_json() if self.facts_pr else None,
                "actions": [a.as_json() for a in self.actions], "issues": [a.as_json() for a in self.issues],
                "dashboard": self.dashboard.as_json() if self.dashboard else None,
                "next_release": self.next_release.as_json() if self.next_release else None,
                "halted": self.halted}


def describe(action: Action, dry_run: bool) -> str:
    prefix = "dry run: " if dry_run else ""
    where = f"#{action.pr}" if action.pr is not None else action.branch
    return f"{prefix}{action.action:<11} {action.id} ({where}): {action.detail}"


def describe_dashboard(result: DashboardResult, dry_run: bool) -> str:
    prefix = "dry run: " if dry_run else ""
    return f"{prefix}{result.action:<11} dashboard: {result.detail}"
