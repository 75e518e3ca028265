"""What every command shares: the global ``--manifest``, the common options, reading the manifest
and the settings, and the stack to decide for. How a command ends (``fail``) is
``tracker.commands.exits``'s."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import tracker
from tracker import PATH_ECHO_LIMIT, echoed, one_line
from tracker.commands.exits import fail, on_os_error
from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.model.environment import Environment, OutsideVariables, Settings, assumptions, parse_platform
from tracker.model.vocabulary import ErrorKind, ToolError

if TYPE_CHECKING:
    from tracker.decision.stack import StackDecisions
    from tracker.upstream.settings import ClientSettings


@dataclass(frozen=True)
class ProgramOptions:
    """What the program's own options (written before the command) say, kept in typer's context
    for the command: the manifest ``--manifest`` names (None: the shipped one)."""

    manifest: Path | None = None


def given_manifest(ctx: typer.Context) -> Path | None:
    """The manifest ``--manifest`` (or ``XPU_WORKAROUNDS_MANIFEST``) names; None: the shipped one."""
    options = ctx.find_object(ProgramOptions)
    return options.manifest if options is not None else None


ManifestOption = Annotated[
    Path | None,
    typer.Option("--manifest", metavar="PATH", help="Manifest to read (default: this repository's workarounds.toml, else the "
                                    "shipped one; status: the shipped one).",
                 envvar=tracker.MANIFEST, show_default=False),
]


def complete_platform(incomplete: str) -> list[str]:
    """``--platform <TAB>``: the platforms a workaround can be for."""
    from tracker.model.vocabulary import PLATFORMS

    return [name for name in PLATFORMS if name.startswith(incomplete)]


PlatformOption = Annotated[
    str | None, typer.Option("--platform", metavar="PLATFORM", help="Evaluate for this platform: xpu, cuda, rocm "
                                                                     "or cpu.",
                                show_default=False, autocompletion=complete_platform)]


AssumeOption = Annotated[
    list[str] | None, typer.Option("--assume", metavar="NAME==VERSION",
                                      help="Evaluate as if this version were installed (repeatable).",
                                      show_default=False)]


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the text (its "
                                                          "\"schema\" field versions its shape).")]


QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr (shown only on a terminal).")]


def installed(module: str) -> bool:
    """Whether ``module`` (an optional dependency) can be imported here."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def require_extra(module: str, extra: str, what: str) -> None:
    """Exit 2 with the install command when ``module`` (an optional dependency) is not installed."""
    if not installed(module):
        fail(f"{what} needs the {extra} extra: pip install 'xpu-workarounds[{extra}]'")


def must_name_a_release(given: str, option: str) -> None:
    """Refuse, before anything is fetched or read, what names no release: neither ``vllm==X`` nor
    an existing wheel, sdist or source tree (``--since 0.33.0`` for ``--since vllm==0.33.0``);
    ``check`` and ``census`` ask it of every release they are given, before the first is fetched."""
    from packaging.version import InvalidVersion, Version

    from tracker.release.fetch import REQUIREMENT

    try:
        if REQUIREMENT.match(given.strip()) or Path(given).expanduser().exists():
            return
    except (OSError, ValueError):  # a name too long for a path, a NUL in it
        pass
    try:
        release = f"vllm=={Version(given.strip())}"
        meant = f"; did you mean {f'{option} {release}' if option.startswith('--') else release}?"
    except InvalidVersion:
        meant = ""
    fail(f"{option} {echoed(given)} is neither vllm==VERSION nor an existing wheel, sdist or source tree{meant}")


def github_settings() -> ClientSettings:
    """The GitHub client's settings from the environment; a malformed ``GITHUB_API_URL`` (or one
    with credentials in it: ``BadApiUrl``, whose line never repeats it) is bad input, as is an
    ``XPU_WORKAROUNDS_GITHUB_API`` that is neither graphql nor rest."""
    from tracker.upstream.settings import ClientSettings

    for problem in OutsideVariables.from_env().problems:
        fail(problem)
    return ClientSettings.from_env()


