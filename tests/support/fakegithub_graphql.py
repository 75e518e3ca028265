"""The stand-in GitHub's GraphQL endpoint: ``POST /graphql`` (and ``/api/graphql``, where
GitHub Enterprise Server serves it), answering the subset of GitHub's schema that
``tracker.upstream.graphql`` uses FROM THE SAME ``Repo`` DATA as the REST routes of
tests/support/fakegithub.py.

The schema below copies GitHub's names, types and arguments (checked against GitHub's
public schema, octokit/graphql-schema) for the fields it keeps; graphql-core parses,
validates and executes queries against it, so a query naming a field GitHub does not have
fails here as it would there. Like GitHub, the endpoint

- requires ``first`` or ``last`` (1-100) on every connection and refuses a call that could
  return more than 500,000 nodes (``MAX_NODE_LIMIT_EXCEEDED``);
- computes a query's cost the documented way: every connection counts as many requests as
  its enclosing connections could return objects (their ``first``/``last`` multiplied),
  the sum divided by 100 and rounded, at least 1; ``rateLimit { cost remaining ... }``
  answers it, ``X-RateLimit-*`` headers (resource ``graphql``) carry the budget, and a
  query costing more than what remains is refused (``RATE_LIMITED``) without being run;
- answers a missing pull request with ``data: null`` at its path and a ``NOT_FOUND`` error.

Switches (``graphql(server)`` returns them): ``mode`` ``"on"`` (default), ``"absent"``
(404, an Enterprise without GraphQL), ``"forbidden"`` (403, a token without the scope),
``"scope-errors"`` (200 with an ``INSUFFICIENT_SCOPES`` error, as GitHub answers a
token whose scopes do not cover the fields); ``limit``/``remaining`` (points).
Per-request latency for benchmarks is ``server.latency`` (tests/support/fakegithub.py).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    build_schema,
    execute,
    parse,
    print_ast,
    validate,
    value_from_ast_untyped,
)
from werkzeug.wrappers import Request

from support.fakegithub import BOT, Commit, Event, FakeGitHub, PullRequest, Reply, Repo, _token, iso

GRAPHQL_RATE_LIMIT = 5000
MAX_NODES = 500_000
MAX_PAGE = 100

SCHEMA_TEXT = """
scalar DateTime
scalar GitObjectID
scalar GitTimestamp
scalar URI

enum PullRequestState { CLOSED MERGED OPEN }
enum ComparisonStatus { AHEAD BEHIND DIVERGED IDENTICAL }
enum PullRequestTimelineItemsItemType {
  CLOSED_EVENT CROSS_REFERENCED_EVENT LABELED_EVENT MERGED_EVENT REFERENCED_EVENT REOPENED_EVENT UNLABELED_EVENT
}

type Query {
  repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
  rateLimit(dryRun: Boolean = false): RateLimit
  viewer: User!
}

type RateLimit { cost: Int! limit: Int! nodeCount: Int! remaining: Int! resetAt: DateTime! used: Int! }

type PageInfo { endCursor: String hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String }

interface Actor { login: String! }
type User implements Actor { login: String! }
type Bot implements Actor { login: String! }

type Repository {
  name: String!
  nameWithOwner: String!
  pullRequest(number: Int!): PullRequest
  ref(qualifiedName: String!): Ref
  refs(refPrefix: String!, query: String, first: Int, after: String, last: Int, before: String): RefConnection
  object(expression: String, oid: GitObjectID): GitObject
}

type Label { name: String! }
type LabelConnection { nodes: [Label] pageInfo: PageInfo! totalCount: Int! }

type PullRequest {
  number: Int!
  title: String!
  body: String!
  state: PullRequestState!
  merged: Boolean!
  mergedAt: DateTime
  createdAt: DateTime!
  closedAt: DateTime
  updatedAt: DateTime!
  mergeCommit: Commit
  repository: Repository!
  labels(first: Int, after: String, last: Int, before: String): LabelConnection
  timelineItems(first: Int, after: String, last: Int, before: String, since: DateTime, skip: Int,
                itemTypes: [PullRequestTimelineItemsItemType!]): PullRequestTimelineItemsConnection!
}

type Issue { number: Int! title: String! body: String! repository: Repository! }
union ReferencedSubject = Issue | PullRequest
union Closer = Commit | PullRequest

