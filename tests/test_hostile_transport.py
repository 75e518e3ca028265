"""The GitHub client's transport against a hostile or broken configuration and server, over real
HTTP with the real PyGithub and the stand-in GitHub: a malformed ``GITHUB_API_URL`` or one with
credentials in it, pagination that never ends, an answer that trickles in, request paths that
would leave the repository's API, and server text meant for the terminal.

Each failure is one line with the documented exit code (2 bad input, 4 GitHub), no traceback,
and no credential in any output.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import pytest
from support.fakegithub import BAD_PAGINATION
from support.fakegithub_git import writes
from support.repository import FROZEN_MANIFEST
from test_hostile_github import scenario  # noqa: F401 (the fixture)
from test_retire_github import REPOSITORY, cli
from test_upstream_cli import TOKEN, run
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.upstream.settings import ClientSettings

SECRET = "hunter2-stand-in-password"


def one_line(result, code: int, *secrets: str) -> str:
    output = result.output
    assert result.exit_code == code, output
    assert "Traceback" not in output
    for secret in secrets:
        assert secret not in output
    lines = output.splitlines()
    assert len(lines) == 1, output
    return lines[0]


def bounded(seconds: float, call):
    """``call()``, failing the test (not hanging it) when it has not returned within ``seconds``."""
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return answers[0]


@pytest.fixture
def limits(monkeypatch):
    """Lower the client's limits for the command line (they are ClientSettings fields)."""

    def lower(**values):
        read = ClientSettings.from_env.__func__

        def from_env(cls, environ=None, **overrides):
            return read(cls, environ, **{**values, **overrides})

        monkeypatch.setattr(ClientSettings, "from_env", classmethod(from_env))

    return lower


def malformed_urls(port: int) -> list[str]:
    return [
        f"127.0.0.1:{port}",  # no scheme
        "api.github.com",
        "garbage ::: x",
        f"ftp://127.0.0.1:{port}",
        "http://[::1",
        "https://",
        f"http://127.0.0.1:{port}/api?x=1",
        f"http://127.0.0.1:{port}\n/api",
        "http://127.0.0.1:99999",
    ]


def with_credentials(port: int) -> list[str]:
    return [
        f"http://user:{SECRET}@127.0.0.1:{port}",  # the stand-in itself: answers if asked
        f"https://user:{SECRET}@127.0.0.1:9",
        f"https://{SECRET}@api.github.com",
        f"https://:{SECRET}@api.github.com/api/v3",
        f"{SECRET}@127.0.0.1:{port}",  # no scheme either
    ]


def api_url_cases(port: int) -> list[str]:
    return malformed_urls(port) + with_credentials(port)


CASES = range(len(api_url_cases(0)))


def test_every_case_is_named():
    assert len(set(api_url_cases(1))) == len(CASES)


@pytest.mark.parametrize("api", ["graphql", "rest"])
@pytest.mark.parametrize("case", CASES)
def test_upstream_refuses_a_malformed_api_url_in_one_line_exit_2(github, tmp_path, case, api, monkeypatch):
    url = api_url_cases(int(github.base_url.rsplit(":", 1)[1]))[case]
    monkeypatch.setattr(github, "base_url", url)  # what ``run`` sets GITHUB_API_URL to
    cache = tmp_path / "cache"

    result = run(github, cache, "--refresh", api=api)

    line = one_line(result, 2, SECRET, TOKEN)
    assert line.startswith("xpu-workarounds: error: GITHUB_API_URL "), line
    assert not github.log  # nothing was asked
    assert not cache.exists()


@pytest.mark.parametrize("case", CASES)
def test_upstream_offline_refuses_it_too(github, tmp_path, case, monkeypatch):
    monkeypatch.setattr(github, "base_url", api_url_cases(1)[case])
    result = run(github, tmp_path / "cache", "--offline")
    assert one_line(result, 2, SECRET).startswith("xpu-workarounds: error: GITHUB_API_URL "), result.output


@pytest.mark.parametrize("case", CASES)
def test_retire_open_prs_refuses_a_malformed_api_url_in_one_line_exit_2(scenario, case):  # noqa: F811
    port = int(scenario.server.base_url.rsplit(":", 1)[1])

    result = cli(scenario, "--repo", REPOSITORY, base_url=api_url_cases(port)[case])

    line = one_line(result, 2, SECRET)
    assert line.startswith("xpu-workarounds: error: GITHUB_API_URL "), line
    assert writes(scenario.server) == 0 and not scenario.server.log


