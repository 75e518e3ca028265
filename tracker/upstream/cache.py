"""The answer cache and the ``Source`` that answers one run's GETs from it and from GitHub.

Every answer is kept on disk (``raw_data`` plus the ``ETag``/``Last-Modified`` needed to
revalidate it, never the token); a refresh in which nothing changed is made of 304
answers, which cost no rate limit. Answers that cannot change (a compare between two
fixed commits, a file at a tag's commit) are never asked again. Errors are never cached,
and the cache file is replaced only after a run that succeeded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tracker import PATH_ECHO_LIMIT, echoed, paths
from tracker.model.vocabulary import ErrorKind, ToolError
from tracker.upstream.clock import iso, now, parse_iso
from tracker.upstream.failure import GitHubMissing, GitHubUnavailable
from tracker.upstream.paging import EndlessList, Pages, next_page
from tracker.upstream.settings import ClientSettings

CACHE_SCHEMA = 1

# An answer younger than this is reused without asking (``--refresh`` always asks).
MAX_AGE = timedelta(hours=1)

_KEPT_HEADERS = ("etag", "last-modified", "link")

# The largest cache file read (a full refresh of the shipped manifest writes well under 1 MB).
CACHE_LIMIT = 64 * 1024 * 1024


class Mode(StrEnum):
    """How a run uses the cache: ``offline`` (cache only), ``normal`` (reuse answers younger
    than ``MAX_AGE``), ``refresh`` (revalidate everything that can change)."""

    OFFLINE = "offline"
    NORMAL = "normal"
    REFRESH = "refresh"


class NoUsableCache(ToolError):
    """``--offline`` found nothing cached to answer from: why, and what to run (and install) for it."""

    kind = ErrorKind.OUTSIDE_SERVICE

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}: {learn_hint()}")


def learn_hint() -> str:
    """What to run for the upstream facts the cache lacks, and on a base install what to install for it."""
    import importlib.util

    try:
        client = importlib.util.find_spec("github") is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        client = False
    if client:
        return "run `xpu-workarounds upstream` once, where GitHub is reachable"
    return "run `xpu-workarounds upstream` once (needs `pip install 'xpu-workarounds[github]'`)"


class NotCached(Exception):
    """Offline, and this answer was never cached."""


Entry = dict[str, Any]  # {data, headers, fetched_at, immutable}


@dataclass
class Cache:
    """Stored GitHub answers for one API base URL: ``key -> {data, headers, fetched_at, immutable}``."""

    path: Path
    base_url: str
    checked_at: datetime | None = None
    entries: dict[str, Entry] = field(default_factory=dict)

    # Why the stored answers were not used (an unsafe directory, a file that is not a private
    # regular file, malformed contents): said as a warning; the run goes on without them.
    problem: str | None = None
    # False when the directory may not be trusted: nothing is written there either.
    writable: bool = True

    @classmethod
    def load(cls, directory: Path, base_url: str) -> Cache:
        """The stored answers for ``base_url`` in ``directory``, read as untrusted data: only from
        a private directory (``paths.private_dir``) and a private regular file of this user
        (``paths.private_file``), of the shape ``save`` writes; anything else is no cache."""
        slug = re.sub(r"[^A-Za-z0-9]+", "-", urlparse(base_url).netloc + urlparse(base_url).path).strip("-")
        path = directory / f"upstream-{slug or 'github'}.json"
        cache = cls(path, base_url)
        try:
            if os.path.lexists(directory):
                paths.private_dir(directory)
        except OSError as error:
            cache.problem, cache.writable = f"the upstream cache is not used: {_reason(error)}", False
            return cache
        try:
            stored = json.loads(paths.private_file(path, CACHE_LIMIT))
        except FileNotFoundError:
            return cache  # nothing cached yet
        except OSError as error:
            cache.problem = f"the upstream cache is not used: {_reason(error)}"
            return cache
        except (ValueError, RecursionError):
            cache.problem = f"the upstream cache is not used: {shown(path)} is not JSON"
            return cache
        if not (isinstance(stored, dict) and type(stored.get("schema")) is int and stored["schema"] == CACHE_SCHEMA):
            cache.problem = f"the upstream cache is not used: {shown(path)} is not a cache of this version"
            return cache
        if stored.get("base_url") != base_url:
            return cache  # another server's answers (the file name is a slug of its URL)
        checked_at = parse_iso(stored.get("checked_at"))
        entries = stored.get("entries")
        if checked_at is None or not isinstance(entries, dict) or not all(
                isinstance(key, str) and valid_entry(entry) for key, entry in entries.items()):
            cache.problem = f"the upstream cache is not used: {shown(path)} holds malformed entries"
            return cache
        cache.checked_at, cache.entries = checked_at, entries
        return cache

    @property
    def usable(self) -> bool:
        return self.checked_at is not None and bool(self.entries)

    def save(self, entries: dict[str, Entry], checked_at: datetime) -> None:
        """Replace the file atomically with ``entries`` (what the run that just succeeded used),
        in a private directory (created 0700); nothing when the directory may not be trusted."""
        if not self.writable:
            return
        document = {"schema": CACHE_SCHEMA, "base_url": self.base_url, "checked_at": iso(checked_at),
                    "entries": entries}
        paths.private_dir(self.path.parent)
        paths.atomic_write(self.path, json.dumps(document, indent=None, separators=(",", ":"), sort_keys=True))
        self.entries, self.checked_at = entries, checked_at


def valid_entry(entry: object) -> bool:
    """An entry of the shape ``Source`` stores: ``{data, headers: {str: str}, fetched_at, immutable}``.
    What ``data`` holds is checked where a fact is read from it, as for a live answer."""
    return (isinstance(entry, dict) and "data" in entry and isinstance(entry.get("immutable"), bool)
            and parse_iso(entry.get("fetched_at")) is not None and isinstance(entry.get("headers"), dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in entry["headers"].items()))


def _reason(error: OSError) -> str:
    return str(error) if isinstance(error, paths.UnsafeLocation) or not error.strerror else \
        f"{error.strerror} ({shown(error.filename)})" if error.filename else error.strerror


def shown(path: str | bytes | os.PathLike[str]) -> str:
    """A cache path in a message, shortened as every echoed value is (``XPU_WORKAROUNDS_CACHE_DIR`` names it)."""
    return echoed(os.fsdecode(path), PATH_ECHO_LIMIT, quoted=False)


class Source:
    """Answers GETs for one run: from the cache, revalidated against GitHub as the mode says.

    Every answer used is kept in ``used``, which becomes the new cache when the run succeeds.
    """

    def __init__(self, cache: Cache, mode: Mode | str, client: ClientSettings | None = None,
                 at: datetime | None = None) -> None:
        self.cache = cache
        self.mode = Mode(mode)
        self.client = client  # None offline
        self.now = at or now()
        self.used: dict[str, Entry] = {}
        self.sent: list[tuple[str, int]] = []  # (key, status) of every request made
        # Answers learned another way (GraphQL, see ``prefetch``) under their REST keys, and
        # what that way found not to exist (never cached: errors are not cached).
        self.prefetched: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        self._gh: Any = None

    def _github(self) -> Any:
        if self._gh is None:
            assert self.client is not None, "an offline Source sends no request"
            from tracker.upstream import client as github_client  # only where a request is sent: offline has none

            self._gh = github_client.connect(self.client)
        return self._gh

    def get(self, path: str, *, what: str, immutable: bool = False, key: str | None = None) -> Any:
        return self._entry(path, what=what, immutable=immutable, key=key)["data"]

    def get_list(self, path: str, *, what: str) -> list[Any]:
        """Every page of a list, following ``Link: rel="next"``."""
        items: list[Any] = []
        url: str | None = path
        pages = Pages(self.client or ClientSettings(base_url=self.cache.base_url))
        read: list[str] = []
        while url is not None:
            if read:  # a loop or an endless chain, even when every page is known already
                try:
                    pages.check(read, pages.key(url))
                except EndlessList as error:
                    raise GitHubUnavailable(f"{what}: {error.line}") from None
            read.append(pages.key(url))
            entry = self._entry(url, what=what)
            if not isinstance(entry["data"], list):
                raise GitHubUnavailable(
                    f"{what}: {self.client.host if self.client else 'the cache'} answered an object where a list "
                    "was expected: is GITHUB_API_URL the REST API?")
            items.extend(entry["data"])
            url = next_page(entry["headers"])
        return items

    def _key(self, url: str) -> str:
        parsed = urlparse(url)
        if not parsed.scheme:
            return url
        prefix = urlparse(self.cache.base_url).path.rstrip("/")
        path = parsed.path[len(prefix):] if prefix and parsed.path.startswith(prefix) else parsed.path
        return path + (f"?{parsed.query}" if parsed.query else "")

    def _reusable(self, stored: Entry) -> bool:
        if stored.get("immutable"):
            return True
        fetched = parse_iso(stored.get("fetched_at"))
        return self.mode is Mode.NORMAL and fetched is not None and self.now - fetched < MAX_AGE

    def known(self, key: str) -> Entry | None:
        """The answer for ``key`` this run can give without a request, if any."""
        if key in self.used:
            return self.used[key]
        if key in self.prefetched:
            return {"data": self.prefetched[key], "headers": {}, "fetched_at": iso(self.now), "immutable": False}
        stored = self.cache.entries.get(key)
        if stored is not None and (self.mode is Mode.OFFLINE or self._reusable(stored)):
            return stored
        return None

    def _entry(self, url: str, *, what: str, immutable: bool = False, key: str | None = None) -> Entry:
        key = key or self._key(url)
        if key in self.used:
            return self.used[key]
        if key in self.prefetched:
            self.used[key] = {"data": self.prefetched[key], "headers": {}, "fetched_at": iso(self.now),
                              "immutable": immutable}
            return self.used[key]
        if key in self.missing:
            raise GitHubMissing(f"{what}: {self.missing[key]}")
        stored = self.cache.entries.get(key)
        if self.mode is Mode.OFFLINE:
            if stored is None:
                raise NotCached(f"{what}: not in the cache")
            self.used[key] = stored
            return stored
        if stored is not None and self._reusable(stored):
            self.used[key] = stored
            return stored
        assert self.client is not None
        validators = stored["headers"] if stored is not None else None
        from tracker.upstream import client as github_client

        answer = github_client.get(self._github(), self.client, url, validators, what=what)
        self.sent.append((key, answer.status))
        if answer.status == 304 and stored is not None:
            headers = dict(stored["headers"])
            headers.update({k: answer.headers[k] for k in ("etag", "last-modified") if k in answer.headers})
            entry = {**stored, "headers": headers, "fetched_at": iso(self.now)}
        else:
            entry = {"data": answer.data, "headers": {k: answer.headers[k] for k in _KEPT_HEADERS
                                                      if k in answer.headers},
                     "fetched_at": iso(self.now), "immutable": immutable}
        self.used[key] = entry
        return entry