type MergedEvent { actor: Actor commit: Commit createdAt: DateTime! }
type ClosedEvent { actor: Actor closer: Closer createdAt: DateTime! }
type ReopenedEvent { actor: Actor createdAt: DateTime! }
type LabeledEvent { actor: Actor createdAt: DateTime! label: Label! }
type UnlabeledEvent { actor: Actor createdAt: DateTime! label: Label! }
type ReferencedEvent {
  actor: Actor commit: Commit commitRepository: Repository! createdAt: DateTime! isCrossRepository: Boolean!
}
type CrossReferencedEvent { actor: Actor createdAt: DateTime! source: ReferencedSubject! }
union PullRequestTimelineItems = ClosedEvent | CrossReferencedEvent | LabeledEvent | MergedEvent | ReferencedEvent
  | ReopenedEvent | UnlabeledEvent
type PullRequestTimelineItemsConnection {
  nodes: [PullRequestTimelineItems] pageInfo: PageInfo! totalCount: Int!
}

interface GitObject { oid: GitObjectID! }
type Commit implements GitObject {
  oid: GitObjectID!
  message: String!
  committedDate: DateTime!
  history(first: Int, after: String, last: Int, before: String, path: String, since: GitTimestamp,
          until: GitTimestamp): CommitHistoryConnection!
  parents(first: Int, after: String, last: Int, before: String): CommitConnection!
}
type Tag implements GitObject { oid: GitObjectID! name: String! target: GitObject! }
type Blob implements GitObject { oid: GitObjectID! text: String isBinary: Boolean byteSize: Int! }
type CommitHistoryConnection { nodes: [Commit] pageInfo: PageInfo! totalCount: Int! }
type CommitConnection { nodes: [Commit] pageInfo: PageInfo! totalCount: Int! }

type Ref { name: String! prefix: String! target: GitObject compare(headRef: String!): Comparison }
type RefConnection { nodes: [Ref] pageInfo: PageInfo! totalCount: Int! }

type Comparison {
  status: ComparisonStatus!
  aheadBy: Int!
  behindBy: Int!
  commits(first: Int, after: String, last: Int, before: String): ComparisonCommitConnection!
}
type ComparisonCommitConnection { nodes: [Commit] pageInfo: PageInfo! totalCount: Int! }
"""

SCHEMA: GraphQLSchema = build_schema(SCHEMA_TEXT)
_ITEM_TYPES = {"merged": "MERGED_EVENT", "closed": "CLOSED_EVENT", "reopened": "REOPENED_EVENT",
               "labeled": "LABELED_EVENT", "unlabeled": "UNLABELED_EVENT", "referenced": "REFERENCED_EVENT",
               "cross-referenced": "CROSS_REFERENCED_EVENT"}
_TYPENAMES = {"MERGED_EVENT": "MergedEvent", "CLOSED_EVENT": "ClosedEvent", "REOPENED_EVENT": "ReopenedEvent",
              "LABELED_EVENT": "LabeledEvent", "UNLABELED_EVENT": "UnlabeledEvent",
              "REFERENCED_EVENT": "ReferencedEvent", "CROSS_REFERENCED_EVENT": "CrossReferencedEvent"}


@dataclass
class GraphQLSwitches:
    mode: str = "on"  # on | absent | forbidden | scope-errors
    limit: int = GRAPHQL_RATE_LIMIT
    remaining: int = GRAPHQL_RATE_LIMIT
    costs: list[int] = field(default_factory=list)  # the cost of every query answered

    @property
    def used(self) -> int:
        return self.limit - self.remaining


def graphql(server: FakeGitHub) -> GraphQLSwitches:
    """The GraphQL switches and point budget of ``server`` (created on first use)."""
    switches = server.__dict__.get("_graphql")
    if switches is None:
        switches = server.__dict__["_graphql"] = GraphQLSwitches()
    return switches


class Refused(Exception):
    """A query GitHub refuses before running it: ``(type, message)``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Missing(Exception):
    """A field whose object does not exist: GitHub's ``NOT_FOUND`` error at that path."""


# ------------------------------------------------------------------------------- cost


def _named(type_: Any) -> Any:
    while isinstance(type_, (GraphQLNonNull, GraphQLList)):
        type_ = type_.of_type
    return type_


