"""The sites a file's code makes by its shape, with no comment needed, and what every site is made
of before overlapping ones merge (``Part``; ``tracker.census.scan`` merges them):

- a branch of generic code that does nothing but synchronize on XPU (``syncs``);
- a rebinding of an imported library's attribute in XPU-only code, with the function it installs
  and the comment right above it (``patches``);
- a test in ``forward_xpu`` returning to the native path where ``forward_cuda`` keeps its kernel
  (``native_fallbacks``: ``tracker.census.native``);
- an XPU module's override of a method its base documents as a platform's fallback
  (``overrides_of``: ``tracker.census.overrides``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tracker.census import native, notes, overrides, wording, xpu_code
from tracker.census.kinds import Kind
from tracker.census.notes import Note, Said


class Part(NamedTuple):
    """What one note or one patch makes, before overlapping parts are merged into sites."""

    start: int
    end: int
    summary: str
    references: tuple[str, ...]
    said: str
    worded: bool  # made by words (its summary wins a merge), not by a shape alone
    docstring: int = 0  # made by a paragraph of the docstring that begins on this line
    score: int = 2  # how much says it is a workaround (``Confidence.of``)
    kind: Kind | None = None  # what made it says its kind (a patch, a sync, a logged fallback), else read from its code


def syncs(code: xpu_code.Code, lines: list[str]) -> list[Part]:
    """A platform check's branch of generic code that does nothing but synchronize a stream or the
    device: an extra sync on XPU, a site by its shape (an XPU module synchronizing, or a branch
    that does more, is XPU's own way of doing something)."""
    if code.whole_file:
        return []
    parts = []
    for statement in code.statements:
        if statement.effect != "sync" or not code.holds(statement.first):
            continue
        branch = code.platform_branch(statement.first, statement.last)
        if branch is None or any(other.effect != "sync" for other in code.described(branch.body, branch.end)):
            continue  # a sync that is part of XPU's own way of doing something, not an extra one
        start, end = branch.check, branch.end
        summary = "(no comment) " + " ".join(lines[statement.first - 1].split())
        parts.append(Part(start, end, summary, (), "", False, 0, 2, Kind.SYNC))
    return parts


def patches(code: xpu_code.Code, said: list[Said], lines: list[str]) -> list[Part]:
    """XPU-only code that rebinds an imported module's attribute: a site by its shape, one per
    function (or per run of module-level statements), with the comment right above it."""
    groups: dict[int, list[xpu_code.Patch]] = {}  # by function's first line; a module-level run: negative
    run, previous = 0, None
    for patch in sorted(code.patches):
        if not code.holds(patch.first):
            continue
        if not patch.group:  # module level: a run of rebindings with no other statement between them
            if previous is None or code.described(previous.last + 1, patch.first - 1):
                run -= 1
            previous = patch
        groups.setdefault(patch.group or run, []).append(patch)
    comments = {note.last: note for note in said if note.kind == Note.COMMENT}
    defined = overrides.definitions(code, lines, top_level=True) if groups else {}
    parts = []
    for patches in groups.values():
        start, end = min(p.first for p in patches), max(p.last for p in patches)
        for patch in patches:  # ``torch.accelerator.get_memory_info = wrapper``: the wrapper is the substitute
            value = re.search(r"=\s*([A-Za-z_]\w*)\s*$", lines[patch.last - 1])
            if value is not None and value.group(1) in defined:
                start = min(start, defined[value.group(1)])
        above = comments.get(start - 1)
        targets = sorted({p.target for p in patches})
        rebinds = f"rebinds {targets[0]}" + (f" and {len(targets) - 1} more" if len(targets) > 1 else "")
        if above is not None:
            parts.append(Part(above.first, end, notes.summary(above.text),
                               tuple(wording.references(above.text)), above.text, False, 0, 3, Kind.MONKEY_PATCH))
        else:
            parts.append(Part(start, end, f"(no comment) {rebinds}", (), rebinds, False, 0, 2,
                               Kind.MONKEY_PATCH))
    return parts


def native_fallbacks(found: native.Native, code: xpu_code.Code, lines: list[str]) -> list[Part]:
    """A test returning to the native path where CUDA keeps its kernel; an XPU kernel's result cast
    back as it is returned, in XPU-only code (``tracker.census.native``)."""
    return [Part(start, end, "(no comment) " + " ".join(lines[start - 1].split()) + " -> forward_native, where "
                 "forward_cuda keeps its kernel", (), "", False, 0, 2, Kind.FALLBACK) for start, end in found.fallbacks] + [
        Part(start, end, "(no comment) " + " ".join(lines[start - 1].split()) + ": the XPU kernel's result cast back",
             (), "", False, 0, 2, Kind.SUBSTITUTE) for start, end in found.casts if code.holds(start)]


def overrides_of(code: xpu_code.Code, lines: list[str], documented: frozenset[str]) -> list[Part]:
    return [Part(start, end, f"(no comment) overrides {name}, the fallback its base documents for platforms "
                 "without it", (), "", False, 0, 2, Kind.FALLBACK)
            for start, end, name in overrides.overridden(code, lines, documented)]
