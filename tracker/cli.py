"""``xpu-workarounds``: the command line. Exit codes and JSON shapes are the README's ("Command line").

``status``, ``explain``, ``lint``, ``docs`` and the ``retire`` plan answer from
distribution metadata and the manifest alone: they import neither torch, vLLM nor
PyGithub. GitHub code is imported only by the commands that talk to GitHub.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

import tracker
from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.model.environment import Environment, InputError, Settings, assumptions, build, parse_platform
from tracker.model.versions import detect_versions
from tracker.model.vocabulary import SCHEMA

if TYPE_CHECKING:
    from tracker.upstream.floors import Floors

EXIT_BAD_INPUT = 2
EXIT_RETIRABLE = 3
EXIT_UPSTREAM = 4
EXIT_NODES_DISAGREE = 3
EXIT_CLUSTER_UNREACHABLE = 4

app = typer.Typer(
    name="xpu-workarounds",
    help="Intel XPU workarounds for vLLM: what applies here, what upstream fixed, what can be retired.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state: dict[str, Path | None] = {"manifest": None}

ManifestOption = Annotated[
    Path | None,
    typer.Option("--manifest", help="Manifest to read (default: the shipped workarounds.toml).",
                 envvar=tracker.MANIFEST, show_default=False),
]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.echo(f"xpu-workarounds: error: {one_line(message)}", err=True)
    raise typer.Exit(code)


def one_line(text: str) -> str:
    """``text`` with control characters escaped: a value quoted from input cannot break the line."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def load_manifest() -> manifest_module.Manifest:
    try:
        return reader.load(_state["manifest"])
    except manifest_module.ManifestError as error:
        for problem in error.problems:
            typer.echo(one_line(str(problem)), err=True)
        fail("the manifest is invalid (see above); run `xpu-workarounds lint` for the full list")


def settings_for(manifest: manifest_module.Manifest) -> Settings:
    settings = Settings.from_env(known_ids=manifest.ids)
    if settings.problems:
        fail("; ".join(settings.problems))
    return settings


def environment_for(settings: Settings, platform: str | None, assume: list[str] | None) -> tuple[Environment, str | None]:
    """The stack to decide for, and why the installed vLLM's source cannot be probed for it (or None)."""
    try:
        described = assumptions(assume or [], "--assume")
        assumed = {**settings.assume, **described}
        detected = detect_versions()
        if platform is not None:
            env = build(platform=parse_platform(platform, "--platform"), platform_source="override",
                        assume=assumed, detected=detected)
        elif settings.platform is not None:
            env = build(platform=settings.platform, platform_source="override", assume=assumed, detected=detected)
        else:
            env = build(assume=assumed, detected=detected)
    except InputError as error:
        fail(str(error))
    installed = detected["vllm"].raw
    if "vllm" in described and described["vllm"] != installed:
        where = f"the installed vLLM is {installed}" if installed else "vLLM is not installed here"
        return env, f"vllm=={described['vllm']} is described by --assume; {where}"
    return env, None


@app.callback()
def main_options(manifest: ManifestOption = None) -> None:
    _state["manifest"] = manifest


PlatformOption = Annotated[
    str | None, typer.Option("--platform", help="Evaluate for this platform: xpu, cuda, rocm or cpu.",
                                show_default=False)]
AssumeOption = Annotated[
    list[str] | None, typer.Option("--assume", metavar="NAME==VERSION",
                                      help="Evaluate as if this version were installed (repeatable).",
                                      show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object (shape: README, \"Command line\").")]


@app.command()
def status(
    json_output: JsonOption = False,
    platform: PlatformOption = None,
    assume: AssumeOption = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The same on every alive node of a Ray cluster, "
                                                            "differing nodes flagged (needs the [ray] extra).")] = False,
    address: Annotated[str | None, typer.Option("--address", metavar="ADDR", show_default=False,
                                                   help="With --cluster: the cluster (default: auto).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS",
                                           help="With --cluster: how long to wait for each node.")] = 60.0,
    reports: Annotated[str | None, typer.Option("--reports", metavar="DIR", show_default=False,
                                                   help="With --cluster: where running processes write their "
                                                        "reports on every node (default: each node's "
                                                        "XPU_WORKAROUNDS_REPORT).")] = None,
) -> None:
    """Each workaround's decision for this environment, or for a described stack."""
    from tracker.catalogue import status_document, status_table

    if cluster:
        _cluster_status(json_output, platform, assume, address, timeout, reports)
        return
    if address is not None or reports is not None:
        fail("--address and --reports go with --cluster")
    manifest = load_manifest()
    settings = settings_for(manifest)
    env, not_probed = environment_for(settings, platform, assume)
    document = status_document(manifest, env, settings, not_probed)
    typer.echo(json.dumps(document, indent=2) if json_output else status_table(document))


def _cluster_status(json_output: bool, platform: str | None, assume: list[str] | None, address: str | None,
                    timeout: float, reports: str | None) -> None:
    from tracker import cluster as cluster_module

    if platform is not None or assume:
        fail("--platform and --assume describe one stack; with --cluster every node answers for its own")
    if not 0 < timeout <= 3600:
        fail(f"--timeout {timeout:g}: give a number of seconds above 0 and at most 3600")
    try:
        result = cluster_module.gather(address or "auto", timeout, reports)
    except cluster_module.ClusterUnreachable as error:
        fail(str(error), EXIT_CLUSTER_UNREACHABLE)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else cluster_module.render(result))
    if not result.agree:
        raise typer.Exit(EXIT_NODES_DISAGREE)


