"""The dashboard issue: every workaround carried on the base branch, its windows, upstream
state, retirement verdict and removal PR, kept current in one issue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from github.PullRequest import PullRequest

from tracker.escape import markdown_cell, markdown_text
from tracker.model.manifest import Manifest
from tracker.model.retirement import Retirement
from tracker.retire.failures import GITHUB_ERRORS
from tracker.retire.limits import fitted, shortened
from tracker.retire.removal import Snapshot
from tracker.retire.results import Action, ActionKind, DashboardResult
from tracker.retire.texts import facts_text, floors_text, read_marker
from tracker.upstream.errors import classify
from tracker.upstream.facts import Report
from tracker.upstream.fields import numbered
from tracker.upstream.floors import Floors, fixed_floors
from tracker.upstream.identity import written_by
from tracker.upstream.settings import ClientSettings

DASHBOARD_LABEL = "xpu-workarounds-dashboard"
DASHBOARD_TITLE = "XPU workarounds dashboard"
DASHBOARD_MARKER = "<!-- xpu-workarounds:dashboard -->"


def pr_cell(action: Action | None, latest: PullRequest | None, dry_run: bool) -> str:
    """The dashboard's "removal PR" cell for one workaround: what this run did, else where its
    latest PR stands (so that a run that did nothing writes the same cell as the one before)."""
    if action is not None and action.unproven is not None:
        kept = f"#{action.pr} left as it is" if action.pr is not None else "not opened"
        return f"{kept}: {markdown_cell(markdown_text(action.unproven))}"
    if action is not None and action.action is ActionKind.FAILED:
        return "failed on the last run (see its log)"
    if action is not None and action.pr is None:
        return "would open a PR" if dry_run and action.action is ActionKind.OPENED else "-"
    if action is not None and action.action is ActionKind.LEFT_CLOSED:
        return f"#{action.pr} closed without merging, left closed until the evidence changes"
    if action is not None and action.action is ActionKind.CLOSED:
        return f"#{action.pr} closed: needed again"
    if action is not None:
        foreign = " (a person's commit is on its branch; the bot leaves the branch as it is)" \
            if "someone else" in action.detail else ""
        return f"#{action.pr} open{foreign}"
    if latest is None or latest.merged:
        return "-"
    mark = read_marker(latest.body)
    if latest.state == "open":
        return f"#{latest.number} open"
    if mark is not None and mark.closed is not None:
        return f"#{latest.number} closed: needed again"
    return f"#{latest.number} closed without merging"


def dashboard_body(snapshot: Snapshot, manifest: Manifest, verdicts: dict[str, Retirement],
                   states: dict[str, str], floors: Floors | None = None, facts: Report | None = None,
                   facts_pr: Action | None = None, next_release: str | None = None) -> str:
    """The dashboard issue's body, within GitHub's limit (``limits.fitted``: as many workarounds'
    rows as fit, the rest counted); ``next_release``: the look-ahead's section (Markdown), when it looked."""
    floors = floors or fixed_floors(manifest)
    rows = []
    for w in manifest.workarounds:
        windows = "<br>".join(f"`{window.describe()}`" for window in w.affected)
        upstream = "<br>".join(f"{ref.ref} ({ref.role}): {ref.state}"
                               f"{', in `' + str(ref.released_in) + '`' if ref.released_in else ''}"
                               for ref in w.upstream)
        verdict = verdicts[w.id]
        rows.append(f"| `{w.id}` | {windows} | {upstream} | **{verdict.verdict}**: {verdict.detail} | "
                    f"{states.get(w.id, '-')} |")
    return fitted(lambda shown: "\n".join([
        f"Every XPU workaround carried in `{snapshot.manifest_path}` on `{snapshot.branch}` at `{snapshot.commit[:12]}`, "
        f"with its decision windows, the state of its upstream references and its retirement verdict.",
        "",
        f"Support floors: {floors_text(floors)}.",
        "",
        f"Upstream facts: {facts_text(facts, snapshot.manifest_path)}."
        + (f" Upstream-facts PR: {facts_cell(facts_pr)}." if facts is not None else ""),
        "",
        "| workaround | affected windows (any one) | upstream | retirement | removal PR |",
        "|---|---|---|---|---|",
        *shortened(rows, shown, lambda rest: f"| and {rest} more: the run's step summary lists every workaround's "
                                             "verdict | | | | |"),
        "",
        *([next_release.rstrip("\n"), ""] if next_release else []),
        "Kept current by `xpu-workarounds retire --open-prs` (weekly, "
        "`.github/workflows/retire-workarounds.yml`); edits here are overwritten.",
        "",
        DASHBOARD_MARKER,
    ]) + "\n")


def facts_cell(action: Action | None) -> str:
    if action is None:
        return "none needed, the manifest records every fact"
    if action.action is ActionKind.FAILED:
        return "failed on the last run (see its log)"
    if action.action is ActionKind.CLOSED:
        return f"#{action.pr} closed, the base has caught up"
    if action.action is ActionKind.LEFT_CLOSED:
        return f"#{action.pr} closed without merging, left closed until the facts change"
    return f"#{action.pr} open" if action.pr is not None else "would open one"


def keep_dashboard(repo: Any, body: str, *, own: str, dry_run: bool, settings: ClientSettings,
                   ensure_label: Callable[[str, str], None]) -> DashboardResult:
    """Open the dashboard issue, or edit the oldest one carrying its label when it differs. Only an issue
    the token's user (``own``) wrote is the dashboard: a stranger's issue with the label is not adopted.

    A dashboard a person closed stays closed and is not edited (the bot never closes it, so
    a closed one was closed on purpose); reopening it by hand has it kept current again."""
    try:
        found = [issue for issue in repo.get_issues(state="all", labels=[DASHBOARD_LABEL])
                 if issue.pull_request is None and written_by(issue, own)
                 and numbered(issue.number, issue.state, "the dashboard issue")]
        if not found:
            if dry_run:
                return DashboardResult(None, ActionKind.OPENED, "would open the dashboard issue")
            ensure_label(DASHBOARD_LABEL, "the living list of XPU workarounds")
            issue = repo.create_issue(DASHBOARD_TITLE, body, labels=[DASHBOARD_LABEL])
            return DashboardResult(issue.number, ActionKind.OPENED, f"opened #{issue.number}")
        issue = min(found, key=lambda item: item.number)
        if issue.state == "closed":
            return DashboardResult(issue.number, ActionKind.LEFT_CLOSED,
                                   f"#{issue.number} was closed by a person: left closed and not edited (reopen it "
                                   f"to have it kept current)")
        if issue.body == body and issue.title == DASHBOARD_TITLE:
            return DashboardResult(issue.number, ActionKind.UNCHANGED, f"#{issue.number} is up to date")
        if dry_run:
            return DashboardResult(issue.number, ActionKind.UPDATED, f"would update #{issue.number}")
        issue.edit(title=DASHBOARD_TITLE, body=body)
        return DashboardResult(issue.number, ActionKind.UPDATED, f"updated #{issue.number}")
    except GITHUB_ERRORS as error:
        return DashboardResult(None, ActionKind.FAILED, str(classify(error, settings, "the dashboard issue")))
