"""A vLLM release's census (``tracker.census``): its source got as ``check`` gets it, read as text.

``vllm==X`` comes from the per-user release cache or the package index (``fetch.source_tree``),
a wheel or sdist from disk, a source tree from where it is. An archive is read in memory, within
the bounds ``archive.members`` keeps: vLLM's Python files and the files that say the release and
its XPU pins.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from tracker.census.count import Census, compare, take
from tracker.census.files import SOURCE_LIMIT, decoded, may_hold_sites, source_files, too_large
from tracker.model.manifest import Manifest
from tracker.model.pins import XPU_REQUIREMENTS, xpu_pins
from tracker.release.archive import declared_version, members, release_version
from tracker.release.errors import CheckInputError
from tracker.release.fetch import Say, index_answered, release_source, silent

_DECLARING = frozenset({"PKG-INFO", "vllm/_version.py", XPU_REQUIREMENTS})


def wanted(relative: str) -> bool:
    """The files of a release the census reads: vLLM's Python source, its version and its XPU pins."""
    return relative in _DECLARING or (relative.startswith("vllm/") and relative.endswith(".py"))


def census_tree(manifest: Manifest, root: Path, *, label: str | None = None, warn: Say = silent) -> Census:
    """The census of the vLLM source tree at ``root`` (with ``requirements/xpu.txt`` for the pins);
    ``warn`` is told of each file too large to be source, which is not read."""
    if not (root / "vllm").is_dir():
        raise CheckInputError(f"{root}: no vllm/ package in it")
    requirements = root / XPU_REQUIREMENTS
    pins = _pins(requirements.read_text(encoding="utf-8", errors="replace") if requirements.is_file() else "")
    return take(manifest, source_files(root, skipped=warn), release=release_version(root), source=label or str(root),
                pins=pins)


def census_archive(manifest: Manifest, archive: Path, *, warn: Say = silent) -> Census:
    """The census of a wheel or sdist, read in memory one member at a time (nothing of it written
    to disk): a file that cannot hold a site (``may_hold_sites``) is passed on by name only, with
    no text; one larger than a tree's files may be (``SOURCE_LIMIT``) is not read, and ``warn`` is
    told so."""
    files: list[tuple[str, str]] = []
    declared: dict[str, str] = {}
    for relative, data in members(archive, wanted, limit=SOURCE_LIMIT,
                                  oversize=lambda relative, size: warn(too_large(relative, size))):
        if relative in _DECLARING:
            declared[relative] = data.decode("utf-8", errors="replace")
        if relative.endswith(".py") and relative.startswith("vllm/"):
            files.append((relative, decoded(data) if may_hold_sites(relative, data) else ""))
    if not files:
        raise CheckInputError(f"{archive}: no vllm/ package in it")
    version = declared_version(declared.get("PKG-INFO"), declared.get("vllm/_version.py"))
    return take(manifest, sorted(files), release=version, source=archive.name,
                pins=_pins(declared.get(XPU_REQUIREMENTS, "")))


def _pins(requirements: str) -> dict[str, Version]:
    found = xpu_pins(requirements)
    return {name: found[name] for name in ("torch", "vllm-xpu-kernels") if name in found}


def census(manifest: Manifest, what: str, *, since: str | None = None, workdir: Path | None = None,
           progress: Say = silent, warn: Say = silent) -> Census:
    """``what``'s census (``vllm==X``, or a wheel, sdist or source tree), and with ``since`` (the
    same kinds) the sites new in it and gone since that one. ``CheckInputError`` (bad input),
    ``NotFetchable`` (the index)."""
    taken = _one(manifest, what, workdir, progress, warn)
    if since is None:
        return taken
    return compare(taken, _one(manifest, since, workdir, progress, warn))


def _one(manifest: Manifest, what: str, workdir: Path | None, progress: Say, warn: Say) -> Census:
    with release_source(what, workdir=workdir, progress=progress, warn=warn) as (found, asked):
        progress(f"reading {found.name or found}")
        if found.is_dir():
            return census_tree(manifest, found, warn=warn)
        with index_answered(asked):
            return census_archive(manifest, found, warn=warn)
