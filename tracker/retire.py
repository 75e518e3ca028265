"""Retirement automation: one removal PR per retirable workaround, and the dashboard issue.

Data flows one way: the repository as it is on the base branch (read through the API,
never the local checkout) -> its manifest -> retirement verdicts
(``tracker.decision.retirement``) -> the removal change -> one commit built with the git
data API -> the branch ``xpu-workarounds/retire-<id>`` -> its pull request.

What a workaround owns (removed with it), by its module ``workarounds.<name>``:

- ``workarounds/<name>.py`` (or the package ``workarounds/<name>/``);
- its tests: ``tests/**/test_<name>.py`` and ``tests/**/test_workaround_<name>.py``;
- its fixtures: ``tests/**/fixtures/<name>/**`` and ``tests/**/fixtures/<name>.<ext>``;
- its ``[[workaround]]`` entry in ``workarounds.toml`` (cut from the text, so every other
  line and comment stays as it was);

and ``docs/workarounds.md`` is regenerated from the edited manifest.

Safety: the edited manifest must pass ``lint`` against the edited tree before anything
is written; commit objects are created first and the branch ref is created or moved last,
and a branch created by this run is deleted again if its PR cannot be opened. Every PR
body carries a hidden marker with a fingerprint of the evidence, which tells a second run
whether anything changed and a closed PR whether a person closed it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

import github
import requests
import tomlkit
from github import GithubException, InputGitTreeElement
from github.GitCommit import GitCommit
from github.GitTree import GitTree
from github.PullRequest import PullRequest
from github.Repository import Repository

from tracker import manifest as manifest_module
from tracker.catalogue import markdown
from tracker.decision import Retirement, removal_condition, retirement
from tracker.github_client import ClientSettings, classify, connect
from tracker.manifest import Manifest, Workaround

MANIFEST_PATH = "workarounds.toml"
DOCS_PATH = "docs/workarounds.md"
BRANCH_PREFIX = "xpu-workarounds/retire-"
LABEL = "workaround-retirement"
LABEL_COLOUR = "5319e7"
DASHBOARD_LABEL = "xpu-workarounds-dashboard"
DASHBOARD_TITLE = "XPU workarounds dashboard"
DASHBOARD_MARKER = "<!-- xpu-workarounds:dashboard -->"
ACTIONS = ("opened", "updated", "unchanged", "closed", "left-closed", "failed")

_MARKER = re.compile(r"<!-- xpu-workarounds:retire id=(?P<id>\S+) evidence=(?P<evidence>[0-9a-f]+)"
                     r"(?: closed=(?P<closed>\S+))? -->")
_HEADER = re.compile(r"^\s*\[\[\s*workaround\s*\]\]\s*(#.*)?$")
_COMMENT = re.compile(r"^\s*#")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class RetireError(Exception):
    """The run cannot act at all (repository, base or manifest unreadable): one line."""


class RemovalError(Exception):
    """The removal would leave the repository failing lint: one line per problem."""


# ---------------------------------------------------------------- the removal change


@dataclass(frozen=True)
class Snapshot:
    """The base branch as the API shows it: a commit, its tree, the manifest text."""

    branch: str
    commit: str
    tree: str
    blobs: dict[str, str]  # path -> blob sha, every file in the tree
    modes: dict[str, str]  # path -> file mode
    manifest_text: str

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.blobs)


@dataclass(frozen=True)
class Removal:
    """One workaround's removal: files deleted, files (re)written, the expected tree."""

    workaround: Workaround
    deleted: tuple[str, ...]
    written: dict[str, str]  # path -> new text

    def expected_blobs(self, snapshot: Snapshot) -> dict[str, str]:
        """path -> blob sha of the tree the removal commit must have."""
        blobs = {path: sha for path, sha in snapshot.blobs.items() if path not in self.deleted}
        blobs.update({path: blob_sha(text) for path, text in self.written.items()})
        return blobs


def blob_sha(text: str) -> str:
    """The git blob id of ``text`` (what ``git hash-object`` prints)."""
    raw = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()


def module_name(w: Workaround) -> str:
    return w.module.removeprefix("workarounds.")


def owned_paths(w: Workaround, paths: Iterable[str]) -> list[str]:
    """The files that belong to ``w`` alone (see the module docstring for the convention)."""
    name = module_name(w)
    owned = []
    for path in paths:
        parts = PurePosixPath(path).parts
        if path == f"workarounds/{name}.py" or parts[:2] == ("workarounds", name):
            owned.append(path)
        elif parts and parts[0] == "tests":
            if parts[-1] in (f"test_{name}.py", f"test_workaround_{name}.py"):
                owned.append(path)
            elif any(parts[i] == "fixtures" and (parts[i + 1] == name and i + 1 < len(parts) - 1
                                                 or PurePosixPath(parts[i + 1]).stem == name
                                                 and i + 1 == len(parts) - 1)
                     for i in range(len(parts) - 1)):
                owned.append(path)
    return sorted(owned)


