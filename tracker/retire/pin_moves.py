"""What a pull request does to the vLLM pin: the vLLM requirements of the repository's pin files,
read at its base and head commits through the API (nothing checked out or run).

Pin files are the ones ``[layout] pins`` names (paths or globs, ``tracker.model.pin_files``;
by default the root's ``pyproject.toml``, ``requirements*.txt``, ``uv.lock`` and ``pylock*.toml``),
each read as ``tracker.model.pin_contents`` reads it: every one the PR changes is read, and every
pin file whose ``-r`` / ``-c`` includes the PR changes. A changed pin file that cannot be read, or
that named vLLM at the base and no longer does, is a notice the comment carries; one that never
named vLLM, and a ``[layout] pins`` entry without a glob that gives no vLLM pin, a notice in the
step summary. Another changed file that could pin vLLM (a ``*.txt``, a ``*.in``, a
``pyproject.toml``, a lock) is never checked; the first ``OTHERS_READ`` of them are read all the
same, so that one that moves vLLM is named (with the ``[layout] pins`` line that would count it)
rather than passed over in silence. The look-ahead reads the pin at the base branch with the same
rules.

What a PR can make the check do is bounded by one budget: a run spends at most ``REQUESTS``
requests reading files at the PR's base and head (``Budget``, spent by ``commit_reader``: one per
file read at a commit, each read once, one more for a file read as its blob; two for the listing
that finds the pin files including a changed file). The pin files the PR changes are read first.
A pin file that the budget stops short of (itself, or one of its includes, at either commit) is not
read, and named (``Moves.unread_pins``): the check fails closed on it, as on a pin it cannot check,
rather than pass what it never read. Another file that could pin vLLM that the budget stops short
of is counted with those beyond ``OTHERS_READ``; a tree listing it leaves no request for is a notice
the comment carries, as a listing too large is one in the step summary.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from tracker.escape import markdown_code, markdown_text
from tracker.model.pin_contents import (
    MAX_BYTES,
    PinFile,
    PinKind,
    Read,
    Unreadable,
    VllmRequirement,
    kind_of,
    no_vllm_reason,
    read_pin_file,
    read_text,
    vllm_requirements_of,
)
from tracker.model.pin_files import declaring, is_pin_file, pin_glob_problem
from tracker.upstream.fields import as_base64

if TYPE_CHECKING:  # GitHub code (the github extra), imported when a pull request is checked
    from github.PullRequest import PullRequest
    from github.Repository import Repository

# A changed file that is not a pin file but could pin vLLM (or be included by one), and how many of those are read.
_COULD_PIN = re.compile(r"(?:.*/)?(?:pyproject\.toml|uv\.lock|pylock\.(?:[^./]+\.)?toml|[^/]*\.(?:txt|in))")
OTHERS_READ = 20
# The requests a run spends reading files at the PR's base and head (pin files, their includes, other
# files that could pin vLLM). A real PR moves a handful; GitHub lists up to 3,000 changed files, and an
# Actions token has 1,000 requests an hour.
REQUESTS = 200


def vllm_requirements(path: str, text: str, read: Read | None = None) -> tuple[VllmRequirement, ...]:
    """Every requirement on vLLM in a pin file's ``text`` (``tracker.model.pin_contents``; its ``-r`` /
    ``-c`` includes through ``read``, none without it)."""
    return vllm_requirements_of(read_text(path, text, read))


@dataclass
class PinMove:
    """A pin file whose vLLM requirement changes: the release it pinned, and what it requires now."""

    path: str
    old: Version | None
    requirement: VllmRequirement

    @property
    def new(self) -> Version | None:
        return self.requirement.release


@dataclass(frozen=True)
class PinNotice:
    """What the check could not read, or found no vLLM in: one sentence about one file. ``loud``: the
    PR changed that pin file, so the comment says it too (else the step summary alone)."""

    path: str
    text: str
    loud: bool = False


@dataclass
class Moves:
    """What the PR's changed files do to vLLM: the pin files' moves; the other files that move a vLLM
    requirement (path -> its requirements at the head, as written), never checked; how many other
    files that could pin vLLM were beyond ``OTHERS_READ`` and not read; the notices about pin files
    the check could not read or found no vLLM in; the pin files past the request budget (``Budget``)."""

    pins: list[PinMove] = field(default_factory=list)
    elsewhere: dict[str, list[str]] = field(default_factory=dict)
    unread: int = 0
    notices: list[PinNotice] = field(default_factory=list)
    unread_pins: list[str] = field(default_factory=list)  # pin files past the request budget: never passed

    @property
    def loud(self) -> list[PinNotice]:
        return [notice for notice in self.notices if notice.loud]


class OverBudget(Unreadable):
    """A file not read because the run's request budget (``Budget``) is spent."""


