"""Releases the release cache lacks, fetched into it ahead (``AHEAD`` at a time) while a loop reads
the earlier ones in order (``check --supported``, ``new``): a first run over the support range
waits on the network about once, not once per release.

A fetch ahead is the one ``check vllm==X`` makes (``cache.store``: pip, then the reading). One that
fails is left to the loop: its own read of that release fetches again and says what went wrong
where it answers for that release. Nothing is fetched ahead when the cache cannot be used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from packaging.version import Version

from tracker.release import cache
from tracker.release.errors import CheckInputError, NotFetchable
from tracker.release.fetch import Say, fetch

AHEAD = 2  # releases fetched at once beside the one read: pip's download, then the reading made

Ready = Callable[[Version, Say], None]


@contextlib.contextmanager
def fetched_ahead(releases: Sequence[Version]) -> Iterator[Ready]:
    """For the block, the releases of ``releases`` whose reading the cache lacks being fetched into
    it, in order; ``ready(release, progress)`` waits until ``release``'s fetch ahead (if any) is
    over, saying so through ``progress`` when it has to wait. Left early (Ctrl-C, an error): no
    fetch starts after."""
    pool = ThreadPoolExecutor(max_workers=AHEAD, thread_name_prefix="fetch-ahead")
    try:
        fetching = _started(pool, releases)

        def ready(release: Version, progress: Say) -> None:
            future = fetching.get(release)
            if future is not None and not future.done():
                progress("fetching with pip (pip download)")
                future.result()

        yield ready
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _started(pool: ThreadPoolExecutor, releases: Sequence[Version]) -> dict[Version, Future[None]]:
    try:
        where = cache.directory()
    except OSError:  # UnsafeLocation too: the read of the first release says why, once
        return {}
    missing = [release for release in releases if not cache.recorded(where, str(release))]
    return {release: pool.submit(_fetch_into, where, str(release)) for release in missing}


def _fetch_into(where: Path, version: str) -> None:
    try:
        cache.store(where, version, lambda into: fetch(version, into))
    except (OSError, NotFetchable, CheckInputError):
        pass  # the loop's own read of this release fetches it again and says why


__all__ = ["AHEAD", "Ready", "fetched_ahead"]
