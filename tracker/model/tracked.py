"""vLLM's own inline XPU workarounds, tracked and never patched: ``[[tracked]]`` in the manifest.

vLLM carries XPU workarounds of its own that wait on an upstream fix (census:
../shared/reference/vllm-xpu-inline-census.md). Each entry says where one lives (a file of
vLLM's source and a marker string that recognises it), which vLLM releases carry it, the
reference it waits on, and which pinned release makes it dead code (``dead_when``). Nothing
here is applied at run time: ``upstream`` says whether each is dead at vLLM's current XPU
pins, the release matrix and ``check`` find each marker where the manifest says, ``docs``
lists them. They have no module, so the retirement bot never touches them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tracker.model.keys import REF, TRACKED_FILE, TRACKED_KEYS, TRACKED_REQUIRED, too_long
from tracker.model.manifest import InlineWorkaround, Release
from tracker.model.vocabulary import KEYWORD_ID, entry_label, is_id, keyword_id


class _Reader(Protocol):
    """What the manifest's validator (``tables.TableValidator``) offers an entry reader: problems with lines, specifiers, releases."""

    def problem(self, where: Any, field_name: str, message: str) -> None: ...

    def specifier(self, value: Any, where: Any, field_name: str) -> SpecifierSet | None: ...

    def release(self, value: Any, where: Any, field_name: str) -> Release | None: ...


def read_tracked(reader: _Reader, entries: Any, line: Callable[[int, str | None], int]) -> tuple[InlineWorkaround, ...]:
    """The ``[[tracked]]`` entries; every problem is reported through ``reader``.

    ``line(index, key)`` is the line of ``key`` in the ``index``-th entry (or of its header).
    """
    if entries is None:
        return ()
    if not isinstance(entries, list):
        reader.problem(line(0, None), "tracked", "must be an array of [[tracked]] tables")
        return ()
    tracked: list[InlineWorkaround] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        at = functools.partial(_line_of, line, index)
        if not isinstance(entry, dict):
            reader.problem(at(), f"tracked[{index}]", "must be a table")
            continue
        label = entry_label("tracked", entry.get("id"), index)
        problems = _check(reader, entry, label, at, seen)
        # Lines are found only for a problem: the locator reads the whole text.
        carried = reader.specifier(entry.get("carried_in"), functools.partial(at, "carried_in"),
                                   f"{label}.carried_in") if "carried_in" in entry else None
        dead = reader.release(entry["dead_when"], functools.partial(at, "dead_when"), f"{label}.dead_when") \
            if "dead_when" in entry else None
        if problems or carried is None or ("dead_when" in entry and dead is None):
            continue
        text = {key: " ".join(str(entry[key]).split()) for key in ("remaining", "note") if key in entry}
        tracked.append(InlineWorkaround(entry["id"], entry["title"].strip(), entry["file"], entry["marker"], carried,
                                        entry.get("waits_on"), entry.get("link"), dead, text.get("remaining"),
                                        text.get("note")))
    return tuple(tracked)


def _line_of(line: Callable[[int, str | None], int], index: int, key: str | None = None) -> int:
    return line(index, key)


def _check(reader: _Reader, entry: dict[str, Any], label: str, at: Callable[..., int], seen: set[str]) -> bool:
    """Report what is wrong with one entry's plain fields; True when something is."""
    found: list[tuple[Any, str, str]] = []
    found += [(at(key), f"{label}.{key}", "unknown key") for key in entry if key not in TRACKED_KEYS]
    found += [(at(), f"{label}.{key}", "required") for key in TRACKED_REQUIRED if key not in entry]
    for key in ("id", "title", "file", "marker", "waits_on", "link", "remaining", "note"):
        if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
            found.append((at(key), f"{label}.{key}", "must be a non-empty string"))
        elif (long := too_long(key, entry.get(key))) is not None:
            found.append((at(key), f"{label}.{key}", long))
    checks = (("id", is_id, "must be lower-case words joined by '-'"),
              ("file", TRACKED_FILE.fullmatch, "must be a .py path in vLLM's source tree, such as vllm/platforms/xpu.py"),
              ("waits_on", REF.fullmatch, "is not OWNER/REPO#NUMBER"))
    for key, well_formed, message in checks:
        value = entry.get(key)
        if isinstance(value, str) and value.strip() and not well_formed(value):
            found.append((at(key), f"{label}.{key}", message))
    if is_id(entry.get("id")) and keyword_id(entry["id"]):
        found.append((at("id"), f"{label}.id", KEYWORD_ID))
    link = entry.get("link")
    if isinstance(link, str) and link.strip() and not link.startswith("https://"):
        found.append((at("link"), f"{label}.link", "must be an https:// address"))
    if "remaining" in entry and "dead_when" not in entry:
        found.append((at("remaining"), f"{label}.remaining", "only an entry with dead_when can leave a part alive"))
    identifier = entry.get("id")
    if isinstance(identifier, str):
        if identifier in seen:
            found.append((at("id"), f"{label}.id", "duplicate id"))
        seen.add(identifier)
    for where, field_name, message in found:
        reader.problem(where, field_name, message)
    return bool(found)


class DeadAt(NamedTuple):
    """Whether a ``[[tracked]]`` entry is dead code at a release's XPU pins (``dead_at``)."""

    dead: bool | None  # True; False (alive, or only partly dead); None: cannot be told
    partly: bool  # the pins reach its ``dead_when``, but its ``remaining`` part is still needed
    detail: str  # the sentence why, as the census prints it


def dead_at(inline: InlineWorkaround, pins: Mapping[str, Version], release: str) -> DeadAt:
    """Whether ``inline`` is dead code at vLLM ``release``'s own XPU ``pins``, from the manifest's
    ``dead_when`` alone (offline): dead, partly dead (``remaining``), alive, or None when it
    cannot be told (no ``dead_when``, or the pins name no such component); and the sentence why."""
    dead = inline.dead_when
    if dead is None:
        return DeadAt(None, False, f"waits on {inline.reference}; no release is recorded to make it dead")
    pin = pins.get(dead.component)
    if pin is None:
        return DeadAt(None, False, f"dead from {dead}, but vLLM {release} pins no {dead.component} for XPU")
    if pin < dead.version:
        return DeadAt(False, False, f"alive: vLLM {release} pins {dead.component} {pin} for XPU; dead from {dead}")
    if inline.remaining:
        return DeadAt(False, True, f"partly dead: vLLM {release} pins {dead.component} {pin} for XPU ({dead}), "
                                   f"but {inline.remaining}")
    return DeadAt(True, False,
                  f"vLLM {release} carries code dead since its XPU pins reached {dead.component} {dead.version}")
