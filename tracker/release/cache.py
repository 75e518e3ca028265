"""The vLLM source distributions ``check vllm==X`` fetched, kept for the next check of the same release.

They live in ``releases/`` of the per-user cache directory (``tracker.paths.cache_dir``), a
private directory in a private directory (each 0700, this user's, no link, written by no one
else, in a parent no one else can swap it in: ``paths.private_dir``); a full disk under it is
``OSError`` like an unsafe directory, and the caller fetches elsewhere. pip
checks each download against the sha256 the package index gives; beside each sdist
(``vllm-X.tar.gz``, 0600) a record (``vllm-X.tar.gz.json``) keeps the sha256 of what pip
kept, and a cached sdist is used only while it is a private regular file of this user whose
bytes still have that sha256. Anything else is fetched again. Both are moved into place
atomically (a download is made in a temporary directory beside them, the record is written by
``paths.atomic_write``). The directory is held under ``CAP_BYTES``: after a download, the
sdists used longest ago go first (a reuse counts as a use).
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
from collections.abc import Callable
from pathlib import Path

from tracker import paths
from tracker.release.errors import NotFetchable

CAP_BYTES = 1 << 29  # 512 MiB: a dozen vLLM sdists (30 to 45 MB each)
RECORD_LIMIT = 4096  # bytes: a record is one small JSON object
STALE_DOWNLOAD_SECONDS = 24 * 3600  # a temporary download directory older than this was left by a killed run
_DOWNLOAD_PREFIX = ".download-"
_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device", as pip reports a full disk


def directory() -> Path:
    """The private directory of cached release sdists (created 0700) in the private cache directory
    (both as ``paths.private_dir`` holds them: no link, this user's, written by no one else, in a
    parent no one else can swap them in); ``paths.UnsafeLocation`` or ``OSError`` when it cannot be one."""
    return Path(paths.private_dir(os.path.join(paths.private_dir(paths.cache_dir()), "releases")))


def archive_name(version: str) -> str:
    return f"vllm-{version}.tar.gz"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached(where: Path, version: str) -> tuple[Path | None, str | None]:
    """The cached sdist of ``version`` if it is intact, else None; and why a cached one was not used."""
    archive = where / archive_name(version)
    record = where / f"{archive.name}.json"
    if paths.read_private(record, RECORD_LIMIT) is None:
        return None, None  # never cached (or its record is gone: fetched again)
    found = paths.read_json(record, RECORD_LIMIT)
    recorded = found.get("sha256") if isinstance(found, dict) else None
    if not isinstance(recorded, str):
        return None, f"the record of the cached {archive.name} is unreadable"
    try:
        info = os.lstat(archive)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return None, f"the cached {archive.name} is not a private regular file of this user"
    if sha256_of(archive) != recorded:
        return None, f"the cached {archive.name} does not match the sha256 recorded when it was downloaded"
    os.utime(archive)  # used now: evicted last
    return archive, None


def store(where: Path, version: str, download: Callable[[Path], Path]) -> Path:
    """``download(into)`` (pip, which checks the index's sha256) into a temporary directory beside
    the cache, the sdist moved into place and its sha256 recorded; then the cache held under its cap."""
    name = archive_name(version)
    with tempfile.TemporaryDirectory(prefix=_DOWNLOAD_PREFIX, dir=where) as scratch:
        try:
            fetched = download(Path(scratch))
        except NotFetchable as error:
            if _NO_SPACE in str(error):  # the cache's disk, not the index: the caller fetches elsewhere
                raise OSError(errno.ENOSPC, f"no space left on the device of {where}") from None
            raise
        os.chmod(fetched, 0o600)
        digest = sha256_of(fetched)
        (where / f"{name}.json").unlink(missing_ok=True)  # no record names the bytes being replaced
        os.replace(fetched, where / name)
    paths.atomic_write(where / f"{name}.json", json.dumps({"sha256": digest, "version": version}))
    evict(where, CAP_BYTES, keep=name)
    return where / name


def evict(where: Path, cap: int, keep: str | None = None) -> list[str]:
    """Remove the sdists used longest ago (and their records) until those left take at most ``cap``
    bytes; never ``keep``. Also removes temporary downloads a killed run left. The names removed."""
    now = time.time()
    found = []
    for entry in os.scandir(where):
        if entry.name.startswith(_DOWNLOAD_PREFIX):
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime > STALE_DOWNLOAD_SECONDS:
                    shutil.rmtree(entry.path, ignore_errors=True)
            except OSError:
                pass
        elif entry.name.endswith(".tar.gz") and entry.is_file(follow_symlinks=False):
            info = entry.stat(follow_symlinks=False)
            found.append((info.st_mtime, entry.name, info.st_size))
    total = sum(size for _, _, size in found)
    removed = []
    for _, name, size in sorted(found):
        if total <= cap:
            break
        if name == keep:
            continue
        (where / name).unlink(missing_ok=True)
        (where / f"{name}.json").unlink(missing_ok=True)
        total -= size
        removed.append(name)
    return removed
