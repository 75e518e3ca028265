"""GitHub's GraphQL API for the upstream facts: many pull requests, tag lists, compares and
files per request, answered in the shapes of the REST answers they stand for (``rest_shapes``).

One ``Batch`` is a list of ``Ask``s (a pull request with its timeline, a tag list page, a
compare of a tag with a commit, a tag's recent history, a file at a revision). ``send``
packs them into as few queries as GitHub's limits allow (aliases, grouped per
repository), posts each through PyGithub's requester (same token, base URL, timeout and
retries as the REST reads: ``settings.ClientSettings``), and hands back each ``Ask``'s
answer. GitHub's GraphQL URL comes from the REST base URL the way PyGithub derives it:
``https://api.github.com/graphql``, or ``https://HOST/api/graphql`` for ``.../api/v3``.

Limits (GitHub's, "Rate limits and node limits for the GraphQL API"): every connection
needs ``first``/``last`` of 1-100; a call may ask for at most 500,000 nodes; a query costs
(the number of connections, each weighted by its enclosing connections' sizes) / 100
points, at least 1. Our own, tighter bounds keep a query small enough to answer well within
GitHub's 10 s: ``MAX_PULLS`` pull requests (two connections each) and ``MAX_FIELDS``
aliased fields per query.

Failures: ``GraphQLRefused`` when GraphQL is not there or will not answer (404 on an
Enterprise without it, 401/403, a token without the scopes, a rate limit, a query it
rejects): the caller asks REST instead. A timeout, a dropped connection or 5xx beyond the
retries is ``errors.GitHubUnavailable``, as for REST.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import github
import requests
from github.GithubException import GithubException

from tracker.upstream.client import connect
from tracker.upstream.errors import GitHubUnavailable, classify, printable, scrub
from tracker.upstream.fields import (
    as_int,
    field_objects,
    optional_object,
    optional_str,
    wrong,
)
from tracker.upstream.settings import ClientSettings

MAX_PULLS = 100  # pull requests per query: 2 connections of 100 each, 200 points of weight
MAX_FIELDS = 400  # aliased fields per query (compares, histories, files, tag lists)
PAGE = 100  # GitHub's largest first/last
HISTORY_LIMIT = PAGE  # longest tag-only history read for a cherry-pick search

# The timeline items that decide landed / reverted (state.py reads these kinds).
TIMELINE_ITEM_TYPES = ("MERGED_EVENT", "CLOSED_EVENT", "REOPENED_EVENT", "LABELED_EVENT", "REFERENCED_EVENT",
                       "CROSS_REFERENCED_EVENT")

class GraphQLRefused(Exception):
    """GraphQL is unavailable or refuses (one line, no secret): use REST."""


def graphql_url(settings: ClientSettings) -> str:
    """``https://api.github.com/graphql``; ``https://HOST/api/graphql`` for an Enterprise ``.../api/v3``."""
    base = settings.base_url.rstrip("/")
    return (base.removesuffix("/v3") if base.endswith("/v3") else base) + "/graphql"


def _quote(text: str) -> str:
    return json.dumps(text)  # a GraphQL string literal is a JSON string


# ------------------------------------------------------------------------------ asks


@dataclass(frozen=True)
class Ask:
    """One thing to learn; ``fields()`` is its GraphQL selection inside ``repository(...)``."""

    repo: str  # OWNER/NAME

    @property
    def weight(self) -> int:
        return 1

    @property
    def fragments(self) -> tuple[str, ...]:
        return ()

    @property
    def subject(self) -> str:
        """What is asked, in words (errors name it)."""
        return self.repo

    def selection(self) -> str:
        raise NotImplementedError


# Named fragments: a query names each once, however many pull requests or tags it asks.
FRAGMENTS = {
    "TimelineItem": (
        "fragment TimelineItem on PullRequestTimelineItems { __typename "
        "... on MergedEvent { createdAt actor { login } commit { oid committedDate } } "
        "... on ClosedEvent { createdAt actor { login } closer { __typename ... on Commit { oid committedDate } } } "
        "... on ReopenedEvent { createdAt actor { login } } "
        "... on LabeledEvent { createdAt actor { login } label { name } } "
        "... on ReferencedEvent { createdAt actor { login } commitRepository { nameWithOwner } "
        "commit { oid message committedDate } } "
        "... on CrossReferencedEvent { createdAt actor { login } source { __typename "
        "... on PullRequest { number title body mergedAt repository { nameWithOwner } } "
        "... on Issue { number title body repository { nameWithOwner } } } } }"),
    "PullFacts": (
        "fragment PullFacts on PullRequest { number state merged mergedAt createdAt closedAt updatedAt "
        f"mergeCommit {{ oid }} labels(first: {PAGE}) {{ pageInfo {{ hasNextPage }} nodes {{ name }} }} "
        f"timelineItems(first: {PAGE}, itemTypes: [{', '.join(TIMELINE_ITEM_TYPES)}]) {{ "
        "pageInfo { hasNextPage endCursor } nodes { ...TimelineItem } } }"),
    "TagFacts": (
        "fragment TagFacts on Ref { name target { oid __typename ... on Commit { committedDate } "
        "... on Tag { target { ... on Commit { committedDate } } } } }"),
}