@dataclass
class Budget:
    """The requests left to spend on reading files at the PR's commits (``REQUESTS``), and how many
    reads it refused."""

    left: int = REQUESTS
    refused: int = 0

    def take(self, requests: int) -> bool:
        """Spend ``requests`` when that many are left; False (nothing spent, one refusal counted): the
        budget is gone."""
        if requests > self.left:
            self.refused += 1
            return False
        self.left -= requests
        return True

    def spend(self) -> None:
        """One request; ``OverBudget`` when none is left."""
        if not self.take(1):
            raise OverBudget(f"past the run's budget of {REQUESTS} requests")


def file_text(repo: Repository, path: str, ref: str, limit: int | None = None,
              budget: Budget | None = None) -> str | None:
    """The text of ``path`` at ``ref``, read through the API; None: there is no such file. With
    ``limit`` (a pin file's read): a file larger than that, or a link GitHub does not follow (one out
    of the repository), is ``Unreadable``; a file too large for the contents API (GitHub's limit is
    1 MB) is read as its blob, one more request of ``budget``."""
    from github import GithubException

    try:
        content = repo.get_contents(path, ref=ref)
    except GithubException as error:
        if error.status == 404:
            return None
        raise
    if isinstance(content, list):
        return None
    if limit is not None:
        if content.type != "file":
            raise Unreadable(f"a {content.type} GitHub does not follow (a link out of the repository): not read")
        if content.size > limit:
            raise Unreadable(f"larger than {limit // (1024 * 1024)} MiB: not read")
    read = content.raw_data
    if read.get("encoding") == "none":  # over the contents API's 1 MB: the blob has the bytes
        if budget is not None:
            budget.spend()
        read = repo.get_git_blob(content.sha).raw_data
    return as_base64(read, f"{path} at {ref[:12]}").decode("utf-8", "replace")


def commit_reader(repo: Repository, ref: str, budget: Budget) -> Read:
    """A commit's files read through the API, each once, bounded (``file_text``'s ``limit``), each read
    spending ``budget`` (``OverBudget`` when it is spent): a stranger's PR cannot make the check send
    requests without end."""
    read: dict[str, str | None] = {}

    def text(path: str) -> str | None:
        if path not in read:
            budget.spend()
            read[path] = file_text(repo, path, ref, MAX_BYTES, budget)
        return read[path]

    return text


def _written(requirements: tuple[VllmRequirement, ...]) -> list[tuple[str, str | None]]:
    return [(requirement.text, requirement.where) for requirement in requirements]