@app.command()
def explain(
    workaround_id: Annotated[str, typer.Argument(metavar="ID", help="A workaround id from the manifest.")],
    platform: PlatformOption = None,
    assume: AssumeOption = None,
) -> None:
    """Everything about one workaround: why, how, targets, upstream, windows, decision, retirement."""
    from tracker.catalogue import decision_here, explain_text

    manifest = load_manifest()
    if workaround_id not in manifest.by_id:
        fail(f"unknown workaround id {workaround_id!r} (known: {', '.join(manifest.ids)})")
    settings = settings_for(manifest)
    env, not_probed = environment_for(settings, platform, assume)
    w = manifest.get(workaround_id)
    typer.echo(explain_text(w, *decision_here(w, env, settings, not_probed), manifest))


@app.command()
def lint(path: Annotated[Path | None, typer.Argument(help="Manifest to check (default: the shipped one).",
                                                        show_default=False)] = None) -> None:
    """Validate a manifest and its workaround modules: one line per problem, PATH:LINE: field: message."""
    from tracker.lint import lint as lint_manifest

    problems = lint_manifest(path if path is not None else _state["manifest"])
    for problem in problems:
        typer.echo(one_line(str(problem)))  # a path quoted from input cannot break the line
    if problems:
        raise typer.Exit(1)
    typer.echo(one_line(f"{path or _state['manifest'] or reader.default_path()}: ok"))


@app.command()
def docs(output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.",
                                                        show_default=False)] = None) -> None:
    """The workaround catalogue in Markdown, generated from the manifest."""
    from tracker.catalogue import markdown

    text = markdown(load_manifest())
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}")
    typer.echo(f"wrote {output}")


@app.command("check")
def check_release(
    release: Annotated[str, typer.Argument(metavar="vllm==X | PATH",
                                           help="A vLLM release (fetched with pip, never installed or run), or a "
                                                "wheel, source distribution or source tree.")],
    json_output: JsonOption = False,
) -> None:
    """Before an upgrade: per workaround, its targets in that release (same fingerprint?), whether
    the release carries its own fix, and the decision at the release's XPU pins. Exit 3 on drift."""
    from tracker import check

    manifest = load_manifest()
    try:
        result = check.check(manifest, release)
    except check.CheckInputError as error:
        fail(str(error))
    except check.NotFetchable as error:
        fail(str(error), check.EXIT_NOT_FETCHABLE)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else check.render(result))
    if result.problems:
        raise typer.Exit(check.EXIT_DRIFT)


@app.command()
def upstream(
    json_output: JsonOption = False,
    offline: Annotated[bool, typer.Option("--offline", help="Answer from the cache only, and say how old it "
                                                            "is.")] = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="Revalidate every cached answer now (conditional "
                                                            "requests) and fail rather than fall back to the "
                                                            "cache.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the state, commit and release learned into the "
                                                        "manifest, keeping its formatting and comments.")] = False,
) -> None:
    """State of every upstream reference, its landed commit and first release, and which of
    vLLM's inline workarounds are dead at vLLM's current pins."""
    from tracker import upstream as upstream_module
    from tracker.upstream.client import GitHubError

    if offline and refresh:
        fail("--offline and --refresh exclude each other")
    manifest = load_manifest()
    mode = "offline" if offline else "refresh" if refresh else "normal"
    try:
        report = upstream_module.track(manifest, mode=mode)
    except (upstream_module.NoUsableCache, GitHubError) as error:
        if isinstance(error, GitHubError):
            fail(f"{error}; {'the cache is left as it was' if refresh else 'and no usable cache'}", EXIT_UPSTREAM)
        fail(str(error), EXIT_UPSTREAM)
    except OSError as error:
        fail(f"cannot use the upstream cache: {error.strerror or error}", EXIT_UPSTREAM)
    failed = [facts for facts in report.references if facts.error]
    if failed and len(failed) == len(report.references):
        fail(f"no upstream reference could be learned ({failed[0].error}"
             f"{f'; and {len(failed) - 1} more' if len(failed) > 1 else ''})", EXIT_UPSTREAM)
    if report.warning:
        typer.echo(f"xpu-workarounds: warning: {report.warning}", err=True)
    for facts in failed:
        typer.echo(f"xpu-workarounds: warning: {facts.error}", err=True)
    if json_output:
        if report.source == "cache":
            typer.echo(f"upstream facts from the cache of {report.as_json()['checked_at']} "
                       f"({upstream_module.age_text(report.checked_at)} old)", err=True)
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        typer.echo(upstream_module.render(report))
    if refresh and failed:  # --refresh promises every fact checked now
        fail(f"{len(failed)} of {len(report.references)} upstream references could not be learned (see the "
             f"warnings above)", EXIT_UPSTREAM)
    if write:
        try:
            changes = upstream_module.write_back(manifest.path, report)
        except (ValueError, OSError) as error:
            fail(f"{manifest.path} not written: {error}")
        for line in changes or [f"{manifest.path}: already up to date"]:
            typer.echo(line, err=json_output)


@app.command()
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
    from tracker.model.decision import retirement

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


def main() -> None:
    """Run the command; a failed write of its output (``status > /dev/full``, a closed pipe)
    is one line on stderr and exit 1, never a traceback."""
    code: int | str | None = 0
    try:
        app()
    except SystemExit as done:
        code = done.code
    except OSError as error:
        code = _output_failed(error)
    try:
        sys.stdout.flush()
    except OSError as error:
        code = _output_failed(error)
    sys.exit(code)


def _output_failed(error: OSError) -> int:
    try:  # what is still buffered goes nowhere, not into a second error as Python exits
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    where = f"{error.filename}" if error.filename else "the output"
    sys.stderr.write(f"xpu-workarounds: error: cannot write {where}: {error.strerror or error}\n")
    return 1


if __name__ == "__main__":
    main()
