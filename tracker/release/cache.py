"""What ``check``, ``census`` and ``new`` read of each vLLM release, kept for the next time.

They live in ``releases/`` of the per-user cache directory (``tracker.paths.cache_dir``), a
private directory in a private directory (each 0700, this user's, no link, written by no one
else, in a parent no one else can swap it in: ``paths.private_dir``); a full disk under it is
``OSError`` like an unsafe directory, and the caller fetches elsewhere.

A release is kept as its *reading*, not as its sdist: pip downloads ``vllm==X``'s sdist (checking
it against the sha256 the package index gives) into a temporary directory beside the cache, and
of it the files every reader may read (``archive.release_file``: vLLM's Python source, ``PKG-INFO``,
``requirements/xpu.txt``) are written, within ``archive``'s bounds, into ``vllm-X.zip`` (0600,
deflated; 5 to 13 MB against the sdist's 29 to 49 MB); the sdist is then deleted. A zip is read
one member at a time: ``check`` of a release reads its few target modules without
decompressing the rest. Beside each reading a record (``vllm-X.zip.json``) keeps the sha256 of
the reading, and the sdist's name and sha256; a reading is used only while it is a private
regular file of this user whose bytes still have that sha256. Anything else is fetched again.
Both are moved into place atomically (the record written by ``paths.atomic_write``).

The whole support range stays: the directory is held under ``CAP_BYTES`` (1 GiB, some 80
readings: three times vLLM's 22 supported releases), and above it the readings used longest
ago go first (a use is a check, a census or ``new`` reading it; the one just stored is never
evicted), with what is kept beside them (``BESIDE``: census results, ``census_cache``; bindings,
``bindings_cache``). ``usage`` and ``clean`` are the ``cache`` command's.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracker import paths
from tracker.release import archive
from tracker.release.errors import NotFetchable

CAP_BYTES = 1 << 30  # 1 GiB: some 80 readings of 5 to 13 MB, over three times the supported range
RECORD_LIMIT = 4096  # bytes: a record is one small JSON object
STALE_DOWNLOAD_SECONDS = 24 * 3600  # a temporary download directory older than this was left by a killed run
READING_SUFFIX = ".zip"
_DOWNLOAD_PREFIX = ".download-"
BESIDE = ("census", "bindings")  # what is kept of a reading beside it, each entry named "<its sha256>-..."
_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device", as pip reports a full disk


@dataclass(frozen=True)
class Reading:
    """A release's reading in the cache: the zip, the sdist it was made from, and its sha256 (a census
    result is kept under it)."""

    path: Path
    sdist: str  # the sdist's file name: what ``check`` and ``census`` say they read
    sha256: str


def directory(create: bool = True) -> Path:
    """The private directory of cached releases (created 0700 unless ``create`` is false: then
    ``FileNotFoundError`` when absent) in the private cache directory (both as ``paths.private_dir``
    holds them); ``paths.UnsafeLocation`` or ``OSError`` when it cannot be one."""
    root = paths.private_dir(paths.cache_dir(), create=create)
    return Path(paths.private_dir(os.path.join(root, "releases"), create=create))


def reading_name(version: str) -> str:
    return f"vllm-{version}{READING_SUFFIX}"


def archive_name(version: str) -> str:
    """The sdist's name on the package index."""
    return f"vllm-{version}.tar.gz"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record(where: Path, name: str) -> Path:
    """The record (version, sha256, sdist) of the reading ``name``."""
    return where / f"{name}.json"


def recorded(where: Path, version: str) -> bool:
    """Whether the cache has a record of ``version``'s reading (not whether the reading is intact:
    ``cached`` checks that)."""
    return _record(where, reading_name(version)).exists()


def cached(where: Path, version: str) -> tuple[Reading | None, str | None]:
    """The cached reading of ``version`` if it is intact, else None; and why a cached one was not used."""
    reading = where / reading_name(version)
    record = _record(where, reading.name)
    if paths.read_private(record, RECORD_LIMIT) is None:
        return None, None  # never cached (or its record is gone: fetched again)
    found = paths.read_json(record, RECORD_LIMIT)
    fields = {key: found.get(key) for key in ("sha256", "sdist")} if isinstance(found, dict) else {}
    if not all(isinstance(value, str) for value in fields.values()) or not fields:
        return None, f"the record of the cached {reading.name} is unreadable"
    try:
        info = os.lstat(reading)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None, f"the cached {reading.name} is not a private regular file of this user"
    if sha256_of(reading) != fields["sha256"]:
        return None, f"the cached {reading.name} does not match the sha256 recorded when it was made"
    os.utime(reading)  # used now: evicted last
    return Reading(reading, os.path.basename(str(fields["sdist"])), str(fields["sha256"])), None