def manifest_must_exist(path: Path | str | None) -> None:
    """A manifest that is not there is bad input: one line, exit 2 (not a list of its problems)."""
    import os

    named = path if path is not None else reader.default_path()
    with on_os_error(f"cannot read the manifest {echoed(str(named), PATH_ECHO_LIMIT, quoted=False)}"):
        os.stat(named)


MANIFEST_NAME = "workarounds.toml"


class ManifestLinkedOut(ToolError):
    """The repository's ``workarounds.toml`` is a link to a file outside the repository: not read."""

    kind = ErrorKind.BAD_INPUT


def repository_manifest(start: Path | None = None) -> Path | None:
    """The nearest ``workarounds.toml`` from ``start`` (default: the working directory) up to the
    root of the git repository it is in (the directory holding ``.git``), as ruff and pre-commit
    find their configuration; None outside a repository, or in one without it (then the shipped
    manifest is read): a file above the repository, another user's for one, is never picked up,
    and neither is one that is a link out of the repository (``ManifestLinkedOut``): a clone
    carries such a link as it was committed, pointing wherever its author chose. A manifest found
    here is read, never has its modules run (``tracker.model.adopter``: only a named one, in vLLM)."""
    here = (Path.cwd() if start is None else start).absolute()
    found = None
    for directory in (here, *here.parents):
        candidate = directory / MANIFEST_NAME
        if found is None and candidate.is_file():
            found = candidate
        if (directory / ".git").exists():
            if found is not None and not found.resolve().is_relative_to(directory.resolve()):
                raise ManifestLinkedOut(f"{echoed(str(found), PATH_ECHO_LIMIT, quoted=False)} links to "
                                        f"{echoed(str(found.resolve()), PATH_ECHO_LIMIT, quoted=False)}, outside the repository: "
                                        "not read (--manifest PATH to read a manifest by name)")
            return found
    return None


def unread_manifest_here() -> Path | None:
    """``./workarounds.toml`` when the working directory is in no git repository: never read
    (``repository_manifest``), which a command says in a note rather than in silence."""
    here = Path.cwd().absolute()
    candidate = here / MANIFEST_NAME
    if not candidate.is_file() or any((directory / ".git").exists() for directory in (here, *here.parents)):
        return None
    return candidate


def found_manifest(given: Path | None, repository: bool = True) -> tuple[Path | None, bool]:
    """The manifest a command reads: ``--manifest`` / ``XPU_WORKAROUNDS_MANIFEST`` when given;
    else (``repository``) the repository's own, when it is not the shipped one; else None, the
    shipped one. The second item says whether it was found in the repository.
    ``ManifestLinkedOut`` when the repository's is a link out of it."""
    if given is not None or not repository:
        return given, False
    found = repository_manifest()
    if found is None or found.resolve() == reader.default_path().resolve():
        return None, False
    return found, True


def chosen_manifest(given: Path | None, repository: bool = True) -> tuple[Path | None, bool]:
    """``found_manifest`` for a command (a repository's manifest that links out of it refused:
    ``ManifestLinkedOut``); a ``./workarounds.toml`` outside any repository, which is not read, is
    named in a note on stderr (the command goes on with the shipped manifest)."""
    named, found = found_manifest(given, repository)
    if given is None and repository and not found:
        unread = unread_manifest_here()
        if unread is not None:
            typer.echo(one_line(f"xpu-workarounds: note: {unread} is not read outside a git repository; reading "
                                f"the shipped manifest (--manifest {shlex.quote(MANIFEST_NAME)} to read it)"),
                       err=True)
    return named, found


def say_found(path: Path) -> None:
    """One line on stderr: the manifest was found, not named (as every linter says its configuration)."""
    typer.echo(one_line(f"xpu-workarounds: manifest {path} (this repository's; --manifest PATH for another)"),
               err=True)


