"""``new ID --target PATH``: a new workaround's manifest entry, module and test, from a vLLM release's source.

The texts are ``tracker.release.scaffold``'s; this module chooses where they go and writes them:
the manifest ``--manifest`` names, else the repository's own ``workarounds.toml`` (the nearest
from the working directory up to the repository's root), never the manifest of an installed
copy (a repository without one is pointed to ``init``); the module and the test into the
``[layout]`` folders under the manifest's repository root, never through a folder that leads out of
it (the default folders are created for a first workaround, and removed again if writing fails). The
manifest is read as every command reads one (``tracker.model.document``: a regular file, within its
size, UTF-8). Every refusal is one line and touches no file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import shlex
import stat
from pathlib import Path
from typing import Annotated, Any

import typer
from packaging.version import InvalidVersion, Version

from tracker import echoed, one_line, paths
from tracker.commands import context
from tracker.commands.context import QuietOption
from tracker.commands.exits import fail, on_os_error
from tracker.commands.output import progress as shown_progress
from tracker.commands.output import warn
from tracker.model import reader
from tracker.model.document import Unreadable, parse, read_bytes
from tracker.model.manifest import Layout
from tracker.model.tables import TableValidator
from tracker.model.vocabulary import KEYWORD_ID, is_id, keyword_id, module_of
from tracker.release.scaffold import (
    AcrossReleases,
    ReadRelease,
    absent_specifier,
    across_releases,
    entry_text,
    module_text,
    read_targets,
    test_text,
    with_entry,
)

TO_FILL = "to fill in:"  # how lint names a placeholder (tracker.model.placeholders)


def written_manifest(given: Path | None) -> Path:
    """The manifest ``new`` adds to: ``--manifest``, else the repository's; never an installed copy's."""
    found = given if given is not None else context.repository_manifest()
    if found is None:
        from tracker.commands.pins import repository_root as git_root

        if git_root() is not None:
            fail("this repository has no workarounds.toml yet: `xpu-workarounds init` writes a first one, then run "
                 "new again")
        fail("new adds to a repository's workarounds.toml: run it inside the repository, or name the manifest with "
             "--manifest PATH (an installed copy's is never written)")
    if given is not None and not os.path.lexists(given):  # lexists: nothing resolved, a link loop is there
        fail(f"no manifest at {given}: `xpu-workarounds --manifest {shlex.quote(str(given))} init` writes a first "
             "one there, then run new again")
    context.manifest_must_exist(found)  # before anything resolves it: a link loop is one line here
    installed = Path(paths.PACKAGE_DIR) / context.MANIFEST_NAME
    if installed.is_file() and found.resolve() == installed.resolve():
        fail(f"{found} is the manifest of an installed copy, which new never writes: --manifest PATH names a "
             "repository's")
    return found


def repository_root(manifest: Path, layout: Layout) -> Path:
    """Where ``[layout]``'s folders are, as ``lint`` finds them: the folder holding ``.git`` at or above
    the manifest; outside a repository, the working directory where ``[layout]`` names the folders."""
    for folder in manifest.resolve().parents:
        if (folder / ".git").exists():
            return folder
    if "workarounds" in layout.written:
        return Path.cwd()
    fail(f"{manifest} is in no git repository, so there is no root for its workarounds/ and tests/ folders: "
         "run `git init` there, or name them in [layout]")


def _floor(data: dict[str, Any]) -> Version | None:
    """The manifest's ``[support] vllm`` floor, when it names one."""
    support = data.get("support")
    written = support.get("vllm") if isinstance(support, dict) else None
    try:
        return Version(written) if isinstance(written, str) else None
    except InvalidVersion:
        return None


