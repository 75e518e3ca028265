"""What a release binds under other names, kept per target beside its reading in the release cache.

``check`` and ``new`` say where a release binds a target under another name
(``tracker.release.bindings``); finding it reads the release's Python files, and the answer
depends only on the release's reading and the rule. So it is kept under what decides it: the
sha256 of the reading (``cache``) and ``BINDINGS_VERSION``, one JSON file per release in
``releases/bindings/`` (0700), holding each target asked about with its bindings (none is an
answer too). A target not in it is looked for alone, and added. Written atomically
(``paths.atomic_write``, 0600) and read as untrusted data: a private regular file of this user
under ``RESULT_LIMIT`` bytes, whose key is the one asked for, whose payload still has the sha256
written beside it, every binding a file, a positive line and a name; anything else is ignored
(computed again and replaced). Nothing is ever unpickled. A release's entry goes when its
reading is evicted (``cache.BESIDE``); it keeps at most ``KEPT_TARGETS`` targets, those added last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tracker import paths
from tracker.release import cache
from tracker.release.archive import members
from tracker.release.bindings import BINDINGS_VERSION, Binding, bindings, bindings_in
from tracker.release.fetch import index_answered
from tracker.release.opened import OpenedRelease

RESULT_LIMIT = 4 << 20  # bytes: a release's entry is a few KiB
KEPT_TARGETS = 512  # targets of one release kept at most (the manifest's are some ten)

Found = dict[str, list[Binding]]


def directory(where: Path) -> Path:
    """``bindings/`` in the release cache ``where`` (``cache.directory``), private as it is."""
    return Path(paths.private_dir(where / "bindings"))


def key(digest: str) -> str:
    """What the bindings of the release whose reading has sha256 ``digest`` are kept under."""
    return f"{digest}-b{BINDINGS_VERSION}"


def _payload_digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _encode(found: Found) -> dict[str, list[list[str | int]]]:
    return {target: [[binding.file, binding.line, binding.name] for binding in bound] for target, bound in found.items()}


def _decoded(payload: Any) -> Found | None:
    if not isinstance(payload, dict):
        return None
    found: Found = {}
    for target, bound in payload.items():
        if not isinstance(bound, list):
            return None
        found[target] = []
        for entry in bound:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and type(entry[1]) is int
                    and entry[1] > 0 and isinstance(entry[2], str)):
                return None
            found[target].append(Binding(target, entry[0], entry[1], entry[2]))
    return found


def read(where: Path, digest: str) -> Found:
    """The targets kept for the release with sha256 ``digest``, each with its bindings; nothing when
    absent or not to be trusted (the module docstring)."""
    asked = key(digest)
    try:
        kept = paths.read_json(directory(where) / f"{asked}.json", RESULT_LIMIT)
    except OSError:
        return {}
    if not isinstance(kept, dict) or set(kept) != {"key", "sha256", "targets"} or kept["key"] != asked:
        return {}
    if kept["sha256"] != _payload_digest(kept["targets"]):
        return {}
    return _decoded(kept["targets"]) or {}


def write(where: Path, digest: str, found: Found) -> None:
    """Keep ``found`` (targets, each with its bindings) as the entry of the release with sha256
    ``digest``, its last ``KEPT_TARGETS`` targets only."""
    asked = key(digest)
    payload = _encode(dict(list(found.items())[-KEPT_TARGETS:]))
    paths.atomic_write(directory(where) / f"{asked}.json",
                       json.dumps({"key": asked, "sha256": _payload_digest(payload), "targets": payload},
                                  separators=(",", ":")))


def cached_bindings(targets: Iterable[str], where: Path | None, digest: str | None,
                    files: Callable[[], Iterable[tuple[str, bytes]]]) -> list[Binding]:
    """The bindings of ``targets`` in the release whose reading has sha256 ``digest`` in the release
    cache ``where``: those kept, and of the targets not kept, ``bindings_in(files())``'s, then kept.
    Without a digest or a cache, all are computed and nothing is kept."""
    asked = list(dict.fromkeys(targets))
    if where is None or digest is None:
        return bindings_in(asked, files())
    kept = read(where, digest)
    missing = [target for target in asked if target not in kept]
    if missing:
        computed = bindings_in(missing, files())
        for target in missing:
            kept[target] = [binding for binding in computed if binding.target == target]
        with contextlib.suppress(OSError):  # not kept: the next check looks again
            write(where, digest, kept)
    found = [binding for target in asked for binding in kept[target]]
    return sorted(found, key=lambda binding: (binding.target, binding.file, binding.line))


def release_bindings(targets: Iterable[str], release: OpenedRelease) -> list[Binding]:
    """The bindings of ``targets`` in an opened release: of a cached reading, kept in the release
    cache (``cached_bindings``); of an archive, its Python files read from the archive itself (one
    at a time, never unpacked); of a tree, from the tree."""
    archive = release.archive
    if archive is None:
        return bindings(targets, release.root)
    where = None
    if release.digest is not None:
        with contextlib.suppress(OSError):
            where = cache.directory(create=False)

    def files() -> Iterator[tuple[str, bytes]]:
        return members(archive, lambda relative: relative.startswith("vllm/") and relative.endswith(".py"))

    with index_answered(release.asked):  # an archive the index gave that breaks a rule: its wrong answer
        return cached_bindings(targets, where, release.digest, files)


__all__ = ["KEPT_TARGETS", "RESULT_LIMIT", "cached_bindings", "key", "read", "release_bindings", "write"]