def remove_entry(text: str, workaround_id: str) -> str:
    """``workarounds.toml`` without the ``[[workaround]]`` whose id is ``workaround_id``.

    The entry is cut from the text: its header, its sub-tables and the comment lines
    directly above its header go; the comment lines directly above the next entry's
    header stay with that entry (tomlkit alone would drop them with the deleted table);
    every other byte is kept. The result is checked against tomlkit's own deletion.
    """
    document = tomlkit.parse(text)
    ids = [entry.get("id") for entry in document.get("workaround", [])]
    if workaround_id not in ids:
        raise RemovalError(f"{MANIFEST_PATH}: no [[workaround]] with id {workaround_id!r}")
    index = ids.index(workaround_id)
    del document["workaround"][index]
    expected = document.unwrap()

    lines = text.splitlines(keepends=True)
    headers = [number for number, line in enumerate(lines) if _HEADER.match(line)]
    if len(headers) == len(ids):
        start = _comments_above(lines, headers[index])
        end = _comments_above(lines, headers[index + 1]) if index + 1 < len(headers) else len(lines)
        edited = "".join(lines[:start] + lines[end:])
        if index + 1 == len(headers):
            edited = edited.rstrip("\n") + "\n"
        try:
            if tomlkit.parse(edited).unwrap() == expected:
                return edited
        except tomlkit.exceptions.TOMLKitError:
            pass
    return tomlkit.dumps(document)  # an unusual layout: tomlkit's own result (comments may move)


def _comments_above(lines: list[str], header: int) -> int:
    """The first line of the comment block directly above line ``header``."""
    start = header
    while start > 0 and _COMMENT.match(lines[start - 1]):
        start -= 1
    return start


def compute_removal(snapshot: Snapshot, w: Workaround) -> Removal:
    """The change that retires ``w`` from ``snapshot``; raises RemovalError if lint would fail."""
    deleted = owned_paths(w, snapshot.paths)
    manifest_text = remove_entry(snapshot.manifest_text, w.id)
    remaining = snapshot.paths - set(deleted)
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(manifest_text, encoding="utf-8")
        problems = [str(p).replace(str(path), MANIFEST_PATH)
                    for p in manifest_module.check(path, check_modules=False)]
        edited = manifest_module.load(path, check_modules=False) if not problems else None
    if edited is not None:
        for other in edited.workarounds:
            name = module_name(other)
            if f"workarounds/{name}.py" not in remaining and f"workarounds/{name}/__init__.py" not in remaining:
                problems.append(f"{MANIFEST_PATH}: workaround[{other.id}].module: module {other.module} "
                                f"does not exist in the edited tree")
    if problems:
        raise RemovalError("; ".join(problems))
    return Removal(w, tuple(deleted), {MANIFEST_PATH: manifest_text, DOCS_PATH: markdown(edited)})


