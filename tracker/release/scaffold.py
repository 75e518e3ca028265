"""A new workaround's first files: ``xpu-workarounds new``.

Its targets are read from a vLLM release's source as ``check`` reads them (``opened.open_release``,
``engine.source.declared_fingerprint``), so the manifest entry starts with the kind and
parameters the release declares. What only a person can say (the symptom, why, how, the
affected window, the upstream references) is written as placeholders that ``lint`` names
(``tracker.model.placeholders``); the module's wrapper and the test fail until they are written.
Nothing here writes a file: the command does, with these texts.
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from packaging.version import Version

from tracker.engine.source import Fingerprint, declared_fingerprint, definition, file_under
from tracker.escape import toml_string
from tracker.model.keys import TARGET_PATH
from tracker.model.placeholders import placeholder
from tracker.model.vocabulary import TARGET_KINDS, TargetKind, module_of
from tracker.release.ahead import fetched_ahead
from tracker.release.bindings import Binding
from tracker.release.bindings_cache import release_bindings
from tracker.release.errors import CheckInputError, NotFetchable
from tracker.release.fetch import Say, silent
from tracker.release.opened import open_release

DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


@dataclass(frozen=True)
class ReadTarget:
    path: str  # as the manifest writes it: package.module:Attribute.path
    fingerprint: Fingerprint
    absent_in: str | None = None  # the supported releases that do not have it, as a specifier

    def describe(self) -> str:
        return f"{self.path} is a {self.fingerprint.kind} taking ({', '.join(self.fingerprint.params)})"


@dataclass
class AcrossReleases:
    """Each target read in every supported release: where it is absent, where it differs, and the
    releases that could not be read."""

    read: list[Version] = field(default_factory=list)
    absent: dict[str, list[Version]] = field(default_factory=dict)
    differs: dict[str, list[Version]] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)  # release: why


def across_releases(targets: Sequence[ReadTarget], newest: Version, releases: Sequence[Version], *,
                    progress: Say = silent, warn: Say = silent) -> AcrossReleases:
    """``targets`` (as read from ``newest``) read in every one of ``releases`` as ``check`` reads a
    release (its reading from the release cache, else fetched): absent, or there with another kind
    or parameters. A release that cannot be read is named (``unread``), not fatal."""
    found = AcrossReleases(read=[newest], absent={t.path: [] for t in targets}, differs={t.path: [] for t in targets})
    others = [release for release in releases if release != newest]
    with fetched_ahead(others) as ready:
        for number, release in enumerate(others, 1):
            def step(text: str, release: Version = release, number: int = number) -> None:
                progress(f"vllm=={release} ({number}/{len(others)}): {text}")

            ready(release, step)
            try:
                with open_release(f"vllm=={release}", also=wanted_files([t.path for t in targets]), reader="new",
                                  sites=False, progress=step, warn=warn) as opened:
                    for target in targets:
                        there = declared_fingerprint(target.path, opened.root)
                        if there is None:
                            found.absent[target.path].append(release)
                        elif there != target.fingerprint:
                            found.differs[target.path].append(release)
            except (NotFetchable, CheckInputError) as error:
                found.unread[str(release)] = str(error)
                continue
            found.read.append(release)
    found.read.sort()
    return found


def absent_specifier(absent: Sequence[Version], read: Sequence[Version]) -> str | None:
    """``absent_in`` for a target absent in ``absent`` of the releases ``read``: the releases before
    the first that has it (``<X``), or one run of releases between two that have it
    (``>=A,<=B``); None when it is absent nowhere, or in releases no one specifier holds alone."""
    if not absent:
        return None
    present = sorted(set(read) - set(absent))
    if not present:
        return None
    if max(absent) < present[0]:
        return f"<{present[0]}"
    low, high = min(absent), max(absent)
    if not any(low <= release <= high for release in present):
        return f">={low},<={high}"
    return None


@dataclass(frozen=True)
class ReadRelease:
    label: str  # what was read: the sdist's name or the tree's path
    version: str | None
    targets: list[ReadTarget]
    bindings: list[Binding]  # where the release's source binds a target under another name

    def binding_lines(self) -> list[str]:
        """Each binding in words, with whether callers through it reach the wrapper."""
        kinds = {target.path: target.fingerprint.kind for target in self.targets}
        return [f"{binding}: callers through that name reach the wrapper too (the plugin redirects the function "
                "itself)" if kinds.get(binding.target) in (TargetKind.FUNCTION, TargetKind.CONTEXTMANAGER)
                else f"{binding}: callers through that name reach the original (a method is wrapped on its class only)"
                for binding in self.bindings]


def module_candidates(target: str) -> list[str]:
    """The modules ``target`` may name, longest first: ``a.b:C.d`` names ``a.b``; ``a.b.C.d`` any prefix."""
    if ":" in target:
        return [target.partition(":")[0]]
    parts = target.split(".")
    return [".".join(parts[:end]) for end in range(len(parts) - 1, 0, -1)]


def wanted_files(targets: Sequence[str]) -> set[str]:
    """The files of a source tree that can hold ``targets``, and those that say its version."""
    files = {"PKG-INFO", "vllm/_version.py"}
    for target in targets:
        for module in module_candidates(target):
            base = module.replace(".", "/")
            files |= {f"{base}.py", f"{base}/__init__.py"}
    return files


def check_spelling(target: str) -> None:
    """``CheckInputError`` unless ``target`` is ``vllm.module:Attribute.path`` or ``vllm.module.Attribute.path``."""
    if not (TARGET_PATH.fullmatch(target) or DOTTED.fullmatch(target)):
        raise CheckInputError(f"--target {target!r} is not a dotted path such as "
                              "vllm.platforms.xpu.XPUPlatform.get_device_total_memory")
    if target.split(".", 1)[0].partition(":")[0] != "vllm":
        raise CheckInputError(f"--target {target}: new reads targets from vLLM's source; a target of another "
                              "package is written into the manifest by hand")


def find_target(target: str, root: Path, release: str) -> ReadTarget:
    """``target`` in the source tree ``root`` (of ``release``), with the fingerprint its source declares."""
    module = next((name for name in module_candidates(target) if file_under(root, name) is not None), None)
    if module is None:
        raise CheckInputError(f"--target {target}: no module of it in {release}")
    path = target if ":" in target else f"{module}:{target[len(module) + 1:]}"
    found = declared_fingerprint(path, root)
    if found is None:
        names = path.partition(":")[2].split(".")
        missing = next(".".join(names[:end]) for end in range(1, len(names) + 1)
                       if definition(f"{module}:{'.'.join(names[:end])}", root) is None)
        raise CheckInputError(f"--target {target}: not in {release}, whose {module} has no {missing}")
    if found.kind not in TARGET_KINDS:
        raise CheckInputError(f"--target {target} is a {found.kind} in {release}: name the function or method "
                              "to wrap (such as its __init__)")
    return ReadTarget(path, found)


def read_targets(targets: Sequence[str], release: str, *, progress: Say = silent, warn: Say = silent) -> ReadRelease:
    """``targets`` read from ``release`` (``vllm==X``, or a wheel, sdist or source tree): ``CheckInputError``
    for a target that is not there, ``NotFetchable`` when the index does not give the release."""
    for target in targets:
        check_spelling(target)
    with open_release(release, also=wanted_files(targets), reader="new", sites=False, progress=progress,
                      warn=warn) as opened:
        named = f"vLLM {opened.declared}" if opened.declared else opened.label
        found = [find_target(target, opened.root, named) for target in targets]
        return ReadRelease(opened.label, opened.declared, found, release_bindings((t.path for t in found), opened))


def _string(text: str) -> str:
    """``text`` as a TOML basic string (``escape.toml_string``: a character outside the Basic Multilingual
    Plane written as it is, never as the two surrogate escapes JSON writes and TOML refuses)."""
    return toml_string(text)


def entry_text(workaround_id: str, targets: Sequence[ReadTarget], added: _dt.date) -> str:
    """The ``[[workaround]]`` entry: the targets as read (with ``absent_in`` where supported releases
    lack one), a placeholder for everything a person says."""
    rows = "".join(f"  {{ path = {_string(t.path)}, kind = {_string(t.fingerprint.kind)}, "
                   f"params = [{', '.join(map(_string, t.fingerprint.params))}]"
                   + (f", absent_in = {_string(t.absent_in)}" if t.absent_in else "") + " },\n" for t in targets)
    return f'''[[workaround]]
id = {_string(workaround_id)}
title = {_string(placeholder("one line: what the workaround does"))}
platform = "xpu"
owner = {_string(placeholder("who answers for it"))}
added = {added.isoformat()}
symptom = {_string(placeholder("what a user sees: the error message, or the wrong behaviour"))}
why = """
{placeholder("why it happens, and in which releases")}"""
how = """
{placeholder("what the wrapper does, and where")}"""
targets = [
{rows}]

[[workaround.affected]]
vllm = {_string(placeholder("the vLLM releases that need it, a specifier such as >=0.30.0 (torch = ... too "
                            "where torch decides)"))}

[[workaround.upstream]]
ref = {_string(placeholder("OWNER/REPO#NUMBER of the upstream pull request or issue"))}
role = {_string(placeholder("root-fix (the upstream fix that cures it), inline-fix (vLLM's own copy of the "
                            "fix), cause (the change that broke it) or related"))}
state = {_string(placeholder("open, merged, landed, reverted or closed-unmerged (upstream --write keeps it "
                             "current)"))}
'''


def module_text(workaround_id: str) -> str:
    """The module: a placeholder docstring (``lint`` names it) and a wrapper that fails until written."""
    name = module_of(workaround_id).rpartition(".")[2]
    return f'''"""{placeholder("the symptom a user saw, as the manifest's symptom says it.")}