def make_reading(sdist: Path, into: Path) -> Path:
    """The files every reader may read of ``sdist`` (read within ``archive``'s bounds, as untrusted
    data) written into the zip ``into``; ``CheckInputError`` when the sdist is no vLLM release."""
    with zipfile.ZipFile(into, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as written:
        for relative, data in archive.members(sdist, archive.release_file):
            written.writestr(zipfile.ZipInfo(relative, date_time=(1980, 1, 1, 0, 0, 0)), data,
                             compress_type=zipfile.ZIP_DEFLATED)
    return into


def store(where: Path, version: str, download: Callable[[Path], Path]) -> Reading:
    """``download(into)`` (pip, which checks the index's sha256) into a temporary directory beside
    the cache, its reading made and moved into place and its sha256 recorded, the sdist deleted;
    then the cache held under its cap."""
    name = reading_name(version)
    with tempfile.TemporaryDirectory(prefix=_DOWNLOAD_PREFIX, dir=where) as scratch:
        try:
            fetched = download(Path(scratch))
        except NotFetchable as error:
            if _NO_SPACE in str(error):  # the cache's disk, not the index: the caller fetches elsewhere
                raise OSError(errno.ENOSPC, f"no space left on the device of {where}") from None
            raise
        sdist_sha256 = sha256_of(fetched)
        made = make_reading(fetched, Path(scratch) / name)
        os.chmod(made, 0o600)
        digest = sha256_of(made)
        _record(where, name).unlink(missing_ok=True)  # no record names the bytes being replaced
        os.replace(made, where / name)
    paths.atomic_write(_record(where, name), json.dumps({"version": version, "sha256": digest,
                                                           "sdist": fetched.name, "sdist_sha256": sdist_sha256}))
    evict(where, CAP_BYTES, keep=name)
    return Reading(where / name, fetched.name, digest)


def _record_digest(where: Path, name: str) -> str | None:
    found = paths.read_json(_record(where, name), RECORD_LIMIT)
    digest = found.get("sha256") if isinstance(found, dict) else None
    return digest if isinstance(digest, str) else None


def evict(where: Path, cap: int, keep: str | None = None) -> list[str]:
    """Remove the readings used longest ago (their records, and their census results) until those
    left take at most ``cap`` bytes; never ``keep``. Also removes temporary downloads a killed run
    left. The names removed."""
    now = time.time()
    found = []
    for entry in os.scandir(where):
        if entry.name.startswith(_DOWNLOAD_PREFIX):
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime > STALE_DOWNLOAD_SECONDS:
                    shutil.rmtree(entry.path, ignore_errors=True)
            except OSError:
                pass
        elif entry.name.endswith(READING_SUFFIX) and entry.is_file(follow_symlinks=False):
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # evicted meanwhile by another fetch (check --supported fetches two at once)
                continue
            found.append((info.st_mtime, entry.name, info.st_size))
    total = sum(size for _, _, size in found)
    removed = []
    for _, name, size in sorted(found):
        if total <= cap:
            break
        if name == keep:
            continue
        digest = _record_digest(where, name)
        (where / name).unlink(missing_ok=True)
        _record(where, name).unlink(missing_ok=True)
        if digest is not None:
            _forget_beside(where, digest)
        total -= size
        removed.append(name)
    return removed


def _forget_beside(where: Path, digest: str) -> None:
    """Remove what is kept beside the reading whose sha256 was ``digest``: every entry of ``BESIDE``
    named by it (``census_cache``, ``bindings_cache``)."""
    for name in BESIDE:
        folder = where / name
        if folder.is_dir() and not folder.is_symlink():
            for entry in os.scandir(folder):
                if entry.name.startswith(f"{digest}-"):
                    Path(entry.path).unlink(missing_ok=True)


@dataclass(frozen=True)
class Usage:
    """One cache directory: where, whether it is there, its files and their bytes."""

    name: str  # "releases", "upstream"
    path: str
    exists: bool
    files: int
    bytes: int

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "path": self.path, "exists": self.exists, "files": self.files, "bytes": self.bytes}


def usage(name: str, path: str) -> Usage:
    """How many files ``path`` holds and their bytes (no link followed); absent: 0 and 0."""
    if not os.path.lexists(path):
        return Usage(name, path, False, 0, 0)
    files = size = 0
    if os.path.isfile(path) and not os.path.islink(path):
        return Usage(name, path, True, 1, os.lstat(path).st_size)
    for folder, _, names in os.walk(path):
        for file in names:
            try:
                info = os.lstat(os.path.join(folder, file))
            except OSError:
                continue
            files, size = files + 1, size + info.st_size
    return Usage(name, path, True, files, size)


def clean(path: str) -> None:
    """Empty ``path`` (a cache directory): what is in it goes, the directory stays; a link is
    removed, never followed. Nothing when it is absent."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


__all__ = ["CAP_BYTES", "Reading", "Usage", "archive_name", "cached", "clean", "directory", "evict", "make_reading",
           "reading_name", "recorded", "store", "usage"]
