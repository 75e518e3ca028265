"""Progress of long work on stderr, on a terminal only: ``check`` (download, unpacking, scan),
``upstream`` (each request, each retry), ``retire --open-prs`` (each pull request). Never with
``--quiet``, never when stderr is not a terminal, never on stdout: ``--json`` stays one document.

Each command runs as a whole process with its stderr on a pseudo-terminal (python's ``pty``) and
its stdout a pipe, against real services on loopback: real pip and a package index
(tests/support/package_index.py), the stand-in GitHub with real PyGithub.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from support.fakegithub import FakeGitHub
from support.fakegithub_git import install
from support.package_index import VERSION, pip_environment
from support.repository import FROZEN_MANIFEST, frozen
from support.terminal import SCRIPT, stderr_on_terminal, terminal_env

TOKEN = "ghp_progresstoken12345"
GRAPHQL = "/graphql"


def github_env(server: FakeGitHub, tmp_path) -> dict[str, str]:
    return terminal_env(GITHUB_API_URL=server.base_url, XPU_WORKAROUNDS_GITHUB_TOKEN=TOKEN, GITHUB_TOKEN=None,
                        XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"), HTTP_PROXY=None, HTTPS_PROXY=None,
                        http_proxy=None, https_proxy=None)


def check_env(index, tmp_path, **variables: str) -> dict[str, str]:
    """``check`` of the index's release with the frozen manifest (what is shown is the work, not which
    workarounds ship)."""
    return terminal_env(XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"), XPU_WORKAROUNDS_MANIFEST=str(FROZEN_MANIFEST),
                        **variables, **pip_environment(index))


def piped(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_check_shows_the_download_the_unpacking_and_the_scan_on_a_terminal(index, tmp_path):
    env = check_env(index, tmp_path)
    code, out, terminal = stderr_on_terminal(["check", "--json", f"vllm=={VERSION}"], env)
    assert code == 3, terminal  # this made-up release lacks every target: drift
    assert json.loads(out)["vllm"] == VERSION
    assert f"fetching vllm=={VERSION} with pip" in terminal
    assert f"unpacking the files the check reads from vllm-{VERSION}.tar.gz" in terminal
    assert "checking " in terminal and "(1/" in terminal
    # Again, from the cache: verified, not fetched.
    code, out, terminal = stderr_on_terminal(["check", "--json", f"vllm=={VERSION}"], env)
    assert json.loads(out)["vllm"] == VERSION
    assert f"verifying the cached vllm-{VERSION}.zip" in terminal and "fetching" not in terminal


@pytest.mark.parametrize("quiet", ["--quiet", "-q"])
def test_check_quiet_shows_nothing_on_a_terminal(index, tmp_path, quiet):
    env = check_env(index, tmp_path)
    code, out, terminal = stderr_on_terminal(["check", quiet, "--json", f"vllm=={VERSION}"], env)
    assert code == 3 and json.loads(out)["vllm"] == VERSION
    assert terminal == ""


def test_check_shows_nothing_when_stderr_is_not_a_terminal(index, tmp_path):
    env = check_env(index, tmp_path)
    done = piped(["check", "--json", f"vllm=={VERSION}"], env)
    assert done.returncode == 3 and json.loads(done.stdout)["vllm"] == VERSION
    assert done.stderr == ""


def test_no_progress_on_a_terminal_that_cannot_redraw_a_line(index, tmp_path):
    env = check_env(index, tmp_path, TERM="dumb")
    code, out, terminal = stderr_on_terminal(["check", "--json", f"vllm=={VERSION}"], env)
    assert json.loads(out)["vllm"] == VERSION and terminal == ""


def test_upstream_shows_each_request_and_each_retry_on_a_terminal(github, tmp_path):
    github.fail(GRAPHQL, 502, times=1)
    env = github_env(github, tmp_path)
    code, out, terminal = stderr_on_terminal(["--manifest", str(FROZEN_MANIFEST), "upstream", "--json", "--refresh"],
                                             env)
    assert code == 0, terminal
    assert json.loads(out)["source"] == "live"
    assert "asking GitHub: POST /graphql" in terminal
    assert "retrying POST /graphql after 502" in terminal
    assert TOKEN not in terminal + out

    quiet = stderr_on_terminal(["--manifest", str(FROZEN_MANIFEST), "upstream", "--json", "--refresh", "--quiet"],
                               env)
    assert quiet[0] == 0 and json.loads(quiet[1])["source"] == "live" and quiet[2] == ""
    done = piped(["--manifest", str(FROZEN_MANIFEST), "upstream", "--json", "--refresh"], env)
    assert done.returncode == 0 and json.loads(done.stdout)["source"] == "live" and done.stderr == ""


def test_retire_open_prs_shows_each_pull_request_on_a_terminal_and_keeps_its_output_on_stdout(server, tmp_path):
    repository = "xpu-org/xpu-workarounds"
    install(server)  # the git data routes
    server.add_repo(repository).commit("The project at a base commit", files=frozen())
    env = github_env(server, tmp_path)
    args = ["retire", "--open-prs", "--repo", repository, "--dry-run", "--no-refresh"]
    code, out, terminal = stderr_on_terminal(args, env)
    assert code == 0, terminal
    count = len(frozen_ids())
    assert f"reading {repository}" in terminal
    assert all(f"removal PR for {workaround} ({n}/{count})" in terminal
               for n, workaround in enumerate(frozen_ids(), 1))
    assert "the dashboard issue" in terminal and f"GET /repos/{repository}" in terminal
    assert out.splitlines()[-1] == "dry run: nothing was changed"
    assert "removal PR for" not in out and "\x1b[" not in out  # stdout is the command's own

    code, quiet_out, quiet_terminal = stderr_on_terminal([*args, "--quiet"], env)
    assert code == 0 and quiet_terminal == "" and quiet_out == out
    done = piped(args, env)
    assert done.returncode == 0 and done.stdout == out and done.stderr == ""


def frozen_ids() -> list[str]:
    from tracker.model import reader

    return list(reader.load(FROZEN_MANIFEST).ids)

