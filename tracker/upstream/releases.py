"""The first release containing a landed commit.

Release tags are compared with the commit (``compare/{sha}...{tag}``: ``ahead`` or
``identical`` means the tag contains it). A release series is cut from the main branch in
version order, so containment is monotone along the sorted tags and a bisection finds the
first one; the series just before it is then searched for a cherry-pick (``(cherry picked
from commit <sha>)``, or the PR's ``(#N)`` title on a commit the main branch does not
have): the same compare lists those commits, so no extra request is needed for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from packaging.version import Version

from tracker.model.manifest import DEFAULT_SOURCES, Release, UpstreamRef
from tracker.model.manifest import Source as ComponentSource
from tracker.upstream.cache import Source
from tracker.upstream.fields import as_choice, as_sha, as_str, field_object, field_objects

# Which repository releases which component by default (the manifest speaks in PyPI
# components: ``v2.14.0`` of pytorch/pytorch is ``torch>=2.14.0``); a manifest's
# ``[sources]`` adds to these and says how its tags are named.
REPOSITORY_COMPONENTS: dict[str, str] = {source.repository: name for name, source in DEFAULT_SOURCES.items()}
RELEASE_TAG_PREFIX = "v"  # release tags are vX.Y.Z in every repository above
COMPARE_STATUSES = ("ahead", "behind", "identical", "diverged")  # REST's ``compare`` ``status``


def release_of_tag(name: str, prefix: str = RELEASE_TAG_PREFIX, suffix: str = "") -> Version | None:
    """``v2.14.0`` -> 2.14.0 (for a tag pattern ``{prefix}{version}{suffix}``); None for anything that
    is not a final release tag."""
    if not name.startswith(prefix) or not name.endswith(suffix) or len(name) <= len(prefix) + len(suffix):
        return None
    try:
        version = Version(name[len(prefix):len(name) - len(suffix)])
    except ValueError:  # InvalidVersion, or a number of more digits than Python converts
        return None
    if version.is_prerelease or version.is_devrelease or version.is_postrelease or version.local:
        return None
    return version


def tags_path(repo: str, prefix: str = RELEASE_TAG_PREFIX) -> str:
    """Where a repository's release tags are listed (REST)."""
    return f"/repos/{repo}/git/matching-refs/tags/{quote(prefix, safe='')}?per_page=100"


@dataclass(frozen=True)
class Tag:
    name: str
    version: Version
    object_sha: str

    @property
    def series(self) -> tuple[int, ...]:
        """The release branch a tag is on: 2.14 for v2.14.1, 0.1.13 for v0.1.13.2 (four-part versions)."""
        release = self.version.release
        return release[:-1] if len(release) > 3 else release[:2]


@dataclass(frozen=True)
class Probe:
    """``compare/{sha}...{tag}``: whether the tag contains the commit, else its cherry-pick of it."""

    contained: bool
    status: str
    cherry_pick: str | None  # sha of the commit in the tag that carries the change