def measure(document: Any, variables: dict[str, Any]) -> tuple[int, int]:
    """(cost, nodes) of the query, GitHub's way; raises ``Refused`` for a missing or
    out-of-range ``first``/``last`` and for more than 500,000 nodes."""
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    requests = 0
    nodes = 0

    def walk(selection: SelectionSetNode | None, parent: Any, multiplier: int) -> None:
        nonlocal requests, nodes
        if selection is None:
            return
        for item in selection.selections:
            if isinstance(item, InlineFragmentNode):
                condition = SCHEMA.get_type(item.type_condition.name.value) if item.type_condition else parent
                walk(item.selection_set, condition, multiplier)
            elif isinstance(item, FragmentSpreadNode):
                fragment = fragments[item.name.value]
                walk(fragment.selection_set, SCHEMA.get_type(fragment.type_condition.name.value), multiplier)
            elif isinstance(item, FieldNode):
                fields = getattr(parent, "fields", {})
                definition = fields.get(item.name.value)
                if definition is None:  # __typename
                    continue
                target = _named(definition.type)
                inner = multiplier
                if target.name.endswith("Connection"):
                    arguments = {a.name.value: value_from_ast_untyped(a.value, variables) for a in item.arguments}
                    size = arguments.get("first") if arguments.get("first") is not None else arguments.get("last")
                    if size is None:
                        raise Refused("MISSING_PAGINATION_BOUNDARIES",
                                      f"You must provide a `first` or `last` value to properly paginate the "
                                      f"`{item.name.value}` connection.")
                    if not 1 <= int(size) <= MAX_PAGE:
                        raise Refused("EXCESSIVE_PAGINATION",
                                      f"Requesting {size} records on the `{item.name.value}` connection exceeds "
                                      f"the `first` limit of {MAX_PAGE} records.")
                    requests += multiplier
                    inner = multiplier * int(size)
                    nodes += inner
                if isinstance(target, GraphQLObjectType) or hasattr(target, "fields"):
                    walk(item.selection_set, target, inner)
                elif item.selection_set is not None:  # a union: its fragments name the types
                    walk(item.selection_set, target, inner)

    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            walk(definition.selection_set, SCHEMA.query_type, 1)
    if nodes > MAX_NODES:
        raise Refused("MAX_NODE_LIMIT_EXCEEDED",
                      f"This query requests up to {nodes:,} possible nodes which exceeds the maximum limit of "
                      f"{MAX_NODES:,}.")
    return max(1, round(requests / 100)), nodes


# --------------------------------------------------------------------------- objects


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:{index}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(base64.b64decode(cursor).decode().partition(":")[2]) + 1
    except ValueError:
        raise GraphQLError(f"`{cursor}` does not appear to be a valid cursor.") from None


def connection(items: list[Any], first: int | None = None, after: str | None = None, last: int | None = None,
               before: str | None = None) -> dict[str, Any]:
    start = _offset(after)
    end = _offset(before) - 1 if before else len(items)
    window = list(enumerate(items))[start:end]
    if first is not None:
        window = window[:first]
    elif last is not None:
        window = window[-last:]
    shown = [item for _, item in window]
    return {"nodes": shown, "totalCount": len(items),
            "pageInfo": {"hasNextPage": bool(window) and window[-1][0] < len(items) - 1,
                         "hasPreviousPage": bool(window) and window[0][0] > 0,
                         "startCursor": _cursor(window[0][0]) if window else None,
                         "endCursor": _cursor(window[-1][0]) if window else None}}


def _actor(login: str) -> dict[str, Any]:
    return {"__typename": "Bot" if login.endswith("bot") else "User", "login": login}


class GitCommit:
    graphql_type = "Commit"

    def __init__(self, repo: Repo, commit: Commit) -> None:
        self.repo, self.commit = repo, commit
        self.oid, self.message, self.committedDate = commit.sha, commit.message, iso(commit.date)

    def history(self, info: Any, **page: Any) -> dict[str, Any]:
        page.pop("path", None), page.pop("since", None), page.pop("until", None)
        return connection([GitCommit(self.repo, c) for c in self.repo.history(self.commit.sha)], **page)

    def parents(self, info: Any, **page: Any) -> dict[str, Any]:
        return connection([GitCommit(self.repo, self.repo.commits[p]) for p in self.commit.parents], **page)


