"""The dashboard issue: every workaround carried on the base branch, its windows, upstream
state, retirement verdict and removal PR, kept current in one issue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracker.model.decision import Retirement
from tracker.model.manifest import Manifest
from tracker.retire.failures import GITHUB_ERRORS
from tracker.retire.removal import MANIFEST_PATH, Snapshot
from tracker.retire.results import Action, ActionKind, DashboardResult
from tracker.upstream.client import ClientSettings, classify

DASHBOARD_LABEL = "xpu-workarounds-dashboard"
DASHBOARD_TITLE = "XPU workarounds dashboard"
DASHBOARD_MARKER = "<!-- xpu-workarounds:dashboard -->"


def pr_cell(action: Action | None, dry_run: bool) -> str:
    """The dashboard's "removal PR" cell for one workaround, from what this run did."""
    if action is None:
        return "-"
    if action.action is ActionKind.FAILED:
        return "failed on the last run (see its log)"
    if action.pr is None:
        return "would open a PR" if dry_run else "-"
    if action.action is ActionKind.LEFT_CLOSED:
        return f"#{action.pr} closed without merging, left closed until the evidence changes"
    if action.action is ActionKind.CLOSED:
        return f"#{action.pr} closed: needed again"
    return f"#{action.pr} open"


def dashboard_body(snapshot: Snapshot, manifest: Manifest, verdicts: dict[str, Retirement],
                   states: dict[str, str]) -> str:
    floors = ", ".join(f"{name} {version}" for name, version in manifest.support.items())
    rows = []
    for w in manifest.workarounds:
        windows = "<br>".join(f"`{window.describe()}`" for window in w.affected)
        upstream = "<br>".join(f"{ref.ref} ({ref.role}): {ref.state}"
                               f"{', in `' + str(ref.released_in) + '`' if ref.released_in else ''}"
                               for ref in w.upstream)
        verdict = verdicts[w.id]
        rows.append(f"| `{w.id}` | {windows} | {upstream} | **{verdict.verdict}**: {verdict.detail} | "
                    f"{states.get(w.id, '-')} |")
    return "\n".join([
        f"Every XPU workaround carried in `{MANIFEST_PATH}` on `{snapshot.branch}` at `{snapshot.commit[:12]}`, "
        f"with its decision windows, the state of its upstream references and its retirement verdict.",
        "",
        f"Support floor: {floors}.",
        "",
        "| workaround | affected windows (any one) | upstream | retirement | removal PR |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Kept current by `xpu-workarounds retire --open-prs` (weekly, "
        "`.github/workflows/retire-workarounds.yml`); edits here are overwritten.",
        "",
        DASHBOARD_MARKER,
    ]) + "\n"


def keep_dashboard(repo: Any, body: str, *, dry_run: bool, settings: ClientSettings,
                   ensure_label: Callable[[str, str], None]) -> DashboardResult:
    """Open the dashboard issue, or edit the oldest one carrying its label when it differs."""
    try:
        found = [issue for issue in repo.get_issues(state="all", labels=[DASHBOARD_LABEL])
                 if issue.pull_request is None]
        if not found:
            if dry_run:
                return DashboardResult(None, ActionKind.OPENED, "would open the dashboard issue")
            ensure_label(DASHBOARD_LABEL, "the living list of XPU workarounds")
            issue = repo.create_issue(DASHBOARD_TITLE, body, labels=[DASHBOARD_LABEL])
            return DashboardResult(issue.number, ActionKind.OPENED, f"opened #{issue.number}")
        issue = min(found, key=lambda item: item.number)
        if issue.body == body and issue.title == DASHBOARD_TITLE:
            return DashboardResult(issue.number, ActionKind.UNCHANGED, f"#{issue.number} is up to date")
        if dry_run:
            return DashboardResult(issue.number, ActionKind.UPDATED, f"would update #{issue.number}")
        issue.edit(title=DASHBOARD_TITLE, body=body)
        return DashboardResult(issue.number, ActionKind.UPDATED, f"updated #{issue.number}")
    except GITHUB_ERRORS as error:
        return DashboardResult(None, ActionKind.FAILED, str(classify(error, settings, "the dashboard issue")))
