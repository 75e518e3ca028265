"""Nothing of a package index's address is published.

A private index is reached with a token in its URL: in the path (``/t/TOKEN/simple/``), as
credentials (``TOKEN:@host``, the form several hosted indexes give, which pip shows as
``TOKEN:****``) or in a query (``?token=TOKEN``). When the index refuses a download, pip names
the URL. Here the stand-in index (real pip, tests/support/package_index.py) wants the token in
each of the three places and refuses one release; then every byte each medium received is read:
what the stand-in GitHub was sent (the dashboard issue, the upgrade PR's comment), the step
summary, the step's outputs and annotations, stdout (``--json`` too), stderr and the cache. The
token is in none of them; what went wrong (``403 Client Error: Forbidden``), the index's host and
the file refused are. Then ``redact.without_addresses`` over pip's own message forms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import upstream_history
from support.fakegithub import FakeGitHub
from support.fakegithub_git import install, store, writes
from support.manifests import manifest_text, workaround
from support.package_index import Index, pip_environment, vllm_sdist
from support.repository import FROZEN_MANIFEST, frozen
from test_action import ADOPTER, Step, comments
from test_lookahead import NEWEST, PINNED
from test_workflow import check_script, retire_script

from tracker.release.fetch import pip_failure
from tracker.release.redact import HIDDEN_HOST, without_addresses
from tracker.retire import DASHBOARD_LABEL
from tracker.retire.lookahead import TITLE

TOKEN = "SECRET-TOKEN-5f1c9a"
# Where a private index takes its token: the stand-in index's arguments for each.
PLACES = {"path": {"prefix": f"/t/{TOKEN}"}, "userinfo": {"userinfo": f"{TOKEN}:"}, "query": {"query": f"token={TOKEN}"}}
REFUSED = "403 Client Error: Forbidden"


@pytest.fixture(params=sorted(PLACES))
def private(request):
    """The stand-in index wanting the token in one place of its address."""
    index = Index(**PLACES[request.param])
    yield index
    index.close()


def environment(index: Index, cache: Path) -> dict[str, str]:
    """A child's environment: pip reaching only ``index``, the release cache in ``cache``."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("XPU_WORKAROUNDS", "GITHUB", "PIP_")) and "proxy" not in key.lower()}
    return {**env, **pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(cache)}


def as_input(index: Index) -> dict[str, str]:
    """pip reaching only ``index``, named as the action's ``index-url`` input (``INDEX_URL``), not pip's
    own ``PIP_INDEX_URL``: the step exports it for pip."""
    env = pip_environment(index)
    return {**{key: value for key, value in env.items() if key != "PIP_INDEX_URL"}, "INDEX_URL": env["PIP_INDEX_URL"]}


def written(directory: Path) -> bytes:
    """Every byte of every file under ``directory``."""
    return b"\n".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


def published(server: FakeGitHub, directory: Path, *runs: subprocess.CompletedProcess[str]) -> bytes:
    """Every byte the stand-in GitHub received, every file of ``directory`` (the step's outputs and
    summaries, the release cache) and what the runs printed."""
    printed = "\n".join(run.stdout + run.stderr for run in runs).encode()
    return b"\n".join([*(server.received or []), written(directory), printed])


def test_pip_itself_names_the_token_when_the_index_refuses_a_download(private, tmp_path):
    # The premise of every test below: left as pip says it, the token would be published.
    private.refuse(PINNED, 403)
    done = subprocess.run([sys.executable, "-m", "pip", "--no-input", "download", "--no-deps", "--no-binary=:all:",
                           f"vllm=={PINNED}", "-d", str(tmp_path / "into")], env=environment(private, tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "403" in done.stderr
    assert TOKEN in done.stderr


# ----------------------------------------------------------------- check vllm==X, census vllm==X


@pytest.mark.parametrize("command", [["check"], ["check", "--json"], ["census", "--json"]])
def test_a_refused_release_is_one_line_naming_the_refusal_the_host_and_the_file_never_the_token(private, tmp_path,
                                                                                               command):
    private.refuse(PINNED, 403)
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-m", "tracker.commands", "--manifest", str(FROZEN_MANIFEST), *command,
                           f"vllm=={PINNED}"], env=environment(private, cache), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 4, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"xpu-workarounds: error: pip download vllm=={PINNED} failed: ")
    assert REFUSED in done.stderr and f"http://{private.host}/.../vllm-{PINNED}.tar.gz" in done.stderr
    assert TOKEN.encode() not in done.stderr.encode() + written(tmp_path)


# --------------------------------------------------------------------------------- the look-ahead


