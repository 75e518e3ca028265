"""A vLLM release's census (``tracker.census``): read from the release opened as ``check`` opens it.

``vllm==X`` comes from the per-user release cache or the package index, a wheel or sdist from
disk, a source tree from where it is (``opened.open_release``): the census reads vLLM's Python
files from the opened tree one at a time (``census.files.source_files``), with the version and the
XPU pins the release declares.
"""

from __future__ import annotations

from pathlib import Path

from tracker.census.count import Census, compare, take
from tracker.census.files import source_files
from tracker.model.manifest import Manifest
from tracker.release.compare import needed_files
from tracker.release.errors import CheckInputError
from tracker.release.fetch import Say, silent
from tracker.release.opened import OpenedRelease, open_release, opened_tree


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
    same kinds, an earlier release) the sites new in it and gone since that one.
    ``CheckInputError`` (bad input: ``since`` a later release than ``what`` too), ``NotFetchable``
    (the index)."""
    needed = needed_files(manifest)
    with open_release(what, also=needed, reader="the census", workdir=workdir, progress=progress,
                      warn=warn) as release:
        if since is None:
            return census_opened(manifest, release, progress=progress, warn=warn)
        with open_release(since, also=needed, reader="the census", workdir=workdir, progress=progress,
                          warn=warn) as earlier:
            if release.version is not None and earlier.version is not None and earlier.version > release.version:
                raise CheckInputError(f"--since {since} is vLLM {earlier.version}, later than vLLM {release.version} "
                                      f"({what}): --since names the earlier release")
            return compare(census_opened(manifest, release, progress=progress, warn=warn),
                           census_opened(manifest, earlier, progress=progress, warn=warn))


__all__ = ["census", "census_opened", "census_tree"]