def shown(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def new(
    ctx: typer.Context,
    workaround_id: Annotated[str, typer.Argument(metavar="ID", show_default=False,
                                                 help="The new workaround's id: lower-case words joined by '-'.")],
    target: Annotated[list[str], typer.Option(
        "--target", metavar="PATH", show_default=False,
        help="What it wraps: a dotted path in vLLM, MODULE.ATTRIBUTE or MODULE:ATTRIBUTE, such as "
             "vllm.platforms.xpu:XPUPlatform and a method of it after a '.'; repeatable.")],
    release: Annotated[str | None, typer.Option(
        "--release", metavar="vllm==X | PATH", show_default=False,
        help="The vLLM release whose source the targets are read from, or a wheel, sdist or source tree "
             "(default: the newest on the package index, then every supported release, for absent_in).")] = None,
    quiet: QuietOption = False,
) -> None:
    """Start a workaround: its manifest entry, module and failing test.

    The targets' kind and parameters are read from a vLLM release's source; everything else is a
    placeholder that lint names until it is filled in."""
    if not is_id(workaround_id):
        fail(f"{echoed(workaround_id)} is not an id: lower-case words of letters and digits joined by '-', the first "
             "starting with a letter")
    if keyword_id(workaround_id):
        fail(f"{workaround_id!r} {KEYWORD_ID}")
    manifest = written_manifest(context.given_manifest(ctx))
    problems = [problem for problem in reader.check(manifest) if not problem.message.startswith(TO_FILL)]
    if problems:  # read as every command reads a manifest: a FIFO, a device, a folder, not UTF-8: said here
        for problem in problems:
            typer.echo(one_line(str(problem)), err=True)
        fail(f"{manifest} is invalid (see above): fix what `xpu-workarounds lint {manifest}` lists first")
    try:
        document = parse(manifest)
    except Unreadable as error:  # changed since it was checked
        fail(f"{manifest}: {error.message}")
    text, data = document.text, document.data
    for kind in ("workaround", "tracked"):  # an id names one entry, of either kind
        entries = data.get(kind)
        if workaround_id in [entry.get("id") for entry in (entries if isinstance(entries, list) else [])
                             if isinstance(entry, dict)]:
            named = "workaround" if kind == "workaround" else "[[tracked]] entry"
            fail(f"{manifest} already has a {named} {workaround_id!r}: an id names one entry, of either kind")
    layout = TableValidator(manifest, text, data).read_layout(data.get("layout"))
    root = repository_root(manifest, layout)
    name = module_of(workaround_id).rpartition(".")[2]
    module = root / layout.workarounds / f"{name}.py"
    test = root / layout.tests / f"test_workaround_{name}.py"
    for key, folder in (("workarounds", module.parent), ("tests", test.parent)):
        if not folder.is_dir() and (key in layout.written or os.path.lexists(folder)):
            fail(f"no folder {shown(folder)}/: new writes the module into [layout] workarounds and the test into "
                 "[layout] tests")
        if not folder.resolve().is_relative_to(root.resolve()):
            fail(f"{shown(folder)}/ leads out of the repository (to {echoed(str(folder.resolve()), quoted=False)}): "
                 "new writes nothing through it")
    for path in (module, module.with_suffix("") / "__init__.py", test):
        if os.path.lexists(path):
            fail(f"{shown(path)} already exists: a new workaround starts from no files of its own")
    read, across = read_release(target, release, quiet, _floor(data))
    entry = entry_text(workaround_id, read.targets, _dt.date.today())
    updated = with_entry(text, entry)
    if updated is None:
        fail(f"{manifest} not written: the entry could not be added without changing the rest of the manifest")
    write(manifest, text, updated, {module: module_text(workaround_id), test: test_text(workaround_id)})
    for found in read.targets:
        typer.echo(one_line(f"{found.describe()} in {f'vLLM {read.version}' if read.version else read.label}"))
    for line in read.binding_lines():
        typer.echo(one_line(line))
    if across is not None:
        say_across(read, across, workaround_id)
    typer.echo(one_line(f"wrote {shown(manifest)}: [[workaround]] {workaround_id}"))
    typer.echo(one_line(f"wrote {shown(module)}"))
    typer.echo(one_line(f"wrote {shown(test)}"))
    typer.echo(one_line(f"next: fill in what `xpu-workarounds lint` lists; `xpu-workarounds check --supported "
                        f"--workaround {workaround_id}` then checks the targets in every supported vLLM release, "
                        f"and `xpu-workarounds explain {workaround_id}` shows the entry as users will read it"))


def read_release(targets: list[str], release: str | None, quiet: bool,
                 floor: Version | None) -> tuple[ReadRelease, AcrossReleases | None]:
    """The targets read from ``release``; by default from the newest vLLM on the package index, then
    in every supported release (from the manifest's ``[support] vllm`` ``floor``), each given the
    ``absent_in`` of the releases that lack it."""
    from tracker.release.supported import index_releases

    with shown_progress(quiet) as progress:
        if release is not None:
            return read_targets(targets, release, progress=progress.step, warn=warn), None
        progress.step("asking the package index for vLLM's releases (pip index versions)")
        releases = index_releases()
        newest = releases[-1]
        read = read_targets(targets, f"vllm=={newest}", progress=progress.step, warn=warn)
        if floor is None:
            return read, None
        across = across_releases(read.targets, newest, [found for found in releases if found >= floor],
                                 progress=progress.step, warn=warn)
    spread = [dataclasses.replace(target, absent_in=absent_specifier(across.absent[target.path], across.read))
              for target in read.targets]
    return dataclasses.replace(read, targets=spread), across


def say_across(read: ReadRelease, across: AcrossReleases, workaround_id: str) -> None:
    """What reading every supported release found: the releases without a target (its ``absent_in``),
    those where it differs, those that could not be read."""
    for target in read.targets:
        absent, differs = across.absent[target.path], across.differs[target.path]
        if absent and target.absent_in:
            typer.echo(one_line(f"{target.path} is absent in {_releases(absent)}: wrote absent_in = "
                                f"\"{target.absent_in}\""))
        elif absent:
            typer.echo(one_line(f"{target.path} is absent in {_releases(absent)}, which no one specifier holds: "
                                "write its absent_in by hand (a specifier of the releases without it, such as \"<0.23.0\")"))
        if differs:
            typer.echo(one_line(f"{target.path} differs in {_releases(differs)}: `xpu-workarounds check "
                                f"--supported --workaround {workaround_id}` names how"))
    for release, why in across.unread.items():
        warn(f"vllm=={release} could not be read, so absent_in does not account for it: {why}")
    typer.echo(one_line(f"read in the {len(across.read)} supported vLLM releases from {across.read[0]} to "
                        f"{across.read[-1]}"))


def _releases(found: list[Version]) -> str:
    return "vLLM " + ", ".join(map(str, found))


def write(manifest: Path, original: str, updated: str, files: dict[Path, str]) -> None:
    """The new files (created, never replacing one), then the manifest, replaced atomically with its mode kept
    and only if nobody changed it meanwhile; on a failure, the new files are removed again."""
    created: list[Path] = []
    made: list[Path] = []  # folders created for a first workaround, removed again on a failure

    def unchanged(temporary: Path) -> None:
        try:
            now = read_bytes(manifest)
        except Unreadable as error:
            raise OSError(f"{manifest} cannot be read again ({error.message}); run it again") from None
        if now != original.encode("utf-8"):
            raise OSError(f"{manifest} changed while new ran; run it again")

    def undo() -> None:
        for path in created:
            path.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()

    with on_os_error("nothing written", undo):
        for folder in dict.fromkeys(path.parent for path in files):  # a first workaround: the default folders
            for missing in [ancestor for ancestor in (*reversed(folder.parents), folder) if not ancestor.exists()]:
                missing.mkdir()
                made.append(missing)
        for path, content in files.items():
            with open(path, "x", encoding="utf-8") as stream:
                created.append(path)
                stream.write(content)
        target = Path(os.path.realpath(manifest))
        paths.atomic_write(target, updated.encode("utf-8"), mode=stat.S_IMODE(os.stat(target).st_mode),
                           before_replace=unchanged)
