"""From parsed TOML to the typed ``Manifest``: every table and field checked in one pass.

``ManifestValidator`` collects every problem with the line it is on and builds the named
tuples of ``tracker.model.manifest``: the top-level tables are ``tracker.model.tables``', the
``[[workaround]]`` entries (targets, affected windows, upstream references) are read here, the
``[[tracked]]`` ones by ``tracker.model.tracked``; the keys are ``tracker.model.keys``'. Reading
the file itself (size, regular file, UTF-8, TOML) is ``tracker.model.reader``'s part.
"""

from __future__ import annotations

import ast
import datetime as _dt
from collections.abc import Callable
from typing import Any

from packaging.specifiers import SpecifierSet

from tracker import echoed
from tracker.model.keys import (
    MARKER_LIMIT,
    REF,
    SHA,
    TARGET_KEYS,
    TARGET_PATH,
    TOP_KEYS,
    UPSTREAM_KEYS,
    UPSTREAM_REQUIRED,
    WORKAROUND_KEYS,
    WORKAROUND_REQUIRED,
    WORKAROUND_STRINGS,
    too_long,
)
from tracker.model.manifest import (
    Manifest,
    Problem,
    Source,
    SourceMarker,
    Target,
    UpstreamRef,
    Window,
    Workaround,
    module_of,
)
from tracker.model.specifiers import satisfiable, specifier_set
from tracker.model.tables import TableValidator, Where
from tracker.model.tracked import read_tracked
from tracker.model.versions import COMPONENTS
from tracker.model.vocabulary import (
    KEYWORD_ID,
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
    keyword_id,
)


