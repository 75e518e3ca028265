"""An XPU-only module's siblings: its CUDA, ROCm or base counterparts, whose comment lines are
generic text, not about XPU, when they stand line for line in the XPU module too
(``tracker.census.scan`` reads a comment of an XPU-only module against them)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

# A comment of an XPU-only module whose lines are at least this share of a sibling module's comment
# lines (``xpu_communicator.py`` and ``cuda_communicator.py``) is generic text, not about XPU.
SIBLING_SHARE = 0.6
SIBLING_TAILS = 16


def comment_lines(lines: Iterable[str]) -> list[str]:
    """The comment lines among ``lines``, each without its ``#`` and with its whitespace collapsed (a
    module's, to tell generic text in its XPU sibling)."""
    found = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            said = " ".join(stripped.lstrip("#").split()).lower()
            if len(said) > 3:
                found.append(said)
    return found


def siblings(xpu_files: Iterable[str], files: Iterable[str]) -> dict[str, list[str]]:
    """The counterparts among ``files`` of each XPU-only module of ``xpu_files``: for a module whose
    name says XPU (``xpu_communicator.py``), the modules of its folder whose names end as its does
    after ``xpu`` (``cuda_communicator.py``, ``base_device_communicator.py``); for a module in an XPU
    folder (``models/deepseek_v4/xpu/model.py``), the module of that name in the sibling folders.
    One pass over ``files``, each looked up in two indexes (at most ``SIBLING_TAILS`` name endings
    per folder): time linear in the files."""
    tails: dict[PurePosixPath, dict[str, list[str]]] = {}
    folders: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    depths: set[int] = set()
    for file in xpu_files:
        path = PurePosixPath(file)
        name = path.name.lower()
        if "xpu" in name and len(name) - name.index("xpu") > 6:
            ending = tails.setdefault(path.parent, {})
            if len(ending) < SIBLING_TAILS:
                ending.setdefault(name[name.index("xpu") + 3:], []).append(file)
        for depth, part in enumerate(path.parts[:-1]):
            if "xpu" in part.lower():
                depths.add(depth)
                folders.setdefault((path.parts[:depth], path.parts[depth + 1:]), []).append(file)
    found: dict[str, list[str]] = {}
    for other in files:
        path = PurePosixPath(other)
        for tail, owners in tails.get(path.parent, {}).items():
            if path.name.lower().endswith(tail) and "xpu" not in path.name.lower():
                for owner in owners:
                    found.setdefault(owner, []).append(other)
        for depth in depths:
            if depth < len(path.parts) - 1 and "xpu" not in path.parts[depth].lower():
                for owner in folders.get((path.parts[:depth], path.parts[depth + 1:]), []):
                    found.setdefault(owner, []).append(other)
    return found
