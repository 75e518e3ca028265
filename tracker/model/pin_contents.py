"""What a pin file says: every requirement it writes, read with one grammar.

A pin file (``[layout] pins``, ``tracker.model.pin_files``) is read by its name:

- ``uv.lock``: uv's lock, ``[[package]]`` tables with ``name``, ``version`` and ``source``;
- ``pylock.toml`` and ``pylock.NAME.toml``: the standard lock (PEP 751), ``[[packages]]`` tables with
  ``name``, ``version`` and where the package comes from (``index``, ``vcs``, ``directory``, ...);
- any other ``.toml``: a ``pyproject.toml``, its ``[project]`` dependencies and optional dependencies
  and its ``[dependency-groups]`` (PEP 735);
- anything else: a requirements file as pip reads it: continuation lines (a ``\\`` at the end),
  comments, per-requirement options such as ``--hash`` (what ``pip-compile --generate-hashes`` and
  ``uv pip compile --generate-hashes`` write), environment markers, ``-e`` paths, and ``-r`` / ``-c``
  includes, relative to the file that names them.

Every requirement is parsed by ``packaging`` (``Requirement``); TOML by ``tomllib``. A lock's entry is
written back as the requirement it locks (``vllm==0.33.0``), with why the index cannot give it when
it comes from elsewhere (a git checkout, a path, a URL).

A pin file is a stranger's text (a pull request's), so reading is bounded: a file larger than
``MAX_BYTES`` is not read, includes go ``MAX_DEPTH`` deep and ``MAX_FILES`` files at most, an include
is read once (a cycle is said, not followed), and one that leads out of the repository (``..``, an
absolute path, a URL, a link out) is never read: each is a notice, never silence. Reading a file is
the caller's (``Read``): the working tree for ``pins``, the API at a commit for the upgrade check,
the base branch's blobs for the look-ahead.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

MAX_BYTES = 8 * 1024 * 1024  # a uv.lock of a large serving stack is a few MiB
MAX_DEPTH = 8  # -r / -c includes deep
MAX_FILES = 32  # files read for one pin file, itself and its includes


class PinKind(StrEnum):
    """How a pin file is read, by its name."""

    REQUIREMENTS = "requirements"
    PYPROJECT = "pyproject"
    UV_LOCK = "uv.lock"
    PYLOCK = "pylock"


def kind_of(path: str) -> PinKind:
    name = path.rpartition("/")[2]
    if name == "uv.lock":
        return PinKind.UV_LOCK
    if re.fullmatch(r"pylock\.([^.]+\.)?toml", name):
        return PinKind.PYLOCK
    if name.endswith(".toml"):
        return PinKind.PYPROJECT
    return PinKind.REQUIREMENTS


class Unreadable(Exception):
    """A file that is there but cannot be read as text (too large, not UTF-8, a link out of the
    repository); the message says why, in a few words."""


# Repository path -> its text; None: no such file. ``Unreadable`` when it is there but cannot be read.
Read = Callable[[str], str | None]


@dataclass(frozen=True)
class Written:
    """One requirement as a pin file writes it: the text (on one line), the file and line it is
    written at (a file the pin file includes, or the pin file), the canonical name packaging reads
    (None: not a requirement by name, such as ``-e ./vendor/vllm``), and, for a lock's entry that
    does not come from the package index, why."""

    text: str
    where: str
    line: int | None
    name: str | None
    why: str | None = None

    def names(self, *wanted: str) -> bool:
        return self.name in {canonicalize_name(name) for name in wanted}


@dataclass
class PinFile:
    """What one pin file says: its requirements, the files read (itself first, then its includes),
    the notices about what was not read, or why nothing was (``problem``)."""

    path: str
    kind: PinKind
    requirements: list[Written] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    problem: str | None = None
    missing: bool = False  # no such file (``problem`` says so)

    def of(self, *names: str) -> list[Written]:
        return [written for written in self.requirements if written.names(*names)]


def read_pin_file(path: str, read: Read) -> PinFile:
    """``path`` (a repository path) read as its name says (module docstring)."""
    found = PinFile(path, kind_of(path))
    text = _text(path, read, found, top=True)
    if text is None:
        return found
    found.sources.append(path)
    try:
        if found.kind is PinKind.UV_LOCK:
            found.requirements = list(_locked(path, _toml(text), "package", _uv_source))
        elif found.kind is PinKind.PYLOCK:
            found.requirements = list(_locked(path, _toml(text), "packages", _pylock_source))
        elif found.kind is PinKind.PYPROJECT:
            found.requirements = list(_pyproject(path, _toml(text)))
        else:
            _requirements_file(path, text, read, found, chain=(path,))
    except Unreadable as error:
        found.problem = str(error)
    return found


def _text(path: str, read: Read, found: PinFile, *, top: bool, by: str = "") -> str | None:
    try:
        text = read(path)
    except Unreadable as error:
        if top:
            found.problem = str(error)
        else:
            found.notices.append(f"{by} includes {path}, which cannot be read ({error}): not read")
        return None
    if text is None:
        if top:
            found.problem, found.missing = "no such file", True
        else:
            found.notices.append(f"{by} includes {path}, which does not exist")
        return None
    if len(text) > MAX_BYTES:
        why = f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not read"
        if top:
            found.problem = why
        else:
            found.notices.append(f"{by} includes {path}, {why}")
        return None
    return text


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise Unreadable(f"not TOML ({error})") from None
    except RecursionError:
        raise Unreadable("not TOML that can be read (nested too deeply)") from None


def _name(text: str) -> str | None:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------- locks


def _uv_source(entry: dict[str, Any]) -> str | None:
    """Why a uv.lock entry does not come from a package index (None: it does)."""
    source = entry.get("source")
    if not isinstance(source, dict) or "registry" in source:
        return None
    kind = next(iter(source), "unknown")
    return f"locked from a {kind} source, not a package index"


def _pylock_source(entry: dict[str, Any]) -> str | None:
    for kind in ("vcs", "directory", "archive"):
        if kind in entry:
            return f"locked from a{'n' if kind == 'archive' else ''} {kind}, not a package index"
    return None


def _locked(path: str, data: dict[str, Any], key: str,
            source: Callable[[dict[str, Any]], str | None]) -> Iterator[Written]:
    """A lock's entries as the requirements they lock: ``NAME==VERSION`` (and ``; MARKER`` where the
    entry has one), with why the index cannot give it when it comes from elsewhere."""
    entries = data.get(key)
    if not isinstance(entries, list):
        raise Unreadable(f"no [[{key}]] tables: not a {'uv.lock' if key == 'package' else 'pylock.toml'} file")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name, version = entry["name"], entry.get("version")
        text = f"{name}=={version}" if isinstance(version, str) else name
        marker = entry.get("marker")
        if isinstance(marker, str) and marker.strip():
            text += f" ; {marker}"
        yield Written(_one_line(text), path, None, canonicalize_name(name) if _name(name) else None, source(entry))


# ------------------------------------------------------------------------------------ pyproject


def _pyproject(path: str, data: dict[str, Any]) -> Iterator[Written]:
    """``[project]`` dependencies and optional dependencies, and ``[dependency-groups]`` (whose
    ``{include-group = ...}`` items name groups read here anyway)."""
    project = data.get("project")
    project = project if isinstance(project, dict) else {}
    lists: list[Any] = [project.get("dependencies")]
    for table in (project.get("optional-dependencies"), data.get("dependency-groups")):
        if isinstance(table, dict):
            lists += table.values()
    for items in lists:
        for item in items if isinstance(items, list) else ():
            if isinstance(item, str):
                text = _one_line(item)
                yield Written(text, path, None, _name(text))


# ---------------------------------------------------------------------------- requirements files

_COMMENT = re.compile(r"(^|\s+)#.*$")
_INCLUDE = re.compile(r"(?:-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?<=-[rc]))(?P<path>\S.*)")
_EDITABLE = re.compile(r"(?:-e|--editable)(?:\s*=\s*|\s+)(?P<path>\S.*)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """A requirements file's lines as pip reads them: a line ending in ``\\`` joined with the next (a
    comment line never continues), then comments dropped; each with the number of its first line."""
    pending: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.endswith("\\") or _COMMENT.match(line):
            if _COMMENT.match(line):
                line = " " + line
            if pending:
                pending.append(line)
                yield first, _COMMENT.sub("", "".join(pending)).strip()
                pending = []
            else:
                yield number, _COMMENT.sub("", line).strip()
        else:
            if not pending:
                first = number
            pending.append(line.strip("\\"))
    if pending:
        yield first, _COMMENT.sub("", "".join(pending)).strip()


def requirement_part(line: str) -> str:
    """A requirement line less its per-requirement options (``--hash=...``): pip's rule, the words
    before the first that starts with '-'."""
    words = []
    for word in line.split(" "):
        if word.startswith("-"):
            break
        words.append(word)
    return _one_line(" ".join(words))


def included(source: str, target: str) -> str | None:
    """The repository path ``target`` names when ``source`` includes it (pip: relative to the
    including file's folder); None: it leads out of the repository (``..``, absolute, a URL)."""
    if _SCHEME.match(target) or target.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", target):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return None
    return joined


def _requirements_file(path: str, text: str, read: Read, found: PinFile, chain: tuple[str, ...]) -> None:
    for number, line in logical_lines(text):
        if not line:
            continue
        if line.startswith("-"):
            _option(path, number, line, read, found, chain)
            continue
        requirement = requirement_part(line)
        if requirement:
            found.requirements.append(Written(requirement, path, number, _name(requirement)))


def _option(path: str, number: int, line: str, read: Read, found: PinFile, chain: tuple[str, ...]) -> None:
    editable = _EDITABLE.fullmatch(line)
    if editable:
        target = requirement_part(editable["path"])
        found.requirements.append(Written(target, path, number, _name(target)))
        return
    include = _INCLUDE.fullmatch(line)
    if include is None:
        return  # --index-url, --find-links, ...: nothing pinned
    target = include["path"].strip().strip("'\"")
    by = f"{path}:{number}"
    resolved = included(path, target)
    if resolved is None:
        found.notices.append(f"{by} includes {target}, outside the repository: not read")
        return
    if resolved in chain:
        found.notices.append(f"{by} includes {resolved} again (a cycle): read once")
        return
    if resolved in found.sources:
        return  # included twice, not in a cycle: its requirements are read already
    if len(chain) >= MAX_DEPTH:
        found.notices.append(f"{by} includes {resolved}, deeper than {MAX_DEPTH} files: not read")
        return
    if len(found.sources) >= MAX_FILES:
        found.notices.append(f"{by} includes {resolved}, beyond the {MAX_FILES} files read for one pin file: not read")
        return
    text = _text(resolved, read, found, top=False, by=by)
    if text is None:
        return
    found.sources.append(resolved)
    _requirements_file(resolved, text, read, found, (*chain, resolved))


# ------------------------------------------------------------------------------- vLLM's requirement

# What a path or URL installs: its #egg= name, else its last part less a version and a suffix
# (vllm-0.25.1-py3-none-any.whl, vllm-0.25.1.tar.gz, .../vllm.git@v0.25.1, ./vendor/vllm).
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9._-]+)")
_INSTALLED_NAME = re.compile(r"([A-Za-z0-9._]+?)(?:-\d[^/]*|\.git|\.whl|\.tar\.gz|\.zip)?")