def note_repository_manifest(ctx: typer.Context) -> None:
    """``status`` decides with the shipped manifest, as the plugin does: one note on stderr when
    the repository here has a manifest of its own that differs from it (none named)."""
    if given_manifest(ctx) is not None:
        return
    try:
        found = repository_manifest()
    except ManifestLinkedOut:
        return  # status never reads the repository's manifest; one that links out is not even compared
    shipped = reader.default_path()
    if found is None or found.resolve() == shipped.resolve() or reader.digest(found) == reader.digest(shipped):
        return
    typer.echo(one_line(f"xpu-workarounds: note: status decides with the shipped manifest, as the plugin does; "
                        f"this repository has its own, {found} (--manifest {shlex.quote(str(found))} to "
                        "decide with it)"), err=True)


def load_manifest(ctx: typer.Context, repository: bool = True) -> manifest_module.Manifest:
    """The manifest the command reads (``chosen_manifest``; ``repository=False``: never the
    repository's, for ``status``, which must agree with the plugin); a missing one is bad input,
    an invalid one its problems and exit 2."""
    named, found = chosen_manifest(given_manifest(ctx), repository)
    manifest_must_exist(named)
    if found and named is not None:
        say_found(named)
    try:
        return reader.load(named)
    except manifest_module.ManifestError as error:
        for problem in error.problems:
            typer.echo(one_line(str(problem)), err=True)
        command = "xpu-workarounds lint" + (f" {shlex.quote(str(named))}" if named is not None else "")
        fail(f"the manifest is invalid (see above); run `{command}` for the full list")


def described_platform(settings: Settings, described: dict[str, str]) -> tuple[str, str] | None:
    """The platform of a stack ``--assume`` describes, where no build label says it: an assumed
    vllm-xpu-kernels (XPU's kernels) means XPU. None: the torch build's label decides."""
    if settings.platform is None and "vllm-xpu-kernels" in described:
        return ("xpu", "assumed")
    return None


def unlabelled_torch_note(described: dict[str, str], env: Environment) -> str | None:
    """One line for an assumed torch without a build label decided for another platform than
    XPU with none given: what it was decided for, and how to ask for XPU."""
    from packaging.version import InvalidVersion, Version

    torch = described.get("torch")
    if torch is None or env.platform == "xpu" or env.platform_source == "override":
        return None
    try:
        if Version(torch).local is not None:
            return None
    except InvalidVersion:
        return None  # the environment reports an unreadable version itself
    why = "PyPI's torch is the CUDA build" if env.platform_source == "assumed" else "the installed torch's build label"
    return (f"--assume torch=={torch} has no build label: decided for {env.platform} ({why}); for XPU, pass "
            f"--platform xpu or --assume torch=={torch}+xpu")


def decided_for(manifest: manifest_module.Manifest, platform: str | None = None,
                assume: list[str] | None = None) -> StackDecisions:
    """Every workaround's decision (``tracker.decision.stack.decide_stack``) under the
    ``XPU_WORKAROUNDS*`` settings, for the stack ``--platform``/``--assume`` describe (default:
    this one); a probe that failed is said on stderr, one line each."""
    from tracker.decision.stack import decide_stack

    settings = Settings.from_env(known_ids=manifest.ids)
    if settings.problems:
        fail("; ".join(settings.problems))
    described = assumptions(assume or [], "--assume")  # InputError: bad input
    if platform is not None:
        settings = settings._replace(platform=parse_platform(platform, "--platform"))
    decided = decide_stack(manifest, settings, described=described, platform=described_platform(settings, described))
    note = unlabelled_torch_note(described, decided.environment)
    if note is not None:
        typer.echo(f"xpu-workarounds: note: {one_line(note)}", err=True)
    for warning in decided.warnings:
        typer.echo(f"xpu-workarounds: warning: {one_line(warning)}", err=True)
    return decided
