"""The upgrade check and the look-ahead read every pin file adopters use: a hashed requirements file
(``pip-compile --generate-hashes``), ``uv.lock``, ``pylock.toml``, ``-r`` includes; and say, never
pass over in silence, a pin file they cannot read or find no vLLM in.

The upgrade check runs as the Action's step runs it (tests/test_action.py's ``Step``), real PyGithub
against the stand-in GitHub over loopback, the releases fetched by real pip from a package index on
disk. The look-ahead's reading of the base branch is checked on the same files.
"""

from __future__ import annotations

import pytest
from support.fakegithub_git import writes
from support.manifests import manifest_text, workaround
from test_action import comments, list_items, upgrade_pull_request
from test_pin_files import PYLOCK, UV_LOCK
from test_workflow import check_script

from tracker.retire.failures import StepFailed
from tracker.retire.lookahead import read_pins
from tracker.retire.upgrade import MARKER


def hashed(version: str) -> str:
    """A requirements file as ``pip-compile --generate-hashes`` writes one, pinning vLLM ``version``."""
    return ("fastapi==0.115.0 \\\n    --hash=sha256:17ea427674467486e997206a5ab25760f6b09e069f099b96f5b55a32fb6f1631\n"
            f"vllm=={version} \\\n"
            "    --hash=sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9 \\\n"
            "    --hash=sha256:f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8\n"
            "    # via -r requirements.in\n")


PIN_FILES = {
    "requirements.txt": hashed,
    "uv.lock": lambda version: UV_LOCK.replace("0.33.0", version),
    "pylock.toml": lambda version: PYLOCK.replace("0.33.0", version),
}


def manifest(layout: str = "") -> str:
    return manifest_text(workaround()) + layout


def pull_request(tmp_path, base: dict[str, str], changed: dict[str, str]):
    """``upgrade_pull_request`` with a head that is the base with ``changed`` (the stand-in's new branch
    starts from no files)."""
    return upgrade_pull_request(tmp_path, base, {**base, **changed})


@pytest.mark.parametrize("path", list(PIN_FILES))
def test_an_upgrade_moving_vllm_only_in_this_pin_file_gets_the_checks_comment(tmp_path, path):
    written = PIN_FILES[path]
    with pull_request(tmp_path, {"workarounds.toml": manifest(), path: written("0.24.0")},
                              {path: written("0.25.0")}) as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        [body] = comments(step, pr.number)
        assert f"`{path}` moves vLLM 0.24.0 to **vLLM 0.25.0**" in body and body.endswith(f"{MARKER}\n")
        assert "**Drift** (1)" in body and "commented on" in result.stdout


def test_an_upgrade_moving_a_hashed_file_and_a_plain_one_names_both(tmp_path):
    base = {"workarounds.toml": manifest(), "requirements.txt": "vllm==0.24.0\n",
            "requirements-lock.txt": hashed("0.24.0")}
    with pull_request(tmp_path, base, {"requirements.txt": "vllm==0.25.0\n",
                                               "requirements-lock.txt": hashed("0.25.0")}) as (repo, pr, step, env):
        assert step.run(check_script(), **env).returncode == 0
        [body] = comments(step, pr.number)
        assert "`requirements-lock.txt`, `requirements.txt` move vLLM 0.24.0 to **vLLM 0.25.0**" in body


def test_an_upgrade_moving_vllm_in_a_file_a_pin_file_includes_is_checked_and_names_that_file(tmp_path):
    base = {"workarounds.toml": manifest(), "requirements.txt": "-r requirements/serving.txt\nfastapi\n",
            "requirements/serving.txt": hashed("0.24.0")}
    with pull_request(tmp_path, base, {"requirements/serving.txt": hashed("0.25.0")}) as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        [body] = comments(step, pr.number)
        assert "`requirements/serving.txt` moves vLLM 0.24.0 to **vLLM 0.25.0**" in body
        assert "vLLM moves outside the pin files" not in step.summary.read_text()


def test_a_changed_pin_file_that_cannot_be_read_is_said_in_the_comment_and_the_summary(tmp_path):
    base = {"workarounds.toml": manifest(), "uv.lock": UV_LOCK.replace("0.33.0", "0.24.0")}
    with pull_request(tmp_path, base, {"uv.lock": "version = 1\n[[package]\nname = \"vllm\"\n"}) \
            as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        [body] = comments(step, pr.number)
        [item] = list_items(body)
        assert item.startswith("uv.lock cannot be read at the PR’s head (not TOML") or \
            item.startswith("uv.lock cannot be read at the PR's head (not TOML"), item
        assert "whether it moves vLLM is not known" in item and body.endswith(f"{MARKER}\n")
        assert item in list_items(step.summary.read_text())
        assert any(line.startswith("::notice ") and "uv.lock cannot be read" in line
                   for line in result.stdout.splitlines())


