"""``check``: the manifest against a vLLM release's own source, before an upgrade.

For each workaround: are its targets still there with the manifest's fingerprint (kind
and parameter names, read from the syntax tree), does the release carry its own fix (the
workaround's source probe, run on the release's files), and what would be decided at the
release's XPU pins (its ``requirements/xpu.txt``); and where those answers disagree with
the manifest. Nothing of the release is installed, imported or executed: the source
distribution is fetched with ``pip download --no-deps`` and pip's metadata step is given a
stand-in build backend that only reads the sdist's ``PKG-INFO``, so vLLM's ``setup.py``
never runs; it is kept in the per-user cache for the next check (``release_cache``). The
test suite's release matrix calls ``check_tree`` for every release.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from packaging.version import InvalidVersion, Version

from tracker.commands.context import JsonOption, QuietOption, fail, load_manifest
from tracker.commands.output import progress as shown_progress
from tracker.commands.output import table
from tracker.commands.upgrade import ReleaseUnavailable
from tracker.decision.gates import Decision
from tracker.decision.probe import carried_fix, markers
from tracker.decision.stack import decide_stack
from tracker.engine.source import definition, file_under
from tracker.model.environment import Settings
from tracker.model.manifest import InlineWorkaround, Manifest, Target, Workaround
from tracker.model.pins import XPU_REQUIREMENTS, xpu_pins
from tracker.model.vocabulary import SCHEMA, TargetKind

EXIT_DRIFT = 3
EXIT_BAD_INPUT = 2
EXIT_NOT_FETCHABLE = 4
# An archive is read as untrusted data (``unpack``): vLLM's largest source file is under 1 MiB and
# its whole sdist unpacks to some hundred MiB in a few thousand members.
FILE_LIMIT = 16 << 20
ARCHIVE_LIMIT = 2 << 30  # bytes of all members together, as the archive declares or yields them
MEMBERS_LIMIT = 100_000
_REQUIREMENT = re.compile(r"^vllm==(?P<version>[0-9][0-9A-Za-z.+!-]*)$")
# pip's metadata step for an sdist runs its build backend; this one only copies PKG-INFO.
_BACKEND = '''import os
from email.parser import Parser


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    with open("PKG-INFO", encoding="utf-8") as handle:
        info = Parser().parse(handle, headersonly=True)
    dist_info = f"{info['Name'].replace('-', '_')}-{info['Version']}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info))
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w", encoding="utf-8") as handle:
        handle.write(f"Metadata-Version: 2.1\\nName: {info['Name']}\\nVersion: {info['Version']}\\n")
    return dist_info
'''


def _silent(text: str) -> None:
    """No progress to show."""


class CheckInputError(ValueError):
    """What to check is malformed or unreadable (exit 2)."""


class NotFetchable(ReleaseUnavailable, RuntimeError):
    """pip could not fetch the release (exit 4)."""


# ------------------------------------------------------------------ getting the source


def fetch(version: str, into: Path, *, timeout: float = 600) -> Path:
    """``vllm==version``'s source distribution, downloaded by pip into ``into``; no code of it runs."""
    backend = into / ".metadata-backend"
    (backend / "setuptools").mkdir(parents=True, exist_ok=True)
    (backend / "setuptools" / "__init__.py").write_text("")
    (backend / "setuptools" / "build_meta.py").write_text(_BACKEND)
    env = {**os.environ, "PYTHONPATH": str(backend), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary=:all:",
               "--no-build-isolation", f"vllm=={version}", "-d", str(into)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NotFetchable(f"pip download vllm=={version}: {error}") from None
    found = sorted(into.glob("vllm-*.tar.gz"))
    if done.returncode != 0 or not found:
        lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING:")]
        raise NotFetchable(f"pip download vllm=={version} failed: {lines[-1].strip() if lines else 'no sdist'}")
    return found[0]


def release_archive(version: str, scratch: Path, progress: Callable[[str], None] = _silent) -> Path:
    """``vllm==version``'s sdist from the per-user cache when it is there and intact
    (``release_cache``), else fetched by pip and kept there; fetched into ``scratch`` when the
    cache cannot be used (said in one warning)."""
    from tracker.commands import release_cache

    fetching = f"fetching vllm=={version} with pip (pip download)"
    try:
        where = release_cache.directory()
        progress(f"verifying the cached {release_cache.archive_name(version)}")
        found, why = release_cache.cached(where, version)
    except OSError as error:  # UnsafeLocation too
        _warn(f"the release cache is not used: {error}")
        progress(fetching)
        return fetch(version, scratch)
    if why is not None:
        _warn(f"{why}: fetched again")
    if found is not None:
        return found
    progress(fetching)
    try:
        return release_cache.store(where, version, lambda into: fetch(version, into))
    except OSError as error:
        _warn(f"vllm=={version} could not be kept in the release cache: {error}")
        return fetch(version, scratch)


def _warn(line: str) -> None:
    from tracker.commands.output import escape_controls

    typer.echo(f"xpu-workarounds: warning: {escape_controls(line)}", err=True)


def needed_files(manifest: Manifest) -> set[str]:
    """Paths (relative to a source tree) ``check_tree`` reads: every target's module, both ways it can be laid out."""
    modules = {t.module for w in manifest.workarounds for t in w.targets}
    paths = {XPU_REQUIREMENTS, "PKG-INFO", "vllm/_version.py", *(inline.file for inline in manifest.tracked)}
    for module in modules:
        base = module.replace(".", "/")
        paths |= {f"{base}.py", f"{base}/__init__.py"}
    return paths


def unpack(archive: Path, into: Path, wanted: Callable[[str], bool]) -> Path:
    """Extract the ``wanted`` files (paths relative to the source tree) of an sdist or wheel into ``into``.

    Only regular files' bytes are written, each inside ``into`` (never a link, a device, or a
    path that leaves it); an archive of more than ``MEMBERS_LIMIT`` members or ``ARCHIVE_LIMIT``
    bytes, or a wanted file over ``FILE_LIMIT``, is refused (``CheckInputError``) before more is
    read or written."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        if archive.name.endswith(".whl"):
            with zipfile.ZipFile(archive) as wheel:
                members = wheel.infolist()
                _bounded(archive, len(members), sum(info.file_size for info in members))
                for info in members:
                    relative = re.sub(r"^[^/]+\.dist-info/METADATA$", "PKG-INFO", info.filename)
                    if wanted(relative) and not info.is_dir():
                        with wheel.open(info) as handle:
                            _write(into, relative, _read_bounded(archive, relative, handle, info.file_size))
        elif archive.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive, "r:gz") as sdist:
                count = total = 0
                for member in sdist:
                    count, total = count + 1, total + max(member.size, 0)
                    _bounded(archive, count, total)
                    relative = member.name.partition("/")[2]
                    if member.isfile() and wanted(relative):
                        extracted = sdist.extractfile(member)
                        if extracted is not None:
                            _write(into, relative, _read_bounded(archive, relative, extracted, member.size))
        else:
            raise CheckInputError(f"{archive}: not a wheel (.whl) or source distribution (.tar.gz)")
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, ValueError) as error:
        if isinstance(error, CheckInputError):
            raise
        raise CheckInputError(f"{archive}: cannot be read ({error})") from None
    return into


def _bounded(archive: Path, members: int, size: int) -> None:
    if members > MEMBERS_LIMIT:
        raise CheckInputError(f"{archive}: more than {MEMBERS_LIMIT} members: not a vLLM release")
    if size > ARCHIVE_LIMIT:
        raise CheckInputError(f"{archive}: more than {ARCHIVE_LIMIT >> 30} GiB unpacked: not a vLLM release")


def _read_bounded(archive: Path, relative: str, handle: IO[bytes], declared: int) -> bytes:
    """A member's bytes, at most ``FILE_LIMIT`` of them whatever its header declares."""
    data = handle.read(FILE_LIMIT + 1) if declared <= FILE_LIMIT else b""
    if declared > FILE_LIMIT or len(data) > FILE_LIMIT:
        raise CheckInputError(f"{archive}: {relative} is larger than {FILE_LIMIT >> 20} MiB: not a vLLM source file")
    return data


def _write(root: Path, relative: str, data: bytes) -> None:
    target = (root / relative).resolve()
    if root.resolve() not in target.parents:  # ``..`` in an archive member: never outside ``root``
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def release_version(root: Path) -> str | None:
    """The vLLM version of a source tree: its PKG-INFO (sdist, wheel METADATA), else ``vllm/_version.py``."""
    info = root / "PKG-INFO"
    if info.is_file():
        version = Parser().parsestr(info.read_text(encoding="utf-8", errors="replace"), headersonly=True)["Version"]
        if version:
            return str(version)
    written = root / "vllm" / "_version.py"
    if written.is_file():
        found = re.search(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""",
                          written.read_text(encoding="utf-8", errors="replace"), re.M)
        if found:
            return found.group(1)
    return None


# ------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class TargetCheck:
    path: str
    found: str  # same | drifted | absent
    detail: str


@dataclass
class WorkaroundCheck:
    id: str
    targets: list[TargetCheck]
    carries_fix: bool  # the manifest's vllm_carries_fix holds for this release
    source_fix: bool | None  # the source probe found vLLM's own fix; None: no probe, or it could not run
    probe: str  # what the probe said, or why it did not run
    decision: dict[str, str] | None  # at the release's XPU pins; None when the pins are unknown
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth knowing, not drift

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "targets": [vars(t) for t in self.targets],
                "vllm_carries_fix": {"manifest": self.carries_fix, "source": self.source_fix, "probe": self.probe},
                "decision_at_pins": self.decision, "problems": self.problems, "notes": self.notes}


@dataclass(frozen=True)
class TrackedCheck:
    """One of vLLM's own inline workarounds (``[[tracked]]``): is its marker where the manifest says?"""

    id: str
    file: str
    carried: bool  # the manifest's carried_in holds for this release
    found: bool  # the marker is in the file
    problem: str | None

    def as_json(self) -> dict[str, Any]:
        return vars(self).copy()


@dataclass
class ReleaseCheck:
    vllm: str | None
    source: str
    pins: dict[str, Version]
    workarounds: list[WorkaroundCheck]
    tracked: list[TrackedCheck] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """Where the release's source disagrees with a workaround's manifest entry (exit 3)."""
        return [f"{w.id}: {problem}" for w in self.workarounds for problem in w.problems]

    @property
    def tracked_problems(self) -> list[str]:
        """Where vLLM's own inline workarounds are not as the manifest says (news, not drift)."""
        return [f"{t.id}: {t.problem}" for t in self.tracked if t.problem]

    def as_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "vllm": self.vllm, "source": self.source,
                "xpu_pins": {name: str(version) for name, version in self.pins.items()},
                "drift": bool(self.problems), "workarounds": [w.as_json() for w in self.workarounds],
                "tracked": [t.as_json() for t in self.tracked]}


def definition_fingerprint(node: ast.AST, in_class: bool) -> tuple[str, tuple[str, ...]]:
    """(kind, parameter names) of a ``def`` as ``tracker.engine.patching`` fingerprints it at run time."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "class", ()
    decorators = {d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "") for d in node.decorator_list}
    kind = ("classmethod" if "classmethod" in decorators else "staticmethod" if "staticmethod" in decorators
            else "method") if in_class else ("contextmanager" if "contextmanager" in decorators else "function")
    arguments = node.args
    names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    if arguments.vararg:
        names.append("*" + arguments.vararg.arg)
    names += [a.arg for a in arguments.kwonlyargs]
    if arguments.kwarg:
        names.append("**" + arguments.kwarg.arg)
    return kind, tuple(names[1:] if kind == TargetKind.CLASSMETHOD else names)


def check_target(target: Target, root: Path) -> TargetCheck:
    node = definition(target.path, root)
    if node is None:
        found = file_under(root, target.module)
        why = "no such module" if found is None else "no such definition"
        if found is not None and not _parses(found):
            why = f"{found.relative_to(root)} does not parse as Python"
        return TargetCheck(target.path, "absent", f"{target.path}: {why} in this release")
    in_class = isinstance(definition(target.path.rsplit(".", 1)[0], root), ast.ClassDef) if "." in target.qualname \
        else False
    kind, params = definition_fingerprint(node, in_class)
    if (kind, params) != (target.kind, target.params):
        return TargetCheck(target.path, "drifted", f"{target.path} is a {kind} taking ({', '.join(params)}); the "
                                                   f"manifest says a {target.kind} taking ({', '.join(target.params)})")
    return TargetCheck(target.path, "same", f"{target.path}: {kind} ({', '.join(params)})")


def _parses(path: Path) -> bool:
    try:
        ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _probe(w: Workaround, root: Path) -> tuple[bool | None, str]:
    """The source probe on the release's files: the inline fixes' markers in the targets' source."""
    if not markers(w):
        return None, "no inline-fix marker to look for"
    read, finding = carried_fix(w, root)
    if finding is not None:
        return True, finding.detail
    return False, "no inline fix's marker in the targets' source" if read else "no target's source to read"


def check_workaround(w: Workaround, root: Path, version: Version | None, decided: Decision | None) -> WorkaroundCheck:
    """``decided``: the version gates' decision at the release's XPU pins; None when they are unknown."""
    targets = [check_target(t, root) for t in w.targets]
    carries = version is not None and w.vllm_carries_fix is not None and w.vllm_carries_fix.contains(
        version, prereleases=True)
    source_fix, said = _probe(w, root)
    result = WorkaroundCheck(w.id, targets, carries, source_fix, said,
                             {"decision": decided.decision, "reason": decided.reason, "detail": decided.detail}
                             if decided else None)
    declared = {t.path: t for t in w.targets}
    for found in targets:
        absent_in = declared[found.path].absent_in
        declared_absent = absent_in is not None and version is not None and absent_in.contains(version,
                                                                                               prereleases=True)
        if found.found == "drifted":
            result.problems.append(f"drifted: {found.detail}")
        elif found.found == "absent" and not declared_absent and not declared[found.path].optional:
            result.problems.append(f"vanished: {found.detail}")
        elif found.found != "absent" and declared_absent:
            result.problems.append(f"{found.path} is present, but the manifest declares it absent in "
                                   f"vllm{absent_in}")
    if source_fix is False and carries:
        result.problems.append(f"the manifest's vllm_carries_fix (vllm{w.vllm_carries_fix}) says {version} carries "
                               f"vLLM's own fix, but the source probe finds none")
    elif source_fix and not carries and version is not None:
        # Harmless where no affected window holds (checked below): the manifest says not-affected instead.
        result.notes.append(f"the source carries vLLM's own fix ({said}), outside vllm_carries_fix "
                            f"(vllm{w.vllm_carries_fix})")
    if decided is not None and decided.apply:
        missing = [t.path for t, d in zip(targets, w.targets, strict=True) if t.found == "absent" and not d.optional]
        if missing:
            result.problems.append(f"would apply at the XPU pins, but {', '.join(missing)} is absent")
        if source_fix:
            result.problems.append("would apply at the XPU pins, but the source already carries the fix")
    return result


def check_tree(manifest: Manifest, root: Path, *, label: str | None = None,
               progress: Callable[[str], None] = _silent) -> ReleaseCheck:
    """Check every workaround against the vLLM source tree at ``root`` (with ``requirements/xpu.txt``)."""
    if not (root / "vllm").is_dir():
        raise CheckInputError(f"{root}: no vllm/ package in it")
    raw = release_version(root)
    try:
        version = Version(raw) if raw else None
    except InvalidVersion:
        version = None
    requirements = root / XPU_REQUIREMENTS
    pins = xpu_pins(requirements.read_text(encoding="utf-8", errors="replace")) if requirements.is_file() else {}
    pins = {name: pins[name] for name in ("torch", "vllm-xpu-kernels") if name in pins}
    decisions: list[Decision | None] = [None] * len(manifest.workarounds)
    if version is not None and pins:
        # The version gates alone at the release's XPU pins (the settings' defaults, not this
        # environment's): the source probe on the release's tree is reported beside them (``_probe``).
        described = {"vllm": str(version), **{name: str(pin) for name, pin in pins.items()}}
        decisions = [*decide_stack(manifest, Settings(), described=described, platform=("xpu", "assumed"),
                                   detected={}, probe=False).decisions]
    checks = []
    for index, (w, decided) in enumerate(zip(manifest.workarounds, decisions, strict=True), 1):
        progress(f"checking {w.id} ({index}/{len(manifest.workarounds)})")
        checks.append(check_workaround(w, root, version, decided))
    tracked = [check_inline(inline, root, version) for inline in manifest.tracked]
    return ReleaseCheck(raw, label or str(root), pins, checks, tracked)


def check_inline(inline: InlineWorkaround, root: Path, version: Version | None) -> TrackedCheck:
    """Whether ``inline``'s marker is in its file exactly when the manifest says this release carries it."""
    path = root / inline.file
    found = path.is_file() and inline.marker in path.read_text(encoding="utf-8", errors="replace")
    carried = version is not None and inline.carried_in.contains(version, prereleases=True)
    problem = None
    if version is not None and carried and not found:
        problem = (f"vllm{inline.carried_in} should carry it, but {inline.file} has no {inline.marker!r}: "
                   f"vLLM removed or moved it")
    elif version is not None and found and not carried:
        problem = f"{inline.file} has {inline.marker!r}, but the manifest says vllm{inline.carried_in} carries it"
    return TrackedCheck(inline.id, inline.file, carried, found, problem)


def check(manifest: Manifest, what: str, *, workdir: Path | None = None,
          progress: Callable[[str], None] = _silent) -> ReleaseCheck:
    """``what``: ``vllm==X``, or a path to a wheel, an sdist or a source tree."""
    matched = _REQUIREMENT.match(what.strip())
    candidate = Path(what).expanduser()
    if matched is None and not candidate.exists():
        raise CheckInputError(f"{what!r} is neither vllm==VERSION nor an existing wheel, sdist or source tree")
    if candidate.is_dir() and matched is None:
        return check_tree(manifest, candidate, progress=progress)
    wanted = needed_files(manifest)
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-check-", dir=workdir) as scratch:
        archive = release_archive(matched.group("version"), Path(scratch), progress) if matched else candidate
        progress(f"unpacking the files the check reads from {archive.name}")
        try:
            root = unpack(archive, Path(scratch) / "tree", wanted.__contains__)
        except CheckInputError as error:
            if matched is None:
                raise
            # What the index gave is no release: the index answered wrongly (exit 4), not the caller.
            raise NotFetchable(f"vllm=={matched.group('version')} from the index: {error}") from None
        result = check_tree(manifest, root, label=archive.name, progress=progress)
        shutil.rmtree(root, ignore_errors=True)
        return result


def render(result: ReleaseCheck) -> str:
    pins = ", ".join(f"{name} {pin}" for name, pin in result.pins.items()) or "none found (no requirements/xpu.txt)"
    lines = [f"vLLM {result.vllm or 'of unknown version'} ({result.source}); XPU pins: {pins}", ""]
    rows = []
    for w in result.workarounds:
        found = ", ".join(sorted({t.found for t in w.targets}))
        source = {True: "yes", False: "no", None: "-"}[w.source_fix]
        decided = f"{w.decision['decision']} ({w.decision['reason']})" if w.decision else "-"
        rows.append((w.id, found, f"{source}/{'yes' if w.carries_fix else 'no'}", decided))
    lines.append(table(("ID", "TARGETS", "VLLM'S OWN FIX (SOURCE/MANIFEST)", "AT THE XPU PINS"), rows))
    problems = result.problems
    lines += ["", *problems] if problems else ["", "no drift: the manifest matches this release's source"]
    carried = [t.id for t in result.tracked if t.found]
    lines += ["", f"vLLM's own XPU workarounds tracked here and found in it: {', '.join(carried) or 'none'}"]
    lines += [f"note: {w.id}: {note}" for w in result.workarounds for note in w.notes]
    lines += [f"note: {problem}" for problem in result.tracked_problems]
    return "\n".join(lines)



def check_release(
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
) -> None:
    """Before an upgrade: per workaround, its targets in that release (same fingerprint?), whether
    the release carries its own fix, and the decision at the release's XPU pins. Exit 3 on drift."""
    if pull_request is not None or repo is not None or fail_on_drift:
        if release is not None:
            fail("give a release or --pull-request, not both")
        check_pull_request_command(pull_request, repo, fail_on_drift, json_output)
        return
    if release is None:
        fail("check needs a release (vllm==X, a wheel, sdist or source tree), or --pull-request N --repo OWNER/NAME")
    manifest = load_manifest()
    try:
        with shown_progress(quiet) as shown:
            result = check(manifest, release, progress=shown.step)
    except CheckInputError as error:
        fail(str(error))
    except NotFetchable as error:
        fail(str(error), EXIT_NOT_FETCHABLE)
    typer.echo(json.dumps(result.as_json(), indent=2) if json_output else render(result))
    if result.problems:
        raise typer.Exit(EXIT_DRIFT)


def check_pull_request_command(number: int | None, repository: str | None, fail_on_drift: bool,
                               json_output: bool) -> None:
    """The command line of ``check --pull-request``: one line per outcome, the step summary and
    annotations in GitHub Actions; exit 3 on drift only with ``--fail-on-drift``."""
    from tracker.commands import context
    from tracker.commands.context import require_extra
    from tracker.commands.retire import repository_path
    from tracker.commands.upgrade import UpgradeError, check_pull_request

    if number is None or repository is None:
        fail("--pull-request N and --repo OWNER/NAME go together")
    require_extra("github", "github", "check --pull-request")
    from tracker.retire import ManifestInvalid, RetireError, check_repository
    from tracker.retire.failures import GITHUB_ERRORS
    from tracker.retire.removal import MANIFEST_PATH
    from tracker.retire.summary import SUMMARY_VARIABLE, annotation, append, in_actions, manifest_annotations
    from tracker.upstream.client import classify, connect

    given = context.state["manifest"]
    manifest_path = repository_path(given.as_posix(), "--manifest") if given is not None else MANIFEST_PATH
    settings = context.github_settings()
    try:
        check_repository(repository)
        checked = check_pull_request(connect(settings), repository, number, manifest_path, check)
    except ValueError as error:
        fail(str(error))
    except UpgradeError as error:
        fail(str(error), error.code)
    except ManifestInvalid as error:
        if in_actions():
            for line in manifest_annotations(error.problems, error.path):
                typer.echo(line)
        fail(str(error), 4)
    except RetireError as error:
        fail(str(error), 4)
    except CheckInputError as error:
        fail(str(error))
    except NotFetchable as error:
        fail(str(error), EXIT_NOT_FETCHABLE)
    except GITHUB_ERRORS as error:
        fail(str(classify(error, settings, f"{repository}#{number}")), 4)
    if checked.text is not None:
        append(SUMMARY_VARIABLE, checked.text)
    if json_output:
        typer.echo(json.dumps({"schema": 1, "pull_request": number, "checked": checked.text is not None,
                               "drift": checked.drift, "comment": checked.comment, "detail": checked.note,
                               "warnings": checked.warnings}))
    else:
        typer.echo(checked.note)
        for problem in checked.drift:
            typer.echo(f"drift      {problem}")
        for warning in checked.warnings:
            typer.echo(f"warning    {warning}")
    if in_actions():
        level = "error" if fail_on_drift else "warning"
        for problem in checked.drift:
            typer.echo(annotation(level, problem, title="drift at the new vLLM"), err=json_output)
        for warning in checked.warnings:
            typer.echo(annotation("warning", warning, title="not compared"), err=json_output)
    if checked.drift and fail_on_drift:
        raise typer.Exit(EXIT_DRIFT)