@pytest.fixture
def server():
    with FakeGitHub() as running:
        install(running)
        upstream_history.seed(running)
        running.received = []
        yield running


# The GitHub flows take pip's words from where every command takes them (``fetch``): the token in the
# path, the usual form, end to end; each form's reduction is shown by the commands' tests above and
# the word-level cases below.
@pytest.mark.parametrize("private", ["path"], indirect=True)
@pytest.mark.parametrize("visibility", ["public", "private"])
def test_the_look_ahead_names_the_refusal_in_every_medium_never_the_token(server, private, tmp_path, visibility):
    # The index given as the action's input (index-url), as a secret reaches it: no PIP_INDEX_URL.
    repo = server.add_repo(ADOPTER)
    repo.private = visibility == "private"
    repo.commit("The project, pinning vLLM", files={**frozen(), "requirements.txt": f"vllm=={PINNED}\n"})
    private.publish(NEWEST, vllm_sdist(NEWEST))
    private.refuse(NEWEST, 403)
    step = Step(server, tmp_path, ADOPTER)
    env = {**as_input(private), "LOOK_AHEAD": "true"}
    weekly = step.run(retire_script(), **env)
    assert weekly.returncode == 4, weekly.stdout + weekly.stderr  # the look-ahead's step failed; the others were done
    [issue] = [i for i in store(server).issues[ADOPTER.lower()].values() if DASHBOARD_LABEL in i.labels]
    shown = issue.body[issue.body.index(TITLE):]
    assert f"It could not be looked at: vLLM {NEWEST} could not be read from the package index: " in shown
    [annotation] = [line for line in weekly.stdout.splitlines() if line.startswith("::error title=look-ahead::")]
    # A private repository's maintainers are told which index; a public repository names no host.
    host = private.host if visibility == "private" else HIDDEN_HOST
    for medium in (shown, annotation, step.summary.read_text()):
        assert REFUSED in medium and f"http://{host}/.../vllm-{NEWEST}.tar.gz" in medium
    # A person's run with --json: the failure as the section says it.
    person = step.run('xpu-workarounds retire --open-prs --repo "$REPOSITORY" --no-refresh --look-ahead --json',
                      **pip_environment(private))
    failure = json.loads(person.stdout)["next_release"]["failure"]
    assert failure.startswith(f"vLLM {NEWEST} could not be read from the package index: ") and REFUSED in failure
    assert TOKEN.encode() not in published(server, tmp_path, weekly, person)
    if visibility == "public":
        assert private.host.encode() not in published(server, tmp_path, weekly, person)


# ---------------------------------------------------------------------------- the upgrade check