def test_a_pr_that_drops_vllm_from_a_pin_file_is_said_in_the_comment(tmp_path):
    base = {"workarounds.toml": manifest(), "requirements.txt": hashed("0.24.0")}
    with pull_request(tmp_path, base, {"requirements.txt": "fastapi\n"}) as (repo, pr, step, env):
        assert step.run(check_script(), **env).returncode == 0
        [body] = comments(step, pr.number)
        assert "requirements.txt pinned vllm==0.24.0 at the base and names no vLLM requirement at the PR" in body


def test_a_changed_pin_file_that_never_named_vllm_is_a_summary_notice_and_no_comment(tmp_path):
    base = {"workarounds.toml": manifest(), "requirements.txt": "vllm==0.24.0\n", "requirements-dev.txt": "pytest\n"}
    with pull_request(tmp_path, base, {"requirements-dev.txt": "pytest>=8\n"}) as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0 and "does not move the vLLM pin" in result.stdout
        assert writes(step.server) == 0 and comments(step, pr.number) == []
        assert list_items(step.summary.read_text()) == [
            "requirements-dev.txt names no vLLM requirement: nothing in it to check"]


def test_a_declared_pin_file_without_a_glob_that_is_missing_or_unreadable_is_a_summary_notice(tmp_path):
    layout = '\n[layout]\npins = ["requirements.txt", "requirements/xpu.txt", "uv.lock"]\n'
    base = {"workarounds.toml": manifest(layout), "requirements.txt": "vllm==0.24.0\n", "uv.lock": "[[package]\n"}
    with pull_request(tmp_path, base, {"requirements.txt": "vllm==0.25.0\n"}) as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        [body] = comments(step, pr.number)
        assert "requirements/xpu.txt" not in body and "uv.lock" not in body  # the PR changed neither: the summary
        items = [item.replace("\\", "") for item in list_items(step.summary.read_text()) if "[layout] pins" in item]
        assert items[0] == "requirements/xpu.txt ([layout] pins) no such file"
        assert items[1].startswith("uv.lock ([layout] pins) cannot be read: not TOML")
        assert "pin file   uv.lock ([layout] pins) cannot be read: not TOML" in result.stdout


def test_a_range_in_pyproject_that_the_locked_release_satisfies_is_not_a_failure(tmp_path):
    pyproject = '[project]\nname = "serving"\ndependencies = ["vllm>={}"]\n'
    base = {"workarounds.toml": manifest(), "pyproject.toml": pyproject.format("0.24"),
            "uv.lock": UV_LOCK.replace("0.33.0", "0.24.0")}
    with pull_request(tmp_path, base, {"pyproject.toml": pyproject.format("0.25"),
                                               "uv.lock": UV_LOCK.replace("0.33.0", "0.25.0")}) \
            as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        [body] = comments(step, pr.number)
        assert "`uv.lock` moves vLLM 0.24.0 to **vLLM 0.25.0**" in body and "not checked" not in body


def padded_lock(version: str, size: int) -> str:
    """A uv.lock of about ``size`` characters: many packages, then vLLM."""
    one = '[[package]]\nname = "dep-{n}"\nversion = "1.0.{n}"\nsource = {{ registry = "https://pypi.org/simple" }}\n\n'
    packages, count = [], 0
    while sum(map(len, packages)) < size:
        packages.append(one.format(n=count))
        count += 1
    return "version = 1\n\n" + "".join(packages) + UV_LOCK.split("\n\n", 1)[1].replace("0.33.0", version)


def test_a_lock_over_the_contents_apis_limit_is_read_from_its_blob(tmp_path):
    from support.fakegithub import CONTENTS_LIMIT

    base = {"workarounds.toml": manifest(), "uv.lock": padded_lock("0.24.0", CONTENTS_LIMIT + 4096)}
    with pull_request(tmp_path, base, {"uv.lock": padded_lock("0.25.0", CONTENTS_LIMIT + 4096)}) \
            as (repo, pr, step, env):
        assert step.run(check_script(), **env).returncode == 0
        [body] = comments(step, pr.number)
        assert "`uv.lock` moves vLLM 0.24.0 to **vLLM 0.25.0**" in body


