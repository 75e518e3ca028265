"""Learn a run's answers through GraphQL, in a few batched requests, before the run reads them.

The run itself does not change: ``tracking`` decides states and releases from REST-shaped
answers read through a ``Source``. Here the same run is first *rehearsed* against a
``Rehearsal`` source that never sends a request: an answer the run already has (this run,
or the cache as the mode allows) is given; one it lacks is written down as a need, and the
rehearsal goes on (a compare is answered with a guess so the bisection keeps going; anything
else is "not cached" for that reference). Every need of a rehearsal is then learned in one
batch of GraphQL queries (``graphql.send``), put into the ``Source`` under its REST key, and
the run is rehearsed again, until a rehearsal needs nothing new. The real run then reads
every answer from the ``Source``; whatever GraphQL could not give exactly (a history with a
merge commit, more than 100 tag-only commits, an answer of an unexpected shape) or refused to
give (``GraphQLRefused``) is asked through REST as before, so the facts are the same either way.

A compare guess says a tag contains the commit when the tag's commit is not older than it
(GraphQL gives both dates): right for most tags, so most references need one round of
compares; a wrong guess costs one more round, never a wrong fact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from tracker.upstream.cache import Entry, NotCached, Source
from tracker.upstream.clock import iso
from tracker.upstream.errors import GitHubMissing
from tracker.upstream.fields import (
    as_bool,
    as_choice,
    as_int,
    as_sha,
    as_str,
    field_object,
    field_objects,
    optional_date,
    optional_object,
    optional_str,
)
from tracker.upstream.graphql import (
    HISTORY_LIMIT,
    Ask,
    CommitAsk,
    CompareAsk,
    FileAsk,
    GraphQL,
    GraphQLRefused,
    HistoryAsk,
    PullAsk,
    TagsAsk,
)
from tracker.upstream.releases import REPOSITORY_COMPONENTS, tags_path
from tracker.upstream.rest_shapes import (
    CONTAINED,
    REST_STATUS,
    history_nodes,
    rest_commit,
    rest_event,
    rest_file,
    rest_pull,
    rest_tag,
    tag_date,
)

_REPO = r"/repos/(?P<repo>[^/]+/[^/]+)"
PULL = re.compile(_REPO + r"/pulls/(?P<number>\d+)$")
TIMELINE = re.compile(_REPO + r"/issues/(?P<number>\d+)/timeline\?per_page=100$")
TAGS = re.compile(_REPO + r"/git/matching-refs/tags/(?P<prefix>[^?/]+)\?per_page=100$")
COMPARE = re.compile(_REPO + r"/compare/(?P<commit>[0-9a-f]{40})\.\.\.(?P<tag>[^?#]+)\?per_page=100#(?P<object>\w+)$")
CONTENTS = re.compile(_REPO + r"/contents/(?P<path>[^?#]+)(\?ref=(?P<ref>[^#&]+))?(#\w+)?$")
COMMIT = re.compile(_REPO + r"/commits/(?P<sha>[0-9a-f]{40})$")
MAX_ROUNDS = 12
# GraphQL's NOT_FOUND is what REST answers 404 for: the same words whichever way it was learned.
NOT_FOUND = "not found on GitHub (404)"


class Pending(NotCached):
    """A rehearsal met an answer not learned yet (the reference's facts wait for it)."""


@dataclass
class Partial:
    """A list read page by page: the items so far and the cursor of the next page."""

    items: list[dict[str, Any]]
    cursor: str


class Rehearsal(Source):
    """A ``Source`` that sends nothing: what is known answers, the rest becomes a need."""

    def __init__(self, real: Source, planner: Planner) -> None:
        super().__init__(real.cache, real.mode, None, real.now)
        self.real = real
        self.planner = planner

    def _entry(self, url: str, *, what: str, immutable: bool = False, key: str | None = None) -> Entry:
        key = key or self._key(url)
        if key in self.used:
            return self.used[key]
        entry = self.real.known(key)
        if entry is None:
            if key in self.real.missing:
                raise GitHubMissing(f"{what}: {self.real.missing[key]}")
            entry = {"data": self.planner.unknown(key, what), "headers": {}, "fetched_at": iso(self.now),
                     "immutable": immutable}
        self.used[key] = entry
        return entry


class Planner:
    """What one run needs, learned round by round through ``graphql`` into ``source``."""

    def __init__(self, source: Source, graphql: GraphQL) -> None:
        self.source = source
        self.graphql = graphql
        self.needs: dict[Ask, list[str]] = {}
        self.dates: dict[str, str] = {}  # commit or tag object sha -> committedDate
        self.statuses: dict[str, tuple[str, int]] = {}  # compare key -> (REST status, tag-only commits)
        self.partial: dict[str, Partial] = {}  # timeline / tag list key -> pages so far
        self.to_rest: set[str] = set()  # keys GraphQL cannot answer exactly: REST will
        self.refused: str | None = None

    # ---- rehearsal ---------------------------------------------------------------
    def unknown(self, key: str, what: str) -> Any:
        """The rehearsal's answer for a key not known yet (a guess for a compare), after
        writing down what to ask; raises ``Pending`` where no guess can stand in."""
        compare = COMPARE.match(key)
        if compare is not None:
            return self._compare(key, compare)
        ask = None if key in self.to_rest else self._ask(key)
        if ask is not None:
            self.needs.setdefault(ask, []).append(key)
            if isinstance(ask, PullAsk) and ask.repo in REPOSITORY_COMPONENTS:
                self._tags_too(ask.repo)
        raise Pending(f"{what}: not learned yet")

    def _tags_too(self, repo: str) -> None:
        """A landed reference of a releasing repository needs its tags next: ask them now."""
        key = tags_path(repo)
        if key not in self.to_rest and key not in self.source.missing and self.source.known(key) is None:
            ask = self._ask(key)
            if ask is not None and key not in self.needs.get(ask, []):
                self.needs.setdefault(ask, []).append(key)

    def _compare(self, key: str, found: re.Match[str]) -> dict[str, Any]:
        repo, commit, tag = found["repo"], found["commit"], unquote(found["tag"])
        known = self.statuses.get(key)
        if known is not None:
            if key not in self.to_rest:
                self.needs.setdefault(HistoryAsk(repo, tag, known[1]), []).append(key)
            return {"status": known[0], "commits": []}
        if key not in self.to_rest:
            self.needs.setdefault(CompareAsk(repo, tag, commit), []).append(key)
        tagged, landed = self.dates.get(found["object"]), self.dates.get(commit)
        contained = tagged is None or landed is None or tagged >= landed
        return {"status": "ahead" if contained else "diverged", "commits": []}

    def _ask(self, key: str) -> Ask | None:
        for pattern in (PULL, TIMELINE):
            found = pattern.match(key)
            if found is not None:
                partial = self.partial.get(key)
                return PullAsk(found["repo"], int(found["number"]), partial.cursor if partial else None)
        found = TAGS.match(key)
        if found is not None:
            partial = self.partial.get(key)
            return TagsAsk(found["repo"], unquote(found["prefix"]), partial.cursor if partial else None)
        found = CONTENTS.match(key)
        if found is not None:
            return FileAsk(found["repo"], unquote(found["ref"]) if found["ref"] else "HEAD", unquote(found["path"]))
        found = COMMIT.match(key)
        if found is not None:
            return CommitAsk(found["repo"], found["sha"])
        return None

    # ---- rounds --------------------------------------------------------------------
    def learn(self, rehearse: Callable[[Source], object]) -> None:
        """Rehearse, learn what was needed, again, until nothing new is needed."""
        for _ in range(MAX_ROUNDS):
            self.needs = {}
            rehearse(Rehearsal(self.source, self))
            if not self.needs:
                return
            before = self.graphql.exchange.queries
            try:
                answers = self.graphql.send(list(self.needs))
            except GraphQLRefused as refused:
                self.refused = str(refused)
                return
            finally:
                self.source.sent.extend(("graphql", 200) for _ in range(self.graphql.exchange.queries - before))
            for ask, keys in self.needs.items():
                answer = answers.get(ask)
                for key in keys:
                    if answer is None or not self._apply(ask, key, answer.data):
                        self.to_rest.add(key)

    def _apply(self, ask: Ask, key: str, data: Any) -> bool:
        """Put what ``data`` says about ``key`` into the source; False: leave it to REST. A field
        of the wrong type is ``WrongField``: GitHub answered wrongly, REST is not asked instead."""
        if data is None:
            if isinstance(ask, (PullAsk, FileAsk, CommitAsk)) and not getattr(ask, "after", None):
                self.source.missing[key] = NOT_FOUND
                return True
            return False
        where = f"{ask.subject} (GraphQL)"
        if isinstance(ask, PullAsk):
            return self._pull(ask, key, data, where)
        if isinstance(ask, TagsAsk):
            return self._tags(key, data, where)
        if isinstance(ask, CompareAsk):
            return self._status(key, data, where)
        if isinstance(ask, HistoryAsk):
            return self._history(ask, key, data, where)
        if isinstance(ask, FileAsk):
            text = optional_str(data, "text", where)  # null: a binary file
            if as_str(data, "__typename", where) != "Blob" or text is None:
                return False
            self.source.prefetched[key] = rest_file(text)
            return True
        if isinstance(ask, CommitAsk):
            if as_str(data, "__typename", where) != "Commit":
                return False
            self.source.prefetched[key] = rest_commit(data, where)
            return True
        return False

    def _pull(self, ask: PullAsk, key: str, node: dict[str, Any], where: str) -> bool:
        timeline = field_object(node, "timelineItems", where)
        found = PULL.match(key) or TIMELINE.match(key)
        assert found is not None
        timeline_key = f"/repos/{found['repo']}/issues/{found['number']}/timeline?per_page=100"
        pull_key = f"/repos/{found['repo']}/pulls/{found['number']}"
        if ask.after is None:
            pull = rest_pull(node, where)
            labels = field_object(node, "labels", where)
            if as_bool(field_object(labels, "pageInfo", f"{where} labels"), "hasNextPage", f"{where} labels pageInfo"):
                if key == pull_key:  # more labels than a page: REST lists them all
                    return False
            else:
                self.source.prefetched[pull_key] = pull
        events = list(self.partial.pop(timeline_key).items) if ask.after is not None and timeline_key in self.partial \
            else []
        for index, item in enumerate(field_objects(timeline, "nodes", f"{where} timelineItems"), 1):
            at = f"{where} timeline item {index}"
            event = rest_event(item, self.source.cache.base_url, at)
            if event is not None:
                events.append(event)
                self._remember(item, at)
        cursor = _next_page(timeline, f"{where} timelineItems")
        if cursor is not None:
            self.partial[timeline_key] = Partial(events, cursor)
        else:
            self.source.prefetched[timeline_key] = events
        return True

    def _remember(self, item: dict[str, Any], where: str) -> None:
        """Commit dates (for compare guesses) and referenced commits' messages (revert checks)."""
        kind = as_str(item, "__typename", where)
        name = {"MergedEvent": "commit", "ReferencedEvent": "commit", "ClosedEvent": "closer"}.get(kind)
        commit = None if name is None else optional_object(item, name, where)
        if commit is None or (kind == "ClosedEvent" and as_str(commit, "__typename", where) != "Commit"):
            return
        at = f"{where} {name}"
        oid, date = as_sha(commit, "oid", at), optional_date(commit, "committedDate", at)
        if date:
            self.dates[oid] = date
        repository = optional_object(item, "commitRepository", where) if kind == "ReferencedEvent" else None
        if repository is not None:
            name_with_owner = as_str(repository, "nameWithOwner", f"{where} commitRepository")
            self.source.prefetched.setdefault(f"/repos/{name_with_owner}/commits/{oid}", rest_commit(commit, at))

    def _tags(self, key: str, connection: dict[str, Any], where: str) -> bool:
        found = TAGS.match(key)
        assert found is not None
        prefix = unquote(found["prefix"])
        partial = self.partial.pop(key, None)
        tags = list(partial.items) if partial is not None else []
        for index, node in enumerate(field_objects(connection, "nodes", where), 1):
            at = f"{where} tag {index}"
            if as_str(node, "name", at).startswith(prefix):
                tag = rest_tag(node, at)
                tags.append(tag)
                date = tag_date(node, at)
                if date:
                    self.dates[tag["object"]["sha"]] = date
        cursor = _next_page(connection, where)
        if cursor is not None:
            self.partial[key] = Partial(tags, cursor)
        else:
            self.source.prefetched[key] = sorted(tags, key=lambda tag: str(tag["ref"]))
        return True

    def _status(self, key: str, ref: dict[str, Any], where: str) -> bool:
        comparison = optional_object(ref, "compare", where)
        if comparison is None:
            return False
        at = f"{where} compare"
        status = REST_STATUS[as_choice(comparison, "status", at, REST_STATUS)]
        behind = as_int(comparison, "behindBy", at, minimum=0)
        if status in CONTAINED or behind == 0:  # nothing in the tag but not in the commit: no list to read
            self.source.prefetched[key] = {"status": status, "commits": []}
            return True
        if behind > HISTORY_LIMIT:  # REST lists the oldest 100 of them; GraphQL's history the newest
            return False
        self.statuses[key] = (status, behind)
        return True

    def _history(self, ask: HistoryAsk, key: str, ref: dict[str, Any], where: str) -> bool:
        """The tag's ``count`` newest commits are exactly its commits the landed one lacks
        when none of them is a merge (a chain whose common part is its tail): then they
        are what REST's compare lists, oldest first."""
        nodes = history_nodes(ref, where)
        status = self.statuses.get(key)
        if nodes is None or status is None or len(nodes) != ask.count:
            return False
        commits = []
        for index, node in enumerate(nodes, 1):
            at = f"{where} history commit {index}"
            if as_int(field_object(node, "parents", at), "totalCount", f"{at} parents", minimum=0) != 1:
                return False
            commits.append(rest_commit(node, at))
        self.source.prefetched[key] = {"status": status[0], "commits": list(reversed(commits))}
        return True


def _next_page(connection: dict[str, Any], where: str) -> str | None:
    """The cursor of a connection's next page; None on its last page."""
    page = field_object(connection, "pageInfo", where)
    if not as_bool(page, "hasNextPage", f"{where} pageInfo"):
        return None
    return as_str(page, "endCursor", f"{where} pageInfo")


def prefetch(source: Source, graphql: GraphQL, rehearse: Callable[[Source], object]) -> Planner:
    """Learn through ``graphql`` what ``rehearse`` (the run to come) will read from ``source``."""
    planner = Planner(source, graphql)
    planner.learn(rehearse)
    return planner