@dataclass(frozen=True)
class PullAsk(Ask):
    number: int
    after: str | None = None  # a later page of the timeline only

    @property
    def weight(self) -> int:
        return 2

    @property
    def fragments(self) -> tuple[str, ...]:
        return ("PullFacts", "TimelineItem") if self.after is None else ("TimelineItem",)

    @property
    def subject(self) -> str:
        return f"{self.repo}#{self.number}"

    def selection(self) -> str:
        if self.after is None:
            return f"pullRequest(number: {self.number}) {{ ...PullFacts }}"
        return (f"pullRequest(number: {self.number}) {{ number "
                f"timelineItems(first: {PAGE}, after: {_quote(self.after)}, itemTypes: [{', '.join(TIMELINE_ITEM_TYPES)}]) "
                "{ pageInfo { hasNextPage endCursor } nodes { ...TimelineItem } } }")


@dataclass(frozen=True)
class TagsAsk(Ask):
    prefix: str  # the release tag prefix, "v"
    after: str | None = None

    @property
    def fragments(self) -> tuple[str, ...]:
        return ("TagFacts",)

    @property
    def subject(self) -> str:
        return f"{self.repo} release tags"

    def selection(self) -> str:
        after = f", after: {_quote(self.after)}" if self.after else ""
        return (f"refs(refPrefix: \"refs/tags/\", query: {_quote(self.prefix)}, first: {PAGE}{after}) {{ "
                "pageInfo { hasNextPage endCursor } nodes { ...TagFacts } }")


@dataclass(frozen=True)
class CompareAsk(Ask):
    tag: str
    commit: str

    @property
    def subject(self) -> str:
        return f"{self.repo} {self.commit[:12]} against {self.tag}"

    def selection(self) -> str:
        return (f"ref(qualifiedName: {_quote('refs/tags/' + self.tag)}) {{ "
                f"compare(headRef: {_quote(self.commit)}) {{ status behindBy }} }}")


@dataclass(frozen=True)
class HistoryAsk(Ask):
    tag: str
    count: int  # 1..100

    @property
    def weight(self) -> int:
        return 1 + self.count // PAGE

    @property
    def subject(self) -> str:
        return f"{self.repo} history of {self.tag}"

    def selection(self) -> str:
        history = (f"history(first: {self.count}) {{ nodes {{ oid message parents(first: 2) {{ totalCount }} }} }}")
        return (f"ref(qualifiedName: {_quote('refs/tags/' + self.tag)}) {{ target {{ __typename "
                f"... on Commit {{ {history} }} ... on Tag {{ target {{ ... on Commit {{ {history} }} }} }} }} }}")


@dataclass(frozen=True)
class FileAsk(Ask):
    revision: str  # "HEAD" (the default branch) or a tag
    path: str

    @property
    def subject(self) -> str:
        return f"{self.repo} {self.path} at {self.revision}"

    def selection(self) -> str:
        return f"object(expression: {_quote(self.revision + ':' + self.path)}) {{ __typename ... on Blob {{ text }} }}"


@dataclass(frozen=True)
class CommitAsk(Ask):
    sha: str

    @property
    def subject(self) -> str:
        return f"{self.repo} commit {self.sha[:12]}"

    def selection(self) -> str:
        return f"object(oid: {_quote(self.sha)}) {{ __typename ... on Commit {{ oid message committedDate }} }}"


@dataclass
class GraphQLAnswer:
    """What GraphQL said about one ``Ask``: ``data`` (None: the object does not exist,
    ``missing`` says why)."""

    data: Any
    missing: str | None = None


@dataclass
class Exchange:
    """Every query sent in a run: how many, and the points GitHub said they cost."""

    queries: int = 0
    points: int = 0
    costs: list[int] = field(default_factory=list)


# ------------------------------------------------------------------------- transport