def manifest_from_text(text: str) -> Manifest:
    """The manifest in ``text`` (module existence is judged against the tree, not here)."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(text, encoding="utf-8")
        try:
            return manifest_module.load(path, check_modules=False)
        except manifest_module.ManifestError as error:
            first = str(error.problems[0]).replace(str(path), MANIFEST_PATH)
            raise RetireError(f"the {MANIFEST_PATH} on the base branch is invalid ({first}"
                              f"{'; and more' if len(error.problems) > 1 else ''})") from None


# ------------------------------------------------------------------ evidence and text


def branch_for(workaround_id: str) -> str:
    return f"{BRANCH_PREFIX}{workaround_id}"


def fingerprint(w: Workaround, verdict: Retirement, manifest: Manifest) -> str:
    """A hash of the evidence for retiring ``w``: changes exactly when the evidence does."""
    evidence = {
        "id": w.id, "module": w.module, "verdict": verdict.verdict, "detail": verdict.detail,
        "support": {name: str(version) for name, version in sorted(manifest.support.items())},
        "affected": [window.describe() for window in w.affected],
        "upstream": [[ref.ref, ref.role, ref.state, str(ref.released_in or ""), ref.commit or ""]
                     for ref in w.upstream],
    }
    return hashlib.sha256(json.dumps(evidence, sort_keys=True).encode()).hexdigest()[:20]


def marker(workaround_id: str, evidence: str, closed: str | None = None) -> str:
    return (f"<!-- xpu-workarounds:retire id={workaround_id} evidence={evidence}"
            f"{' closed=' + closed if closed else ''} -->")


@dataclass(frozen=True)
class Marker:
    id: str
    evidence: str
    closed: str | None  # "not-retirable" when this tool closed the PR; None otherwise


def read_marker(body: str | None) -> Marker | None:
    found = _MARKER.search(body or "")
    return Marker(found["id"], found["evidence"], found["closed"]) if found else None


def pr_title(w: Workaround) -> str:
    return f"Retire workaround {w.id}: no supported stack needs it"


def pr_body(w: Workaround, verdict: Retirement, manifest: Manifest, snapshot: Snapshot, removal: Removal,
            evidence: str) -> str:
    floors = ", ".join(f"{name} {version}" for name, version in manifest.support.items())
    refs = [f"| [{ref.ref}](https://github.com/{ref.repo}/pull/{ref.number}) | {ref.role} | {ref.state} | "
            f"{('`' + str(ref.released_in) + '`') if ref.released_in else 'not in a release'} |"
            for ref in w.upstream]
    name = module_name(w)
    lines = [
        f"No supported stack needs `{w.id}` ({w.title}) any more, so this PR removes it.",
        "",
        f"**Verdict:** {verdict.detail}",
        "",
        f"**Support floor** (`[support]` in `{MANIFEST_PATH}` on `{snapshot.branch}` at "
        f"`{snapshot.commit[:12]}`): {floors}.",
        "",
        "**Affected windows:** " + "; ".join(f"`{window.describe()}`" for window in w.affected) + ".",
        "",
        f"**Removal condition:** {removal_condition(w)}.",
        "",
        "**Upstream references:**",
        "",
        "| reference | role | state | released in |",
        "|---|---|---|---|",
        *refs,
        "",
        "**This PR** (one commit on the base above):",
        "",
        *[f"- deletes `{path}`" for path in removal.deleted],
        f"- removes the `{w.id}` entry from `{MANIFEST_PATH}` (every other line kept)",
        f"- regenerates `{DOCS_PATH}` from the edited manifest",
        "",
        "**Before merging, run:**",
        "",
        "```bash",
        "pip install -e '.[test]'",
        "xpu-workarounds lint",
        "xpu-workarounds retire",
        "python -m pytest",
        f"git grep -n -e {name} -e {w.id}  # nothing should still use it",
        "```",
        "",
        "Opened by `xpu-workarounds retire --open-prs`; a later run updates this PR in place when "
        "the base branch or the evidence changes, and closes it if the workaround is needed again. "
        "Closing it without merging keeps it closed until the evidence changes.",
        "",
        marker(w.id, evidence),
    ]
    return "\n".join(lines) + "\n"


def commit_message(w: Workaround, verdict: Retirement, removal: Removal) -> str:
    return (f"Retire workaround {w.id}\n\n{verdict.detail}\n\n"
            + "".join(f"Delete {path}\n" for path in removal.deleted)
            + f"Remove its entry from {MANIFEST_PATH}; regenerate {DOCS_PATH}.\n\n"
            f"Generated by xpu-workarounds retire --open-prs.\n")


def closing_comment(w: Workaround, verdict: Retirement, snapshot: Snapshot) -> str:
    return (f"Closing: `{w.id}` is needed again on `{snapshot.branch}` at `{snapshot.commit[:12]}`. "
            f"{verdict.detail}\n\nThis PR is reopened and updated if the workaround becomes retirable "
            f"again. (`xpu-workarounds retire --open-prs`)")


# --------------------------------------------------------------------------- results


@dataclass
class Action:
    id: str
    action: str  # one of ACTIONS
    pr: int | None
    branch: str
    detail: str

    def as_json(self) -> dict:
        return {"id": self.id, "action": self.action, "pr": self.pr, "branch": self.branch, "detail": self.detail}


@dataclass
class DashboardResult:
    issue: int | None
    action: str  # opened | updated | unchanged | failed
    detail: str

    def as_json(self) -> dict:
        return {"issue": self.issue, "action": self.action, "detail": self.detail}


@dataclass
class Outcome:
    repository: str
    base: str
    base_commit: str
    dry_run: bool
    retirable: list[dict] = field(default_factory=list)  # [{"id", "evidence"}]
    kept: list[dict] = field(default_factory=list)  # [{"id", "reason"}]
    actions: list[Action] = field(default_factory=list)
    dashboard: DashboardResult | None = None

    @property
    def failed(self) -> bool:
        return any(a.action == "failed" for a in self.actions) or (
            self.dashboard is not None and self.dashboard.action == "failed")

    def as_json(self) -> dict:
        return {"schema": 1, "repository": self.repository, "base": self.base, "base_commit": self.base_commit,
                "dry_run": self.dry_run, "retirable": self.retirable, "kept": self.kept,
                "actions": [a.as_json() for a in self.actions],
                "dashboard": self.dashboard.as_json() if self.dashboard else None}


# -------------------------------------------------------------------------- the run


class _Failed(Exception):
    """One workaround's step failed; ``detail`` says what and what was left behind."""

    def __init__(self, detail: str, pr: int | None = None):
        super().__init__(detail)
        self.detail = detail
        self.pr = pr


