"""``retire``: which workarounds no supported stack needs, and the removal PRs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tracker.commands.context import EXIT_RETIRABLE, EXIT_UPSTREAM, JsonOption, fail, load_manifest, require_extra
from tracker.model import manifest as manifest_module
from tracker.model.vocabulary import SCHEMA

if TYPE_CHECKING:
    from tracker.upstream.floors import Floors

def retire(
    json_output: JsonOption = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 3 when something is retirable.")] = False,
    open_prs: Annotated[bool, typer.Option(
        "--open-prs", help="Open or update one removal PR per retirable workaround, and the dashboard issue, "
                           "judged from the repository's base branch.")] = False,
    repo: Annotated[str | None, typer.Option("--repo", metavar="OWNER/NAME", show_default=False,
                                                help="With --open-prs: the repository.")] = None,
    base: Annotated[str | None, typer.Option("--base", metavar="BRANCH", show_default=False,
                                                help="With --open-prs: the base branch (default: the "
                                                     "repository's default branch).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --open-prs: print what would be done and "
                                                            "send no write request.")] = False,
    only: Annotated[str | None, typer.Option("--only", metavar="ID", show_default=False,
                                                help="With --open-prs: only this workaround.")] = None,
    no_refresh: Annotated[bool, typer.Option(
        "--no-refresh", help="With --open-prs: judge the base manifest's facts as written; keep no "
                             "upstream-facts PR.")] = False,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Without --open-prs: judge with the upstream facts `upstream` learns now (cached "
                        "answers younger than an hour reused), not only the manifest's.")] = False,
) -> None:
    """Which workarounds no supported stack needs any more, with the evidence and the floors."""
    require_extra("github", "github", "retire")
    from tracker.model.retirement import retirement

    if open_prs:
        if fresh:
            fail("--fresh goes without --open-prs (which always refreshes, unless --no-refresh)")
        _open_removal_prs(repo, base, dry_run, only, json_output, check, not no_refresh)
        return
    if repo is not None or base is not None or dry_run or only is not None or no_refresh:
        fail("--repo, --base, --dry-run, --only and --no-refresh go with --open-prs")
    manifest = load_manifest()
    judged, floors, facts = _judged(manifest, fresh)
    retirable, kept = [], []
    for w in judged.workarounds:
        verdict = retirement(w, floors.support)
        if verdict.retirable:
            retirable.append({"id": w.id, "evidence": verdict.detail})
        else:
            kept.append({"id": w.id, "reason": verdict.detail})
    if json_output:
        typer.echo(json.dumps({"schema": SCHEMA, "retirable": retirable, "kept": kept, "floors": floors.as_json(),
                               "floors_note": floors.note, "facts": facts}, indent=2))
    else:
        for item in retirable:
            typer.echo(f"retirable  {item['id']}: {item['evidence']}")
        for item in kept:
            typer.echo(f"keep       {item['id']}: {item['reason']}")
        for floor in floors.floors:
            typer.echo(f"floor      {floor.describe()}")
        if floors.note:
            typer.echo(f"xpu-workarounds: warning: {floors.note}", err=True)
    if check and retirable:
        raise typer.Exit(EXIT_RETIRABLE)


def _judged(manifest: manifest_module.Manifest, fresh: bool) -> tuple[manifest_module.Manifest, Floors, dict[str, object]]:
    """The manifest to judge, its effective floors and where its facts came from. Without
    ``--fresh`` and without a floor policy this reads nothing but the manifest."""
    from tracker.upstream.floors import fixed_floors

    if not fresh and not manifest.policy.active:
        return manifest, fixed_floors(manifest), {"source": "manifest"}
    from tracker.upstream.cache import Mode, NoUsableCache
    from tracker.upstream.client import ClientSettings, GitHubError
    from tracker.upstream.overlay import with_facts
    from tracker.upstream.tracking import learn

    try:
        # A policy alone is evaluated from the cache (no network); --fresh asks GitHub as `upstream` does.
        learned = learn(manifest, client=ClientSettings.from_env(), mode=Mode.NORMAL if fresh else Mode.OFFLINE)
    except (GitHubError, NoUsableCache, OSError) as error:
        why = ("the support policy needs upstream facts: run `xpu-workarounds upstream` first" if not fresh
               else f"upstream facts could not be learned ({error})")
        return manifest, fixed_floors(manifest, f"{why}; judged with the fixed floors and the manifest's facts"), {
            "source": "manifest", "note": why}
    document: dict[str, object] = {"source": learned.report.source,
                                   "checked_at": learned.report.as_json()["checked_at"]}
    if fresh:
        return with_facts(manifest, learned.report), learned.floors, document
    return manifest, learned.floors, {"source": "manifest", "floors_from": learned.report.source}


def _open_removal_prs(repo: str | None, base: str | None, dry_run: bool, only: str | None, json_output: bool,
                      check: bool, refresh: bool) -> None:
    from tracker.retire import RetireError, check_repository, open_prs

    if repo is None:
        fail("--open-prs needs --repo OWNER/NAME")
    try:
        check_repository(repo)
        outcome = open_prs(repo, base=base, only=only, dry_run=dry_run,
                           echo=None if json_output else typer.echo, refresh=refresh)
    except ValueError as error:
        fail(str(error))
    except RetireError as error:
        fail(str(error), EXIT_UPSTREAM)
    if json_output:
        typer.echo(json.dumps(outcome.as_json(), indent=2))
    else:
        for floor in outcome.floors.floors if outcome.floors else ():
            typer.echo(f"{'dry run: ' if dry_run else ''}floor       {floor.describe()}")
        if dry_run and outcome.halted is None:
            typer.echo("dry run: nothing was changed")
    if outcome.halted is not None:
        fail(outcome.halted, EXIT_UPSTREAM)
    if outcome.failed:
        fail("some steps failed (see above); the others were done", EXIT_UPSTREAM)
    if check and outcome.retirable:
        raise typer.Exit(EXIT_RETIRABLE)

