"""One ``upstream`` run: every reference's facts, then the inline audit, from one ``Source``.

Cost: one request per fact, none repeated in a run; see ``cache`` for what is asked again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tracker.model.environment import OutsideVariables
from tracker.model.manifest import Manifest, UpstreamRef
from tracker.model.vocabulary import RELEASED_STATES, Role, State
from tracker.paths import cache_dir as environment_cache_dir
from tracker.upstream.audit import inline_audit
from tracker.upstream.cache import Cache, Mode, NotCached, NoUsableCache, Source, shown
from tracker.upstream.clock import age_text, iso, now
from tracker.upstream.facts import Facts, Learned, Report
from tracker.upstream.failure import GitHubMissing, GitHubUnavailable
from tracker.upstream.fields import WrongField, as_str, field_object
from tracker.upstream.floors import Floors, effective_floors, fixed_floors
from tracker.upstream.releases import Releases
from tracker.upstream.settings import ClientSettings
from tracker.upstream.state import (
    Event,
    Pull,
    classify_issue,
    classify_pr,
    is_issue,
    read_pull,
    read_timeline,
    referenced_after_landing,
    reverted_sha,
)


class Tracker:
    """Learns the facts for a manifest from a ``Source``; one instance per run."""

    def __init__(self, manifest: Manifest, source: Source) -> None:
        self.manifest = manifest
        self.source = source
        self.releases = Releases(source, manifest.sources)

    def references(self) -> list[Facts]:
        """Every reference of the workarounds, then what each [[tracked]] entry waits on (those
        no workaround names too), each once with the ids that name it."""
        seen: dict[str, list[str]] = {}
        first: dict[str, UpstreamRef] = {}
        for w in self.manifest.workarounds:
            for ref in w.upstream:
                seen.setdefault(ref.ref, []).append(w.id)
                first.setdefault(ref.ref, ref)
        for inline in self.manifest.tracked:
            if inline.waits_on is not None:
                seen.setdefault(inline.waits_on, []).append(inline.id)
                first.setdefault(inline.waits_on, UpstreamRef(inline.waits_on, Role.RELATED, State.OPEN))
        return [self.facts(first[name], tuple(seen[name])) for name in seen]

    def facts(self, ref: UpstreamRef, workarounds: tuple[str, ...]) -> Facts:
        try:
            return self._facts(ref, workarounds)
        except (GitHubMissing, NotCached) as error:
            return Facts(ref.ref, None, None, None, f"Could not be learned: {error}.", workarounds, str(error))

    def reverts(self, ref: UpstreamRef, pr: Pull, timeline: list[Event]) -> dict[str, str]:
        """Referenced commit -> the commit it reverts, for commits referenced after the landing.
        A commit never changes, so each costs one request once (then the cache answers)."""
        found: dict[str, str] = {}
        for event in referenced_after_landing(pr, timeline):
            sha = str(event.commit)
            what = f"{ref.ref} referenced commit {sha[:12]}"
            try:
                commit = self.source.get(event.commit_url or f"/repos/{ref.repo}/commits/{sha}", what=what,
                                         immutable=True)
            except (GitHubMissing, NotCached):
                continue  # a commit in a fork that is gone, or not cached offline: not evidence
            message = as_str(field_object(commit, "commit", what), "message", f"{what} commit")
            reverted = reverted_sha(message)
            if reverted is not None:
                found[sha] = reverted
        return found

    def _facts(self, ref: UpstreamRef, workarounds: tuple[str, ...]) -> Facts:
        issue_path = f"/repos/{ref.repo}/issues/{ref.number}"
        if _known_issue((self.source.cache.entries.get(issue_path) or {}).get("data")):
            # Known to be an issue from an earlier run: no 404 from /pulls/N first (404s are not cached).
            issue = self.source.get(issue_path, what=ref.ref)
            if is_issue(issue, ref.ref):
                return self._issue_facts(ref, workarounds, issue)
        try:
            pr = self.source.get(f"/repos/{ref.repo}/pulls/{ref.number}", what=ref.ref)
        except (GitHubMissing, NotCached) as error:
            # Not a pull request: an issue (an Intel alignment tracker, a Triton issue) is open or closed.
            try:
                issue = self.source.get(issue_path, what=ref.ref)
            except (GitHubMissing, NotCached):
                raise error from None
            if not is_issue(issue, ref.ref):
                raise
            return self._issue_facts(ref, workarounds, issue)
        pr = read_pull(pr, ref.ref)
        timeline = read_timeline(self.source.get_list(f"/repos/{ref.repo}/issues/{ref.number}/timeline?per_page=100",
                                                      what=f"{ref.ref} timeline"), f"{ref.ref} timeline")
        state, commit, story = classify_pr(ref, pr, timeline, self.reverts(ref, pr, timeline))
        if state not in RELEASED_STATES or commit is None:
            return Facts(ref.ref, state, commit, None, story, workarounds)
        released, how = self.releases.first_release(ref, commit)
        return Facts(ref.ref, state, commit, released, f"{story}; {how}.", workarounds)

    @staticmethod
    def _issue_facts(ref: UpstreamRef, workarounds: tuple[str, ...], issue: object) -> Facts:
        return Facts(ref.ref, *classify_issue(issue, ref.ref), workarounds)


def _known_issue(data: Any) -> bool:
    """A stored answer of ``/issues/N`` that looks like an issue's (read as one, field by field, later)."""
    return isinstance(data, dict) and data.get("pull_request") is None and "number" in data