# retire reads a manifest first (the frozen one); check --pull-request reads the pull request's own.
@pytest.mark.parametrize(("command", "manifest"), [(["retire", "--fresh"], str(FROZEN_MANIFEST)),
                                                   (["check", "--pull-request", "1", "--repo", REPOSITORY], None)])
def test_other_commands_that_ask_github_refuse_it_too(tmp_path, command, manifest):
    env = {"GITHUB_API_URL": f"https://user:{SECRET}@api.github.com", "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
           "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path), "XPU_WORKAROUNDS_MANIFEST": manifest}
    result = CliRunner().invoke(app, command, env=env)
    line = one_line(result, 2, SECRET, TOKEN)
    assert line.startswith("xpu-workarounds: error: GITHUB_API_URL has credentials in it"), line


# ---------------------------------------------------------------- pagination that never ends


@pytest.mark.parametrize("shape", BAD_PAGINATION)
def test_upstream_refuses_pagination_that_never_ends(github, tmp_path, shape, limits):
    limits(max_pages=5)
    github.paginate_badly(shape)
    cache = tmp_path / "cache"

    result = bounded(30, lambda: run(github, cache, "--refresh", api="rest"))

    line = one_line(result, 4, TOKEN)
    what = "a page it had already given" if shape != "next-endless" else "more than 5 pages"
    assert f"GitHub at {github.base_url.split('//')[1]} named {what}" in line, line
    assert line.endswith("the cache is left as it was"), line
    assert not cache.exists() or not any(cache.iterdir())
    assert 0 < github.count("/repos/<owner>/<repo>/issues/<int:number>/timeline") <= 5


def test_the_default_limit_is_100_pages(github, tmp_path):
    github.paginate_badly("next-endless")

    result = bounded(60, lambda: run(github, tmp_path / "cache", "--refresh", api="rest"))

    assert "named more than 100 pages" in one_line(result, 4, TOKEN)
    assert github.count("/repos/<owner>/<repo>/issues/<int:number>/timeline") == 100
    assert ClientSettings().max_pages == 100


# PyGithub's own lists (pull requests, issues) pass the same check as upstream's; one shape here (the
# run that makes the lists costs seconds: writes are spaced a second apart).
@pytest.mark.parametrize("shape", ["next-back"])
def test_retire_refuses_pagination_that_never_ends(scenario, shape, limits):  # noqa: F811
    limits(max_pages=5)
    assert cli(scenario, "--repo", REPOSITORY).exit_code == 0  # PRs and the dashboard: lists to page through
    scenario.server.paginate_badly(shape)

    result = bounded(60, lambda: cli(scenario, "--repo", REPOSITORY))

    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if "GitHub at" in line]
    assert lines and all("named a page it had already given" in line or "named more than 5 pages" in line
                         for line in lines), result.output
    lists = Counter((hit.path, re.sub(r"(^|&)page=\d+", "", hit.query)) for hit in scenario.server.log
                    if hit.method == "GET" and "per_page=" in hit.query)
    assert lists and max(lists.values()) <= 5, lists  # no list read past its fifth page


# ---------------------------------------------------------------- an answer that never ends


@pytest.mark.parametrize("api", ["graphql", "rest"])
def test_upstream_gives_up_on_an_answer_that_trickles_in(github, tmp_path, api, limits):
    limits(deadline=1.0)  # the read timeout (15 s) never trips: a byte comes every 0.2 s
    github.trickle(0.2)
    cache = tmp_path / "cache"

    started = time.monotonic()
    result = bounded(20, lambda: run(github, cache, "--refresh", api=api))

    line = one_line(result, 4, TOKEN)
    assert f"GitHub at {github.base_url.split('//')[1]} did not send a whole answer within 1 s" in line, line
    assert time.monotonic() - started < 8
    assert not cache.exists() or not any(cache.iterdir())


def test_retire_gives_up_on_an_answer_that_trickles_in(scenario, limits):  # noqa: F811
    limits(deadline=1.0)
    scenario.seed_upstream()
    scenario.server.trickle(0.2)

    result = bounded(30, lambda: cli(scenario, "--repo", REPOSITORY))

    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    assert "did not send a whole answer within 1 s" in result.output
    assert writes(scenario.server) == 0


def test_the_default_deadline_is_60_s():
    assert ClientSettings().deadline == 60.0


