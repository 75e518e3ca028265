"""A stand-in GitHub REST server on loopback, stateful, for driving the real PyGithub.

State is plain Python data (``Repo``: commits with messages, parents and files,
branches, tags, pull requests, issue timelines); the HTTP layer answers GitHub's
routes from it with GitHub's shapes: object ``url``s built from this server's own
base URL (PyGithub asserts host and port of every URL it follows), ``ETag`` and
``Last-Modified`` with ``304`` on ``If-None-Match`` / ``If-Modified-Since``,
``X-RateLimit-*`` headers (a 304 costs nothing), ``Link`` pagination, GitHub's
error bodies.

Extending it (other test modules add routes the same way this one does)::

    @FakeGitHub.route("POST", "/repos/<owner>/<repo>/git/refs")
    def create_ref(server, request, owner, repo):
        r = server.repo(owner, repo)
        ...
        return Reply(201, {...})

A handler gets the server, the werkzeug ``Request`` and the URL parameters, and
returns JSON-able data (200) or a ``Reply``. ``server.add_route(...)`` does the same
for one instance only. ``404`` raises ``NotFound``. Routes use werkzeug's rule syntax.

Counting: every request is recorded in ``server.log`` (``Hit``: method, path, rule,
status, conditional); ``server.count(...)`` filters it. Faults: ``server.fail(...)``
queues error answers for a rule, ``server.stall(...)`` delays answers (timeouts),
``server.rate_limit_remaining = 0`` makes every costed request a 403 rate limit.
"""

from __future__ import annotations

import base64
import dataclasses
import email.utils
import hashlib
import itertools
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from werkzeug.exceptions import MethodNotAllowed
from werkzeug.exceptions import NotFound as _WerkzeugNotFound
from werkzeug.routing import Map, Rule
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
RATE_LIMIT = 5000
UNAUTHENTICATED_RATE_LIMIT = 60
BOT = "xpu-workarounds-bot"  # the login of every token: what GET /user and GraphQL's viewer answer


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def when(text: str | datetime | None) -> datetime:
    """``"2026-07-02"`` or ``"2026-07-02T10:00:00"`` (UTC) -> aware datetime."""
    if text is None:
        return EPOCH
    if isinstance(text, datetime):
        return text if text.tzinfo else text.replace(tzinfo=UTC)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# --------------------------------------------------------------------------- state


# Over this many bytes, the contents API gives a file's metadata and encoding "none": its blob has the bytes.
CONTENTS_LIMIT = 1024 * 1024


@dataclass
class Commit:
    sha: str
    message: str
    parents: list[str]
    date: datetime
    files: dict[str, str]  # the whole tree as path -> text (inherited from the first parent)
    author: str = "dev"


@dataclass
class Event:
    """One issue timeline entry: closed, reopened, merged, labeled, unlabeled,
    referenced, cross-referenced, head_ref_deleted, ..."""

    id: int
    event: str
    created_at: datetime
    commit_id: str | None = None
    label: str | None = None
    source: tuple[str, str, int] | None = None  # (owner, repo, number) for cross-referenced
    actor: str = "dev"


@dataclass
class PullRequest:
    number: int
    title: str
    body: str
    head: str  # branch name
    base: str
    user: str
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    merged: bool = False
    merged_at: datetime | None = None
    closed_at: datetime | None = None
    merge_commit_sha: str | None = None
    head_sha: str | None = None
    labels: list[str] = field(default_factory=list)
    draft: bool = False
    issue: bool = False  # an issue, not a pull request: /pulls/N and GraphQL's pullRequest do not know it
    state_reason: str | None = None  # an issue's: completed, not_planned
    head_repo: str | None = None  # OWNER/NAME of the fork the head branch is in (None: this repository)


