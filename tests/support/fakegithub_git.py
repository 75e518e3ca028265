"""Writes for the stand-in GitHub server: git data, pull requests, issues, labels, comments.

``install(server)`` adds, to one ``FakeGitHub`` instance, the routes a bot that opens pull
requests uses, answering from and changing the server's own ``Repo`` state the way
GitHub does:

- git data: ``GET/POST git/blobs``, ``GET/POST git/trees`` (``base_tree``, ``recursive``,
  an entry with ``sha: null`` deletes a path), ``GET/POST git/commits`` (a new commit moves
  no branch), ``POST git/refs`` (422 "Reference already exists"), ``PATCH git/refs/...``
  (422 unless fast-forward or ``force``), ``DELETE git/refs/...`` (GitHub closes the open
  PRs of a deleted head branch);
- pulls: list (``state``, ``head=OWNER:BRANCH`` filter; a ``head`` without the owner is
  ignored, as on GitHub), create (422 "A pull request already exists"), edit (reopening
  fails when the head branch was deleted or force-pushed since the PR was closed), merge
  (squash; 405 when closed or in conflict with the base);
- issues: list (PRs included, ``labels`` and ``state`` filters), create, get, edit,
  comments (list, create, edit), labels on issues and PRs, repository labels;
- a body (of an issue, a pull request or a comment, created or edited) longer than GitHub's
  65,536 characters is refused with GitHub's 422, and nothing is written;
- a PR's changed files (``GET pulls/N/files``: its head commit against its base branch).

A PR's head commit follows its branch while it is open. Trees are the ``Commit.files``
dicts of ``fakegithub``; their shas are ``fakegithub``'s, blob shas are git's.

Faults by method: ``deny(server, "POST", "/repos/<owner>/<repo>/pulls", 403)`` makes the
next matching write fail (``FakeGitHub.fail`` matches a rule whatever the method, and
GET and POST share rules here).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from werkzeug.wrappers import Request

from support.fakegithub import BOT, Commit, FakeGitHub, NotFound, PullRequest, Reply, Repo, _tree_sha, get_issue, iso


@dataclass
class Issue:
    number: int
    title: str
    body: str
    user: str
    created_at: datetime
    updated_at: datetime
    labels: list[str] = field(default_factory=list)
    state: str = "open"
    closed_at: datetime | None = None


@dataclass
class Comment:
    id: int
    body: str
    user: str
    created_at: datetime


@dataclass
class GitStore:
    blobs: dict[str, bytes] = field(default_factory=dict)  # blob sha -> content
    trees: dict[str, dict[str, str]] = field(default_factory=dict)  # tree sha -> path -> text
    issues: dict[str, dict[int, Issue]] = field(default_factory=dict)  # repo -> number -> issue
    comments: dict[tuple[str, int], list[Comment]] = field(default_factory=dict)
    closed_heads: dict[tuple[str, int], str | None] = field(default_factory=dict)  # head sha when closed
    denials: list[tuple[str, str, int, dict, bool]] = field(default_factory=list)  # method, rule, answer, apply


def blob_sha(raw: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()


def tree_sha(files: dict[str, str]) -> str:
    """The sha ``fakegithub`` gives a commit's tree (so both modules name trees alike)."""
    return _tree_sha(Commit("", "", [], datetime.now(), files))


def store(server: FakeGitHub) -> GitStore:
    return server.git  # type: ignore[attr-defined]


def deny(server: FakeGitHub, method: str, rule: str, status: int = 403, message: str | None = None,
         apply: bool = False) -> None:
    """The next ``method`` request matching ``rule`` answers ``status`` (once).

    ``apply=True``: the request takes effect all the same and only its answer is lost, as
    when a POST succeeded but the client saw an error (and a retry met "already exists").
    """
    body = {"message": message or ("Resource not accessible by integration" if status == 403 else "Error"),
            "documentation_url": "https://docs.github.com/rest"}
    store(server).denials.append((method, rule, status, body, apply))


GRAPHQL_ROUTES = ("/graphql", "/api/graphql")


def writes(server: FakeGitHub) -> int:
    """Requests that could change something (anything but GET and HEAD, and GraphQL queries:
    the stand-in's GraphQL schema has no mutations, so a POST there reads)."""
    server.settle()
    return sum(1 for hit in server.log if hit.method not in ("GET", "HEAD") and hit.rule not in GRAPHQL_ROUTES)


