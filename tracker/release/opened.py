"""A vLLM release opened once: its source tree, its version and its XPU pins, for every reader.

``open_release(what)`` gets the release as ``fetch.release_source`` gets it (``vllm==X`` from the
per-user cache, its sha256 verified, else fetched with pip; a wheel or sdist on disk; a source
tree) and yields it, for the length of the block, as an ``OpenedRelease``: ``check``, ``census``,
the upgrade check and the look-ahead read their files from its tree one at a time, so a release
is hashed and decompressed once however many of them read it.

What is written to disk: of a wheel or sdist, only the regular files a reader reads, within the
bounds ``archive.unpack`` keeps: ``PKG-INFO``, ``vllm/_version.py``, ``requirements/xpu.txt``,
the files the caller names (``compare.needed_files``: the targets' modules, the ``[[tracked]]``
entries' files), and of vLLM's other Python files under ``vllm/`` those that can hold a census
site (``census.files.may_hold_sites``: they say ``xpu``, or are XPU-only modules; the census
finds nothing in the others) or that it says it skips (over ``SOURCE_LIMIT``). Of vLLM 0.34.0's
3,400 Python files, 183 files (5 MiB) go into a private temporary directory (0700, in the
system's temporary directory or ``workdir``) removed when the block ends. A source tree is read
where it is, never copied.

One rule for every reader, since they read one tree: an archive holding a file it is read for
twice is refused (``archive.members``); in a source tree, a link on the way to a file it is read
for that leads out of the tree is refused, never followed (the census follows no link at all:
``census.files``); a declared version whose number has more digits than Python converts is
refused. An archive the package index gave that breaks a rule is the index's wrong answer
(``NotFetchable``, exit 4); anything named on the command line is bad input (``CheckInputError``,
exit 2).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tracker.census.files import SOURCE_LIMIT, may_hold_sites
from tracker.engine.source import forget_parsed
from tracker.model.pins import XPU_REQUIREMENTS, xpu_pins
from tracker.model.versions import PINNED_COMPONENTS
from tracker.release import archive
from tracker.release.archive import DECLARING, VERSION_FILE, release_file
from tracker.release.errors import CheckInputError
from tracker.release.fetch import Found, Say, index_answered, release_source, silent


@dataclass(frozen=True)
class OpenedRelease:
    """A release's source tree and what it declares, read once when it was opened."""

    root: Path  # the tree: where it is on disk, or the private temporary one an archive was unpacked into
    label: str  # what it is called: a tree's path, an archive's file name
    declared: str | None  # the version it declares (PKG-INFO, else vllm/_version.py), as written
    version: Version | None  # that version, when PEP 440 reads it (else: of unknown version)
    pins: dict[str, Version]  # its XPU pins (requirements/xpu.txt), of PINNED_COMPONENTS only
    digest: str | None = None  # the sha256 of its reading in the release cache (``vllm==X``), else None
    archive: Path | None = None  # the wheel, sdist or reading it was opened from; None: a tree read where it is
    asked: str | None = None  # the version asked of the index (``vllm==X``): its archive is the index's answer


def opened_tree(root: Path, label: str | None = None, *, also: Collection[str] = (),
                named: Path | None = None) -> OpenedRelease:
    """The source tree at ``root`` as a release (``label``: what to call it, by default its path).

    ``CheckInputError`` naming ``named`` (by default ``root``) when it has no ``vllm/`` package,
    when a link on the way to ``vllm/``, ``requirements/``, a declaring file or one of ``also``
    leads out of it, when a declaring file is larger than ``archive.FILE_LIMIT``, or when its
    version has more digits than Python converts."""
    shown = named or root
    base = Path(os.path.realpath(root))
    for relative in sorted({"vllm", "requirements", *DECLARING, *also}):
        leads = Path(os.path.realpath(root / relative))
        if leads != base and base not in leads.parents:
            raise CheckInputError(f"{shown}: {relative} is a link out of the tree (to {leads}): not followed")
    if not (root / "vllm").is_dir():
        raise CheckInputError(f"{shown}: no vllm/ package in it")
    info, written, requirements = (_text(root, relative, shown) for relative in ("PKG-INFO", VERSION_FILE,
                                                                                  XPU_REQUIREMENTS))
    declared = archive.declared_version(info, written)
    try:
        version = Version(declared) if declared else None
    except InvalidVersion:
        version = None  # not PEP 440 (a source build's own string): of unknown version, as the versions policy says
    except ValueError:  # a number of more digits than Python converts: only a forged PKG-INFO writes one
        raise CheckInputError(f"{shown}: its version, {len(declared or '')} characters, has a number of more "
                              "digits than Python converts: not a vLLM release") from None
    found = xpu_pins(requirements or "")
    pins = {name: found[name] for name in PINNED_COMPONENTS if name in found}
    return OpenedRelease(root, label or str(root), declared, version, pins)