class Blob:
    graphql_type = "Blob"

    def __init__(self, text: str) -> None:
        raw = text.encode()
        self.text, self.isBinary, self.byteSize = text, False, len(raw)
        self.oid = hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()


class GitRef:
    def __init__(self, repo: Repo, prefix: str, name: str, sha: str) -> None:
        self.repo, self.prefix, self.name, self.sha = repo, prefix, name, sha

    def target(self, info: Any) -> GitCommit:
        return GitCommit(self.repo, self.repo.commits[self.sha])

    def compare(self, info: Any, headRef: str) -> dict[str, Any] | None:
        head = self.repo.resolve(headRef)
        if head is None:
            return None
        # The same computation as the REST compare route (base: this ref, head: headRef).
        result = self.repo.compare(self.sha, head)
        ahead = [GitCommit(self.repo, c) for c in result["ahead"]]
        return {"status": result["status"].upper(), "aheadBy": len(ahead), "behindBy": result["behind_by"],
                "commits": lambda info, **page: connection(ahead, **page)}


class Pull:
    graphql_type = "PullRequest"

    def __init__(self, server: FakeGitHub, repo: Repo, pr: PullRequest) -> None:
        self.server, self.repo, self.pr = server, repo, pr
        self.number, self.title, self.body = pr.number, pr.title, pr.body
        self.state = "MERGED" if pr.merged else pr.state.upper()
        self.merged = pr.merged
        self.mergedAt = iso(pr.merged_at) if pr.merged_at else None
        self.createdAt, self.updatedAt = iso(pr.created_at), iso(pr.updated_at)
        self.closedAt = iso(pr.closed_at) if pr.closed_at else None
        commit = repo.commits.get(pr.merge_commit_sha or "") if pr.merged else None
        self.mergeCommit = GitCommit(repo, commit) if commit is not None else None

    def repository(self, info: Any) -> Repository:
        return Repository(self.server, self.repo)

    def labels(self, info: Any, **page: Any) -> dict[str, Any]:
        return connection([{"name": name} for name in self.pr.labels], **page)

    def timelineItems(self, info: Any, itemTypes: list[str] | None = None, since: Any = None,
                      skip: int | None = None, **page: Any) -> dict[str, Any]:
        items = [self.item(e) for e in self.repo.events.get(self.pr.number, [])
                 if _ITEM_TYPES.get(e.event) and (itemTypes is None or _ITEM_TYPES[e.event] in itemTypes)]
        return connection(items[skip or 0:], **page)

    def item(self, event: Event) -> dict[str, Any]:
        kind = _ITEM_TYPES[event.event]
        item: dict[str, Any] = {"__typename": _TYPENAMES[kind], "createdAt": iso(event.created_at),
                                "actor": _actor(event.actor)}
        commit = self.repo.commits.get(event.commit_id or "")
        if kind in ("MERGED_EVENT", "REFERENCED_EVENT"):
            item["commit"] = GitCommit(self.repo, commit) if commit is not None else None
            item["isCrossRepository"] = False
            item["commitRepository"] = Repository(self.server, self.repo)
        elif kind == "CLOSED_EVENT":
            item["closer"] = GitCommit(self.repo, commit) if commit is not None else None
        elif kind in ("LABELED_EVENT", "UNLABELED_EVENT"):
            item["label"] = {"name": event.label}
        elif kind == "CROSS_REFERENCED_EVENT" and event.source is not None:
            origin = self.server.repo(event.source[0], event.source[1])
            item["source"] = Pull(self.server, origin, origin.pulls[event.source[2]])
        return item


