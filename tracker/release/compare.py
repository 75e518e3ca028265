"""The manifest compared with a vLLM release's source tree, before an upgrade.

For each workaround: are its targets still there with the manifest's fingerprint (kind and
parameter names, read from the syntax tree: ``tracker.engine.source.declared_fingerprint``),
does the release carry its own fix (the workaround's source probe, run on the release's files),
and what would be decided at the release's XPU pins (its ``requirements/xpu.txt``); and where
those answers disagree with the manifest. Nothing of the release is imported or executed: it is
read from its opened tree (``opened.open_release``, ``check_opened``). The test suite's release
matrix calls ``check_tree`` for every release.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from packaging.version import Version

from tracker.decision.gates import Decision
from tracker.decision.probe import carried_fix, markers
from tracker.decision.stack import decide_stack
from tracker.engine.source import declared_fingerprint, file_under
from tracker.model.environment import Settings
from tracker.model.manifest import InlineWorkaround, Manifest, Target, Workaround
from tracker.model.pins import XPU_REQUIREMENTS
from tracker.model.vocabulary import SCHEMA, Choice, Reason, TargetFound, TargetKind
from tracker.release.bindings import Binding
from tracker.release.bindings_cache import release_bindings
from tracker.release.fetch import Say, silent
from tracker.release.opened import OpenedRelease, open_release, opened_tree
from tracker.source_text import read_source


@dataclass(frozen=True)
class TargetCheck:
    path: str
    found: TargetFound
    detail: str


@dataclass(frozen=True, slots=True)
class Disagreement:
    """Where a release's source and one manifest entry (``id``: a workaround's or a tracked inline
    one's) disagree, in words (``text``); written as ``id: text``."""

    id: str
    text: str

    def __str__(self) -> str:
        return f"{self.id}: {self.text}"


class DecisionAtPins(TypedDict):
    """The version gates' decision at a release's XPU pins, as ``check --json`` writes it (``decision_at_pins``)."""

    decision: Choice
    reason: Reason
    detail: str


@dataclass
class WorkaroundCheck:
    id: str
    targets: list[TargetCheck]
    carries_fix: bool  # the manifest's vllm_carries_fix holds for this release
    source_fix: bool | None  # the source probe found vLLM's own fix; None: no probe, or it could not run
    probe: str  # what the probe said, or why it did not run
    decision: DecisionAtPins | None  # at the release's XPU pins; None when the pins are unknown
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth knowing, not drift
    bindings: list[Binding] = field(default_factory=list)  # a target bound under another name (also in notes)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "targets": [vars(t) for t in self.targets],
                "vllm_carries_fix": {"manifest": self.carries_fix, "source": self.source_fix, "probe": self.probe},
                "decision_at_pins": self.decision, "problems": self.problems, "notes": self.notes,
                "bindings": [binding.as_json() for binding in self.bindings]}


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
    def problems(self) -> list[Disagreement]:
        """Where the release's source disagrees with a workaround's manifest entry (exit 3)."""
        return [Disagreement(w.id, problem) for w in self.workarounds for problem in w.problems]

    @property
    def tracked_problems(self) -> list[Disagreement]:
        """Where vLLM's own inline workarounds are not as the manifest says (news, not drift)."""
        return [Disagreement(t.id, t.problem) for t in self.tracked if t.problem]

    def as_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "vllm": self.vllm, "source": self.source,
                "xpu_pins": {name: str(version) for name, version in self.pins.items()},
                "drift": bool(self.problems), "workarounds": [w.as_json() for w in self.workarounds],
                "tracked": [t.as_json() for t in self.tracked]}


def needed_files(manifest: Manifest) -> set[str]:
    """Paths (relative to a source tree) ``check_tree`` reads: every target's module, both ways it can be laid out."""
    modules = {t.module for w in manifest.workarounds for t in w.targets}
    paths = {XPU_REQUIREMENTS, "PKG-INFO", "vllm/_version.py", *(inline.file for inline in manifest.tracked)}
    for module in modules:
        base = module.replace(".", "/")
        paths |= {f"{base}.py", f"{base}/__init__.py"}
    return paths


def check_target(target: Target, root: Path) -> TargetCheck:
    found = declared_fingerprint(target.path, root)
    if found is None:
        module = file_under(root, target.module)
        why = "no such module" if module is None else "no such definition"
        if module is not None and not _parses(module):
            why = f"{module.relative_to(root)} does not parse as Python"
        return TargetCheck(target.path, TargetFound.ABSENT, f"{target.path}: {why} in this release")
    kind, params = found
    if (kind, params) != (target.kind, target.params):
        return TargetCheck(target.path, TargetFound.DRIFTED, f"{target.path} is a {kind} taking ({', '.join(params)}); the "
                                                   f"manifest says a {target.kind} taking ({', '.join(target.params)})")
    return TargetCheck(target.path, TargetFound.SAME, f"{target.path}: {kind} ({', '.join(params)})")


