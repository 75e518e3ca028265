"""Where things are: the shipped manifest, the per-user cache directory, safe file I/O, and when
a process started (``/proc``).

Stdlib only (``platformdirs`` is imported only off Linux, or when neither
``XDG_CACHE_HOME`` nor ``HOME`` is usable): the plugin's fast path imports this
module in every vLLM process.

Caches and reports live in per-user directories: created 0700, trusted only while
owned by this user and writable by no one else; files are written 0600 under a
random temporary name and renamed into place (``atomic_write``), and read back as
untrusted data (``read_private``: regular files of this user only, under a size cap).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import tracker

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
APP_NAME = "xpu-workarounds"


class UnsafeLocation(OSError):
    """A cache or report location someone else could write: not used."""


def shipped_manifest() -> str:
    """The shipped manifest: inside the wheel (``tracker/workarounds.toml``), or at the top of a checkout."""
    packaged = os.path.join(PACKAGE_DIR, "workarounds.toml")
    return packaged if os.path.isfile(packaged) else os.path.join(os.path.dirname(PACKAGE_DIR), "workarounds.toml")


def cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """The one cache-directory rule: ``XPU_WORKAROUNDS_CACHE_DIR``, else the user cache dir.

    A string, not a ``Path``: the fast path builds no ``pathlib`` objects.
    """
    env = os.environ if environ is None else environ
    configured = env.get(tracker.CACHE_DIR, "").strip()
    if configured:
        return tracker.user_path(configured)
    if sys.platform.startswith("linux"):
        # platformdirs' XDG rule, without its ~18 ms of imports in every vLLM process
        # (tests/test_paths.py checks that both agree).
        xdg = env.get("XDG_CACHE_HOME", "")
        if os.path.isabs(xdg):
            return os.path.join(xdg, APP_NAME)
        home = env.get("HOME", "")
        if os.path.isabs(home):
            return os.path.join(home, ".cache", APP_NAME)
    import platformdirs

    return platformdirs.user_cache_dir(APP_NAME)


def path_directories() -> list[str]:
    """``sys.path`` as absolute directories: ``''`` (and any relative entry) is the working
    directory's (kept as written when the working directory was removed)."""
    entries = []
    for entry in sys.path:
        try:
            entries.append(os.path.abspath(entry or os.curdir))
        except OSError:
            entries.append(entry)
    return entries


def private_dir(path: str | os.PathLike[str], create: bool = True) -> str:
    """``path`` as a directory only this user can write: created 0700 when absent (``create``;
    else ``FileNotFoundError``).

    Raises ``UnsafeLocation`` when it is a link, not a directory, belongs to another user, or
    group or others may write it (they could plant or swap files), or when its parent lets
    another user swap it (a parent of another user but root, or one others may write without
    the sticky bit that keeps them from renaming what is not theirs); ``OSError`` when it
    cannot be created. Where the plugin writes a report or a record, and the only places
    their readers read one from.
    """
    directory = os.fspath(path)
    try:
        info = os.lstat(directory)  # present: the common case, without makedirs' exceptions
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.makedirs(directory, mode=0o700)
        except FileExistsError:  # made meanwhile by another process: checked below like any other
            pass
        info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeLocation(f"{directory} is a link")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeLocation(f"{directory} is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeLocation(f"{directory} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})")
    if info.st_mode & 0o022:
        raise UnsafeLocation(f"{directory} is writable by other users (mode {stat.S_IMODE(info.st_mode):o})")
    parent = os.path.dirname(os.path.abspath(directory))
    above = os.stat(parent)
    if above.st_uid not in (os.geteuid(), 0):
        raise UnsafeLocation(f"{directory} is in {parent}, which belongs to uid {above.st_uid}: it could swap it")
    if above.st_mode & 0o022 and not above.st_mode & stat.S_ISVTX:
        raise UnsafeLocation(f"{directory} is in {parent}, which other users may write (mode "
                             f"{stat.S_IMODE(above.st_mode):o}, no sticky bit): they could swap it")
    return directory


def read_json(path: Path | str, limit: int) -> object | None:
    """``read_private``'s bytes as JSON: None when absent, unsafe, not JSON, or nested beyond what
    Python parses (a record is read as untrusted data, and its depth is bounded too)."""
    data = read_private(path, limit)
    if data is None:
        return None
    try:
        found: object = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return found


def read_private(path: Path | str, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of this user that no one else can
    write or read (mode 0600 or stricter) and at most ``limit`` bytes; else None.

    Never follows a symlink, never blocks on a FIFO, never raises.
    """
    try:
        return private_file(path, limit)
    except OSError:
        return None


def private_file(path: Path | str, limit: int) -> bytes:
    """``read_private`` saying why not: ``FileNotFoundError`` when ``path`` is absent,
    ``UnsafeLocation`` (one line, the reason) when it is there but not a private regular
    file of this user of at most ``limit`` bytes, ``OSError`` when it cannot be read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeLocation(f"{os.fspath(path)} is a symlink") from None
        raise
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeLocation(f"{os.fspath(path)} is not a regular file")
        if info.st_uid != os.geteuid():
            raise UnsafeLocation(f"{os.fspath(path)} belongs to uid {info.st_uid}, not to this user")
        if info.st_mode & 0o077:
            raise UnsafeLocation(f"{os.fspath(path)} is readable or writable by other users "
                                 f"(mode {stat.S_IMODE(info.st_mode):o})")
        if info.st_size > limit:
            raise UnsafeLocation(f"{os.fspath(path)} is larger than {limit} bytes")
        data = os.read(handle, limit + 1)
        if len(data) > limit:
            raise UnsafeLocation(f"{os.fspath(path)} is larger than {limit} bytes")
        return data
    finally:
        os.close(handle)


class NotRegular(UnsafeLocation):
    """A FIFO, a device, a directory or a socket where a regular file was expected."""


def read_regular(path: Path | str, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of ``path``, a regular file (following symlinks:
    for files that are not private, such as a manifest or a distribution's metadata).

    Opened without blocking and checked with ``fstat`` before anything is read, so a FIFO or a
    device in its place is ``NotRegular`` at once, never a wait; ``OSError`` when it cannot be
    opened or read."""
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise NotRegular(f"{os.fspath(path)} is not a regular file")
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(handle, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(handle)


def atomic_write(path: Path | str, data: str | bytes, *, mode: int = 0o600,
                 before_replace: Callable[[Path], None] | None = None) -> None:
    """Replace ``path`` with ``data``: a random temporary name in the same directory, then a rename.

    The temporary file is created with ``mkstemp`` (O_EXCL, never following a planted
    symlink), given ``mode`` through its descriptor (never by name, which someone
    could swap), and removed again when anything fails; ``path`` is then left as it
    was. A symlink at ``path`` is replaced, never followed. ``before_replace``: called
    with the written temporary file just before the rename; raising keeps ``path`` as it was.
    """
    import tempfile  # lazily: the fast path that only reads never needs it

    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            stream.write(data.encode("utf-8") if isinstance(data, str) else data)
        if before_replace is not None:
            before_replace(Path(temporary))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def process_started(pid: int | str = "self") -> int | None:
    """When process ``pid`` started, in clock ticks after boot (``/proc/<pid>/stat``'s 22nd field,
    counted after the command name, which may hold spaces and parentheses); None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            fields = stream.read(4096)
        return int(fields[fields.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None