@contextmanager
def _answers_of(source: Source) -> Iterator[None]:
    """A field of the wrong type in an answer (``WrongField``) is GitHub answering wrongly: the run
    learns nothing (``GitHubUnavailable`` naming the host, or the cache offline)."""
    try:
        yield
    except WrongField as error:
        where = f"GitHub at {source.client.host}" if source.client is not None else \
            f"the upstream cache {source.cache.path}"
        raise GitHubUnavailable(f"{where} answered wrongly: {error}") from None


def track(manifest: Manifest, *, mode: Mode | str = Mode.NORMAL, client: ClientSettings | None = None,
          cache_dir: Path | None = None, now: datetime | None = None, graphql: bool | None = None) -> Report:
    """Learn every reference's facts; ``mode`` is ``normal``, ``refresh`` or ``offline``.

    ``graphql``: learn what is not cached through GitHub's GraphQL API first, in a few
    batched requests (``prefetch``); REST answers whatever it did not (all of it when
    GraphQL is unavailable or refuses). The facts are the same either way. None: as
    ``XPU_WORKAROUNDS_GITHUB_API`` says (``rest``: REST only; default ``graphql``).

    Raises ``NoUsableCache`` offline without a cache, and ``GitHubUnavailable`` when
    GitHub cannot be asked (``refresh``: the cache is left as it was; or no cache to fall
    back on), saying which. Otherwise a ``normal`` run that cannot reach GitHub answers
    from the cache with a ``warning``.
    """
    mode = Mode(mode)
    if client is None:
        client = ClientSettings.from_env()
    graphql = _graphql_wanted(graphql)
    at = now or _now()
    cache = Cache.load(cache_dir or Path(environment_cache_dir()), client.base_url)
    if mode is Mode.OFFLINE:
        if not cache.usable:
            raise NoUsableCache(cache.problem or f"no cached upstream facts in {shown(cache.path)} yet")
        return _from_cache(manifest, cache, at)
    source = Source(cache, mode, client, at)
    report = _live(manifest, cache, source, mode, client, graphql, at)
    if cache.problem:
        report.warning = "; ".join(filter(None, [cache.problem, report.warning]))
    return report


