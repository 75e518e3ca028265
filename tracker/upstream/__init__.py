"""``xpu-workarounds upstream``: what actually happened to every upstream reference.

Per reference (``OWNER/REPO#N``) it learns, from GitHub through PyGithub:

- the state: ``open``, ``merged`` (a GitHub merge), ``landed`` (pytorch's merge bot
  pushed the commit and GitHub closed the PR: a ``merged`` label or a ``closed`` event
  carrying a ``commit_id``), ``reverted`` (landed, then a ``reverted`` label, a reopen or
  a merged ``Revert "..."`` PR), ``closed-unmerged``;
- the landed commit;
- the first release containing it: release tags are compared with the commit
  (``compare/{sha}...{tag}``: ``ahead``/``identical`` means the tag contains it). A
  release series is cut from the main branch in version order, so containment is
  monotone along the sorted tags and a bisection finds the first one; the series just
  before it is then searched for a cherry-pick (``(cherry picked from commit <sha>)``,
  or the PR's ``(#N)`` title on a commit the main branch does not have): the same
  compare lists those commits, so no extra request is needed for them;
- for vLLM's own inline workarounds, whether they are dead code at vLLM's XPU pins
  (``requirements/xpu.txt`` at the default branch and at the latest release tag).

Cost: one request per fact, none repeated in a run. Every answer is cached on disk
(``raw_data`` plus the ``ETag``/``Last-Modified`` needed to revalidate it, never the
token); a refresh in which nothing changed is made of 304 answers, which cost no rate
limit. Answers that cannot change (a compare between two fixed commits, a file at a
tag's commit) are never asked again. Errors are never cached, and the cache file is
replaced only after a run that succeeded.
"""

from __future__ import annotations

import base64
import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version
from requests.utils import parse_header_links

from tracker.model.manifest import Manifest, Release, UpstreamRef, Workaround
from tracker.model.reader import check
from tracker.model.versions import DISTRIBUTIONS, release_of
from tracker.model.vocabulary import RELEASED_STATES
from tracker.paths import cache_dir as environment_cache_dir
from tracker.upstream import client as github_client
from tracker.upstream.client import ClientSettings, GitHubMissing, GitHubUnavailable

SCHEMA = 1
CACHE_SCHEMA = 1

# The one place that says which repository releases which component (the manifest
# speaks in PyPI components: ``v2.14.0`` of pytorch/pytorch is ``torch>=2.14.0``).
REPOSITORY_COMPONENTS: dict[str, str] = {
    "pytorch/pytorch": "torch",
    "vllm-project/vllm": "vllm",
    "vllm-project/vllm-xpu-kernels": "vllm-xpu-kernels",
    "intel/intel-extension-for-pytorch": "intel-extension-for-pytorch",
}
VLLM_REPOSITORY = "vllm-project/vllm"
VLLM_XPU_REQUIREMENTS = "requirements/xpu.txt"
RELEASE_TAG_PREFIX = "v"  # release tags are vX.Y.Z in every repository above

# An answer younger than this is reused without asking (``--refresh`` always asks).
MAX_AGE = timedelta(hours=1)

_LANDED_LABEL = re.compile(r"^merged(X\d+)?$")


class NoUsableCache(Exception):
    """``--offline`` (or a failed refresh) found nothing cached to answer from."""


class NotCached(Exception):
    """Offline, and this answer was never cached."""