class GraphQL:
    """Sends batches of ``Ask``s for one run (one PyGithub requester, REST's settings)."""

    def __init__(self, settings: ClientSettings, gh: github.Github | None = None) -> None:
        self.settings = settings
        self.gh = gh if gh is not None else connect(settings, reads_only=True)
        self.url = graphql_url(settings)
        self.exchange = Exchange()

    def send(self, asks: Sequence[Ask]) -> dict[Ask, GraphQLAnswer]:
        answers: dict[Ask, GraphQLAnswer] = {}
        for group in pack(asks):
            answers.update(self._query(group))
        return answers

    def data(self, query: str, where: str = "GitHub GraphQL") -> dict[str, Any]:
        """The ``data`` of one query that asks for no missing object: any error is ``GraphQLRefused``."""
        document = self._post(query)
        self.exchange.queries += 1
        for index, error in enumerate(field_objects(document, "errors", where, optional=True), 1):
            at = f"{where} error {index}"
            raise GraphQLRefused(_refusal(optional_str(error, "type", at), optional_str(error, "message", at)))
        return optional_object(document, "data", where) or {}

    def _query(self, asks: list[Ask]) -> dict[Ask, GraphQLAnswer]:
        repositories: dict[str, list[tuple[str, Ask]]] = {}
        for index, ask in enumerate(asks):
            repositories.setdefault(ask.repo, []).append((f"a{index}", ask))
        parts = ["rateLimit { cost remaining }"]
        for number, (repo, members) in enumerate(repositories.items()):
            owner, _, name = repo.partition("/")
            alias = f"r{number}"
            inner = " ".join(f"{key}: {ask.selection()}" for key, ask in members)
            parts.append(f"{alias}: repository(owner: {_quote(owner)}, name: {_quote(name)}) {{ {inner} }}")
        used = sorted({name for ask in asks for name in ask.fragments})
        document = self._post("query { " + " ".join(parts) + " } " + " ".join(FRAGMENTS[name] for name in used))
        self.exchange.queries += 1
        where = "GitHub GraphQL"
        data = optional_object(document, "data", where) or {}
        missing_at: dict[tuple[str, ...], str] = {}
        for index, error in enumerate(field_objects(document, "errors", where, optional=True), 1):
            at = f"{where} error {index}"
            path = error.get("path")
            if path is not None and not (isinstance(path, list) and all(
                    isinstance(step, (str, int)) and not isinstance(step, bool) for step in path)):
                raise wrong(at, "path", path, "a list of names and indexes")
            kind, message = optional_str(error, "type", at), optional_str(error, "message", at)
            if kind == "NOT_FOUND" and path:
                missing_at[tuple(str(step) for step in path)] = message or "not found"
            else:
                raise GraphQLRefused(_refusal(kind, message))
        limit = optional_object(data, "rateLimit", where)
        if limit is not None:
            cost = as_int(limit, "cost", f"{where} rateLimit", minimum=0)
            self.exchange.points += cost
            self.exchange.costs.append(cost)
        answers: dict[Ask, GraphQLAnswer] = {}
        for number, members in enumerate(repositories.values()):
            alias = f"r{number}"
            scope = optional_object(data, alias, where)
            for key, ask in members:
                why = missing_at.get((alias, key)) or missing_at.get((alias,))
                value = optional_object(scope, key, f"{where} {ask.subject}") if scope is not None else None
                answers[ask] = GraphQLAnswer(value, None if value is not None else (why or "not found"))
        return answers

    def _post(self, query: str) -> dict[str, Any]:
        requester = self.gh.requester
        try:
            status, headers, body = requester.requestJson("POST", self.url, input={"query": query})
        except GithubException as error:
            raise classify(error, self.settings, "GitHub GraphQL") from None
        except requests.RequestException as error:
            raise classify(error, self.settings, "GitHub GraphQL") from None
        try:
            document = json.loads(body) if body else {}
        except ValueError:
            document = {}
        if status in (401, 403, 404, 410, 422) or (status == 200 and not isinstance(document, dict)):
            reason = f"GitHub GraphQL at {self.url.split('//')[-1]} answered {status}"
            raise GraphQLRefused(scrub(reason, self.settings))
        if status >= 400:
            lowered = {str(k).lower(): str(v) for k, v in headers.items()}
            failure = requester.createException(status, lowered, document)
            classified = classify(failure, self.settings, "GitHub GraphQL")
            if status == 429 or isinstance(classified, GitHubUnavailable) and status < 500:
                raise GraphQLRefused(str(classified))
            raise classified
        if not isinstance(document, dict) or ("data" not in document and "errors" not in document):
            raise GraphQLRefused("GitHub GraphQL answered something that is not a GraphQL response")
        return document


def _refusal(kind: str | None, message: str | None) -> str:
    text = printable(message or "", 160)
    return f"GitHub GraphQL refused the query ({printable(kind or 'error', 60)}: {text})"


def pack(asks: Iterable[Ask]) -> list[list[Ask]]:
    """Queries of at most ``MAX_PULLS`` pull requests and ``MAX_FIELDS`` fields, in order."""
    groups: list[list[Ask]] = []
    current: list[Ask] = []
    pulls = 0
    for ask in asks:
        is_pull = isinstance(ask, PullAsk)
        if current and (len(current) >= MAX_FIELDS or (is_pull and pulls >= MAX_PULLS)):
            groups.append(current)
            current, pulls = [], 0
        current.append(ask)
        pulls += is_pull
    if current:
        groups.append(current)
    return groups
