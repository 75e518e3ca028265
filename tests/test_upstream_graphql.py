"""Upstream facts through GitHub's GraphQL API (tracker/upstream/graphql.py, prefetch.py):
the same facts as REST in a few batched queries, REST as the fallback, the cache's rules
kept; and the stand-in's GraphQL endpoint (tests/support/fakegithub_graphql.py) keeping GitHub's
limits. The scenarios shared with REST are parametrized in test_upstream.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import requests
from support import upstream_history
from support.fakegithub import FakeGitHub
from support.fakegithub_graphql import graphql as switches
from support.repository import FROZEN_MANIFEST, write_frozen_modules
from test_upstream import COMPARE, GRAPHQL, PULL, TOKEN, learn, manifest_for, settings, vllm_with_release_branch

from benchmarks import scale_manifest
from benchmarks.bench_upstream import seed_generated
from tracker import upstream
from tracker.model import reader
from tracker.upstream.errors import GitHubUnavailable
from tracker.upstream.graphql import graphql_url
from tracker.upstream.settings import ClientSettings

REF = "vllm-project/vllm#500"


def post(server: FakeGitHub, query: str) -> dict:
    answer = requests.post(server.base_url + "/graphql", json={"query": query},
                           headers={"Authorization": f"bearer {TOKEN}"}, timeout=10)
    assert answer.status_code == 200
    return answer.json()


def released_fix(server: FakeGitHub) -> str:
    repo = vllm_with_release_branch(server)
    sha = repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    repo.tag("v0.2.0", "releases/v0.2.0")
    repo.tag("v0.3.0", "main")
    return sha


def both_ways(server: FakeGitHub, manifest, scratch: Path, **client) -> tuple[upstream.Report, int, upstream.Report, int]:
    """The same refresh over REST, then over GraphQL (each cold), with the requests each made."""
    server.reset_log()
    rest = upstream.track(manifest, mode="refresh", client=settings(server, **client), cache_dir=scratch / "rest",
                          graphql=False)
    rest_requests = server.count()
    server.reset_log()
    batched = upstream.track(manifest, mode="refresh", client=settings(server, **client),
                             cache_dir=scratch / "graphql", graphql=True)
    return rest, rest_requests, batched, server.count()


def facts(report: upstream.Report) -> dict:
    document = report.as_json()
    return {"references": document["references"], "inline_audit": document["inline_audit"]}


# ------------------------------------------------------------------ the stand-in


def test_stand_in_costs_a_query_the_way_github_documents(server):
    server.add_repo("a/b").commit("init")
    # refs: 1 request; history under 100 refs: 100; parents under 100 x 100 commits: 10,000 -> 101 points.
    query = ("query { rateLimit { cost remaining } repository(owner: \"a\", name: \"b\") { "
             "refs(refPrefix: \"refs/heads/\", first: 100) { nodes { target { ... on Commit { "
             "history(first: 100) { nodes { parents(first: 40) { totalCount } } } } } } } } }")

    answer = post(server, query)

    assert answer["data"]["rateLimit"] == {"cost": 101, "remaining": 5000 - 101}
    assert switches(server).costs == [101]


def test_stand_in_refuses_more_than_500000_nodes_and_charges_nothing(server):
    server.add_repo("a/b").commit("init")
    query = ("query { repository(owner: \"a\", name: \"b\") { refs(refPrefix: \"refs/heads/\", first: 100) { "
             "nodes { target { ... on Commit { history(first: 100) { nodes { parents(first: 51) { totalCount } "
             "} } } } } } } }")

    answer = post(server, query)

    assert answer["errors"][0]["type"] == "MAX_NODE_LIMIT_EXCEEDED" and "data" not in answer
    assert switches(server).remaining == 5000


@pytest.mark.parametrize(("page", "kind"), [("", "MISSING_PAGINATION_BOUNDARIES"),
                                            ("(first: 101)", "EXCESSIVE_PAGINATION")])
def test_stand_in_wants_first_or_last_of_1_to_100_on_every_connection(server, page, kind):
    server.add_repo("a/b").commit("init")
    query = f"query {{ repository(owner: \"a\", name: \"b\") {{ pullRequest(number: 1) {{ labels{page} {{ totalCount }} }} }} }}"
    assert post(server, query)["errors"][0]["type"] == kind


def test_stand_in_rejects_fields_github_does_not_have(server):
    server.add_repo("a/b").commit("init")
    answer = post(server, "query { repository(owner: \"a\", name: \"b\") { pullRequest(number: 1) { mergeSha } } }")
    assert "Cannot query field 'mergeSha'" in answer["errors"][0]["message"]


def test_stand_in_answers_graphql_from_the_same_data_as_rest(server):
    sha = released_fix(server)
    query = ("query { repository(owner: \"vllm-project\", name: \"vllm\") { pullRequest(number: 500) { state merged "
             "mergeCommit { oid } } ref(qualifiedName: \"refs/tags/v0.2.0\") { compare(headRef: \"" + sha + "\") { "
             "status behindBy } } } }")

    data = post(server, query)["data"]["repository"]
    rest = requests.get(f"{server.base_url}/repos/vllm-project/vllm/compare/{sha}...v0.2.0", timeout=10).json()

    assert data["pullRequest"] == {"state": "MERGED", "merged": True, "mergeCommit": {"oid": sha}}
    # The tag (cut before the merge) is behind the commit in REST's order, the commit ahead of it in GraphQL's.
    assert (data["ref"]["compare"]["status"], rest["status"]) == ("AHEAD", "behind")
    assert data["ref"]["compare"]["behindBy"] == rest["ahead_by"]


# ------------------------------------------------------------------------ the client


def test_graphql_url_follows_the_rest_base_url():
    assert graphql_url(ClientSettings(base_url="https://api.github.com")) == "https://api.github.com/graphql"
    assert graphql_url(ClientSettings(base_url="https://ghe.example.com/api/v3")) == "https://ghe.example.com/api/graphql"


def test_github_enterprise_is_asked_at_api_graphql(tmp_path):
    with FakeGitHub(prefix="/api/v3") as enterprise:
        released_fix(enterprise)

        facts_ = learn(enterprise, tmp_path, REF, path="graphql").references[0]

        assert (facts_.state, str(facts_.released_in)) == ("merged", "vllm>=0.3.0")
        assert enterprise.count() == enterprise.count("/api/graphql") > 0


def test_graphql_requests_carry_the_token_and_answers_cost_points_not_requests(server, tmp_path):
    released_fix(server)
    remaining = server.rate_limit_remaining

    report = learn(server, tmp_path, REF, path="graphql")

    assert {hit.token for hit in server.log} == {TOKEN}
    assert server.rate_limit_remaining == remaining  # the REST budget is untouched
    assert report.graphql is not None and report.graphql.points == sum(switches(server).costs) > 0
    assert report.graphql.queries == server.count(GRAPHQL)


@pytest.mark.parametrize(("mode", "said"), [("absent", "answered 404"), ("forbidden", "answered 403"),
                                            ("scope-errors", "INSUFFICIENT_SCOPES")])
def test_without_graphql_rest_learns_the_same_facts(server, tmp_path, mode, said):
    released_fix(server)
    (tmp_path / "rest").mkdir(), (tmp_path / "graphql").mkdir()
    rest = learn(server, tmp_path / "rest", REF)
    switches(server).mode = mode
    server.reset_log()

    fallen_back = learn(server, tmp_path / "graphql", REF, path="graphql")

    assert facts(fallen_back) == facts(rest)
    assert fallen_back.graphql is not None and said in fallen_back.graphql.refused
    assert server.count(GRAPHQL) == 1 and server.count(PULL) == 1  # one refusal, then REST for everything


def test_graphql_points_exhausted_means_rest_answers(server, tmp_path):
    released_fix(server)
    switches(server).remaining = 0

    report = learn(server, tmp_path, REF, path="graphql")

    assert (report.references[0].state, str(report.references[0].released_in)) == ("merged", "vllm>=0.3.0")
    assert "RATE_LIMITED" in report.graphql.refused and server.count(PULL) == 1


def test_a_graphql_outage_is_github_unavailable_and_leaves_the_cache(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF, path="graphql")
    (stored,) = (tmp_path / "cache").glob("upstream-*.json")
    before = stored.read_bytes()
    server.fail(GRAPHQL, 502)

    with pytest.raises(GitHubUnavailable, match="answered 502") as caught:
        learn(server, tmp_path, REF, path="graphql")

    assert TOKEN not in str(caught.value) and stored.read_bytes() == before


def test_a_timeline_longer_than_a_page_is_read_page_by_page(server, tmp_path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.tag("v2.13.0", "main")
    repo.pull("[XPU] Busy PR", number=191000, created="2026-06-02")
    for n in range(150):  # relevant items (label events) past GraphQL's page of 100
        repo.event(191000, "labeled", label=f"ciflow/trunk/{n}")
    sha = repo.land(191000, date="2026-07-01")
    repo.tag("v2.14.0", "main")

    rest, _, batched, requests_made = both_ways(server, manifest_for(tmp_path, "pytorch/pytorch#191000"), tmp_path)

    assert (batched.references[0].state, batched.references[0].commit) == ("landed", sha)
    assert facts(batched) == facts(rest)
    assert requests_made == server.count(GRAPHQL) <= 4  # the second timeline page costs one more query


def test_a_pr_with_more_labels_than_a_page_is_left_to_rest(server, tmp_path):
    repo = server.add_repo("pytorch/pytorch")
    repo.commit("init", date="2026-06-01")
    repo.pull("[XPU] Labelled PR", number=192000, created="2026-06-02", labels=[f"l{n}" for n in range(120)])
    repo.land(192000, date="2026-07-01")
    repo.bot_revert(192000, date="2026-07-02")  # "reverted" is the 123rd label

    rest, _, batched, _ = both_ways(server, manifest_for(tmp_path, "pytorch/pytorch#192000"), tmp_path)

    assert facts(batched) == facts(rest) and batched.references[0].state == "reverted"
    assert server.count(PULL) == 1 and batched.graphql.left_to_rest == 1


def test_a_merge_commit_among_the_tag_only_commits_is_left_to_rest(server, tmp_path):
    """GraphQL gives the tag's newest commits; they are exactly REST's compare list only
    without a merge among them, so such a compare is asked through REST."""
    repo = vllm_with_release_branch(server)
    sha = repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    side = repo.commit("side work", branch="side", parents=[repo.branches["releases/v0.2.0"]], date="2026-05-23")
    repo.commit("Merge side", branch="releases/v0.2.0", parents=[repo.branches["releases/v0.2.0"], side],
                date="2026-05-24")
    repo.cherry_pick(sha, onto="releases/v0.2.0", date="2026-05-25")
    repo.tag("v0.2.0", "releases/v0.2.0")
    repo.tag("v0.3.0", "main")

    rest, _, batched, _ = both_ways(server, manifest_for(tmp_path, REF), tmp_path)

    assert facts(batched) == facts(rest) and str(batched.references[0].released_in) == "vllm>=0.2.0"
    assert server.count(COMPARE) >= 1 and batched.graphql.left_to_rest >= 1


# --------------------------------------------------------------------------- the cache


def test_offline_after_a_graphql_refresh_answers_the_same_without_a_request(server, tmp_path):
    released_fix(server)
    live = learn(server, tmp_path, REF, "vllm-project/vllm#404404", path="graphql")
    server.reset_log()

    offline = learn(server, tmp_path, REF, "vllm-project/vllm#404404", mode="offline")

    assert facts(offline)["references"][0] == facts(live)["references"][0] and server.count() == 0
    assert "not in the cache" in offline.references[1].error  # the 404 was not cached
    (stored,) = (tmp_path / "cache").glob("upstream-*.json")
    assert "404404" not in stored.read_text() and TOKEN not in stored.read_text()


def test_a_normal_run_within_the_hour_asks_nothing(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF, path="graphql")
    server.reset_log()

    report = learn(server, tmp_path, REF, mode="normal", path="graphql")

    assert report.source == "cache" and server.count() == 0


def test_a_rest_cache_is_used_by_a_graphql_refresh_and_compares_are_not_asked_again(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF)  # REST fills the cache
    server.reset_log()

    report = learn(server, tmp_path, REF, path="graphql")

    assert str(report.references[0].released_in) == "vllm>=0.3.0"
    assert server.count() == server.count(GRAPHQL) == 1  # the PR, its timeline, the tags; no compare


# ----------------------------------------------------------------- the same facts


def test_both_ways_give_the_same_facts_on_the_frozen_manifest(tmp_path):
    with FakeGitHub() as server:
        upstream_history.seed(server)

        rest, rest_requests, batched, requests_made = both_ways(server, reader.load(FROZEN_MANIFEST), tmp_path)

    assert facts(batched) == facts(rest)
    learned = {f.ref: (f.state, str(f.released_in) if f.released_in else None) for f in batched.references}
    assert learned == {ref: upstream_history.EXPECTED[ref] for ref in learned}
    assert set(learned) == upstream_history.references(reader.load(FROZEN_MANIFEST))
    assert requests_made <= 6 < rest_requests  # a cold refresh of the shipped manifest in at most 6 requests
    assert batched.graphql.left_to_rest == 0 and batched.graphql.refused is None


def test_both_ways_give_the_same_facts_on_the_500_workaround_scale_manifest():
    """GraphQL refreshes all 500 workarounds' references in a few batched requests; REST, a request
    or more per reference, refreshes the first 100 workarounds' (the comparison, at a fifth of the
    cost): every reference both learned is the same fact either way."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-test-scale-") as scratch:
        # Copies of the frozen manifest's entries and modules (which workarounds ship is not the point).
        frozen_modules = Path(scratch) / "frozen"
        (frozen_modules / "workarounds").mkdir(parents=True)
        write_frozen_modules(frozen_modules / "workarounds")
        manifest = reader.load(scale_manifest.generate(Path(scratch) / "scale.toml", template=FROZEN_MANIFEST,
                                                       modules=frozen_modules))
        first = manifest._replace(workarounds=manifest.workarounds[:100],
                                  by_id={w.id: w for w in manifest.workarounds[:100]})
        saved = dict(upstream.REPOSITORY_COMPONENTS)
        with FakeGitHub() as server:
            upstream.REPOSITORY_COMPONENTS.update(seed_generated(server, manifest))
            server.rate_limit = server.rate_limit_remaining = 10**6
            try:
                rest = upstream.track(first, mode="refresh", client=settings(server), cache_dir=Path(scratch) / "rest",
                                      graphql=False)
                server.reset_log()
                batched = upstream.track(manifest, mode="refresh", client=settings(server),
                                         cache_dir=Path(scratch) / "graphql", graphql=True)
                requests_made = server.count()
            finally:
                upstream.REPOSITORY_COMPONENTS.clear()
                upstream.REPOSITORY_COMPONENTS.update(saved)

    by_rest = {one["ref"]: one for one in facts(rest)["references"]}
    assert len(by_rest) > 200
    assert [one for one in facts(batched)["references"] if one["ref"] in by_rest] == list(by_rest.values())
    assert len(batched.references) > 1000
    assert requests_made <= 60  # at scale: at most 60 requests for the 1,086 references
