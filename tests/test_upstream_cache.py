"""The upstream cache: conditional revalidation (304s cost no rate limit), offline answers,
no errors and no token stored, and a failed refresh leaves the cache as it was."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import hypothesis
import pytest
from support.fakegithub import FakeGitHub
from test_upstream import (
    COMPARE,
    PULL,
    TIMELINE,
    TOKEN,
    learn,
    manifest_for,
    settings,
    vllm_with_release_branch,
)

from tracker import upstream
from tracker.commands.upstream_text import render
from tracker.upstream.errors import GitHubUnavailable

REF = "vllm-project/vllm#500"


def released_fix(server: FakeGitHub) -> None:
    repo = vllm_with_release_branch(server)
    repo.merge(500, date="2026-05-22", files={"fix.py": "fixed"})
    repo.tag("v0.2.0", "releases/v0.2.0")
    repo.tag("v0.3.0", "main")


def cache_file(tmp_path):
    (found,) = (tmp_path / "cache").glob("upstream-*.json")
    return found


def test_second_refresh_with_nothing_changed_makes_only_conditional_requests(server, tmp_path):
    released_fix(server)
    cold = learn(server, tmp_path, REF)
    server.reset_log()
    remaining = server.rate_limit_remaining

    warm = learn(server, tmp_path, REF)

    assert [f.as_json() for f in warm.references] == [f.as_json() for f in cold.references]
    assert server.count() == server.count(status=304, conditional=True) == 3  # PR, timeline, tags
    assert server.count(COMPARE) == 0  # a compare between two fixed commits is never asked again
    assert server.rate_limit_remaining == remaining


def test_refresh_sees_a_change_and_revalidates_the_rest(server, tmp_path):
    server.add_repo("pytorch/pytorch").commit("init", date="2026-06-01")
    repo = server.repo("pytorch/pytorch")
    repo.pull("[XPU] Fix", number=1000, created="2026-06-02")
    repo.tag("v2.13.0", "main")
    assert learn(server, tmp_path, "pytorch/pytorch#1000").references[0].state == "open"
    repo.land(1000, date="2026-06-10")
    repo.tag("v2.14.0", "main")
    server.reset_log()

    facts = learn(server, tmp_path, "pytorch/pytorch#1000").references[0]

    assert (facts.state, str(facts.released_in)) == ("landed", "torch>=2.14.0")
    assert server.count(PULL, status=200, conditional=True) == 1 and server.count(TIMELINE, status=200) == 1


def test_offline_answers_from_the_cache_and_says_how_old_it_is(server, tmp_path):
    released_fix(server)
    live = learn(server, tmp_path, REF)
    server.reset_log()

    offline = learn(server, tmp_path, REF, mode="offline")

    assert offline.source == "cache" and offline.checked_at == live.checked_at
    later = live.checked_at + timedelta(seconds=90)
    assert offline.as_json(at=later)["cache_age_seconds"] == 90
    assert offline.as_json(at=live.checked_at - timedelta(seconds=5))["cache_age_seconds"] == 0  # a clock behind
    assert [f.as_json() for f in offline.references] == [f.as_json() for f in live.references]
    assert "from the cache, checked" in render(offline)
    assert server.count() == 0


def test_offline_without_a_cache_is_refused(server, tmp_path):
    with pytest.raises(upstream.NoUsableCache, match="no cached upstream facts"):
        learn(server, tmp_path, REF, mode="offline")
    assert server.count() == 0


def test_normal_run_reuses_recent_answers_without_asking(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF)
    server.reset_log()

    report = learn(server, tmp_path, REF, mode="normal")

    assert report.source == "cache" and server.count() == 0


def test_failed_refresh_leaves_the_cache_as_it_was(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF)
    before = cache_file(tmp_path).read_bytes()
    server.fail(TIMELINE, 503)

    with pytest.raises(GitHubUnavailable, match="503"):
        learn(server, tmp_path, REF)

    assert cache_file(tmp_path).read_bytes() == before


def test_normal_run_falls_back_to_the_cache_when_github_is_unavailable(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF)
    server.fail(PULL, 500)

    stored = json.loads(cache_file(tmp_path).read_text())
    an_hour_later = datetime.fromisoformat(stored["checked_at"].replace("Z", "+00:00")) + 2 * upstream.MAX_AGE

    report = upstream.track(manifest_for(tmp_path, REF), mode="normal", client=settings(server),
                            cache_dir=tmp_path / "cache", now=an_hour_later, graphql=False)

    assert report.source == "cache" and report.references[0].state == "merged"
    assert "answered 500" in report.warning and "answering from the cache" in report.warning


def test_errors_are_never_cached(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF, "vllm-project/vllm#404404")

    offline = learn(server, tmp_path, REF, "vllm-project/vllm#404404", mode="offline")

    assert offline.references[0].state == "merged"
    assert offline.references[1].state is None and "not in the cache" in offline.references[1].error
    assert "404404" not in cache_file(tmp_path).read_text()


def test_cache_holds_validators_but_never_the_token(server, tmp_path):
    released_fix(server)
    learn(server, tmp_path, REF)
    text = cache_file(tmp_path).read_text()
    assert TOKEN not in text and "authorization" not in text.lower()
    assert '"etag"' in text


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(hypothesis.strategies.text(alphabet="<>;=,' \"abc/:?&rel=nextpage0123", max_size=80))
def test_the_cache_reads_a_link_header_as_the_client_does(value):
    """Offline, the pages of a cached list are followed by ``tracker.upstream.paging`` (no
    requests in a base install); live, the client's requests parsed the same header."""
    import requests

    from tracker.upstream.paging import header_links

    assert header_links(value) == requests.utils.parse_header_links(value)
