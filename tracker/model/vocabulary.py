"""The manifest's closed vocabularies, each defined once.

``StrEnum`` members are their own strings: JSON, f-strings and comparisons with plain
strings see the values as written in ``workarounds.toml``. Here too: the kinds of error the
tool foresees (``ErrorKind``) and the error that carries one (``ToolError``).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TypeGuard

SCHEMA = 1  # of workarounds.toml and of every JSON document the tracker prints (its caches keep their own)


class ErrorKind(StrEnum):
    """Whose an error the tool foresees is (``ToolError``); the command line gives each kind its
    exit code in one place (``tracker.commands.exits``)."""

    BAD_INPUT = "bad-input"  # the caller's: a malformed value, a missing extra, manifest, path or layout
    OUTSIDE_SERVICE = "outside-service"  # GitHub, a package index or a Ray cluster: unreachable, or answered wrongly


class ToolError(Exception):
    """An error the tool foresees, said in one line (its text); ``kind`` says whose it is, never how
    a process ends. Each subclass names its kind. An exception that is no ``ToolError`` is a bug."""

    kind: ErrorKind

    def annotations(self) -> list[str]:
        """GitHub Actions workflow commands that place the error in a file, said before its line in
        an Actions step; none unless a subclass has a place to name."""
        return []


class Platform(StrEnum):
    """Where a workaround may apply, and what a stack is (``UNKNOWN``: nothing tells, no torch
    installed; never a workaround's platform)."""

    XPU = "xpu"
    CUDA = "cuda"
    ROCM = "rocm"
    CPU = "cpu"
    UNKNOWN = "unknown"


class Role(StrEnum):
    """What an upstream reference is to a workaround."""

    CAUSE = "cause"
    INLINE_FIX = "inline-fix"
    ROOT_FIX = "root-fix"
    # An upstream change the workaround's code reads (``Context.installed_contains``) that
    # neither causes nor cures the bug, e.g. a kernels fix that lets it skip a copy.
    RELATED = "related"


class State(StrEnum):
    """What happened to an upstream pull request (or issue: open or closed)."""

    OPEN = "open"
    MERGED = "merged"
    LANDED = "landed"
    REVERTED = "reverted"
    CLOSED_UNMERGED = "closed-unmerged"
    CLOSED = "closed"  # an issue (not a pull request) that is closed


class Choice(StrEnum):
    """A decision: whether a workaround is applied here."""

    APPLY = "apply"
    SKIP = "skip"


class Reason(StrEnum):
    """Why (docs/how-it-works.md, "How a decision is made"): ``affected``/``forced`` apply, every other skips."""

    AFFECTED = "affected"
    FORCED = "forced"
    PLATFORM = "platform"
    NOT_AFFECTED = "not-affected"
    VLLM_CARRIES_FIX = "vllm-carries-fix"
    ROOT_FIX_INSTALLED = "root-fix-installed"
    DISABLED = "disabled"
    KILL_SWITCH = "kill-switch"
    UNKNOWN_VERSION = "unknown-version"


class DecidedBy(StrEnum):
    VERSION = "version"  # the manifest's windows and the installed versions
    PROBE = "probe"  # evidence read from the installed code


class Outcome(StrEnum):
    """What happened to a workaround (or one target) in a process, worst first."""

    FAILED = "failed"
    DRIFTED = "drifted"
    PARTIAL = "partial"  # wrapped, but some reference to the original could not be rebound (named in the report)
    APPLIED = "applied"
    WAITING = "waiting"
    SKIPPED = "skipped"


class TargetFound(StrEnum):
    """How ``check`` finds a workaround's target in a release's source."""

    SAME = "same"  # there, with the manifest's fingerprint
    DRIFTED = "drifted"  # there, as another kind or with other parameters
    ABSENT = "absent"


class NodeState(StrEnum):
    """What a node of a Ray cluster answered ``status --cluster``."""

    OK = "ok"
    MISSING = "missing"  # the package is not installed there
    ERROR = "error"
    NO_ANSWER = "no-answer"


class Verdict(StrEnum):
    """Retirement: whether any supported stack still needs a workaround."""

    RETIRABLE = "retirable"
    KEEP = "keep"


class TargetKind(StrEnum):
    FUNCTION = "function"
    METHOD = "method"
    CLASSMETHOD = "classmethod"
    STATICMETHOD = "staticmethod"
    CONTEXTMANAGER = "contextmanager"


APPLY_REASONS: frozenset[str] = frozenset({Reason.AFFECTED.value, Reason.FORCED.value})
SKIP_REASONS: frozenset[str] = frozenset(r.value for r in Reason) - APPLY_REASONS
PLATFORMS: tuple[str, ...] = tuple(p.value for p in Platform if p is not Platform.UNKNOWN)  # a workaround's, --platform's
ROLES: tuple[str, ...] = tuple(r.value for r in Role)
# A fix with ``remaining`` cures only part of the bug: it never counts as vLLM carrying the
# fix (``vllm_carries_fix`` says that) nor retires anything.
PARTIAL_ROLES: frozenset[str] = frozenset({Role.ROOT_FIX.value, Role.INLINE_FIX.value})
STATES: tuple[str, ...] = tuple(s.value for s in State)
TARGET_KINDS: tuple[str, ...] = tuple(k.value for k in TargetKind)
# States in which a reference's commit is in the repository, so a release can contain it.
RELEASED_STATES: frozenset[str] = frozenset({State.MERGED.value, State.LANDED.value})


def is_id(value: object) -> TypeGuard[str]:
    """A workaround's (or a tracked inline workaround's) id: lower-case ASCII words of letters
    and digits joined by single hyphens, the first word starting with a letter
    (``some-workaround``; the regular expression ``[a-z][a-z0-9]*(-[a-z0-9]+)*``, which
    tests/test_vocabulary.py checks this against). Written without one: compiling it cost
    0.2 ms in every process that carries out stored plans, which checks each plan's id."""
    return (isinstance(value, str) and value.isascii() and value[:1].isalpha()
            and all(word.isalnum() and word == word.lower() for word in value.split("-")))


def keyword_id(value: str) -> bool:
    """Whether an id is a Python keyword (``import``, ``class``): its module, ``workarounds.<id>``,
    could not be imported (``from workarounds import import`` does not compile), so no entry of
    either kind takes it."""
    import keyword

    return keyword.iskeyword(value.replace("-", "_"))


KEYWORD_ID = "is a Python keyword: its module, workarounds.<id>, could not be imported; choose another id"


def entry_label(table: str, raw_id: object, index: int) -> str:
    """How a problem names a manifest entry: ``table[id]`` when its id is well-formed, else
    ``table[index]`` (an id is untrusted text: ``:`` or a newline in it would break the
    ``path:line: field: message`` shape of a problem line)."""
    return f"{table}[{raw_id}]" if is_id(raw_id) else f"{table}[{index}]"


def module_of(workaround_id: str) -> str:
    """The module that holds a workaround's code: ``workarounds.<id with _>`` (never written
    in the manifest)."""
    return "workarounds." + workaround_id.replace("-", "_")


def closest_id(name: str, known: Iterable[str]) -> str | None:
    """The known id ``name`` most likely meant (a module's spelling ``static_launcher_uva``, a
    typo, another case), or None when none is close: for "did you mean" in every message that
    refuses an unknown id."""
    import difflib

    candidates = sorted(set(known))
    spelled = name.strip().lower().replace("_", "-")
    if spelled in candidates:
        return spelled
    found = difflib.get_close_matches(spelled, candidates, n=1, cutoff=0.75)
    return found[0] if found else None


def unknown_id_hint(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when a known id is close to ``name``, else ""."""
    match = closest_id(name, known)
    return f"; did you mean {match!r}?" if match is not None else ""