@dataclass
class Repo:
    """One repository's history, built with the helpers below, read by the routes."""

    owner: str
    name: str
    server: FakeGitHub
    default_branch: str = "main"
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    pulls: dict[int, PullRequest] = field(default_factory=dict)
    events: dict[int, list[Event]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # name -> colour
    next_number: int = 1
    private: bool = False  # GitHub's "private" (and "visibility") of the repository

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def api(self) -> str:
        return f"{self.server.base_url}/repos/{self.owner}/{self.name}"

    @property
    def html(self) -> str:
        return f"{self.server.base_url}/{self.owner}/{self.name}"

    # ---- history helpers ---------------------------------------------------------
    def commit(self, message: str, *, branch: str | None = None, parents: list[str] | None = None,
               files: dict[str, str | None] | None = None, date: str | datetime | None = None,
               author: str = "dev") -> str:
        """Add a commit on ``branch`` (default branch by default; created if new) and move it."""
        branch = branch or self.default_branch
        if parents is None:
            parents = [self.branches[branch]] if branch in self.branches else []
        tree = dict(self.commits[parents[0]].files) if parents else {}
        for path, text in (files or {}).items():
            if text is None:
                tree.pop(path, None)
            else:
                tree[path] = text
        moment = when(date) if date is not None else self.server.tick()
        seed = json.dumps([self.full_name, message, parents, sorted(tree.items()), iso(moment),
                           next(self.server.counter)])
        sha = hashlib.sha1(seed.encode()).hexdigest()
        self.commits[sha] = Commit(sha, message, list(parents), moment, tree, author)
        self.branches[branch] = sha
        return sha

    def branch(self, name: str, at: str) -> str:
        sha = self.resolve(at)
        if sha is None:
            raise KeyError(at)
        self.branches[name] = sha
        return sha

    def tag(self, name: str, at: str) -> str:
        sha = self.resolve(at)
        if sha is None:
            raise KeyError(at)
        self.tags[name] = sha
        return sha

    def cherry_pick(self, sha: str, onto: str, date: str | datetime | None = None) -> str:
        """``git cherry-pick -x``: same change and message, plus the provenance line."""
        original = self.commits[sha]
        parent = self.commits[original.parents[0]].files if original.parents else {}
        changed = {p: t for p, t in original.files.items() if parent.get(p) != t}
        changed.update({p: None for p in parent if p not in original.files})
        return self.commit(f"{original.message}\n\n(cherry picked from commit {sha})", branch=onto,
                           files=changed, date=date)

    def pull(self, title: str, *, number: int | None = None, body: str = "", head: str | None = None,
             base: str | None = None, user: str = "contributor", created: str | datetime | None = None,
             labels: Iterable[str] = ()) -> PullRequest:
        if number is None:
            number = self.next_number
        self.next_number = max(self.next_number, number + 1)
        moment = when(created) if created is not None else self.server.tick()
        pr = PullRequest(number, title, body, head or f"{user}/pr-{number}", base or self.default_branch,
                         user, moment, moment, labels=list(labels))
        head_parent = self.branches.get(pr.base)
        pr.head_sha = hashlib.sha1(f"{self.full_name}#{number}:head".encode()).hexdigest()
        if head_parent is not None:
            self.commits[pr.head_sha] = Commit(pr.head_sha, title, [head_parent], moment,
                                               dict(self.commits[head_parent].files), user)
        self.pulls[number] = pr
        self.events.setdefault(number, [])
        return pr

    def issue(self, title: str, *, number: int, user: str = "reporter", created: str | datetime | None = None,
              labels: Iterable[str] = (), body: str = "") -> PullRequest:
        """An issue: served by /issues/N (no ``pull_request`` key) and its timeline, not by /pulls/N."""
        self.next_number = max(self.next_number, number + 1)
        moment = when(created) if created is not None else self.server.tick()
        for name in labels:
            self.labels.setdefault(name, "ededed")
        issue = PullRequest(number, title, body, "", self.default_branch, user, moment, moment, labels=list(labels),
                            issue=True)
        self.pulls[number] = issue
        self.events.setdefault(number, [])
        return issue

    def event(self, number: int, event: str, date: str | datetime | None = None, **fields: Any) -> Event:
        moment = when(date) if date is not None else self.server.tick()
        entry = Event(next(self.server.counter), event, moment, **fields)
        self.events.setdefault(number, []).append(entry)
        if number in self.pulls:
            self.pulls[number].updated_at = max(self.pulls[number].updated_at, moment)
        return entry

    def label(self, number: int, name: str, date: str | datetime | None = None) -> None:
        self.labels.setdefault(name, "ededed")
        pr = self.pulls[number]
        if name not in pr.labels:
            pr.labels.append(name)
        self.event(number, "labeled", date, label=name)

    def merge(self, number: int, date: str | datetime | None = None, files: dict[str, str | None] | None = None,
              message: str | None = None) -> str:
        """A GitHub squash merge: the PR says merged, with its merge commit."""
        pr = self.pulls[number]
        moment = when(date) if date is not None else self.server.tick()
        sha = self.commit(message or f"{pr.title} (#{number})", branch=pr.base, files=files, date=moment,
                          author=pr.user)
        pr.state, pr.merged, pr.merged_at, pr.closed_at = "closed", True, moment, moment
        pr.merge_commit_sha = sha
        self.event(number, "merged", moment, commit_id=sha)
        self.event(number, "closed", moment)
        return sha

    def land(self, number: int, date: str | datetime | None = None, files: dict[str, str | None] | None = None,
             label: str = "merged") -> str:
        """pytorch's merge bot: pushes the squashed commit, GitHub closes the PR (merged: false)."""
        pr = self.pulls[number]
        moment = when(date) if date is not None else self.server.tick()
        sha = self.commit(f"{pr.title} (#{number})\n\n{pr.body}\n\nPull Request resolved: "
                          f"https://github.com/{self.full_name}/pull/{number}\nApproved by: reviewer",
                          branch=pr.base, files=files, date=moment, author="pytorchmergebot")
        pr.state, pr.closed_at = "closed", moment
        pr.merge_commit_sha = pr.merge_commit_sha or hashlib.sha1(f"{sha}:test-merge".encode()).hexdigest()
        self.event(number, "referenced", moment, commit_id=sha, actor="pytorchmergebot")
        self.event(number, "closed", moment, commit_id=sha, actor="pytorchmergebot")
        self.label(number, label, moment)
        return sha

    def bot_revert(self, number: int, date: str | datetime | None = None) -> str:
        """pytorch's bot revert: a ``Revert "..."`` commit, the ``reverted`` label, the PR reopened."""
        pr = self.pulls[number]
        landed = [e.commit_id for e in self.events[number] if e.event == "closed" and e.commit_id]
        original = self.commits[landed[-1]]
        parent = self.commits[original.parents[0]].files if original.parents else {}
        undo = {p: parent.get(p) for p, t in original.files.items() if parent.get(p) != t}
        moment = when(date) if date is not None else self.server.tick()
        sha = self.commit(f'Revert "{pr.title} (#{number})"\n\nThis reverts commit {original.sha}.',
                          branch=pr.base, files=undo, date=moment, author="pytorchmergebot")
        self.event(number, "referenced", moment, commit_id=sha, actor="pytorchmergebot")
        self.label(number, "reverted", moment)
        pr.state, pr.closed_at = "open", None
        self.event(number, "reopened", moment, actor="pytorchmergebot")
        return sha

    def close(self, number: int, date: str | datetime | None = None, reason: str | None = None) -> None:
        pr = self.pulls[number]
        moment = when(date) if date is not None else self.server.tick()
        pr.state, pr.closed_at, pr.state_reason = "closed", moment, reason
        self.event(number, "closed", moment)

    def cross_reference(self, number: int, source: PullRequest, date: str | datetime | None = None,
                        source_repo: Repo | None = None) -> None:
        """``source`` mentioned ``#number`` (e.g. a revert PR): a cross-referenced timeline entry."""
        origin = source_repo or self
        self.event(number, "cross-referenced", date, source=(origin.owner, origin.name, source.number))

    # ---- ancestry ------------------------------------------------------------------
    def resolve(self, ref: str) -> str | None:
        """A branch, tag, ``heads/x``, ``tags/x``, full sha or unique sha prefix -> sha."""
        for prefix, table in (("heads/", self.branches), ("tags/", self.tags), ("refs/heads/", self.branches),
                              ("refs/tags/", self.tags)):
            if ref.startswith(prefix) and ref[len(prefix):] in table:
                return table[ref[len(prefix):]]
        if ref in self.branches:
            return self.branches[ref]
        if ref in self.tags:
            return self.tags[ref]
        if ref in self.commits:
            return ref
        if len(ref) >= 7 and re.fullmatch(r"[0-9a-f]+", ref):
            found = [sha for sha in self.commits if sha.startswith(ref)]
            if len(found) == 1:
                return found[0]
        return None

    def ancestors(self, sha: str) -> set[str]:
        """``sha`` and everything reachable from it."""
        seen, stack = set(), [sha]
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.commits[current].parents)
        return seen

    def history(self, sha: str) -> list[Commit]:
        """Reachable commits, newest first (by date, then depth), as ``git log`` lists them."""
        return sorted((self.commits[s] for s in self.ancestors(sha)), key=lambda c: c.date, reverse=True)

    def compare(self, base: str, head: str) -> dict[str, Any]:
        below, above = self.ancestors(base), self.ancestors(head)
        ahead = [c for c in self.history(head) if c.sha not in below]
        behind = below - above
        common = below & above
        # The newest common ancestor (histories here are built forward in time, so it is the merge base).
        merge_base = max((self.commits[s] for s in common), key=lambda c: c.date, default=None)
        if base == head:
            status = "identical"
        elif not behind:
            status = "ahead"
        elif not ahead:
            status = "behind"
        else:
            status = "diverged"
        return {"status": status, "ahead": list(reversed(ahead)), "behind_by": len(behind),
                "merge_base": merge_base}


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None
    costed: bool = True  # False: the handler keeps its own budget (GraphQL points)
    raw: bytes | None = None  # sent as it is instead of ``body`` as JSON (wrong shapes)
    content_type: str | None = None  # with ``raw``


