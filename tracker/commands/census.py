"""``census``: vLLM's own inline XPU workarounds in a release's source, rendered.

The work is ``tracker.census``'s (reading the source) and ``tracker.release.census``'s (getting
it, as ``check`` does); this module renders the answer and picks the exit code of a finding. With
``--adopt`` it prints (or ``--write`` adds to a manifest) the ``[[tracked]]`` entries
``tracker.census.adopt`` writes for the sites not tracked.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import typer

from tracker import PATH_ECHO_LIMIT, echoed, one_line, paths
from tracker.census.adopt import Adopted, adopted, carried_note, entries_text, with_tracked
from tracker.census.count import Census, CountedSite
from tracker.commands.context import (
    MANIFEST_NAME,
    JsonOption,
    QuietOption,
    given_manifest,
    load_manifest,
    manifest_must_exist,
    must_name_a_release,
    repository_manifest,
)
from tracker.commands.exits import ExitCode, fail, on_os_error
from tracker.commands.output import progress as shown_progress
from tracker.commands.output import prose_wrapped, table, table_width, warn
from tracker.model import reader
from tracker.model.document import Unreadable, read_bytes
from tracker.model.manifest import Manifest, provenance
from tracker.release.census import census

HEADERS = ("SITE", "KIND", "CONFIDENCE", "TRACKED", "REFERENCES", "SUMMARY")
# Free text, cut to the width; the site, its kind and confidence and the entry are identifiers, never cut
# (too wide: stacked, by ``table``).
CUT: dict[int, Literal["start", "end"]] = {4: "end", 5: "end"}


def site_rows(sites: list[CountedSite]) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for counted in sites:
        site = counted.site
        tracked = counted.tracked or "-"
        if counted.tracked is not None and (counted.dead or counted.partly_dead):
            tracked += " (dead)" if counted.dead else " (partly dead)"
        rows.append((site.where, str(site.kind), str(site.confidence), tracked, ", ".join(site.references) or "-",
                     site.summary))
    return rows


def render(result: Census, width: int | None = None) -> str:
    """The census as a person reads it; each table's sites, references and summaries cut to ``width``
    (None: not cut)."""
    pins = ", ".join(f"{name} {pin}" for name, pin in result.pins.items()) or "none found (no requirements/xpu.txt)"
    release = echoed(result.release, quoted=False) if result.release else "of unknown version"
    lines = [one_line(f"vLLM {release} ({echoed(result.source, PATH_ECHO_LIMIT, quoted=False)}); XPU pins: {pins}"), ""]
    lines.append(table(HEADERS, site_rows(result.sites), cut=CUT, width=width) if result.sites
                 else "no inline XPU workaround found")
    tracked = [c for c in result.sites if c.tracked is not None]
    trackable = result.untracked_with_reference
    lines += ["", f"{len(result.sites)} sites: {len(tracked)} tracked, {len(result.sites) - len(tracked)} not "
                  f"({len(trackable)} of them naming an upstream reference)"]
    lines += [one_line(f"{c.tracked}: {c.dead_detail}") for c in tracked if c.dead_detail and c.dead is not None]
    lines += [one_line(f"{c.site.where}: decided by the pins: {c.decided_by_pins}") for c in result.sites
              if c.decided_by_pins]
    lines += [one_line(f"note: tracked, but found in no site: {line}") for line in result.unplaced]
    if result.since is not None:
        since = result.since.release or result.since.source
        for title, sites in ((f"new since {since}", result.new), (f"gone since {since}", result.gone)):
            lines += ["", one_line(f"{title}: {len(sites)}")]
            if sites:
                lines.append(table(HEADERS, site_rows(sites), cut=CUT, width=width))
    return prose_wrapped(lines, width)


def census_document(result: Census, manifest: Manifest) -> dict[str, object]:
    """``census --json``: the census, and what every reporting command's JSON carries: the ``tool``
    (as ``status --json``), the release's XPU pins (``{"torch": "2.13.0"}``) and its ``source``."""
    return {**result.as_json(), "tool": provenance(manifest.path, manifest.sha256), "source": result.source,
            "pins": {name: str(pin) for name, pin in result.pins.items()}}


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
    adopt: Annotated[bool, typer.Option(
        "--adopt", help="Print, as TOML, the [[tracked]] entries of the untracked sites that name an upstream "
                        "reference (or of those --site chooses).")] = False,
    site: Annotated[list[str] | None, typer.Option(
        "--site", metavar="FILE:LINE", show_default=False,
        help="With --adopt: the untracked site holding this line of this file (vllm/...); repeatable.")] = None,
    write: Annotated[bool, typer.Option(
        "--write", help="With --adopt: add the entries to the manifest read (--manifest, else this "
                        "repository's workarounds.toml), keeping its comments; the shipped manifest is never "
                        "written.")] = False,
    quiet: QuietOption = False,
) -> None:
    """vLLM's own inline XPU workarounds in a release.

    Read from its source, never imported or run: per site its file and lines, a summary, the
    upstream references, and the [[tracked]] entry that covers it (or none); with --adopt, the
    [[tracked]] entries for those not tracked."""
    chosen = adoption(ctx, adopt, site or [], write, json_output, check_tracked)
    for given, option in ((release, "the release"), (since, "--since")):
        if given is not None:
            must_name_a_release(given, option)
    manifest = load_manifest(ctx)
    with shown_progress(quiet) as shown:
        result = census(manifest, release, since=since, progress=shown.step, warn=warn)
    if adopt:
        adopt_sites(ctx, manifest, result, chosen, write)
        return
    typer.echo(json.dumps(census_document(result, manifest), indent=2) if json_output
               else render(result, table_width()))
    if check_tracked and result.untracked_with_reference:
        name_untracked(result, release, given_manifest(ctx))
        raise typer.Exit(ExitCode.FINDING)


