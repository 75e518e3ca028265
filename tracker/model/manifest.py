"""``workarounds.toml``: loading, validation and the typed view the rest reads.

Validation and loading are one pass: ``check()`` returns every problem with the
line it is on; ``load()`` returns a ``Manifest`` or raises ``ManifestError``
carrying those problems. Nothing here imports torch, vLLM or a workaround module.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import importlib.util
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tracker.model.versions import COMPONENTS
from tracker.paths import shipped_manifest

SCHEMA = 1
PLATFORMS = ("xpu", "cuda", "rocm", "cpu")
ROLES = ("cause", "inline-fix", "root-fix")
STATES = ("open", "merged", "landed", "reverted", "closed-unmerged")
RELEASED_STATES = ("merged", "landed")
TARGET_KINDS = ("function", "method", "classmethod", "staticmethod", "contextmanager")

_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_MODULE = re.compile(r"^workarounds\.[a-z_][a-z0-9_]*$")
_REF = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#(?P<number>[1-9][0-9]*)$")
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_RELEASED_IN = re.compile(r"^(?P<component>[a-z][a-z0-9-]*)>=(?P<version>\S+)$")
_SHA = re.compile(r"^[0-9a-f]{40}$")

_TOP_KEYS = {"schema", "support", "workaround"}
_WORKAROUND_REQUIRED = (
    "id", "title", "module", "platform", "owner", "added", "symptom", "why", "how",
    "targets", "affected", "upstream",
)
_WORKAROUND_OPTIONAL = ("vllm_carries_fix",)
_TARGET_KEYS = {"path", "kind", "params", "optional"}
_UPSTREAM_REQUIRED = ("ref", "role", "state")
_UPSTREAM_OPTIONAL = ("released_in", "commit", "note", "remaining")


def default_path() -> Path:
    """The shipped manifest: inside the wheel, or at the top of a checkout."""
    return Path(shipped_manifest())


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Target:
    path: str  # "package.module:Class.attr"
    kind: str
    params: tuple[str, ...]
    optional: bool = False

    @property
    def module(self) -> str:
        return self.path.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.path.partition(":")[2]


@dataclass(frozen=True)
class Window:
    """One affected window: every named component must match (AND)."""

    specs: dict[str, SpecifierSet]
    texts: dict[str, str]  # as written, for people (SpecifierSet reorders clauses)

    def describe(self) -> str:
        return ", ".join(f"{name}{text}" for name, text in self.texts.items())


@dataclass(frozen=True)
class Release:
    """``torch>=2.14.0``: the first release of a component containing a fix."""

    component: str
    version: Version

    def __str__(self) -> str:
        return f"{self.component}>={self.version}"


@dataclass(frozen=True)
class UpstreamRef:
    ref: str
    role: str
    state: str
    released_in: Release | None = None
    commit: str | None = None
    note: str | None = None
    # A root fix that cures only part of the bug says what it leaves (e.g. "torch.xpu.Event
    # still rejects external"): code working around that part stays needed.
    remaining: str | None = None

    @property
    def repo(self) -> str:
        return self.ref.partition("#")[0]

    @property
    def number(self) -> int:
        return int(self.ref.partition("#")[2])


@dataclass(frozen=True)
class Workaround:
    id: str
    title: str
    module: str
    platform: str
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
    def components(self) -> tuple[str, ...]:
        """Components the affected windows constrain, in manifest order."""
        seen: dict[str, None] = {}
        for window in self.affected:
            seen.update(dict.fromkeys(window.specs))
        return tuple(seen)

    def refs(self, role: str) -> tuple[UpstreamRef, ...]:
        return tuple(ref for ref in self.upstream if ref.role == role)


@dataclass(frozen=True)
class Manifest:
    path: Path
    support: dict[str, Version]
    workarounds: tuple[Workaround, ...]
    by_id: dict[str, Workaround] = field(repr=False, default_factory=dict)

    def get(self, workaround_id: str) -> Workaround:
        return self.by_id[workaround_id]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(w.id for w in self.workarounds)


# ------------------------------------------------------------------------ problems


@dataclass(frozen=True)
class Problem:
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


class _Lines:
    """Finds the line a table or key is on, so every problem can point at it.

    tomllib gives values without positions; this walks the text once and records
    where each ``[table]`` / ``[[array]]`` header and each top-level ``key =`` of
    a table is. Sub-tables of a workaround are keyed by that workaround's index.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"'-]+)\s*\]")
    _KEY = re.compile(r"^([A-Za-z0-9_\"'-]+)\s*=")

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.header: dict[tuple[str, int, int], int] = {}
        self.keys: dict[tuple[str, int, int], dict[str, int]] = {}
        current: tuple[str, int, int] = ("", 0, -1)
        workaround = -1
        counters: dict[str, int] = {}
        for number, line in enumerate(self.lines, start=1):
            header = self._HEADER.match(line)
            if header:
                table = header.group(2).replace('"', "").replace("'", "")
                if table == "workaround":
                    workaround += 1
                    counters = {}
                    current = (table, workaround, -1)
                elif table.startswith("workaround."):
                    index = counters.get(table, 0)
                    counters[table] = index + 1
                    current = (table, index, workaround)
                else:
                    current = (table, 0, -1)
                self.header.setdefault(current, number)
                continue
            key = self._KEY.match(line)
            if key:
                name = key.group(1).strip("\"'")
                self.keys.setdefault(current, {}).setdefault(name, number)

    def of(self, table: str = "", index: int = 0, key: str | None = None, workaround: int = -1) -> int:
        """Line of ``key`` in the table, else of the table's header, else 1."""
        where = (table, index, workaround)
        if key is not None and key in self.keys.get(where, {}):
            return self.keys[where][key]
        return self.header.get(where, 1)

    def find(self, text: str, start: int, default: int) -> int:
        """First line at or after ``start`` containing ``text``."""
        for number in range(max(start, 1), len(self.lines) + 1):
            if text in self.lines[number - 1]:
                return number
        return default