class Repository:
    def __init__(self, server: FakeGitHub, repo: Repo) -> None:
        self.server, self.repo = server, repo
        self.name, self.nameWithOwner = repo.name, repo.full_name

    def pullRequest(self, info: Any, number: int) -> Pull:
        if number not in self.repo.pulls or self.repo.pulls[number].issue:
            raise Missing(f"Could not resolve to a PullRequest with the number of {number}.")
        return Pull(self.server, self.repo, self.repo.pulls[number])

    def ref(self, info: Any, qualifiedName: str) -> GitRef | None:
        for prefix, table in (("refs/tags/", self.repo.tags), ("refs/heads/", self.repo.branches)):
            if qualifiedName.startswith(prefix) and qualifiedName[len(prefix):] in table:
                name = qualifiedName[len(prefix):]
                return GitRef(self.repo, prefix, name, table[name])
        return None

    def refs(self, info: Any, refPrefix: str, query: str | None = None, **page: Any) -> dict[str, Any]:
        tables = {"refs/tags/": self.repo.tags, "refs/heads/": self.repo.branches}
        if refPrefix not in tables:
            raise GraphQLError(f"refPrefix must be one of refs/tags/, refs/heads/ here, not {refPrefix!r}")
        names = sorted(name for name in tables[refPrefix] if query is None or query in name)
        return connection([GitRef(self.repo, refPrefix, name, tables[refPrefix][name]) for name in names], **page)

    def object(self, info: Any, expression: str | None = None, oid: str | None = None) -> Any:
        if oid is not None:
            return GitCommit(self.repo, self.repo.commits[oid]) if oid in self.repo.commits else None
        revision, colon, path = (expression or "").partition(":")
        sha = self.repo.resolve(self.repo.default_branch if revision in ("", "HEAD") else revision)
        if sha is None:
            return None
        if not colon:
            return GitCommit(self.repo, self.repo.commits[sha])
        text = self.repo.commits[sha].files.get(path)
        return Blob(text) if text is not None else None


def _type_of(value: Any, info: Any, abstract: Any) -> str:
    return value["__typename"] if isinstance(value, dict) else type(value).graphql_type  # type: ignore[no-any-return]


for _name in ("Actor", "GitObject", "ReferencedSubject", "Closer", "PullRequestTimelineItems"):
    SCHEMA.type_map[_name].resolve_type = _type_of  # type: ignore[attr-defined]


def _field(source: Any, info: Any, **arguments: Any) -> Any:
    name = info.field_name
    value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
    return value(info, **arguments) if callable(value) else value


class Root:
    def __init__(self, server: FakeGitHub, switches: GraphQLSwitches, cost: int, nodes: int,
                 token: str | None = None) -> None:
        self.server, self.switches, self.cost, self.nodes, self.token = server, switches, cost, nodes, token

    def viewer(self, info: Any) -> dict[str, Any]:
        """The token's own user: the bot, for every token (an installation token's too, unlike GET /user)."""
        if self.token is None:
            raise GraphQLError("This endpoint requires you to be authenticated.")
        return {"login": BOT}

    def repository(self, info: Any, owner: str, name: str, followRenames: bool = True) -> Repository:
        key = f"{owner}/{name}".lower()
        if key not in self.server.repos:
            raise Missing(f"Could not resolve to a Repository with the name '{owner}/{name}'.")
        return Repository(self.server, self.server.repos[key])

    def rateLimit(self, info: Any, dryRun: bool = False) -> dict[str, Any]:
        return {"cost": self.cost, "limit": self.switches.limit, "nodeCount": self.nodes,
                "remaining": self.switches.remaining, "used": self.switches.used,
                "resetAt": iso(datetime.fromtimestamp(self.server.rate_limit_reset, UTC))}


# ----------------------------------------------------------------------------- route


def _headers(server: FakeGitHub, switches: GraphQLSwitches) -> dict[str, str]:
    return {"X-RateLimit-Limit": str(switches.limit), "X-RateLimit-Remaining": str(max(0, switches.remaining)),
            "X-RateLimit-Used": str(switches.used), "X-RateLimit-Reset": str(server.rate_limit_reset),
            "X-RateLimit-Resource": "graphql"}


