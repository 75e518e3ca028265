"""`upstream` facts per reference, over real HTTP: the real PyGithub client against the
stand-in GitHub server (tests/support/fakegithub.py). Each scenario asserts the state, the release
and the requests it cost. Retries are off except in the tests about retrying."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
from support import upstream_history
from support.fakegithub import FakeGitHub, Repo
from support.manifests import workaround, write_manifest
from test_upstream_cli import run

from tracker import upstream
from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.upstream.errors import GitHubUnavailable
from tracker.upstream.settings import ClientSettings

TOKEN = "ghp_testtoken0123456789"
PULL = "/repos/<owner>/<repo>/pulls/<int:number>"
ISSUE = "/repos/<owner>/<repo>/issues/<int:number>"
TIMELINE = "/repos/<owner>/<repo>/issues/<int:number>/timeline"
TAGS = "/repos/<owner>/<repo>/git/matching-refs/<path:ref>"
COMPARE = "/repos/<owner>/<repo>/compare/<path:basehead>"
COMMIT = "/repos/<owner>/<repo>/commits/<path:ref>"


def settings(server: FakeGitHub, **overrides) -> ClientSettings:
    values = {"token": TOKEN, "base_url": server.base_url, "retries": 0, "timeout": 5}
    values.update(overrides)
    return ClientSettings(**values)


def manifest_for(tmp_path: Path, *refs: str, role: str = "root-fix",
                 released_in: str | None = None) -> manifest_module.Manifest:
    """A one-workaround manifest naming ``refs`` (role root-fix: no vLLM inline audit), each
    recorded as open, or as merged in ``released_in`` (the release to check first)."""
    recorded = {"state": "merged", "released_in": released_in} if released_in else {"state": "open"}
    entry = workaround(
        "example", title="Example", added=datetime.date(2026, 7, 20), vllm_carries_fix=None,
        targets=[{"path": "vllm.platforms.xpu:XPUPlatform.check_and_update_config", "kind": "classmethod",
                  "params": ["vllm_config"]}],
        affected=[{"vllm": "<0.28.0"}], upstream=[{"ref": ref, "role": role, **recorded} for ref in refs])
    path = write_manifest(tmp_path / "workarounds.toml", entry)
    return reader.load(path)


def learn(server: FakeGitHub, tmp_path: Path, *refs: str, mode: str = "refresh", released_in: str | None = None,
          path: str = "rest", **client) -> upstream.Report:
    return upstream.track(manifest_for(tmp_path, *refs, released_in=released_in), mode=mode,
                          client=settings(server, **client), cache_dir=tmp_path / "cache", graphql=path == "graphql")


GRAPHQL = "/graphql"


@pytest.fixture(params=["rest", "graphql"])
def path(request: pytest.FixtureRequest) -> str:
    """A scenario over both ways of asking: REST, a request per fact; GraphQL, batched queries."""
    return str(request.param)


def graphql_only(server: FakeGitHub, at_most: int) -> bool:
    """Every request went to GraphQL (REST was not needed), and at most ``at_most`` of them."""
    return server.count() == server.count(GRAPHQL) <= at_most


def vllm_with_release_branch(server: FakeGitHub) -> Repo:
    """vLLM-style history: v0.1.0, then releases/v0.2.0 cut from main before the PR merges."""
    repo = server.add_repo("vllm-project/vllm")
    repo.commit("init", files={"setup.py": "v1"}, date="2026-05-01")
    repo.branch("releases/v0.1.0", "main")
    repo.tag("v0.1.0", "releases/v0.1.0")
    repo.commit("more work", date="2026-05-20")
    repo.branch("releases/v0.2.0", "main")
    repo.pull("[XPU] Fix the thing", number=500, created="2026-05-18")
    return repo


# ------------------------------------------------------------------------- scenarios


def test_merged_pr_is_released_in_the_first_tag_that_contains_it_two_tags_later(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    sha = repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    repo.tag("v0.2.0", "releases/v0.2.0")  # cut before the merge: does not contain it
    repo.commit("later", date="2026-06-10")
    repo.tag("v0.3.0", "main")

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert (facts.state, facts.commit, str(facts.released_in)) == ("merged", sha, "vllm>=0.3.0")
    assert "v0.2.0 has neither it nor a cherry-pick" in facts.evidence
    if path == "rest":
        assert server.count(PULL) == server.count(TIMELINE) == server.count(TAGS) == 1
        assert server.count(COMPARE) == 2  # bisection over three tags: v0.2.0 (no), v0.3.0 (yes)
        assert server.count() == 5
    else:
        assert graphql_only(server, at_most=3)


def test_bot_landed_pytorch_pr_that_github_shows_closed_is_landed(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", files={"a.py": "1"}, date="2026-06-01")
    repo.tag("v2.13.0", "main")
    repo.pull("[Inductor][XPU] Accept UVA pointers", number=188240, created="2026-06-20", labels=["open source"])
    sha = repo.land(188240, date="2026-07-02", files={"a.py": "2"})
    repo.commit("more", date="2026-07-20")
    repo.tag("v2.14.0", "main")

    facts = learn(server, tmp_path, "pytorch/pytorch#188240", path=path).references[0]

    assert repo.pulls[188240].merged is False and repo.pulls[188240].state == "closed"
    assert (facts.state, facts.commit, str(facts.released_in)) == ("landed", sha, "torch>=2.14.0")
    assert "GitHub shows it closed, not merged" in facts.evidence
    if path == "rest":
        assert server.count(COMPARE) == 2 and server.count() == 5
    else:
        assert graphql_only(server, at_most=3)


def test_landed_then_reverted_pr_is_reverted_and_in_no_release(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", files={"a.py": "1"}, date="2026-06-01")
    repo.pull("[XPU] Risky change", number=190000, created="2026-06-20")
    sha = repo.land(190000, date="2026-07-02", files={"a.py": "2"})
    repo.bot_revert(190000, date="2026-07-03")
    repo.tag("v2.14.0", "main")

    facts = learn(server, tmp_path, "pytorch/pytorch#190000", path=path).references[0]

    assert (facts.state, facts.commit, facts.released_in) == ("reverted", sha, None)
    assert "reverted by commit" in facts.evidence  # the bot's revert commit, referenced before its label
    if path == "rest":
        # The PR, its timeline and the revert commit it references: a reverted change has no release to look for.
        assert server.count() == 3 and server.count(COMMIT) == 1
    else:
        assert graphql_only(server, at_most=1)  # the referenced commit's message comes with the timeline


def test_pr_landed_again_after_a_revert_is_landed_with_the_second_commit(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", files={"a.py": "1"}, date="2026-06-01")
    repo.tag("v2.13.0", "main")
    repo.pull("[XPU] Risky change", number=190000, created="2026-06-20")
    repo.land(190000, date="2026-07-02", files={"a.py": "2"})
    repo.bot_revert(190000, date="2026-07-03")
    second = repo.land(190000, date="2026-07-10", files={"a.py": "3"}, label="mergedX1")
    repo.tag("v2.14.0", "main")

    facts = learn(server, tmp_path, "pytorch/pytorch#190000", path=path).references[0]

    assert (facts.state, facts.commit, str(facts.released_in)) == ("landed", second, "torch>=2.14.0")


def plain_revert(repo: Repo, number: int, date: str) -> str:
    """``git revert`` of a PR's merge commit pushed to main: git's own message, which names the PR
    in its title, so GitHub adds a ``referenced`` event (with the commit) to the PR's timeline."""
    pr = repo.pulls[number]
    sha = repo.commit(f'Revert "{pr.title} (#{number})"\n\nThis reverts commit {pr.merge_commit_sha}.',
                      date=date, files={"reverted.txt": str(number)})
    repo.event(number, "referenced", date, commit_id=sha)
    return sha


