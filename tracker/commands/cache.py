"""``cache [--clean] [--json]``: where the release and upstream caches are and their size; ``--clean``
empties them.

Both are in the per-user cache directory (``XPU_WORKAROUNDS_CACHE_DIR``, else the user cache dir:
``tracker.paths.cache_dir``): the release cache is its ``releases/`` folder (``tracker.release.cache``:
each release's reading and its census results), the upstream cache its ``upstream-*.json`` files
(``tracker.upstream.cache``: one per GitHub host). Nothing is followed through a link; cleaning
removes what is in ``releases/`` and the upstream files, and leaves the directories and anything
else (the plugin's stored plans) where they are. A cache directory that does not exist is empty.
"""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from tracker import one_line, paths
from tracker.commands.context import JsonOption
from tracker.commands.exits import on_os_error
from tracker.commands.output import table
from tracker.model.vocabulary import SCHEMA
from tracker.release import cache as release_cache

UPSTREAM_PREFIX, UPSTREAM_SUFFIX = "upstream-", ".json"


def _upstream_files(root: str) -> list[str]:
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(entry.path for entry in entries if entry.name.startswith(UPSTREAM_PREFIX)
                  and entry.name.endswith(UPSTREAM_SUFFIX) and entry.is_file(follow_symlinks=False))


def usages(root: str) -> list[release_cache.Usage]:
    """The release cache and the upstream cache under the cache directory ``root``."""
    releases = release_cache.usage("releases", os.path.join(root, "releases"))
    files = _upstream_files(root)
    sizes = []
    for file in files:
        try:
            sizes.append(os.lstat(file).st_size)
        except OSError:
            continue
    upstream = release_cache.Usage("upstream", os.path.join(root, f"{UPSTREAM_PREFIX}*{UPSTREAM_SUFFIX}"),
                                   bool(sizes), len(sizes), sum(sizes))
    return [releases, upstream]


def size_text(count: int) -> str:
    """Bytes as a person reads them: 0 B, 812.0 KiB, 157.3 MiB, 1.0 GiB."""
    size = float(count)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def releases_in(root: str) -> int:
    """How many releases the release cache under ``root`` holds (their readings)."""
    try:
        return sum(1 for entry in os.scandir(os.path.join(root, "releases"))
                   if entry.name.endswith(release_cache.READING_SUFFIX) and entry.is_file(follow_symlinks=False))
    except OSError:
        return 0


def clean(root: str) -> None:
    release_cache.clean(os.path.join(root, "releases"))
    for file in _upstream_files(root):
        os.unlink(file)


def cache(
    json_output: JsonOption = False,
    clean_caches: Annotated[bool, typer.Option("--clean", help="Empty the release and upstream caches.")] = False,
) -> None:
    """Where the release and upstream caches are, and their size.

    --clean empties them. The release cache keeps what check, census and new read of each vLLM
    release; the upstream cache, what upstream last learned from GitHub."""
    root = paths.cache_dir()
    before = usages(root)
    if clean_caches:
        with on_os_error(f"cannot empty the caches in {root}"):
            clean(root)
    after = usages(root) if clean_caches else before
    if json_output:
        document = {"schema": SCHEMA, "directory": root, "cleaned": clean_caches,
                    "caches": [{**usage.as_json(), "freed_bytes": was.bytes - usage.bytes if clean_caches else 0}
                               for usage, was in zip(after, before, strict=True)],
                    "releases": releases_in(root), "release_cap_bytes": release_cache.CAP_BYTES}
        typer.echo(json.dumps(document, indent=2))
        return
    what = {"releases": "release cache", "upstream": "upstream cache"}
    counted = {"releases": (releases_in(root), "release"), "upstream": (after[1].files, "file")}
    rows = []
    for usage in after:
        count, noun = counted[usage.name]
        rows.append((what[usage.name], usage.path if usage.exists else f"{usage.path} (none yet)",
                     f"{count} {noun}{'s' if count != 1 else ''}, {size_text(usage.bytes)}"))
    typer.echo(table(("CACHE", "WHERE", "SIZE"), rows))
    if clean_caches:
        freed = sum(was.bytes - usage.bytes for usage, was in zip(after, before, strict=True))
        typer.echo(one_line(f"emptied the release and upstream caches: {size_text(freed)} freed"))
    else:
        typer.echo(one_line(f"The release cache is held under {size_text(release_cache.CAP_BYTES)}: the releases "
                            "read longest ago go first."))