def names_vllm(text: str) -> bool:
    """Whether a path or URL (a requirement pip reads by location) installs vLLM, not another package
    whose location mentions it (``vllm-project/vllm-xpu-kernels``)."""
    egg = _EGG.search(text)
    if egg is not None:
        return canonicalize_name(egg[1]) == "vllm"
    last = re.split(r"[/\\]", text.split("#")[0].rstrip("/\\"))[-1].split("@")[0]
    found = _INSTALLED_NAME.fullmatch(last)
    return found is not None and canonicalize_name(found[1]) == "vllm"


@dataclass(frozen=True)
class VllmRequirement:
    """One requirement on vLLM as a pin file writes it: the release it pins, or why it names none."""

    text: str
    release: Version | None
    why: str | None = None  # why no release the index can give: never checked as another
    where: str | None = None  # the file it is written in, where that is not the pin file (an include)


_BY_VERSION_ONLY = "the check fetches releases from the package index by version only"


def judged(written: Written) -> VllmRequirement | None:
    """``written`` as a vLLM requirement; None: it is not about vLLM."""
    text = written.text
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        if names_vllm(text):
            return VllmRequirement(text, None, f"not a requirement by name and version (a path or a URL): "
                                               f"{_BY_VERSION_ONLY}")
        return None
    if canonicalize_name(requirement.name) != "vllm":
        return None
    if written.why is not None:
        return VllmRequirement(text, None, f"{written.why}: {_BY_VERSION_ONLY}")
    if requirement.url:
        return VllmRequirement(text, None, f"a URL: {_BY_VERSION_ONLY}, and cannot tell what this one holds")
    clauses = list(requirement.specifier)
    if len(clauses) != 1 or clauses[0].operator not in ("==", "==="):
        return VllmRequirement(text, None, "not one release (no version, or a range): nothing to check")
    operator, version = clauses[0].operator, clauses[0].version
    if operator == "===":
        return VllmRequirement(text, None, "arbitrary equality (===): not a version the index gives")
    if "*" in version:
        return VllmRequirement(text, None, "a wildcard: not one release")
    try:
        return VllmRequirement(text, Version(version))
    except (InvalidVersion, ValueError):  # ValueError: a number Python will not convert
        return VllmRequirement(text, None, "not a version")


