"""``upstream``: the state of every upstream reference, and vLLM's dead inline workarounds."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated

import typer

from tracker import one_line
from tracker.commands.context import (
    JsonOption,
    QuietOption,
    chosen_manifest,
    github_settings,
    given_manifest,
    load_manifest,
    require_extra,
)
from tracker.commands.exits import ExitCode, fail
from tracker.commands.output import progress
from tracker.model.reader import default_path


def upstream(
    ctx: typer.Context,
    json_output: JsonOption = False,
    offline: Annotated[bool, typer.Option("--offline", help="Answer from the cache only, and say how old it "
                                                            "is.")] = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="Revalidate every cached answer now (conditional "
                                                            "requests) and fail rather than fall back to the "
                                                            "cache.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the state, commit and release learned into the "
                                                        "manifest, keeping its formatting and comments.")] = False,
    quiet: QuietOption = False,
) -> None:
    """What happened to every upstream reference.

    Its state, landed commit and first release, and which of vLLM's inline workarounds are dead
    at vLLM's current pins."""
    if not offline:  # --offline reads the cache alone: no GitHub client (the base install has none)
        require_extra("github", "github", "upstream")
    from tracker import upstream as upstream_module

    if offline and refresh:
        fail("--offline and --refresh exclude each other")
    if write and chosen_manifest(given_manifest(ctx))[0] is None:  # the shipped one: what every vLLM process here reads
        fail(f"--write needs --manifest PATH, the manifest to update (the shipped {default_path()} is never "
             "written)")
    manifest = load_manifest(ctx)
    client = github_settings()
    mode = "offline" if offline else "refresh" if refresh else "normal"
    with progress(quiet) as shown:
        shown.step("reading the upstream cache" if offline else "asking GitHub")
        report = upstream_module.track(manifest, mode=mode, client=replace(client, progress=shown.request))
    failed = [facts for facts in report.references if facts.error]
    if failed and len(failed) == len(report.references):
        fail(f"no upstream reference could be learned ({failed[0].error}"
             f"{f'; and {len(failed) - 1} more' if len(failed) > 1 else ''})", ExitCode.OUTSIDE_SERVICE)
    if report.warning:
        typer.echo(one_line(f"xpu-workarounds: warning: {report.warning}"), err=True)
    for facts in failed:  # what a server said, quoted
        typer.echo(one_line(f"xpu-workarounds: warning: {facts.error}"), err=True)
    if json_output:
        if report.source == "cache":
            typer.echo(f"upstream facts from the cache of {report.as_json()['checked_at']} "
                       f"({upstream_module.age_text(report.checked_at)} old)", err=True)
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        from tracker.commands.upstream_text import render

        typer.echo(render(report))
    if refresh and failed:  # --refresh promises every fact checked now
        fail(f"{len(failed)} of {len(report.references)} upstream references could not be learned (see the "
             f"warnings above)", ExitCode.OUTSIDE_SERVICE)
    if write:
        changes = upstream_module.write_back(manifest.path, report)
        for line in changes or [f"{manifest.path}: already up to date"]:
            typer.echo(line, err=json_output)