def name_untracked(result: Census, release: str, named: Path | None) -> None:
    """What ``--check`` failed on, on stderr (stdout stays the table or the JSON): each untracked site
    naming a reference, where it is and what it names, then the command that adopts them."""
    for counted in result.untracked_with_reference:
        site = counted.site
        typer.echo(one_line(f"xpu-workarounds: untracked: {site.where} names {', '.join(site.references)}; "
                            "no [[tracked]] entry covers it"), err=True)
    sites = len(result.untracked_with_reference)
    manifest = f"--manifest {shlex.quote(echoed(str(named), PATH_ECHO_LIMIT, quoted=False))} " if named else ""
    typer.echo(one_line(f"xpu-workarounds: `xpu-workarounds {manifest}census "
                        f"{shlex.quote(echoed(release, PATH_ECHO_LIMIT, quoted=False))} "
                        f"--adopt` prints the [[tracked]] {'entry' if sites == 1 else 'entries'} to track "
                        f"{'it' if sites == 1 else 'them'} (--write adds {'it' if sites == 1 else 'them'} "
                        "to the manifest)"), err=True)


# ------------------------------------------------------------------------------ --adopt


def adoption(ctx: typer.Context, adopt: bool, sites: list[str], write: bool, json_output: bool,
             check_tracked: bool) -> list[tuple[str, int]] | None:
    """The sites ``--site`` chooses (None: every untracked one naming a reference), every refusal of
    the adopting options said before anything is fetched or read."""
    for asked, option in ((bool(sites), "--site"), (write, "--write")):
        if asked and not adopt:
            fail(f"{option} goes with --adopt")
    if adopt and (json_output or check_tracked):
        fail(f"--adopt prints TOML entries: it does not go with {'--json' if json_output else '--check'}")
    if write:
        writable_manifest(given_manifest(ctx))
    chosen = []
    for given in sites:
        file, _, line = given.rpartition(":")  # a line: ASCII digits ("²" is a digit to str.isdigit), at most nine
        if not file or not (line.isascii() and line.isdigit()) or len(line) > 9 or int(line) < 1:
            fail(f"--site {echoed(given)} is not FILE:LINE (a file of vLLM's tree as census prints it, such as "
                 "vllm/platforms/xpu.py:402)")
        chosen.append((file, int(line)))
    return chosen or None


