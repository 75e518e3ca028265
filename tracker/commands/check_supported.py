"""``check --supported``: the manifest (or one workaround) against every supported vLLM release, rendered.

The work is ``tracker.release.supported``'s; this module renders one row per release and picks
the exit code: 4 when a release could not be fetched (the answer is incomplete), else 3 on drift.
"""

from __future__ import annotations

import json

import typer

from tracker import one_line
from tracker.commands.context import load_manifest
from tracker.commands.exits import ExitCode, fail
from tracker.commands.output import progress as shown_progress
from tracker.commands.output import table, warn
from tracker.model.vocabulary import unknown_id_hint
from tracker.release.supported import SupportedCheck, check_supported


def render(result: SupportedCheck) -> str:
    asked = f"workaround {result.workaround}" if result.workaround else "every workaround"
    rows = result.rows
    summary = []
    if result.not_fetched:
        summary.append(f"not checked: {', '.join(result.not_fetched)} (the package index did not give them)")
    if result.drifted:
        summary.append(f"drift in {len(result.drifted)} of {len(rows)}: {', '.join(result.drifted)} (a drifted "
                       "target's line names its real kind and parameters)")
    elif not result.not_fetched:
        summary.append("no drift: the manifest matches every supported release's source")
    drawn = table(("RELEASE", "RESULT", "WHAT"), [
        (row.release, row.result, "; ".join(map(str, row.problems)) or row.error or "-") for row in rows])
    heading = (f"{asked} against the {len(rows)} vLLM releases from the support floor {result.floor} to the "
               "newest on the package index")
    return "\n".join([one_line(heading), "", drawn, "", *map(one_line, summary)])


def check_supported_command(ctx: typer.Context, workaround: str | None, json_output: bool, quiet: bool) -> None:
    manifest = load_manifest(ctx)
    if "vllm" not in manifest.support:
        fail("check --supported needs the manifest's [support] vllm floor, and this manifest has none")
    if workaround is not None and workaround not in manifest.by_id:
        hint = unknown_id_hint(workaround, list(manifest.ids))
        fail(f"unknown workaround id {workaround!r}{hint} (known: {', '.join(manifest.ids) or 'none'})")
    with shown_progress(quiet) as shown:
        result = check_supported(manifest, workaround, progress=shown.step, warn=warn)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else render(result))
    if result.not_fetched:
        raise typer.Exit(ExitCode.OUTSIDE_SERVICE)
    if result.drifted:
        raise typer.Exit(ExitCode.FINDING)
