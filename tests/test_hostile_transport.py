"""The GitHub client's transport against a hostile or broken configuration and server, over real
HTTP with the real PyGithub and the stand-in GitHub: a malformed ``GITHUB_API_URL`` or one with
credentials in it, pagination that never ends, an answer that trickles in, request paths that
would leave the repository's API, and server text meant for the terminal.

Each failure is one line with the documented exit code (2 bad input, 4 GitHub), no traceback,
and no credential in any output.
"""

from __future__ import annotations

import pytest
from support.fakegithub_git import writes
from test_hostile_github import scenario  # noqa: F401 (the fixture)
from test_retire_github import REPOSITORY, cli
from test_upstream_cli import TOKEN, run
from typer.testing import CliRunner

from tracker.commands.app import app

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


@pytest.mark.parametrize("command", [["retire", "--fresh"], ["check", "--pull-request", "1", "--repo", REPOSITORY]])
def test_other_commands_that_ask_github_refuse_it_too(tmp_path, command):
    env = {"GITHUB_API_URL": f"https://user:{SECRET}@api.github.com", "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
           "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path), "XPU_WORKAROUNDS_MANIFEST": None}
    result = CliRunner().invoke(app, command, env=env)
    line = one_line(result, 2, SECRET, TOKEN)
    assert line.startswith("xpu-workarounds: error: GITHUB_API_URL has credentials in it"), line
