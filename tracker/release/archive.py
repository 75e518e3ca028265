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

from tracker.model.pins import XPU_REQUIREMENTS
from tracker.release.errors import CheckInputError

FILE_LIMIT = 16 << 20
ARCHIVE_LIMIT = 2 << 30  # bytes of all members together, as the archive declares or yields them
MEMBERS_LIMIT = 100_000
WRITTEN_LIMIT = 512 << 20  # bytes unpacked to disk: vLLM's Python source is some 60 MiB
VERSION_FILE = "vllm/_version.py"
# The files that say what a release is: its version, and the torch and vllm-xpu-kernels it pins for XPU.
DECLARING = frozenset({"PKG-INFO", VERSION_FILE, XPU_REQUIREMENTS})
# The compression methods zipfile reads (a wheel's are stored or deflated).
_READABLE = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})


def release_file(relative: str) -> bool:
    """The files of a release every reader may read: vLLM's Python source, its version and its XPU pins."""
    return relative in DECLARING or (relative.startswith("vllm/") and relative.endswith(".py"))


def unpack(archive: Path, into: Path, wanted: Callable[[str], bool], *,
           kept: Callable[[str, bytes], bool] | None = None) -> Path:
    """Extract the ``wanted`` files (paths relative to the source tree) of an sdist or wheel into
    ``into``; with ``kept``, only those it keeps once their bytes are read.

    Only regular files' bytes are written, each inside ``into`` (never a link, a device, or a
    path that leaves it); an archive of more than ``MEMBERS_LIMIT`` members or ``ARCHIVE_LIMIT``
    bytes, a wanted file over ``FILE_LIMIT``, kept files over ``WRITTEN_LIMIT`` together, a
    wanted file held twice or both a file and a folder, is refused (``CheckInputError``) before
    more is read or written."""
    into.mkdir(parents=True, exist_ok=True)
    written = 0
    for relative, data in members(archive, wanted):
        if kept is not None and not kept(relative, data):
            continue
        written += len(data)
        if written > WRITTEN_LIMIT:
            raise CheckInputError(f"{archive}: more than {WRITTEN_LIMIT >> 20} MiB of the files read: "
                                  "not a vLLM release")
        try:
            _write(into, relative, data)
        except (NotADirectoryError, IsADirectoryError, FileExistsError):
            raise CheckInputError(f"{archive}: {relative} is both a file and a folder in it: "
                                  "not a vLLM release") from None
    return into


def members(archive: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """(path relative to the source tree, bytes) of each ``wanted`` regular file of an sdist or
    wheel, read one at a time within the bounds ``unpack`` keeps, in the archive's order. A path is
    given normalised (``a//./b`` is ``a/b``), never one with ``..`` in it or a leading ``/``. A
    wanted file the archive holds twice refuses it (which of the two is the release's?), and so
    does a wheel's entry that is encrypted or compressed in a way zipfile cannot read."""
    seen: set[str] = set()

    def once(relative: str) -> None:
        if relative in seen:
            raise CheckInputError(f"{archive}: {relative} is in it twice: not a vLLM release")
        seen.add(relative)

    try:
        if archive.name.endswith((".whl", ".zip")):  # a wheel, or a release's reading (cache)
            with zipfile.ZipFile(archive) as wheel:
                listed = wheel.infolist()
                _bounded(archive, len(listed), sum(info.file_size for info in listed))
                for info in listed:
                    _readable(archive, info)
                    relative = _normalised(re.sub(r"^[^/]+\.dist-info/METADATA$", "PKG-INFO", info.filename))
                    if relative is not None and wanted(relative) and not info.is_dir():
                        once(relative)
                        with wheel.open(info) as handle:
                            yield relative, _read_bounded(archive, relative, handle, info.file_size)
        elif archive.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(archive, "r:gz") as sdist:
                count = total = 0
                for member in sdist:
                    count, total = count + 1, total + max(member.size, 0)
                    _bounded(archive, count, total)
                    normal = _normalised(member.name)
                    relative = _normalised(normal.partition("/")[2]) if normal is not None else None
                    if member.isfile() and relative is not None and wanted(relative):
                        once(relative)
                        extracted = sdist.extractfile(member)
                        if extracted is not None:
                            yield relative, _read_bounded(archive, relative, extracted, member.size)
        else:
            raise CheckInputError(f"{archive}: not a wheel (.whl) or source distribution (.tar.gz)")
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, ValueError,
            NotImplementedError) as error:  # the last: a compression method zipfile lists but cannot read
        if isinstance(error, CheckInputError):
            raise
        raise CheckInputError(f"{archive}: cannot be read ({error})") from None


def _normalised(name: str) -> str | None:
    """A member's path with empty and ``.`` parts dropped; None when it leaves the tree (``..``, a
    leading ``/``) or names nothing."""
    if name.startswith("/"):
        return None
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return None if not parts or ".." in parts else "/".join(parts)


def _readable(archive: Path, info: zipfile.ZipInfo) -> None:
    if info.flag_bits & 0x1:
        raise CheckInputError(f"{archive}: {info.filename} is encrypted: not a vLLM release")
    if info.compress_type not in _READABLE:
        raise CheckInputError(f"{archive}: {info.filename} is compressed with method {info.compress_type}, "
                              "which is not read: not a vLLM release")


def _bounded(archive: Path, members: int, size: int) -> None:
    if members > MEMBERS_LIMIT:
        raise CheckInputError(f"{archive}: more than {MEMBERS_LIMIT} members: not a vLLM release")
    if size > ARCHIVE_LIMIT:
        raise CheckInputError(f"{archive}: more than {ARCHIVE_LIMIT >> 30} GiB unpacked: not a vLLM release")


def _read_bounded(archive: Path, relative: str, handle: IO[bytes], declared: int) -> bytes:
    """A member's bytes, at most ``FILE_LIMIT`` of them whatever its header declares."""
    data = handle.read(FILE_LIMIT + 1) if declared <= FILE_LIMIT else b""
    if declared > FILE_LIMIT or len(data) > FILE_LIMIT:
        raise CheckInputError(f"{archive}: {relative} is larger than {FILE_LIMIT >> 20} MiB: not a vLLM source file")
    return data


def _write(root: Path, relative: str, data: bytes) -> None:
    target = (root / relative).resolve()
    if root.resolve() not in target.parents:  # ``..`` in an archive member: never outside ``root``
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


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


__all__ = ["ARCHIVE_LIMIT", "DECLARING", "FILE_LIMIT", "MEMBERS_LIMIT", "VERSION_FILE", "WRITTEN_LIMIT", "declared_version",
           "members", "release_file", "unpack"]