def test_a_pin_file_over_the_bound_is_not_downloaded_and_is_said(tmp_path):
    from tracker.model.pin_contents import MAX_BYTES

    base = {"workarounds.toml": manifest(), "requirements.txt": "vllm==0.24.0\n"}
    with pull_request(tmp_path, base, {"requirements.txt": "vllm==0.25.0\n" + "#" * MAX_BYTES}) \
            as (repo, pr, step, env):
        result = step.run(check_script(), **env)
        assert result.returncode == 0, result.stdout + result.stderr
        [body] = comments(step, pr.number)
        assert "requirements.txt cannot be read at the PR" in body and "larger than 8 MiB: not read" in body
        assert not any("/git/blobs/" in hit.path for hit in step.server.log)


def test_a_pin_file_whose_includes_the_request_budget_stops_short_of_fails_closed_and_is_named(tmp_path):
    """Includes spend the run's one request budget as pin files do (one request per file at each commit):
    four pin files of 31 files each cost 248, so the budget (``REQUESTS``) stops short of the last one,
    which is named as not checked (the step fails), never half read and passed."""
    from tracker.retire.pin_moves import REQUESTS

    includes = 30
    base = {"workarounds.toml": manifest()}
    for pin in range(4):
        folder = f"inc/{pin}"
        base |= {f"{folder}/{index:02}.txt": "fastapi\n" for index in range(includes)}
        base[f"requirements-{pin}.txt"] = "".join(f"-r {folder}/{index:02}.txt\n" for index in range(includes))
    changed = {f"requirements-{pin}.txt": base[f"requirements-{pin}.txt"] + "vllm==0.25.0\n" for pin in range(4)}
    base |= {path: text.replace("vllm==0.25.0", "vllm==0.24.0") for path, text in changed.items()}
    assert 4 * 2 * (includes + 1) > REQUESTS > 3 * 2 * (includes + 1)
    with pull_request(tmp_path, base, changed) as (repo, pr, step, env):
        step.server.reset_log()
        result = step.run(check_script(), **env)
        assert result.returncode == 4, result.stdout + result.stderr
        assert step.server.count("/repos/<owner>/<repo>/contents/<path:path>") <= REQUESTS + 1  # + the manifest
        [unread] = [line for line in result.stdout.splitlines() if line.startswith("unchecked  ")]
        assert unread == (f"unchecked  requirements-3.txt: not checked: not read: the check spends at most {REQUESTS} "
                          "requests reading the files of one PR (one per file at each of its base and head), and 1 "
                          "of its pin files are past it")
        [body] = comments(step, pr.number)
        assert "`requirements-0.txt`, `requirements-1.txt`, `requirements-2.txt` move vLLM 0.24.0 to **vLLM 0.25.0**" \
            in body
        assert "- `requirements-3.txt`: not read:" in body


# ------------------------------------------------------------------------------------ the look-ahead


@pytest.fixture
def plain_manifest(tmp_path):
    from tracker.model import reader

    path = tmp_path / "workarounds.toml"
    path.write_text(manifest())
    return reader.load(path)


@pytest.mark.parametrize("path", list(PIN_FILES))
def test_the_look_ahead_finds_the_pin_in_each_pin_file(plain_manifest, path):
    files = {path: PIN_FILES[path]("0.32.0"), "README.md": "vllm==0.1.0\n"}
    found = read_pins(plain_manifest, files, files.__getitem__)
    assert (str(found.release), found.path, found.notices) == ("0.32.0", path, [])


def test_the_look_ahead_reads_includes_says_a_link_and_an_unreadable_pin_file_and_takes_no_decoy(plain_manifest):
    files = {"requirements.txt": "-r requirements/serving.txt\n", "requirements/serving.txt": hashed("0.32.0"),
             "requirements-link.txt": "/etc/passwd", "requirements-bad.txt": "x"}

    def read(path: str) -> str:
        if path == "requirements-bad.txt":  # as the bot's blob reader says a blob that is not UTF-8
            raise StepFailed(f"{path} is not UTF-8")
        return files[path]

    decoy = {"tests/fixtures/uv.lock": UV_LOCK.replace("0.33.0", "0.1.0")}  # another project's lock, not a pin file
    found = read_pins(plain_manifest, {**files, **decoy}, read, links=["requirements-link.txt"])
    assert (str(found.release), found.path) == ("0.32.0", "requirements.txt")
    assert found.notices == ["requirements-bad.txt cannot be read: requirements-bad.txt is not UTF-8",
                             "requirements-link.txt cannot be read: a symbolic link: not followed"]
