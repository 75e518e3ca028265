"""The typed view of ``workarounds.toml`` that the rest of the tracker reads.

Plain named tuples, built by ``tracker.model.reader`` (which validates the text first);
nothing here reads files, imports torch, vLLM or a workaround module. Named tuples, not
dataclasses: a frozen dataclass generates its methods at every import (~0.8 ms each on
the benchmark machine, paid by every vLLM process); a named tuple costs a tenth of that.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

import tracker
from tracker.model.vocabulary import Platform, Role, State, TargetKind, module_of


class Target(NamedTuple):
    path: str  # "package.module:Class.attr"
    kind: TargetKind
    params: tuple[str, ...]
    optional: bool = False
    # vLLM releases known not to have this target (``check`` and the release matrix hold the
    # manifest to it: absent there, present with this fingerprint everywhere else).
    absent_in: SpecifierSet | None = None

    @property
    def module(self) -> str:
        return self.path.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.path.partition(":")[2]


class Window(NamedTuple):
    """One affected window: every named component must match (AND)."""

    specs: dict[str, SpecifierSet]
    texts: dict[str, str]  # as written, for people (SpecifierSet reorders clauses)

    def describe(self) -> str:
        return ", ".join(f"{name}{text}" for name, text in self.texts.items())


class Release(NamedTuple):
    """``torch>=2.14.0``: the first release of a component containing a fix."""

    component: str
    version: Version

    def __str__(self) -> str:
        return f"{self.component}>={self.version}"


class SourceMarker(NamedTuple):
    """What vLLM's own code holds where it carries an inline fix, read in a target's source:
    a statement or expression it contains (compared as syntax), or a parameter it declares."""

    contains: str | None = None
    declares: str | None = None

    def __str__(self) -> str:
        return f"`{self.contains}`" if self.contains is not None else f"a parameter named {self.declares}"


class UpstreamRef(NamedTuple):
    ref: str
    role: Role
    state: State
    released_in: Release | None = None
    commit: str | None = None
    note: str | None = None
    # A fix that cures only part of the bug says what it leaves (e.g. "torch.xpu.Event
    # still rejects external"): code working around that part stays needed.
    remaining: str | None = None
    # An inline fix's marker: where a target's source holds it, this vLLM carries the fix.
    marker: SourceMarker | None = None

    @property
    def repo(self) -> str:
        return self.ref.partition("#")[0]

    @property
    def number(self) -> int:
        return int(self.ref.partition("#")[2])


class Workaround(NamedTuple):
    id: str
    title: str
    platform: Platform
    owner: str
    added: _dt.date
    symptom: str
    why: str
    how: str
    targets: tuple[Target, ...]
    affected: tuple[Window, ...]
    upstream: tuple[UpstreamRef, ...]
    vllm_carries_fix: SpecifierSet | None = None

    @property
    def module(self) -> str:
        """Its code: ``workarounds.<id with _>`` (derived, never written in the manifest)."""
        return module_of(self.id)

    @property
    def components(self) -> tuple[str, ...]:
        """Components the affected windows constrain, in manifest order."""
        seen: dict[str, None] = {}
        for window in self.affected:
            seen.update(dict.fromkeys(window.specs))
        return tuple(seen)

    def refs(self, role: str) -> tuple[UpstreamRef, ...]:
        return tuple(ref for ref in self.upstream if ref.role == role)


class SupportPolicy(NamedTuple):
    """``[support.policy]``: floors that move with upstream (evaluated by ``tracker.upstream.floors``).

    ``vllm_minors``: the latest N vLLM minor releases are supported (from vLLM's release tags);
    ``xpu_pins``: the oldest supported vLLM's XPU pins imply the torch and vllm-xpu-kernels floors.
    The fixed floors of ``[support]`` stay the lowest the policy may give.
    """

    vllm_minors: int | None = None
    xpu_pins: bool = False

    @property
    def active(self) -> bool:
        return self.vllm_minors is not None or self.xpu_pins


class InlineWorkaround(NamedTuple):
    """One of vLLM's own XPU workarounds, as the project tracks it."""

    id: str
    title: str
    file: str  # in vLLM's source tree: "vllm/platforms/xpu.py"
    marker: str  # a line fragment of that file that is there exactly while vLLM carries it
    carried_in: SpecifierSet  # vLLM releases that carry it
    waits_on: str | None = None  # OWNER/REPO#N
    link: str | None = None  # a reference that is not a PR or issue
    dead_when: Release | None = None  # dead code once vLLM pins a release this new for XPU
    remaining: str | None = None  # what stays needed even then
    note: str | None = None

    @property
    def reference(self) -> str:
        return self.waits_on or self.link or "no upstream reference named"


class Layout(NamedTuple):
    """``[layout]``: where the bot finds a repository's parts, relative to its root.

    ``workarounds``: the package folder of workaround modules; ``tests``: the tests folder;
    ``docs``: the generated catalogue (None: the repository keeps none). ``written`` names the
    keys the manifest sets: a path it sets must exist, a default one may be absent. ``pins``: the
    repository's own files that pin vLLM, paths or globs (``tracker.model.pin_files``), which may
    match nothing.
    """

    workarounds: str = "workarounds"
    tests: str = "tests"
    docs: str | None = "docs/workarounds.md"
    written: frozenset[str] = frozenset()
    # The root's: what pip, uv and the standard lock (PEP 751) read by default.
    pins: tuple[str, ...] = ("pyproject.toml", "requirements*.txt", "uv.lock", "pylock.toml", "pylock.*.toml")


class Source(NamedTuple):
    """``[sources.COMPONENT]``: the repository that releases a component, how its release tags
    are named (``{version}`` in ``tag``) and, for vLLM, the file of its tree holding the XPU pins
    (vLLM's tree, never the adopter's: the adopter's pin files are ``Layout.pins``)."""

    component: str
    repository: str
    tag: str = "v{version}"
    pins: str | None = None

    @property
    def tag_prefix(self) -> str:
        return self.tag.partition("{version}")[0]

    @property
    def tag_suffix(self) -> str:
        return self.tag.partition("{version}")[2]


# Today's four: which repository releases which component (the manifest speaks in PyPI
# components: ``v2.14.0`` of pytorch/pytorch is ``torch>=2.14.0``).
DEFAULT_SOURCES: dict[str, Source] = {
    "torch": Source("torch", "pytorch/pytorch"),
    "vllm": Source("vllm", "vllm-project/vllm", pins="requirements/xpu.txt"),
    "vllm-xpu-kernels": Source("vllm-xpu-kernels", "vllm-project/vllm-xpu-kernels"),
    "intel-extension-for-pytorch": Source("intel-extension-for-pytorch", "intel/intel-extension-for-pytorch"),
}


class Manifest(NamedTuple):
    path: Path
    support: dict[str, Version]
    workarounds: tuple[Workaround, ...]
    by_id: dict[str, Workaround]
    policy: SupportPolicy = SupportPolicy()
    tracked: tuple[InlineWorkaround, ...] = ()  # vLLM's own inline workarounds (read by tracker.model.tracked)
    sha256: str | None = None  # of the file's bytes as read (``tracker.model.reader``)
    layout: Layout = Layout()
    sources: dict[str, Source] = DEFAULT_SOURCES  # component -> its source ([sources] over the defaults)

    def get(self, workaround_id: str) -> Workaround:
        return self.by_id[workaround_id]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(w.id for w in self.workarounds)


def provenance(path: Path | str, sha256: str | None) -> dict[str, str | None]:
    """Which tool and which manifest decided: ``status --json``'s ``tool``, every process
    report's, and (shortened, ``tracker.short_digest``) ``--version`` and the plugin's log line."""
    return {"version": tracker.__version__, "manifest": os.path.abspath(path), "manifest_sha256": sha256}


class Problem(NamedTuple):
    """One thing wrong with a manifest, at the line it is on."""

    path: Path
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"


class ManifestError(Exception):
    """The manifest cannot be used; ``problems`` says why, one line each."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


__all__ = ["DEFAULT_SOURCES", "InlineWorkaround", "Layout", "Manifest", "ManifestError", "SourceMarker", "Problem", "Release",
           "Source", "SupportPolicy", "Target", "UpstreamRef", "Window", "Workaround", "module_of", "provenance"]
