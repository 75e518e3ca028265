"""The manifest's problems, each with its line, and its top-level tables: ``[support]`` (with
``[support.policy]``), ``[layout]`` and ``[sources]``.

``TableValidator`` collects every problem with the line it is on (the line locator is built on
the first problem only), checks the values every table shares (a PEP 440 specifier, a
``COMPONENT>=VERSION`` release) and reads the top-level tables; ``entries.ManifestValidator``
builds on it for the whole manifest. The keys are ``tracker.model.keys``'.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tracker import echoed
from tracker.model.keys import LAYOUT_KEYS, POLICY_KEYS, RELATIVE, RELEASED_IN, REPOSITORY, SOURCE_KEYS
from tracker.model.manifest import DEFAULT_SOURCES, Layout, Problem, Release, Source, SupportPolicy
from tracker.model.pin_files import pin_glob_problem
from tracker.model.specifiers import satisfiable, specifier_set, version
from tracker.model.versions import COMPONENTS, PINNED_COMPONENTS

if TYPE_CHECKING:
    from tracker.model.lines import LineLocator


# Where a problem is: a line, or how to find it (only asked when there is a problem).
Where = int | Callable[[], int]


class TableValidator:
    """The problems of one manifest (``path``, its ``text`` parsed into ``data``), and the
    checks of its top-level tables."""

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

    def specifier(self, value: Any, where: Where, field_name: str) -> SpecifierSet | None:
        if not isinstance(value, str) or not value.strip():
            self.problem(where, field_name, "must be a PEP 440 specifier string such as '<0.28.0'")
            return None
        try:
            spec = specifier_set(value)
        except InvalidSpecifier:
            self.problem(where, field_name, f"{echoed(value)} is not a PEP 440 specifier")
            return None
        if not satisfiable(spec):
            self.problem(where, field_name, f"{echoed(value)} can never match any version")
            return None
        return spec

    def release(self, value: Any, where: Where, field_name: str) -> Release | None:
        found = RELEASED_IN.fullmatch(value) if isinstance(value, str) else None
        if not found:
            self.problem(where, field_name, f"{echoed(value)} is not COMPONENT>=VERSION (e.g. 'torch>=2.14.0')")
            return None
        if found.group("component") not in COMPONENTS:
            self.problem(where, field_name, f"unknown component {echoed(found.group('component'))}")
            return None
        try:
            return Release(found.group("component"), version(found.group("version")))
        except InvalidVersion:
            self.problem(where, field_name, f"{echoed(found.group('version'))} is not a PEP 440 version")
            return None

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
                self.problem(at, f"support.{name}", f"{echoed(value)} is not a PEP 440 version")
        for name in ("vllm", *PINNED_COMPONENTS):
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
            if key not in POLICY_KEYS:
                self.problem(at, f"support.policy.{key}", f"unknown key (known: {', '.join(POLICY_KEYS)})")
        if minors is not None and (isinstance(minors, bool) or not isinstance(minors, int) or not 1 <= minors <= 99):
            self.problem(at, "support.policy.vllm-minors",
                         f"{echoed(minors)} is not a number of vLLM minor releases (1 to 99)")
            minors = None
        if not isinstance(pins, bool):
            self.problem(at, "support.policy.xpu-pins", f"{echoed(pins)} is not true or false")
            pins = False
        self.policy = SupportPolicy(minors, pins)

    # [layout] and [sources] -------------------------------------------------------
    def read_layout(self, table: Any) -> Layout:
        """``[layout]``: workarounds, tests, docs: paths relative to the repository's root ("" docs: none);
        pins: the repository's pin files, paths or globs (``tracker.model.pin_files``)."""
        if table is None:
            return Layout()
        if not isinstance(table, dict):
            self.problem(lambda: self.lines.of(key="layout"), "layout", "must be a table ([layout])")
            return Layout()
        values: dict[str, str | None] = {}
        pins = Layout().pins
        for key, value in table.items():
            def at(key: str = key) -> int:
                return self.lines.of("layout", 0, key)

            if key not in LAYOUT_KEYS:
                self.problem(at, f"layout.{key}", f"unknown key (known: {', '.join(LAYOUT_KEYS)})")
            elif key == "pins":
                pins = self.read_pin_files(value, at)
            elif key == "docs" and value == "":
                values[key] = None
            elif not isinstance(value, str) or not RELATIVE.fullmatch(value):
                self.problem(at, f"layout.{key}", f"{echoed(value)} is not a path relative to the repository's root "
                                                  "(no leading '/', no '..')" + (" or \"\"" if key == "docs" else ""))
            elif key == "docs" and not value.endswith(".md"):
                self.problem(at, "layout.docs", f"{echoed(value)}: the catalogue is a Markdown file (.md)")
            else:
                values[key] = value
        defaults = Layout()
        return Layout(str(values.get("workarounds", defaults.workarounds)), str(values.get("tests", defaults.tests)),
                      values["docs"] if "docs" in values else defaults.docs, frozenset(values), pins)

    def read_pin_files(self, value: Any, at: Where) -> tuple[str, ...]:
        """``[layout] pins``: a list of paths or globs relative to the root; the default where it is not one."""
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problem(at, "layout.pins", "must be a list of paths or globs relative to the repository's root, "
                                            "such as [\"pyproject.toml\", \"requirements/*.txt\"]")
            return Layout().pins
        found = len(self.problems)
        for item in value:
            why = pin_glob_problem(item)
            if why is not None:
                self.problem(at, "layout.pins", f"{item!r}: {why}")
        return tuple(value) if len(self.problems) == found else Layout().pins

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
                if key not in SOURCE_KEYS:
                    self.problem(at(key), f"{name}.{key}",
                                 f"unknown key (known: {', '.join(SOURCE_KEYS)})")
            repository, tag, pins = entry.get("repository"), entry.get("tag", "v{version}"), entry.get("pins")
            if not isinstance(repository, str) or not REPOSITORY.fullmatch(repository):
                self.problem(lambda: at("repository"), f"{name}.repository",
                             f"{echoed(repository)} is not OWNER/NAME" if "repository" in entry else "required")
            if not isinstance(tag, str) or tag.count("{version}") != 1 or not RELATIVE.fullmatch(
                    tag.replace("{version}", "1")):
                self.problem(lambda: at("tag"), f"{name}.tag",
                             f"{echoed(tag)} is not a tag name holding {{version}} once, such as 'v{{version}}'")
            if pins is not None and (component != "vllm" or not isinstance(pins, str) or not RELATIVE.fullmatch(pins)):
                self.problem(lambda: at("pins"), f"{name}.pins",
                             "only vllm's source names a file of pins (a path in its tree, such as "
                             "requirements/xpu.txt)" if component != "vllm" else f"{echoed(pins)} is not a relative path")
            if len(self.problems) == before:
                default_pins = DEFAULT_SOURCES["vllm"].pins if component == "vllm" else None
                sources[component] = Source(component, str(repository), str(tag), pins or default_pins)
        return sources
