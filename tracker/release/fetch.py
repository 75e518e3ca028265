"""Getting a vLLM release's source: ``vllm==X`` from the package index, a wheel, an sdist or a tree.

``vllm==X``'s source distribution is fetched with ``pip download --no-deps``, and pip's metadata
step is given a stand-in build backend that only reads the sdist's ``PKG-INFO``, so vLLM's
``setup.py`` never runs; it is kept in the per-user cache for the next time (``cache``).
``release_source`` gives any of the four for the length of a block (``opened.open_release`` opens
it once for every reader); ``newest_release`` asks the index (``pip index versions``) which
release is the newest.
What pip says when it fails is kept only with every address in it reduced to a host and a file
name (``redact``): a private index's token in its URL is never shown. pip never asks for a
password (``--no-input``): an index's refusal is an answer, never a wait.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tracker.release import cache
from tracker.release.errors import CheckInputError, NotFetchable
from tracker.release.redact import without_addresses

REQUIREMENT = re.compile(r"^vllm==(?P<version>[0-9][0-9A-Za-z.+!-]*)$")
# pip's metadata step for an sdist runs its build backend; this one only copies PKG-INFO.
_BACKEND = '''import os
from email.parser import Parser


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    with open("PKG-INFO", encoding="utf-8") as handle:
        info = Parser().parse(handle, headersonly=True)
    dist_info = f"{info['Name'].replace('-', '_')}-{info['Version']}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info))
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w", encoding="utf-8") as handle:
        handle.write(f"Metadata-Version: 2.1\\nName: {info['Name']}\\nVersion: {info['Version']}\\n")
    return dist_info
'''

Say = Callable[[str], None]  # a progress step or a warning, one line of text
# pip's warning when a request to the index failed and is retried, and the reason in it.
_RETRIED = re.compile(r"^WARNING: Retrying \(.*\) after connection broken by .*?(?P<why>\[Errno -?\d+\][^'\"]*"
                      r"|Read timed out|timed out|Connection refused|Name or service not known)", re.M)


def pip_failure(stderr: str, otherwise: str) -> str:
    """Why pip failed, from its stderr: its last error line (``otherwise`` when there is none) and,
    when it had to retry the index, why it could not reach it: pip's last line then says only
    that no version was found, as if the release did not exist. Every address in it is reduced
    (``redact.without_addresses``): this is where pip's words enter the tool's text."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("WARNING:")]
    why = lines[-1] if lines else otherwise
    retried = _RETRIED.findall(stderr)
    return without_addresses(f"{why} (the package index could not be reached: {retried[-1].strip()})" if retried
                             else why)