def test_a_wait_github_asks_for_is_not_counted(github, tmp_path, limits):
    limits(deadline=1.0)
    github.fail("/repos/<owner>/<repo>/pulls/<int:number>", 503, headers={"Retry-After": "2"})

    started = time.monotonic()
    result = bounded(60, lambda: run(github, tmp_path / "cache", "--refresh", api="rest"))

    assert result.exit_code == 0, result.output
    assert time.monotonic() - started >= 2  # the wait was waited, then the answer came in time


# ---------------------------------------------------------------- paths that leave the repository


def strangers(server) -> list[str]:
    """The requests that reached anything but a repository the stand-in holds, GraphQL, the rate limit
    or the token's own user (``GET /user``: whose the token is, asked before the bot writes)."""
    known = tuple(f"/repos/{name}" for name in server.repos)
    return [hit.path for hit in server.log if hit.path not in ("/graphql", "/rate_limit", "/user")
            and not any(hit.path.lower() == k or hit.path.lower().startswith(k + "/") for k in known)]


ESCAPING_BRANCHES = ["../../../../user", "main/../../../../../rate_limit", "%2e%2e/%2e%2e/%2e%2e/%2E%2E/user",
                     "..", "main/./x", "a\\..\\b", "heads\nx", "/main", "main.lock", "a..b", "@{-1}"]


@pytest.mark.parametrize("base", ESCAPING_BRANCHES)
def test_retire_refuses_a_base_that_is_no_branch_name(scenario, base):  # noqa: F811
    result = cli(scenario, "--repo", REPOSITORY, "--base", base)

    line = one_line(result, 2, TOKEN)
    assert line.startswith("xpu-workarounds: error: --base must be a branch name"), line
    assert "\n" not in line and not scenario.server.log


# Each would reach a path the bot never asks (a stranger's organisation), were it followed.
@pytest.mark.parametrize("branch", ["../../../../orgs/stranger", "%2e%2e/%2e%2e/%2e%2e/%2e%2e/orgs/stranger", "x/%2E./../y"])
def test_a_branch_github_names_that_would_leave_the_repository_is_never_asked(scenario, branch):  # noqa: F811
    scenario.repo.default_branch = branch  # what GitHub says the default branch is

    result = cli(scenario, "--repo", REPOSITORY)

    assert result.exit_code == 4, result.output
    assert "Traceback" not in result.output
    assert "a path with a '.' or '..' segment" in result.output, result.output
    assert not strangers(scenario.server), strangers(scenario.server)
    assert writes(scenario.server) == 0


@pytest.mark.parametrize("ref", ["../..#47081", "./vllm#47081", "vllm-project/..#47081", "-x/vllm#47081"])
def test_a_manifest_reference_that_would_leave_the_repository_is_invalid(github, tmp_path, ref):

    manifest = tmp_path / "workarounds.toml"
    manifest.write_text(FROZEN_MANIFEST.read_text().replace("vllm-project/vllm#47081", ref))

    result = run(github, tmp_path / "cache", "--refresh", "--json", manifest=manifest)

    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and ref in result.output
    assert not github.log


# ---------------------------------------------------------------- server text on the terminal

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\r\x08\u202e" + "A" * 5000  # a title, a clear screen, colour, bidi


def terminal_safe(output: str) -> None:
    assert not any(char in output for char in "\x1b\x07\r\x08\u202e"), repr(output[:300])
    assert all(len(line) <= 600 for line in output.splitlines()), max(len(line) for line in output.splitlines())


def test_upstream_prints_no_control_character_and_no_wall_of_text_from_github(github, tmp_path):
    # A message is free text (the fields a fact comes from are checked at their type).
    github.fail("/repos/<owner>/<repo>/issues/<int:number>/timeline", 422, body={"message": EVIL})

    result = run(github, tmp_path / "cache", "--refresh", api="rest")

    terminal_safe(result.output)
    assert "(422: \\x1b]0;owned\\x07" in result.output  # shown escaped, not dropped


def test_retire_prints_no_control_character_and_no_wall_of_text_from_github(scenario):  # noqa: F811
    scenario.server.fail("/repos/<owner>/<repo>/pulls", 422, body={"message": EVIL}, times=10)

    result = cli(scenario, "--repo", REPOSITORY)

    assert result.exit_code == 4, result.output
    terminal_safe(result.output)
    assert "GitHub cannot answer (422: \\x1b]0;owned\\x07" in result.output
