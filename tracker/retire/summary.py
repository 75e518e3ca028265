"""What a run tells the GitHub Actions step it runs in: its outputs (``GITHUB_OUTPUT``), a
step summary (``GITHUB_STEP_SUMMARY``) and annotations (``::error`` / ``::warning`` lines).

Each is written only where Actions set it up (the variables, ``GITHUB_ACTIONS=true``), so a
run on a person's machine prints exactly what it printed before. Values are data: a
multi-line output uses the heredoc form with a random delimiter, and an annotation's text
is escaped, so that nothing quoted from a manifest or a PR can forge another output or
annotation.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping

import tracker
from tracker.escape import annotation, markdown_cell
from tracker.model.environment import OutsideVariables
from tracker.retire.limits import SUMMARY_LIMIT, cut_bytes
from tracker.retire.results import ActionKind, RetireResult

OUTPUT_VARIABLE = tracker.GITHUB_OUTPUT
SUMMARY_VARIABLE = tracker.GITHUB_STEP_SUMMARY


def in_actions(environ: Mapping[str, str] | None = None) -> bool:
    return OutsideVariables.from_env(environ).in_actions


# ------------------------------------------------------------------------------ outputs


def outputs(outcome: RetireResult) -> dict[str, str]:
    """``prs`` (JSON ``[{id, number, url, action}]``), ``retirable`` (JSON ids), ``dashboard`` (issue number)."""
    acted = ([outcome.facts_pr] if outcome.facts_pr is not None else []) + outcome.actions
    prs = [{"id": a.id, "number": a.pr, "url": pull_url(outcome, a.pr), "action": str(a.action)} for a in acted]
    issues = [{"id": a.id, "number": a.pr, "url": issue_url(outcome, a.pr), "action": str(a.action)}
              for a in outcome.issues]
    dashboard = outcome.dashboard.issue if outcome.dashboard is not None else None
    return {"prs": json.dumps(prs), "retirable": json.dumps([item["id"] for item in outcome.retirable]),
            "dashboard": "" if dashboard is None else str(dashboard), "issues": json.dumps(issues)}


def issue_url(outcome: RetireResult, number: int | None) -> str | None:
    return f"{outcome.html_url}/issues/{number}" if number is not None and outcome.html_url else None


def pull_url(outcome: RetireResult, number: int | None) -> str | None:
    return f"{outcome.html_url}/pull/{number}" if number is not None and outcome.html_url else None


def output_lines(values: Mapping[str, str]) -> str:
    """``GITHUB_OUTPUT``'s text for ``values``: ``name<<DELIMITER`` form, a delimiter found in no value."""
    text = []
    for name, value in values.items():
        delimiter = f"xpu_workarounds_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"xpu_workarounds_{secrets.token_hex(16)}"
        text.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return "".join(text)


def append(variable: str, text: str, environ: Mapping[str, str] | None = None) -> bool:
    """Append ``text`` to the file Actions named in ``variable``; False when it named none. The step
    summary is held to GitHub's limit (``SUMMARY_LIMIT`` for the whole file, what the step wrote
    before included): what does not fit is left out, and a line says so."""
    variables = OutsideVariables.from_env(environ)
    path = {OUTPUT_VARIABLE: variables.actions_output, SUMMARY_VARIABLE: variables.actions_summary}[variable]
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        if variable == SUMMARY_VARIABLE:
            text = cut_bytes(text, SUMMARY_LIMIT - os.fstat(handle.fileno()).st_size)
        handle.write(text)
    return True


# ------------------------------------------------------------------------- annotations


def outcome_annotations(outcome: RetireResult) -> list[str]:
    """Failed steps are errors; facts that could not be learned and unchecked floors are warnings."""
    found = []
    if outcome.halted is not None:
        found.append(annotation("error", outcome.halted))
    for action in ([outcome.facts_pr] if outcome.facts_pr is not None else []) + outcome.actions + outcome.issues:
        if action.action is ActionKind.FAILED:
            found.append(annotation("error", f"{action.id}: {action.detail}"))
    if outcome.dashboard is not None and outcome.dashboard.action is ActionKind.FAILED:
        found.append(annotation("error", f"dashboard: {outcome.dashboard.detail}"))
    if outcome.facts is not None and outcome.facts.unchecked:
        found.append(annotation("warning", f"upstream facts could not be learned for "
                                           f"{', '.join(outcome.facts.unchecked)}; their workarounds' PRs were "
                                           f"left as they are", title="upstream facts"))
    if outcome.floors is not None and outcome.floors.note:
        found.append(annotation("warning", f"support floors: {outcome.floors.note}", title="support floors"))
    if outcome.next_release is not None and outcome.next_release.failure is not None:
        found.append(annotation("error", f"next vLLM release: {outcome.next_release.failure}", title="look-ahead"))
    return found


# ---------------------------------------------------------------------------- summary


def summary_markdown(outcome: RetireResult) -> str:
    """The step summary: every workaround's verdict with its evidence, and what was done about it."""
    acted = {a.id: a for a in outcome.actions}
    prefix = "would be " if outcome.dry_run else ""

    def pr_cell(workaround_id: str) -> str:
        action = acted.get(workaround_id)
        if action is None:
            return "-"
        url = pull_url(outcome, action.pr)
        where = f"[#{action.pr}]({url})" if url else (f"#{action.pr}" if action.pr else "")
        return markdown_cell(f"{action.action} {where}".strip())

    rows = [f"| `{item['id']}` | **retirable** | {markdown_cell(item['evidence'])} | {pr_cell(item['id'])} |"
            for item in outcome.retirable]
    rows += [f"| `{item['id']}` | keep | {markdown_cell(item['reason'])} | {pr_cell(item['id'])} |" for item in outcome.kept]
    lines = [f"## XPU workarounds: {outcome.repository}@{outcome.base}"
             f"{' (dry run: nothing was changed)' if outcome.dry_run else ''}", ""]
    if rows:
        lines += ["| workaround | verdict | evidence | removal PR |", "|---|---|---|---|", *rows, ""]
    if outcome.issues:
        lines += ["| inline workaround | issue |", "|---|---|",
                  *[f"| `{a.id}` | {markdown_cell(a.detail)} |" for a in outcome.issues], ""]
    if outcome.facts is not None:
        lines.append(f"Upstream facts: {outcome.facts.source}"
                     + (f", {len(outcome.facts.unchecked)} could not be learned" if outcome.facts.unchecked else "")
                     + (f" ({outcome.facts.note})" if outcome.facts.note else "") + ".")
    if outcome.facts_pr is not None:
        lines.append(f"Upstream-facts PR: {outcome.facts_pr.action}"
                     + (f" #{outcome.facts_pr.pr}" if outcome.facts_pr.pr else "") + ".")
    if outcome.dashboard is not None:
        lines.append(f"Dashboard: {prefix}{markdown_cell(outcome.dashboard.detail)}.")
    if outcome.halted is not None:
        lines.append(f"Halted: {markdown_cell(outcome.halted)}.")
    if outcome.next_release is not None:
        lines += ["", (outcome.next_release.whole or outcome.next_release.section).rstrip("\n")]
    return "\n".join(lines) + "\n"


def publish(outcome: RetireResult, echo: object = print, environ: Mapping[str, str] | None = None) -> None:
    """Outputs, summary and annotations of ``outcome``, each where Actions set it up."""
    append(OUTPUT_VARIABLE, output_lines(outputs(outcome)), environ)
    append(SUMMARY_VARIABLE, summary_markdown(outcome), environ)
    if in_actions(environ) and callable(echo):
        for line in outcome_annotations(outcome):
            echo(line)