def _compared(path: str, base: Read, head: Read, found: Moves) -> PinFile:
    """``path`` at the base and at the head: its moves, or the notice why there is none to check."""
    at_head = read_pin_file(path, head)
    if at_head.problem is not None and not at_head.missing:
        found.notices.append(PinNotice(path, f"{path} cannot be read at the PR's head ({at_head.problem}): whether it "
                                             "moves vLLM is not known", loud=True))
        return at_head
    after = vllm_requirements_of(at_head)
    before = vllm_requirements_of(read_pin_file(path, base))
    found.notices += [PinNotice(path, notice, loud=not after) for notice in at_head.notices]
    if not after:
        if before:
            was = ", ".join(requirement.text for requirement in before)
            gone = "is removed" if at_head.missing else "names no vLLM requirement at the PR's head"
            found.notices.append(PinNotice(path, f"{path} pinned {was} at the base and {gone}: nothing to check",
                                           loud=True))
        elif not at_head.missing:
            found.notices.append(PinNotice(path, f"{path} names no vLLM requirement: nothing in it to check"))
        return at_head
    if _written(after) != _written(before):
        old = next((requirement.release for requirement in before if requirement.release is not None), None)
        for requirement in after:
            move = PinMove(requirement.where or path, old, requirement)
            if all((m.path, m.requirement.text) != (move.path, requirement.text) for m in found.pins):
                found.pins.append(move)
    return at_head


def _including(repo: Repository, pr: PullRequest, pins: tuple[str, ...], changed: set[str], skip: set[str],
               head: Read, budget: Budget, found: Moves) -> list[str]:
    """The pin files at the head that include (``-r`` / ``-c``) one of ``changed`` and are not in ``skip``,
    found in the head's tree; the first ``OTHERS_READ`` of them are read (one the budget stops short of
    is in ``found.unread_pins``)."""
    if not budget.take(2):
        found.notices.append(PinNotice("", "the request budget was spent before the PR's tree could be listed: pin "
                                           "files that include a changed file were not looked for", loud=True))
        return []
    tree_sha = repo.get_git_commit(pr.head.sha).tree.sha
    tree = repo.get_git_tree(tree_sha, recursive=True)
    if tree.raw_data.get("truncated"):
        found.notices.append(PinNotice("", "the PR's tree is too large for one listing: pin files that include a "
                                           "changed file were not looked for"))
        return []
    candidates = [entry.path for entry in tree.tree if entry.type == "blob" and entry.path not in skip
                  and is_pin_file(entry.path, pins) and kind_of(entry.path) is PinKind.REQUIREMENTS]
    including = []
    for path in candidates[:OTHERS_READ]:
        refused = budget.refused
        sources = read_pin_file(path, head).sources[1:]
        if budget.refused != refused:
            found.unread_pins.append(path)
        elif changed & set(sources):
            including.append(path)
    return including


def _compared_within(path: str, base: Read, head: Read, budget: Budget, found: Moves) -> PinFile | None:
    """``_compared``, or, when the budget stops short of any file it reads, nothing of it kept and
    ``path`` in ``found.unread_pins`` (None)."""
    refused, pins, notices = budget.refused, len(found.pins), len(found.notices)
    pin_file = _compared(path, base, head, found)
    if budget.refused == refused:
        return pin_file
    del found.pins[pins:], found.notices[notices:]
    found.unread_pins.append(path)
    return None


def pin_moves(repo: Repository, pr: PullRequest, pins: tuple[str, ...], named: tuple[str, ...] = ()) -> Moves:
    """Every pin file (of ``pins``, ``[layout] pins``) the PR changes, or whose ``-r`` / ``-c`` includes it
    changes, whose vLLM requirements change (base commit -> head commit), one move per requirement at the
    head; the notices about those it cannot read or finds no vLLM in, and about the files ``named``
    (``[layout] pins`` entries without a glob) that give no vLLM pin at the head; and the other changed
    files that move vLLM (module docstring)."""
    found, budget = Moves(), Budget()
    base, head = commit_reader(repo, pr.base.sha, budget), commit_reader(repo, pr.head.sha, budget)
    changed = [changed.filename for changed in pr.get_files()]
    pin_paths = [path for path in changed if is_pin_file(path, pins)]
    others = [path for path in changed if path not in pin_paths and _COULD_PIN.fullmatch(path)]
    read = [_compared_within(path, base, head, budget, found) for path in pin_paths]  # the changed ones first
    if others:
        including = _including(repo, pr, pins, set(others), set(pin_paths), head, budget, found)
        pin_paths += including
        read += [_compared_within(path, base, head, budget, found) for path in including]
    included = {source for pin_file in read if pin_file is not None for source in pin_file.sources}
    for path in named:
        if path not in pin_paths:
            why = no_vllm_reason(read_pin_file(path, head))
            if why is not None:
                found.notices.append(PinNotice(path, f"{path} ([layout] pins) {why}"))
    for count, path in enumerate((path for path in others if path not in included), 1):
        refused = budget.refused
        after = vllm_requirements_of(read_pin_file(path, head)) if count <= OTHERS_READ else ()
        before = vllm_requirements_of(read_pin_file(path, base)) if after else ()
        if count > OTHERS_READ or budget.refused != refused:
            found.unread += 1
        elif after and _written(after) != _written(before):
            found.elsewhere[path] = [requirement.text for requirement in after]
    return found


