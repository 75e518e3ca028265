"""The manifest against every supported vLLM release: ``check --supported``.

The supported releases are the final vLLM releases on the package index (``pip index
versions vllm``, pip's configuration honoured) from the manifest's ``[support] vllm`` floor to
the newest, as the test suite's release matrix enumerates them. Each is checked as ``check
vllm==X`` checks one (``compare.check``: its sdist from the release cache, or fetched), and
answers in one row: the problems of the workarounds asked about, or why it could not be fetched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from tracker.model.manifest import Manifest
from tracker.model.vocabulary import SCHEMA
from tracker.release.ahead import fetched_ahead
from tracker.release.compare import Disagreement, check
from tracker.release.errors import CheckInputError, NotFetchable
from tracker.release.fetch import Say, index_versions, pip_failure, silent

_AVAILABLE = re.compile(r"^Available versions: (?P<versions>.+)$", re.M)


def index_releases(*, timeout: float = 120) -> list[Version]:
    """Every final vLLM release the package index lists, oldest first (``pip index versions``);
    ``NotFetchable`` when the index cannot be reached or lists none."""
    done = index_versions(timeout=timeout)  # never asks for a password: a refusal is an answer
    found = _AVAILABLE.search(done.stdout) if done.returncode == 0 else None
    if found is None:
        raise NotFetchable(f"pip index versions vllm failed: {pip_failure(done.stderr, 'no release listed')}")
    releases = set()
    for text in found.group("versions").split(","):
        try:
            version = Version(text.strip())
        except InvalidVersion:
            continue  # not a release pip could install either
        if not (version.is_prerelease or version.is_devrelease):
            releases.add(version)
    return sorted(releases)


@dataclass(frozen=True)
class ReleaseRow:
    """One release's answer: ``ok``, ``drift`` (``problems``) or ``not-fetchable`` (``error``)."""

    release: str
    result: str
    problems: list[Disagreement] = field(default_factory=list)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"release": self.release, "result": self.result, "problems": [str(p) for p in self.problems],
                "error": self.error}


@dataclass(frozen=True)
class SupportedCheck:
    floor: str
    workaround: str | None  # the one workaround asked about; None: every one
    rows: list[ReleaseRow]

    @property
    def drifted(self) -> list[str]:
        return [row.release for row in self.rows if row.result == "drift"]

    @property
    def not_fetched(self) -> list[str]:
        return [row.release for row in self.rows if row.result == "not-fetchable"]

    def as_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "floor": self.floor, "workaround": self.workaround,
                "drift": bool(self.drifted), "releases": [row.as_json() for row in self.rows]}


def check_release(manifest: Manifest, release: Version, workaround: str | None, *, progress: Say = silent,
                  warn: Say = silent) -> ReleaseRow:
    try:
        result = check(manifest, f"vllm=={release}", progress=progress, warn=warn)
    except (NotFetchable, CheckInputError) as error:  # an sdist of the index's that is no vLLM tree: the index's
        return ReleaseRow(str(release), "not-fetchable", error=str(error))
    problems = [problem for problem in result.problems if workaround in (None, problem.id)]
    return ReleaseRow(str(release), "drift" if problems else "ok", problems)


def check_supported(manifest: Manifest, workaround: str | None = None, *, progress: Say = silent,
                    warn: Say = silent) -> SupportedCheck:
    """Every release from the ``[support] vllm`` floor to the newest on the index, checked in order;
    with ``workaround``, that one alone (only its targets' modules are read of each release)."""
    floor = manifest.support["vllm"]
    if workaround is not None:
        only = manifest.by_id[workaround]
        manifest = manifest._replace(workarounds=(only,), by_id={workaround: only}, tracked=())
    progress("asking the package index for vLLM's releases (pip index versions)")
    releases = [release for release in index_releases() if release >= floor]
    if not releases:
        raise NotFetchable(f"the package index lists no vLLM release from the support floor {floor} on")
    rows = []
    with fetched_ahead(releases) as ready:
        for number, release in enumerate(releases, 1):
            def step(text: str, release: Version = release, number: int = number) -> None:
                progress(f"vllm=={release} ({number}/{len(releases)}): {text}")

            ready(release, step)
            step("checking")
            rows.append(check_release(manifest, release, workaround, progress=step, warn=warn))
    return SupportedCheck(str(floor), workaround, rows)


__all__ = ["ReleaseRow", "SupportedCheck", "check_release", "check_supported", "index_releases"]