def _live(manifest: Manifest, cache: Cache, source: Source, mode: Mode, client: ClientSettings, graphql: bool,
          at: datetime) -> Report:
    try:
        with _answers_of(source):
            learned = _prefetch(source, client, lambda rehearsal: _run(manifest, rehearsal, "live", at)) \
                if graphql else None
            report = _run(manifest, source, "live", at)
        if learned is not None:
            report.graphql = learned
    except GitHubUnavailable as error:
        if mode is Mode.REFRESH or not cache.usable:
            kept = "the cache is left as it was" if mode is Mode.REFRESH else "and no usable cache"
            raise GitHubUnavailable(f"{error}; {kept}") from None
        report = _from_cache(manifest, cache, at)
        report.warning = (f"{error}; answering from the cache of {iso(report.checked_at)} "
                          f"({age_text(report.checked_at, at)} old)")
        report.requests = source.sent
        return report
    learned_any = any(facts.state is not None for facts in report.references) or not report.references
    if not source.sent and cache.usable and source.used:
        report.source, report.checked_at = "cache", cache.checked_at or at
    elif source.sent and learned_any:  # a run that learned nothing leaves the cache as it was
        try:
            cache.save(source.used, at)
        except OSError as error:  # the answer stands; only the next run's head start is lost
            report.warning = f"the upstream cache was not saved: {error.strerror or error} ({cache.path})"
    return report


_now = now  # ``track``'s keyword ``now`` shadows the clock inside it


@dataclass
class Fresh:
    """What the retirement run judges with: every reference's facts and the effective floors."""

    report: Report
    floors: Floors


def learn(manifest: Manifest, *, client: ClientSettings, cache_dir: Path | None = None,
          mode: Mode | str = Mode.REFRESH, at: datetime | None = None, graphql: bool | None = None) -> Fresh:
    """Every reference's facts and the floors ``manifest``'s policy gives, from one ``Source``
    (``refresh``: every answer that can change revalidated). Raises ``GitHubUnavailable``
    when GitHub cannot be asked, and ``NoUsableCache`` offline without a cache; the cache
    is saved only after a run that succeeded. ``graphql`` as for ``track``."""
    mode = Mode(mode)
    at = at or _now()
    cache = Cache.load(cache_dir or Path(environment_cache_dir()), client.base_url)
    if mode is Mode.OFFLINE and not cache.usable:
        raise NoUsableCache(cache.problem or f"no cached upstream facts in {shown(cache.path)} yet")
    source = Source(cache, mode, client if mode is not Mode.OFFLINE else None, at)
    learned = None
    with _answers_of(source):
        if mode is not Mode.OFFLINE and _graphql_wanted(graphql):
            learned = _prefetch(source, client, lambda rehearsal: _judged(manifest, rehearsal))
        references, floors = _judged(manifest, source)
    label, checked = ("live", at) if source.sent else ("cache", cache.checked_at or at)
    if source.sent:
        cache.save(source.used, at)
    report = Report(label, checked, references, [], source.sent)
    report.graphql = learned
    report.warning = cache.problem
    return Fresh(report, floors)


def _judged(manifest: Manifest, source: Source) -> tuple[list[Facts], Floors]:
    tracker = Tracker(manifest, source)
    references = tracker.references()
    try:
        floors = effective_floors(manifest, tracker.releases)
    except (GitHubMissing, NotCached) as error:
        floors = fixed_floors(manifest, f"the support policy could not be applied ({error})")
    return references, floors


def _graphql_wanted(graphql: bool | None) -> bool:
    if graphql is None:
        return OutsideVariables.from_env().github_api != "rest"
    return graphql


def _prefetch(source: Source, client: ClientSettings, rehearse: Callable[[Source], object]) -> Learned:
    """Learn through GraphQL what ``rehearse`` (the run to come) reads (see ``prefetch``)."""
    from tracker.upstream.graphql import GraphQL
    from tracker.upstream.prefetch import prefetch

    transport = GraphQL(client)
    planner = prefetch(source, transport, rehearse)
    return Learned(transport.exchange.queries, transport.exchange.points, planner.refused, len(planner.to_rest))


def _from_cache(manifest: Manifest, cache: Cache, at: datetime) -> Report:
    source = Source(cache, Mode.OFFLINE, at=at)
    with _answers_of(source):
        return _run(manifest, source, "cache", cache.checked_at or at)


def _run(manifest: Manifest, source: Source, label: str, checked_at: datetime) -> Report:
    tracker = Tracker(manifest, source)
    references = tracker.references()
    audit = inline_audit(manifest, tracker.releases, {facts.ref: facts for facts in references})
    return Report(label, checked_at, references, audit, source.sent)