def _range_holds(requirement: VllmRequirement, releases: set[Version]) -> bool:
    """Whether ``requirement`` is a range (no URL) that every release of ``releases`` is in."""
    try:
        parsed = Requirement(requirement.text)
    except InvalidRequirement:
        return False
    return (not parsed.url and bool(parsed.specifier) and bool(releases)
            and all(parsed.specifier.contains(release, prereleases=True) for release in releases))


def without_held_ranges(moves: list[PinMove]) -> list[PinMove]:
    """``moves`` less the ranges every release the others pin lies in (a ``pyproject.toml``'s
    ``vllm>=0.33`` beside the ``uv.lock`` that pins 0.33.1): the release checked is the one installed."""
    releases = {move.new for move in moves if move.new is not None}
    return [move for move in moves if move.new is not None or not _range_holds(move.requirement, releases)]


def unread_reason(moves: Moves) -> str:
    """Why ``moves.unread_pins`` were not read (one sentence's end)."""
    return (f"not read: the check spends at most {REQUESTS} requests reading the files of one PR (one per file at "
            f"each of its base and head), and {len(moves.unread_pins)} of its pin files are past it")


def notice_lines(moves: Moves) -> list[str]:
    """One line per notice about a pin file (for the log and annotations)."""
    return [notice.text for notice in moves.notices]


def notices_text(notices: list[PinNotice]) -> list[str]:
    """The notices about pin files as a Markdown section's lines (none: no lines)."""
    if not notices:
        return []
    return ["### Pin files the check could not read, or found no vLLM in", "",
            *[f"- {markdown_text(notice.text)}" for notice in notices], "",
            "`xpu-workarounds pins`, run in the repository, lists what is read from each pin file.", ""]


# ------------------------------------------------- files that move vLLM and are not pin files


def pins_line(pins: tuple[str, ...], *paths: str) -> str:
    """The ``[layout] pins`` line of ``pins`` with ``paths`` added, as TOML."""
    return "pins = [" + ", ".join(json.dumps(item, ensure_ascii=False) for item in (*pins, *paths)) + "]"


def _more(count: int) -> str:
    return f"{count} more changed {'file' if count == 1 else 'files'}"


def _declarable(path: str) -> str | None:
    return None if pin_glob_problem(declaring(path)) else declaring(path)


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
                     f"reads {OTHERS_READ} files that are not pin files, within its request budget)")
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
                      f"check reads {OTHERS_READ} files that are not pin files, within its request budget."]
    return "\n".join([*lines, ""]) + "\n"


__all__ = ["OTHERS_READ", "REQUESTS", "Budget", "Moves", "OverBudget", "PinMove", "PinNotice", "VllmRequirement",
           "commit_reader", "elsewhere_lines", "elsewhere_text", "file_text", "notice_lines", "notices_text",
           "pin_moves", "pins_line", "unread_reason", "vllm_requirements", "without_held_ranges"]
