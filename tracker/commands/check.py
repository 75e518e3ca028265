"""``check``: the manifest against a vLLM release's own source, before an upgrade, rendered.

The work is ``tracker.release``'s (getting the release: ``fetch``; comparing it with the manifest:
``compare``) and, for a pull request that moves the vLLM pin, ``tracker.retire.upgrade``'s; this
module renders the answers and picks the exit code of a finding (errors end as
``tracker.commands.exits`` says).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tracker import one_line
from tracker.commands.context import JsonOption, QuietOption, given_manifest, load_manifest, must_name_a_release
from tracker.commands.exits import ExitCode, fail
from tracker.commands.output import progress as shown_progress
from tracker.commands.output import prose_wrapped, table, terminal_width, warn
from tracker.release.compare import ReleaseCheck, check


def render(result: ReleaseCheck, width: int | None = None) -> str:
    """What ``check`` prints: the table fitted and every line of prose wrapped at ``width``."""
    pins = ", ".join(f"{name} {pin}" for name, pin in result.pins.items()) or "none found (no requirements/xpu.txt)"
    lines = [(f"vLLM {result.vllm or 'of unknown version'} ({result.source}); XPU pins: {pins}"), ""]
    rows = []
    for w in result.workarounds:
        found = ", ".join(sorted({t.found for t in w.targets}))
        source = {True: "yes", False: "no", None: "-"}[w.source_fix]
        decided = f"{w.decision['decision']} ({w.decision['reason']})" if w.decision else "-"
        rows.append((w.id, found, f"{source}/{'yes' if w.carries_fix else 'no'}", decided))
    lines.append(table(("ID", "TARGETS", "VLLM FIX (SOURCE/MANIFEST)", "AT THE XPU PINS"), rows, width=width))
    problems = result.problems
    # What a release's source says (a problem's text, a binding's name) is text this tool did not write.
    lines += ["", *(one_line(str(p)) for p in problems)] if problems else [
        "", "no drift: the manifest matches this release's source"]
    carried = [t.id for t in result.tracked if t.found]
    lines += ["", f"vLLM's own XPU workarounds tracked here and found in it: {', '.join(carried) or 'none'}"]
    lines += [one_line(f"note: {w.id}: {note}") for w in result.workarounds for note in w.notes]
    lines += [one_line(f"note: {problem}") for problem in result.tracked_problems]
    return prose_wrapped(lines, width)


def check_release(
    ctx: typer.Context,
    release: Annotated[str | None, typer.Argument(metavar="vllm==X | PATH", show_default=False,
                                                  help="A vLLM release (fetched with pip, never installed or run), "
                                                       "or a wheel, source distribution or source tree.")] = None,
    json_output: JsonOption = False,
    pull_request: Annotated[int | None, typer.Option(
        "--pull-request", metavar="N", show_default=False, min=1,
        help="Instead of a release: the vLLM release pull request N of --repo pins (read through the API, "
             "with the base commit's manifest; --manifest is its path there); keep one comment on it.")] = None,
    repo: Annotated[str | None, typer.Option("--repo", metavar="OWNER/NAME", show_default=False,
                                                help="With --pull-request: the repository.")] = None,
    fail_on_drift: Annotated[bool, typer.Option(
        "--fail-on-drift", help="With --pull-request: exit 3 on drift (otherwise drift is reported, exit 0).")]
        = False,
    quiet: QuietOption = False,
    supported: Annotated[bool, typer.Option(
        "--supported", help="Instead of one release: every vLLM release from the manifest's [support] vllm floor to "
                            "the newest on the package index, one line each (exit 4 when one cannot be fetched).")]
        = False,
    workaround: Annotated[str | None, typer.Option(
        "--workaround", metavar="ID", show_default=False,
        help="With --supported: only this workaround's targets and fixes.")] = None,
) -> None:
    """Before an upgrade: targets, fixes and decisions in a release.

    Per workaround, its targets in that release (same fingerprint?), whether the release carries
    its own fix, and the decision at the release's XPU pins. Exit 3 on drift."""
    if supported or workaround is not None:
        if release is not None or pull_request is not None or not supported:
            fail("--supported checks every supported release: give it alone (--workaround ID goes with it)")
        from tracker.commands.check_supported import check_supported_command

        check_supported_command(ctx, workaround, json_output, quiet)
        return
    if pull_request is not None or repo is not None or fail_on_drift:
        if release is not None:
            fail("give a release or --pull-request, not both")
        check_pull_request_command(given_manifest(ctx), pull_request, repo, fail_on_drift, json_output)
        return
    if release is None:
        fail("check needs a release (vllm==X, a wheel, sdist or source tree), --supported, or --pull-request N "
             "--repo OWNER/NAME")
    must_name_a_release(release, "the release")
    manifest = load_manifest(ctx)
    with shown_progress(quiet) as shown:
        result = check(manifest, release, progress=shown.step, warn=warn)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else render(result, terminal_width()))
    if result.problems:
        raise typer.Exit(ExitCode.FINDING)