def _parses(path: Path) -> bool:
    try:
        read = read_source(path)  # the one reader of source: a declared codec only from its allow-list
        return read is not None and bool(ast.parse(read.text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


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
                             DecisionAtPins(decision=decided.decision, reason=decided.reason, detail=decided.detail)
                             if decided else None)
    declared = {t.path: t for t in w.targets}
    for found in targets:
        absent_in = declared[found.path].absent_in
        declared_absent = absent_in is not None and version is not None and absent_in.contains(version,
                                                                                               prereleases=True)
        if found.found == TargetFound.DRIFTED:
            result.problems.append(f"drifted: {found.detail}")
        elif found.found == TargetFound.ABSENT and not declared_absent and not declared[found.path].optional:
            result.problems.append(f"vanished: {found.detail}")
        elif found.found != TargetFound.ABSENT and declared_absent:
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
        missing = [t.path for t, d in zip(targets, w.targets, strict=True) if t.found == TargetFound.ABSENT and not d.optional]
        if missing:
            result.problems.append(f"would apply at the XPU pins, but {', '.join(missing)} is absent")
        if source_fix:
            result.problems.append("would apply at the XPU pins, but the source already carries the fix")
    return result


def check_opened(manifest: Manifest, release: OpenedRelease, *, progress: Callable[[str], None] = silent) -> ReleaseCheck:
    """Check every workaround against an opened release (``opened.open_release``): its tree, its
    version and its XPU pins."""
    root, version, pins = release.root, release.version, release.pins
    decisions: list[Decision | None] = [None] * len(manifest.workarounds)
    if version is not None and pins:
        # The version gates alone at the release's XPU pins (the settings' defaults, not this
        # environment's): the source probe on the release's tree is reported beside them (``_probe``).
        described = {"vllm": str(version), **{name: str(pin) for name, pin in pins.items()}}
        decisions = [*decide_stack(manifest, Settings(), described=described, platform=("xpu", "assumed"),
                                   detected={}, probe=False).decisions]
    checks = []
    bound = release_bindings((t.path for w in manifest.workarounds for t in w.targets), release)
    for index, (w, decided) in enumerate(zip(manifest.workarounds, decisions, strict=True), 1):
        progress(f"checking {w.id} ({index}/{len(manifest.workarounds)})")
        checks.append(with_bindings(check_workaround(w, root, version, decided), w, bound))
    tracked = [check_inline(inline, root, version) for inline in manifest.tracked]
    return ReleaseCheck(release.declared, release.label, pins, checks, tracked)


def with_bindings(result: WorkaroundCheck, w: Workaround, bound: list[Binding]) -> WorkaroundCheck:
    """``result`` with the bindings of ``w``'s targets under other names, each a note saying whether
    callers through it reach the wrapper."""
    kinds = {t.path: t.kind for t in w.targets}
    for binding in bound:
        kind = kinds.get(binding.target)
        if kind is None:
            continue
        result.bindings.append(binding)
        if kind in (TargetKind.FUNCTION, TargetKind.CONTEXTMANAGER):
            result.notes.append(f"{binding}: callers through that name reach the wrapper too (the plugin redirects "
                                "the function itself)")
        else:
            result.notes.append(f"{binding}: callers through that name reach the original (a {kind} is wrapped on "
                                "its class only)")
    return result


def check_tree(manifest: Manifest, root: Path, *, label: str | None = None,
               progress: Callable[[str], None] = silent) -> ReleaseCheck:
    """Check every workaround against the vLLM source tree at ``root`` (with ``requirements/xpu.txt``),
    read where it is (``opened.opened_tree``)."""
    return check_opened(manifest, opened_tree(root, label, also=needed_files(manifest)), progress=progress)


def check_inline(inline: InlineWorkaround, root: Path, version: Version | None) -> TrackedCheck:
    """Whether ``inline``'s marker is in its file exactly when the manifest says this release carries it."""
    path = root / inline.file
    read = read_source(path)
    found = read is not None and inline.marker in read.text
    carried = version is not None and inline.carried_in.contains(version, prereleases=True)
    problem = None
    if version is not None and carried and not found:
        problem = (f"vllm{inline.carried_in} should carry it, but {inline.file} has no {inline.marker!r}: "
                   f"vLLM removed or moved it")
    elif version is not None and found and not carried:
        problem = f"{inline.file} has {inline.marker!r}, but the manifest says vllm{inline.carried_in} carries it"
    return TrackedCheck(inline.id, inline.file, carried, found, problem)


def check(manifest: Manifest, what: str, *, workdir: Path | None = None, progress: Say = silent,
          warn: Say = silent) -> ReleaseCheck:
    """``what``: ``vllm==X``, or a path to a wheel, an sdist or a source tree (``opened.open_release``)."""
    with open_release(what, also=needed_files(manifest), workdir=workdir, sites=False, progress=progress,
                      warn=warn) as release:
        return check_opened(manifest, release, progress=progress)


__all__ = ["DecisionAtPins", "Disagreement", "ReleaseCheck", "TargetCheck", "TrackedCheck", "WorkaroundCheck", "check",
           "check_inline", "check_opened", "check_target", "check_tree", "check_workaround", "needed_files", "with_bindings"]