def answer(server: FakeGitHub, request: Request) -> Reply:
    switches = graphql(server)
    if switches.mode == "absent":
        return Reply(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, costed=False)
    if switches.mode == "forbidden":
        return Reply(403, {"message": "Resource not accessible by integration",
                           "documentation_url": "https://docs.github.com/graphql"}, costed=False)
    try:
        payload = request.get_json(force=True, silent=True) or {}
        document, problems = _parsed(str(payload.get("query") or ""))
    except GraphQLError as error:
        return Reply(200, {"errors": [{"message": error.message, "type": "SYNTAX_ERROR"}]}, costed=False)
    variables = payload.get("variables") or {}
    if problems:
        return Reply(200, {"errors": [{"message": message, "type": "undefinedField"} for message in problems]},
                     _headers(server, switches), costed=False)
    try:
        cost, nodes = measure(document, variables)
    except Refused as refused:
        return Reply(200, {"errors": [{"type": refused.kind, "message": str(refused)}]},
                     _headers(server, switches), costed=False)
    if switches.mode == "scope-errors":
        return Reply(200, {"errors": [{"type": "INSUFFICIENT_SCOPES", "message": "Your token has not been granted "
                                       "the required scopes to execute this query."}]},
                     _headers(server, switches), costed=False)
    if cost > switches.remaining:
        return Reply(200, {"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user ID 1."}]},
                     _headers(server, switches), costed=False)
    switches.remaining -= cost
    switches.costs.append(cost)
    root = Root(server, switches, cost, nodes, _token(request.headers.get("Authorization")))
    result = execute(SCHEMA, document, root_value=root, variable_values=variables,
                     field_resolver=_field)
    body: dict[str, Any] = {"data": result.data}
    if result.errors:
        body["errors"] = [_error(e) for e in result.errors]
    return Reply(200, body, _headers(server, switches), costed=False)


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> tuple[Any, tuple[str, ...]]:
    """The document of a query and what validating it found, once per query text (a client sends
    the same query again run after run; nothing reads or answers it differently the second time)."""
    document = parse(text)
    return document, tuple(problem.message for problem in _validate(text, document))


_LITERALS = re.compile(r'"(?:[^"\\]|\\.)*"|\b\d+\b')


@functools.lru_cache(maxsize=256)
def _validate_shape(shape: str) -> tuple[str, ...]:
    return tuple(problem.message for problem in validate(SCHEMA, parse(shape)))


def _validate(text: str, document: Any) -> list[GraphQLError]:
    """graphql-core validates in pure Python, a visitor per node: seconds for a query of
    hundreds of aliases. Each aliased field under a top-level field is validated on its
    own with the fragments it uses, once per shape (strings and numbers blanked, their
    types kept): the same checks for queries without variables, as the client sends."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    fragments = {d.name.value: print_ast(d) for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    if len(operations) != 1 or "$" in text:
        return list(validate(SCHEMA, document))
    problems: list[GraphQLError] = []
    for top in operations[0].selection_set.selections:
        if not isinstance(top, FieldNode):
            return list(validate(SCHEMA, document))
        head = print_ast(FieldNode(name=top.name, arguments=top.arguments, directives=(), alias=None))
        children = top.selection_set.selections if top.selection_set else ()
        pieces = [f"{head} {{ {print_ast(_unaliased(child))} }}" for child in children] or [print_ast(top)]
        for piece in set(pieces):
            used: list[str] = []
            pending = _SPREAD.findall(piece)
            while pending:
                name = pending.pop()
                if name not in used and name in fragments:
                    used.append(name)
                    pending += _SPREAD.findall(fragments[name])
            whole = f"query {{ {piece} }} " + " ".join(fragments[name] for name in sorted(used))
            shape = _LITERALS.sub(lambda m: '""' if m.group().startswith('"') else "1", whole)
            problems += [GraphQLError(message) for message in _validate_shape(shape)]
    return problems


def _unaliased(node: Any) -> Any:
    if not isinstance(node, FieldNode):
        return node
    return FieldNode(name=node.name, arguments=node.arguments, directives=node.directives, alias=None,
                     selection_set=node.selection_set)


_SPREAD = re.compile(r"\.\.\.\s*(?!on\b)([_A-Za-z]\w*)")


def _error(error: GraphQLError) -> dict[str, Any]:
    formatted: dict[str, Any] = {"message": error.message, "path": error.path,
                                 "locations": [{"line": loc.line, "column": loc.column} for loc in error.locations or []]}
    if isinstance(error.original_error, Missing):
        formatted["type"] = "NOT_FOUND"
    return formatted


@FakeGitHub.route("POST", "/graphql")
def post_graphql(server: FakeGitHub, request: Request) -> Reply:
    return answer(server, request)


@FakeGitHub.route("POST", "/api/graphql")
def post_enterprise_graphql(server: FakeGitHub, request: Request) -> Reply:
    """GitHub Enterprise Server: REST under /api/v3, GraphQL at /api/graphql."""
    return answer(server, request)