class ManifestValidator(TableValidator):
    """Checks a whole manifest and builds it (``validate``)."""

    def validate(self) -> tuple[Manifest | None, list[Problem]]:
        """The manifest, or every problem found (then None)."""
        data = self.data
        for key in data:
            if key not in TOP_KEYS:
                self.problem(self.lines.of(key=key), key, "unknown key")
        schema = data.get("schema")
        if type(schema) is not int or schema != SCHEMA:  # true and 1.0 equal 1 in Python, not in TOML
            self.problem(lambda: self.lines.of(key="schema"), "schema", f"must be {SCHEMA}, got {echoed(schema)}")
        entries = data.get("workaround")
        # A repository that carries vLLM's code tracks its inline workarounds only: no [[workaround]], no floors.
        tracked_only = entries is None and bool(data.get("tracked"))
        support = self.read_support(data.get("support")) if not (tracked_only and "support" not in data) else {}
        layout = self.read_layout(data.get("layout"))
        sources = self.read_sources(data.get("sources"))
        workarounds: list[Workaround] = []
        if tracked_only:
            entries = []
        elif entries is None:
            entries = []  # a first manifest (`init`): its floors, no workaround yet
        elif not isinstance(entries, list):
            self.problem(lambda: self.lines.of(key="workaround"), "workaround",
                         "must be [[workaround]] tables, one per workaround")
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
        self.check_ids_across(seen, data.get("tracked"))
        self.check_sourced(workarounds, sources)
        if self.problems:
            return None, self.problems
        return Manifest(self.path, support, tuple(workarounds), {w.id: w for w in workarounds}, self.policy,
                        tracked, layout=layout, sources=sources), []

    def check_ids_across(self, workaround_ids: dict[str, int], tracked: object) -> None:
        """An id names one entry, of either kind: a ``[[tracked]]`` entry never takes a ``[[workaround]]``'s
        (``explain`` and the dashboard would show only one)."""
        for index, entry in enumerate(tracked if isinstance(tracked, list) else []):
            raw_id = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(raw_id, str) and raw_id in workaround_ids:
                first = self.lines.of("workaround", workaround_ids[raw_id], "id")
                self.problem(self.lines.of("tracked", index, "id"), f"{entry_label('tracked', raw_id, index)}.id",
                             f"the id of a [[workaround]] too (line {first}): an id names one entry")

    def check_sourced(self, workarounds: list[Workaround], sources: dict[str, Source]) -> None:
        """A component a window or a release names must have a source: its releases are what retire it."""
        for index, w in enumerate(workarounds):
            for number, window in enumerate(w.affected):
                for component in window.specs:
                    if component not in sources:
                        self.problem(self.lines.of("workaround.affected", number, component, workaround=index),
                                     f"{entry_label('workaround', w.id, index)}.affected[{number}].{component}",
                                     f"no source releases {component}: add [sources.{component}] with its repository")

    # [[workaround]] -------------------------------------------------------------
    def read_workaround(self, index: int, entry: dict[str, Any]) -> Workaround | None:
        before = len(self.problems)
        raw_id = entry.get("id")
        label = entry_label("workaround", raw_id, index)

        def line(key: str | None = None) -> Callable[[], int]:
            return lambda: self.lines.of("workaround", index, key)

        for key in entry:
            if key not in WORKAROUND_KEYS:
                self.problem(line(key), f"{label}.{key}", "unknown key")
        for key in WORKAROUND_REQUIRED:
            if key not in entry:
                self.problem(line(), f"{label}.{key}", "required")
        for key in WORKAROUND_STRINGS:
            value = entry.get(key)
            if key in entry and (not isinstance(value, str) or not value.strip()):
                self.problem(line(key), f"{label}.{key}", "must be a non-empty string")
            elif (long := too_long(key, value)) is not None:
                self.problem(line(key), f"{label}.{key}", long)
        if isinstance(raw_id, str) and raw_id and not is_id(raw_id):
            self.problem(line("id"), f"{label}.id", "must be lower-case words joined by '-'")
        elif is_id(raw_id) and keyword_id(raw_id):
            self.problem(line("id"), f"{label}.id", KEYWORD_ID)
        platform = entry.get("platform")
        if isinstance(platform, str) and platform not in PLATFORMS:
            self.problem(line("platform"), f"{label}.platform", f"{echoed(platform)} is not one of {', '.join(PLATFORMS)}")
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
                if key not in TARGET_KEYS:
                    self.problem(at, f"{name}.{key}", "unknown key")
            ok = True
            if not isinstance(path, str) or not TARGET_PATH.fullmatch(path):
                self.problem(at, f"{name}.path", "must be 'package.module:Attribute.path'")
                ok = False
            kind = item.get("kind")
            if kind not in TARGET_KINDS:
                self.problem(at, f"{name}.kind", f"{echoed(kind)} is not one of {', '.join(TARGET_KINDS)}")
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
                if key not in UPSTREAM_KEYS:
                    self.problem(at(key), f"{name}.{key}", "unknown key")
            for key in UPSTREAM_REQUIRED:
                if key not in table:
                    self.problem(at(), f"{name}.{key}", "required")
            ref, role, state = table.get("ref"), table.get("role"), table.get("state")
            if "ref" in table and (not isinstance(ref, str) or not REF.fullmatch(ref)):
                self.problem(at("ref"), f"{name}.ref", f"{echoed(ref)} is not OWNER/REPO#NUMBER")
            elif isinstance(ref, str):
                if ref in seen:
                    self.problem(at("ref"), f"{name}.ref", f"{ref} is listed twice")
                seen.add(ref)
            if "role" in table and role not in ROLES:
                self.problem(at("role"), f"{name}.role", f"{echoed(role)} is not one of {', '.join(ROLES)}")
            if "state" in table and state not in STATES:
                self.problem(at("state"), f"{name}.state", f"{echoed(state)} is not one of {', '.join(STATES)}")
            released = None
            if "released_in" in table:
                released = self.release(table["released_in"], at("released_in"), f"{name}.released_in")
                if released is not None and state in STATES and state not in RELEASED_STATES:
                    self.problem(at("released_in"), f"{name}.released_in",
                                 f"a reference in state {echoed(state)} cannot be in a release")
            commit = table.get("commit")
            if "commit" in table and (not isinstance(commit, str) or not SHA.fullmatch(commit)):
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
                self.problem(where, field_name, f"{echoed(value)} is not a Python statement or expression")
                return None
            return SourceMarker(contains=value.strip())
        self.problem(where, field_name, "must be code vLLM's fix adds (a string) or { declares = \"parameter\" }")
        return None
