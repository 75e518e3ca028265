"""What a pull request does to the vLLM pin: the vLLM requirements of the repository's pin files,
read at its base and head commits through the API (nothing checked out or run).

Pin files are the ones ``[layout] pins`` names (paths or globs, ``tracker.model.pin_files``;
by default the root's ``pyproject.toml`` and ``requirements*.txt``): every one the PR changes is
read. Another changed file that could pin vLLM (a ``*.txt``, a ``*.in``, a ``pyproject.toml``)
is never checked; the first ``OTHERS_READ`` of them are read all the same, so that one that moves
vLLM is named (with the ``[layout] pins`` line that would count it) rather than passed over in
silence. The look-ahead reads the pin at the base branch with the same rules.

What a PR can make the check do is bounded: reading a pin file costs at most two requests (its head
and its base), and a run spends at most ``REQUESTS`` of them on pin files. A pin file past that
budget is not read, and named (``Moves.unread_pins``): the check fails closed on it, as on a pin it
cannot check, rather than pass what it never read.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tracker.escape import markdown_code
from tracker.model.pin_files import declaring, is_pin_file, pin_glob_problem
from tracker.upstream.fields import as_base64

if TYPE_CHECKING:  # GitHub code (the github extra), imported when a pull request is checked
    from github.PullRequest import PullRequest
    from github.Repository import Repository

# What a path or URL installs: its #egg= name, else its last part less a version and a suffix
# (vllm-0.25.1-py3-none-any.whl, vllm-0.25.1.tar.gz, .../vllm.git@v0.25.1, ./vendor/vllm).
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9._-]+)")
_INSTALLED_NAME = re.compile(r"([A-Za-z0-9._]+?)(?:-\d[^/]*|\.git|\.whl|\.tar\.gz|\.zip)?")
# A changed file that is not a pin file but could pin vLLM, and how many of those are read.
_COULD_PIN = re.compile(r"(?:.*/)?(?:pyproject\.toml|[^/]*\.(?:txt|in))")
OTHERS_READ = 20
# The requests a run spends reading pin files (two per file at most: head and base). A real PR moves
# a handful; GitHub lists up to 3,000 changed files, and an Actions token has 1,000 requests an hour.
REQUESTS = 200


def _names_vllm(text: str) -> bool:
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


def _judged(text: str) -> VllmRequirement | None:
    """``text`` (one requirement) as a vLLM requirement; None: it is not about vLLM."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        if _names_vllm(text):
            return VllmRequirement(text, None, "not a requirement by name and version (a path or a URL): the "
                                               "check fetches releases from the package index by version only")
        return None
    if canonicalize_name(requirement.name) != "vllm":
        return None
    if requirement.url:
        return VllmRequirement(text, None, "a URL: the check fetches releases from the package index by version "
                                           "only, and cannot tell what this one holds")
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


def vllm_requirements(path: str, text: str) -> tuple[VllmRequirement, ...]:
    """Every requirement on vLLM in a pin file: a requirements file's lines (``-e`` paths too), or a
    ``pyproject.toml``'s dependencies and optional dependencies."""
    if path.endswith(".toml"):
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError):  # RecursionError: nested deeper than the parser recurses
            return ()
        project: Any = data.get("project")
        project = project if isinstance(project, dict) else {}
        items: list[Any] = list(project.get("dependencies") or []) if isinstance(project.get("dependencies"), list) \
            else []
        optional: Any = project.get("optional-dependencies")
        for extra in (optional.values() if isinstance(optional, dict) else ()):
            items += extra if isinstance(extra, list) else []
        lines = [item for item in items if isinstance(item, str)]
    else:
        lines = []
        for raw in text.splitlines():
            line = re.split(r"(^|\s)#", raw, maxsplit=1)[0].strip()
            editable = re.fullmatch(r"(?:-e|--editable)(?:\s+|=)(\S.*)", line)
            if editable:
                lines.append(editable[1])
            elif line and not line.startswith("-"):
                lines.append(line)
    found = (_judged(" ".join(line.split())) for line in lines)
    return tuple(requirement for requirement in found if requirement is not None)


@dataclass
class PinMove:
    """A pin file whose vLLM requirement changes: the release it pinned, and what it requires now."""

    path: str
    old: Version | None
    requirement: VllmRequirement

    @property
    def new(self) -> Version | None:
        return self.requirement.release


@dataclass
class Moves:
    """What the PR's changed files do to vLLM: the pin files' moves; the other files that move a vLLM
    requirement (path -> its requirements at the head, as written), never checked; how many other
    files that could pin vLLM were beyond ``OTHERS_READ`` and not read."""

    pins: list[PinMove] = field(default_factory=list)
    elsewhere: dict[str, list[str]] = field(default_factory=dict)
    unread: int = 0
    unread_pins: list[str] = field(default_factory=list)  # pin files past the request budget: never passed


@dataclass
class Budget:
    """The requests left to spend on pin files (``REQUESTS``)."""

    left: int = REQUESTS

    def take(self, requests: int) -> bool:
        """Spend ``requests`` when that many are left; False (nothing spent): the budget is gone."""
        if requests > self.left:
            return False
        self.left -= requests
        return True


