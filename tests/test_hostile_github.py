"""Answers that are not GitHub's REST API (issue 10, item 6), over real HTTP with the real
PyGithub: the stand-in server answers every route with a wrong shape (``FakeGitHub.misanswer``:
HTML as ``GITHUB_API_URL=https://github.com`` gives, an empty body, a JSON list of numbers,
null, a string, malformed JSON, a redirect to another host, a next page on another host).

``upstream`` (over GraphQL and over REST) and ``retire --open-prs`` each say one line and exit
4, with no traceback, no token, and nothing written: no cache, no manifest change, no write
request to GitHub.
"""

from __future__ import annotations

import shutil

import pytest
from support.fakegithub import NEXT_ELSEWHERE, WRONG_SHAPES, FakeGitHub
from support.fakegithub_git import install, writes
from test_retire_github import REPOSITORY, Scenario, cli
from test_upstream_cli import TOKEN, run

from tracker.model import reader

SHAPES = [*WRONG_SHAPES, NEXT_ELSEWHERE]
ASK = "is GITHUB_API_URL the REST API?"


def one_line_exit_4(result, secret: str) -> str:
    output = result.output
    assert result.exit_code == 4, output
    assert "Traceback" not in output and secret not in output
    lines = output.splitlines()
    assert len(lines) == 1, output
    return lines[0]


@pytest.mark.parametrize("api", ["graphql", "rest"])
@pytest.mark.parametrize("shape", SHAPES)
def test_upstream_says_one_line_and_writes_nothing(github, tmp_path, shape, api):
    manifest = tmp_path / "workarounds.toml"
    shutil.copyfile(reader.default_path(), manifest)
    before = manifest.read_bytes()
    cache = tmp_path / "cache"
    github.misanswer(shape)

    result = run(github, cache, "--refresh", "--write", manifest=manifest, api=api)

    line = one_line_exit_4(result, TOKEN)
    assert line.endswith(f"{ASK}; the cache is left as it was"), line
    status = WRONG_SHAPES[shape][0] if shape in WRONG_SHAPES else 200
    assert f"answered {status}" in line
    assert manifest.read_bytes() == before
    assert not cache.exists() or not any(cache.iterdir())


# A warm refresh over GraphQL is one query; over REST, one conditional request per answer kept
# (304s: a next page named on a 304 is never followed, the stored answer's own links are).
@pytest.mark.parametrize(("api", "after"), [("graphql", 0), ("rest", 5)])
@pytest.mark.parametrize("shape", ["html", "list", "malformed", "redirect-302"])
def test_a_wrong_answer_in_a_refresh_over_a_cache_keeps_the_cache_as_it_was(github, tmp_path, shape, api, after):
    cache = tmp_path / "cache"
    assert run(github, cache, "--refresh", api=api).exit_code == 0
    kept = {path.name: path.read_bytes() for path in cache.iterdir()}
    github.misanswer(shape, after=after)  # the first answers are right, then GitHub is not GitHub

    result = run(github, cache, "--refresh", api=api)

    assert ASK in one_line_exit_4(result, TOKEN)
    assert {path.name: path.read_bytes() for path in cache.iterdir()} == kept


@pytest.fixture
def scenario():
    with FakeGitHub() as server:
        install(server)
        yield Scenario(server)


@pytest.mark.parametrize("shape", SHAPES)
def test_retire_says_one_line_and_sends_no_write(scenario, shape):
    scenario.seed_upstream()
    scenario.server.misanswer(shape)

    result = cli(scenario, "--repo", REPOSITORY)

    line = one_line_exit_4(result, "ghs_stand-in-token-for-tests")
    assert line.startswith(f"xpu-workarounds: error: {REPOSITORY}: GitHub at 127.0.0.1:"), line
    assert line.endswith(ASK)
    assert writes(scenario.server) == 0
    assert not scenario.repo.pulls


@pytest.mark.parametrize("shape", ["html", "null", "redirect-307", NEXT_ELSEWHERE])
def test_retire_meeting_a_wrong_answer_on_the_way_names_each_step_it_could_not_take(scenario, shape):
    scenario.seed_upstream()
    scenario.server.misanswer(shape, after=12)  # the refresh and the base branch read, then not GitHub

    result = cli(scenario, "--repo", REPOSITORY)

    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    assert all(ASK in line for line in result.output.splitlines() if "GitHub at" in line), result.output
    assert any(ASK in line for line in result.output.splitlines()), result.output