def test_merged_pr_reverted_by_a_plain_revert_commit_is_reverted(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    landed = repo.merge(500, date="2026-05-22")
    revert = plain_revert(repo, 500, "2026-05-24")

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert (facts.state, facts.commit, facts.released_in) == ("reverted", landed, None)
    assert f"reverted by commit {revert[:12]}" in facts.evidence
    if path == "rest":
        assert server.count(COMMIT) == 1  # the one commit referenced after the merge
    else:
        assert graphql_only(server, at_most=1)  # the referenced commit's message comes with the timeline


def test_a_referenced_commit_that_is_no_revert_leaves_the_pr_merged_and_costs_one_request_once(server, tmp_path):
    repo = vllm_with_release_branch(server)
    repo.merge(500, date="2026-05-22")
    follow_up = repo.commit("[XPU] Follow-up to #500", date="2026-05-23")
    repo.event(500, "referenced", "2026-05-23", commit_id=follow_up)

    first = learn(server, tmp_path, "vllm-project/vllm#500").references[0]
    server.reset_log()
    again = learn(server, tmp_path, "vllm-project/vllm#500").references[0]

    assert first.state == again.state == "merged"
    assert server.count(COMMIT) == 0  # a commit never changes: its answer is kept for good


def test_pr_relanded_after_a_plain_revert_commit_is_merged_again(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    repo.merge(500, date="2026-05-22")
    plain_revert(repo, 500, "2026-05-24")
    again = repo.commit("[XPU] Fix the thing, again (#500)", date="2026-05-26", files={"again.txt": "1"})
    repo.event(500, "closed", "2026-05-26", commit_id=again)

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert (facts.state, facts.commit) == ("merged", again)


def test_merged_pr_reverted_by_a_revert_pr_is_reverted(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    repo.merge(500, date="2026-05-22")
    revert = repo.pull('Revert "[XPU] Fix the thing (#500)"', number=501, created="2026-05-23")
    repo.cross_reference(500, revert, date="2026-05-23")
    repo.merge(501, date="2026-05-24")

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert (facts.state, facts.released_in) == ("reverted", None)
    assert "vllm-project/vllm#501" in facts.evidence


def test_fix_cherry_picked_into_a_release_branch_is_released_in_that_branch_tag(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    sha = repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    pick = repo.cherry_pick(sha, onto="releases/v0.2.0", date="2026-05-23")
    repo.tag("v0.2.0", "releases/v0.2.0")
    repo.tag("v0.3.0", "main")

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert (facts.state, str(facts.released_in)) == ("merged", "vllm>=0.2.0")
    assert f"cherry-pick {pick[:12]}" in facts.evidence and "v0.3.0 is the first tag containing" in facts.evidence
    if path == "rest":
        assert server.count(COMPARE) == 2  # the compare that says "no" for v0.2.0 also lists its cherry-pick
    else:
        assert graphql_only(server, at_most=3)


def test_cherry_pick_is_found_before_calling_a_fix_unreleased(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    sha = repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    repo.cherry_pick(sha, onto="releases/v0.2.0", date="2026-05-23")
    repo.tag("v0.2.0", "releases/v0.2.0")  # no tag contains the main-branch commit itself

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert str(facts.released_in) == "vllm>=0.2.0"


def test_release_recorded_in_the_manifest_is_checked_first(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    sha = repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    repo.cherry_pick(sha, onto="releases/v0.2.0", date="2026-05-23")
    repo.tag("v0.2.0", "releases/v0.2.0")
    for minor in range(3, 12):
        repo.commit(f"work {minor}", date=f"2026-06-{minor:02d}")
        repo.tag(f"v0.{minor}.0", "main")

    facts = learn(server, tmp_path, "vllm-project/vllm#500", released_in="vllm>=0.2.0", path=path).references[0]

    assert str(facts.released_in) == "vllm>=0.2.0"
    if path == "rest":
        assert server.count(COMPARE) == 1  # v0.2.0 carries the cherry-pick; no earlier tag can have the commit
    else:
        assert graphql_only(server, at_most=3)


def test_merged_fix_in_no_release_yet_is_unreleased(server, tmp_path, path):
    repo = vllm_with_release_branch(server)
    repo.merge(500, date="2026-05-22")
    repo.tag("v0.2.0", "releases/v0.2.0")

    facts = learn(server, tmp_path, "vllm-project/vllm#500", path=path).references[0]

    assert (facts.state, facts.released_in) == ("merged", None)
    assert "no release contains it yet" in facts.evidence
    if path == "rest":
        assert server.count(COMPARE) == 1  # v0.2.0: no, and no cherry-pick in it
    else:
        assert graphql_only(server, at_most=3)


def test_open_pr_is_open(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.pull("[XPU] Device-generic torch.Event", number=189017, created="2026-07-10")

    facts = learn(server, tmp_path, "pytorch/pytorch#189017", path=path).references[0]

    assert (facts.state, facts.commit, facts.released_in) == ("open", None, None)
    if path == "rest":
        assert server.count() == 2
    else:
        assert graphql_only(server, at_most=1)


def test_pr_closed_without_landing_is_closed_unmerged(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.pull("[XPU] Abandoned approach", number=187000, created="2026-06-10")
    repo.close(187000, date="2026-06-15")

    facts = learn(server, tmp_path, "pytorch/pytorch#187000", path=path).references[0]

    assert (facts.state, facts.commit, facts.released_in) == ("closed-unmerged", None, None)
    if path == "rest":
        assert server.count() == 2
    else:
        assert graphql_only(server, at_most=1)


def test_unknown_pr_is_reported_on_its_reference_and_the_others_still_answered(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.pull("[XPU] Open one", number=189017, created="2026-07-10")

    report = learn(server, tmp_path, "pytorch/pytorch#999999", "pytorch/pytorch#189017", path=path)

    missing, other = report.references
    assert (missing.state, missing.released_in) == (None, None)
    assert "404" in missing.error and missing.ref in missing.error
    assert other.state == "open"
    # Not a pull request: asked once more as an issue (REST; 404 too), and no timeline asked for it.
    assert server.count(ISSUE, status=404) == 1 and server.count(TIMELINE) == (1 if path == "rest" else 0)
    if path == "rest":
        assert server.count(PULL, status=404) == 1 and server.count() == 4
    else:
        assert server.count(GRAPHQL) == 1 and server.count() == 2


def test_long_timelines_are_read_page_by_page(server, tmp_path, path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.tag("v2.13.0", "main")
    repo.pull("[XPU] Busy PR", number=191000, created="2026-06-02")
    for n in range(150):  # CI bots label and unlabel a PR many times before it lands
        repo.event(191000, "labeled" if n % 2 == 0 else "unlabeled", label="ciflow/trunk")
    sha = repo.land(191000, date="2026-07-01")
    repo.tag("v2.14.0", "main")

    cold = learn(server, tmp_path, "pytorch/pytorch#191000", path=path).references[0]
    server.reset_log()
    warm = learn(server, tmp_path, "pytorch/pytorch#191000", path=path).references[0]

    assert (cold.state, cold.commit, str(cold.released_in)) == ("landed", sha, "torch>=2.14.0") and warm == cold
    if path == "rest":
        assert server.count(TIMELINE) == 2 and server.count(TIMELINE, status=304) == 2  # per_page=100: two pages
    else:
        assert graphql_only(server, at_most=1)


def test_a_base_url_with_a_path_works_like_github_enterprise(tmp_path):
    with FakeGitHub(prefix="/api/v3") as enterprise:
        repo = enterprise.add_repo("pytorch/pytorch")
        repo.commit("init", date="2026-06-01")
        repo.pull("[XPU] Open", number=189017, created="2026-07-10")
        assert enterprise.base_url.endswith("/api/v3")

        assert learn(enterprise, tmp_path, "pytorch/pytorch#189017").references[0].state == "open"
        enterprise.reset_log()
        assert learn(enterprise, tmp_path, "pytorch/pytorch#189017").references[0].state == "open"
        assert enterprise.count() == enterprise.count(status=304) == 2


# ----------------------------------------------------------------- failures, retries


def seeded_open_pr(server: FakeGitHub) -> None:
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.pull("[XPU] Device-generic torch.Event", number=189017, created="2026-07-10")


def test_rate_limit_403_fails_at_once_with_the_reset_time_instead_of_sleeping(server, tmp_path):
    seeded_open_pr(server)
    server.rate_limit_remaining = 0  # resets in an hour: longer than the bounded wait

    with pytest.raises(GitHubUnavailable) as caught:
        learn(server, tmp_path, "pytorch/pytorch#189017", retries=3, max_wait=30)

    message = str(caught.value)
    assert "rate limit exhausted" in message and "resets at" in message and "\n" not in message
    assert TOKEN not in message
    assert server.count(status=403) == 1 and server.count() == 1


def test_server_error_then_success_is_retried(server, tmp_path):
    seeded_open_pr(server)
    server.fail(PULL, 500, times=1)

    facts = learn(server, tmp_path, "pytorch/pytorch#189017", retries=2, backoff=0).references[0]

    assert facts.state == "open"
    assert server.count(PULL, status=500) == 1 and server.count(PULL, status=200) == 1 and server.count() == 3


def test_server_errors_beyond_the_retries_make_github_unavailable(server, tmp_path):
    seeded_open_pr(server)
    server.fail(PULL, 502, times=5)

    with pytest.raises(GitHubUnavailable, match=r"answered 502: Server Error \(after 2 retries\)"):
        learn(server, tmp_path, "pytorch/pytorch#189017", retries=2, backoff=0)
    assert server.count(PULL, status=502) == 3


def test_retry_after_is_honoured(server, tmp_path):
    seeded_open_pr(server)
    server.fail(PULL, 429, body={"message": "Too many requests"}, headers={"Retry-After": "1"})

    facts = learn(server, tmp_path, "pytorch/pytorch#189017", retries=2, backoff=0).references[0]

    assert facts.state == "open" and server.count(PULL, status=429) == 1 and server.count(PULL) == 2


def test_retry_after_longer_than_the_bound_fails_at_once(server, tmp_path):
    seeded_open_pr(server)
    server.fail(PULL, 429, body={"message": "Too many requests"}, headers={"Retry-After": "3600"})

    with pytest.raises(GitHubUnavailable, match="retry after 3600 s, more than the 30 s"):
        learn(server, tmp_path, "pytorch/pytorch#189017", retries=2, max_wait=30)
    assert server.count() == 1


def test_timeout_makes_github_unavailable(server, tmp_path):
    seeded_open_pr(server)
    server.stall(PULL, 30)

    with pytest.raises(GitHubUnavailable, match="did not answer within 1 s"):
        learn(server, tmp_path, "pytorch/pytorch#189017", timeout=1)
    server.settle()
    assert server.count() == 1


def test_unreachable_server_makes_github_unavailable(tmp_path):
    with FakeGitHub() as gone:
        base_url = gone.base_url  # a loopback port nobody listens on any more
    client = ClientSettings(token=TOKEN, base_url=base_url, retries=0)

    with pytest.raises(GitHubUnavailable, match="cannot connect to GitHub at 127.0.0.1"):
        upstream.track(manifest_for(tmp_path, "pytorch/pytorch#1"), mode="refresh", client=client,
                       cache_dir=tmp_path / "cache")


def test_error_messages_never_carry_the_token(server, tmp_path):
    seeded_open_pr(server)
    server.fail(PULL, 403, body={"message": f"token {TOKEN} lacks SSO authorization"})

    with pytest.raises(GitHubUnavailable) as caught:
        learn(server, tmp_path, "pytorch/pytorch#189017")
    assert "403" in str(caught.value) and TOKEN not in str(caught.value)


def test_a_short_token_echoed_by_a_server_is_never_shown_either(server, tmp_path):
    seeded_open_pr(server)
    server.fail(PULL, 403, body={"message": "token s3cr3t7 lacks SSO authorization"})

    with pytest.raises(GitHubUnavailable) as caught:
        learn(server, tmp_path, "pytorch/pytorch#189017", token="s3cr3t7")
    assert "403" in str(caught.value) and "s3cr3t7" not in str(caught.value)


# ------------------------------------------------------------------------ the client


def test_token_comes_from_xpu_workarounds_github_token_before_github_token(server):
    env = {"XPU_WORKAROUNDS_GITHUB_TOKEN": "ours", "GITHUB_TOKEN": "actions", "GITHUB_API_URL": server.base_url + "/"}
    chosen = ClientSettings.from_env(env)
    assert (chosen.token, chosen.base_url) == ("ours", server.base_url)
    assert ClientSettings.from_env({"XPU_WORKAROUNDS_GITHUB_TOKEN": " ", "GITHUB_TOKEN": "actions"}).token == "actions"
    assert ClientSettings.from_env({}).base_url == "https://api.github.com"
    assert TOKEN not in repr(ClientSettings(token=TOKEN))


def test_requests_carry_the_chosen_token(server, tmp_path):
    seeded_open_pr(server)
    learn(server, tmp_path, "pytorch/pytorch#189017")
    assert {hit.token for hit in server.log} == {TOKEN}


# ------------------------------------------------------------ the shipped manifest

SEEDED_HISTORY = "tests/support/upstream_history.py"
HOW_TO_SEED = ("seed the pull request or issue in its repository's seed_* (VLLM_PULLS for vLLM; seed_torch and "
               "TORCH_ISSUES; seed_kernels; INTEL_ISSUES, TRITON_PULLS and TRITON_ISSUES) with its real dates, "
               "and write what `upstream` must report for it, (state, released_in), in EXPECTED")


def test_every_reference_of_the_shipped_manifest_is_in_the_seeded_history(github, tmp_path):
    # So that the history does not rot: a reference added to the shipped manifest is seeded too.
    # Removing an entry keeps this true; the facts are the history's own.
    shipped = reader.load()
    unknown = sorted(upstream_history.references(shipped) - set(upstream_history.EXPECTED))
    assert not unknown, (f"{', '.join(unknown)}: not in the stand-in GitHub's seeded history. Add each to "
                         f"{SEEDED_HISTORY}: {HOW_TO_SEED}")
    result = run(github, tmp_path, "--json", "--refresh", manifest=reader.default_path())

    failed = [line for line in result.stderr.splitlines() if "warning" in line or "error" in line]
    assert result.exit_code == 0, (f"upstream --refresh failed on the stand-in GitHub's seeded history: {failed[:3]}. In "
                                   f"{SEEDED_HISTORY}: {HOW_TO_SEED}")
    found = {item["ref"]: (item["state"], item["released_in"]) for item in json.loads(result.stdout)["references"]}
    assert set(found) == upstream_history.references(shipped)
    wrong = [f"{ref}: upstream says {found[ref]}, EXPECTED says {upstream_history.EXPECTED[ref]}"
             for ref in sorted(found) if found[ref] != upstream_history.EXPECTED[ref]]
    assert not wrong, f"{'; '.join(wrong)}. In {SEEDED_HISTORY}: {HOW_TO_SEED}"
    assert github.count("/graphql") <= 6  # a cold refresh of the shipped manifest in at most 6 requests