def check_pull_request_command(given: Path | None, number: int | None, repository: str | None,
                               fail_on_drift: bool, json_output: bool) -> None:
    """The command line of ``check --pull-request``: one line per outcome, the step summary and
    annotations in GitHub Actions; exit 3 on drift only with ``--fail-on-drift``."""
    from tracker.commands import context
    from tracker.commands.context import require_extra
    from tracker.commands.retire import repository_path

    if number is None or repository is None:
        fail("--pull-request N and --repo OWNER/NAME go together")
    require_extra("github", "github", "check --pull-request")
    from tracker.escape import annotation
    from tracker.retire import check_repository
    from tracker.retire.removal import MANIFEST_PATH
    from tracker.retire.summary import SUMMARY_VARIABLE, append, in_actions
    from tracker.retire.upgrade import check_pull_request
    from tracker.upstream.client import connect

    manifest_path = repository_path(given.as_posix(), "--manifest") if given is not None else MANIFEST_PATH
    settings = context.github_settings()
    check_repository(repository)
    checked = check_pull_request(connect(settings), settings, repository, number, manifest_path, warn=warn)
    for text in (checked.summary, checked.notice):  # the summary: the comment with every list whole
        if text is not None:
            append(SUMMARY_VARIABLE, text)
    if json_output:
        typer.echo(json.dumps({"schema": 1, "pull_request": number, "checked": checked.text is not None,
                               "drift": [str(p) for p in checked.drift], "comment": checked.comment, "detail": checked.note,
                               "warnings": checked.warnings, "unchecked": checked.unchecked,
                               "disagreement": checked.disagreement, "not_pin_files": checked.elsewhere,
                               "pin_notices": checked.pin_notices}))
    else:
        typer.echo(one_line(checked.note))
        for problem in checked.drift:
            typer.echo(one_line(f"drift      {problem}"))
        if checked.disagreement is not None:
            typer.echo(one_line(f"disagree   {checked.disagreement}"))
        for line in checked.unchecked:
            typer.echo(one_line(f"unchecked  {line}"))
        for warning in checked.warnings:
            typer.echo(one_line(f"warning    {warning}"))
        for line in checked.elsewhere:
            typer.echo(one_line(f"not a pin  {line}"))
        for line in checked.pin_notices:
            typer.echo(one_line(f"pin file   {line}"))
    if in_actions():
        level = "error" if fail_on_drift else "warning"
        for problem in checked.drift:
            typer.echo(annotation(level, str(problem), title="drift at the new vLLM"), err=json_output)
        if checked.disagreement is not None:
            typer.echo(annotation(level, checked.disagreement, title="pin files disagree"), err=json_output)
        for line in checked.unchecked:
            typer.echo(annotation("error", line, title="vLLM requirement not checked"), err=json_output)
        for warning in checked.warnings:
            typer.echo(annotation("warning", warning, title="not compared"), err=json_output)
        for line in checked.elsewhere:
            typer.echo(annotation("notice", line, title="not a pin file"), err=json_output)
        for line in checked.pin_notices:
            typer.echo(annotation("notice", line, title="pin file"), err=json_output)
    if checked.unchecked:  # a requirement nothing vouches for fails the step
        raise typer.Exit(ExitCode.FINDING if fail_on_drift else ExitCode.OUTSIDE_SERVICE)
    if (checked.drift or checked.disagreement is not None) and fail_on_drift:
        raise typer.Exit(ExitCode.FINDING)