class NotFound(Exception):
    """Raised by a handler: GitHub's 404 body."""


@dataclass(frozen=True)
class Hit:
    method: str
    path: str
    query: str
    rule: str
    status: int
    conditional: bool  # the request carried If-None-Match / If-Modified-Since
    token: str | None  # the credential received (tests check which one was used)


ELSEWHERE = "http://github.invalid"  # another host: redirects and next pages that lead off the API

# Answers that are not GitHub's REST API, as a wrong GITHUB_API_URL or a broken proxy gives them
# (``FakeGitHub.misanswer``): name -> (status, raw body, content type, extra headers).
WRONG_SHAPES: dict[str, tuple[int, bytes, str | None, dict[str, str]]] = {
    "html": (200, b"<!DOCTYPE html><html><head><title>GitHub</title></head><body></body></html>",
             "text/html; charset=utf-8", {}),  # GITHUB_API_URL=https://github.com
    "empty": (200, b"", "application/json; charset=utf-8", {}),
    "list": (200, b"[1, 2, 3]", "application/json; charset=utf-8", {}),
    "null": (200, b"null", "application/json; charset=utf-8", {}),
    "string": (200, b'"GitHub"', "application/json; charset=utf-8", {}),
    "malformed": (200, b'{"state": "open", ', "application/json; charset=utf-8", {}),
    **{f"redirect-{code}": (code, b"", None, {"Location": f"{ELSEWHERE}/api"}) for code in (301, 302, 307, 308)},
}
NEXT_ELSEWHERE = "next-elsewhere"  # the real answer, with ``Link: rel="next"`` to another host

# Pagination that never ends (``FakeGitHub.paginate_badly``): every list answered with the
# real page and a ``Link: rel="next"`` on this server that leads on for ever.
BAD_PAGINATION = (
    "next-self",  # the next page is the page asked for
    "next-back",  # page 1 -> page 2 -> page 1 -> ...
    "next-endless",  # page N -> page N + 1 -> ..., each answered with the same items
)


@dataclass(frozen=True)
class Corruption:
    """One field of an answer given a wrong value (``FakeGitHub.corrupt``)."""

    rule: str | None  # the route (as registered); None: every route
    path: str  # dotted keys into the JSON body, ``*`` every item or value; "" with ``header``
    value: Any
    header: str | None = None  # a response header instead of the body


def corrupted(body: Any, path: str, value: Any) -> tuple[Any, bool]:
    """``body`` (a copy) with ``value`` at ``path``, and whether a field was there to take it.

    Each step of ``path`` is a key (an index into a list), ``*`` for every item of a list or
    every value of an object; the last step names a field that must exist, or, written
    ``+name``, one that is added to each object reached."""
    copy = json.loads(json.dumps(body))
    *steps, last = path.split(".")
    reached = [copy]
    for step in steps:
        following = []
        for item in reached:
            if step == "*":
                following += list(item.values()) if isinstance(item, dict) else list(item) if isinstance(item, list) else []
            elif isinstance(item, dict) and step in item:
                following.append(item[step])
            elif isinstance(item, list) and step.isdigit() and int(step) < len(item):
                following.append(item[int(step)])
        reached = [item for item in following if isinstance(item, (dict, list))]
    hit = False
    for item in reached:
        if isinstance(item, dict) and (last.startswith("+") or last in item):
            item[last.removeprefix("+")] = value
            hit = True
        elif isinstance(item, list) and last.isdigit() and int(last) < len(item):
            item[int(last)] = value
            hit = True
    return copy, hit


@dataclass
class Fault:
    status: int
    body: Any
    headers: dict[str, str]
    times: int


# ---------------------------------------------------------------------------- server


class _QuietHandler(WSGIRequestHandler):
    def log(self, *args: Any, **kwargs: Any) -> None:  # the request log is ``FakeGitHub.log``
        pass