@pytest.mark.parametrize("private", ["path"], indirect=True)
def test_the_upgrade_check_names_the_refusal_in_every_medium_never_the_token(server, private, tmp_path):
    old, new = "0.24.0", "0.25.0"
    for version in (old, new):
        private.publish(version, vllm_sdist(version))
    private.refuse(old, 403)  # the base's pin: only the comparison is lost
    repo = server.add_repo(ADOPTER)
    repo.commit("A stack pinning vLLM", files={"workarounds.toml": manifest_text(workaround()),
                                               "requirements.txt": f"vllm=={old}\n"})
    repo.commit("Move vLLM", branch="bump-vllm", files={"requirements.txt": f"vllm=={new}\n"})
    pr = repo.pull("Move vLLM", head="bump-vllm")
    pr.head_sha = repo.branches["bump-vllm"]
    step = Step(server, tmp_path, ADOPTER)
    env = {**as_input(private), "PULL_REQUEST": str(pr.number), "FAIL_ON_DRIFT": "false"}
    checked = step.run(check_script(), **env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [comment] = comments(step, pr.number)
    [line] = [line for line in comment.splitlines() if "could not be compared" in line]
    [annotation] = [line for line in checked.stdout.splitlines() if line.startswith("::warning title=not compared::")]
    for medium in (line, annotation, step.summary.read_text()):  # a public repository: no host
        assert REFUSED in medium and f"http://{HIDDEN_HOST}/.../vllm-{old}.tar.gz" in medium
    # --json carries the same warning.
    as_json = step.run('xpu-workarounds check --pull-request "$PULL_REQUEST" --repo "$REPOSITORY" --json',
                       **{**env, **pip_environment(private)})
    [warning] = json.loads(as_json.stdout)["warnings"]
    assert warning.startswith(f"vLLM {old} could not be compared: ") and REFUSED in warning
    # A second push pins a release the index refuses: one line, exit 4, nothing written.
    later = "0.25.1"
    private.publish(later, vllm_sdist(later))
    private.refuse(later, 403)
    repo.commit("Move vLLM again", branch="bump-vllm", files={"requirements.txt": f"vllm=={later}\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    refused = step.run(check_script(), **env)
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1 and writes(server) == 0
    assert REFUSED in refused.stderr and f"http://{HIDDEN_HOST}/.../vllm-{later}.tar.gz" in refused.stderr
    for secret in (TOKEN, private.host):
        assert secret.encode() not in published(server, tmp_path, checked, as_json, refused)


# ------------------------------------------------------------------ the reducer, over pip's words

HOST = "pkgs.example.com"
SDIST = "vllm-0.99.0.tar.gz"
DIGEST = "#sha256=880f823a5273e6bbecebb9e5959347fb7d951493f20e2e8491f942783522a403"


@pytest.mark.parametrize(("said", "kept"), [
    # pip's refusal of a download, the link as the index's page gives it (pip >= 22).
    (f"ERROR: HTTP error 403 while getting https://{HOST}/t/{TOKEN}/files/{SDIST}{DIGEST} "
     f"(from https://{HOST}/t/{TOKEN}/simple/vllm/)",
     f"ERROR: HTTP error 403 while getting https://{HOST}/.../{SDIST} (from https://{HOST}/...)"),
    (f"ERROR: Could not install requirement vllm==0.99.0 from https://{TOKEN}:****@{HOST}/files/{SDIST}{DIGEST} "
     f"because of HTTP error 403 Client Error: Forbidden for url: https://{HOST}/files/{SDIST}?token={TOKEN}",
     f"ERROR: Could not install requirement vllm==0.99.0 from https://{HOST}/.../{SDIST} "
     f"because of HTTP error 403 Client Error: Forbidden for url: https://{HOST}/.../{SDIST}"),
    # The index's own address: masked credentials, a query pip joined the project's name after.
    (f"Looking in indexes: https://{TOKEN}:****@{HOST}/simple/, https://****@{HOST}/t/{TOKEN}/simple/",
     f"Looking in indexes: https://{HOST}/..., https://{HOST}/..."),
    (f"WARNING: 401 Error, Credentials not correct for http://{HOST}:8080/simple/?token={TOKEN}/vllm/",
     f"WARNING: 401 Error, Credentials not correct for http://{HOST}:8080/..."),
    (f"Could not fetch URL https://{HOST}/t/{TOKEN}/simple/vllm/: There was a problem confirming the ssl "
     f"certificate - skipping",
     f"Could not fetch URL https://{HOST}/...: There was a problem confirming the ssl certificate - skipping"),
    # urllib3 names the path alone; a wheel and its PEP 658 metadata keep their name.
    (f"ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host='{HOST}', port=443): "
     f"Max retries exceeded with url: /t/{TOKEN}/files/{SDIST} (Caused by NewConnectionError('<pip._vendor."
     f"urllib3.connection.HTTPSConnection object at 0x7f3e>: Failed to establish a new connection: [Errno 111] "
     f"Connection refused'))",
     f"ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host='{HOST}', port=443): "
     f"Max retries exceeded with url: /.../{SDIST} (Caused by NewConnectionError('<pip._vendor."
     f"urllib3.connection.HTTPSConnection object at 0x7f3e>: Failed to establish a new connection: [Errno 111] "
     f"Connection refused'))"),
    (f"https://{HOST}/t/{TOKEN}/packages/ab/vllm-0.99.0-cp38-abi3-manylinux1_x86_64.whl.metadata",
     f"https://{HOST}/.../vllm-0.99.0-cp38-abi3-manylinux1_x86_64.whl.metadata"),
    # A local index, quoted; a path named without a scheme.
    (f"WARNING: Location 'file:///opt/{TOKEN}/simple/vllm/' is ignored: it is neither a file nor a directory.",
     "WARNING: Location 'file:///...' is ignored: it is neither a file nor a directory."),
    (f"Looking in links: /srv/{TOKEN}/wheels, file:///srv/{TOKEN}/{SDIST}",
     f"Looking in links: /..., file:///.../{SDIST}"),
    # Credentials that are no host's (a slash in the password): no host is shown either.
    (f"https://user:{TOKEN[:6]}/{TOKEN[7:]}@{HOST}/simple/", "https:///..."),
    ("http://[::1]:8080/t/x/" + SDIST + ", https://" + HOST + ", https://" + HOST + "/",
     "http://[::1]:8080/.../" + SDIST + ", https://" + HOST + ", https://" + HOST + "/"),
    # A scheme that is no scheme still opens an address.
    (f"[1://{HOST}/t/{TOKEN}/simple/]", f"[1://{HOST}/...]"),
    # A file name that is not a distribution's is part of the path.
    (f"https://{HOST}/t/{TOKEN}", f"https://{HOST}/..."),
    (f"https://{HOST}/files/{TOKEN}.tar.gz.asc", f"https://{HOST}/..."),
    # Every form a person can write an address in: protocol-relative, without a scheme (credentials, a
    # port, a dotted host name), a password a URL parser would cut at '#', '?' or '/'.
    (f"from //{HOST}/t/{TOKEN}/files/{SDIST}", f"from //{HOST}/.../{SDIST}"),
    (f"index {HOST}:8443/t/{TOKEN}/simple/vllm/ refused", f"index {HOST}:8443/... refused"),
    (f"index {HOST}/t/{TOKEN}/simple/, then localhost:3141/t/{TOKEN}/", f"index {HOST}/..., then localhost:3141/..."),
    (f"index {TOKEN}:@{HOST}/simple/ and user:{TOKEN}@{HOST}:8443/simple/", f"index {HOST}/... and {HOST}:8443/..."),
    (f"https://user:123#{TOKEN}@{HOST}/simple/", f"https://{HOST}/..."),
    (f"https://user:123?{TOKEN}@{HOST}/simple/", f"https://{HOST}/..."),
    (f"https://user:123/{TOKEN}@{HOST}/simple/", "https:///..."),
    (f"//user:123#{TOKEN}@{HOST}/simple/", f"//{HOST}/..."),
])
def test_every_address_in_pips_words_keeps_its_host_and_file_name_only(said, kept):
    assert without_addresses(said) == kept


@pytest.mark.parametrize(("said", "kept"), [
    (f"https://{TOKEN}:****@{HOST}/t/{TOKEN}/files/{SDIST}{DIGEST}", f"https://{HIDDEN_HOST}/.../{SDIST}"),
    (f"from //{HOST}/t/{TOKEN}/files/{SDIST}", f"from //{HIDDEN_HOST}/.../{SDIST}"),
    (f"index {HOST}:8443/t/{TOKEN}/simple/vllm/ refused", f"index {HIDDEN_HOST}/... refused"),
    (f"index {HOST}/t/{TOKEN}/simple/, then localhost:3141/t/{TOKEN}/", f"index {HIDDEN_HOST}/..., then {HIDDEN_HOST}/..."),
    (f"index {TOKEN}:@{HOST}/simple/ and user:{TOKEN}@{HOST}:8443/simple/",
     f"index {HIDDEN_HOST}/... and {HIDDEN_HOST}/..."),
    (f"//user:123#{TOKEN}@{HOST}/simple/", f"//{HIDDEN_HOST}/..."),
    ("http://[::1]:8080/t/x/" + SDIST, f"http://{HIDDEN_HOST}/.../{SDIST}"),
    (f"https://user:123/{TOKEN}@{HOST}/simple/", "https:///..."),  # no host could be told: none, hidden or not
    (f"Looking in links: /srv/{TOKEN}/wheels, file:///srv/{TOKEN}/{SDIST}", f"Looking in links: /..., file:///.../{SDIST}"),
])
def test_for_a_public_repository_every_address_form_hides_its_host(said, kept):
    from tracker.release.redact import published_to

    with published_to(True):
        assert without_addresses(said) == kept
    assert without_addresses(said) != kept or HIDDEN_HOST not in kept  # outside, the host is shown again


@pytest.mark.parametrize("said", [
    "ERROR: No matching distribution found for vllm==0.99.0",
    "ERROR: Could not find a version that satisfies the requirement vllm==0.99.0 (from versions: none)",
    "vllm/platforms/xpu.py:6-8 [Errno 28] No space left on device, 0.99/1, a / b, ~/x",
])
def test_words_that_name_no_address_are_kept_as_they_are(said):
    assert without_addresses(said) == said


def test_pips_failure_is_kept_with_its_addresses_reduced():
    stderr = (f"WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after "
              f"connection broken by 'NewConnectionError('<x>: Failed to establish a new connection: [Errno 111] "
              f"Connection refused')': /t/{TOKEN}/simple/vllm/\n"
              f"ERROR: HTTP error 404 while getting https://{HOST}/files/{SDIST}?token={TOKEN}\n")
    assert pip_failure(stderr, "no sdist") == (f"ERROR: HTTP error 404 while getting https://{HOST}/.../{SDIST} "
                                               f"(the package index could not be reached: [Errno 111] "
                                               f"Connection refused)")