def release_of_tag(name: str) -> Version | None:
    """``v2.14.0`` -> 2.14.0; None for anything that is not a final release tag."""
    if not name.startswith(RELEASE_TAG_PREFIX):
        return None
    try:
        version = Version(name[len(RELEASE_TAG_PREFIX):])
    except InvalidVersion:
        return None
    if version.is_prerelease or version.is_devrelease or version.is_postrelease or version.local:
        return None
    return version


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def age_text(moment: datetime, now: datetime | None = None) -> str:
    seconds = max(0, int(((now or _now()) - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"


# ----------------------------------------------------------------------------- cache


@dataclass
class Cache:
    """Stored GitHub answers for one API base URL: ``key -> {data, headers, fetched_at, immutable}``."""

    path: Path
    base_url: str
    checked_at: datetime | None = None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path, base_url: str) -> Cache:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", urlparse(base_url).netloc + urlparse(base_url).path).strip("-")
        path = directory / f"upstream-{slug or 'github'}.json"
        cache = cls(path, base_url)
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cache  # absent or unreadable: nothing usable, and nothing to lose
        if (isinstance(stored, dict) and stored.get("schema") == CACHE_SCHEMA
                and stored.get("base_url") == base_url and isinstance(stored.get("entries"), dict)):
            cache.checked_at = _parse_iso(stored.get("checked_at"))
            cache.entries = stored["entries"]
        return cache

    @property
    def usable(self) -> bool:
        return self.checked_at is not None and bool(self.entries)

    def save(self, entries: dict[str, dict[str, Any]], checked_at: datetime) -> None:
        """Replace the file atomically with ``entries`` (what the run that just succeeded used)."""
        document = {"schema": CACHE_SCHEMA, "base_url": self.base_url, "checked_at": _iso(checked_at),
                    "entries": entries}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".upstream-", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(document, stream, indent=None, separators=(",", ":"), sort_keys=True)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.entries, self.checked_at = entries, checked_at


# ---------------------------------------------------------------------------- source

_KEPT_HEADERS = ("etag", "last-modified", "link")


class Source:
    """Answers GETs for one run: from the cache, revalidated against GitHub as the mode says.

    Modes: ``offline`` (cache only), ``normal`` (reuse answers younger than ``MAX_AGE``),
    ``refresh`` (revalidate everything that can change). Every answer used is kept in
    ``used``, which becomes the new cache when the run succeeds.
    """

    def __init__(self, cache: Cache, mode: str, client: ClientSettings | None = None,
                 now: datetime | None = None) -> None:
        self.cache = cache
        self.mode = mode
        self.client = client  # None offline
        self.now = now or _now()
        self.used: dict[str, dict[str, Any]] = {}
        self.sent: list[tuple[str, int]] = []  # (key, status) of every request made
        self._gh: Any = None

    def _github(self) -> Any:
        if self._gh is None:
            self._gh = github_client.connect(self.client)
        return self._gh

    def get(self, path: str, *, what: str, immutable: bool = False, key: str | None = None) -> Any:
        return self._entry(path, what=what, immutable=immutable, key=key)["data"]

    def get_list(self, path: str, *, what: str) -> list[Any]:
        """Every page of a list, following ``Link: rel="next"``."""
        items: list[Any] = []
        url: str | None = path
        while url is not None:
            entry = self._entry(url, what=what)
            items.extend(entry["data"] or [])
            link = entry["headers"].get("link", "")
            url = next((item["url"] for item in parse_header_links(link) if item.get("rel") == "next"), None)
        return items

    def _key(self, url: str) -> str:
        parsed = urlparse(url)
        if not parsed.scheme:
            return url
        prefix = urlparse(self.cache.base_url).path.rstrip("/")
        path = parsed.path[len(prefix):] if prefix and parsed.path.startswith(prefix) else parsed.path
        return path + (f"?{parsed.query}" if parsed.query else "")

    def _reusable(self, stored: dict[str, Any]) -> bool:
        if stored.get("immutable"):
            return True
        fetched = _parse_iso(stored.get("fetched_at"))
        return self.mode == "normal" and fetched is not None and self.now - fetched < MAX_AGE

    def _entry(self, url: str, *, what: str, immutable: bool = False, key: str | None = None) -> dict[str, Any]:
        key = key or self._key(url)
        if key in self.used:
            return self.used[key]
        stored = self.cache.entries.get(key)
        if self.mode == "offline":
            if stored is None:
                raise NotCached(f"{what}: not in the cache")
            self.used[key] = stored
            return stored
        if stored is not None and self._reusable(stored):
            self.used[key] = stored
            return stored
        validators = stored["headers"] if stored is not None else None
        answer = github_client.get(self._github(), self.client, url, validators, what=what)
        self.sent.append((key, answer.status))
        if answer.status == 304 and stored is not None:
            headers = dict(stored["headers"])
            headers.update({k: answer.headers[k] for k in ("etag", "last-modified") if k in answer.headers})
            entry = {**stored, "headers": headers, "fetched_at": _iso(self.now)}
        else:
            entry = {"data": answer.data, "headers": {k: answer.headers[k] for k in _KEPT_HEADERS
                                                      if k in answer.headers},
                     "fetched_at": _iso(self.now), "immutable": immutable}
        self.used[key] = entry
        return entry


# ----------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Facts:
    """What GitHub says about one reference."""

    ref: str
    state: str | None  # None: could not be learned (see error)
    commit: str | None
    released_in: Release | None
    evidence: str
    workarounds: tuple[str, ...]
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        document = {"ref": self.ref, "state": self.state, "commit": self.commit,
                    "released_in": str(self.released_in) if self.released_in else None,
                    "evidence": self.evidence, "workarounds": list(self.workarounds)}
        if self.error is not None:
            document["error"] = self.error
        return document


@dataclass(frozen=True)
class InlineVerdict:
    """Whether vLLM's own copy of a workaround is dead code at vLLM's XPU pins."""

    workaround: str
    vllm_ref: str  # "main" (the default branch) or a release tag
    dead: bool
    evidence: str
    partial: bool = False  # the root fix leaves part of the bug (the manifest's ``remaining``)

    def as_json(self) -> dict[str, Any]:
        return {"workaround": self.workaround, "vllm_ref": self.vllm_ref, "dead": self.dead,
                "partial": self.partial, "evidence": self.evidence}


@dataclass
class Report:
    source: str  # live | cache
    checked_at: datetime
    references: list[Facts]
    inline_audit: list[InlineVerdict]
    requests: list[tuple[str, int]] = field(default_factory=list)
    warning: str | None = None

    def as_json(self, now: datetime | None = None) -> dict[str, Any]:
        document: dict[str, Any] = {
            "schema": SCHEMA, "source": self.source, "checked_at": _iso(self.checked_at),
            "references": [facts.as_json() for facts in self.references],
            "inline_audit": [verdict.as_json() for verdict in self.inline_audit],
        }
        if self.source == "cache":
            document["cache_age_seconds"] = max(0, int(((now or _now()) - self.checked_at).total_seconds()))
        return document

    def facts(self, ref: str) -> Facts | None:
        return next((facts for facts in self.references if facts.ref == ref), None)


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


class Tracker:
    """Learns the facts for a manifest from a ``Source``; one instance per run."""

    def __init__(self, manifest: Manifest, source: Source) -> None:
        self.manifest = manifest
        self.source = source
        self._tags: dict[str, list[Tag]] = {}
        self._probes: dict[tuple[str, str, str], Probe] = {}

    # ---- per reference -------------------------------------------------------------
    def references(self) -> list[Facts]:
        seen: dict[str, list[Workaround]] = {}
        first: dict[str, UpstreamRef] = {}
        for w in self.manifest.workarounds:
            for ref in w.upstream:
                seen.setdefault(ref.ref, []).append(w)
                first.setdefault(ref.ref, ref)
        return [self.facts(first[name], tuple(w.id for w in seen[name])) for name in seen]

    def facts(self, ref: UpstreamRef, workarounds: tuple[str, ...]) -> Facts:
        try:
            return self._facts(ref, workarounds)
        except (GitHubMissing, NotCached) as error:
            return Facts(ref.ref, None, None, None, f"Could not be learned: {error}.", workarounds, str(error))

    def _facts(self, ref: UpstreamRef, workarounds: tuple[str, ...]) -> Facts:
        pr = self.source.get(f"/repos/{ref.repo}/pulls/{ref.number}", what=ref.ref)
        timeline = self.source.get_list(f"/repos/{ref.repo}/issues/{ref.number}/timeline?per_page=100",
                                        what=f"{ref.ref} timeline")
        state, commit, story = classify(ref, pr, timeline)
        if state not in RELEASED_STATES or commit is None:
            return Facts(ref.ref, state, commit, None, story, workarounds)
        released, how = self.first_release(ref, commit)
        return Facts(ref.ref, state, commit, released, f"{story}; {how}.", workarounds)

    # ---- releases ------------------------------------------------------------------
    def tags(self, repo: str) -> list[Tag]:
        if repo not in self._tags:
            refs = self.source.get_list(f"/repos/{repo}/git/matching-refs/tags/{RELEASE_TAG_PREFIX}?per_page=100",
                                        what=f"{repo} release tags")
            tags = []
            for item in refs:
                name = str(item.get("ref", "")).removeprefix("refs/tags/")
                version = release_of_tag(name)
                if version is not None:
                    tags.append(Tag(name, version, item["object"]["sha"]))
            self._tags[repo] = sorted(tags, key=lambda tag: tag.version)
        return self._tags[repo]

    def probe(self, ref: UpstreamRef, commit: str, tag: Tag) -> Probe:
        key = (ref.repo, commit, tag.name)
        if key not in self._probes:
            path = f"/repos/{ref.repo}/compare/{commit}...{quote(tag.name, safe='')}?per_page=100"
            # Both ends are fixed commits (the tag's object sha is in the key), so the answer never changes.
            data = self.source.get(path, what=f"{ref.ref} against {tag.name}", immutable=True,
                                   key=f"{path}#{tag.object_sha}")
            status = data.get("status", "")
            pick = None
            if status not in ("ahead", "identical"):
                pick = _cherry_pick(data.get("commits") or [], commit, ref.number)
            self._probes[key] = Probe(status in ("ahead", "identical"), status, pick)
        return self._probes[key]

    def first_release(self, ref: UpstreamRef, commit: str) -> tuple[Release | None, str]:
        component = REPOSITORY_COMPONENTS.get(ref.repo)
        if component is None:
            return None, f"{ref.repo} is not a repository whose releases the manifest tracks"
        tags = self.tags(ref.repo)
        if not tags:
            return None, f"{ref.repo} has no release tags ({RELEASE_TAG_PREFIX}X.Y.Z)"
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

    # ---- vLLM's inline workarounds -------------------------------------------------
    def inline_audit(self, facts: dict[str, Facts]) -> list[InlineVerdict]:
        inline = [w for w in self.manifest.workarounds if any(r.repo == VLLM_REPOSITORY for r in w.refs("inline-fix"))]
        if not inline:
            return []
        verdicts: list[InlineVerdict] = []
        try:
            tags = self.tags(VLLM_REPOSITORY)
        except (GitHubMissing, NotCached):
            tags = []
        points: list[tuple[str, str, str | None]] = [("main", "", None)]  # no ref: the default branch
        if tags:
            latest = tags[-1]
            points.append((latest.name, f"?ref={quote(latest.name, safe='')}", latest.object_sha))
        for label, query, pinned in points:
            path = f"/repos/{VLLM_REPOSITORY}/contents/{VLLM_XPU_REQUIREMENTS}{query}"
            try:
                content = self.source.get(path, what=f"{VLLM_REPOSITORY} {VLLM_XPU_REQUIREMENTS} at {label}",
                                          immutable=pinned is not None,
                                          key=f"{path}#{pinned}" if pinned else None)
                pins = xpu_pins(base64.b64decode(content.get("content", "")).decode("utf-8", "replace"))
            except (GitHubMissing, NotCached) as error:
                for w in inline:
                    verdicts.append(InlineVerdict(w.id, label, False, f"vLLM's XPU pins unknown: {error}"))
                continue
            for w in inline:
                verdicts.append(inline_verdict(w, label, pins, facts))
        return verdicts


def classify(ref: UpstreamRef, pr: dict[str, Any], timeline: list[dict[str, Any]]) -> tuple[str, str | None, str]:
    """State, landed commit and a sentence saying how they were established."""
    landed: str | None = None
    landed_at = ""
    landed_how = ""
    reverted_by: str | None = None
    labelled_in_timeline = False  # the timeline orders labels; the PR's label list does not
    for event in timeline:
        kind = event.get("event")
        day = str(event.get("created_at") or "")[:10]
        if kind == "merged" and event.get("commit_id"):
            landed, landed_at, landed_how, reverted_by = event["commit_id"], day, "merged", None
        elif kind == "closed" and event.get("commit_id"):
            actor = (event.get("actor") or {}).get("login", "a commit")
            landed, landed_at, reverted_by = event["commit_id"], day, None
            landed_how = f"closed by {actor}'s commit"
        elif kind == "labeled" and (event.get("label") or {}).get("name") == "reverted":
            labelled_in_timeline = True
            if landed:
                reverted_by = reverted_by or f"labelled reverted on {day}"
        elif landed and kind == "reopened":
            reverted_by = reverted_by or f"reopened on {day}"
        elif landed and kind == "cross-referenced":
            source = (event.get("source") or {}).get("issue") or {}
            title = str(source.get("title", ""))
            merged_at = (source.get("pull_request") or {}).get("merged_at")
            if merged_at and title.startswith("Revert") and f"#{ref.number}" in f"{title} {source.get('body') or ''}":
                where = _ref_of_issue(source) or "a revert PR"
                reverted_by = f"reverted by {where} (merged {str(merged_at)[:10]})"
    labels = {str(label.get("name")) for label in pr.get("labels") or []}
    if pr.get("merged"):
        landed = landed or pr.get("merge_commit_sha")
        landed_how = "merged"
        landed_at = landed_at or str(pr.get("merged_at") or "")[:10]
    if landed is None and any(_LANDED_LABEL.match(label) for label in labels):
        landed_how = "labelled merged by the merge bot"
    if reverted_by is None and landed and "reverted" in labels and not labelled_in_timeline:
        reverted_by = "labelled reverted"
    short = landed[:12] if landed else "an unknown commit"
    if reverted_by and (landed or landed_how):
        return "reverted", landed, f"Landed as {short} on {landed_at or 'an unknown day'}, then {reverted_by}"
    if landed_how == "merged":
        return "merged", landed, f"GitHub merged it as {short} on {landed_at}"
    if landed_how:
        shown = "GitHub shows it closed, not merged"
        if landed is None:
            return "landed", None, f"{landed_how.capitalize()} ({shown}), but no closing commit is recorded"
        return "landed", landed, f"Landed as {short} on {landed_at}, {landed_how} ({shown})"
    if pr.get("state") == "open":
        return "open", None, f"Open since {str(pr.get('created_at') or '')[:10]}"
    return "closed-unmerged", None, f"Closed on {str(pr.get('closed_at') or '')[:10]} without a merge or a landing commit"


def _ref_of_issue(issue: dict[str, Any]) -> str | None:
    repo = (issue.get("repository") or {}).get("full_name")
    number = issue.get("number")
    return f"{repo}#{number}" if repo and number else (f"#{number}" if number else None)


def _cherry_pick(commits: Iterable[dict[str, Any]], sha: str, number: int) -> str | None:
    """The commit among ``commits`` that carries ``sha``'s change, by ``-x`` line or PR title."""
    marker = f"(cherry picked from commit {sha})"
    title = re.compile(rf"\(#{number}\)\s*$")
    for commit in commits:
        message = str((commit.get("commit") or {}).get("message", ""))
        if marker in message or title.search(message.partition("\n")[0]):
            return commit.get("sha")
    return None


# ------------------------------------------------------------------------ inline audit

_COMPONENT_OF_DISTRIBUTION = {canonicalize_name(name): component
                              for component, names in DISTRIBUTIONS.items() for name in names}


def xpu_pins(text: str) -> dict[str, Version]:
    """Component -> pinned release from a requirements file (``==`` pins and wheel URLs)."""
    pins: dict[str, Version] = {}
    for raw in text.splitlines():
        line = re.split(r"(^|\s)#", raw, maxsplit=1)[0].strip()
        if not line or line.startswith("-"):
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        component = _COMPONENT_OF_DISTRIBUTION.get(canonicalize_name(requirement.name))
        if component is None:
            continue
        version = None
        exact = [spec.version for spec in requirement.specifier if spec.operator in ("==", "===")]
        if exact:
            version = release_of(exact[0])
        elif requirement.url:
            try:
                version = release_of(str(parse_wheel_filename(unquote(requirement.url.rsplit("/", 1)[-1]))[1]))
            except (InvalidWheelFilename, InvalidVersion):
                version = None
        if version is not None:
            pins[component] = version
    return pins


def inline_verdict(w: Workaround, label: str, pins: dict[str, Version], facts: dict[str, Facts]) -> InlineVerdict:
    """vLLM's inline copy is dead at ``label`` when vLLM's pin already contains a root fix."""
    at = "main" if label == "main" else f"vLLM {label.removeprefix(RELEASE_TAG_PREFIX)}"
    roots = w.refs("root-fix")
    if not roots:
        return InlineVerdict(w.id, label, False, f"No upstream root fix is recorded for {w.id}, so vLLM's "
                                                 f"inline workaround stays needed at {at}.")
    reasons = []
    for root in roots:
        known = facts.get(root.ref)
        release = known.released_in if known is not None and known.state is not None else root.released_in
        state = known.state if known is not None and known.state is not None else root.state
        if release is None or state not in RELEASED_STATES:
            reasons.append(f"{root.ref} is {state or 'unknown'} and in no release")
            continue
        pin = pins.get(release.component)
        if pin is None:
            reasons.append(f"{at} pins no {release.component} for XPU")
            continue
        evidence = (f"vLLM pins {release.component} {pin} for XPU at {at}; {root.ref} is in "
                    f"{release.component} {release.version}")
        if pin < release.version:
            reasons.append(evidence.replace(" is in ", " is only in "))
            continue
        if root.remaining:
            return InlineVerdict(w.id, label, False, f"{evidence}, but {root.remaining}: only part of vLLM's "
                                                     f"inline workaround is dead.", partial=True)
        return InlineVerdict(w.id, label, True, f"{evidence}.")
    return InlineVerdict(w.id, label, False, "; ".join(reasons) + ".")


# ------------------------------------------------------------------------------- run


def track(manifest: Manifest, *, mode: str = "normal", client: ClientSettings | None = None,
          cache_dir: Path | None = None, now: datetime | None = None) -> Report:
    """Learn every reference's facts; ``mode`` is ``normal``, ``refresh`` or ``offline``.

    Raises ``NoUsableCache`` offline without a cache, and ``GitHubUnavailable`` when
    GitHub cannot be asked (``refresh``, or no cache to fall back on). Otherwise a
    ``normal`` run that cannot reach GitHub answers from the cache with a ``warning``.
    """
    if client is None:
        client = ClientSettings.from_env()
    now = now or _now()
    cache = Cache.load(cache_dir or environment_cache_dir(), client.base_url)
    if mode == "offline":
        if not cache.usable:
            raise NoUsableCache(f"no cached upstream facts in {cache.path}; run `xpu-workarounds upstream` "
                                f"while GitHub is reachable first")
        return _run(manifest, Source(cache, "offline", now=now), "cache", cache.checked_at or now)
    source = Source(cache, mode, client, now)
    try:
        report = _run(manifest, source, "live", now)
    except GitHubUnavailable as error:
        if mode == "refresh" or not cache.usable:
            raise
        report = _run(manifest, Source(cache, "offline", now=now), "cache", cache.checked_at or now)
        report.warning = (f"{error}; answering from the cache of {_iso(report.checked_at)} "
                          f"({age_text(report.checked_at, now)} old)")
        report.requests = source.sent
        return report
    if not source.sent:
        report.source, report.checked_at = "cache", cache.checked_at or now
    else:
        cache.save(source.used, now)
    return report


def _run(manifest: Manifest, source: Source, label: str, checked_at: datetime) -> Report:
    tracker = Tracker(manifest, source)
    references = tracker.references()
    audit = tracker.inline_audit({facts.ref: facts for facts in references})
    return Report(label, checked_at, references, audit, source.sent)


# ----------------------------------------------------------------------------- write


def write_back(path: Path, report: Report) -> list[str]:
    """Write learned state/released_in/commit into the manifest at ``path``, keeping its
    formatting and comments. Returns one line per change; writes nothing when the result
    would not pass ``lint``. A fix stays unreleased (the workaround in force) until a
    release containing it is known."""
    import tomlkit

    text = path.read_text(encoding="utf-8")
    document = tomlkit.parse(text)
    changes: list[str] = []
    for workaround in document.get("workaround", []):
        for table in workaround.get("upstream", []):
            facts = report.facts(str(table.get("ref")))
            if facts is None or facts.state is None:
                continue
            changes += _update(table, "state", facts.state, f"{workaround['id']}: {facts.ref}")
            if facts.commit:
                changes += _update(table, "commit", facts.commit, f"{workaround['id']}: {facts.ref}")
            if facts.released_in is not None:
                changes += _update(table, "released_in", str(facts.released_in), f"{workaround['id']}: {facts.ref}")
            elif facts.state not in RELEASED_STATES and "released_in" in table:
                del table["released_in"]
                changes.append(f"{workaround['id']}: {facts.ref}: released_in removed ({facts.state})")
    if not changes:
        return []
    updated = tomlkit.dumps(document)
    handle, temporary = tempfile.mkstemp(prefix=".workarounds-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(updated)
        problems = check(Path(temporary))
        if problems:
            raise ValueError("the updated manifest would not pass lint: " + "; ".join(
                str(problem).replace(temporary, str(path)) for problem in problems[:3]))
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return changes


def _update(table: Any, key: str, value: str, where: str) -> list[str]:
    current = table.get(key)
    if current is not None and str(current) == value:
        return []
    table[key] = value
    return [f"{where}: {key} {current if current is not None else '(unset)'} -> {value}"]


def render(report: Report, now: datetime | None = None) -> str:
    """The human-readable report."""
    lines = []
    if report.source == "cache":
        lines.append(f"from the cache, checked {_iso(report.checked_at)} "
                     f"({age_text(report.checked_at, now)} ago)")
    else:
        lines.append(f"checked GitHub at {_iso(report.checked_at)}")
    lines.append("")
    rows = [("REFERENCE", "STATE", "COMMIT", "RELEASED IN")]
    rows += [(f.ref, f.state or "unknown", (f.commit or "-")[:12], str(f.released_in) if f.released_in else "-")
             for f in report.references]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append("")
    lines += [f"{f.ref}: {f.evidence}" for f in report.references]
    if report.inline_audit:
        lines += ["", "vLLM's inline workarounds at vLLM's XPU pins:"]
        for verdict in report.inline_audit:
            word = "partly dead" if verdict.partial else ("dead" if verdict.dead else "needed")
            lines.append(f"  {verdict.workaround} at {verdict.vllm_ref}: {word}: {verdict.evidence}")
    return "\n".join(lines)