class FakeGitHub:
    """The server. ``with FakeGitHub() as gh:`` starts it on 127.0.0.1 at a free port."""

    _routes: list[tuple[str, str, Callable[..., Any]]] = []

    @classmethod
    def route(cls, method: str, rule: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a handler for every server (werkzeug rule syntax: ``<int:number>``, ``<path:p>``)."""

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            cls._routes.append((method, rule, handler))
            return handler

        return register

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix.rstrip("/")  # "/api/v3" to look like GitHub Enterprise
        self.installation_token = False  # True: GET /user refuses every token, as for an app's installation token
        self.repos: dict[str, Repo] = {}
        self.counter = itertools.count(1)
        self.clock = EPOCH
        self.log: list[Hit] = []
        self.faults: dict[str, list[Fault]] = {}
        self.stalls: dict[str, float] = {}
        self.rate_limit = RATE_LIMIT
        self.rate_limit_remaining = RATE_LIMIT
        self.rate_limit_reset = int((datetime.now(UTC) + timedelta(hours=1)).timestamp())
        self.latency = 0.0  # seconds added to every answer (benchmarks: ~0.1 s like api.github.com)
        self.wrong_shape: tuple[str, str | None, int] | None = None  # see ``misanswer``
        self.bad_pagination: tuple[str, str | None] | None = None  # see ``paginate_badly``
        self.trickling: tuple[float, str | None] | None = None  # see ``trickle``
        self.corruptions: list[Corruption] = []  # see ``corrupt``
        self.corrupted: list[str] = []  # the rule of every answer a corruption changed
        self.bodies: list[tuple[str, Any]] | None = None  # a list: (rule, JSON body) of every answer is kept
        self.received: list[bytes] | None = None  # a list: every request as it came (line, headers, body) is kept
        self._own_routes: list[tuple[str, str, Callable[..., Any]]] = []
        self._map: Map | None = None
        self._handlers: list[Callable[..., Any]] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._in_flight = 0
        self._idle = threading.Condition()
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                   request_handler=_QuietHandler)
        # serve_forever accepts only once select says a connection waits, but a client that gave
        # up meanwhile (a reset before accept) leaves accept blocking for good, and stop()'s
        # shutdown waiting for it: bounded, accept gives up and the loop sees the shutdown.
        self._server.socket.settimeout(1.0)
        self.base_url = f"http://127.0.0.1:{self._server.server_port}{self.prefix}"
        self._thread: threading.Thread | None = None

    # ---- life --------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fakegithub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()  # wake stalled handlers
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- state -------------------------------------------------------------------
    def add_repo(self, full_name: str, default_branch: str = "main") -> Repo:
        owner, name = full_name.split("/")
        repo = Repo(owner, name, self, default_branch)
        self.repos[full_name.lower()] = repo
        return repo

    def repo(self, owner: str, name: str | None = None) -> Repo:
        key = (owner if name is None else f"{owner}/{name}").lower()
        if key not in self.repos:
            raise NotFound(key)
        return self.repos[key]

    def tick(self) -> datetime:
        """A fresh moment for events created without a date (keeps ordering stable)."""
        self.clock += timedelta(minutes=1)
        return self.clock

    # ---- routing, faults, counting -----------------------------------------------
    def add_route(self, method: str, rule: str, handler: Callable[..., Any]) -> None:
        self._own_routes.append((method, rule, handler))
        self._map = None

    def fail(self, rule: str, status: int = 500, body: Any = None, headers: dict[str, str] | None = None,
             times: int = 1) -> None:
        """The next ``times`` requests matching ``rule`` (as registered) get this answer."""
        if body is None:
            body = {"message": "Server Error"} if status >= 500 else {"message": "Error"}
        self.faults.setdefault(rule, []).append(Fault(status, body, dict(headers or {}), times))

    def misanswer(self, shape: str, rule: str | None = None, after: int = 0) -> None:
        """From now on, answer requests matching ``rule`` (every route when None), after the
        first ``after`` of them, with the wrong ``shape`` (``WRONG_SHAPES`` or ``NEXT_ELSEWHERE``)."""
        if shape not in WRONG_SHAPES and shape != NEXT_ELSEWHERE:
            raise ValueError(shape)
        self.wrong_shape = (shape, rule, after)

    def _misshaped(self, rule: str, reply: Reply) -> Reply:
        if self.wrong_shape is None:
            return reply
        shape, only, after = self.wrong_shape
        if only is not None and rule != only:
            return reply
        with self._lock:
            if after > 0:
                self.wrong_shape = (shape, only, after - 1)
                return reply
        if shape == NEXT_ELSEWHERE:
            link = f'<{ELSEWHERE}/repositories/1/pulls?page=2>; rel="next"'
            return dataclasses.replace(reply, headers={**reply.headers, "Link": link})
        status, raw, content_type, headers = WRONG_SHAPES[shape]
        return Reply(status, None, dict(headers), raw=raw, content_type=content_type)

    def paginate_badly(self, shape: str, rule: str | None = None) -> None:
        """From now on, a list answered for ``rule`` (every route when None) names a next page
        that never ends (``BAD_PAGINATION``)."""
        if shape not in BAD_PAGINATION:
            raise ValueError(shape)
        self.bad_pagination = (shape, rule)

    def _paginated_badly(self, request: Request, rule: str, reply: Reply) -> Reply:
        if self.bad_pagination is None or not isinstance(reply.body, list) or reply.status != 200:
            return reply
        shape, only = self.bad_pagination
        if only is not None and rule != only:
            return reply
        args = dict(request.args.items())
        page = _int(args.get("page"), 1)
        if shape != "next-self":  # the page asked for is the very URL asked
            args["page"] = str(2 if page == 1 else 1) if shape == "next-back" else str(page + 1)
        url = self.url(request.path[len(self.prefix):], **args)
        return dataclasses.replace(reply, headers={**reply.headers, "Link": f'<{url}>; rel="next"'})

    def trickle(self, every: float, rule: str | None = None) -> None:
        """From now on, answers for ``rule`` (every route when None) send their body one byte every
        ``every`` seconds: each read gets a byte long before a read timeout, the whole never comes."""
        self.trickling = (every, rule)

    def corrupt(self, rule: str | None, path: str, value: Any, *, header: str | None = None) -> None:
        """From now on, answers of ``rule`` (every route when None) carry ``value`` at ``path``
        of their JSON body (see ``corrupted``), or as their ``header``: a field of the wrong type
        in an answer otherwise right. ``corrupted`` lists the answers it changed."""
        self.corruptions.append(Corruption(rule, path, value, header))

    def _corrupted(self, rule: str, reply: Reply) -> Reply:
        for corruption in self.corruptions:
            if corruption.rule is not None and corruption.rule != rule:
                continue
            if corruption.header is not None:
                reply = dataclasses.replace(reply, headers={**reply.headers, corruption.header: corruption.value})
                self.corrupted.append(rule)
            elif reply.raw is None and reply.body is not None:
                body, hit = corrupted(reply.body, corruption.path, corruption.value)
                if hit:
                    reply = dataclasses.replace(reply, body=body)
                    self.corrupted.append(rule)
        return reply

    def stall(self, rule: str, seconds: float) -> None:
        """Requests matching ``rule`` wait ``seconds`` before answering (for client timeouts)."""
        self.stalls[rule] = seconds

    def settle(self) -> None:
        """Wake stalled handlers and wait until every request in flight is answered and logged."""
        self._released.set()
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0)
        self._released.clear()

    def count(self, rule: str | None = None, *, status: int | None = None, method: str | None = None,
              conditional: bool | None = None) -> int:
        return sum(1 for hit in self.log
                   if (rule is None or hit.rule == rule) and (status is None or hit.status == status)
                   and (method is None or hit.method == method)
                   and (conditional is None or hit.conditional == conditional))

    def stats(self) -> dict[str, Any]:
        return {"requests": len(self.log), "by_status": dict(Counter(h.status for h in self.log)),
                "by_rule": dict(Counter(h.rule for h in self.log)),
                "not_modified": self.count(status=304),
                "costed": sum(1 for h in self.log if h.status != 304)}

    def reset_log(self) -> None:
        self.log.clear()

    def url(self, path: str, **query: Any) -> str:
        """An absolute URL on this server (every URL the server hands out is built here)."""
        q = {k: v for k, v in query.items() if v is not None}
        return f"{self.base_url}{path}" + (f"?{urlencode(q)}" if q else "")

    def _rules(self) -> Map:
        if self._map is None:
            rules, handlers = [], []
            for index, (method, rule, handler) in enumerate(self._own_routes + self._routes):
                rules.append(Rule(rule, endpoint=index, methods=[method]))
                handlers.append(handler)
            self._map = Map(rules, strict_slashes=False, merge_slashes=False)
            self._handlers = handlers
        return self._map

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        with self._idle:
            self._in_flight += 1
        try:
            response = self._answer(request)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        if self.received is not None:
            head = f"{request.method} {request.full_path}\n{request.headers}\n"
            self.received.append(head.encode() + request.get_data())
        path = request.path
        rule_text = "?"
        token = _token(request.headers.get("Authorization"))
        conditional = "If-None-Match" in request.headers or "If-Modified-Since" in request.headers
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix):] or "/"
        with self._lock:
            rules = self._rules()
            handlers = self._handlers
        try:
            adapter = rules.bind("127.0.0.1", path_info=path)
            endpoint, params = adapter.match(path, method=request.method)
            rule_text = next(r.rule for r in rules.iter_rules() if r.endpoint == endpoint)
        except (_WerkzeugNotFound, MethodNotAllowed):
            reply = Reply(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
            return self._finish(request, reply, rule_text, token, conditional)
        if self.latency:  # a realistic round trip, for benchmarks
            time.sleep(self.latency)
        stall = self.stalls.get(rule_text)
        if stall:
            self._released.wait(stall)
        with self._lock:
            queue = self.faults.get(rule_text)
            fault = queue[0] if queue else None
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    queue.pop(0)
        if fault is not None:
            return self._finish(request, Reply(fault.status, fault.body, fault.headers), rule_text, token,
                                conditional, costed=True)
        if self.rate_limit_remaining <= 0:
            reply = Reply(403, {"message": "API rate limit exceeded for user ID 1. If you reach out to GitHub "
                                           "Support for help, please include the request ID.",
                                "documentation_url": "https://docs.github.com/rest/rate-limit"})
            return self._finish(request, reply, rule_text, token, conditional, costed=False)
        try:
            with self._lock:
                result = handlers[endpoint](self, request, **params)
        except NotFound:
            result = Reply(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
        reply = self._misshaped(rule_text, result if isinstance(result, Reply) else Reply(200, result))
        reply = self._paginated_badly(request, rule_text, reply)
        if self.corruptions:
            with self._lock:
                reply = self._corrupted(rule_text, reply)
        if self.bodies is not None and reply.body is not None:
            self.bodies.append((rule_text, reply.body))
        return self._finish(request, reply, rule_text, token, conditional, costed=reply.costed)

    def _finish(self, request: Request, reply: Reply, rule: str, token: str | None, conditional: bool,
                costed: bool = True) -> Response:
        headers = dict(reply.headers)
        body = b"" if reply.body is None else json.dumps(reply.body, indent=1).encode()
        status = reply.status
        if reply.raw is not None:
            body = reply.raw
        if request.method == "GET" and status == 200 and reply.raw is None:
            etag = 'W/"' + hashlib.sha1(body).hexdigest() + '"'
            headers["ETag"] = etag
            modified = reply.last_modified or EPOCH
            headers["Last-Modified"] = email.utils.format_datetime(modified.astimezone(UTC), usegmt=True)
            match = request.headers.get("If-None-Match")
            since = request.headers.get("If-Modified-Since")
            if match is not None:
                fresh = etag in [m.strip() for m in match.split(",")] or match.strip() == "*"
            elif since is not None and reply.last_modified is not None:
                try:
                    fresh = email.utils.parsedate_to_datetime(since) >= modified.replace(microsecond=0)
                except (TypeError, ValueError):
                    fresh = False
            else:
                fresh = False
            if fresh:
                status, body = 304, b""
        limit = self.rate_limit if token else UNAUTHENTICATED_RATE_LIMIT
        with self._lock:
            if costed and status != 304 and self.rate_limit_remaining > 0:
                self.rate_limit_remaining -= 1
            remaining = self.rate_limit_remaining
            self.log.append(Hit(request.method, request.path, request.query_string.decode(), rule, status,
                                conditional, token))
        headers.setdefault("X-RateLimit-Limit", str(limit))
        headers.setdefault("X-RateLimit-Remaining", str(max(0, min(remaining, limit))))
        headers.setdefault("X-RateLimit-Reset", str(self.rate_limit_reset))
        headers.setdefault("X-RateLimit-Used", str(max(0, limit - remaining)))
        headers.setdefault("X-RateLimit-Resource", "core")
        headers.setdefault("X-GitHub-Media-Type", "github.v3; format=json")
        content_type = reply.content_type if reply.raw is not None else (
            "application/json; charset=utf-8" if body else None)
        trickle = self.trickling
        if trickle is not None and (trickle[1] is None or trickle[1] == rule) and len(body) > 1:
            headers["Content-Length"] = str(len(body))
            return Response(self._drip(body, trickle[0]), status=status, headers=headers, content_type=content_type)
        return Response(body, status=status, headers=headers, content_type=content_type)

    def _drip(self, body: bytes, every: float) -> Iterator[bytes]:
        for at in range(len(body)):
            self._released.wait(every)  # stop() and settle() send the rest at once
            yield body[at:at + 1]

    # ---- shapes --------------------------------------------------------------------
    def page(self, request: Request, items: list[Any], last_modified: datetime | None = None) -> Reply:
        """GitHub pagination: ``per_page`` (default 30, max 100), ``page``, a ``Link`` header."""
        per_page = min(max(_int(request.args.get("per_page"), 30), 1), 100)
        # Pagination gone bad answers every page with the first one's items (``paginate_badly``).
        number = max(_int(request.args.get("page"), 1), 1) if self.bad_pagination is None else 1
        last = max(1, -(-len(items) // per_page))
        chunk = items[(number - 1) * per_page: number * per_page]
        args = dict(request.args.items())
        links = []

        def link(n: int, rel: str) -> str:
            return f'<{self.url(request.path[len(self.prefix):], **{**args, "per_page": per_page, "page": n})}>; rel="{rel}"'

        if number < last:
            links += [link(number + 1, "next"), link(last, "last")]
        if number > 1:
            links += [link(1, "first"), link(number - 1, "prev")]
        return Reply(200, chunk, {"Link": ", ".join(links)} if links else {}, last_modified)

    def user(self, login: str) -> dict[str, Any]:
        return {"login": login, "id": _id(login), "node_id": f"U_{_id(login)}", "type": "User",
                "url": self.url(f"/users/{login}"), "html_url": f"{self.base_url}/{login}", "site_admin": False}

    def repo_json(self, repo: Repo) -> dict[str, Any]:
        return {"id": _id(repo.full_name), "node_id": f"R_{_id(repo.full_name)}", "name": repo.name,
                "full_name": repo.full_name, "owner": self.user(repo.owner), "private": repo.private,
                "html_url": repo.html, "url": repo.api, "default_branch": repo.default_branch,
                "fork": False, "archived": False, "disabled": False,
                "visibility": "private" if repo.private else "public",
                "pulls_url": f"{repo.api}/pulls{{/number}}", "issues_url": f"{repo.api}/issues{{/number}}",
                "compare_url": f"{repo.api}/compare/{{base}}...{{head}}",
                "contents_url": f"{repo.api}/contents/{{+path}}", "tags_url": f"{repo.api}/tags",
                "git_refs_url": f"{repo.api}/git/refs{{/sha}}", "permissions": {"pull": True, "push": True}}

    def label_json(self, repo: Repo, name: str) -> dict[str, Any]:
        return {"id": _id(f"{repo.full_name}:{name}"), "node_id": f"LA_{_id(name)}",
                "url": f"{repo.api}/labels/{name}", "name": name, "color": repo.labels.get(name, "ededed"),
                "default": False, "description": None}

    def commit_json(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        person = {"name": commit.author, "email": f"{commit.author}@example.com", "date": iso(commit.date)}
        return {
            "sha": commit.sha, "node_id": f"C_{commit.sha[:12]}", "url": f"{repo.api}/commits/{commit.sha}",
            "html_url": f"{repo.html}/commit/{commit.sha}", "comments_url": f"{repo.api}/commits/{commit.sha}/comments",
            "commit": {"message": commit.message, "author": person, "committer": person,
                       "tree": {"sha": _tree_sha(commit), "url": f"{repo.api}/git/trees/{_tree_sha(commit)}"},
                       "url": f"{repo.api}/git/commits/{commit.sha}", "comment_count": 0},
            "author": self.user(commit.author), "committer": self.user(commit.author),
            "parents": [{"sha": p, "url": f"{repo.api}/commits/{p}", "html_url": f"{repo.html}/commit/{p}"}
                        for p in commit.parents],
        }

    def branch_ref_json(self, repo: Repo, pr: PullRequest, side: str) -> dict[str, Any]:
        ref = pr.head if side == "head" else pr.base
        sha = pr.head_sha if side == "head" else repo.branches.get(pr.base)
        owner = pr.user if side == "head" else repo.owner
        where = self.repo(pr.head_repo) if side == "head" and pr.head_repo else repo
        return {"label": f"{owner}:{ref}", "ref": ref, "sha": sha, "user": self.user(owner),
                "repo": self.repo_json(where)}

    def pull_json(self, repo: Repo, pr: PullRequest) -> dict[str, Any]:
        api, html = f"{repo.api}/pulls/{pr.number}", f"{repo.html}/pull/{pr.number}"
        issue = f"{repo.api}/issues/{pr.number}"
        return {
            "url": api, "id": _id(f"{repo.full_name}#{pr.number}"), "node_id": f"PR_{pr.number}",
            "html_url": html, "diff_url": f"{html}.diff", "patch_url": f"{html}.patch", "issue_url": issue,
            "commits_url": f"{api}/commits", "review_comments_url": f"{api}/comments",
            "review_comment_url": f"{repo.api}/pulls/comments{{/number}}", "comments_url": f"{issue}/comments",
            "statuses_url": f"{repo.api}/statuses/{pr.head_sha}", "number": pr.number, "state": pr.state,
            "locked": False, "title": pr.title, "user": self.user(pr.user), "body": pr.body,
            "labels": [self.label_json(repo, name) for name in pr.labels], "milestone": None,
            "active_lock_reason": None, "created_at": iso(pr.created_at), "updated_at": iso(pr.updated_at),
            "closed_at": iso(pr.closed_at) if pr.closed_at else None,
            "merged_at": iso(pr.merged_at) if pr.merged_at else None, "merge_commit_sha": pr.merge_commit_sha,
            "assignee": None, "assignees": [], "requested_reviewers": [], "requested_teams": [],
            "head": self.branch_ref_json(repo, pr, "head"), "base": self.branch_ref_json(repo, pr, "base"),
            "_links": {"self": {"href": api}, "html": {"href": html}, "issue": {"href": issue},
                       "comments": {"href": f"{issue}/comments"}, "commits": {"href": f"{api}/commits"}},
            "author_association": "CONTRIBUTOR", "auto_merge": None, "draft": pr.draft, "merged": pr.merged,
            "mergeable": None, "rebaseable": None, "mergeable_state": "unknown",
            "merged_by": self.user(repo.owner) if pr.merged else None, "comments": 0, "review_comments": 0,
            "maintainer_can_modify": False, "commits": 1, "additions": 1, "deletions": 0, "changed_files": 1,
        }

    def issue_json(self, repo: Repo, pr: PullRequest) -> dict[str, Any]:
        issue = f"{repo.api}/issues/{pr.number}"
        document = {
            "url": issue, "repository_url": repo.api, "labels_url": f"{issue}/labels{{/name}}",
            "comments_url": f"{issue}/comments", "events_url": f"{issue}/events",
            "html_url": f"{repo.html}/{'issues' if pr.issue else 'pull'}/{pr.number}",
            "id": _id(f"{repo.full_name}!{pr.number}"),
            "node_id": f"I_{pr.number}", "number": pr.number, "title": pr.title, "user": self.user(pr.user),
            "labels": [self.label_json(repo, name) for name in pr.labels], "state": pr.state,
            "state_reason": None if pr.state == "open" else (pr.state_reason if pr.issue else
                                                             "completed" if pr.merged else None),
            "locked": False, "assignee": None, "assignees": [], "milestone": None, "comments": 0,
            "created_at": iso(pr.created_at), "updated_at": iso(pr.updated_at),
            "closed_at": iso(pr.closed_at) if pr.closed_at else None, "body": pr.body,
            "author_association": "CONTRIBUTOR",
            "pull_request": {"url": f"{repo.api}/pulls/{pr.number}", "html_url": f"{repo.html}/pull/{pr.number}",
                             "diff_url": f"{repo.html}/pull/{pr.number}.diff",
                             "patch_url": f"{repo.html}/pull/{pr.number}.patch",
                             "merged_at": iso(pr.merged_at) if pr.merged_at else None},
        }
        if pr.issue:
            del document["pull_request"]
        return document

    def event_json(self, repo: Repo, number: int, event: Event, timeline: bool) -> dict[str, Any]:
        base = {"id": event.id, "node_id": f"E_{event.id}", "url": f"{repo.api}/issues/events/{event.id}",
                "actor": self.user(event.actor), "event": event.event, "commit_id": event.commit_id,
                "commit_url": f"{repo.api}/commits/{event.commit_id}" if event.commit_id else None,
                "created_at": iso(event.created_at), "performed_via_github_app": None}
        if event.label is not None:
            base["label"] = {"name": event.label, "color": repo.labels.get(event.label, "ededed")}
        if event.event == "closed":
            base["state_reason"] = "completed" if event.commit_id or repo.pulls[number].merged else None
        if event.event == "cross-referenced" and event.source is not None:
            origin = self.repo(event.source[0], event.source[1])
            source_pr = origin.pulls[event.source[2]]
            base = {"event": "cross-referenced", "actor": self.user(event.actor),
                    "created_at": iso(event.created_at), "updated_at": iso(event.created_at),
                    "source": {"type": "issue", "issue": {**self.issue_json(origin, source_pr),
                                                          "repository": self.repo_json(origin)}}}
        if not timeline:
            base["issue"] = self.issue_json(repo, repo.pulls[number])
        return base

    def content_json(self, repo: Repo, path: str, text: str, ref: str) -> dict[str, Any]:
        raw = text.encode()
        blob = hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()
        name = path.rsplit("/", 1)[-1]
        large = len(raw) > CONTENTS_LIMIT  # GitHub's contents API leaves the content of a larger file out
        return {"type": "file", "encoding": "none" if large else "base64", "size": len(raw), "name": name,
                "path": path, "content": "" if large else base64.encodebytes(raw).decode(), "sha": blob,
                "url": self.url(f"/repos/{repo.full_name}/contents/{path}", ref=ref),
                "git_url": f"{repo.api}/git/blobs/{blob}", "html_url": f"{repo.html}/blob/{ref}/{path}",
                "download_url": f"{self.base_url}/raw/{repo.full_name}/{ref}/{path}",
                "_links": {"self": self.url(f"/repos/{repo.full_name}/contents/{path}", ref=ref),
                           "git": f"{repo.api}/git/blobs/{blob}", "html": f"{repo.html}/blob/{ref}/{path}"}}


def _token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() in ("token", "bearer") else None


def _id(text: str) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _tree_sha(commit: Commit) -> str:
    return hashlib.sha1(json.dumps(sorted(commit.files.items())).encode()).hexdigest()


# ---------------------------------------------------------------------------- routes


@FakeGitHub.route("GET", "/user")
def get_user(server: FakeGitHub, request: Request) -> Any:
    """The token's own user (every token is the bot's: the write routes of fakegithub_git write as it)."""
    if _token(request.headers.get("Authorization")) is None:
        return Reply(401, {"message": "Requires authentication", "documentation_url": "https://docs.github.com/rest"})
    if server.installation_token:  # an app's installation token (an Actions GITHUB_TOKEN): GitHub refuses
        return Reply(403, {"message": "Resource not accessible by integration",
                           "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user"})
    return server.user(BOT)


@FakeGitHub.route("GET", "/rate_limit")
def rate_limit(server: FakeGitHub, request: Request) -> Any:
    core = {"limit": server.rate_limit, "remaining": server.rate_limit_remaining,
            "reset": server.rate_limit_reset, "used": server.rate_limit - server.rate_limit_remaining}
    return {"resources": {"core": core}, "rate": core}


@FakeGitHub.route("GET", "/repos/<owner>/<repo>")
def get_repo(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    return server.repo_json(server.repo(owner, repo))


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/pulls/<int:number>")
def get_pull(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    if number not in r.pulls or r.pulls[number].issue:
        raise NotFound(number)
    pr = r.pulls[number]
    return Reply(200, server.pull_json(r, pr), last_modified=pr.updated_at)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/issues/<int:number>")
def get_issue(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    if number not in r.pulls:
        raise NotFound(number)
    pr = r.pulls[number]
    return Reply(200, server.issue_json(r, pr), last_modified=pr.updated_at)


def _events(server: FakeGitHub, request: Request, owner: str, repo: str, number: int, timeline: bool) -> Reply:
    r = server.repo(owner, repo)
    if number not in r.pulls:
        raise NotFound(number)
    kinds = None if timeline else {"closed", "reopened", "merged", "labeled", "unlabeled", "referenced",
                                   "head_ref_deleted", "renamed", "assigned"}
    items = [server.event_json(r, number, e, timeline) for e in r.events.get(number, [])
             if kinds is None or e.event in kinds]
    return server.page(request, items, r.pulls[number].updated_at)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/issues/<int:number>/events")
def get_issue_events(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    return _events(server, request, owner, repo, number, timeline=False)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/issues/<int:number>/timeline")
def get_issue_timeline(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    return _events(server, request, owner, repo, number, timeline=True)


def _ref_json(server: FakeGitHub, r: Repo, ref: str, sha: str) -> dict[str, Any]:
    return {"ref": ref, "node_id": f"REF_{_id(ref)}", "url": f"{r.api}/git/{ref}",
            "object": {"sha": sha, "type": "commit", "url": f"{r.api}/git/commits/{sha}"}}


def _all_refs(r: Repo) -> list[tuple[str, str]]:
    return sorted([(f"refs/heads/{b}", s) for b, s in r.branches.items()]
                  + [(f"refs/tags/{t}", s) for t, s in r.tags.items()])


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/git/matching-refs/<path:ref>")
def matching_refs(server: FakeGitHub, request: Request, owner: str, repo: str, ref: str) -> Any:
    r = server.repo(owner, repo)
    items = [_ref_json(server, r, name, sha) for name, sha in _all_refs(r) if name.startswith(f"refs/{ref}")]
    return server.page(request, items)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/git/ref/<path:ref>")
def get_ref(server: FakeGitHub, request: Request, owner: str, repo: str, ref: str) -> Any:
    r = server.repo(owner, repo)
    for name, sha in _all_refs(r):
        if name == f"refs/{ref}":
            return _ref_json(server, r, name, sha)
    raise NotFound(ref)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/tags")
def list_tags(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    ordered = sorted(r.tags.items(), key=lambda item: r.commits[item[1]].date, reverse=True)
    items = [{"name": name, "commit": {"sha": sha, "url": f"{r.api}/commits/{sha}"},
              "zipball_url": f"{r.api}/zipball/refs/tags/{name}", "tarball_url": f"{r.api}/tarball/refs/tags/{name}",
              "node_id": f"TAG_{_id(name)}"} for name, sha in ordered]
    return server.page(request, items)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/branches/<path:branch>")
def get_branch(server: FakeGitHub, request: Request, owner: str, repo: str, branch: str) -> Any:
    r = server.repo(owner, repo)
    if branch not in r.branches:
        raise NotFound(branch)
    return {"name": branch, "commit": server.commit_json(r, r.commits[r.branches[branch]]), "protected": False,
            "_links": {"self": f"{r.api}/branches/{branch}", "html": f"{r.html}/tree/{branch}"}}


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/commits/<path:ref>")
def get_commit(server: FakeGitHub, request: Request, owner: str, repo: str, ref: str) -> Any:
    r = server.repo(owner, repo)
    sha = r.resolve(ref)
    if sha is None:
        return Reply(422, {"message": f"No commit found for SHA: {ref}", "status": "422"})
    commit = r.commits[sha]
    return Reply(200, server.commit_json(r, commit), last_modified=commit.date)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/commits")
def list_commits(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    sha = r.resolve(request.args.get("sha", r.default_branch))
    if sha is None:
        raise NotFound(request.args.get("sha"))
    return server.page(request, [server.commit_json(r, c) for c in r.history(sha)])


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/compare/<path:basehead>")
def compare(server: FakeGitHub, request: Request, owner: str, repo: str, basehead: str) -> Any:
    r = server.repo(owner, repo)
    base_ref, dots, head_ref = basehead.partition("...")
    if not dots:
        raise NotFound(basehead)
    base, head = r.resolve(base_ref), r.resolve(head_ref)
    if base is None or head is None:
        raise NotFound(basehead)
    result = r.compare(base, head)
    commits = result["ahead"]
    per_page = min(max(_int(request.args.get("per_page"), 250), 1), 250)
    number = max(_int(request.args.get("page"), 1), 1)
    shown = commits[(number - 1) * per_page: number * per_page]
    merge_base = result["merge_base"]
    parent_files = r.commits[base].files
    files = [{"filename": p, "status": "modified" if p in parent_files else "added", "additions": 1,
              "deletions": 0, "changes": 1} for p, t in r.commits[head].files.items() if parent_files.get(p) != t]
    body = {
        "url": f"{r.api}/compare/{basehead}", "html_url": f"{r.html}/compare/{basehead}",
        "permalink_url": f"{r.html}/compare/{r.full_name.replace('/', ':')}:{base[:7]}...{r.owner}:{head[:7]}",
        "diff_url": f"{r.html}/compare/{basehead}.diff", "patch_url": f"{r.html}/compare/{basehead}.patch",
        "base_commit": server.commit_json(r, r.commits[base]),
        "merge_base_commit": server.commit_json(r, merge_base) if merge_base else None,
        "status": result["status"], "ahead_by": len(commits), "behind_by": result["behind_by"],
        "total_commits": len(commits), "commits": [server.commit_json(r, c) for c in shown], "files": files,
    }
    return body


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/contents/<path:path>")
def get_contents(server: FakeGitHub, request: Request, owner: str, repo: str, path: str) -> Any:
    r = server.repo(owner, repo)
    ref = request.args.get("ref", r.default_branch)
    sha = r.resolve(ref)
    if sha is None:
        return Reply(404, {"message": f"No commit found for the ref {ref}",
                           "documentation_url": "https://docs.github.com/rest/repos/contents"})
    commit = r.commits[sha]
    if path not in commit.files:
        raise NotFound(path)
    return Reply(200, server.content_json(r, path, commit.files[path], ref), last_modified=commit.date)


@FakeGitHub.route("GET", "/repos/<owner>/<repo>/releases")
def list_releases(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    ordered = sorted(r.tags.items(), key=lambda item: r.commits[item[1]].date, reverse=True)
    items = [{"url": f"{r.api}/releases/{_id(name)}", "html_url": f"{r.html}/releases/tag/{name}",
              "id": _id(name), "tag_name": name, "target_commitish": sha, "name": name, "draft": False,
              "prerelease": "rc" in name, "created_at": iso(r.commits[sha].date),
              "published_at": iso(r.commits[sha].date), "author": server.user(r.owner), "assets": [],
              "body": ""} for name, sha in ordered]
    return server.page(request, items)


from support import fakegithub_graphql  # noqa: E402,F401  (registers POST /graphql: the GraphQL subset, same data)