def _pip(what: str, arguments: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``pip ARGUMENTS``, its output kept, never asking for a password (a refusal is an answer, not a
    wait on a terminal). ``NotFetchable`` naming ``what``, with the error's addresses reduced as
    pip's are, when pip cannot be run or does not end within ``timeout`` seconds."""
    command = [sys.executable, "-m", "pip", "--no-input", *arguments]
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NotFetchable(f"{what}: {without_addresses(str(error))}") from None


def silent(text: str) -> None:
    """Nothing to show."""


def fetch(version: str, into: Path, *, timeout: float = 600) -> Path:
    """``vllm==version``'s source distribution, downloaded by pip into ``into``; no code of it runs."""
    backend = into / ".metadata-backend"
    (backend / "setuptools").mkdir(parents=True, exist_ok=True)
    (backend / "setuptools" / "__init__.py").write_text("")
    (backend / "setuptools" / "build_meta.py").write_text(_BACKEND)
    env = {**os.environ, "PYTHONPATH": str(backend), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = _pip(f"pip download vllm=={version}", ["download", "--quiet", "--no-deps", "--no-binary=:all:",
                                                   "--no-build-isolation", f"vllm=={version}", "-d", str(into)],
                env, timeout)
    found = sorted(into.glob("vllm-*.tar.gz"))
    if done.returncode != 0 or not found:
        raise NotFetchable(f"pip download vllm=={version} failed: {pip_failure(done.stderr, 'no sdist')}")
    return found[0]


_NEWEST = re.compile(r"^vllm \((?P<version>[^)\s]+)\)", re.M)


def newest_release(*, timeout: float = 120) -> Version:
    """The newest final vLLM release on the package index, as ``pip index versions vllm`` reads it
    (pip's configuration honoured: ``PIP_INDEX_URL`` and the rest). ``NotFetchable`` when the index
    cannot be reached or names none."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = _pip("pip index versions vllm", ["index", "versions", "vllm"], env, timeout)
    found = _NEWEST.search(done.stdout) if done.returncode == 0 else None
    if found is None:
        raise NotFetchable(f"pip index versions vllm failed: {pip_failure(done.stderr, 'no release named')}")
    try:
        return Version(found.group("version"))
    except InvalidVersion:
        raise NotFetchable(f"the package index names vLLM {found.group('version')!r}, which is no version") from None


@dataclass(frozen=True)
class Found:
    """What ``release_source`` gives: a tree, a wheel, an sdist, or a release's reading from the cache
    (``cache``); the version asked for (``vllm==X``, else None); what it is called (a reading: its
    sdist's name); the sha256 of a cached reading (else None: a census result is kept under it)."""

    path: Path
    asked: str | None
    label: str
    digest: str | None = None


def release_archive(version: str, scratch: Path, progress: Say = silent, warn: Say = silent) -> Found:
    """``vllm==version``'s reading from the per-user cache when it is there and intact
    (``cache``), else fetched by pip and kept there; its sdist fetched into ``scratch`` when the
    cache cannot be used (said in one warning)."""
    fetching = f"fetching vllm=={version} with pip (pip download)"

    def elsewhere() -> Found:
        progress(fetching)
        fetched = fetch(version, scratch)
        return Found(fetched, version, fetched.name)

    try:
        where = cache.directory()
        progress(f"verifying the cached {cache.reading_name(version)}")
        found, why = cache.cached(where, version)
    except OSError as error:  # UnsafeLocation too
        warn(f"the release cache is not used: {error}")
        return elsewhere()
    if why is not None:
        warn(f"{why}: fetched again")
    if found is None:
        progress(fetching)
        try:
            found = cache.store(where, version, lambda into: fetch(version, into))
        except OSError as error:
            warn(f"vllm=={version} could not be kept in the release cache: {error}")
            return elsewhere()
        except CheckInputError as error:  # what the index gave is no vLLM release
            raise NotFetchable(f"vllm=={version} from the index: {error}") from None
    return Found(found.path, version, found.sdist, found.sha256)


@contextlib.contextmanager
def release_source(what: str, *, workdir: Path | None = None, progress: Say = silent,
                   warn: Say = silent) -> Iterator[Found]:
    """What ``what`` names, for the length of the block: a source tree (a directory), a wheel or
    sdist, or ``vllm==X``'s reading from the cache (or its sdist fetched into a temporary
    directory). ``CheckInputError`` when ``what`` is none of these; ``NotFetchable`` when the index
    does not give the release."""
    matched = REQUIREMENT.match(what.strip())
    candidate = Path(what).expanduser()
    if matched is None and not candidate.exists():
        raise CheckInputError(f"{what!r} is neither vllm==VERSION nor an existing wheel, sdist or source tree")
    if matched is None and not (candidate.is_dir() or candidate.is_file()):  # a FIFO or a device: it could wait for ever
        raise CheckInputError(f"{what!r} is not a regular file (a wheel or sdist) nor a source tree")
    if matched is None:
        yield Found(candidate, None, str(candidate) if candidate.is_dir() else candidate.name)
        return
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-check-", dir=workdir) as scratch:
        yield release_archive(matched.group("version"), Path(scratch), progress, warn)


@contextlib.contextmanager
def index_answered(asked: str | None) -> Iterator[None]:
    """An archive the index gave that cannot be read is the index answering wrongly (``NotFetchable``,
    exit 4), not the caller's bad input."""
    try:
        yield
    except CheckInputError as error:
        if asked is None:
            raise
        raise NotFetchable(f"vllm=={asked} from the index: {error}") from None


__all__ = ["REQUIREMENT", "Found", "fetch", "index_answered", "newest_release", "release_archive", "release_source", "silent"]