def _text(root: Path, relative: str, shown: Path) -> str | None:
    """A declaring file's text (what does not decode replaced); None when it is not a regular file."""
    path = root / relative
    if not path.is_file():  # absent, a folder, a FIFO or a device: nothing to read (and no wait)
        return None
    try:
        with path.open("rb") as handle:
            data = handle.read(archive.FILE_LIMIT + 1)
    except OSError as error:
        raise CheckInputError(f"{shown}: {relative} cannot be read ({error.strerror or error})") from None
    if len(data) > archive.FILE_LIMIT:
        raise CheckInputError(f"{shown}: {relative} is larger than {archive.FILE_LIMIT >> 20} MiB: "
                              "not a vLLM release file")
    return data.decode("utf-8", errors="replace")


@contextlib.contextmanager
def open_release(what: str, *, also: Collection[str] = (), reader: str = "the check", workdir: Path | None = None,
                 sites: bool = True, progress: Say = silent, warn: Say = silent) -> Iterator[OpenedRelease]:
    """``what`` (``vllm==X``, or the path of a wheel, an sdist or a source tree) opened once, for the
    length of the block (the module docstring): of an archive, the files ``release_file`` names and
    ``also`` (paths relative to the tree) unpacked into a private temporary directory removed after
    the block; a source tree where it is. ``CheckInputError`` when ``what`` is none of these or breaks
    a rule; ``NotFetchable`` when the index does not give the release, or gives something that is no
    release. ``reader`` names who reads the files in the progress line; ``sites``: false when no
    census reads it (only ``also`` and the declaring files are unpacked). What else a reader reads
    of an archive it reads from the archive itself (``OpenedRelease.archive``: ``bindings_cache``)."""
    with release_source(what, workdir=workdir, progress=progress, warn=warn) as found:
        with opened_found(found, also=also, reader=reader, workdir=workdir, sites=sites, progress=progress,
                          warn=warn) as opened:
            try:
                yield opened
            finally:
                forget_parsed()  # its files are read no more


@contextlib.contextmanager
def opened_found(found: Found, *, also: Collection[str] = (), reader: str = "the check", workdir: Path | None = None,
                 sites: bool = True, progress: Say = silent, warn: Say = silent) -> Iterator[OpenedRelease]:
    """What ``fetch.release_source`` found, opened as ``open_release`` opens it (``warn`` is told of a
    member no file system takes, which is not read)."""
    wanted = set(also)
    if found.path.is_dir():
        yield opened_tree(found.path, also=wanted)
        return
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-release-", dir=workdir) as scratch:
        progress(f"unpacking the files {reader} reads from {found.label}")
        root, package = Path(scratch) / "tree", False

        def kept(relative: str, data: bytes) -> bool:
            """What a reader reads: the files named, and of the others those the census can find a
            site in or says it skips (over ``SOURCE_LIMIT``, as in a tree)."""
            return (relative in wanted or relative in DECLARING
                    or (sites and (len(data) > SOURCE_LIMIT or may_hold_sites(relative, data))))

        def read(relative: str) -> bool:
            nonlocal package
            package = package or (relative.startswith("vllm/") and release_file(relative))
            return relative in wanted or relative in DECLARING or (sites and release_file(relative))

        with index_answered(found.asked):
            archive.unpack(found.path, root, read, kept=kept, skipped=warn)
            if package:  # vLLM's package, though none of its files is kept (or read)
                (root / "vllm").mkdir(exist_ok=True)
            opened = opened_tree(root, found.label, also=wanted, named=found.path)
        yield dataclasses.replace(opened, digest=found.digest, archive=found.path, asked=found.asked)


__all__ = ["DECLARING", "VERSION_FILE", "OpenedRelease", "open_release", "opened_found", "opened_tree", "release_file"]