def check_repository(name: str) -> str:
    if not _REPOSITORY.match(name or ""):
        raise ValueError(f"--repo must be OWNER/NAME, got {name!r}")
    return name


class Retirer:
    """One run against one repository. ``dry_run`` sends GET requests only."""

    def __init__(self, gh: github.Github, settings: ClientSettings, repository: str, *, base: str | None = None,
                 dry_run: bool = False, echo: Callable[[str], None] | None = None):
        self.gh = gh
        self.settings = settings
        self.repository = check_repository(repository)
        self.base_name = base
        self.dry_run = dry_run
        self.echo = echo or (lambda line: None)
        self._labels: set[str] = set()
        self._base: tuple[GitCommit, GitTree] | None = None  # the base commit and tree, as read

    # ---- reading ------------------------------------------------------------------
    def _repo(self) -> Repository:
        try:
            return self.gh.get_repo(self.repository)  # not lazy: a missing repository raises here
        except (GithubException, requests.RequestException) as error:
            raise RetireError(str(classify(error, self.settings, self.repository))) from None

    def snapshot(self, repo: Repository, branch: str) -> Snapshot:
        what = f"{self.repository}@{branch}"
        try:
            head = repo.get_git_ref(f"heads/{branch}").object.sha
            commit = repo.get_git_commit(head)
            tree = repo.get_git_tree(commit.tree.sha, recursive=True)
            if tree.raw_data.get("truncated"):
                raise RetireError(f"{what}: the tree is too large for one listing; cannot tell what to remove")
            blobs = {e.path: e.sha for e in tree.tree if e.type == "blob"}
            modes = {e.path: e.mode for e in tree.tree if e.type == "blob"}
            if MANIFEST_PATH not in blobs:
                raise RetireError(f"{what} has no {MANIFEST_PATH}")
            text = _blob_text(repo.get_git_blob(blobs[MANIFEST_PATH]))
        except (GithubException, requests.RequestException) as error:
            raise RetireError(str(classify(error, self.settings, what))) from None
        self._base = (commit, tree)
        return Snapshot(branch, head, commit.tree.sha, blobs, modes, text)

    # ---- the run ---------------------------------------------------------------------
    def run(self, only: str | None = None) -> Outcome:
        repo = self._repo()
        base = self.base_name or repo.default_branch
        snapshot = self.snapshot(repo, base)
        manifest = manifest_from_text(snapshot.manifest_text)
        if only is not None and only not in manifest.by_id:
            raise ValueError(f"unknown workaround id {only!r} on {base} (known: {', '.join(manifest.ids)})")
        outcome = Outcome(self.repository, base, snapshot.commit, self.dry_run)
        verdicts = {w.id: retirement(w, manifest.support) for w in manifest.workarounds}
        for w in manifest.workarounds:
            verdict = verdicts[w.id]
            if verdict.retirable:
                outcome.retirable.append({"id": w.id, "evidence": verdict.detail})
            else:
                outcome.kept.append({"id": w.id, "reason": verdict.detail})
        states: dict[str, str] = {}
        for w in manifest.workarounds:
            if only is not None and w.id != only:
                continue
            action = self.one(repo, snapshot, manifest, w, verdicts[w.id])
            if action is not None:
                outcome.actions.append(action)
                self.echo(describe(action, self.dry_run))
        if only is not None:
            # The dashboard shows every workaround's PR; a run that looked at one cannot fill it in.
            self.echo(f"{'dry run: ' if self.dry_run else ''}dashboard left as it is (--only)")
            return outcome
        for action in self.orphans(repo, snapshot, manifest):
            outcome.actions.append(action)
            self.echo(describe(action, self.dry_run))
        for w in manifest.workarounds:
            states[w.id] = self.pr_state(w, outcome)
        outcome.dashboard = self.dashboard(repo, snapshot, manifest, verdicts, states)
        self.echo(describe_dashboard(outcome.dashboard, self.dry_run))
        return outcome

    def one(self, repo: Repository, snapshot: Snapshot, manifest: Manifest, w: Workaround,
            verdict: Retirement) -> Action | None:
        branch = branch_for(w.id)
        try:
            pulls = self.pulls(repo, branch)
            if verdict.retirable:
                return self.retire(repo, snapshot, manifest, w, verdict, branch, pulls)
            return self.withdraw(repo, snapshot, w, verdict, branch, pulls)
        except _Failed as failure:
            return Action(w.id, "failed", failure.pr, branch, failure.detail)
        except RemovalError as error:
            return Action(w.id, "failed", None, branch, f"the removal would not pass lint, nothing was pushed: {error}")
        except (GithubException, requests.RequestException) as error:
            return Action(w.id, "failed", None, branch, str(classify(error, self.settings, branch)))

    def pulls(self, repo: Repository, branch: str) -> list[PullRequest]:
        """Every PR ever opened from ``branch`` in this repository, newest first."""
        owner = self.repository.split("/")[0]
        found = list(repo.get_pulls(state="all", head=f"{owner}:{branch}"))
        return sorted((pr for pr in found if pr.head.ref == branch), key=lambda pr: pr.number, reverse=True)

    # ---- a retirable workaround -----------------------------------------------------
    def retire(self, repo: Repository, snapshot: Snapshot, manifest: Manifest, w: Workaround,
               verdict: Retirement, branch: str, pulls: list[PullRequest]) -> Action:
        evidence = fingerprint(w, verdict, manifest)
        removal = compute_removal(snapshot, w)
        body = pr_body(w, verdict, manifest, snapshot, removal, evidence)
        title = pr_title(w)
        current = next((pr for pr in pulls if pr.state == "open"), None)
        if current is not None:
            return self.refresh(repo, snapshot, removal, w, verdict, branch, current, title, body)
        latest = pulls[0] if pulls else None
        if latest is not None and not latest.merged:
            mark = read_marker(latest.body)
            if mark is None or (mark.closed is None and mark.evidence == evidence):
                # A person closed it (or it is not ours): their decision stands until the evidence changes.
                return Action(w.id, "left-closed", latest.number, branch,
                              f"#{latest.number} was closed without merging; it stays closed until the "
                              f"evidence changes")
            return self.reopen(repo, snapshot, removal, w, verdict, branch, latest, title, body,
                               "the evidence changed since it was closed" if mark.closed is None
                               else "the workaround is retirable again")
        return self.open(repo, snapshot, removal, w, verdict, branch, title, body,
                         f" (#{latest.number} was merged, yet {w.id} is on {snapshot.branch} again)"
                         if latest is not None else "")

    def branch_matches(self, repo: Repository, snapshot: Snapshot, removal: Removal, branch: str) -> str | None:
        """None when ``branch`` is exactly the removal on the current base; else what differs."""
        try:
            tip = repo.get_git_ref(f"heads/{branch}").object.sha
        except GithubException as error:
            if error.status == 404:
                return "the branch is missing"
            raise
        commit = repo.get_git_commit(tip)
        if [parent.sha for parent in commit.parents] != [snapshot.commit]:
            return f"the base moved to {snapshot.commit[:12]}"
        tree = repo.get_git_tree(commit.tree.sha, recursive=True)
        actual = {e.path: e.sha for e in tree.tree if e.type == "blob"}
        if actual != removal.expected_blobs(snapshot):
            return "the branch does not hold the expected removal"
        return None

    def refresh(self, repo: Repository, snapshot: Snapshot, removal: Removal, w: Workaround, verdict: Retirement,
                branch: str, pr: PullRequest, title: str, body: str) -> Action:
        stale = self.branch_matches(repo, snapshot, removal, branch)
        edits = {}
        if pr.title != title:
            edits["title"] = title
        if (pr.body or "") != body:
            edits["body"] = body
        if pr.base.ref != snapshot.branch:
            edits["base"] = snapshot.branch
        needs_label = LABEL not in {label.name for label in pr.labels}
        if stale is None and not edits and not needs_label:
            return Action(w.id, "unchanged", pr.number, branch, f"#{pr.number} is up to date")
        reasons = [stale] if stale else []
        old = read_marker(pr.body)
        if "body" in edits:
            reasons.append("the evidence changed" if old is None or old.evidence != read_marker(body).evidence
                           else "the description changed")
        if needs_label:
            reasons.append(f"the {LABEL} label was missing")
        detail = f"#{pr.number}: " + "; ".join(reasons)
        if self.dry_run:
            return Action(w.id, "updated", pr.number, branch, f"would update {detail}")
        if stale is not None:
            commit = self.build_commit(repo, snapshot, removal, w, verdict, pr.number)
            self.move_branch(repo, branch, commit, create=stale == "the branch is missing", pr=pr.number)
        try:
            if edits:
                pr.edit(**edits)
            if needs_label:
                self.label(repo, LABEL, "removal PRs opened by xpu-workarounds")
                pr.add_to_labels(LABEL)
        except (GithubException, requests.RequestException) as error:
            raise _Failed(f"#{pr.number}: the branch is up to date but the PR could not be edited: "
                          f"{classify(error, self.settings)}", pr.number) from None
        return Action(w.id, "updated", pr.number, branch, detail)

    def reopen(self, repo: Repository, snapshot: Snapshot, removal: Removal, w: Workaround, verdict: Retirement,
               branch: str, pr: PullRequest, title: str, body: str, why: str) -> Action:
        if self.dry_run:
            return Action(w.id, "opened", pr.number, branch, f"would reopen #{pr.number}: {why}")
        try:
            # Reopen before the branch moves: GitHub refuses to reopen a PR whose branch was
            # force-pushed after it was closed.
            pr.edit(state="open")
        except GithubException as error:
            if error.status != 422:
                raise
            return self.open(repo, snapshot, removal, w, verdict, branch, title, body,
                             f" (#{pr.number} cannot be reopened: {why})")
        commit = self.build_commit(repo, snapshot, removal, w, verdict, pr.number)
        self.move_branch(repo, branch, commit, create=False, pr=pr.number)
        try:
            pr.edit(title=title, body=body)
            self.label(repo, LABEL, "removal PRs opened by xpu-workarounds")
            if LABEL not in {label.name for label in pr.labels}:
                pr.add_to_labels(LABEL)
        except (GithubException, requests.RequestException) as error:
            raise _Failed(f"#{pr.number} was reopened and its branch updated, but its description could not "
                          f"be: {classify(error, self.settings)}", pr.number) from None
        return Action(w.id, "opened", pr.number, branch, f"reopened #{pr.number}: {why}")

    def open(self, repo: Repository, snapshot: Snapshot, removal: Removal, w: Workaround, verdict: Retirement,
             branch: str, title: str, body: str, note: str = "") -> Action:
        if self.dry_run:
            files = ", ".join([*removal.deleted, MANIFEST_PATH, DOCS_PATH])
            return Action(w.id, "opened", None, branch, f"would open a PR from {branch} changing {files}{note}")
        self.label(repo, LABEL, "removal PRs opened by xpu-workarounds")
        commit = self.build_commit(repo, snapshot, removal, w, verdict, None)
        created = self.move_branch(repo, branch, commit, create=True, pr=None)
        try:
            pr = self.create_pull(repo, snapshot, branch, title, body)
        except (GithubException, requests.RequestException) as error:
            reason = str(classify(error, self.settings, "opening the PR"))
            if isinstance(error, GithubException) and error.status == 403:
                reason += (" (is 'Allow GitHub Actions to create and approve pull requests' on, and may the "
                           "token write pull requests?)")
            raise _Failed(f"{reason}; {self.undo_branch(repo, branch) if created else self.kept_branch(branch)}")
        try:
            if LABEL not in {label.name for label in pr.labels}:
                pr.add_to_labels(LABEL)
        except (GithubException, requests.RequestException) as error:
            raise _Failed(f"#{pr.number} was opened but could not be labelled {LABEL} "
                          f"({classify(error, self.settings)}); the next run labels it", pr.number) from None
        return Action(w.id, "opened", pr.number, branch, f"opened #{pr.number}{note}")

    def create_pull(self, repo: Repository, snapshot: Snapshot, branch: str, title: str, body: str) -> PullRequest:
        try:
            return repo.create_pull(base=snapshot.branch, head=branch, title=title, body=body,
                                    maintainer_can_modify=True)
        except GithubException as error:
            # A retried POST, or a PR someone opened meanwhile: "already exists" means look again.
            if error.status == 422 and "already exists" in json.dumps(error.data):
                for pr in self.pulls(repo, branch):
                    if pr.state == "open":
                        pr.edit(title=title, body=body, base=snapshot.branch)
                        return pr
            raise

    def build_commit(self, repo: Repository, snapshot: Snapshot, removal: Removal, w: Workaround,
                     verdict: Retirement, pr: int | None) -> GitCommit:
        """Blobs, tree and commit: objects only, nothing any branch points at yet."""
        try:
            elements = [InputGitTreeElement(path, "100644", "blob", sha=repo.create_git_blob(text, "utf-8").sha)
                        for path, text in removal.written.items()]
            elements += [InputGitTreeElement(path, snapshot.modes.get(path, "100644"), "blob", sha=None)
                         for path in removal.deleted]
            assert self._base is not None and self._base[0].sha == snapshot.commit
            parent, base_tree = self._base
            tree = repo.create_git_tree(elements, base_tree)
            return repo.create_git_commit(commit_message(w, verdict, removal), tree, [parent])
        except (GithubException, requests.RequestException) as error:
            raise _Failed(f"{classify(error, self.settings, 'building the removal commit')}; no branch was "
                          f"created or moved", pr) from None

    def move_branch(self, repo: Repository, branch: str, commit: GitCommit, *, create: bool, pr: int | None) -> bool:
        """Point ``branch`` at ``commit``; True when this call created it."""
        try:
            if create:
                try:
                    repo.create_git_ref(f"refs/heads/{branch}", commit.sha)
                    return True
                except GithubException as error:
                    if not (error.status == 422 and "already exists" in json.dumps(error.data)):
                        raise
            repo.get_git_ref(f"heads/{branch}").edit(commit.sha, force=True)
            return False
        except (GithubException, requests.RequestException) as error:
            raise _Failed(f"{classify(error, self.settings, 'pushing ' + branch)}; the branch was not "
                          f"{'created' if create else 'moved'}", pr) from None

    def undo_branch(self, repo: Repository, branch: str) -> str:
        try:
            repo.get_git_ref(f"heads/{branch}").delete()
        except (GithubException, requests.RequestException) as error:
            return (f"the new branch {branch} could not be deleted again ({classify(error, self.settings)}): "
                    f"delete it by hand")
        return f"the new branch {branch} was deleted again, nothing is left half-made"

    @staticmethod
    def kept_branch(branch: str) -> str:
        return f"the existing branch {branch} now holds the removal; the next run opens its PR"

    # ---- a workaround that is needed -------------------------------------------------
    def withdraw(self, repo: Repository, snapshot: Snapshot, w: Workaround, verdict: Retirement, branch: str,
                 pulls: list[PullRequest]) -> Action | None:
        current = next((pr for pr in pulls if pr.state == "open"), None)
        if current is None:
            return None
        why = f"needed again: {verdict.detail}"
        if self.dry_run:
            return Action(w.id, "closed", current.number, branch, f"would close #{current.number}: {why}")
        self.close(current, closing_comment(w, verdict, snapshot), why)
        return Action(w.id, "closed", current.number, branch, f"closed #{current.number}: {why}")

    def orphans(self, repo: Repository, snapshot: Snapshot, manifest: Manifest) -> list[Action]:
        """Close open removal PRs of workarounds the base no longer carries (removed another way)."""
        owner = self.repository.split("/")[0]
        found = []
        try:
            for pr in repo.get_pulls(state="open", base=snapshot.branch):
                head_owner, _, branch = pr.head.label.partition(":")
                workaround_id = branch.removeprefix(BRANCH_PREFIX)
                if head_owner != owner or branch == workaround_id or workaround_id in manifest.by_id:
                    continue
                why = f"{workaround_id} is no longer in {MANIFEST_PATH} on {snapshot.branch}"
                if self.dry_run:
                    found.append(Action(workaround_id, "closed", pr.number, branch, f"would close #{pr.number}: {why}"))
                    continue
                try:
                    self.close(pr, f"Closing: `{workaround_id}` is no longer in `{MANIFEST_PATH}` on "
                                   f"`{snapshot.branch}` at `{snapshot.commit[:12]}`; nothing is left to remove. "
                                   f"(`xpu-workarounds retire --open-prs`)", why)
                    found.append(Action(workaround_id, "closed", pr.number, branch, f"closed #{pr.number}: {why}"))
                except _Failed as failure:
                    found.append(Action(workaround_id, "failed", pr.number, branch, failure.detail))
        except (GithubException, requests.RequestException) as error:
            found.append(Action("-", "failed", None, BRANCH_PREFIX + "*",
                                str(classify(error, self.settings, "listing open removal PRs"))))
        return found

    def close(self, pr: PullRequest, comment: str, why: str) -> None:
        """Comment, then close, marking the body so a later run knows this tool closed it."""
        mark = read_marker(pr.body)
        body = pr.body or ""
        if mark is not None:
            body = _MARKER.sub(marker(mark.id, mark.evidence, "not-retirable"), body)
        try:
            pr.create_issue_comment(comment)
            pr.edit(state="closed", body=body)
        except (GithubException, requests.RequestException) as error:
            raise _Failed(f"#{pr.number} should be closed ({why}) but: {classify(error, self.settings)}",
                          pr.number) from None

    # ---- labels and the dashboard ------------------------------------------------------
    def label(self, repo: Repository, name: str, description: str) -> None:
        if name in self._labels or self.dry_run:
            return
        try:
            repo.get_label(name)
        except GithubException as error:
            if error.status != 404:
                raise
            try:
                repo.create_label(name, LABEL_COLOUR, description)
            except GithubException as again:
                if not (again.status == 422 and "already_exists" in json.dumps(again.data)):
                    raise
        self._labels.add(name)

    def pr_state(self, w: Workaround, outcome: Outcome) -> str:
        action = next((a for a in outcome.actions if a.id == w.id), None)
        if action is None:
            return "-"
        if action.action == "failed":
            return f"failed: {action.detail}"
        if action.pr is None:
            return "would open a PR" if self.dry_run else "-"
        if action.action == "left-closed":
            return f"#{action.pr} closed without merging, left closed until the evidence changes"
        if action.action == "closed":
            return f"#{action.pr} closed: needed again"
        return f"#{action.pr} open"

    def dashboard(self, repo: Repository, snapshot: Snapshot, manifest: Manifest, verdicts: dict[str, Retirement],
                  states: dict[str, str]) -> DashboardResult:
        body = dashboard_body(snapshot, manifest, verdicts, states)
        try:
            found = [issue for issue in repo.get_issues(state="all", labels=[DASHBOARD_LABEL])
                     if issue.pull_request is None]
            if not found:
                if self.dry_run:
                    return DashboardResult(None, "opened", "would open the dashboard issue")
                self.label(repo, DASHBOARD_LABEL, "the living list of XPU workarounds")
                issue = repo.create_issue(DASHBOARD_TITLE, body, labels=[DASHBOARD_LABEL])
                return DashboardResult(issue.number, "opened", f"opened #{issue.number}")
            issue = min(found, key=lambda item: item.number)
            if issue.body == body and issue.title == DASHBOARD_TITLE:
                return DashboardResult(issue.number, "unchanged", f"#{issue.number} is up to date")
            if self.dry_run:
                return DashboardResult(issue.number, "updated", f"would update #{issue.number}")
            issue.edit(title=DASHBOARD_TITLE, body=body)
            return DashboardResult(issue.number, "updated", f"updated #{issue.number}")
        except (GithubException, requests.RequestException) as error:
            return DashboardResult(None, "failed", str(classify(error, self.settings, "the dashboard issue")))


