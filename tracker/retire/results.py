"""What a ``retire --open-prs`` run did, per workaround and for the dashboard; ``--json`` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ActionKind(StrEnum):
    OPENED = "opened"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    CLOSED = "closed"
    LEFT_CLOSED = "left-closed"
    FAILED = "failed"


ACTIONS = tuple(kind.value for kind in ActionKind)


@dataclass
class Action:
    id: str
    action: ActionKind
    pr: int | None
    branch: str
    detail: str

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


@dataclass
class Outcome:
    repository: str
    base: str
    base_commit: str
    dry_run: bool
    retirable: list[dict[str, str]] = field(default_factory=list)  # [{"id", "evidence"}]
    kept: list[dict[str, str]] = field(default_factory=list)  # [{"id", "reason"}]
    actions: list[Action] = field(default_factory=list)
    dashboard: DashboardResult | None = None

    @property
    def failed(self) -> bool:
        return any(a.action is ActionKind.FAILED for a in self.actions) or (
            self.dashboard is not None and self.dashboard.action is ActionKind.FAILED)

    def as_json(self) -> dict[str, Any]:
        return {"schema": 1, "repository": self.repository, "base": self.base, "base_commit": self.base_commit,
                "dry_run": self.dry_run, "retirable": self.retirable, "kept": self.kept,
                "actions": [a.as_json() for a in self.actions],
                "dashboard": self.dashboard.as_json() if self.dashboard else None}


def describe(action: Action, dry_run: bool) -> str:
    prefix = "dry run: " if dry_run else ""
    where = f"#{action.pr}" if action.pr is not None else action.branch
    return f"{prefix}{action.action:<11} {action.id} ({where}): {action.detail}"


def describe_dashboard(result: DashboardResult, dry_run: bool) -> str:
    prefix = "dry run: " if dry_run else ""
    return f"{prefix}{result.action:<11} dashboard: {result.detail}"
