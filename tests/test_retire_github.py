"""``retire --open-prs`` against the stand-in GitHub server, over real HTTP with real PyGithub.

The server holds a real repository state: the frozen repository (tests/support/repository.py:
this project's layout with the manifest of tests/fixtures/frozen_repository/, which no
removal of a shipped workaround touches) at a base commit, with ``[support]`` torch raised
to 2.14.0 so that ``static-launcher-uva`` is retirable (pytorch#188240 is in torch 2.14.0),
plus a fixture of that workaround following the naming convention. Everything the run
learns about the repository it reads through the API; every change it makes goes through
the API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import github
import pytest
from github import Auth
from support import upstream_history
from support.fakegithub import FakeGitHub
from support.fakegithub_git import close_by_person, deny, install, merge_by_person, store, writes
from support.manifests import loaded
from support.repository import frozen, lint_problems
from typer.testing import CliRunner

import tracker
from tracker.commands.app import app
from tracker.model.catalogue import markdown
from tracker.retire import (
    BRANCH_PREFIX,
    DASHBOARD_LABEL,
    DASHBOARD_TITLE,
    DOCS_PATH,
    LABEL,
    MANIFEST_PATH,
    Proofs,
    Retirer,
    read_marker,
    remove_entry,
)
from tracker.upstream.settings import ClientSettings

REPOSITORY = "xpu-org/xpu-workarounds"
STATIC = "static-launcher-uva"
SECOND = "cudagraph-profile-skip"  # retirable once the vLLM floor reaches 0.21.0
STATIC_OWNED = {"workarounds/static_launcher_uva.py", "tests/test_workaround_static_launcher_uva.py",
                "tests/fixtures/static_launcher_uva/offload_config.json"}
TOKEN = "ghs_stand-in-token-for-tests"


def with_floor(text: str, **floors: str) -> str:
    """``text`` with ``[support]`` floors replaced (keyword ``vllm_xpu_kernels`` for dashes)."""
    head, sep, rest = text.partition("[support]\n")
    table, blank, tail = rest.partition("\n\n")
    lines = table.splitlines()
    for name, version in floors.items():
        key = name.replace("_", "-")
        lines = [f'{key} = "{version}"' if line.split(" = ")[0] == key else line for line in lines]
    return head + sep + "\n".join(lines) + blank + tail


class Scenario:
    """One repository on the stand-in server, and runs of the retirer against it."""

    def __init__(self, server: FakeGitHub, cache_dir: Path):
        self.server = server
        self.repo = server.add_repo(REPOSITORY)
        files = frozen()
        files[MANIFEST_PATH] = with_floor(files[MANIFEST_PATH], torch="2.14.0")
        files["tests/fixtures/static_launcher_uva/offload_config.json"] = '{"offload": "uva"}\n'
        self.repo.commit("The project at a base commit", files=files)
        self.settings = ClientSettings(token=TOKEN, base_url=server.base_url, retries=0, timeout=15)
        # The product's client (github_client.connect) spaces writes a second apart, as GitHub
        # asks of real bots; against the stand-in that only costs time, so tests turn it off.
        self.gh = github.Github(auth=Auth.Token(TOKEN), base_url=server.base_url, retry=None, timeout=15,
                                seconds_between_requests=None, seconds_between_writes=None)
        self.lines: list[str] = []
        self.cache_dir = cache_dir
        cache_dir.mkdir()
        self.upstream_seeded = False

    def seed_upstream(self) -> None:
        """The real history of every upstream reference (tests/support/upstream_history.py), for runs
        that refresh upstream facts (the command line does by default)."""
        if not self.upstream_seeded:
            upstream_history.seed(self.server)
            self.upstream_seeded = True

    # ---- acting --------------------------------------------------------------------
    def run(self, dry_run: bool = False, only: str | None = None, proofs: Proofs | None = None):
        self.server.settle()
        self.server.reset_log()
        self.lines = []
        return Retirer(self.gh, self.settings, REPOSITORY, dry_run=dry_run, echo=self.lines.append,
                       proofs=proofs).run(only)

    def push_base(self, message: str, **files: str | None) -> str:
        return self.repo.commit(message, files={name.replace("__", "/").replace("_DOT_", "."): text
                                                for name, text in files.items()})

    def set_manifest(self, text: str) -> str:
        return self.repo.commit("Edit the manifest", files={MANIFEST_PATH: text})

    @property
    def base(self) -> str:
        return self.repo.branches["main"]

    @property
    def manifest_text(self) -> str:
        return self.repo.commits[self.base].files[MANIFEST_PATH]

    # ---- looking -------------------------------------------------------------------
    def prs(self, workaround_id: str):
        return [pr for pr in self.repo.pulls.values() if pr.head == BRANCH_PREFIX + workaround_id]

    def pr(self, workaround_id: str):
        found = self.prs(workaround_id)
        assert len(found) == 1, found
        return found[0]

    def files(self, branch: str) -> dict[str, str]:
        return self.repo.commits[self.repo.branches[branch]].files

    def dashboards(self):
        return [issue for issue in store(self.server).issues.get(REPOSITORY.lower(), {}).values()
                if DASHBOARD_LABEL in issue.labels]

    def comments(self, number: int) -> list[str]:
        return [c.body for c in store(self.server).comments.get((REPOSITORY.lower(), number), [])]

    def assert_sound(self, on_current_base: bool = True) -> None:
        """No duplicate PR, and every open removal branch is one good commit on a base commit
        (with ``on_current_base``, on the current base head)."""
        history = self.repo.ancestors(self.base)
        for branch in [b for b in self.repo.branches if b.startswith(BRANCH_PREFIX)]:
            prs = [pr for pr in self.repo.pulls.values() if pr.head == branch]
            assert len(prs) == 1, f"{branch}: {len(prs)} PRs"
            if prs[0].state != "open":
                continue
            tip = self.repo.commits[self.repo.branches[branch]]
            assert len(tip.parents) == 1 and tip.parents[0] in history, f"{branch} is not one commit on the base"
            if on_current_base:
                assert tip.parents == [self.base], f"{branch} is not on the current base"
            workaround_id = branch[len(BRANCH_PREFIX):]
            base_files = self.repo.commits[tip.parents[0]].files
            expected = {p: t for p, t in base_files.items() if p not in owned(workaround_id, base_files)}
            expected[MANIFEST_PATH] = remove_entry(base_files[MANIFEST_PATH], workaround_id)
            expected.pop(DOCS_PATH, None)
            if "README.md" in expected:  # the front page's table row linking to the removed heading goes too
                expected["README.md"] = "".join(
                    line for line in expected["README.md"].splitlines(keepends=True)
                    if not (line.startswith("|") and f"]({DOCS_PATH}#{workaround_id})" in line))
            assert {p: t for p, t in tip.files.items() if p != DOCS_PATH} == expected
            edited = loaded(expected[MANIFEST_PATH])
            assert tip.files[DOCS_PATH] == markdown(edited)
            assert lint_problems(tip.files) == []



def owned(workaround_id: str, files: dict[str, str]) -> set[str]:
    module = workaround_id.replace("-", "_")
    return {p for p in files if p == f"workarounds/{module}.py" or p.startswith(f"tests/fixtures/{module}/")
            or p.endswith(f"/test_workaround_{module}.py")}


@pytest.fixture
def scenario(tmp_path):
    with FakeGitHub() as server:
        install(server)
        yield Scenario(server, tmp_path / "cache")


@pytest.fixture
def enterprise_scenario(tmp_path):
    with FakeGitHub(prefix="/api/v3") as server:  # GitHub Enterprise Server's API base
        install(server)
        yield Scenario(server, tmp_path / "cache")


def actions(outcome) -> dict[str, tuple[str, int | None]]:
    return {a.id: (a.action, a.pr) for a in outcome.actions}


# ------------------------------------------------------------------------- first run


def test_first_run_opens_one_pr_for_the_retirable_workaround(scenario):
    outcome = scenario.run()
    pr = scenario.pr(STATIC)
    assert actions(outcome) == {STATIC: ("opened", pr.number)}
    assert (pr.state, pr.base, pr.head) == ("open", "main", BRANCH_PREFIX + STATIC)
    assert LABEL in pr.labels
    assert not outcome.failed


def test_a_github_enterprise_api_base_works_the_same(enterprise_scenario):
    outcome = enterprise_scenario.run()
    assert actions(outcome) == {STATIC: ("opened", enterprise_scenario.pr(STATIC).number)}
    elsewhere = [hit.path for hit in enterprise_scenario.server.log if not hit.path.startswith("/api/v3/")]
    assert elsewhere == ["/api/graphql"]  # who the token is: Enterprise Server's GraphQL
    enterprise_scenario.assert_sound()


def test_the_pr_branch_removes_exactly_the_workarounds_files(scenario):
    base_files = dict(scenario.files("main"))
    scenario.run()
    branch_files = scenario.files(BRANCH_PREFIX + STATIC)
    assert set(base_files) - set(branch_files) == STATIC_OWNED
    assert set(branch_files) <= set(base_files) | {DOCS_PATH}
    changed = {p for p in branch_files if branch_files[p] != base_files.get(p)}
    assert changed == {MANIFEST_PATH, DOCS_PATH, "README.md"}
    removed = set(base_files["README.md"].splitlines()) - set(branch_files["README.md"].splitlines())
    assert [line for line in removed if f"({DOCS_PATH}#{STATIC})" in line] == list(removed) and len(removed) == 1


def test_the_pr_branch_is_one_commit_on_the_base_head(scenario):
    base = scenario.base
    scenario.run()
    tip = scenario.repo.commits[scenario.repo.branches[BRANCH_PREFIX + STATIC]]
    assert tip.parents == [base]
    assert tip.message.startswith(f"Retire workaround {STATIC}\n")


def test_the_edited_manifest_on_the_branch_passes_lint_against_the_branchs_own_tree(scenario):
    scenario.run()
    files = scenario.files(BRANCH_PREFIX + STATIC)
    assert lint_problems(files) == []
    assert STATIC not in [w.id for w in loaded(files[MANIFEST_PATH]).workarounds]


def test_the_branchs_docs_are_regenerated_from_its_manifest(scenario):
    scenario.run()
    files = scenario.files(BRANCH_PREFIX + STATIC)
    assert files[DOCS_PATH] == markdown(loaded(files[MANIFEST_PATH]))


def test_the_lint_check_of_a_branch_catches_a_missing_module(scenario):
    # The same check the tests above rely on, shown to fail on a broken tree.
    files = dict(scenario.files("main"))
    del files["workarounds/uva_view_unpinned.py"]
    assert any("uva-view-unpinned" in line and "does not exist" in line for line in lint_problems(files))


def test_the_pr_body_carries_the_evidence_and_what_to_run(scenario):
    scenario.run()
    body = scenario.pr(STATIC).body
    assert "pytorch/pytorch#188240" in body and "| root-fix | landed | `torch>=2.14.0` |" in body
    assert "vllm-project/vllm#51770" in body and "| inline-fix | merged | `vllm>=0.28.0` |" in body
    assert "vllm 0.19.0, torch 2.14.0, vllm-xpu-kernels 0.1.4" in body
    assert "every supported release contains it" in body
    assert "xpu-workarounds lint" in body and "python -m pytest" in body
    for path in STATIC_OWNED:
        assert f"- deletes `{path}`" in body
    assert read_marker(body).id == STATIC


def test_a_removal_of_thousands_of_files_has_a_body_within_githubs_limit_counting_the_rest(scenario):
    from support.fakegithub_git import BODY_LIMIT

    fixtures = {f"tests/fixtures/static_launcher_uva/case_{n:04d}_with_a_long_descriptive_name.json": "{}\n"
                for n in range(3000)}
    scenario.repo.commit("Thousands of fixtures", files=fixtures)
    outcome = scenario.run()
    assert actions(outcome) == {STATIC: ("opened", scenario.pr(STATIC).number)}  # the stand-in took the body
    body = scenario.pr(STATIC).body
    assert len(body) <= BODY_LIMIT and read_marker(body).id == STATIC
    deleted = [line for line in body.splitlines() if line.startswith("- deletes `")]
    assert 100 < len(deleted) < 3003
    assert f"- and deletes {3003 - len(deleted)} more files: the commit lists every one" in body
    assert not set(fixtures) & set(scenario.files(BRANCH_PREFIX + STATIC))  # the commit removes every one
    assert writes(scenario.server) and scenario.run().actions[0].action == "unchanged"  # the same body again


def test_first_run_opens_one_dashboard_issue_listing_every_workaround(scenario):
    outcome = scenario.run()
    [dashboard] = scenario.dashboards()
    assert outcome.dashboard.action == "opened" and outcome.dashboard.issue == dashboard.number
    assert dashboard.title == DASHBOARD_TITLE
    manifest = loaded(scenario.manifest_text)
    for w in manifest.workarounds:
        row = next(line for line in dashboard.body.splitlines() if line.startswith(f"| `{w.id}` |"))
        assert all(f"`{window.describe()}`" in row for window in w.affected)
        assert all(f"{ref.ref} ({ref.role}): {ref.state}" in row for ref in w.upstream)
        assert ("**retirable**" if w.id == STATIC else "**keep**") in row
    static_row = next(line for line in dashboard.body.splitlines() if line.startswith(f"| `{STATIC}` |"))
    assert static_row.endswith(f"| #{scenario.pr(STATIC).number} open |")


def test_an_apps_installation_token_is_known_by_graphqls_viewer_where_rest_cannot_tell(scenario):
    from support.fakegithub import BOT

    from tracker.upstream.errors import GitHubUnavailable
    from tracker.upstream.identity import token_login

    scenario.server.installation_token = True  # GET /user: 403 "Resource not accessible by integration"
    assert token_login(scenario.gh, scenario.settings, graphql=True) == BOT
    with pytest.raises(GitHubUnavailable, match=r"^cannot tell whose token this is, .*403: Resource not accessible by integration"):
        token_login(scenario.gh, scenario.settings, graphql=False)


def test_a_run_that_cannot_tell_whose_token_it_holds_writes_nothing(scenario, monkeypatch):
    from tracker.retire.removal import RetireError

    monkeypatch.setenv("XPU_WORKAROUNDS_GITHUB_API", "rest")
    scenario.server.installation_token = True
    with pytest.raises(RetireError, match="cannot tell whose token this is"):
        scenario.run()
    assert writes(scenario.server) == 0 and not scenario.dashboards() and not scenario.prs(STATIC)


def test_a_dry_run_without_a_token_reads_and_says_what_it_would_do(scenario):
    from dataclasses import replace

    scenario.run()  # the bot's dashboard and PR exist
    scenario.server.settle()
    scenario.server.reset_log()
    anonymous = github.Github(base_url=scenario.server.base_url, retry=None, timeout=15,
                              seconds_between_requests=None, seconds_between_writes=None)
    outcome = Retirer(anonymous, replace(scenario.settings, token=None), REPOSITORY, dry_run=True).run()
    assert writes(scenario.server) == 0 and outcome.dashboard.action == "opened"  # no issue is anyone's own


# ------------------------------------------------------------------------ idempotence


def test_a_second_run_with_nothing_new_sends_no_write_and_reports_unchanged(scenario):
    first = scenario.run()
    second = scenario.run()
    assert writes(scenario.server) == 0
    assert actions(second) == {STATIC: ("unchanged", actions(first)[STATIC][1])}
    assert second.dashboard.action == "unchanged"


def test_after_the_base_moves_the_same_pr_is_updated_onto_the_new_base(scenario):
    scenario.run()
    number = scenario.pr(STATIC).number
    new_base = scenario.push_base("Unrelated change", README_DOT_md="# moved\n")
    outcome = scenario.run()
    assert actions(outcome) == {STATIC: ("updated", number)}
    assert "the base moved" in outcome.actions[0].detail
    assert scenario.repo.commits[scenario.repo.branches[BRANCH_PREFIX + STATIC]].parents == [new_base]
    assert scenario.files(BRANCH_PREFIX + STATIC)["README.md"] == "# moved\n"
    assert len(scenario.prs(STATIC)) == 1 and scenario.pr(STATIC).state == "open"
    scenario.assert_sound()


def test_when_the_evidence_changes_the_same_pr_gets_a_new_body(scenario):
    scenario.run()
    before = scenario.pr(STATIC).body
    scenario.set_manifest(scenario.manifest_text.replace(
        'ref = "pytorch/pytorch#188240"\nrole = "root-fix"\nstate = "landed"',
        'ref = "pytorch/pytorch#188240"\nrole = "root-fix"\nstate = "merged"'))
    outcome = scenario.run()
    after = scenario.pr(STATIC).body
    assert actions(outcome)[STATIC][0] == "updated" and "the evidence changed" in outcome.actions[0].detail
    assert read_marker(after).evidence != read_marker(before).evidence
    assert "| root-fix | merged |" in after
    assert len(scenario.prs(STATIC)) == 1
    scenario.assert_sound()


def test_a_branch_with_someone_elses_commit_is_never_force_pushed(scenario):
    scenario.run()
    branch = BRANCH_PREFIX + STATIC
    theirs = scenario.repo.commit("Fix the test that imported the module", branch=branch,
                                  files={"tests/test_runtime.py": "# adjusted by a maintainer\n"})
    outcome = scenario.run()
    assert scenario.repo.branches[branch] == theirs
    assert actions(outcome)[STATIC] == ("updated", scenario.pr(STATIC).number)  # the description only
    assert "commits from someone else" in outcome.actions[0].detail
    again = scenario.run()
    assert actions(again)[STATIC] == ("unchanged", scenario.pr(STATIC).number)
    assert "commits from someone else" in again.actions[0].detail
    assert scenario.repo.branches[branch] == theirs
    assert writes(scenario.server) == 0


def test_a_branch_with_someone_elses_commit_gets_a_true_description_and_dashboard_row(scenario):
    scenario.run()
    branch = BRANCH_PREFIX + STATIC
    theirs = scenario.repo.commit("Fix a test", branch=branch, files={"tests/test_runtime.py": "# adjusted\n"})
    moved = scenario.push_base("Unrelated change", README_DOT_md="# moved\n")
    scenario.run()
    body = scenario.pr(STATIC).body
    assert "one commit on the base above" not in body
    assert f"its tip is `{theirs[:12]}`" in body and f"`main` is now at `{moved[:12]}`" in body
    assert "a person's commit is on its branch" in scenario.dashboards()[0].body


def test_a_branch_with_someone_elses_commit_gets_only_its_description_updated(scenario):
    scenario.run()
    branch = BRANCH_PREFIX + STATIC
    theirs = scenario.repo.commit("Fix a test", branch=branch, files={"tests/test_runtime.py": "# adjusted\n"})
    moved = scenario.push_base("Unrelated change", README_DOT_md="# moved\n")
    outcome = scenario.run()
    assert actions(outcome)[STATIC][0] == "updated" and "commits from someone else" in outcome.actions[0].detail
    assert scenario.repo.branches[branch] == theirs
    assert f"at `{moved[:12]}`" in scenario.pr(STATIC).body


# ----------------------------------------------------------------------- closed PRs


def test_a_pr_a_person_closed_stays_closed_and_the_dashboard_says_so(scenario):
    scenario.run()
    number = scenario.pr(STATIC).number
    close_by_person(scenario.server, scenario.repo, number)
    scenario.push_base("Unrelated change", README_DOT_md="# moved\n")
    outcome = scenario.run()
    assert actions(outcome) == {STATIC: ("left-closed", number)}
    assert scenario.pr(STATIC).state == "closed"
    assert f"#{number} closed without merging, left closed" in scenario.dashboards()[0].body


def test_a_pr_a_person_closed_is_reopened_only_when_the_evidence_changes(scenario):
    scenario.run()
    number = scenario.pr(STATIC).number
    close_by_person(scenario.server, scenario.repo, number)
    scenario.run()
    scenario.set_manifest(with_floor(scenario.manifest_text, vllm="0.20.0"))
    outcome = scenario.run()
    assert actions(outcome)[STATIC] == ("opened", number)
    assert "reopened" in outcome.actions[0].detail and "evidence changed" in outcome.actions[0].detail
    assert scenario.pr(STATIC).state == "open" and len(scenario.prs(STATIC)) == 1
    scenario.assert_sound()


def test_a_pr_for_a_workaround_needed_again_is_closed_with_a_comment_saying_why(scenario):
    scenario.run()
    number = scenario.pr(STATIC).number
    scenario.set_manifest(with_floor(scenario.manifest_text, torch="2.10.0"))
    outcome = scenario.run()
    assert actions(outcome) == {STATIC: ("closed", number)}
    assert scenario.pr(STATIC).state == "closed"
    [comment] = scenario.comments(number)
    assert comment.startswith(f"Closing: `{STATIC}` is needed again")
    assert "torch>=2.11.0,<2.14.0" in comment  # the window supported stacks still fall in


def test_a_pr_closed_because_it_was_needed_again_reopens_when_retirable_again(scenario):
    scenario.run()
    number = scenario.pr(STATIC).number
    retiring = scenario.manifest_text
    scenario.set_manifest(with_floor(retiring, torch="2.10.0"))
    scenario.run()
    scenario.set_manifest(retiring)
    outcome = scenario.run()
    assert actions(outcome)[STATIC] == ("opened", number)
    assert "retirable again" in outcome.actions[0].detail
    scenario.assert_sound()


def test_a_pr_for_a_workaround_removed_from_the_base_another_way_is_closed(scenario):
    scenario.run()
    number = scenario.pr(STATIC).number
    removed = remove_entry(scenario.manifest_text, STATIC)
    scenario.repo.commit("Remove static-launcher-uva by hand",
                         files={MANIFEST_PATH: removed, **{path: None for path in STATIC_OWNED}})
    outcome = scenario.run()
    assert actions(outcome) == {STATIC: ("closed", number)}
    assert "no longer in workarounds.toml on main" in outcome.actions[0].detail
    assert scenario.pr(STATIC).state == "closed"
    assert scenario.comments(number)[0].startswith(f"Closing: `{STATIC}` is no longer in `workarounds.toml`")


def test_a_merged_pr_leaves_nothing_to_do(scenario):
    scenario.run()
    merge_by_person(scenario.server, scenario.repo, scenario.pr(STATIC).number)
    outcome = scenario.run()
    assert STATIC not in actions(outcome)
    assert STATIC not in scenario.dashboards()[0].body
    assert writes(scenario.server) == 1  # the dashboard edit, nothing else


# ----------------------------------------------------------------------- failures


def test_a_403_on_opening_the_pr_leaves_no_half_made_branch_and_says_so(scenario):
    deny(scenario.server, "POST", "/repos/<owner>/<repo>/pulls", 403)
    outcome = scenario.run()
    [action] = outcome.actions
    assert (action.id, action.action, action.pr) == (STATIC, "failed", None)
    assert "403" in action.detail and "deleted again, nothing is left half-made" in action.detail
    assert "Allow GitHub Actions to create and approve pull requests" in action.detail
    assert BRANCH_PREFIX + STATIC not in scenario.repo.branches
    assert scenario.prs(STATIC) == []
    assert outcome.failed


def test_a_403_on_pushing_the_branch_creates_no_branch_and_says_so(scenario):
    deny(scenario.server, "POST", "/repos/<owner>/<repo>/git/refs", 403)
    outcome = scenario.run()
    assert outcome.actions[0].action == "failed"
    assert "the branch was not created" in outcome.actions[0].detail
    assert not [b for b in scenario.repo.branches if b.startswith(BRANCH_PREFIX)]


def test_the_run_after_a_failure_opens_the_pr(scenario):
    deny(scenario.server, "POST", "/repos/<owner>/<repo>/pulls", 403)
    scenario.run()
    outcome = scenario.run()
    assert actions(outcome)[STATIC][0] == "opened"
    scenario.assert_sound()


def test_one_failing_pr_does_not_stop_the_others_and_each_is_reported(scenario):
    scenario.set_manifest(with_floor(scenario.manifest_text, vllm="0.21.0"))  # the second one is retirable too
    deny(scenario.server, "POST", "/repos/<owner>/<repo>/pulls", 403)  # the first PR attempt only
    outcome = scenario.run()
    result = actions(outcome)
    assert result[SECOND] == ("failed", None)  # first in manifest order
    assert result[STATIC] == ("opened", scenario.pr(STATIC).number)
    assert outcome.failed
    scenario.assert_sound()


def test_already_exists_on_creating_the_pr_means_look_again(scenario):
    # The POST created the PR but its answer was lost; the retried POST got 422.
    deny(scenario.server, "POST", "/repos/<owner>/<repo>/pulls", 422,
         "Validation Failed: A pull request already exists for xpu-org:xpu-workarounds/retire-static-launcher-uva.",
         apply=True)
    outcome = scenario.run()
    assert actions(outcome)[STATIC] == ("opened", scenario.pr(STATIC).number)
    assert len(scenario.prs(STATIC)) == 1
    scenario.assert_sound()


# ------------------------------------------------------------------------- dry run


def test_a_dry_run_sends_no_write_and_says_what_it_would_open(scenario):
    outcome = scenario.run(dry_run=True)
    assert writes(scenario.server) == 0
    assert actions(outcome) == {STATIC: ("opened", None)}
    line = next(line for line in scenario.lines if STATIC in line)
    assert line.startswith("dry run: opened") and "would open a PR from xpu-workarounds/retire-static" in line
    assert all(path in line for path in STATIC_OWNED)
    assert scenario.repo.pulls == {} and scenario.dashboards() == []


def test_a_dry_run_after_the_base_moved_says_it_would_update_and_changes_nothing(scenario):
    scenario.run()
    scenario.push_base("Unrelated change", README_DOT_md="# moved\n")
    tip = scenario.repo.branches[BRANCH_PREFIX + STATIC]
    outcome = scenario.run(dry_run=True)
    assert writes(scenario.server) == 0
    assert outcome.actions[0].action == "updated" and outcome.actions[0].detail.startswith("would update")
    assert scenario.repo.branches[BRANCH_PREFIX + STATIC] == tip


def test_only_limits_the_run_to_one_workaround(scenario):
    scenario.set_manifest(with_floor(scenario.manifest_text, vllm="0.21.0"))
    outcome = scenario.run(only=SECOND)
    assert list(actions(outcome)) == [SECOND]
    assert scenario.prs(STATIC) == []


def test_a_run_for_one_workaround_leaves_the_dashboard_as_it_is(scenario):
    scenario.run()
    before = scenario.dashboards()[0].body
    outcome = scenario.run(only=SECOND)
    assert outcome.dashboard is None
    assert scenario.dashboards()[0].body == before
    assert "dashboard left as it is (--only)" in scenario.lines


# -------------------------------------------------------------- ten changing runs


def test_ten_runs_over_a_changing_repository_never_duplicate_a_pr_or_break_a_branch(scenario):
    retiring = scenario.manifest_text
    both = with_floor(retiring, vllm="0.21.0")
    steps = [
        ("first run", lambda: None, {STATIC: "opened"}),
        ("nothing new", lambda: None, {STATIC: "unchanged"}),
        ("base moves; moving the branch is refused once", lambda: (
            scenario.push_base("Docs", README_DOT_md="# one\n"),
            deny(scenario.server, "PATCH", "/repos/<owner>/<repo>/git/refs/<path:ref>", 403)),
         {STATIC: "failed"}),
        ("floor raised: both retirable", lambda: scenario.set_manifest(both), {STATIC: "updated", SECOND: "opened"}),
        ("a person closes one", lambda: close_by_person(scenario.server, scenario.repo, scenario.pr(STATIC).number),
         {STATIC: "left-closed", SECOND: "unchanged"}),
        ("base moves again", lambda: scenario.push_base("More docs", README_DOT_md="# two\n"),
         {STATIC: "left-closed", SECOND: "updated"}),
        ("floor lowered: both needed", lambda: scenario.set_manifest(with_floor(both, vllm="0.19.0", torch="2.10.0")),
         {SECOND: "closed"}),
        ("floor raised back", lambda: scenario.set_manifest(both), {STATIC: "left-closed", SECOND: "opened"}),
        ("upstream state changes", lambda: scenario.set_manifest(both.replace(
            'ref = "pytorch/pytorch#188240"\nrole = "root-fix"\nstate = "landed"',
            'ref = "pytorch/pytorch#188240"\nrole = "root-fix"\nstate = "merged"')),
         {STATIC: "opened", SECOND: "updated"}),
        ("nothing new", lambda: None, {STATIC: "unchanged", SECOND: "unchanged"}),
    ]
    dashboard = None
    for name, change, expected in steps:
        change()
        outcome = scenario.run()
        assert {a.id: a.action for a in outcome.actions} == expected, name
        failed = "failed" in expected.values()
        assert outcome.failed == failed, name
        scenario.assert_sound(on_current_base=not failed)  # a failed push leaves the old, sound branch
        [issue] = scenario.dashboards()
        assert dashboard in (None, issue.number), name
        dashboard = issue.number
    assert len(scenario.repo.pulls) == 2
    assert {pr.state for pr in scenario.repo.pulls.values()} == {"open"}


def test_the_dashboard_is_updated_in_place_when_a_verdict_changes(scenario):
    first = scenario.run()
    scenario.set_manifest(with_floor(scenario.manifest_text, torch="2.10.0"))
    outcome = scenario.run()
    assert (outcome.dashboard.action, outcome.dashboard.issue) == ("updated", first.dashboard.issue)
    [dashboard] = scenario.dashboards()
    row = next(line for line in dashboard.body.splitlines() if line.startswith(f"| `{STATIC}` |"))
    assert "**keep**" in row and row.endswith(f"| #{scenario.pr(STATIC).number} closed: needed again |")


# ------------------------------------------------------ only the removals whose copy passed the tests

# What the weekly workflow's proof job found (tests/support/removal_proof.py): the second removal's copy fails.
BROKEN = "1 failed in 2.31s; tests/test_needs_it.py::test_it_is_shipped"
PROOFS = Proofs(frozenset({STATIC}), {SECOND: BROKEN})
SHOWN = BROKEN.replace("_", "\\_")  # as the dashboard's Markdown shows it


def dashboard_row(scenario: Scenario, workaround_id: str) -> str:
    [dashboard] = scenario.dashboards()
    return next(line for line in dashboard.body.splitlines() if line.startswith(f"| `{workaround_id}` |"))


def test_a_removal_whose_copy_fails_the_tests_is_not_opened_and_the_dashboard_says_why(scenario):
    scenario.set_manifest(with_floor(scenario.manifest_text, vllm="0.21.0"))  # the second one is retirable too
    outcome = scenario.run(proofs=PROOFS)
    result = {a.id: a for a in outcome.actions}
    assert (result[STATIC].action, result[STATIC].pr) == ("opened", scenario.pr(STATIC).number)
    assert scenario.prs(SECOND) == [] and BRANCH_PREFIX + SECOND not in scenario.repo.branches
    assert (result[SECOND].action, result[SECOND].pr) == ("failed", None)
    assert result[SECOND].detail == f"not opened: its removal fails the repository's tests ({BROKEN})"
    assert outcome.failed  # the run says so: someone has to make the removal pass
    assert dashboard_row(scenario, SECOND).endswith(
        f"| not opened: its removal fails the repository's tests ({SHOWN}) |")
    assert dashboard_row(scenario, STATIC).endswith(f"| #{scenario.pr(STATIC).number} open |")
    scenario.assert_sound()


def test_a_removal_with_no_finished_proof_is_not_opened(scenario):
    outcome = scenario.run(proofs=Proofs())  # the proof job timed out: it proved nothing
    assert scenario.prs(STATIC) == []
    assert [(a.id, a.action, a.detail) for a in outcome.actions] == [
        (STATIC, "failed", "not opened: no proof of its removal finished (see the proof job's log)")]


def test_an_open_removal_pr_whose_copy_now_fails_is_left_as_it_is(scenario):
    scenario.run(proofs=PROOFS)
    pr, head = scenario.pr(STATIC), scenario.repo.branches[BRANCH_PREFIX + STATIC]
    scenario.push_base("Move the base", README_DOT_md="moved\n")
    outcome = scenario.run(proofs=Proofs(frozenset(), {STATIC: BROKEN}))
    assert [(a.id, a.action, a.pr) for a in outcome.actions] == [(STATIC, "failed", pr.number)]
    assert scenario.repo.branches[BRANCH_PREFIX + STATIC] == head and pr.state == "open"  # nothing pushed
    assert dashboard_row(scenario, STATIC).endswith(f"| #{pr.number} left as it is: its removal fails the "
                                                    f"repository's tests ({SHOWN}) |")


def test_without_proofs_every_removal_is_proposed_as_an_adopters_run_does(scenario):
    scenario.set_manifest(with_floor(scenario.manifest_text, vllm="0.21.0"))
    outcome = scenario.run()
    assert {a.id: a.action for a in outcome.actions} == {STATIC: "opened", SECOND: "opened"}


# ------------------------------------------------------------------- the command line


def cli(scenario: Scenario, *args: str, base_url: str | None = None):
    """``xpu-workarounds retire --open-prs ...`` in-process, configured like GitHub Actions does."""
    scenario.seed_upstream()
    env = {"GITHUB_API_URL": base_url or scenario.server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
           "GITHUB_TOKEN": None, "XPU_WORKAROUNDS_MANIFEST": None, "HTTP_PROXY": None, "HTTPS_PROXY": None,
           "http_proxy": None, "https_proxy": None, "XPU_WORKAROUNDS_CACHE_DIR": str(scenario.cache_dir)}
    scenario.server.settle()
    scenario.server.reset_log()
    result = CliRunner().invoke(app, ["retire", "--open-prs", *args], env=env)
    assert TOKEN not in result.output
    return result


def test_cli_dry_run_prints_what_it_would_do_and_sends_no_write(scenario):
    result = cli(scenario, "--repo", REPOSITORY, "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.split()[:4] == ["dry", "run:", "opened", STATIC] and "would open a PR" in line
               for line in lines)
    assert any(line.split() == ["dry", "run:", "opened", "dashboard:", *"would open the dashboard issue".split()]
               for line in lines)
    assert lines[-1] == "dry run: nothing was changed"
    assert writes(scenario.server) == 0


def test_cli_json_adds_one_action_per_workaround_acted_on(scenario):
    result = cli(scenario, "--repo", REPOSITORY, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    number = scenario.pr(STATIC).number
    assert document["actions"] == [{"id": STATIC, "action": "opened", "pr": number,
                                    "branch": BRANCH_PREFIX + STATIC, "detail": f"opened #{number}"}]
    assert [item["id"] for item in document["retirable"]] == [STATIC]
    assert STATIC not in [item["id"] for item in document["kept"]] and len(document["kept"]) == 5
    assert document["schema"] == 1 and document["dashboard"]["action"] == "opened"


def test_cli_exits_4_when_a_step_fails_and_names_the_workaround(scenario):
    for _ in ("the upstream-facts branch", "the removal branch"):
        deny(scenario.server, "POST", "/repos/<owner>/<repo>/git/refs", 403)
    result = cli(scenario, "--repo", REPOSITORY)
    assert result.exit_code == 4
    lines = result.stdout.splitlines()
    assert any(line.split()[:2] == ["failed", "upstream-facts"] and "403" in line for line in lines)
    assert any(line.split()[:2] == ["failed", STATIC] and "403" in line for line in lines)
    assert "some steps failed" in result.stderr
    assert "Traceback" not in result.output


def test_cli_exits_4_with_one_line_when_github_cannot_be_reached(scenario):
    with FakeGitHub() as gone:
        url = gone.base_url  # a loopback port nobody listens on once the server stopped
    result = cli(scenario, "--repo", REPOSITORY, base_url=url)
    assert result.exit_code == 4
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("xpu-workarounds: error: ")


def test_cli_open_prs_needs_a_repository(scenario):
    result = cli(scenario)
    assert result.exit_code == 2
    assert "--open-prs needs --repo OWNER/NAME" in result.stderr
    assert scenario.server.log == []


def test_cli_refuses_an_unknown_workaround_id(scenario):
    result = cli(scenario, "--repo", REPOSITORY, "--only", "no-such-fix")
    assert result.exit_code == 2
    assert "unknown workaround id 'no-such-fix'" in result.stderr
    assert writes(scenario.server) == 0


def test_cli_options_of_open_prs_are_refused_without_it():
    result = CliRunner().invoke(app, ["retire", "--dry-run"])
    assert result.exit_code == 2
    assert "go with --open-prs" in result.stderr


def test_the_installed_command_runs_as_the_action_runs_it(scenario):
    # The action's own step script, with the console script of this environment first on
    # PATH, configured only through the environment as the action configures it.
    from test_workflow import retire_script

    scenario.seed_upstream()
    script = textwrap.dedent(retire_script())
    env = {key: value for key, value in os.environ.items()
           if key not in ("GITHUB_TOKEN", "XPU_WORKAROUNDS_MANIFEST") and "proxy" not in key.lower()}
    env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                "GITHUB_API_URL": scenario.server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
                "REPOSITORY": REPOSITORY, "DRY_RUN": "true", "ONLY": "", "BASE": "",
                "MANIFEST": "workarounds.toml", "DOCS": "docs/workarounds.md",
                "XPU_WORKAROUNDS_CACHE_DIR": str(scenario.cache_dir)})
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "would open a PR from xpu-workarounds/retire-static-launcher-uva" in result.stdout
    assert result.stdout.rstrip().endswith("dry run: nothing was changed")
    assert writes(scenario.server) == 0


# ------------------------------------------------------------- a broken base manifest

BROKEN_BASE = {
    "not UTF-8": b"# caf\xe9\n[support]\n".decode("utf-8", "surrogateescape"),
    "a huge number": "schema = " + "9" * 5000 + "\n",
    "deep nesting": "x = " + "[" * 2000 + "]" * 2000 + "\n",
}


@pytest.mark.parametrize("broken", sorted(BROKEN_BASE))
def test_a_broken_manifest_on_the_base_branch_exits_4_with_one_line_naming_branch_and_file(scenario, broken):
    scenario.set_manifest(BROKEN_BASE[broken])
    result = cli(scenario, "--repo", REPOSITORY)
    assert result.exit_code == 4, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"xpu-workarounds: error: {REPOSITORY}@main: {MANIFEST_PATH} ")
    assert "Traceback" not in result.output and writes(scenario.server) == 0


@pytest.mark.parametrize(("variable", "at_least"), [(None, 1.0), ("2.5", 2.5)])
def test_writes_to_github_are_spaced_as_github_asks_of_bots(server, variable, at_least):
    """Two writes through the product's client: a second apart unless
    ``XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL`` says otherwise (the tests' own runs set it to 0)."""
    import time

    from tracker.upstream.client import connect

    install(server)
    server.add_repo(REPOSITORY)
    repo = connect(ClientSettings.from_env({"GITHUB_API_URL": server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
                                            **({tracker.GITHUB_WRITE_INTERVAL: variable} if variable else {})},
                                           retries=0)).get_repo(REPOSITORY)
    repo.create_issue("first")
    started = time.monotonic()
    repo.create_issue("second")
    assert time.monotonic() - started >= at_least


def test_cli_proposes_only_the_removals_its_proofs_file_names_proven(scenario, tmp_path):
    scenario.set_manifest(with_floor(scenario.manifest_text, vllm="0.21.0"))
    proofs = tmp_path / "proofs.json"
    proofs.write_text(json.dumps(PROOFS.as_json()))
    result = cli(scenario, "--repo", REPOSITORY, "--json", "--proofs", str(proofs))
    assert result.exit_code == 4, result.output  # a removal not proposed is a step that failed
    document = json.loads(result.stdout)
    assert {item["id"]: item["action"] for item in document["actions"]} == {STATIC: "opened", SECOND: "failed"}
    assert scenario.prs(SECOND) == []


@pytest.mark.parametrize(("text", "said"), [
    (None, "cannot read it"),
    ("[1, 2", "not JSON"),
    ('{"proven": "static-launcher-uva"}', 'not {"proven": [ID, ...], "failed": {ID: WHY, ...}}'),
    ('{"proven": ["a"], "failed": {"a": "why"}}', "both proven and failed: 'a'"),
])
def test_cli_refuses_a_proofs_file_it_cannot_use_in_one_line_before_any_request(scenario, tmp_path, text, said):
    proofs = tmp_path / "proofs.json"
    if text is not None:
        proofs.write_text(text)
    result = cli(scenario, "--repo", REPOSITORY, "--proofs", str(proofs))
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and said in result.stderr and "Traceback" not in result.output
    assert scenario.server.log == []