def dashboard_body(snapshot: Snapshot, manifest: Manifest, verdicts: dict[str, Retirement],
                   states: dict[str, str]) -> str:
    floors = ", ".join(f"{name} {version}" for name, version in manifest.support.items())
    rows = []
    for w in manifest.workarounds:
        windows = "<br>".join(f"`{window.describe()}`" for window in w.affected)
        upstream = "<br>".join(f"{ref.ref} ({ref.role}): {ref.state}"
                               f"{', in `' + str(ref.released_in) + '`' if ref.released_in else ''}"
                               for ref in w.upstream)
        verdict = verdicts[w.id]
        rows.append(f"| `{w.id}` | {windows} | {upstream} | **{verdict.verdict}**: {verdict.detail} | "
                    f"{states.get(w.id, '-')} |")
    return "\n".join([
        f"Every XPU workaround carried in `{MANIFEST_PATH}` on `{snapshot.branch}` at `{snapshot.commit[:12]}`, "
        f"with its decision windows, the state of its upstream references and its retirement verdict.",
        "",
        f"Support floor: {floors}.",
        "",
        "| workaround | affected windows (any one) | upstream | retirement | removal PR |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Kept current by `xpu-workarounds retire --open-prs` (weekly, "
        "`.github/workflows/retire-workarounds.yml`); edits here are overwritten.",
        "",
        DASHBOARD_MARKER,
    ]) + "\n"


def _blob_text(blob) -> str:
    if blob.encoding == "base64":
        return base64.b64decode(blob.content).decode("utf-8")
    return blob.content


def describe(action: Action, dry_run: bool) -> str:
    prefix = "dry run: " if dry_run else ""
    where = f"#{action.pr}" if action.pr is not None else action.branch
    return f"{prefix}{action.action:<11} {action.id} ({where}): {action.detail}"


def describe_dashboard(result: DashboardResult, dry_run: bool) -> str:
    prefix = "dry run: " if dry_run else ""
    return f"{prefix}{result.action:<11} dashboard: {result.detail}"


def open_prs(repository: str, *, base: str | None = None, only: str | None = None, dry_run: bool = False,
             settings: ClientSettings | None = None, echo: Callable[[str], None] | None = None) -> Outcome:
    """The ``retire --open-prs`` run: client from the environment (github_client), one Retirer."""
    settings = settings or ClientSettings.from_env()
    return Retirer(connect(settings), settings, repository, base=base, dry_run=dry_run, echo=echo).run(only)

