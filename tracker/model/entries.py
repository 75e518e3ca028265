"""From parsed TOML to the typed ``Manifest``: every table and field checked in one pass.

``Reader`` collects every problem with the line it is on (the line locator is built on the
first problem only) and builds the named tuples of ``tracker.model.manifest``; reading the
file itself (size, regular file, UTF-8, TOML) is ``tracker.model.reader``'s part.
"""

from __future__ import annotations

import ast
import datetime as _dt
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tracker.model.manifest import (
    DEFAULT_SOURCES,
    Layout,
    Manifest,
    Problem,
    Release,
    Source,
    SourceMarker,
    SupportPolicy,
    Target,
    UpstreamRef,
    Window,
    Workaround,
    module_of,
)
from tracker.model.specifiers import satisfiable, specifier_set, version
from tracker.model.tracked import read_tracked
from tracker.model.versions import COMPONENTS
from tracker.model.vocabulary import (
    PARTIAL_ROLES,
    PLATFORMS,
    RELEASED_STATES,
    ROLES,
    SCHEMA,
    STATES,
    TARGET_KINDS,
    Platform,
    Role,
    State,
    TargetKind,
    entry_label,
    is_id,
)

if TYPE_CHECKING:
    from tracker.model.lines import LineLocator


# OWNER/NAME as GitHub spells them (as _REPOSITORY): no '.' or '..' that would lead a request path
# out of /repos/OWNER/NAME/.
_REF = re.compile(r"^(?P<repo>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.)[A-Za-z0-9_.-]{1,100})#(?P<number>[1-9][0-9]*)$")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_RELEASED_IN = re.compile(r"^(?P<component>[a-z][a-z0-9-]*)>=(?P<version>\S+)$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
MARKER_LIMIT = 512  # characters of an inline fix's marker

_TOP_KEYS = frozenset({"schema", "support", "workaround", "tracked", "layout", "sources"})
_LAYOUT_KEYS = ("workarounds", "tests", "docs")
_SOURCE_KEYS = ("repository", "tag", "pins")
_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.)[A-Za-z0-9_.-]{1,100}$")
_RELATIVE = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[A-Za-z0-9_./-]+(?<!/)$")
_WORKAROUND_REQUIRED = (
    "id", "title", "platform", "owner", "added", "symptom", "why", "how", "targets", "affected", "upstream",
)
# ``module`` is derived from ``id``; an explicit one is tolerated when it says the same (docs/manifest.md).
_WORKAROUND_KEYS = frozenset({*_WORKAROUND_REQUIRED, "vllm_carries_fix", "module"})
_WORKAROUND_STRINGS = ("id", "title", "module", "platform", "owner", "symptom", "why", "how")
_TARGET_KEYS = frozenset({"path", "kind", "params", "optional", "absent_in"})
_UPSTREAM_REQUIRED = ("ref", "role", "state")
_UPSTREAM_KEYS = frozenset({*_UPSTREAM_REQUIRED, "released_in", "commit", "note", "remaining", "marker"})


# Where a problem is: a line, or how to find it (only asked when there is a problem).
Where = int | Callable[[], int]