def writable_manifest(named: Path | None) -> Path:
    """The manifest ``--write`` adds to: the one ``--manifest`` names, else the repository's own (the
    one the census read, as ``new`` writes it); never the shipped one (of this copy, or of any
    installed copy)."""
    given = named if named is not None else repository_manifest()
    if given is None:
        fail("--write adds to a repository's workarounds.toml: run it inside the repository, or name the manifest "
             "with --manifest PATH (the shipped manifest is never written)")
    manifest_must_exist(given)  # first: a link loop is one line here, never resolved below
    shipped = [reader.default_path(), Path(paths.PACKAGE_DIR) / MANIFEST_NAME]
    resolved = given.resolve()
    installed = resolved.parent.name == "tracker" and (resolved.parent / "plugin.py").is_file()
    if installed or any(resolved == path.resolve() for path in shipped):
        fail(f"{echoed(str(given), PATH_ECHO_LIMIT, quoted=False)} is the shipped manifest, which census --adopt "
             "never writes: --manifest PATH names a repository's")
    return given


def adopt_sites(ctx: typer.Context, manifest: Manifest, result: Census, chosen: list[tuple[str, int]] | None,
                write: bool) -> None:
    """Print the entries (or with ``write`` add them to the manifest), and on stderr which releases
    their ``carried_in`` was not judged from."""
    entries = adopted(result, manifest, chosen)  # NotAdoptable: bad input, said where every command ends
    if not entries:
        typer.echo(one_line(f"xpu-workarounds: nothing to adopt: every site of vLLM {result.release} that names an "
                            "upstream reference is tracked"), err=True)
        return
    release = result.release or ""
    for one in entries:
        if one.warning is not None:
            typer.echo(one_line(f"xpu-workarounds: warning: {one.warning}"), err=True)
    if write:
        path = writable_manifest(given_manifest(ctx))
        write_entries(path, entries, release)
        for one in entries:
            typer.echo(one_line(f"added [[tracked]] {one.id} for {one.counted.site.where}"))
        typer.echo(one_line(f"wrote {path}: review each entry's id, title and marker, then `xpu-workarounds lint`"))
    else:
        typer.echo(entries_text(entries, release), nl=False)
    typer.echo(one_line(f"xpu-workarounds: note: {carried_note(result)}"), err=True)


def _manifest_bytes(path: Path, shown: str) -> bytes:
    """The manifest's bytes, read as every command reads a manifest (a regular file, within its size):
    a FIFO, a device or a folder is one line, never a wait."""
    try:
        return read_bytes(path)
    except Unreadable as error:
        fail(f"{shown} not written: {error.message}")


def write_entries(path: Path, entries: list[Adopted], release: str) -> None:
    """Add ``entries`` to the manifest at ``path``, which must still pass lint: replaced atomically,
    its mode kept, only if nobody changed it meanwhile; nothing written on any failure."""
    shown = echoed(str(path), PATH_ECHO_LIMIT, quoted=False)
    original = _manifest_bytes(path, shown)
    updated = with_tracked(original, entries, release, where=shown)  # NotAdoptable: said where every command ends
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-adopt-") as scratch:
        checked = Path(scratch) / MANIFEST_NAME
        checked.write_text(updated, encoding="utf-8")
        problems = reader.check(checked)
    if problems:
        fail(f"{shown} not written: with the entries it would not pass lint ({problems[0].field}: "
             f"{problems[0].message})")

    def unchanged(temporary: Path) -> None:
        try:
            now = read_bytes(path)
        except Unreadable as error:
            raise OSError(f"{shown} cannot be read again ({error.message}); run it again") from None
        if now != original:
            raise OSError(f"{shown} changed while census ran; run it again")

    target = Path(os.path.realpath(path))
    with on_os_error("nothing written"):
        paths.atomic_write(target, updated.encode("utf-8"), mode=stat.S_IMODE(os.stat(target).st_mode),
                           before_replace=unchanged)