def file_text(repo: Repository, path: str, ref: str) -> str | None:
    """The text of ``path`` at ``ref``, read through the API; None: there is no such file."""
    from github import GithubException

    try:
        content = repo.get_contents(path, ref=ref)
    except GithubException as error:
        if error.status == 404:
            return None
        raise
    if isinstance(content, list):
        return None
    return as_base64(content.raw_data, f"{path} at {ref[:12]}").decode("utf-8", "replace")


def _moved(repo: Repository, pr: PullRequest, path: str
           ) -> tuple[tuple[VllmRequirement, ...], tuple[VllmRequirement, ...]] | None:
    """``path``'s vLLM requirements at the base and at the head, when the PR changes them (None: it does not)."""
    head_text = file_text(repo, path, pr.head.sha)
    head = vllm_requirements(path, head_text) if head_text is not None else ()
    if not head:
        return None
    base_text = file_text(repo, path, pr.base.sha)
    base = vllm_requirements(path, base_text) if base_text is not None else ()
    return None if [r.text for r in head] == [r.text for r in base] else (base, head)


def pin_moves(repo: Repository, pr: PullRequest, pins: tuple[str, ...]) -> Moves:
    """Every pin file (of ``pins``, ``[layout] pins``) the PR changes whose vLLM requirements change
    (base commit -> head commit), one move per requirement at the head; and the other changed files
    that move vLLM (module docstring)."""
    found = Moves()
    others, budget = 0, Budget()
    for changed in pr.get_files():
        path = changed.filename
        if is_pin_file(path, pins):
            if not budget.take(2):
                found.unread_pins.append(path)
                continue
            moved = _moved(repo, pr, path)
            if moved is not None:
                base, head = moved
                old = next((r.release for r in base if r.release is not None), None)
                found.pins += [PinMove(path, old, requirement) for requirement in head]
        elif _COULD_PIN.fullmatch(path):
            others += 1
            if others > OTHERS_READ:
                found.unread += 1
                continue
            moved = _moved(repo, pr, path)
            if moved is not None:
                found.elsewhere[path] = [requirement.text for requirement in moved[1]]
    return found


# ------------------------------------------------- files that move vLLM and are not pin files


def pins_line(pins: tuple[str, ...], *paths: str) -> str:
    """The ``[layout] pins`` line of ``pins`` with ``paths`` added, as TOML."""
    return "pins = [" + ", ".join(json.dumps(item, ensure_ascii=False) for item in (*pins, *paths)) + "]"


def _more(count: int) -> str:
    return f"{count} more changed {'file' if count == 1 else 'files'}"


def _declarable(path: str) -> str | None:
    return None if pin_glob_problem(declaring(path)) else declaring(path)


def unread_reason(moves: Moves) -> str:
    """Why ``moves.unread_pins`` were not read (one sentence's end)."""
    return (f"not read: the check spends at most {REQUESTS} requests on the pin files of one PR (two per file), and "
            f"this PR changes {len(moves.unread_pins)} more")


def elsewhere_lines(moves: Moves, pins: tuple[str, ...]) -> list[str]:
    """One line per file that moves vLLM and is not a pin file (for the log and annotations), then
    how many were not read."""
    lines = []
    for path, requirements in moves.elsewhere.items():
        declared = _declarable(path)
        count = f"[layout] {pins_line(pins, declared)} would count it" if declared else \
            "its name cannot be written in [layout] pins"
        lines.append(f"{path} moves {', '.join(requirements)} but is not a pin file: not checked; {count}")
    if moves.unread:
        lines.append(f"{_more(moves.unread)} that could pin vLLM (*.txt, *.in, pyproject.toml) not read (the check "
                     f"reads {OTHERS_READ} files that are not pin files)")
    return lines


def elsewhere_text(moves: Moves, pins: tuple[str, ...]) -> str | None:
    """The step summary's notice about the files that move vLLM and are not pin files (Markdown); None:
    there are none, and none went unread."""
    if not moves.elsewhere and not moves.unread:
        return None
    lines = ["### vLLM moves outside the pin files", "",
             f"The upgrade check reads the pin files `[layout] pins` names ({markdown_code(pins_line(pins))} in "
             "the manifest at the PR's base); a file that is not one is never checked, and gets no comment.", ""]
    for path, requirements in moves.elsewhere.items():
        declared = _declarable(path)
        count = f"`[layout]` {markdown_code(pins_line(pins, declared))} would count it" if declared else \
            "its name cannot be written in `[layout] pins`"
        moved = ", ".join(markdown_code(requirement) for requirement in requirements)
        lines.append(f"- {markdown_code(path)} moves {moved} and is not a pin file: {count}.")
    declarable = [declared for declared in map(_declarable, moves.elsewhere) if declared]
    if len(declarable) > 1:
        lines += ["", f"To count them all: {markdown_code(pins_line(pins, *declarable))}."]
    if moves.unread:
        lines += ["", f"{_more(moves.unread)} that could pin vLLM (`*.txt`, `*.in`, `pyproject.toml`) not read: the "
                      f"check reads {OTHERS_READ} files that are not pin files."]
    return "\n".join([*lines, ""]) + "\n"


__all__ = ["OTHERS_READ", "REQUESTS", "Budget", "Moves", "PinMove", "VllmRequirement", "elsewhere_lines", "elsewhere_text", "file_text",
           "pin_moves", "pins_line", "unread_reason", "vllm_requirements"]
