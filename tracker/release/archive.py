"""A wheel or source distribution read as untrusted data: the files wanted, within bounds.

vLLM's largest source file is under 1 MiB and its whole sdist unpacks to some hundred MiB in a
few thousand members; an archive beyond the limits below is no vLLM release and is refused
before more of it is read or written.
"""

from __future__ import annotations

import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from email.parser import Parser
from pathlib import Path
from typing import IO

from tracker.release.errors import CheckInputError

FILE_LIMIT = 16 << 20
ARCHIVE_LIMIT = 2 << 30  # bytes of all members together, as the archive declares or yields them
MEMBERS_LIMIT = 100_000


def unpack(archive: Path, into: Path, wanted: Callable[[str], bool]) -> Path:
    """Extract the ``wanted`` files (paths relative to the source tree) of an sdist or wheel into ``into``.

    Only regular files' bytes are written, each inside ``into`` (never a link, a device, or a
    path that leaves it); an archive of more than ``MEMBERS_LIMIT`` members or ``ARCHIVE_LIMIT``
    bytes, or a wanted file over ``FILE_LIMIT``, is refused (``CheckInputError``) before more is
    read or written."""
    into.mkdir(parents=True, exist_ok=True)
    for relative, data in members(archive, wanted):
        _write(into, relative, data)
    return into


def members(archive: Path, wanted: Callable[[str], bool], *,
            oversize: Callable[[str, int], None] | None = None, limit: int = FILE_LIMIT) -> Iterator[tuple[str, bytes]]:
    """(path relative to the source tree, bytes) of each ``wanted`` regular file of an sdist or
    wheel, read one at a time within the bounds ``unpack`` keeps, in the archive's order; a path
    with ``..`` or a leading ``/`` in it is never given. With ``oversize``, a wanted file over
    ``limit`` bytes (declared or read) is passed over and ``oversize`` told its path and size,
    instead of refusing the archive."""
    try:
        if archive.name.endswith(".whl"):
            with zipfile.ZipFile(archive) as wheel:
                listed = wheel.infolist()
                _bounded(archive, len(listed), sum(info.file_size for info in listed))
                for info in listed:
                    relative = re.sub(r"^[^/]+\.dist-info/METADATA$", "PKG-INFO", info.filename)
                    if _inside(relative) and wanted(relative) and not info.is_dir():
                        with wheel.open(info) as handle:
                            data = _read_bounded(archive, relative, handle, info.file_size, oversize, limit)
                        if data is not None:
                            yield relative, data
        elif archive.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive, "r:gz") as sdist:
                count = total = 0
                for member in sdist:
                    count, total = count + 1, total + max(member.size, 0)
                    _bounded(archive, count, total)
                    relative = member.name.partition("/")[2]
                    if member.isfile() and _inside(relative) and wanted(relative):
                        extracted = sdist.extractfile(member)
                        data = None if extracted is None else _read_bounded(archive, relative, extracted,
                                                                            member.size, oversize, limit)
                        if data is not None:
                            yield relative, data
        else:
            raise CheckInputError(f"{archive}: not a wheel (.whl) or source distribution (.tar.gz)")
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, ValueError) as error:
        if isinstance(error, CheckInputError):
            raise
        raise CheckInputError(f"{archive}: cannot be read ({error})") from None


def _inside(relative: str) -> bool:
    """A member path that stays in the tree: ``..`` in an archive member never leaves it."""
    return not relative.startswith("/") and ".." not in relative.split("/")


def _bounded(archive: Path, members: int, size: int) -> None:
    if members > MEMBERS_LIMIT:
        raise CheckInputError(f"{archive}: more than {MEMBERS_LIMIT} members: not a vLLM release")
    if size > ARCHIVE_LIMIT:
        raise CheckInputError(f"{archive}: more than {ARCHIVE_LIMIT >> 30} GiB unpacked: not a vLLM release")


def _read_bounded(archive: Path, relative: str, handle: IO[bytes], declared: int,
                  oversize: Callable[[str, int], None] | None = None, limit: int = FILE_LIMIT) -> bytes | None:
    """A member's bytes, at most ``limit`` of them whatever its header declares; None when it is
    larger and ``oversize`` (told of it) passes it over."""
    data = handle.read(limit + 1) if declared <= limit else b""
    if declared > limit or len(data) > limit:
        if oversize is not None:
            oversize(relative, max(declared, len(data)))
            return None
        raise CheckInputError(f"{archive}: {relative} is larger than {limit >> 20} MiB: not a vLLM source file")
    return data


def _write(root: Path, relative: str, data: bytes) -> None:
    target = (root / relative).resolve()
    if root.resolve() not in target.parents:  # ``..`` in an archive member: never outside ``root``
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def release_version(root: Path) -> str | None:
    """The vLLM version of a source tree: its PKG-INFO (sdist, wheel METADATA), else ``vllm/_version.py``."""
    info, written = root / "PKG-INFO", root / "vllm" / "_version.py"
    return declared_version(info.read_text(encoding="utf-8", errors="replace") if info.is_file() else None,
                            written.read_text(encoding="utf-8", errors="replace") if written.is_file() else None)


def declared_version(info: str | None, written: str | None) -> str | None:
    """The version a PKG-INFO text declares, else a ``vllm/_version.py`` text."""
    if info is not None:
        version = Parser().parsestr(info, headersonly=True)["Version"]
        if version:
            return str(version)
    if written is not None:
        found = re.search(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", written, re.M)
        if found:
            return found.group(1)
    return None


__all__ = ["ARCHIVE_LIMIT", "FILE_LIMIT", "MEMBERS_LIMIT", "declared_version", "members", "release_version", "unpack"]
