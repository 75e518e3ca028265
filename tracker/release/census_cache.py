"""A release's census kept beside its reading in the release cache: a cached census costs a JSON read.

A result is kept under what decides it: the sha256 of the release's reading (``cache``), the
census's own version (``tracker.census.version.CENSUS_VERSION``), the shape of its result (the
fields of ``Census``, ``CountedSite`` and ``Site``) and what the census reads of the manifest (its
``[[tracked]]`` entries); anything else changed, it is computed again. Results are JSON in
``releases/census/`` (0700), written atomically (``paths.atomic_write``, 0600), and read as
untrusted data: a private regular file of this user under ``RESULT_LIMIT`` bytes, whose key is the
one asked for, whose payload still has the sha256 written beside it, and whose every value has the
type its field declares; an entry that is not so is ignored (computed again and replaced), never
trusted. Nothing is ever unpickled. A release's results go when its reading is evicted; of one
release, the ``KEPT_PER_RELEASE`` written last are kept.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from tracker import paths
from tracker.census.count import Census, CountedSite
from tracker.census.scan import Site
from tracker.census.version import CENSUS_VERSION
from tracker.model.manifest import Manifest

RESULT_LIMIT = 64 << 20  # bytes: a census of vLLM 0.34.0 is some 2 MB of JSON
KEPT_PER_RELEASE = 4  # results of one release (one per manifest's [[tracked]] entries) kept at most
_SHAPED = (Census, CountedSite, Site)


class Unreadable(ValueError):
    """A kept value that is not what its field declares."""


def _canonical(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(map(str, value))
    return str(value)


def key(manifest: Manifest, digest: str) -> str:
    """What a result of the release whose reading has sha256 ``digest`` is kept under."""
    shape = [[field.name for field in dataclasses.fields(kind)] for kind in _SHAPED]
    tracked = [inline._asdict() for inline in manifest.tracked]
    read = json.dumps({"shape": shape, "tracked": tracked}, default=_canonical, sort_keys=True)
    return f"{digest}-c{CENSUS_VERSION}-{hashlib.sha256(read.encode()).hexdigest()[:16]}"


def directory(where: Path) -> Path:
    """``census/`` in the release cache ``where`` (``cache.directory``), private as it is."""
    return Path(paths.private_dir(where / "census"))


def encode(value: Any) -> Any:
    """``value`` as JSON values: dataclasses as objects of their fields, versions and enums as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: encode(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Version):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {str(name): encode(item) for name, item in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise Unreadable(f"a {type(value).__name__} is not kept")


def decode(hint: Any, data: Any) -> Any:
    """``data`` (JSON values) as ``hint`` declares it, every value checked; ``Unreadable`` otherwise."""
    origin = typing.get_origin(hint)
    if hint is type(None) or hint is None:
        if data is not None:
            raise Unreadable("not null")
        return None
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(hint):
            try:
                return decode(arm, data)
            except Unreadable:
                continue
        raise Unreadable(f"none of {hint}")
    if hint is bool or hint is str or hint is float or hint is int:
        if type(data) is not hint and not (hint is float and type(data) is int):
            raise Unreadable(f"not a {hint.__name__}")
        return data
    if hint is Version:
        try:
            return Version(_typed(data, str))
        except InvalidVersion:
            raise Unreadable("not a version") from None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(data)
        except ValueError:
            raise Unreadable(f"not a {hint.__name__}") from None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, _typed(data, dict))
    if origin in (list, tuple):
        items = _typed(data, list)
        arguments = typing.get_args(hint)
        if origin is tuple and not (len(arguments) == 2 and arguments[1] is Ellipsis):
            raise Unreadable(f"{hint} is not kept")
        found = [decode(arguments[0], item) for item in items]
        return tuple(found) if origin is tuple else found
    if origin is dict:
        name_hint, item_hint = typing.get_args(hint)
        if name_hint is not str:
            raise Unreadable(f"{hint} is not kept")
        return {name: decode(item_hint, item) for name, item in _typed(data, dict).items()}
    raise Unreadable(f"{hint} is not kept")


def _typed(data: Any, kind: type) -> Any:
    if type(data) is not kind:
        raise Unreadable(f"not a {kind.__name__}")
    return data


def _dataclass(kind: type, data: dict[str, Any]) -> Any:
    fields = dataclasses.fields(kind)
    if set(data) != {field.name for field in fields} or not all(field.init for field in fields):
        raise Unreadable(f"not the fields of {kind.__name__}")
    hints = typing.get_type_hints(kind)
    return kind(**{field.name: decode(hints[field.name], data[field.name]) for field in fields})


def _payload_digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read(where: Path, asked: str) -> Census | None:
    """The result kept under ``asked`` (``key``), or None: absent, or not to be trusted (the module docstring)."""
    try:
        found = paths.read_json(directory(where) / f"{asked}.json", RESULT_LIMIT)
    except OSError:
        return None
    if not isinstance(found, dict) or set(found) != {"key", "sha256", "census"} or found["key"] != asked:
        return None
    if found["sha256"] != _payload_digest(found["census"]):
        return None
    try:
        census = decode(Census, found["census"])
    except (Unreadable, RecursionError, TypeError, ValueError):
        return None
    return census if isinstance(census, Census) and census.since is None else None


def write(where: Path, asked: str, census: Census) -> None:
    """Keep ``census`` under ``asked``, if it reads back as itself (else nothing is kept); of its
    release, only the ``KEPT_PER_RELEASE`` written last stay."""
    try:
        payload = encode(census)
        if decode(Census, json.loads(json.dumps(payload))) != census:
            return
    except Unreadable:
        return
    folder = directory(where)
    paths.atomic_write(folder / f"{asked}.json", json.dumps({"key": asked, "sha256": _payload_digest(payload),
                                                             "census": payload}, separators=(",", ":")))
    release = asked.split("-", 1)[0]
    kept = sorted((entry for entry in os.scandir(folder) if entry.name.startswith(f"{release}-")),
                  key=lambda entry: entry.stat(follow_symlinks=False).st_mtime, reverse=True)
    for entry in kept[KEPT_PER_RELEASE:]:
        os.unlink(entry.path)


def cached_census(manifest: Manifest, where: Path | None, digest: str | None, compute: Callable[[], Census]) -> Census:
    """The census of the release whose reading has sha256 ``digest`` in the release cache ``where``:
    the kept one, else ``compute()``'s, then kept. Without a digest (a tree, a file named on the
    command line, no usable cache) it is computed and not kept."""
    if where is None or digest is None:
        return compute()
    asked = key(manifest, digest)
    found = read(where, asked)
    if found is not None:
        return found
    census = compute()
    try:
        write(where, asked, census)
    except OSError:
        pass  # not kept: the next census computes it again
    return census


__all__ = ["CENSUS_VERSION", "KEPT_PER_RELEASE", "RESULT_LIMIT", "cached_census", "decode", "encode", "key",
           "read", "write"]