# ------------------------------------------------------------------------- loading


def load(path: Path | str | None = None, *, check_modules: bool = True) -> Manifest:
    """The manifest at ``path`` (default: the shipped one); raises ManifestError."""
    path = Path(path) if path is not None else default_path()
    cached = _cache.get(path)
    if cached is not None and not (check_modules and not all(_module_exists(w.module) for w in cached.workarounds)):
        return cached
    manifest, problems = _read(path, check_modules)
    if problems or manifest is None:
        raise ManifestError(problems)
    _cache.put(path, manifest)
    return manifest


class _ParsedCache:
    """Valid manifests as parsed, for large manifests only, one file per manifest path and environment.

    Parsing costs about 0.7 ms per KiB (tomllib and validation; a 500-workaround
    manifest: ~0.5 s); loading the cache costs its own imports (~6 ms), so below
    ``FROM_BYTES`` it is not used (README "Benchmarks"). An entry is used only when
    the manifest's resolved path, size, mtime and CRC-32 of its bytes, and the code
    that built it (this file, packaging, Python) are all unchanged; anything else,
    or any error reading or writing it, means parse as if there were no cache.
    """

    FROM_BYTES = 64 * 1024

    def key(self, path: Path) -> tuple | None:
        try:
            stat = path.stat()
            if stat.st_size < self.FROM_BYTES:
                return None
            import zlib

            import packaging

            code = Path(__file__).stat()
            return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, zlib.crc32(path.read_bytes()),
                    code.st_size, code.st_mtime_ns, packaging.__version__, sys.version)
        except OSError:
            return None

    def file(self, key: tuple) -> Path:
        import zlib

        from tracker.paths import cache_dir

        # One file per manifest path and environment (code, packaging, Python): two venvs
        # sharing a cache dir keep one entry each instead of replacing each other's.
        where = repr((key[0], *key[4:])).encode()
        return cache_dir() / "manifest" / f"{zlib.crc32(where):08x}.pickle"

    def get(self, path: Path) -> Manifest | None:
        key = self.key(path)
        if key is None:
            return None
        import gc
        import pickle

        # Unpickling makes ~100k small objects: in a vLLM process (a heap of ~170k tracked
        # objects) that sets off full garbage collections, ~10x the load itself. They are
        # an acyclic tree, so nothing collectable is made while the collector waits.
        collecting = gc.isenabled()
        gc.disable()
        try:
            stored_key, manifest = pickle.loads(self.file(key).read_bytes())
        except Exception:  # noqa: BLE001 - absent, unreadable or stale: parse instead
            return None
        finally:
            if collecting:
                gc.enable()
        if stored_key != key or not isinstance(manifest, Manifest):
            return None
        return manifest if manifest.path == path else dataclasses.replace(manifest, path=path)

    def put(self, path: Path, manifest: Manifest) -> None:
        key = self.key(path)
        if key is None:
            return
        try:
            import pickle
            import tempfile

            target = self.file(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(handle, "wb") as stream:
                pickle.dump((key, manifest), stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, target)  # atomic: concurrent vLLM processes never see half a file
        except Exception:  # noqa: BLE001 - a read-only cache only costs speed
            return


_cache = _ParsedCache()


def check(path: Path | str | None = None, *, check_modules: bool = True) -> list[Problem]:
    """Every problem in the manifest at ``path``; empty when it is valid."""
    return _read(Path(path) if path is not None else default_path(), check_modules)[1]


def _read(path: Path, check_modules: bool) -> tuple[Manifest | None, list[Problem]]:
    try:
        raw = path.read_bytes()
    except OSError as error:
        return None, [Problem(path, 1, "file", f"cannot read: {error.strerror or error}")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, [Problem(path, text_line(raw, error.start), "file", "not UTF-8")]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _line_from_message(str(error))
        return None, [Problem(path, line, "toml", _toml_message(str(error)))]
    return _Reader(path, text, data, check_modules).read()


def text_line(raw: bytes, offset: int) -> int:
    return raw[:offset].count(b"\n") + 1


def _line_from_message(message: str) -> int:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else 1


def _toml_message(message: str) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)|\s*\(at end of document\)", "", message) or "invalid TOML"


class _Reader:
    def __init__(self, path: Path, text: str, data: dict[str, Any], check_modules: bool):
        self.path = path
        self.data = data
        self.lines = _Lines(text)
        self.check_modules = check_modules
        self.problems: list[Problem] = []

    def problem(self, line: int, field_name: str, message: str) -> None:
        self.problems.append(Problem(self.path, line, field_name, message))

    def read(self) -> tuple[Manifest | None, list[Problem]]:
        data = self.data
        for key in data:
            if key not in _TOP_KEYS:
                self.problem(self.lines.of(key=key), key, "unknown key")
        schema = data.get("schema")
        if schema != SCHEMA:
            self.problem(self.lines.of(key="schema"), "schema", f"must be {SCHEMA}, got {schema!r}")
        support = self.read_support(data.get("support"))
        entries = data.get("workaround")
        workarounds: list[Workaround] = []
        if not isinstance(entries, list) or not entries:
            self.problem(1, "workaround", "at least one [[workaround]] table is required")
            entries = []
        seen: dict[str, int] = {}
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                self.problem(1, f"workaround[{index}]", "must be a table")
                continue
            raw_id = entry.get("id")
            if isinstance(raw_id, str) and raw_id:
                line = self.lines.of("workaround", index, "id")
                if raw_id in seen:
                    self.problem(line, f"workaround[{raw_id}].id", f"duplicate id (first at line {seen[raw_id]})")
                seen.setdefault(raw_id, line)
            workaround = self.read_workaround(index, entry)
            if workaround is not None:
                workarounds.append(workaround)
        if self.problems:
            return None, self.problems
        manifest = Manifest(self.path, support, tuple(workarounds), {w.id: w for w in workarounds})
        return manifest, []

    # [support] ------------------------------------------------------------------
    def read_support(self, table: Any) -> dict[str, Version]:
        floors: dict[str, Version] = {}
        if not isinstance(table, dict):
            self.problem(self.lines.of(key="support"), "support", "a [support] table is required")
            return floors
        for name, value in table.items():
            line = self.lines.of("support", 0, name)
            if name not in COMPONENTS:
                self.problem(line, f"support.{name}", f"unknown component (known: {', '.join(COMPONENTS)})")
                continue
            try:
                floors[name] = Version(str(value)) if isinstance(value, str) else _bad_version(value)
            except InvalidVersion:
                self.problem(line, f"support.{name}", f"{value!r} is not a PEP 440 version")
        for name in ("vllm", "torch", "vllm-xpu-kernels"):
            if name not in table:
                self.problem(self.lines.of("support"), f"support.{name}", "the oldest supported release is required")
        return floors

    # [[workaround]] -------------------------------------------------------------
    def read_workaround(self, index: int, entry: dict[str, Any]) -> Workaround | None:
        before = len(self.problems)
        raw_id = entry.get("id")
        label = f"workaround[{raw_id}]" if isinstance(raw_id, str) and raw_id else f"workaround[{index}]"

        def line(key: str | None = None) -> int:
            return self.lines.of("workaround", index, key)

        for key in entry:
            if key not in _WORKAROUND_REQUIRED and key not in _WORKAROUND_OPTIONAL:
                self.problem(line(key), f"{label}.{key}", "unknown key")
        for key in _WORKAROUND_REQUIRED:
            if key not in entry:
                self.problem(line(), f"{label}.{key}", "required")
        for key in ("id", "title", "module", "platform", "owner", "symptom", "why", "how"):
            value = entry.get(key)
            if key in entry and (not isinstance(value, str) or not value.strip()):
                self.problem(line(key), f"{label}.{key}", "must be a non-empty string")
        if isinstance(raw_id, str) and raw_id and not _ID.match(raw_id):
            self.problem(line("id"), f"{label}.id", "must be lower-case words joined by '-'")
        platform = entry.get("platform")
        if isinstance(platform, str) and platform not in PLATFORMS:
            self.problem(line("platform"), f"{label}.platform", f"{platform!r} is not one of {', '.join(PLATFORMS)}")
        module = entry.get("module")
        if isinstance(module, str) and module:
            if not _MODULE.match(module):
                self.problem(line("module"), f"{label}.module", "must be workarounds.<name>")
            elif self.check_modules and not _module_exists(module):
                self.problem(line("module"), f"{label}.module", f"module {module} does not exist")
        added = entry.get("added")
        if "added" in entry and not (isinstance(added, _dt.date) and not isinstance(added, _dt.datetime)):
            self.problem(line("added"), f"{label}.added", "must be a TOML date such as 2026-07-01")

        carries = None
        if "vllm_carries_fix" in entry:
            carries = self.specifier(entry["vllm_carries_fix"], line("vllm_carries_fix"), f"{label}.vllm_carries_fix")
        targets = self.read_targets(entry.get("targets"), label, line("targets"))
        affected = self.read_windows(entry.get("affected"), label, index)
        upstream = self.read_upstream(entry.get("upstream"), label, index)
        if len(self.problems) > before:
            return None
        return Workaround(
            id=raw_id, title=entry["title"].strip(), module=module, platform=platform,
            owner=entry["owner"].strip(), added=added, symptom=entry["symptom"].strip(),
            why=" ".join(entry["why"].split()), how=" ".join(entry["how"].split()),
            targets=targets, affected=affected, upstream=upstream, vllm_carries_fix=carries,
        )

    def specifier(self, value: Any, line: int, field_name: str) -> SpecifierSet | None:
        if not isinstance(value, str) or not value.strip():
            self.problem(line, field_name, "must be a PEP 440 specifier string such as '<0.28.0'")
            return None
        try:
            spec = SpecifierSet(value)
        except InvalidSpecifier:
            self.problem(line, field_name, f"{value!r} is not a PEP 440 specifier")
            return None
        if not satisfiable(spec):
            self.problem(line, field_name, f"{value!r} can never match any version")
            return None
        return spec

    def read_targets(self, value: Any, label: str, line: int) -> tuple[Target, ...]:
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
            at = self.lines.find(str(path), line, line) if isinstance(path, str) else line
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
            if ok:
                targets.append(Target(path, kind, tuple(params), optional))
        return tuple(targets)

    def read_windows(self, value: Any, label: str, index: int) -> tuple[Window, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not value:
            self.problem(self.lines.of("workaround", index), f"{label}.affected",
                         "needs at least one [[workaround.affected]] window")
            return ()
        windows = []
        for number, table in enumerate(value):
            name = f"{label}.affected[{number}]"
            start = self.lines.of("workaround.affected", number, workaround=index)
            if not isinstance(table, dict) or not table:
                self.problem(start, name, "must be a non-empty table of component = specifier")
                continue
            specs: dict[str, SpecifierSet] = {}
            for component, text in table.items():
                at = self.lines.of("workaround.affected", number, component, workaround=index)
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
            self.problem(self.lines.of("workaround", index), f"{label}.upstream",
                         "needs at least one [[workaround.upstream]] reference")
            return ()
        refs = []
        seen: set[str] = set()
        for number, table in enumerate(value):
            name = f"{label}.upstream[{number}]"

            def at(key: str | None = None, number: int = number) -> int:
                return self.lines.of("workaround.upstream", number, key, workaround=index)

            if not isinstance(table, dict):
                self.problem(at(), name, "must be a table")
                continue
            before = len(self.problems)
            for key in table:
                if key not in _UPSTREAM_REQUIRED and key not in _UPSTREAM_OPTIONAL:
                    self.problem(at(key), f"{name}.{key}", "unknown key")
            for key in _UPSTREAM_REQUIRED:
                if key not in table:
                    self.problem(at(), f"{name}.{key}", "required")
            ref, role, state = table.get("ref"), table.get("role"), table.get("state")
            if "ref" in table and (not isinstance(ref, str) or not _REF.match(ref)):
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
            elif "remaining" in table and role in ROLES and role != "root-fix":
                self.problem(at("remaining"), f"{name}.remaining", "only a root-fix can leave part of the bug")
            if len(self.problems) == before:
                refs.append(UpstreamRef(ref, role, state, released, commit, note,
                                        " ".join(remaining.split()) if isinstance(remaining, str) else None))
        return tuple(refs)

    def release(self, value: Any, line: int, field_name: str) -> Release | None:
        found = _RELEASED_IN.match(value) if isinstance(value, str) else None
        if not found:
            self.problem(line, field_name, f"{value!r} is not COMPONENT>=VERSION (e.g. 'torch>=2.14.0')")
            return None
        if found.group("component") not in COMPONENTS:
            self.problem(line, field_name, f"unknown component {found.group('component')!r}")
            return None
        try:
            return Release(found.group("component"), Version(found.group("version")))
        except InvalidVersion:
            self.problem(line, field_name, f"{found.group('version')!r} is not a PEP 440 version")
            return None


def _bad_version(value: Any) -> Version:
    raise InvalidVersion(repr(value))


@functools.cache  # many entries share a module (the scale benchmark: 500 entries, 6 modules)
def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@functools.cache  # a pure function of the specifier, asked for the same windows again and again
def satisfiable(spec: SpecifierSet) -> bool:
    """Whether any release version can satisfy ``spec``.

    The candidates are the versions the clauses name and their immediate
    neighbours (one more in the last place, one less, one more place appended):
    if none of those satisfies every clause, no version does.
    """
    candidates: set[Version] = {Version("0")}
    for clause in spec:
        text = clause.version.rstrip(".*")
        try:
            base = Version(text)
        except InvalidVersion:
            return True  # arbitrary equality (===): nothing to reason about
        release = list(base.release)
        candidates.add(Version(".".join(map(str, release))))
        candidates.add(Version(".".join(map(str, release + [1]))))
        bumped = release[:-1] + [release[-1] + 1]
        candidates.add(Version(".".join(map(str, bumped))))
        if release[-1] > 0:
            lowered = release[:-1] + [release[-1] - 1]
            candidates.add(Version(".".join(map(str, lowered + [999999]))))
    return any(spec.contains(candidate, prereleases=True) for candidate in candidates)
