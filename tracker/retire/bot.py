"""The ``Retirer``: one run of ``retire --open-prs`` against one repository.

Data flows one way: the repository as it is on the base branch (read through the API,
never the local checkout) -> its manifest -> upstream facts refreshed from GitHub and the
effective support floors (``tracker.upstream``) -> the manifest overlaid with those facts
-> retirement verdicts -> the upstream-facts PR, one removal PR per retirable workaround
(``proposal``) -> the dashboard issue.

Facts it could not check are never acted on: when the refresh cannot reach GitHub the run
stops before any write (the verdicts shown are the manifest's own, and say so); a
workaround with a reference whose facts could not be learned keeps its PR as it is.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import github
from github.GitCommit import GitCommit
from github.GitTree import GitTree
from github.Repository import Repository

from tracker import echoed
from tracker.model.environment import InputError
from tracker.model.manifest import Manifest, Workaround
from tracker.model.retirement import Retirement, retirement
from tracker.release.redact import published_to
from tracker.retire.dashboard import DASHBOARD_MARKER, dashboard_body, keep_dashboard, pr_cell
from tracker.retire.failures import GITHUB_ERRORS, StepFailed, github_step
from tracker.retire.inline import InlineIssues, pins_path, tracked_only
from tracker.retire.inline import dashboard_body as inline_dashboard
from tracker.retire.inline import states as inline_states
from tracker.retire.lookahead import dashboard_section
from tracker.retire.proofs import Proofs
from tracker.retire.proposal import LABEL, Proposal, Proposer
from tracker.retire.refnames import check_repository
from tracker.retire.removal import (
    MANIFEST_PATH,
    ConfigurationError,
    Edit,
    RemovalError,
    RetireError,
    Snapshot,
    checked_manifest,
    compute_removal,
    manifest_from_text,
)
from tracker.retire.results import (
    Action,
    ActionKind,
    FactsResult,
    RetireResult,
    describe,
    describe_dashboard,
)
from tracker.retire.texts import (
    BRANCH_PREFIX,
    FACTS_BRANCH,
    FACTS_ID,
    branch_for,
    caught_up_comment,
    closing_comment,
    commit_message,
    evidence_digest,
    facts_body,
    facts_commit_message,
    facts_digest,
    facts_title,
    pr_body,
    pr_title,
    read_marker,
)
from tracker.upstream.cache import Mode
from tracker.upstream.errors import GitHubError, GitHubUnavailable, classify
from tracker.upstream.fields import as_sha, as_str, optional_bool, wrong
from tracker.upstream.floors import Floors, fixed_floors
from tracker.upstream.identity import public, token_login
from tracker.upstream.overlay import unchecked, with_facts
from tracker.upstream.settings import ClientSettings
from tracker.upstream.tracking import Fresh, learn
from tracker.upstream.writeback import updated_text


class Retirer:
    """One run against one repository. ``dry_run`` sends GET requests only; ``refresh``
    learns upstream facts first (and keeps the facts PR); without it the manifest's own
    facts are judged, as written."""

    def __init__(self, gh: github.Github, settings: ClientSettings, repository: str, *, base: str | None = None,
                 dry_run: bool = False, echo: Callable[[str], None] | None = None, refresh: bool = False,
                 cache_dir: Path | None = None, manifest_path: str = MANIFEST_PATH, docs: str | None = None,
                 progress: Callable[[str], None] | None = None,
                 look_ahead: bool = False, warn: Callable[[str], None] | None = None,
                 proofs: Proofs | None = None) -> None:
        self.gh = gh
        self.proofs = proofs  # None: every removal is proposed; else only those whose copy passed the tests
        self.look_ahead = look_ahead  # the dashboard gets a section about the newest vLLM release
        self.warn: Callable[[str], None] = warn or (lambda line: None)  # what the look-ahead could not use
        self.manifest_path = manifest_path
        self.docs = docs  # None: the manifest's [layout] docs; "": no catalogue; else this path
        self.settings = settings
        self.repository = check_repository(repository)
        self.base_name = base
        self.dry_run = dry_run
        self.echo: Callable[[str], None] = echo or (lambda line: None)
        self.progress: Callable[[str], None] = progress or (lambda step: None)  # what the run is doing now
        self.refresh = refresh
        self.cache_dir = cache_dir
        self._base: tuple[GitCommit, GitTree] | None = None  # the base commit and tree, as read
        self._own: str | None = None  # the token's login, once asked

    def own(self) -> str:
        """The token's login: the issues (the dashboard, an inline workaround's) that are this tool's own
        are those it wrote. GitHub not saying stops the run before any write. Without a token there is
        no one: no issue is this tool's (a dry run says what it would open)."""
        if self._own is None and not self.settings.token:
            self._own = ""
        if self._own is None:
            try:
                self._own = token_login(self.gh, self.settings)
            except GitHubError as error:
                raise RetireError(str(error)) from None
        return self._own

    # ---- reading ------------------------------------------------------------------
    def read_repository(self) -> Repository:
        with github_step(self.settings, what=self.repository, fatal=True):
            repo = self.gh.get_repo(self.repository)  # not lazy: a missing repository raises here
            read = {"default_branch": repo.default_branch, "html_url": repo.html_url}  # PyGithub checks the types
            for name in read:
                as_str(read, name, self.repository)  # and this that GitHub gave them
            return repo

    def read_snapshot(self, repo: Repository, branch: str) -> Snapshot:
        what = f"{self.repository}@{branch}"
        with github_step(self.settings, what=what, fatal=True):
            head = as_sha({"sha": repo.get_git_ref(f"heads/{branch}").object.sha}, "sha", f"{what} ref")
            commit = repo.get_git_commit(head)
            tree = repo.get_git_tree(commit.tree.sha, recursive=True)
            if optional_bool(tree.raw_data, "truncated", f"{what} tree"):
                raise RetireError(f"{what}: the tree is too large for one listing; cannot tell what to remove")
            blobs = {e.path: e.sha for e in tree.tree if e.type == "blob"}
            modes = {e.path: e.mode for e in tree.tree if e.type == "blob"}
            if self.manifest_path not in blobs:
                raise ConfigurationError(f"{what} has no {self.manifest_path} (the manifest: --manifest, or the "
                                         f"action's manifest input)")
            text = _blob_text(repo.get_git_blob(blobs[self.manifest_path]), what, self.manifest_path)
        self._base = (commit, tree)
        return Snapshot(branch, head, commit.tree.sha, blobs, modes, text, self.manifest_path,
                        read=functools.cache(lambda path: self.read_text(repo, what, blobs[path], path)))

    def read_text(self, repo: Repository, what: str, sha: str, path: str) -> str:
        """One blob of the base tree as text (read when a removal needs it, once a run). Unreadable, it fails
        that removal's step (``StepFailed``), not the run: the other workarounds' PRs go on."""
        with github_step(self.settings, what=what):
            try:
                return _blob_text(repo.get_git_blob(sha), what, path)
            except RetireError as error:  # not UTF-8
                raise StepFailed(str(error), None) from None

    def laid_out(self, snapshot: Snapshot, manifest: Manifest) -> Snapshot:
        """``snapshot`` with the manifest's ``[layout]`` (and ``--docs``); a path the manifest or the caller
        names must exist (ConfigurationError), a default one may be absent (then the repository has none)."""
        layout, where = manifest.layout, f"{self.repository}@{snapshot.branch}"
        written = set(layout.written)
        if self.docs is not None:
            layout = layout._replace(docs=self.docs or None)
            written.add("docs")
        for key, folder in (("workarounds", layout.workarounds), ("tests", layout.tests)):
            needed = key in written or (key == "workarounds" and manifest.workarounds)
            if needed and not snapshot.has_folder(folder):
                raise ConfigurationError(f"{where} has no {folder}/ (the {key} folder of [layout] in "
                                         f"{snapshot.manifest_path})")
        if layout.docs is not None and layout.docs not in snapshot.blobs:
            if "docs" in written:
                raise ConfigurationError(f"{where} has no {layout.docs} (the catalogue: [layout] docs in "
                                         f"{snapshot.manifest_path}, or --docs; \"\" for none)")
            layout = layout._replace(docs=None)  # the default catalogue, which this repository does not keep
        return dataclasses.replace(snapshot, layout=layout._replace(written=frozenset(written)))

    def learn(self, manifest: Manifest) -> tuple[Fresh | None, str | None]:
        """Fresh facts and floors, or None and why GitHub could not give them."""
        if not self.refresh:
            return None, None
        try:
            return learn(manifest, client=self.settings, cache_dir=self.cache_dir, mode=Mode.REFRESH), None
        except GitHubUnavailable as error:
            return None, f"refreshing upstream facts: {error}"
        except OSError as error:
            return None, f"cannot use the upstream cache: {error.strerror or error}"

    # ---- the run ---------------------------------------------------------------------
    def run(self, only: str | None = None) -> RetireResult:
        self.progress(f"reading {self.repository}")
        repo = self.read_repository()
        with published_to(public(repo)):  # on a public repository, pip's words name no index host either
            return self.run_in(repo, only)

    def run_in(self, repo: Repository, only: str | None) -> RetireResult:
        self.own()  # before any write: which issues are this tool's
        base = self.base_name or repo.default_branch
        snapshot = self.read_snapshot(repo, base)
        manifest = manifest_from_text(snapshot.manifest_text, f"{self.repository}@{base}", self.manifest_path)
        snapshot = self.laid_out(snapshot, manifest)
        if tracked_only(manifest):
            return self.run_tracked(repo, snapshot, manifest, only)
        if only is not None and only not in manifest.by_id:
            raise InputError(f"unknown workaround id {echoed(only)} on {base} (known: {', '.join(manifest.ids)})")
        if self.refresh:
            self.progress("refreshing upstream facts")
        fresh, halted = self.learn(manifest)
        judged = with_facts(manifest, fresh.report) if fresh is not None else manifest
        floors = fresh.floors if fresh is not None else fixed_floors(manifest)
        outcome = RetireResult(self.repository, base, snapshot.commit, self.dry_run, floors=floors,
                          facts=FactsResult.of(fresh.report if fresh else None, halted), html_url=repo.html_url)
        verdicts = {w.id: retirement(w, floors.support) for w in judged.workarounds}
        for w in judged.workarounds:
            verdict = verdicts[w.id]
            if verdict.retirable:
                outcome.retirable.append({"id": w.id, "evidence": verdict.detail})
            else:
                outcome.kept.append({"id": w.id, "reason": verdict.detail})
        if halted is not None:
            outcome.halted = f"{halted}; judged from the manifest alone, and nothing was changed"
            return outcome
        assert self._base is not None
        proposer = Proposer(repo, self.settings, self.repository.split("/")[0], snapshot, self._base,
                            dry_run=self.dry_run)
        if fresh is not None and only is None:
            self.progress("the upstream-facts PR")
            outcome.facts_pr = self.facts_pr(proposer, fresh)
            if outcome.facts_pr is not None:
                self.echo(describe(outcome.facts_pr, self.dry_run))
        cells: dict[str, str] = {}
        for index, w in enumerate(judged.workarounds, 1):
            if only is not None and w.id != only:
                continue
            self.progress(f"removal PR for {w.id} ({index}/{len(judged.workarounds)})")
            plan = Proposal(w.id, branch_for(w.id))
            action = self.one(proposer, plan, w, verdicts[w.id], floors, fresh)
            cells[w.id] = pr_cell(action, plan.latest, self.dry_run)
            if action is not None:
                outcome.actions.append(action)
                self.echo(describe(action, self.dry_run))
        if only is not None:
            # The dashboard shows every workaround's PR; a run that looked at one cannot fill it in.
            self.echo(f"{'dry run: ' if self.dry_run else ''}dashboard left as it is (--only)")
            return outcome
        self.progress("removal PRs of workarounds gone from the manifest")
        for action in self.orphans(proposer, manifest):
            outcome.actions.append(action)
            self.echo(describe(action, self.dry_run))
        if self.look_ahead:
            outcome.next_release = dashboard_section(manifest, snapshot, progress=self.progress, warn=self.warn)
            if outcome.next_release.failure is not None:
                self.echo(f"{'dry run: ' if self.dry_run else ''}{'failed':<11} next vLLM release: "
                          f"{outcome.next_release.failure}")
        self.progress("the dashboard issue")
        body = dashboard_body(snapshot, judged, verdicts, cells, floors, fresh.report if fresh else None,
                              outcome.facts_pr, outcome.next_release.section if outcome.next_release else None)
        outcome.dashboard = keep_dashboard(repo, body, own=self.own(), dry_run=self.dry_run, settings=self.settings,
                                           ensure_label=proposer.ensure_label)
        self.echo(describe_dashboard(outcome.dashboard, self.dry_run))
        return outcome

    def one(self, proposer: Proposer, plan: Proposal, w: Workaround, verdict: Retirement, floors: Floors,
            fresh: Fresh | None) -> Action | None:
        try:
            plan.pulls = proposer.pulls(plan.branch)
            doubtful = unchecked(w, fresh.report) if fresh is not None else []
            if doubtful or (fresh is not None and floors.note):
                why = (f"the facts of {', '.join(doubtful)} could not be learned" if doubtful
                       else f"the support floors could not be checked: {floors.note}")
                current = plan.current
                return plan.action(ActionKind.UNCHANGED, current.number if current else None,
                                   f"left as it is: {why}")
            if verdict.retirable:
                return self.retire(proposer, plan, w, verdict, floors, fresh)
            return proposer.withdraw(plan, closing_comment(w, verdict, proposer.snapshot),
                                     f"needed again: {verdict.detail}", "not-retirable")
        except StepFailed as failure:
            return plan.action(ActionKind.FAILED, failure.pr, failure.detail)
        except RemovalError as error:
            return plan.action(ActionKind.FAILED, None,
                               f"the removal would not pass lint, nothing was pushed: {error}")
        except GITHUB_ERRORS as error:
            return plan.action(ActionKind.FAILED, None, str(classify(error, self.settings, plan.branch)))

    def retire(self, proposer: Proposer, plan: Proposal, w: Workaround, verdict: Retirement, floors: Floors,
               fresh: Fresh | None) -> Action:
        snapshot, report = proposer.snapshot, fresh.report if fresh is not None else None
        removal = compute_removal(snapshot, w)
        why = self.proofs.unproven(w.id) if self.proofs is not None else None
        if why is not None:  # nothing is pushed: a PR already open stays as it is
            current = plan.current
            kept = f"#{current.number} left as it is" if current is not None else "not opened"
            action = plan.action(ActionKind.FAILED, current.number if current else None, f"{kept}: {why}")
            action.unproven = why
            return action
        plan.change, plan.title = removal, pr_title(w)
        plan.evidence = evidence_digest(w, verdict, floors.support)
        plan.message = commit_message(w, verdict, removal, snapshot)
        plan.body = pr_body(w, verdict, floors, snapshot, removal, plan.evidence, report)
        plan.foreign_body = lambda tip: pr_body(w, verdict, floors, snapshot, removal, plan.evidence, report, tip)
        return proposer.keep(plan, f" (#{plan.latest.number} was merged, yet {w.id} is on {snapshot.branch} "
                                   f"again)" if plan.latest is not None else "")

    # ---- tracked-only: the repository that carries vLLM's code --------------------------
    def run_tracked(self, repo: Repository, snapshot: Snapshot, manifest: Manifest, only: str | None) -> RetireResult:
        """One issue per inline workaround dead at this repository's own pins (``tracker.retire.inline``);
        never a code PR, no upstream-facts PR (the manifest has no references to record)."""
        ids = [inline.id for inline in manifest.tracked]
        if only is not None and only not in ids:
            raise InputError(f"unknown tracked id {echoed(only)} on {snapshot.branch} (known: {', '.join(ids)})")
        what = f"{self.repository}@{snapshot.branch}"
        texts: dict[str, str] = {}

        def read(path: str) -> str:
            if path not in texts:
                with github_step(self.settings, what=f"{what}: {path}", fatal=True):
                    texts[path] = _blob_text(repo.get_git_blob(snapshot.blobs[path]), what, path)
            return texts[path]

        outcome = RetireResult(self.repository, snapshot.branch, snapshot.commit, self.dry_run,
                          floors=fixed_floors(manifest), facts=FactsResult.of(None), html_url=repo.html_url)
        found = [state for state in inline_states(manifest, snapshot, read) if only is None or state.inline.id == only]
        assert self._base is not None
        proposer = Proposer(repo, self.settings, self.repository.split("/")[0], snapshot, self._base,
                            dry_run=self.dry_run)
        pins = pins_path(manifest)
        self.progress(f"issues of {len(found)} inline workarounds")
        issues = InlineIssues(repo, self.settings, snapshot, own=self.own(), dry_run=self.dry_run,
                              ensure_label=proposer.ensure_label)
        outcome.issues = issues.keep(found, pins)
        for action in outcome.issues:
            self.echo(describe(action, self.dry_run))
        if only is not None:
            self.echo(f"{'dry run: ' if self.dry_run else ''}dashboard left as it is (--only)")
            return outcome
        self.progress("the dashboard issue")
        body = inline_dashboard(snapshot, found, issues.cells, pins, DASHBOARD_MARKER)
        outcome.dashboard = keep_dashboard(repo, body, own=self.own(), dry_run=self.dry_run, settings=self.settings,
                                           ensure_label=proposer.ensure_label)
        self.echo(describe_dashboard(outcome.dashboard, self.dry_run))
        return outcome

    # ---- the upstream-facts PR --------------------------------------------------------
    def facts_pr(self, proposer: Proposer, fresh: Fresh) -> Action | None:
        """Keep one PR recording in the base manifest what ``upstream --write`` would change."""
        snapshot = proposer.snapshot
        plan = Proposal(FACTS_ID, FACTS_BRANCH, again="there are upstream facts to record again")
        try:
            plan.pulls = proposer.pulls(FACTS_BRANCH)
            text, changes = updated_text(snapshot.manifest_text, fresh.report)
            if not changes:
                return proposer.withdraw(plan, caught_up_comment(snapshot), f"{snapshot.branch} has caught up",
                                         "caught-up")
            edited = checked_manifest(text, snapshot.manifest_path)
            plan.change = Edit({snapshot.manifest_path: text, **snapshot.catalogue(edited)})
            plan.evidence = facts_digest(changes)
            plan.title, plan.message = facts_title(changes), facts_commit_message(changes, snapshot)
            plan.body = facts_body(changes, fresh.report, snapshot, plan.evidence)
            plan.foreign_body = lambda tip: facts_body(changes, fresh.report, snapshot, plan.evidence, tip)
            return proposer.keep(plan)
        except StepFailed as failure:
            return plan.action(ActionKind.FAILED, failure.pr, failure.detail)
        except RemovalError as error:
            return plan.action(ActionKind.FAILED, None, f"the recorded facts would not pass lint, nothing was "
                                                        f"pushed: {error}")
        except GITHUB_ERRORS as error:
            return plan.action(ActionKind.FAILED, None, str(classify(error, self.settings, FACTS_BRANCH)))

    # ---- removal PRs of workarounds the base no longer carries --------------------------
    def orphans(self, proposer: Proposer, manifest: Manifest) -> list[Action]:
        """Close this tool's open removal PRs of workarounds the base no longer carries."""
        owner = self.repository.split("/")[0]
        snapshot = proposer.snapshot
        found = []
        try:
            for pr in proposer.repo.get_pulls(state="open", base=snapshot.branch):
                head_owner, _, branch = pr.head.label.partition(":")
                workaround_id = branch.removeprefix(BRANCH_PREFIX)
                if head_owner != owner or branch == workaround_id or workaround_id in manifest.by_id:
                    continue
                mark = read_marker(pr.body)
                if mark is None or mark.kind != "retire" or mark.id != workaround_id:
                    continue  # not a removal PR this tool opened: not ours to close
                why = f"{workaround_id} is no longer in {snapshot.manifest_path} on {snapshot.branch}"
                if self.dry_run:
                    found.append(Action(workaround_id, ActionKind.CLOSED, pr.number, branch,
                                        f"would close #{pr.number}: {why}"))
                    continue
                try:
                    proposer.close(pr, f"Closing: `{workaround_id}` is no longer in `{snapshot.manifest_path}` on "
                                       f"`{snapshot.branch}` at `{snapshot.commit[:12]}`; nothing is left to "
                                       f"remove. (`xpu-workarounds retire --open-prs`)", why)
                    found.append(Action(workaround_id, ActionKind.CLOSED, pr.number, branch,
                                        f"closed #{pr.number}: {why}"))
                except StepFailed as failure:
                    found.append(Action(workaround_id, ActionKind.FAILED, pr.number, branch, failure.detail))
        except GITHUB_ERRORS as error:
            found.append(Action("-", ActionKind.FAILED, None, BRANCH_PREFIX + "*",
                                str(classify(error, self.settings, "listing open removal PRs"))))
        return found


__all__ = ["LABEL", "Retirer", "check_repository"]


def _blob_text(blob: Any, what: str, path: str = MANIFEST_PATH) -> str:
    """A blob's text (the manifest's, the README's); ``RetireError`` naming ``what`` and the file when it is
    not UTF-8, ``WrongField`` when GitHub's content is not base64."""
    if blob.encoding != "base64":
        return str(blob.content)
    try:
        raw = base64.b64decode("".join(str(blob.content).split()), validate=True)  # GitHub wraps it in lines
    except ValueError:
        raise wrong(f"{what} {path}", "content", blob.content, "base64") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RetireError(f"{what}: {path} is not UTF-8 text (byte {error.start}: "
                          f"{error.reason})") from None
