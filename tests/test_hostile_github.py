"""Answers that are not GitHub's REST API, over real HTTP with the real
PyGithub: the stand-in server answers every route with a wrong shape (``FakeGitHub.misanswer``:
HTML as ``GITHUB_API_URL=https://github.com`` gives, an empty body, a JSON list of numbers,
null, a string, malformed JSON, a redirect to another host, a next page on another host).

``upstream`` (over GraphQL and over REST) and ``retire --open-prs`` each say one line and exit
4, with no traceback, no token, and nothing written: no cache, no manifest change, no write
request to GitHub.

Then answers of the right shape with one field of the wrong type inside
(``FakeGitHub.corrupt``): a boolean that is a string, a sha that is a number, a state
outside GitHub's vocabulary, a header that is not a number. Each is exit 4 with one line, never
a fact: a table of such fields per route, and a fuzzer that gives any field of any answer a
value of another type (exit 0 only with the facts of the uncorrupted run).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import upstream_history
from support.fakegithub import NEXT_ELSEWHERE, WRONG_SHAPES, FakeGitHub
from support.fakegithub_git import install, writes
from support.repository import FROZEN_MANIFEST
from test_retire_github import REPOSITORY, Scenario, cli
from test_upstream_cli import TOKEN, run

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
    shutil.copyfile(FROZEN_MANIFEST, manifest)
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
def scenario(tmp_path):
    with FakeGitHub() as server:
        install(server)
        yield Scenario(server, tmp_path / "cache")


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


# ------------------------------------------------------------ a field of the wrong type

PULL = "/repos/<owner>/<repo>/pulls/<int:number>"
TIMELINE = "/repos/<owner>/<repo>/issues/<int:number>/timeline"
ISSUE = "/repos/<owner>/<repo>/issues/<int:number>"
TAGS = "/repos/<owner>/<repo>/git/matching-refs/<path:ref>"
COMPARE = "/repos/<owner>/<repo>/compare/<path:basehead>"
CONTENTS = "/repos/<owner>/<repo>/contents/<path:path>"
GRAPHQL = "/graphql"
HEADER = "header"  # the path of a header corruption: ``value`` is (name, text)
NOT_A_SHA = "HEAD~1"

# (route, field, wrong value) read over REST (``XPU_WORKAROUNDS_GITHUB_API=rest``).
REST_FIELDS = [
    (PULL, "merged", "false"), (PULL, "merged", None), (PULL, "state", 1), (PULL, "state", "sideways"),
    (PULL, "merge_commit_sha", 12345), (PULL, "merge_commit_sha", NOT_A_SHA), (PULL, "merged_at", 20260702),
    (PULL, "created_at", "yesterday"), (PULL, "closed_at", ["2026-07-02"]), (PULL, "labels", "merged"),
    (PULL, "labels", ["merged"]), (PULL, "labels.*.name", 5),
    (TIMELINE, "*.event", 5), (TIMELINE, "*.commit_id", 5), (TIMELINE, "*.commit_id", NOT_A_SHA),
    (TIMELINE, "*.created_at", 5), (TIMELINE, "*.actor", "pytorchmergebot"), (TIMELINE, "*.actor.login", 5),
    (TIMELINE, "*.label", "reverted"), (TIMELINE, "*.label.name", 5), (TIMELINE, "*.source", "x"),
    (TIMELINE, "*.source.issue", 5), (TIMELINE, "*.source.issue.title", 5),
    (TIMELINE, "*.source.issue.pull_request", "x"), (TIMELINE, "*.source.issue.pull_request.merged_at", 5),
    (TIMELINE, "*.commit_url", 5),
    (ISSUE, "state", 5), (ISSUE, "state", "resolved"), (ISSUE, "state_reason", 5), (ISSUE, "number", "5"),
    (ISSUE, "closed_at", 5),
    (TAGS, "*.ref", 5), (TAGS, "*.object", "x"), (TAGS, "*.object.sha", 5), (TAGS, "*.object.sha", "v2.14.0"),
    (COMPARE, "status", 5), (COMPARE, "status", "sideways"), (COMPARE, "commits", "x"),
    (COMPARE, "commits.*.commit", "x"), (COMPARE, "commits.*.commit.message", 5), (COMPARE, "commits.*.sha", 5),
    (CONTENTS, "content", 5), (CONTENTS, "content", "%% not base64 %%"), (CONTENTS, "encoding", 5),
    (None, HEADER, ("X-RateLimit-Reset", "soon")), (None, HEADER, ("X-RateLimit-Remaining", "plenty")),
]

_PR = "data.*.*"  # every pull request, tag list, compare, file or commit asked in a query
_ITEM = f"{_PR}.timelineItems.nodes.*"
_TAG = f"{_PR}.nodes.*"
# (route, field, wrong value) read over GraphQL (the default); REST is asked only for what GraphQL
# cannot say exactly, never for what it said wrongly.
GRAPHQL_FIELDS = [
    (GRAPHQL, "+errors", "boom"), (GRAPHQL, "+errors", [5]), (GRAPHQL, "+errors", [{"type": 5, "message": "x"}]),
    (GRAPHQL, "+errors", [{"type": "NOT_FOUND", "path": "r0.a0", "message": "x"}]),
    (GRAPHQL, "data", [1]), (GRAPHQL, "data.r0", 5), (GRAPHQL, "data.rateLimit", "x"),
    (GRAPHQL, "data.rateLimit.cost", "1"),
    (GRAPHQL, f"{_PR}.merged", "false"), (GRAPHQL, f"{_PR}.state", 5), (GRAPHQL, f"{_PR}.state", "SIDEWAYS"),
    (GRAPHQL, f"{_PR}.mergeCommit", "x"), (GRAPHQL, f"{_PR}.mergeCommit.oid", 5), (GRAPHQL, f"{_PR}.mergedAt", 5),
    (GRAPHQL, f"{_PR}.createdAt", 5), (GRAPHQL, f"{_PR}.labels", "x"), (GRAPHQL, f"{_PR}.labels.nodes", "x"),
    (GRAPHQL, f"{_PR}.labels.nodes.*.name", 5), (GRAPHQL, f"{_PR}.labels.pageInfo.hasNextPage", "false"),
    (GRAPHQL, f"{_PR}.timelineItems", "x"), (GRAPHQL, f"{_PR}.timelineItems.pageInfo.hasNextPage", "yes"),
    (GRAPHQL, f"{_ITEM}.__typename", 5), (GRAPHQL, f"{_ITEM}.createdAt", 5), (GRAPHQL, f"{_ITEM}.actor", "x"),
    (GRAPHQL, f"{_ITEM}.commit", "x"), (GRAPHQL, f"{_ITEM}.commit.oid", 5), (GRAPHQL, f"{_ITEM}.commit.oid", NOT_A_SHA),
    (GRAPHQL, f"{_ITEM}.commit.message", 5), (GRAPHQL, f"{_ITEM}.closer", "x"), (GRAPHQL, f"{_ITEM}.closer.oid", 5),
    (GRAPHQL, f"{_ITEM}.label.name", 5), (GRAPHQL, f"{_ITEM}.source", "x"), (GRAPHQL, f"{_ITEM}.source.title", 5),
    (GRAPHQL, f"{_ITEM}.source.mergedAt", 5),
    (GRAPHQL, f"{_TAG}.name", 5), (GRAPHQL, f"{_TAG}.target", "x"), (GRAPHQL, f"{_TAG}.target.oid", 5),
    (GRAPHQL, f"{_TAG}.target.committedDate", 5), (GRAPHQL, f"{_PR}.pageInfo.hasNextPage", "no"),
    (GRAPHQL, f"{_PR}.compare.status", 5), (GRAPHQL, f"{_PR}.compare.status", "SIDEWAYS"),
    (GRAPHQL, f"{_PR}.compare.behindBy", "3"),
    (GRAPHQL, f"{_PR}.target.history.nodes.*.oid", 5), (GRAPHQL, f"{_PR}.target.history.nodes.*.message", 5),
    (GRAPHQL, f"{_PR}.target.history.nodes.*.parents.totalCount", "1"),
    (GRAPHQL, f"{_PR}.text", 5),
    (GRAPHQL, HEADER, ("X-RateLimit-Reset", "soon")),
]


def _field_id(case) -> str:
    route, path, value = case
    name = (route or "any").rsplit("/", 1)[-1].strip("<>").split(":")[-1]
    return f"{name}-{path}={json.dumps(value)}"


def corrupt(server: FakeGitHub, route: str | None, path: str, value) -> None:
    if path == HEADER:
        server.corrupt(route, "", value[1], header=value[0])
    else:
        server.corrupt(route, path, value)


def one_line_on_stderr(result) -> str:
    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(("api", "case"), [("rest", case) for case in REST_FIELDS]
                         + [("graphql", case) for case in GRAPHQL_FIELDS],
                         ids=[f"rest-{_field_id(c)}" for c in REST_FIELDS] + [f"graphql-{_field_id(c)}"
                                                                            for c in GRAPHQL_FIELDS])
def test_a_field_of_the_wrong_type_is_one_line_and_nothing_written(github, tmp_path, api, case):
    manifest = tmp_path / "workarounds.toml"
    shutil.copyfile(FROZEN_MANIFEST, manifest)
    before = manifest.read_bytes()
    cache = tmp_path / "cache"
    corrupt(github, *case)

    result = run(github, cache, "--refresh", "--write", manifest=manifest, api=api)

    assert github.corrupted, "no answer carried the corruption: the case tests nothing"
    line = one_line_on_stderr(result)
    assert result.stdout == ""
    assert line.startswith("xpu-workarounds: error: ") and f"GitHub at {github.base_url.split('//')[1]}" in line
    assert TOKEN not in result.output
    assert manifest.read_bytes() == before
    assert not cache.exists() or not any(cache.iterdir())


def test_an_actor_without_a_login_is_no_wrong_type(github, tmp_path):
    # Caches written before fields were checked hold GraphQL's events without an actor so; the
    # login is only ever shown, never a fact.
    cache = tmp_path / "cache"
    clean = run(github, cache, "--json", "--refresh", api="rest")
    github.corrupt(TIMELINE, "*.actor.login", None)

    result = run(github, tmp_path / "other", "--json", "--refresh", api="rest")

    assert github.corrupted and result.exit_code == 0, result.output
    assert json.loads(result.stdout)["references"] == [
        {**facts, "evidence": facts["evidence"].replace("closed by pytorchmergebot's", "closed by a commit's")}
        for facts in json.loads(clean.stdout)["references"]]


# ---- the fuzzer: any field of any answer, a value of another type


def _leaves(body, prefix: str = ""):
    """Every field of ``body`` as a ``corrupted`` path (list items as ``*``) with its value."""
    if isinstance(body, dict):
        for key, value in body.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path, value
            yield from _leaves(value, path)
    elif isinstance(body, list):
        for item in body:
            yield from _leaves(item, f"{prefix}.*" if prefix else "*")


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False)
                    | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=6)


def _served(bodies: list[tuple[str, object]]) -> list[tuple[str, str, str]]:
    """(route, path, JSON type) of every field of ``bodies`` (``FakeGitHub.bodies``; a GraphQL
    query's aliases as ``*``), null ones left out (a null may be right)."""
    served: dict[tuple[str, str], str] = {}
    for rule, body in bodies:
        for path, value in _leaves(body):
            general = re.sub(r"^data\.r\d+(\.a\d+)?", lambda m: "data.*" + (".*" if m[1] else ""), path)
            served.setdefault((rule, general), _kind(value))
    return sorted((rule, path, kind) for (rule, path), kind in served.items() if kind != "null")


def _fields_of(api: str) -> list[tuple[str, str, str]]:
    """The fields the seeded stand-in answers a cold refresh with (``_served``)."""
    with FakeGitHub() as server, tempfile.TemporaryDirectory() as scratch:
        upstream_history.seed(server)
        server.bodies = []
        assert run(server, Path(scratch), "--refresh", manifest=FROZEN_MANIFEST, api=api).exit_code == 0
        return _served(server.bodies)


FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _corrupted_run(server: FakeGitHub, field: tuple[str, str, str], data, command):
    """``command()`` with ``field`` (route, path, JSON type) of the answers given a value of
    another type drawn from ``data``: exit 0, or exit 4 with one line; never a traceback."""
    route, path, kind = field
    value = data.draw(JSON.filter(lambda candidate: candidate is not None and _kind(candidate) != kind))
    server.corruptions, server.corrupted = [], []
    server.corrupt(route, path, value)
    try:
        result = command()
    finally:
        server.corruptions = []
    assert result.exit_code in (0, 4), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 4:
        assert len(result.stderr.splitlines()) == 1, result.stderr
    return result


def _facts(result) -> dict:
    document = json.loads(result.stdout)
    return {"references": document["references"], "inline_audit": document["inline_audit"]}


@pytest.mark.parametrize("api", ["graphql", "rest"])
def test_no_field_of_any_answer_given_another_type_is_a_traceback_or_a_changed_fact(github, api):
    fields = _fields_of(api)
    with tempfile.TemporaryDirectory() as scratch:
        clean = run(github, Path(scratch), "--json", "--refresh", manifest=FROZEN_MANIFEST, api=api)
    assert clean.exit_code == 0, clean.output
    expected = _facts(clean)

    def refresh():
        with tempfile.TemporaryDirectory() as scratch:
            return run(github, Path(scratch), "--json", "--refresh", manifest=FROZEN_MANIFEST, api=api)

    @FUZZ
    @given(field=st.sampled_from(fields), data=st.data())
    def property_(field, data):
        result = _corrupted_run(github, field, data, refresh)
        assert result.exit_code == 4 or _facts(result) == expected, field

    property_()


# ---- retire --open-prs: its own reads through PyGithub

REPO_ROUTE = "/repos/<owner>/<repo>"
REF = "/repos/<owner>/<repo>/git/ref/<path:ref>"
GIT_COMMIT = "/repos/<owner>/<repo>/git/commits/<sha>"
TREE = "/repos/<owner>/<repo>/git/trees/<sha>"
BLOB = "/repos/<owner>/<repo>/git/blobs/<sha>"
PULLS = "/repos/<owner>/<repo>/pulls"

RETIRE_FIELDS = [
    (REPO_ROUTE, "default_branch", 5), (REPO_ROUTE, "default_branch", None), (REPO_ROUTE, "html_url", 5),
    (REF, "object", "x"), (REF, "object.sha", 5), (REF, "object.sha", NOT_A_SHA),
    (GIT_COMMIT, "tree", "x"), (GIT_COMMIT, "tree.sha", 5), (GIT_COMMIT, "parents", "x"),
    (TREE, "tree", "x"), (TREE, "tree.*.path", 5), (TREE, "tree.*.type", 5), (TREE, "tree.*.sha", 5),
    (TREE, "tree.*.mode", 100644), (TREE, "truncated", "false"),
    (BLOB, "content", 5), (BLOB, "encoding", 5), (BLOB, "content", "%% not base64 %%"),
    (PULLS, "*.number", "1"), (PULLS, "*.number", None), (PULLS, "*.state", 5), (PULLS, "*.state", "merged"),
    (PULLS, "*.head", "x"), (PULLS, "*.head.ref", 5), (PULLS, "*.head.label", 5), (PULLS, "*.body", 5),
    (PULLS, "*.labels", "x"), (PULLS, "*.title", 5),
    # The dashboard issue: listed, then read whole (PyGithub completes it from /issues/N).
    (ISSUE, "number", "2"), (ISSUE, "number", None), (ISSUE, "state", 5), (ISSUE, "state", "resolved"),
    (ISSUE, "+pull_request", "x"), (ISSUE, "body", 5), (ISSUE, "title", 5),
    (None, HEADER, ("X-RateLimit-Reset", "soon")),
]


@pytest.fixture(scope="module")
def acted_on(tmp_path_factory):
    """A repository in which a first run opened a removal PR and the dashboard issue, for the
    dry runs of the table below, which read them: one run for the whole table, since each dry
    run sends no write (asserted) and so leaves the repository as the next one reads it."""
    with FakeGitHub() as server:
        install(server)
        acted = Scenario(server, tmp_path_factory.mktemp("acted-on") / "cache")
        acted.seed_upstream()
        acted.run()
        yield acted


@pytest.fixture
def dry_run_scenario(acted_on, tmp_path):
    """``acted_on`` with no corruption and a cache of the test's own (as it was after the first run)."""
    cache = acted_on.cache_dir
    acted_on.cache_dir = Path(shutil.copytree(cache, tmp_path / "cache"))
    acted_on.server.corruptions, acted_on.server.corrupted = [], []
    try:
        yield acted_on
    finally:
        acted_on.server.corruptions = []
        acted_on.cache_dir = cache


@pytest.mark.parametrize("case", RETIRE_FIELDS, ids=[_field_id(c) for c in RETIRE_FIELDS])
def test_retire_meeting_a_field_of_the_wrong_type_says_one_line_and_sends_no_write(dry_run_scenario, case):
    scenario = dry_run_scenario
    corrupt(scenario.server, *case)

    result = cli(scenario, "--repo", REPOSITORY, "--dry-run", "--no-refresh")  # its own reads only

    assert scenario.server.corrupted, "no answer carried the corruption: the case tests nothing"
    assert f"GitHub at {scenario.server.base_url.split('//')[1]}" in result.output
    one_line_on_stderr(result)
    assert writes(scenario.server) == 0


@pytest.mark.parametrize("case", [(GRAPHQL, f"{_PR}.merged", "false"), (GRAPHQL, f"{_ITEM}.commit.oid", 5),
                                  (GRAPHQL, "data.rateLimit.cost", "1")], ids=_field_id)
def test_retire_refreshing_facts_from_a_field_of_the_wrong_type_changes_nothing(scenario, case):
    scenario.seed_upstream()
    corrupt(scenario.server, *case)

    result = cli(scenario, "--repo", REPOSITORY)

    assert scenario.server.corrupted
    line = one_line_on_stderr(result)
    assert line.startswith("xpu-workarounds: error: refreshing upstream facts: GitHub at ") and "answered wrongly" in line
    assert writes(scenario.server) == 0 and not scenario.repo.pulls


def test_no_field_of_retires_own_answers_given_another_type_is_a_traceback_or_another_plan(scenario):
    scenario.seed_upstream()
    scenario.run()  # a removal PR and the dashboard issue exist: the dry run below reads them
    server = scenario.server
    server.bodies = []
    clean = cli(scenario, "--repo", REPOSITORY, "--dry-run", "--no-refresh")
    assert clean.exit_code == 0, clean.output
    fields, server.bodies = _served(server.bodies), None

    @FUZZ
    @given(field=st.sampled_from(fields), data=st.data())
    def property_(field, data):
        result = _corrupted_run(server, field, data,
                                lambda: cli(scenario, "--repo", REPOSITORY, "--dry-run", "--no-refresh"))
        assert result.exit_code == 4 or result.stdout == clean.stdout, field
        assert writes(server) == 0

    property_()
