"""The files of a source tree the census reads, and the text of each: strangers' files, read
within bounds.

Only the Python files under ``vllm/`` are read, each at most ``SOURCE_LIMIT`` bytes (a larger one
is skipped and said: it is no source file of vLLM's, and reading it would cost more than the rest
of the release). What the census costs is bounded where it reads: of the files that can hold a
site (``may_hold_sites``), at most ``SCANNED_LIMIT`` bytes are read of one release, by path, and
the files past it are skipped and said in one line. vLLM 0.34.0's are 179 files, 4.7 MiB (0.30.0:
4.2 MiB), its largest Python file 0.33 MiB; ``benchmarks/bench_census_dense.py`` measures the
census of the densest XPU source, the worst these limits admit. The walk keeps its own stack of folders, so a tree of any depth is walked
without recursion, and follows no link. A file's bytes are decoded by the one reader of source
(``tracker.source_text``): a declared codec is honoured only when it is one source is written in,
any other file is read as UTF-8 and said; bytes that do not decode are replaced, never a reason to
skip the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from tracker.source_text import SOURCE_LIMIT as SOURCE_LIMIT  # the limit every reader of source keeps
from tracker.source_text import source_text

SCANNED_LIMIT = 10 << 20  # bytes of the files that can hold a site read of one release (vLLM 0.34.0: 4.7 MiB)


def is_xpu_module(file: str) -> bool:
    """A module only XPU imports: ``xpu`` in its name or a package's (``platforms/xpu.py``, ``xpumem.py``)."""
    parts = PurePosixPath(file).parts
    return any("xpu" in part.removesuffix(".py").lower() for part in parts[1:])


def may_hold_sites(file: str, content: str | bytes) -> bool:
    """Whether a file is worth reading (its text or its bytes): only XPU-only modules and files that
    say ``xpu`` (a platform check, an XPU-named definition, a note about XPU) can hold a site."""
    lowered = content.lower()
    return is_xpu_module(file) or ("xpu" in lowered if isinstance(lowered, str) else b"xpu" in lowered)


def too_large(relative: str, size: int) -> str:
    """What the census says of a file it skips for its size."""
    return f"{relative}: {size} bytes, more than {SOURCE_LIMIT >> 20} MiB: not read (no vLLM source file is that large)"


def source_files(root: Path, *, skipped: Callable[[str], None] | None = None) -> Iterator[tuple[str, str]]:
    """(path in the tree, text) of every Python file under ``root/vllm``, by path; links are not
    followed, and a file larger than ``SOURCE_LIMIT`` is not read (``skipped`` is told why, as it is
    of a file read as UTF-8 against the codec it declares, and of the files past ``SCANNED_LIMIT``)."""
    scanned, past = 0, []
    for path, size in sorted(_python_files(root / "vllm")):
        relative = path.relative_to(root).as_posix()
        if size > SOURCE_LIMIT:
            if skipped is not None:
                skipped(too_large(relative, size))
            continue
        try:
            with path.open("rb") as handle:
                data = handle.read(SOURCE_LIMIT + 1)
        except OSError:
            continue
        if len(data) > SOURCE_LIMIT:  # grew since it was listed
            if skipped is not None:
                skipped(too_large(relative, len(data)))
            continue
        if may_hold_sites(relative, data):
            if scanned + len(data) > SCANNED_LIMIT:
                past.append(relative)
                continue
            scanned += len(data)
        read = source_text(data)
        if read.notice is not None and skipped is not None:
            skipped(f"{relative}: {read.notice}")
        yield relative, read.text
    if past and skipped is not None:
        skipped(past_the_limit(past))


def past_the_limit(past: list[str]) -> str:
    """What the census says of the files it skips past ``SCANNED_LIMIT``: how many, the first."""
    return (f"{len(past)} {'file' if len(past) == 1 else 'files'} that can hold a site ({past[0]}"
            f"{' and more' if len(past) > 1 else ''}) past the {SCANNED_LIMIT / 2**20:g} MiB of such source the census "
            "reads of one release: not read (vLLM 0.34.0 has 4.7 MiB)")


def _python_files(top: Path) -> Iterator[tuple[Path, int]]:
    """(path, size) of the regular ``.py`` files under ``top``, walked with a stack (no recursion,
    whatever the depth), links neither listed nor followed."""
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(status.st_mode):
                pending.append(Path(entry.path))
            elif stat.S_ISREG(status.st_mode) and entry.name.endswith(".py"):
                yield Path(entry.path), status.st_size
