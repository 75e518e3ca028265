"""The ``Retirer``: one run of ``retire --open-prs`` against one repository.

Data flows one way: the repository as it is on the base branch (read through the API,
never the local checkout) -> its manifest -> retirement verdicts -> per workaround a
``Plan`` -> one commit built with the git data API -> the branch
``xpu-workarounds/retire-<id>`` -> its pull request; then the dashboard.

Safety: commit objects are created first and the branch ref is created or moved last, and
a branch created by this run is deleted again if its PR cannot be opened. Every PR body
carries a hidden marker with a fingerprint of the evidence, which tells a second run
whether anything changed and a closed PR whether a person closed it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import github
from github import GithubException, InputGitTreeElement
from github.GitCommit import GitCommit
from github.GithubObject import NotSet
from github.GitTree import GitTree
from github.PullRequest import PullRequest
from github.Repository import Repository

from tracker.model.decision import Retirement, retirement
from tracker.model.manifest import Manifest, Workaround
from tracker.retire.dashboard import dashboard_body, keep_dashboard, pr_cell
from tracker.retire.failures import GITHUB_ERRORS, StepFailed, github_step
from tracker.retire.removal import (
    DOCS_PATH,
    MANIFEST_PATH,
    Removal,
    RemovalError,
    RetireError,
    Snapshot,
    compute_removal,
    manifest_from_text,
)
from tracker.retire.results import Action, ActionKind, Outcome, describe, describe_dashboard
from tracker.retire.texts import (
    BRANCH_PREFIX,
    MARKER,
    TRAILER,
    branch_for,
    closing_comment,
    commit_message,
    fingerprint,
    marker,
    pr_body,
    pr_title,
    read_marker,
)
from tracker.upstream.client import ClientSettings, classify

LABEL = "workaround-retirement"
LABEL_COLOUR = "5319e7"
LABEL_DESCRIPTION = "removal PRs opened by xpu-workarounds"
FOREIGN = "the branch has commits from someone else, so it is left as it is"

_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def check_repository(name: str) -> str:
    if not _REPOSITORY.match(name or ""):
        raise ValueError(f"--repo must be OWNER/NAME, got {name!r}")
    return name


@dataclass
class Plan:
    """One workaround's step: its verdict, its branch and every PR ever opened from it, and,
    when it is retirable, the removal with the PR text that goes with it."""

    w: Workaround
    verdict: Retirement
    branch: str
    pulls: list[PullRequest] = field(default_factory=list)
    removal: Removal | None = None
    evidence: str = ""
    title: str = ""
    body: str = ""

    def action(self, kind: ActionKind, pr: int | None, detail: str) -> Action:
        return Action(self.w.id, kind, pr, self.branch, detail)

    @property
    def change(self) -> Removal:
        assert self.removal is not None, "only a retirable workaround's plan carries a removal"
        return self.removal


class Retirer:
    """One run against one repository. ``dry_run`` sends GET requests only."""

    def __init__(self, gh: github.Github, settings: ClientSettings, repository: str, *, base: str | None = None,
                 dry_run: bool = False, echo: Callable[[str], None] | None = None) -> None:
        self.gh = gh
        self.settings = settings
        self.repository = check_repository(repository)
        self.base_name = base
        self.dry_run = dry_run
        self.echo: Callable[[str], None] = echo or (lambda line: None)
        self._labels: set[str] = set()
        self._base: tuple[GitCommit, GitTree] | None = None  # the base commit and tree, as read
        self._repo: Repository | None = None
        self._snapshot: Snapshot | None = None
        self._manifest: Manifest | None = None

    @property
    def repo(self) -> Repository:
        assert self._repo is not None, "run() reads the repository first"
        return self._repo

    @property
    def snapshot(self) -> Snapshot:
        assert self._snapshot is not None, "run() reads the base branch first"
        return self._snapshot

    @property
    def manifest(self) -> Manifest:
        assert self._manifest is not None, "run() reads the manifest first"
        return self._manifest

    def step(self, message: str = "{error}", *, what: str = "", pr: int | None = None,
             fatal: bool = False) -> Any:
        return github_step(self.settings, message, what=what, pr=pr, fatal=fatal)

    # ---- reading ------------------------------------------------------------------
    def read_repository(self) -> Repository:
        with self.step(what=self.repository, fatal=True):
            return self.gh.get_repo(self.repository)  # not lazy: a missing repository raises here

    def read_snapshot(self, repo: Repository, branch: str) -> Snapshot:
        what = f"{self.repository}@{branch}"
        with self.step(what=what, fatal=True):
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
        self._base = (commit, tree)
        return Snapshot(branch, head, commit.tree.sha, blobs, modes, text)

    # ---- the run ---------------------------------------------------------------------
    def run(self, only: str | None = None) -> Outcome:
        self._repo = repo = self.read_repository()
        base = self.base_name or repo.default_branch
        self._snapshot = snapshot = self.read_snapshot(repo, base)
        self._manifest = manifest = manifest_from_text(snapshot.manifest_text)
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
        for w in manifest.workarounds:
            if only is not None and w.id != only:
                continue
            action = self.one(w, verdicts[w.id])
            if action is not None:
                outcome.actions.append(action)
                self.echo(describe(action, self.dry_run))
        if only is not None:
            # The dashboard shows every workaround's PR; a run that looked at one cannot fill it in.
            self.echo(f"{'dry run: ' if self.dry_run else ''}dashboard left as it is (--only)")
            return outcome
        for action in self.orphans():
            outcome.actions.append(action)
            self.echo(describe(action, self.dry_run))
        states = {w.id: pr_cell(next((a for a in outcome.actions if a.id == w.id), None), self.dry_run)
                  for w in manifest.workarounds}
        body = dashboard_body(snapshot, manifest, verdicts, states)
        outcome.dashboard = keep_dashboard(repo, body, dry_run=self.dry_run, settings=self.settings,
                                           ensure_label=self.label)
        self.echo(describe_dashboard(outcome.dashboard, self.dry_run))
        return outcome

    def one(self, w: Workaround, verdict: Retirement) -> Action | None:
        plan = Plan(w, verdict, branch_for(w.id))
        try:
            plan.pulls = self.pulls(plan.branch)
            if verdict.retirable:
                return self.retire(plan)
            return self.withdraw(plan)
        except StepFailed as failure:
            return plan.action(ActionKind.FAILED, failure.pr, failure.detail)
        except RemovalError as error:
            return plan.action(ActionKind.FAILED, None,
                               f"the removal would not pass lint, nothing was pushed: {error}")
        except GITHUB_ERRORS as error:
            return plan.action(ActionKind.FAILED, None, str(classify(error, self.settings, plan.branch)))

    def pulls(self, branch: str) -> list[PullRequest]:
        """Every PR ever opened from ``branch`` in this repository, newest first."""
        owner = self.repository.split("/")[0]
        found = list(self.repo.get_pulls(state="all", head=f"{owner}:{branch}"))
        return sorted((pr for pr in found if pr.head.ref == branch), key=lambda pr: pr.number, reverse=True)

    # ---- a retirable workaround -----------------------------------------------------
    def retire(self, plan: Plan) -> Action:
        w = plan.w
        plan.evidence = fingerprint(w, plan.verdict, self.manifest)
        plan.removal = compute_removal(self.snapshot, w)
        plan.body = pr_body(w, plan.verdict, self.manifest, self.snapshot, plan.removal, plan.evidence)
        plan.title = pr_title(w)
        current = next((pr for pr in plan.pulls if pr.state == "open"), None)
        if current is not None:
            return self.refresh(plan, current)
        latest = plan.pulls[0] if plan.pulls else None
        if latest is not None and not latest.merged:
            mark = read_marker(latest.body)
            if mark is None or (mark.closed is None and mark.evidence == plan.evidence):
                # A person closed it (or it is not ours): their decision stands until the evidence changes.
                return plan.action(ActionKind.LEFT_CLOSED, latest.number,
                                   f"#{latest.number} was closed without merging; it stays closed until the "
                                   f"evidence changes")
            return self.reopen(plan, latest, "the evidence changed since it was closed" if mark.closed is None
                               else "the workaround is retirable again")
        return self.open(plan, f" (#{latest.number} was merged, yet {w.id} is on {self.snapshot.branch} again)"
                         if latest is not None else "")

    def branch_matches(self, plan: Plan) -> str | None:
        """None when the branch is exactly the removal on the current base; else what differs."""
        try:
            tip = self.repo.get_git_ref(f"heads/{plan.branch}").object.sha
        except GithubException as error:
            if error.status == 404:
                return "the branch is missing"
            raise
        commit = self.repo.get_git_commit(tip)
        if TRAILER not in commit.message:
            return FOREIGN  # a person added to the removal (say, fixed a test): never force-push over it
        if [parent.sha for parent in commit.parents] != [self.snapshot.commit]:
            return f"the base moved to {self.snapshot.commit[:12]}"
        tree = self.repo.get_git_tree(commit.tree.sha, recursive=True)
        actual = {e.path: e.sha for e in tree.tree if e.type == "blob"}
        if actual != plan.change.expected_blobs(self.snapshot):
            return "the branch does not hold the expected removal"
        return None

    def refresh(self, plan: Plan, pr: PullRequest) -> Action:
        stale = self.branch_matches(plan)
        edits: dict[str, str] = {}
        if pr.title != plan.title:
            edits["title"] = plan.title
        if (pr.body or "") != plan.body:
            edits["body"] = plan.body
        if pr.base.ref != self.snapshot.branch:
            edits["base"] = self.snapshot.branch
        needs_label = LABEL not in {label.name for label in pr.labels}
        foreign = stale == FOREIGN
        if (stale is None or foreign) and not edits and not needs_label:
            return plan.action(ActionKind.UNCHANGED, pr.number, f"#{pr.number}: {FOREIGN}" if foreign
                               else f"#{pr.number} is up to date")
        reasons = [stale] if stale else []
        old, new = read_marker(pr.body), read_marker(plan.body)
        if "body" in edits:
            reasons.append("the evidence changed" if old is None or new is None or old.evidence != new.evidence
                           else "the description changed")
        if needs_label:
            reasons.append(f"the {LABEL} label was missing")
        detail = f"#{pr.number}: " + "; ".join(reasons)
        if self.dry_run:
            return plan.action(ActionKind.UPDATED, pr.number, f"would update {detail}")
        if stale is not None and not foreign:
            commit = self.build_commit(plan, pr.number)
            self.move_branch(plan.branch, commit, create=stale == "the branch is missing", pr=pr.number)
        with self.step(f"#{pr.number}: the branch is up to date but the PR could not be edited: {{error}}",
                       pr=pr.number):
            if edits:
                pr.edit(title=edits.get("title", NotSet), body=edits.get("body", NotSet),
                        base=edits.get("base", NotSet))
            if needs_label:
                self.label(LABEL, LABEL_DESCRIPTION)
                pr.add_to_labels(LABEL)
        return plan.action(ActionKind.UPDATED, pr.number, detail)

    def reopen(self, plan: Plan, pr: PullRequest, why: str) -> Action:
        if self.dry_run:
            return plan.action(ActionKind.OPENED, pr.number, f"would reopen #{pr.number}: {why}")
        try:
            # Reopen before the branch moves: GitHub refuses to reopen a PR whose branch was
            # force-pushed after it was closed.
            pr.edit(state="open")
        except GithubException as error:
            if error.status != 422:
                raise
            return self.open(plan, f" (#{pr.number} cannot be reopened: {why})")
        commit = self.build_commit(plan, pr.number)
        self.move_branch(plan.branch, commit, create=False, pr=pr.number)
        with self.step(f"#{pr.number} was reopened and its branch updated, but its description could not "
                       f"be: {{error}}", pr=pr.number):
            pr.edit(title=plan.title, body=plan.body)
            self.label(LABEL, LABEL_DESCRIPTION)
            if LABEL not in {label.name for label in pr.labels}:
                pr.add_to_labels(LABEL)
        return plan.action(ActionKind.OPENED, pr.number, f"reopened #{pr.number}: {why}")

    def open(self, plan: Plan, note: str = "") -> Action:
        if self.dry_run:
            files = ", ".join([*plan.change.deleted, MANIFEST_PATH, DOCS_PATH])
            return plan.action(ActionKind.OPENED, None, f"would open a PR from {plan.branch} changing {files}{note}")
        with self.step("{error}; nothing was pushed", what=f"creating the {LABEL} label"):
            self.label(LABEL, LABEL_DESCRIPTION)
        commit = self.build_commit(plan, None)
        created = self.move_branch(plan.branch, commit, create=True, pr=None)
        try:
            pr = self.create_pull(plan)
        except GITHUB_ERRORS as error:
            reason = str(classify(error, self.settings, "opening the PR"))
            if isinstance(error, GithubException) and error.status == 403:
                reason += (" (is 'Allow GitHub Actions to create and approve pull requests' on, and may the "
                           "token write pull requests?)")
            left = self.undo_branch(plan.branch) if created else self.kept_branch(plan.branch)
            raise StepFailed(f"{reason}; {left}") from None
        with self.step(f"#{pr.number} was opened but could not be labelled {LABEL} ({{error}}); the next run "
                       f"labels it", pr=pr.number):
            if LABEL not in {label.name for label in pr.labels}:
                pr.add_to_labels(LABEL)
        return plan.action(ActionKind.OPENED, pr.number, f"opened #{pr.number}{note}")

    def create_pull(self, plan: Plan) -> PullRequest:
        try:
            return self.repo.create_pull(base=self.snapshot.branch, head=plan.branch, title=plan.title,
                                         body=plan.body, maintainer_can_modify=True)
        except GithubException as error:
            # A retried POST, or a PR someone opened meanwhile: "already exists" means look again.
            if error.status == 422 and "already exists" in json.dumps(error.data):
                for pr in self.pulls(plan.branch):
                    if pr.state == "open":
                        pr.edit(title=plan.title, body=plan.body, base=self.snapshot.branch)
                        return pr
            raise

    def build_commit(self, plan: Plan, pr: int | None) -> GitCommit:
        """Blobs, tree and commit: objects only, nothing any branch points at yet."""
        removal, repo = plan.change, self.repo
        with self.step("{error}; no branch was created or moved", what="building the removal commit", pr=pr):
            elements = [InputGitTreeElement(path, "100644", "blob", sha=repo.create_git_blob(text, "utf-8").sha)
                        for path, text in removal.written.items()]
            elements += [InputGitTreeElement(path, self.snapshot.modes.get(path, "100644"), "blob", sha=None)
                         for path in removal.deleted]
            assert self._base is not None and self._base[0].sha == self.snapshot.commit
            parent, base_tree = self._base
            tree = repo.create_git_tree(elements, base_tree)
            return repo.create_git_commit(commit_message(plan.w, plan.verdict, removal), tree, [parent])

    def move_branch(self, branch: str, commit: GitCommit, *, create: bool, pr: int | None) -> bool:
        """Point ``branch`` at ``commit``; True when this call created it."""
        with self.step(f"{{error}}; the branch was not {'created' if create else 'moved'}",
                       what=f"pushing {branch}", pr=pr):
            if create:
                try:
                    self.repo.create_git_ref(f"refs/heads/{branch}", commit.sha)
                    return True
                except GithubException as error:
                    if not (error.status == 422 and "already exists" in json.dumps(error.data)):
                        raise
            self.repo.get_git_ref(f"heads/{branch}").edit(commit.sha, force=True)
            return False

    def undo_branch(self, branch: str) -> str:
        try:
            self.repo.get_git_ref(f"heads/{branch}").delete()
        except GITHUB_ERRORS as error:
            return (f"the new branch {branch} could not be deleted again ({classify(error, self.settings)}): "
                    f"delete it by hand")
        return f"the new branch {branch} was deleted again, nothing is left half-made"

    @staticmethod
    def kept_branch(branch: str) -> str:
        return f"the existing branch {branch} now holds the removal; the next run opens its PR"

    # ---- a workaround that is needed -------------------------------------------------
    def withdraw(self, plan: Plan) -> Action | None:
        current = next((pr for pr in plan.pulls if pr.state == "open"), None)
        if current is None:
            return None
        why = f"needed again: {plan.verdict.detail}"
        if self.dry_run:
            return plan.action(ActionKind.CLOSED, current.number, f"would close #{current.number}: {why}")
        self.close(current, closing_comment(plan.w, plan.verdict, self.snapshot), why)
        return plan.action(ActionKind.CLOSED, current.number, f"closed #{current.number}: {why}")

    def orphans(self) -> list[Action]:
        """Close open removal PRs of workarounds the base no longer carries (removed another way)."""
        owner = self.repository.split("/")[0]
        snapshot = self.snapshot
        found = []
        try:
            for pr in self.repo.get_pulls(state="open", base=snapshot.branch):
                head_owner, _, branch = pr.head.label.partition(":")
                workaround_id = branch.removeprefix(BRANCH_PREFIX)
                if head_owner != owner or branch == workaround_id or workaround_id in self.manifest.by_id:
                    continue
                why = f"{workaround_id} is no longer in {MANIFEST_PATH} on {snapshot.branch}"
                if self.dry_run:
                    found.append(Action(workaround_id, ActionKind.CLOSED, pr.number, branch,
                                        f"would close #{pr.number}: {why}"))
                    continue
                try:
                    self.close(pr, f"Closing: `{workaround_id}` is no longer in `{MANIFEST_PATH}` on "
                                   f"`{snapshot.branch}` at `{snapshot.commit[:12]}`; nothing is left to remove. "
                                   f"(`xpu-workarounds retire --open-prs`)", why)
                    found.append(Action(workaround_id, ActionKind.CLOSED, pr.number, branch,
                                        f"closed #{pr.number}: {why}"))
                except StepFailed as failure:
                    found.append(Action(workaround_id, ActionKind.FAILED, pr.number, branch, failure.detail))
        except GITHUB_ERRORS as error:
            found.append(Action("-", ActionKind.FAILED, None, BRANCH_PREFIX + "*",
                                str(classify(error, self.settings, "listing open removal PRs"))))
        return found

    def close(self, pr: PullRequest, comment: str, why: str) -> None:
        """Comment, then close, marking the body so a later run knows this tool closed it."""
        mark = read_marker(pr.body)
        body = pr.body or ""
        if mark is not None:
            body = MARKER.sub(marker(mark.id, mark.evidence, "not-retirable"), body)
        with self.step(f"#{pr.number} should be closed ({why}) but: {{error}}", pr=pr.number):
            pr.create_issue_comment(comment)
            pr.edit(state="closed", body=body)

    def label(self, name: str, description: str) -> None:
        if name in self._labels or self.dry_run:
            return
        try:
            self.repo.get_label(name)
        except GithubException as error:
            if error.status != 404:
                raise
            try:
                self.repo.create_label(name, LABEL_COLOUR, description)
            except GithubException as again:
                if not (again.status == 422 and "already_exists" in json.dumps(again.data)):
                    raise
        self._labels.add(name)


def _blob_text(blob: Any) -> str:
    if blob.encoding == "base64":
        return base64.b64decode(blob.content).decode("utf-8")
    return str(blob.content)
