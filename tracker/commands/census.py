"""``census``: vLLM's own inline XPU workarounds in a release's source, rendered.

The work is ``tracker.census``'s (reading the source) and ``tracker.release.census``'s (getting
it, as ``check`` does); this module renders the answer and picks the exit code of a finding.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer

from tracker import one_line
from tracker.census.count import Census, CountedSite
from tracker.commands.context import JsonOption, QuietOption, load_manifest, must_name_a_release
from tracker.commands.exits import ExitCode
from tracker.commands.output import progress as shown_progress
from tracker.commands.output import table, table_width, warn
from tracker.release.census import census

HEADERS = ("SITE", "TRACKED", "REFERENCES", "SUMMARY")
# Cut to the width (a site from its start: its file name and lines stay); the entry never is.
CUT: dict[int, Literal["start", "end"]] = {0: "start", 2: "end", 3: "end"}


def site_rows(sites: list[CountedSite]) -> list[tuple[str, str, str, str]]:
    rows = []
    for counted in sites:
        site = counted.site
        tracked = counted.tracked or "-"
        if counted.tracked is not None and (counted.dead or counted.partly_dead):
            tracked += " (dead)" if counted.dead else " (partly dead)"
        rows.append((site.where, tracked, ", ".join(site.references) or "-", site.summary))
    return rows


def render(result: Census, width: int | None = None) -> str:
    """The census as a person reads it; each table's sites, references and summaries cut to ``width``
    (None: not cut)."""
    pins = ", ".join(f"{name} {pin}" for name, pin in result.pins.items()) or "none found (no requirements/xpu.txt)"
    lines = [one_line(f"vLLM {result.release or 'of unknown version'} ({result.source}); XPU pins: {pins}"), ""]
    headers = HEADERS
    lines.append(table(headers, site_rows(result.sites), cut=CUT, width=width) if result.sites
                 else "no inline XPU workaround found")
    tracked = [c for c in result.sites if c.tracked is not None]
    trackable = result.untracked_with_reference
    lines += ["", f"{len(result.sites)} sites: {len(tracked)} tracked, {len(result.sites) - len(tracked)} not "
                  f"({len(trackable)} of them naming an upstream reference)"]
    lines += [one_line(f"{c.tracked}: {c.dead_detail}") for c in tracked if c.dead_detail and c.dead is not None]
    lines += [one_line(f"note: tracked, but found in no site: {line}") for line in result.unplaced]
    if result.since is not None:
        since = result.since.release or result.since.source
        for title, sites in ((f"new since {since}", result.new), (f"gone since {since}", result.gone)):
            lines += ["", one_line(f"{title}: {len(sites)}")]
            if sites:
                lines.append(table(headers, site_rows(sites), cut=CUT, width=width))
    return "\n".join(lines)


def census_command(
    ctx: typer.Context,
    release: Annotated[str, typer.Argument(metavar="vllm==X | PATH", show_default=False,
                                           help="A vLLM release (fetched with pip, never installed or run), "
                                                "or a wheel, source distribution or source tree.")],
    since: Annotated[str | None, typer.Option(
        "--since", metavar="vllm==Y | PATH", show_default=False,
        help="Also the sites new since that release (or wheel, sdist, tree) and those gone from it.")] = None,
    json_output: JsonOption = False,
    check_tracked: Annotated[bool, typer.Option(
        "--check", help="Exit 3 when a site no [[tracked]] entry covers names an upstream reference.")] = False,
    quiet: QuietOption = False,
) -> None:
    """vLLM's own inline XPU workarounds in a release.

    Read from its source, never imported or run: per site its file and lines, a summary, the
    upstream references, and the [[tracked]] entry that covers it (or none)."""
    for given, option in ((release, "the release"), (since, "--since")):
        if given is not None:
            must_name_a_release(given, option)
    manifest = load_manifest(ctx)
    with shown_progress(quiet) as shown:
        result = census(manifest, release, since=since, progress=shown.step, warn=warn)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else render(result, table_width()))
    if check_tracked and result.untracked_with_reference:
        raise typer.Exit(ExitCode.FINDING)