class Releases:
    """Release tags and containment probes for one run, each asked at most once."""

    def __init__(self, source: Source, sources: Mapping[str, ComponentSource] | None = None) -> None:
        self.source = source
        # repository -> the component it releases and its tag pattern: the defaults, then the manifest's.
        self.by_repository = {repo: ComponentSource(name, repo) for repo, name in REPOSITORY_COMPONENTS.items()}
        self.by_repository.update({found.repository: found for found in (sources or {}).values()})
        self._tags: dict[str, list[Tag]] = {}
        self._probes: dict[tuple[str, str, str], Probe] = {}

    def pattern(self, repo: str) -> tuple[str, str]:
        """(prefix, suffix) of ``repo``'s release tags."""
        found = self.by_repository.get(repo)
        return (found.tag_prefix, found.tag_suffix) if found is not None else (RELEASE_TAG_PREFIX, "")

    def tags(self, repo: str) -> list[Tag]:
        if repo not in self._tags:
            prefix, suffix = self.pattern(repo)
            what = f"{repo} release tags"
            refs = self.source.get_list(tags_path(repo, prefix), what=what)
            tags = []
            for item in refs:
                name = as_str(item, "ref", what).removeprefix("refs/tags/")
                version = release_of_tag(name, prefix, suffix)
                if version is not None:
                    tags.append(Tag(name, version, as_sha(field_object(item, "object", what), "sha", f"{what} {name}")))
            self._tags[repo] = sorted(tags, key=lambda tag: tag.version)
        return self._tags[repo]

    def probe(self, ref: UpstreamRef, commit: str, tag: Tag) -> Probe:
        key = (ref.repo, commit, tag.name)
        if key not in self._probes:
            path = f"/repos/{ref.repo}/compare/{commit}...{quote(tag.name, safe='')}?per_page=100"
            # Both ends are fixed commits (the tag's object sha is in the key), so the answer never changes.
            what = f"{ref.ref} against {tag.name}"
            data = self.source.get(path, what=what, immutable=True, key=f"{path}#{tag.object_sha}")
            status = as_choice(data, "status", what, COMPARE_STATUSES)
            pick = None
            if status not in ("ahead", "identical"):
                pick = _cherry_pick(field_objects(data, "commits", what, optional=True), commit, ref.number, what)
            self._probes[key] = Probe(status in ("ahead", "identical"), status, pick)
        return self._probes[key]

    def first_release(self, ref: UpstreamRef, commit: str) -> tuple[Release | None, str]:
        found = self.by_repository.get(ref.repo)
        if found is None:
            return None, f"{ref.repo} is not a repository whose releases the manifest tracks (see [sources])"
        component = found.component
        tags = self.tags(ref.repo)
        if not tags:
            return None, f"{ref.repo} has no release tags ({found.tag.replace('{version}', 'X.Y.Z')})"
        lo, hi = 0, len(tags)  # every tag below lo lacks the commit; tags[hi] has it (hi == len: none)
        hint = ref.released_in.version if ref.released_in is not None else None
        at = next((i for i, tag in enumerate(tags) if tag.version == hint), None)
        if at is not None:
            hinted = self.probe(ref, commit, tags[at])
            if hinted.contained:
                hi = at
                if at == 0 or not self.probe(ref, commit, tags[at - 1]).contained:
                    lo = at
                else:
                    hi = at - 1
            elif hinted.cherry_pick:
                # No tag below the hinted one can contain the commit itself (containment is
                # monotone), so the first tag of its series carrying the cherry-pick is the answer.
                series = [tag for tag in tags[:at + 1] if tag.series == tags[at].series]
                return self.picked(ref, commit, component, series, None)
            else:
                lo = at + 1
        while lo < hi:
            middle = (lo + hi) // 2
            if self.probe(ref, commit, tags[middle]).contained:
                hi = middle
            else:
                lo = middle + 1
        contained = tags[hi] if hi < len(tags) else None
        # Fixes reach release branches by cherry-pick: look in the series just before the first
        # tag that contains the commit (or the newest series when none does) before concluding.
        before = [tag for tag in tags[:hi] if tag.series == tags[hi - 1].series] if hi > 0 else []
        if before and self.probe(ref, commit, before[-1]).cherry_pick:
            return self.picked(ref, commit, component, before, contained)
        if contained is None:
            checked = f"{before[-1].name}" if before else "no tag"
            return None, (f"no release contains it yet: the newest tag {tags[-1].name} does not "
                          f"(compare), and no cherry-pick of it is in {checked}")
        if hi == 0:
            return (Release(component, contained.version),
                    f"the oldest release tag, {contained.name}, already contains it")
        return (Release(component, contained.version),
                f"{contained.name} is the first release tag containing it ({tags[hi - 1].name} has neither "
                f"it nor a cherry-pick of it)")

    def picked(self, ref: UpstreamRef, commit: str, component: str, series: list[Tag],
               contained: Tag | None) -> tuple[Release, str]:
        """The first tag of ``series`` carrying a cherry-pick of ``commit`` (its last one does)."""
        for tag in series:
            probe = self.probe(ref, commit, tag)
            if probe.cherry_pick:
                by = f"; {contained.name} is the first tag containing {commit[:12]} itself" if contained else ""
                return (Release(component, tag.version),
                        f"{tag.name} carries it as cherry-pick {probe.cherry_pick[:12]}{by}")
        raise AssertionError("the series' last tag carries the cherry-pick")


def _cherry_pick(commits: Iterable[dict[str, Any]], sha: str, number: int, where: str) -> str | None:
    """The commit among ``commits`` that carries ``sha``'s change, by ``-x`` line or PR title."""
    marker = f"(cherry picked from commit {sha})"
    title = re.compile(rf"\(#{number}\)\s*$")
    for index, commit in enumerate(commits, 1):
        at = f"{where} commit {index}"
        message = as_str(field_object(commit, "commit", at), "message", at)
        if marker in message or title.search(message.partition("\n")[0]):
            return as_sha(commit, "sha", at)
    return None