{placeholder("what it wraps and what the wrapper does (the manifest's how, briefly).")}
"""

from typing import TYPE_CHECKING

from tracker.api import Context, Wrapper


def make_wrapper(context: Context) -> Wrapper:
    def wrapper(wrapped, instance, args, kwargs):
        # wrapped(*args, **kwargs) calls the original; instance is the object of a method (None for a function).
        raise NotImplementedError("{workaround_id}: the wrapper is not written yet")

    return wrapper


if TYPE_CHECKING:  # mypy holds this module to the API's Protocol
    from tracker.api import WorkaroundModule
    from workarounds import {name} as this_module

    _checked: WorkaroundModule = this_module
'''


def test_text(workaround_id: str) -> str:
    """Its test file: one test that fails until it is written."""
    name = module_of(workaround_id).rpartition(".")[2]
    return f'''"""{workaround_id}: {placeholder("what the workaround does, one behaviour per test.")}"""

from __future__ import annotations

import pytest

from workarounds import {name}


def test_the_wrapper_does_what_the_manifest_says():
    # `xpu-workarounds new` wrote this test to fail until it is written (docs/adding-a-workaround.md):
    # give make_wrapper(context) a stand-in of the target and show what the wrapper changes.
    pytest.fail(f"not written yet: the test of {{{name}.__name__}}.make_wrapper")
'''


_OTHER_TABLE = re.compile(r"^\s*\[\[?\s*(?!workaround\b)[A-Za-z0-9_.\"'-]+\s*\]")
_WORKAROUND = re.compile(r"^\s*\[\[\s*workaround\s*\]\]")
_COMMENT_OR_BLANK = re.compile(r"^\s*(#.*)?$")


def with_entry(text: str, entry: str) -> str | None:
    """``text`` (a manifest) with ``entry`` after its last ``[[workaround]]``, every other byte kept;
    checked to read as the manifest with one more entry (else tomlkit's own append, which may move
    comments). None when neither reads so: the entry cannot be added without changing the rest."""
    expected = tomllib.loads(text)
    expected.setdefault("workaround", []).append(tomllib.loads(entry)["workaround"][0])
    lines = text.splitlines(keepends=True)
    headers = [number for number, line in enumerate(lines) if _WORKAROUND.match(line)]
    if not headers:  # a first manifest (`init`'s): the entry after everything it holds
        edited = f"{text.rstrip()}\n\n{entry}"
        if tomllib.loads(edited) == expected:
            return edited
    after = headers[-1] + 1 if headers else 0
    end = next((number for number in range(after, len(lines)) if _OTHER_TABLE.match(lines[number])), len(lines))
    while end > after and _COMMENT_OR_BLANK.match(lines[end - 1]):
        end -= 1
    head, tail = "".join(lines[:end]).rstrip("\n"), "".join(lines[end:]).lstrip("\n")
    edited = f"{head}\n\n{entry}" + (f"\n{tail}" if tail else "")
    if tomllib.loads(edited) == expected:
        return edited
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError:  # TOML that tomllib reads and tomlkit does not
        return None
    if "workaround" not in document:
        document["workaround"] = tomlkit.aot()
    document["workaround"].append(tomlkit.parse(entry)["workaround"][0])
    edited = tomlkit.dumps(document)
    return str(edited) if tomllib.loads(edited) == expected else None


__all__ = ["AcrossReleases", "ReadRelease", "ReadTarget", "absent_specifier", "across_releases", "entry_text",
           "module_text", "read_targets", "test_text", "with_entry"]
