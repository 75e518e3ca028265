"""A proposal: one pull request holding one commit this tool made on the base branch.

Removal PRs and the upstream-facts PR are both kept this way: opened when there is
something to propose; updated in place (the branch rebuilt on the current base, the
description rewritten) when the base or the evidence moves; left closed when a person
closed it, until the evidence changes; reopened when it changes. Commit objects are
created first and the branch ref is created or moved last, and a branch created by this
run is deleted again if its PR cannot be opened. A branch carrying anyone else's commit
is never force-pushed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from github import GithubException, InputGitTreeElement
from github.GitCommit import GitCommit
from github.GithubObject import NotSet
from github.GitTree import GitTree
from github.PullRequest import PullRequest
from github.Repository import Repository

from tracker.retire.failures import GITHUB_ERRORS, StepFailed, github_step
from tracker.retire.limits import cut
from tracker.retire.removal import Snapshot
from tracker.retire.results import Action, ActionKind
from tracker.retire.texts import TRAILER, read_marker, replace_marker
from tracker.upstream.errors import classify
from tracker.upstream.fields import numbered
from tracker.upstream.settings import ClientSettings

LABEL = "workaround-retirement"
LABEL_COLOUR = "5319e7"
LABEL_DESCRIPTION = "removal PRs opened by xpu-workarounds"
FOREIGN = "the branch has commits from someone else, so it is left as it is"
MISSING = "the branch is missing"


class Change(Protocol):
    """Files a proposal deletes and (re)writes on the base."""

    @property
    def deleted(self) -> tuple[str, ...]: ...

    @property
    def written(self) -> dict[str, str]: ...

    def expected_blobs(self, snapshot: Snapshot) -> dict[str, str]: ...


@dataclass
class Proposal:
    """One proposal's step: what it is, its branch, every PR ever opened from that branch,
    and (when there is something to propose) the change with its commit message and PR text."""

    id: str  # a workaround id, or the facts PR's id
    branch: str
    pulls: list[PullRequest] = field(default_factory=list)
    change: Change | None = None
    message: str = ""
    evidence: str = ""
    title: str = ""
    body: str = ""
    foreign_body: Callable[[str], str] | None = None  # the description when a person's commit is on the branch
    again: str = "the workaround is retirable again"  # why a PR this tool closed is reopened
    label: str = LABEL

    def action(self, kind: ActionKind, pr: int | None, detail: str) -> Action:
        return Action(self.id, kind, pr, self.branch, detail)

    @property
    def proposed(self) -> Change:
        assert self.change is not None, "only a plan with something to propose carries a change"
        return self.change

    @property
    def current(self) -> PullRequest | None:
        return next((pr for pr in self.pulls if pr.state == "open"), None)

    @property
    def latest(self) -> PullRequest | None:
        return self.pulls[0] if self.pulls else None


class Proposer:
    """Keeps proposals in one repository on one base snapshot. ``dry_run`` sends GETs only."""

    def __init__(self, repo: Repository, settings: ClientSettings, owner: str, snapshot: Snapshot,
                 base: tuple[GitCommit, GitTree], *, dry_run: bool) -> None:
        self.repo = repo
        self.settings = settings
        self.owner = owner
        self.snapshot = snapshot
        self.base = base
        self.dry_run = dry_run
        self._labels: set[str] = set()

    def step(self, message: str = "{error}", *, what: str = "", pr: int | None = None) -> Any:
        return github_step(self.settings, message, what=what, pr=pr)

    def pulls(self, branch: str) -> list[PullRequest]:
        """Every PR ever opened from ``branch`` in this repository, newest first."""
        found = list(self.repo.get_pulls(state="all", head=f"{self.owner}:{branch}"))
        for pr in found:
            numbered(pr.number, pr.state, f"a pull request from {branch}")
        return sorted((pr for pr in found if pr.head.ref == branch), key=lambda pr: pr.number, reverse=True)

    # ---- something to propose -----------------------------------------------------------
    def keep(self, plan: Proposal, merged_note: str = "") -> Action:
        current = plan.current
        if current is not None:
            return self.refresh(plan, current)
        latest = plan.latest
        if latest is not None and not latest.merged:
            mark = read_marker(latest.body)
            if mark is None or (mark.closed is None and mark.evidence == plan.evidence):
                # A person closed it (or it is not ours): their decision stands until the evidence changes.
                return plan.action(ActionKind.LEFT_CLOSED, latest.number,
                                   f"#{latest.number} was closed without merging; it stays closed until the "
                                   f"evidence changes")
            return self.reopen(plan, latest, "the evidence changed since it was closed" if mark.closed is None
                               else plan.again)
        return self.open(plan, merged_note if latest is not None else "")

    def branch_state(self, plan: Proposal) -> tuple[str | None, str | None]:
        """(None when the branch is exactly the change on the current base, else what differs; its tip)."""
        try:
            tip = self.repo.get_git_ref(f"heads/{plan.branch}").object.sha
        except GithubException as error:
            if error.status == 404:
                return MISSING, None
            raise
        commit = self.repo.get_git_commit(tip)
        if TRAILER not in commit.message:
            return FOREIGN, tip  # a person added to it (say, fixed a test): never force-push over it
        if [parent.sha for parent in commit.parents] != [self.snapshot.commit]:
            return f"the base moved to {self.snapshot.commit[:12]}", tip
        tree = self.repo.get_git_tree(commit.tree.sha, recursive=True)
        actual = {e.path: e.sha for e in tree.tree if e.type == "blob"}
        if actual != plan.proposed.expected_blobs(self.snapshot):
            return "the branch does not hold the expected change", tip
        return None, tip

    def refresh(self, plan: Proposal, pr: PullRequest) -> Action:
        stale, tip = self.branch_state(plan)
        foreign = stale == FOREIGN
        body = plan.foreign_body(tip or "") if foreign and plan.foreign_body is not None else plan.body
        edits: dict[str, str] = {}
        if pr.title != plan.title:
            edits["title"] = plan.title
        if (pr.body or "") != body:
            edits["body"] = body
        if pr.base.ref != self.snapshot.branch:
            edits["base"] = self.snapshot.branch
        needs_label = plan.label not in {label.name for label in pr.labels}
        if (stale is None or foreign) and not edits and not needs_label:
            return plan.action(ActionKind.UNCHANGED, pr.number, f"#{pr.number}: {FOREIGN}" if foreign
                               else f"#{pr.number} is up to date")
        reasons = [stale] if stale else []
        old, new = read_marker(pr.body), read_marker(body)
        if "body" in edits:
            reasons.append("the evidence changed" if old is None or new is None or old.evidence != new.evidence
                           else "the description changed")
        if needs_label:
            reasons.append(f"the {plan.label} label was missing")
        detail = f"#{pr.number}: " + "; ".join(reasons)
        if self.dry_run:
            return plan.action(ActionKind.UPDATED, pr.number, f"would update {detail}")
        if stale is not None and not foreign:
            commit = self.build_commit(plan, pr.number)
            self.move_branch(plan.branch, commit, create=stale == MISSING, pr=pr.number)
        with self.step(f"#{pr.number}: the branch is up to date but the PR could not be edited: {{error}}",
                       pr=pr.number):
            if edits:
                pr.edit(title=edits.get("title", NotSet), body=edits.get("body", NotSet),
                        base=edits.get("base", NotSet))
            if needs_label:
                self.label(plan, pr)
        return plan.action(ActionKind.UPDATED, pr.number, detail)

    def reopen(self, plan: Proposal, pr: PullRequest, why: str) -> Action:
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
            self.label(plan, pr)
        return plan.action(ActionKind.OPENED, pr.number, f"reopened #{pr.number}: {why}")

    def open(self, plan: Proposal, note: str = "") -> Action:
        if self.dry_run:
            files = ", ".join([*plan.proposed.deleted, *plan.proposed.written])
            return plan.action(ActionKind.OPENED, None, f"would open a PR from {plan.branch} changing {files}{note}")
        with self.step("{error}; nothing was pushed", what=f"creating the {plan.label} label"):
            self.ensure_label(plan.label, LABEL_DESCRIPTION)
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
        with self.step(f"#{pr.number} was opened but could not be labelled {plan.label} ({{error}}); the next "
                       f"run labels it", pr=pr.number):
            self.label(plan, pr)  # the label itself was ensured before anything was pushed
        return plan.action(ActionKind.OPENED, pr.number, f"opened #{pr.number}{note}")

    def create_pull(self, plan: Proposal) -> PullRequest:
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

    def build_commit(self, plan: Proposal, pr: int | None) -> GitCommit:
        """Blobs, tree and commit: objects only, nothing any branch points at yet."""
        change, repo = plan.proposed, self.repo
        with self.step("{error}; no branch was created or moved", what="building the commit", pr=pr):
            elements = [InputGitTreeElement(path, "100644", "blob", sha=repo.create_git_blob(text, "utf-8").sha)
                        for path, text in change.written.items()]
            elements += [InputGitTreeElement(path, self.snapshot.modes.get(path, "100644"), "blob", sha=None)
                         for path in change.deleted]
            parent, base_tree = self.base
            assert parent.sha == self.snapshot.commit
            tree = repo.create_git_tree(elements, base_tree)
            return repo.create_git_commit(plan.message, tree, [parent])

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
        return f"the existing branch {branch} now holds the change; the next run opens its PR"

    # ---- nothing to propose -------------------------------------------------------------
    def withdraw(self, plan: Proposal, comment: str, why: str, closed: str) -> Action | None:
        """Close the open PR of ``plan`` (if any) with ``comment``, marking it closed by this tool."""
        current = plan.current
        if current is None:
            return None
        if self.dry_run:
            return plan.action(ActionKind.CLOSED, current.number, f"would close #{current.number}: {why}")
        self.close(current, comment, why, closed)
        return plan.action(ActionKind.CLOSED, current.number, f"closed #{current.number}: {why}")

    def close(self, pr: PullRequest, comment: str, why: str, closed: str = "not-retirable") -> None:
        """Comment, then close, marking the body so a later run knows this tool closed it."""
        mark = read_marker(pr.body)
        body = pr.body or ""
        if mark is not None:
            body = replace_marker(body, mark.closing(closed))
        with self.step(f"#{pr.number} should be closed ({why}) but: {{error}}", pr=pr.number):
            pr.create_issue_comment(cut(comment))
            pr.edit(state="closed", body=cut(body))  # the closing marker is longer than the open one

    def label(self, plan: Proposal, pr: PullRequest) -> None:
        """``pr`` labelled with ``plan``'s label: created in the repository where it is missing
        (once per run), then added to the PR where the PR lacks it."""
        self.ensure_label(plan.label, LABEL_DESCRIPTION)
        if plan.label not in {label.name for label in pr.labels}:
            pr.add_to_labels(plan.label)

    def ensure_label(self, name: str, description: str) -> None:
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