def install(server: FakeGitHub) -> FakeGitHub:
    """Add the write routes to ``server`` (idempotent)."""
    if getattr(server, "git", None) is not None:
        return server
    server.git = GitStore()  # type: ignore[attr-defined]
    for method, rule, handler in _ROUTES:
        server.add_route(method, rule, _guarded(method, rule, handler))
    return server


_ROUTES: list[tuple[str, str, Any]] = []


def route(method: str, rule: str):
    def register(handler):
        _ROUTES.append((method, rule, handler))
        return handler
    return register


def _guarded(method: str, rule: str, handler):
    def answer(server: FakeGitHub, request: Request, **params: Any) -> Any:
        denials = store(server).denials
        for index, (m, r, status, body, apply) in enumerate(denials):
            if m == method and r == rule:
                del denials[index]
                if apply:
                    handler(server, request, **params)
                return Reply(status, body)
        return handler(server, request, **params)
    return answer


def _body(request: Request) -> Any:
    return json.loads(request.get_data(as_text=True) or "null")


def _invalid(message: str, **error: Any) -> Reply:
    errors = [error] if error else []
    return Reply(422, {"message": message, "errors": errors,
                       "documentation_url": "https://docs.github.com/rest"})


# GitHub refuses a longer body of an issue, a pull request or a comment (422), counted in characters.
BODY_LIMIT = 65_536


def _too_long(data: Any, resource: str) -> Reply | None:
    """GitHub's 422 for a body over ``BODY_LIMIT`` characters; None for one within it."""
    body = data.get("body") if isinstance(data, dict) else None
    if not isinstance(body, str) or len(body) <= BODY_LIMIT:
        return None
    field = "data" if resource == "IssueComment" else "body"
    return _invalid("Validation Failed", resource=resource, code="custom", field=field,
                    message=f"body is too long (maximum is {BODY_LIMIT} characters)")


def _key(r: Repo) -> str:
    return r.full_name.lower()


# ---------------------------------------------------------------------------- git data


def _tree_files(server: FakeGitHub, r: Repo, sha: str) -> dict[str, str] | None:
    git = store(server)
    if sha in git.trees:
        return git.trees[sha]
    for commit in r.commits.values():
        if _tree_sha(commit) == sha:
            git.trees[sha] = commit.files
            return commit.files
    return None


def _tree_json(server: FakeGitHub, r: Repo, sha: str, files: dict[str, str], recursive: bool) -> dict[str, Any]:
    git = store(server)
    entries: dict[str, dict[str, Any]] = {}
    for path, text in sorted(files.items()):
        raw = text.encode("utf-8", "surrogateescape")  # bytes that are not UTF-8 survive (hostile tests)
        blob = blob_sha(raw)
        git.blobs[blob] = raw
        parts = path.split("/")
        if not recursive and len(parts) > 1:
            parts = parts[:1]
            if parts[0] in entries:  # the folder's subtree is the same for each of its files
                continue
            sub = {p[len(parts[0]) + 1:]: t for p, t in files.items() if p.startswith(parts[0] + "/")}
            sub_sha = tree_sha(sub)
            git.trees[sub_sha] = sub
            entries[parts[0]] = {"path": parts[0], "mode": "040000", "type": "tree", "sha": sub_sha,
                                 "url": f"{r.api}/git/trees/{sub_sha}"}
            continue
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder not in entries:
                sub = {p[len(folder) + 1:]: t for p, t in files.items() if p.startswith(folder + "/")}
                sub_sha = tree_sha(sub)
                git.trees[sub_sha] = sub
                entries[folder] = {"path": folder, "mode": "040000", "type": "tree", "sha": sub_sha,
                                   "url": f"{r.api}/git/trees/{sub_sha}"}
        entries[path] = {"path": path, "mode": "100644", "type": "blob", "sha": blob, "size": len(raw),
                         "url": f"{r.api}/git/blobs/{blob}"}
    return {"sha": sha, "url": f"{r.api}/git/trees/{sha}", "tree": sorted(entries.values(), key=lambda e: e["path"]),
            "truncated": False}


@route("GET", "/repos/<owner>/<repo>/git/trees/<sha>")
def get_tree(server: FakeGitHub, request: Request, owner: str, repo: str, sha: str) -> Any:
    r = server.repo(owner, repo)
    files = _tree_files(server, r, sha)
    if files is None:
        raise NotFound(sha)
    return _tree_json(server, r, sha, files, recursive=request.args.get("recursive") not in (None, "", "0", "false"))