def vllm_requirements_of(pin_file: PinFile) -> tuple[VllmRequirement, ...]:
    """Every requirement on vLLM ``pin_file`` writes (its includes' too, each saying where)."""
    found = []
    for written in pin_file.requirements:
        requirement = judged(written)
        if requirement is not None:
            where = written.where if written.where != pin_file.path else None
            found.append(VllmRequirement(requirement.text, requirement.release, requirement.why, where))
    return tuple(found)


def read_text(path: str, text: str | None, more: Read | None = None) -> PinFile:
    """``path`` read from ``text`` (its includes through ``more``; without it, none is read)."""
    def read(wanted: str) -> str | None:
        if wanted == path:
            return text
        if more is None:
            raise Unreadable("includes are not read here")
        return more(wanted)

    return read_pin_file(path, read)


def no_vllm_reason(pin_file: PinFile) -> str | None:
    """Why ``pin_file`` gives no vLLM pin (None: it names vLLM)."""
    if pin_file.problem is not None:
        return f"cannot be read: {pin_file.problem}" if not pin_file.missing else "no such file"
    if vllm_requirements_of(pin_file):
        return None
    read = "" if len(pin_file.sources) < 2 else f" (nor do the {len(pin_file.sources) - 1} files it includes)"
    return f"names no vLLM requirement{read}"


__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_FILES", "PinFile", "PinKind", "Read", "Unreadable", "VllmRequirement",
           "Written", "included", "judged", "kind_of", "logical_lines", "names_vllm", "no_vllm_reason",
           "read_pin_file", "read_text", "requirement_part", "vllm_requirements_of"]
