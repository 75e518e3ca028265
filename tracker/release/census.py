"""A vLLM release's census (``tracker.census``): read from the release opened as ``check`` opens it.

``vllm==X`` comes from the per-user release cache or the package index, a wheel or sdist from
disk, a source tree from where it is (``opened.open_release``): the census reads vLLM's Python
files from the opened tree one at a time (``census.files.source_files``), with the version and the
XPU pins the release declares.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tracker.census.count import Census, compare, take
from tracker.census.files import source_files
from tracker.model.manifest import Manifest
from tracker.release import cache
from tracker.release.census_cache import cached_census
from tracker.release.compare import needed_files
from tracker.release.errors import CheckInputError
from tracker.release.fetch import Say, release_source, silent
from tracker.release.opened import OpenedRelease, opened_found, opened_tree


def census_opened(manifest: Manifest, release: OpenedRelease, *, progress: Say = silent, warn: Say = silent) -> Census:
    """The census of an opened release (``opened.open_release``); ``warn`` is told of each file too
    large to be source, which is not read."""
    progress(f"reading {release.label}")
    return take(manifest, source_files(release.root, skipped=warn), release=release.declared, source=release.label,
                pins=release.pins)


def census_tree(manifest: Manifest, root: Path, *, label: str | None = None, warn: Say = silent) -> Census:
    """The census of the vLLM source tree at ``root`` (with ``requirements/xpu.txt`` for the pins),
    read where it is (``opened.opened_tree``)."""
    return census_opened(manifest, opened_tree(root, label, also=needed_files(manifest)), warn=warn)


def census(manifest: Manifest, what: str, *, since: str | None = None, workdir: Path | None = None,
           progress: Say = silent, warn: Say = silent) -> Census:
    """``what``'s census (``vllm==X``, or a wheel, sdist or source tree), and with ``since`` (the
    same kinds, an earlier release) the sites new in it and gone since that one. A release from the
    release cache has its census kept there too (``census_cache``): the second census of it reads
    no source. ``CheckInputError`` (bad input: ``since`` a later release than ``what`` too),
    ``NotFetchable`` (the index)."""
    taken = census_of(manifest, what, workdir=workdir, progress=progress, warn=warn)
    if since is None:
        return taken
    earlier = census_of(manifest, since, workdir=workdir, progress=progress, warn=warn)
    version, earlier_version = _version(taken.release), _version(earlier.release)
    if version is not None and earlier_version is not None and earlier_version > version:
        raise CheckInputError(f"--since {since} is vLLM {earlier_version}, later than vLLM {version} "
                              f"({what}): --since names the earlier release")
    return compare(taken, earlier)


def census_of(manifest: Manifest, what: str, *, workdir: Path | None = None, progress: Say = silent,
              warn: Say = silent) -> Census:
    """One release's census: kept in the release cache beside its reading (``vllm==X``), else read."""
    needed = needed_files(manifest)
    with release_source(what, workdir=workdir, progress=progress, warn=warn) as found:
        def compute() -> Census:
            with opened_found(found, also=needed, reader="the census", workdir=workdir, progress=progress) as release:
                return census_opened(manifest, release, progress=progress, warn=warn)

        where = None
        if found.digest is not None:
            progress(f"looking for the census of {found.label} in the release cache")
            with contextlib.suppress(OSError):
                where = cache.directory()
        return cached_census(manifest, where, found.digest, compute)


def _version(declared: str | None) -> Version | None:
    try:
        return Version(declared) if declared else None
    except (InvalidVersion, ValueError):
        return None


__all__ = ["census", "census_of", "census_opened", "census_tree"]