@route("GET", "/repos/<owner>/<repo>/git/blobs/<sha>")
def get_blob(server: FakeGitHub, request: Request, owner: str, repo: str, sha: str) -> Any:
    r = server.repo(owner, repo)
    raw = store(server).blobs.get(sha)
    if raw is None:  # a blob of a commit's file, not listed in a tree yet (a file the contents API left out)
        raw = next((text.encode("utf-8", "surrogateescape") for commit in r.commits.values()
                    for text in commit.files.values() if blob_sha(text.encode("utf-8", "surrogateescape")) == sha), None)
    if raw is None:
        raise NotFound(sha)
    return {"sha": sha, "node_id": f"B_{sha[:12]}", "url": f"{r.api}/git/blobs/{sha}", "size": len(raw),
            "encoding": "base64", "content": base64.encodebytes(raw).decode()}


@route("POST", "/repos/<owner>/<repo>/git/blobs")
def create_blob(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    if not isinstance(data.get("content"), str):
        return _invalid("Invalid request.\n\n\"content\" wasn't supplied.")
    raw = base64.b64decode(data["content"]) if data.get("encoding") == "base64" else data["content"].encode()
    sha = blob_sha(raw)
    store(server).blobs[sha] = raw
    return Reply(201, {"sha": sha, "url": f"{r.api}/git/blobs/{sha}"})


@route("POST", "/repos/<owner>/<repo>/git/trees")
def create_tree(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    git = store(server)
    data = _body(request) or {}
    files: dict[str, str] = {}
    if data.get("base_tree"):
        base = _tree_files(server, r, data["base_tree"])
        if base is None:
            return _invalid("base_tree is not a valid tree oid")
        files = dict(base)
    for entry in data.get("tree", []):
        path = entry.get("path")
        if not path or entry.get("type") != "blob" or entry.get("mode") not in ("100644", "100755"):
            return _invalid("GitRPC::BadObjectState")
        if "content" in entry:
            files[path] = entry["content"]
        elif entry.get("sha") is None:
            if path not in files:
                return _invalid(f"GitRPC::BadObjectState: cannot delete {path}: not in the base tree")
            del files[path]
        elif entry["sha"] in git.blobs:
            files[path] = git.blobs[entry["sha"]].decode()
        else:
            return _invalid("tree.sha is not a valid blob")
    sha = tree_sha(files)
    git.trees[sha] = files
    return Reply(201, _tree_json(server, r, sha, files, recursive=False))


def _git_commit_json(server: FakeGitHub, r: Repo, commit: Commit) -> dict[str, Any]:
    person = {"name": commit.author, "email": f"{commit.author}@example.com", "date": iso(commit.date)}
    tree = _tree_sha(commit)
    store(server).trees.setdefault(tree, commit.files)
    return {"sha": commit.sha, "node_id": f"C_{commit.sha[:12]}", "url": f"{r.api}/git/commits/{commit.sha}",
            "html_url": f"{r.html}/commit/{commit.sha}", "author": person, "committer": person,
            "message": commit.message, "tree": {"sha": tree, "url": f"{r.api}/git/trees/{tree}"},
            "parents": [{"sha": p, "url": f"{r.api}/git/commits/{p}", "html_url": f"{r.html}/commit/{p}"}
                        for p in commit.parents],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None}}


@route("GET", "/repos/<owner>/<repo>/git/commits/<sha>")
def get_git_commit(server: FakeGitHub, request: Request, owner: str, repo: str, sha: str) -> Any:
    r = server.repo(owner, repo)
    if sha not in r.commits:
        raise NotFound(sha)
    return _git_commit_json(server, r, r.commits[sha])


@route("POST", "/repos/<owner>/<repo>/git/commits")
def create_git_commit(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    files = _tree_files(server, r, data.get("tree") or "")
    if files is None:
        return _invalid("Tree SHA does not exist")
    parents = list(data.get("parents") or [])
    if any(p not in r.commits for p in parents):
        return _invalid("Parent SHA does not exist or is not a commit object")
    moment = server.tick()
    seed = json.dumps([r.full_name, data.get("message", ""), parents, data["tree"], iso(moment),
                       next(server.counter)])
    sha = hashlib.sha1(seed.encode()).hexdigest()
    r.commits[sha] = Commit(sha, data.get("message", ""), parents, moment, dict(files), BOT)
    return Reply(201, _git_commit_json(server, r, r.commits[sha]))


def _ref_json(r: Repo, ref: str, sha: str) -> dict[str, Any]:
    return {"ref": ref, "node_id": f"REF_{ref}", "url": f"{r.api}/git/{ref}",
            "object": {"sha": sha, "type": "commit", "url": f"{r.api}/git/commits/{sha}"}}


def _follow(r: Repo, branch: str) -> None:
    """Open PRs from ``branch`` show its new tip as their head."""
    for pr in r.pulls.values():
        if pr.head == branch and pr.state == "open":
            pr.head_sha = r.branches.get(branch)
            pr.updated_at = r.server.tick()


@route("POST", "/repos/<owner>/<repo>/git/refs")
def create_ref(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    ref, sha = data.get("ref", ""), data.get("sha", "")
    if not ref.startswith("refs/heads/") or ref.count("/") < 2:
        return _invalid("Reference name must start with 'refs/' and have at least two slashes.")
    if sha not in r.commits:
        return _invalid("Object does not exist")
    branch = ref[len("refs/heads/"):]
    if branch in r.branches:
        return _invalid("Reference already exists")
    r.branches[branch] = sha
    _follow(r, branch)
    return Reply(201, _ref_json(r, ref, sha))


@route("PATCH", "/repos/<owner>/<repo>/git/refs/<path:ref>")
def update_ref(server: FakeGitHub, request: Request, owner: str, repo: str, ref: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    if not ref.startswith("heads/") or ref[len("heads/"):] not in r.branches:
        return _invalid("Reference does not exist")
    branch, sha = ref[len("heads/"):], data.get("sha", "")
    if sha not in r.commits:
        return _invalid("Object does not exist")
    if not data.get("force") and r.branches[branch] not in r.ancestors(sha):
        return _invalid("Update is not a fast forward")
    r.branches[branch] = sha
    _follow(r, branch)
    return _ref_json(r, f"refs/{ref}", sha)


@route("DELETE", "/repos/<owner>/<repo>/git/refs/<path:ref>")
def delete_ref(server: FakeGitHub, request: Request, owner: str, repo: str, ref: str) -> Any:
    r = server.repo(owner, repo)
    if not ref.startswith("heads/") or ref[len("heads/"):] not in r.branches:
        return _invalid("Reference does not exist")
    branch = ref[len("heads/"):]
    del r.branches[branch]
    for pr in r.pulls.values():  # GitHub closes the PRs whose head branch is deleted
        if pr.head == branch and pr.state == "open":
            _set_state(server, r, pr, "closed")
    return Reply(204, None)


# ------------------------------------------------------------------------------- pulls


def _set_state(server: FakeGitHub, r: Repo, pr: PullRequest, state: str, actor: str = BOT) -> None:
    moment = server.tick()
    pr.state, pr.updated_at = state, moment
    if state == "closed":
        pr.closed_at = moment
        store(server).closed_heads[(_key(r), pr.number)] = r.branches.get(pr.head)
        r.event(pr.number, "closed", moment, actor=actor)
    else:
        pr.closed_at = None
        pr.head_sha = r.branches.get(pr.head)
        r.event(pr.number, "reopened", moment, actor=actor)


def close_by_person(server: FakeGitHub, r: Repo, number: int, person: str = "maintainer") -> None:
    """A person presses "Close pull request" (no merge; the branch stays)."""
    _set_state(server, r, r.pulls[number], "closed", actor=person)


def merge_by_person(server: FakeGitHub, r: Repo, number: int) -> str:
    """A person squash-merges the PR: its branch's tree lands on the base as one new commit."""
    pr = r.pulls[number]
    tip = r.commits[r.branches[pr.head]]
    base_files = r.commits[tip.parents[0]].files  # the PR's own change, replayed on the base
    change: dict[str, str | None] = {p: t for p, t in tip.files.items() if base_files.get(p) != t}
    change.update({p: None for p in base_files if p not in tip.files})
    return r.merge(number, files=change)


@route("PUT", "/repos/<owner>/<repo>/pulls/<int:number>/merge")
def merge_pull(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    """A person merges through the API (squash): 405 when closed, or when the base changed a
    file the PR changes since the PR's commit was made (a conflict GitHub would report)."""
    r = server.repo(owner, repo)
    if number not in r.pulls:
        raise NotFound(number)
    pr = r.pulls[number]
    if pr.state != "open" or pr.head not in r.branches:
        return Reply(405, {"message": "Pull Request is not mergeable"})
    tip = r.commits[r.branches[pr.head]]
    parent = r.commits[tip.parents[0]].files
    changed = {p for p, t in tip.files.items() if parent.get(p) != t} | {p for p in parent if p not in tip.files}
    base = r.commits[r.branches[pr.base]].files
    if any(base.get(p) != parent.get(p) for p in changed):
        return Reply(405, {"message": "Pull Request is not mergeable"})
    sha = merge_by_person(server, r, number)
    return {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}


@route("GET", "/repos/<owner>/<repo>/pulls")
def list_pulls(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    state = request.args.get("state", "open")
    head = request.args.get("head")
    base = request.args.get("base")
    items = []
    for pr in sorted(r.pulls.values(), key=lambda p: p.number, reverse=True):
        if state != "all" and pr.state != state:
            continue
        if head and ":" in head and head != f"{r.owner}:{pr.head}":  # without "OWNER:" GitHub ignores it
            continue
        if base and pr.base != base:
            continue
        items.append(server.pull_json(r, pr))
    return server.page(request, items)


@route("POST", "/repos/<owner>/<repo>/pulls")
def create_pull(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    if (refused := _too_long(data, "PullRequest")) is not None:
        return refused
    head, base = data.get("head", ""), data.get("base", "")
    head = head.split(":", 1)[1] if ":" in head else head
    if base not in r.branches:
        return _invalid("Validation Failed", resource="PullRequest", field="base", code="invalid")
    if head not in r.branches:
        return _invalid("Validation Failed", resource="PullRequest", field="head", code="invalid")
    for pr in r.pulls.values():
        if pr.head == head and pr.base == base and pr.state == "open":
            return _invalid("Validation Failed", resource="PullRequest", code="custom",
                            message=f"A pull request already exists for {r.owner}:{head}.")
    number = r.next_number
    r.next_number += 1
    moment = server.tick()
    # The head repository is this one, so GitHub labels the head "OWNER:BRANCH".
    pr = PullRequest(number, data.get("title", ""), data.get("body") or "", head, base, r.owner, moment, moment,
                     head_sha=r.branches[head], draft=bool(data.get("draft")))
    r.pulls[number] = pr
    r.events.setdefault(number, [])
    return Reply(201, server.pull_json(r, pr))


@route("PATCH", "/repos/<owner>/<repo>/pulls/<int:number>")
def edit_pull(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    if number not in r.pulls:
        raise NotFound(number)
    pr = r.pulls[number]
    data = _body(request) or {}
    if (refused := _too_long(data, "PullRequest")) is not None:
        return refused
    state = data.get("state")
    if state == "open" and pr.state == "closed":
        if pr.merged:
            return _invalid("Validation Failed", resource="PullRequest", field="state", code="invalid",
                            message="state cannot be changed. The pull request has been merged.")
        at_close = store(server).closed_heads.get((_key(r), number))
        if pr.head not in r.branches or r.branches[pr.head] != at_close:
            return _invalid("Validation Failed", resource="PullRequest", field="state", code="invalid",
                            message=f"state cannot be changed. The {pr.head} branch was force-pushed "
                                    f"or recreated.")
    if "base" in data and data["base"] not in r.branches:
        return _invalid("Validation Failed", resource="PullRequest", field="base", code="invalid")
    for name in ("title", "body", "base"):
        if name in data and data[name] is not None:
            setattr(pr, name, data[name])
    if state in ("open", "closed") and state != pr.state:
        _set_state(server, r, pr, state)
    pr.updated_at = server.tick()
    return server.pull_json(r, pr)


# ------------------------------------------------------------------------------ issues


def _issue_json(server: FakeGitHub, r: Repo, issue: Issue) -> dict[str, Any]:
    url = f"{r.api}/issues/{issue.number}"
    return {"url": url, "repository_url": r.api, "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments", "events_url": f"{url}/events",
            "html_url": f"{r.html}/issues/{issue.number}", "id": issue.number * 7919, "node_id": f"I_{issue.number}",
            "number": issue.number, "title": issue.title, "user": server.user(issue.user),
            "labels": [server.label_json(r, name) for name in issue.labels], "state": issue.state,
            "state_reason": None, "locked": False, "assignee": None, "assignees": [], "milestone": None,
            "comments": len(store(server).comments.get((_key(r), issue.number), [])),
            "created_at": iso(issue.created_at), "updated_at": iso(issue.updated_at),
            "closed_at": iso(issue.closed_at) if issue.closed_at else None, "body": issue.body,
            "author_association": "OWNER"}


def _issues(server: FakeGitHub, r: Repo) -> dict[int, Issue]:
    return store(server).issues.setdefault(_key(r), {})


def _labels_of(server: FakeGitHub, r: Repo, number: int) -> list[str]:
    if number in r.pulls:
        return r.pulls[number].labels
    if number in _issues(server, r):
        return _issues(server, r)[number].labels
    raise NotFound(number)


def issue_by_person(server: FakeGitHub, r: Repo, title: str, body: str, labels: list[str],
                    person: str = "stranger") -> Issue:
    """Someone opens an issue through GitHub's page (an issue template may give it any label)."""
    number = r.next_number
    r.next_number += 1
    moment = server.tick()
    issue = Issue(number, title, body, person, moment, moment, list(labels))
    _issues(server, r)[number] = issue
    return issue


def comment_by_person(server: FakeGitHub, r: Repo, number: int, body: str, person: str = "stranger") -> Comment:
    """Someone comments on issue or pull request ``number`` through GitHub's page."""
    _labels_of(server, r, number)
    comment = Comment(next(server.counter), body, person, server.tick())
    store(server).comments.setdefault((_key(r), number), []).append(comment)
    return comment


@route("GET", "/repos/<owner>/<repo>/issues")
def list_issues(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    state = request.args.get("state", "open")
    wanted = [name for name in request.args.get("labels", "").split(",") if name]
    found: list[tuple[datetime, dict[str, Any]]] = []
    for issue in _issues(server, r).values():
        if (state == "all" or issue.state == state) and all(name in issue.labels for name in wanted):
            found.append((issue.created_at, _issue_json(server, r, issue)))
    for pr in r.pulls.values():  # GitHub's issue list includes pull requests
        if (state == "all" or pr.state == state) and all(name in pr.labels for name in wanted):
            found.append((pr.created_at, server.issue_json(r, pr)))
    return server.page(request, [item for _, item in sorted(found, key=lambda pair: pair[0], reverse=True)])


@route("POST", "/repos/<owner>/<repo>/issues")
def create_issue(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    if not data.get("title"):
        return _invalid("Validation Failed", resource="Issue", field="title", code="missing_field")
    if (refused := _too_long(data, "Issue")) is not None:
        return refused
    number = r.next_number
    r.next_number += 1
    moment = server.tick()
    labels = list(dict.fromkeys(data.get("labels") or []))
    for name in labels:
        r.labels.setdefault(name, "ededed")
    issue = Issue(number, data["title"], data.get("body") or "", BOT, moment, moment, labels)
    _issues(server, r)[number] = issue
    return Reply(201, _issue_json(server, r, issue))


@route("GET", "/repos/<owner>/<repo>/issues/<int:number>")
def get_any_issue(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    if number in _issues(server, r):
        return _issue_json(server, r, _issues(server, r)[number])
    return get_issue(server, request, owner, repo, number)


@route("PATCH", "/repos/<owner>/<repo>/issues/<int:number>")
def edit_issue(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    if (refused := _too_long(data, "Issue")) is not None:
        return refused
    if number in r.pulls:
        pr = r.pulls[number]
        for name in ("title", "body"):
            if data.get(name) is not None:
                setattr(pr, name, data[name])
        if data.get("state") in ("open", "closed") and data["state"] != pr.state:
            _set_state(server, r, pr, data["state"])
        return server.issue_json(r, pr)
    issue = _issues(server, r).get(number)
    if issue is None:
        raise NotFound(number)
    for name in ("title", "body"):
        if data.get(name) is not None:
            setattr(issue, name, data[name])
    if "labels" in data:
        issue.labels = list(dict.fromkeys(data["labels"]))
    if data.get("state") in ("open", "closed"):
        issue.state = data["state"]
        issue.closed_at = server.tick() if issue.state == "closed" else None
    issue.updated_at = server.tick()
    return _issue_json(server, r, issue)


def _comment_json(server: FakeGitHub, r: Repo, number: int, comment: Comment) -> dict[str, Any]:
    return {"id": comment.id, "node_id": f"IC_{comment.id}", "url": f"{r.api}/issues/comments/{comment.id}",
            "html_url": f"{r.html}/issues/{number}#issuecomment-{comment.id}", "body": comment.body,
            "user": server.user(comment.user), "created_at": iso(comment.created_at),
            "updated_at": iso(comment.created_at), "issue_url": f"{r.api}/issues/{number}",
            "author_association": "OWNER"}


@route("GET", "/repos/<owner>/<repo>/issues/<int:number>/comments")
def list_comments(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    _labels_of(server, r, number)
    comments = store(server).comments.get((_key(r), number), [])
    return server.page(request, [_comment_json(server, r, number, c) for c in comments])


@route("POST", "/repos/<owner>/<repo>/issues/<int:number>/comments")
def create_comment(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    _labels_of(server, r, number)
    data = _body(request) or {}
    if (refused := _too_long(data, "IssueComment")) is not None:
        return refused
    comment = Comment(next(server.counter), data.get("body", ""), BOT, server.tick())
    store(server).comments.setdefault((_key(r), number), []).append(comment)
    return Reply(201, _comment_json(server, r, number, comment))


@route("PATCH", "/repos/<owner>/<repo>/issues/comments/<int:comment_id>")
def edit_comment(server: FakeGitHub, request: Request, owner: str, repo: str, comment_id: int) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    if (refused := _too_long(data, "IssueComment")) is not None:
        return refused
    for (key, number), comments in store(server).comments.items():
        for comment in comments:
            if key == _key(r) and comment.id == comment_id:
                comment.body = data.get("body", comment.body)
                return _comment_json(server, r, number, comment)
    raise NotFound(str(comment_id))


@route("GET", "/repos/<owner>/<repo>/pulls/<int:number>/files")
def pull_files(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    if number not in r.pulls:
        raise NotFound(str(number))
    pr = r.pulls[number]
    base = r.commits[r.branches[pr.base]].files
    head = r.commits[pr.head_sha].files if pr.head_sha else base
    files = [{"sha": blob_sha(text.encode()), "filename": path, "additions": 1, "deletions": 0, "changes": 1,
              "status": "modified" if path in base else "added",
              "blob_url": f"{r.html}/blob/{pr.head_sha}/{path}",
              "raw_url": f"{r.html}/raw/{pr.head_sha}/{path}",
              "contents_url": f"{r.api}/contents/{path}?ref={pr.head_sha}", "patch": ""}
             for path, text in sorted(head.items()) if base.get(path) != text]
    files += [{"sha": blob_sha(text.encode()), "filename": path, "additions": 0, "deletions": 1, "changes": 1,
               "status": "removed", "blob_url": f"{r.html}/blob/{pr.head_sha}/{path}",
               "raw_url": f"{r.html}/raw/{pr.head_sha}/{path}", "contents_url": f"{r.api}/contents/{path}",
               "patch": ""} for path, text in sorted(base.items()) if path not in head]
    return server.page(request, files)


@route("POST", "/repos/<owner>/<repo>/issues/<int:number>/labels")
def add_labels(server: FakeGitHub, request: Request, owner: str, repo: str, number: int) -> Any:
    r = server.repo(owner, repo)
    labels = _labels_of(server, r, number)
    data = _body(request)
    names = data.get("labels", []) if isinstance(data, dict) else (data or [])
    for name in names:
        r.labels.setdefault(name, "ededed")  # GitHub creates labels it does not know
        if name not in labels:
            labels.append(name)
            if number in r.pulls:
                r.event(number, "labeled", label=name, actor=BOT)
    return [server.label_json(r, name) for name in labels]


@route("GET", "/repos/<owner>/<repo>/labels/<name>")
def get_label(server: FakeGitHub, request: Request, owner: str, repo: str, name: str) -> Any:
    r = server.repo(owner, repo)
    if name not in r.labels:
        raise NotFound(name)
    return server.label_json(r, name)


@route("POST", "/repos/<owner>/<repo>/labels")
def create_label(server: FakeGitHub, request: Request, owner: str, repo: str) -> Any:
    r = server.repo(owner, repo)
    data = _body(request) or {}
    name = data.get("name", "")
    if name in r.labels:
        return _invalid("Validation Failed", resource="Label", code="already_exists", field="name")
    r.labels[name] = data.get("color", "ededed")
    return Reply(201, server.label_json(r, name))