class Reader:
    def __init__(self, path: Path, text: str, data: dict[str, Any]):
        self.path = path
        self.text = text
        self.data = data
        self._lines: LineLocator | None = None
        self.problems: list[Problem] = []
        self.policy = SupportPolicy()

    @property
    def lines(self) -> LineLocator:
        if self._lines is None:
            from tracker.model.lines import LineLocator  # only where there is a problem to point at

            self._lines = LineLocator(self.text)
        return self._lines

    def problem(self, where: Where, field_name: str, message: str) -> None:
        line = where if isinstance(where, int) else where()
        self.problems.append(Problem(self.path, line, field_name, message))

    def read(self) -> tuple[Manifest | None, list[Problem]]:
        data = self.data
        for key in data:
            if key not in _TOP_KEYS:
                self.problem(self.lines.of(key=key), key, "unknown key")
        schema = data.get("schema")
        if schema != SCHEMA:
            self.problem(lambda: self.lines.of(key="schema"), "schema", f"must be {SCHEMA}, got {schema!r}")
        entries = data.get("workaround")
        # A repository that carries vLLM's code tracks its inline workarounds only: no [[workaround]], no floors.
        tracked_only = entries is None and bool(data.get("tracked"))
        support = self.read_support(data.get("support")) if not (tracked_only and "support" not in data) else {}
        layout = self.read_layout(data.get("layout"))
        sources = self.read_sources(data.get("sources"))
        workarounds: list[Workaround] = []
        if tracked_only:
            entries = []
        elif not isinstance(entries, list) or not entries:
            self.problem(1, "workaround", "at least one [[workaround]] table (or [[tracked]] entries only) is required")
            entries = []
        seen: dict[str, int] = {}  # id -> index of its first entry
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                self.problem(1, f"workaround[{index}]", "must be a table")
                continue
            raw_id = entry.get("id")
            if isinstance(raw_id, str) and raw_id:
                if raw_id in seen:
                    first = self.lines.of("workaround", seen[raw_id], "id")
                    self.problem(self.lines.of("workaround", index, "id"), f"{entry_label('workaround', raw_id, index)}.id",
                                 f"duplicate id (first at line {first})")
                seen.setdefault(raw_id, index)
            workaround = self.read_workaround(index, entry)
            if workaround is not None:
                workarounds.append(workaround)
        tracked = read_tracked(self, data.get("tracked"), lambda index, key: self.lines.of("tracked", index, key))
        self.check_sourced(workarounds, sources)
        if self.problems:
            return None, self.problems
        return Manifest(self.path, support, tuple(workarounds), {w.id: w for w in workarounds}, self.policy,
                        tracked, layout=layout, sources=sources), []

    # [layout] and [sources] -------------------------------------------------------
    def read_layout(self, table: Any) -> Layout:
        """``[layout]``: workarounds, tests, docs: paths relative to the repository's root ("" docs: none)."""
        if table is None:
            return Layout()
        if not isinstance(table, dict):
            self.problem(lambda: self.lines.of(key="layout"), "layout", "must be a table ([layout])")
            return Layout()
        values: dict[str, str | None] = {}
        for key, value in table.items():
            def at(key: str = key) -> int:
                return self.lines.of("layout", 0, key)

            if key not in _LAYOUT_KEYS:
                self.problem(at, f"layout.{key}", f"unknown key (known: {', '.join(_LAYOUT_KEYS)})")
            elif key == "docs" and value == "":
                values[key] = None
            elif not isinstance(value, str) or not _RELATIVE.match(value):
                self.problem(at, f"layout.{key}", f"{value!r} is not a path relative to the repository's root "
                                                  "(no leading '/', no '..')" + (" or \"\"" if key == "docs" else ""))
            elif key == "docs" and not value.endswith(".md"):
                self.problem(at, "layout.docs", f"{value!r}: the catalogue is a Markdown file (.md)")
            else:
                values[key] = value
        defaults = Layout()
        return Layout(str(values.get("workarounds", defaults.workarounds)), str(values.get("tests", defaults.tests)),
                      values["docs"] if "docs" in values else defaults.docs, frozenset(values))

    def read_sources(self, table: Any) -> dict[str, Source]:
        """``[sources.COMPONENT]``: repository (OWNER/NAME), tag (default "v{version}"), pins (vllm only)."""
        if table is None:
            return DEFAULT_SOURCES
        sources = dict(DEFAULT_SOURCES)
        if not isinstance(table, dict):
            self.problem(lambda: self.lines.of(key="sources"), "sources", "must be a table of [sources.COMPONENT]")
            return sources
        for component, entry in table.items():
            name = f"sources.{component}"

            def at(key: str | None = None, name: str = name) -> int:
                return self.lines.of(name, 0, key)

            if component not in COMPONENTS:
                self.problem(at, name, f"unknown component (known: {', '.join(COMPONENTS)})")
                continue
            if not isinstance(entry, dict):
                self.problem(at, name, "must be a table with repository (and tag, pins)")
                continue
            before = len(self.problems)
            for key in entry:
                if key not in _SOURCE_KEYS:
                    self.problem(at(key), f"{name}.{key}",
                                 f"unknown key (known: {', '.join(_SOURCE_KEYS)})")
            repository, tag, pins = entry.get("repository"), entry.get("tag", "v{version}"), entry.get("pins")
            if not isinstance(repository, str) or not _REPOSITORY.fullmatch(repository):
                self.problem(lambda: at("repository"), f"{name}.repository",
                             f"{repository!r} is not OWNER/NAME" if "repository" in entry else "required")
            if not isinstance(tag, str) or tag.count("{version}") != 1 or not _RELATIVE.match(
                    tag.replace("{version}", "1")):
                self.problem(lambda: at("tag"), f"{name}.tag",
                             f"{tag!r} is not a tag name holding {{version}} once, such as 'v{{version}}'")
            if pins is not None and (component != "vllm" or not isinstance(pins, str) or not _RELATIVE.match(pins)):
                self.problem(lambda: at("pins"), f"{name}.pins",
                             "only vllm's source names a file of pins (a path in its tree, such as "
                             "requirements/xpu.txt)" if component != "vllm" else f"{pins!r} is not a relative path")
            if len(self.problems) == before:
                default_pins = DEFAULT_SOURCES["vllm"].pins if component == "vllm" else None
                sources[component] = Source(component, str(repository), str(tag), pins or default_pins)
        return sources

    def check_sourced(self, workarounds: list[Workaround], sources: dict[str, Source]) -> None:
        """A component a window or a release names must have a source: its releases are what retire it."""
        for index, w in enumerate(workarounds):
            for number, window in enumerate(w.affected):
                for component in window.specs:
                    if component not in sources:
                        self.problem(self.lines.of("workaround.affected", number, component, workaround=index),
                                     f"{entry_label('workaround', w.id, index)}.affected[{number}].{component}",
                                     f"no source releases {component}: add [sources.{component}] with its repository")

    # [support] ------------------------------------------------------------------
    def read_support(self, table: Any) -> dict[str, Version]:
        floors: dict[str, Version] = {}
        if not isinstance(table, dict):
            self.problem(lambda: self.lines.of(key="support"), "support", "a [support] table is required")
            return floors
        for name, value in table.items():
            def at(name: str = name) -> int:
                return self.lines.of("support", 0, name)

            if name == "policy":
                self.read_policy(value)
                continue
            if name not in COMPONENTS:
                self.problem(at, f"support.{name}", f"unknown component (known: {', '.join(COMPONENTS)})")
                continue
            try:
                if not isinstance(value, str):
                    raise InvalidVersion(repr(value))
                floors[name] = version(value)
            except InvalidVersion:
                self.problem(at, f"support.{name}", f"{value!r} is not a PEP 440 version")
        for name in ("vllm", "torch", "vllm-xpu-kernels"):
            if name not in table:
                self.problem(lambda: self.lines.of("support"), f"support.{name}",
                             "the oldest supported release is required")
        return floors

    def read_policy(self, table: Any) -> None:
        """``[support.policy]``: ``vllm-minors = N`` (1-99), ``xpu-pins = true|false``."""
        def at() -> int:
            return self.lines.of("support.policy")

        if not isinstance(table, dict):
            self.problem(at, "support.policy", "must be a table ([support.policy])")
            return
        minors, pins = table.get("vllm-minors"), table.get("xpu-pins", False)
        for key in table:
            if key not in ("vllm-minors", "xpu-pins"):
                self.problem(at, f"support.policy.{key}", "unknown key (known: vllm-minors, xpu-pins)")
        if minors is not None and (isinstance(minors, bool) or not isinstance(minors, int) or not 1 <= minors <= 99):
            self.problem(at, "support.policy.vllm-minors",
                         f"{minors!r} is not a number of vLLM minor releases (1 to 99)")
            minors = None
        if not isinstance(pins, bool):
            self.problem(at, "support.policy.xpu-pins", f"{pins!r} is not true or false")
            pins = False
        self.policy = SupportPolicy(minors, pins)

    # [[workaround]] -------------------------------------------------------------
    def read_workaround(self, index: int, entry: dict[str, Any]) -> Workaround | None:
        before = len(self.problems)
        raw_id = entry.get("id")
        label = entry_label("workaround", raw_id, index)

        def line(key: str | None = None) -> Callable[[], int]:
            return lambda: self.lines.of("workaround", index, key)

        for key in entry:
            if key not in _WORKAROUND_KEYS:
                self.problem(line(key), f"{label}.{key}", "unknown key")
        for key in _WORKAROUND_REQUIRED:
            if key not in entry:
                self.problem(line(), f"{label}.{key}", "required")
        for key in _WORKAROUND_STRINGS:
            value = entry.get(key)
            if key in entry and (not isinstance(value, str) or not value.strip()):
                self.problem(line(key), f"{label}.{key}", "must be a non-empty string")
        if isinstance(raw_id, str) and raw_id and not is_id(raw_id):
            self.problem(line("id"), f"{label}.id", "must be lower-case words joined by '-'")
        platform = entry.get("platform")
        if isinstance(platform, str) and platform not in PLATFORMS:
            self.problem(line("platform"), f"{label}.platform", f"{platform!r} is not one of {', '.join(PLATFORMS)}")
        module = entry.get("module")
        if isinstance(module, str) and module.strip() and is_id(raw_id):
            if module != module_of(raw_id):
                self.problem(line("module"), f"{label}.module",
                             f"the module is derived from the id ({module_of(raw_id)}); remove this key")
        added = entry.get("added")
        if "added" in entry and not (isinstance(added, _dt.date) and not isinstance(added, _dt.datetime)):
            self.problem(line("added"), f"{label}.added", "must be a TOML date such as 2026-07-01")

        carries = None
        if "vllm_carries_fix" in entry:
            carries = self.specifier(entry["vllm_carries_fix"], line("vllm_carries_fix"), f"{label}.vllm_carries_fix")
        targets = self.read_targets(entry.get("targets"), label, line("targets"))
        affected = self.read_windows(entry.get("affected"), label, index)
        for number, window in enumerate(affected if carries is not None else ()):
            vllm = window.specs.get("vllm", specifier_set(">=0"))
            if carries is not None and satisfiable(vllm & carries):
                self.problem(line("vllm_carries_fix"), f"{label}.vllm_carries_fix",
                             f"overlaps affected[{number}] ({window.describe()}): a vLLM cannot both need the "
                             "workaround and carry the fix")
        upstream = self.read_upstream(entry.get("upstream"), label, index)
        if len(self.problems) > before:
            return None
        return Workaround(
            id=entry["id"], title=entry["title"].strip(), platform=Platform(entry["platform"]),
            owner=entry["owner"].strip(), added=entry["added"], symptom=entry["symptom"].strip(),
            why=" ".join(entry["why"].split()), how=" ".join(entry["how"].split()),
            targets=targets, affected=affected, upstream=upstream, vllm_carries_fix=carries,
        )

    def specifier(self, value: Any, where: Where, field_name: str) -> SpecifierSet | None:
        if not isinstance(value, str) or not value.strip():
            self.problem(where, field_name, "must be a PEP 440 specifier string such as '<0.28.0'")
            return None
        try:
            spec = specifier_set(value)
        except InvalidSpecifier:
            self.problem(where, field_name, f"{value!r} is not a PEP 440 specifier")
            return None
        if not satisfiable(spec):
            self.problem(where, field_name, f"{value!r} can never match any version")
            return None
        return spec

    def read_targets(self, value: Any, label: str, line: Callable[[], int]) -> tuple[Target, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not value:
            self.problem(line, f"{label}.targets", "must be a non-empty array of tables")
            return ()
        targets = []
        for number, item in enumerate(value):
            name = f"{label}.targets[{number}]"
            if not isinstance(item, dict):
                self.problem(line, name, "must be a table with path, kind, params")
                continue
            path = item.get("path")

            def at(path: Any = path) -> int:
                start = line()
                return self.lines.find(str(path), start, start) if isinstance(path, str) else start

            for key in item:
                if key not in _TARGET_KEYS:
                    self.problem(at, f"{name}.{key}", "unknown key")
            ok = True
            if not isinstance(path, str) or not _TARGET.match(path):
                self.problem(at, f"{name}.path", "must be 'package.module:Attribute.path'")
                ok = False
            kind = item.get("kind")
            if kind not in TARGET_KINDS:
                self.problem(at, f"{name}.kind", f"{kind!r} is not one of {', '.join(TARGET_KINDS)}")
                ok = False
            params = item.get("params")
            if not isinstance(params, list) or not all(isinstance(p, str) and p for p in params):
                self.problem(at, f"{name}.params", "must be an array of parameter names (the fingerprint)")
                ok = False
            optional = item.get("optional", False)
            if not isinstance(optional, bool):
                self.problem(at, f"{name}.optional", "must be true or false")
                ok = False
            absent_in = None
            if "absent_in" in item:
                absent_in = self.specifier(item["absent_in"], at, f"{name}.absent_in")
                ok = ok and absent_in is not None
            if ok:
                targets.append(Target(item["path"], TargetKind(item["kind"]), tuple(item["params"]), optional,
                                      absent_in))
        return tuple(targets)

    def read_windows(self, value: Any, label: str, index: int) -> tuple[Window, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not value:
            self.problem(lambda: self.lines.of("workaround", index), f"{label}.affected",
                         "needs at least one [[workaround.affected]] window")
            return ()
        windows = []
        for number, table in enumerate(value):
            name = f"{label}.affected[{number}]"
            if not isinstance(table, dict) or not table:
                self.problem(self.lines.of("workaround.affected", number, workaround=index),
                             name, "must be a non-empty table of component = specifier")
                continue
            specs: dict[str, SpecifierSet] = {}
            for component, text in table.items():
                def at(component: str = component, number: int = number) -> int:
                    return self.lines.of("workaround.affected", number, component, workaround=index)

                if component not in COMPONENTS:
                    self.problem(at, f"{name}.{component}", f"unknown component (known: {', '.join(COMPONENTS)})")
                    continue
                spec = self.specifier(text, at, f"{name}.{component}")
                if spec is not None:
                    specs[component] = spec
            if len(specs) == len(table):
                windows.append(Window(specs, {name: "".join(table[name].split()) for name in specs}))
        return tuple(windows)

    def read_upstream(self, value: Any, label: str, index: int) -> tuple[UpstreamRef, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not value:
            self.problem(lambda: self.lines.of("workaround", index), f"{label}.upstream",
                         "needs at least one [[workaround.upstream]] reference")
            return ()
        refs = []
        seen: set[str] = set()
        for number, table in enumerate(value):
            name = f"{label}.upstream[{number}]"

            def at(key: str | None = None, number: int = number) -> Callable[[], int]:
                return lambda: self.lines.of("workaround.upstream", number, key, workaround=index)

            if not isinstance(table, dict):
                self.problem(at(), name, "must be a table")
                continue
            before = len(self.problems)
            for key in table:
                if key not in _UPSTREAM_KEYS:
                    self.problem(at(key), f"{name}.{key}", "unknown key")
            for key in _UPSTREAM_REQUIRED:
                if key not in table:
                    self.problem(at(), f"{name}.{key}", "required")
            ref, role, state = table.get("ref"), table.get("role"), table.get("state")
            if "ref" in table and (not isinstance(ref, str) or not _REF.fullmatch(ref)):
                self.problem(at("ref"), f"{name}.ref", f"{ref!r} is not OWNER/REPO#NUMBER")
            elif isinstance(ref, str):
                if ref in seen:
                    self.problem(at("ref"), f"{name}.ref", f"{ref} is listed twice")
                seen.add(ref)
            if "role" in table and role not in ROLES:
                self.problem(at("role"), f"{name}.role", f"{role!r} is not one of {', '.join(ROLES)}")
            if "state" in table and state not in STATES:
                self.problem(at("state"), f"{name}.state", f"{state!r} is not one of {', '.join(STATES)}")
            released = None
            if "released_in" in table:
                released = self.release(table["released_in"], at("released_in"), f"{name}.released_in")
                if released is not None and state in STATES and state not in RELEASED_STATES:
                    self.problem(at("released_in"), f"{name}.released_in",
                                 f"a reference in state {state!r} cannot be in a release")
            commit = table.get("commit")
            if "commit" in table and (not isinstance(commit, str) or not _SHA.match(commit)):
                self.problem(at("commit"), f"{name}.commit", "must be a 40-character lower-case hex sha")
            note = table.get("note")
            if "note" in table and (not isinstance(note, str) or not note.strip()):
                self.problem(at("note"), f"{name}.note", "must be a non-empty string")
            remaining = table.get("remaining")
            if "remaining" in table and (not isinstance(remaining, str) or not remaining.strip()):
                self.problem(at("remaining"), f"{name}.remaining", "must be a non-empty string")
            elif "remaining" in table and role in ROLES and role not in PARTIAL_ROLES:
                self.problem(at("remaining"), f"{name}.remaining", "only a fix (root-fix, inline-fix) can leave "
                                                                   "part of the bug")
            if role == Role.RELATED and "note" not in table:
                self.problem(at("ref"), f"{name}.note", "a related reference must say what it changes for the workaround")
            marker = self.marker(table, role, at("marker"), f"{name}.marker") if "marker" in table else None
            if len(self.problems) == before:
                refs.append(UpstreamRef(table["ref"], Role(table["role"]), State(table["state"]), released, commit, note,
                                        " ".join(remaining.split()) if isinstance(remaining, str) else None, marker))
        return tuple(refs)

    def marker(self, table: dict[str, Any], role: Any, where: Where, field_name: str) -> SourceMarker | None:
        """``marker = "code"`` (a statement or expression) or ``marker = { declares = "parameter" }``."""
        value = table["marker"]
        if role != Role.INLINE_FIX or "remaining" in table:
            self.problem(where, field_name, "only an inline-fix that cures the whole bug (no remaining) has a marker")
            return None
        if isinstance(value, dict) and list(value) == ["declares"] and isinstance(value["declares"], str) \
                and value["declares"].isidentifier():
            return SourceMarker(declares=value["declares"])
        if isinstance(value, str) and len(value) > MARKER_LIMIT:
            self.problem(where, field_name, f"longer than {MARKER_LIMIT} characters: a marker is a line of vLLM's code")
            return None
        if isinstance(value, str) and value.strip():
            try:
                ast.parse(value.strip())
            except (SyntaxError, ValueError, RecursionError, MemoryError):  # the last two: nested too deeply
                self.problem(where, field_name, f"{value!r} is not a Python statement or expression")
                return None
            return SourceMarker(contains=value.strip())
        self.problem(where, field_name, "must be code vLLM's fix adds (a string) or { declares = \"parameter\" }")
        return None

    def release(self, value: Any, where: Where, field_name: str) -> Release | None:
        found = _RELEASED_IN.match(value) if isinstance(value, str) else None
        if not found:
            self.problem(where, field_name, f"{value!r} is not COMPONENT>=VERSION (e.g. 'torch>=2.14.0')")
            return None
        if found.group("component") not in COMPONENTS:
            self.problem(where, field_name, f"unknown component {found.group('component')!r}")
            return None
        try:
            return Release(found.group("component"), version(found.group("version")))
        except InvalidVersion:
            self.problem(where, field_name, f"{found.group('version')!r} is not a PEP 440 version")
            return None
