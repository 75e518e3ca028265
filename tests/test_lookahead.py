"""The weekly run looks ahead: the newest vLLM release on the package index, checked against the
manifest and its census taken since the release the repository pins, as one section of the
dashboard issue.

The world: the frozen repository on the stand-in GitHub (real PyGithub), pinning vLLM 0.99.0 in
its ``requirements.txt``; the stand-in package index on loopback (real pip) serving small vLLM
sdists built here. ``retire --open-prs`` runs as a maintainer runs it, in a child process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from packaging.version import Version
from support.fakegithub import FakeGitHub
from support.fakegithub_git import install, store, writes
from support.package_index import Index, pip_environment, vllm_sdist
from support.repository import FROZEN_MANIFEST, frozen
from test_retire_github import REPOSITORY, TOKEN

from tracker.model import reader
from tracker.model.manifest import Manifest
from tracker.release import archive, cache
from tracker.retire import DASHBOARD_LABEL
from tracker.retire.lookahead import look_ahead, pinned_release

PINNED = "0.99.0"
NEWEST = "0.100.0"
SITE = "vllm/platforms/xpu.py"
# An inline XPU workaround vLLM 0.100.0 brings; its sentence also carries what a stranger may
# write in a source comment: a mention and HTML, which the dashboard must show as text.
BROUGHT = ("import torch\nfrom vllm.platforms import current_platform\n\n\n"
           "def setup(device):\n    if current_platform.is_xpu():\n"
           "        # Workaround for pytorch/pytorch#123456 seen by @octocat <img src=x onerror=alert(1)>: remove "
           "once torch 2.16 ships.\n        torch.xpu.synchronize()\n    return device\n")


class World:
    def __init__(self, server: FakeGitHub, index: Index, tmp_path: Path) -> None:
        self.server, self.index = server, index
        install(server)
        self.project = server.add_repo(REPOSITORY)
        self.project.commit("The project, pinning vLLM", files={**frozen(), "requirements.txt": f"vllm=={PINNED}\n"})
        self.cache = tmp_path / "cache"

    def run(self, *options: str, look_ahead: bool = True, summary: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("XPU_WORKAROUNDS", "GITHUB", "PIP_")) and "proxy" not in key.lower()}
        env.update({"GITHUB_API_URL": self.server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
                    "XPU_WORKAROUNDS_CACHE_DIR": str(self.cache), **pip_environment(self.index),
                    "XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL": "0"})  # the stand-in has no secondary rate limits
        if summary is not None:
            env["GITHUB_STEP_SUMMARY"] = str(summary)
        self.server.settle()
        self.server.reset_log()
        command = ["retire", "--open-prs", "--repo", REPOSITORY, "--no-refresh", *(["--look-ahead"] * look_ahead)]
        return subprocess.run([sys.executable, "-m", "tracker.commands", *command, *options], capture_output=True,
                              text=True, env=env, timeout=300)

    def dashboard(self) -> str:
        [issue] = [i for i in store(self.server).issues.get(REPOSITORY.lower(), {}).values()
                   if DASHBOARD_LABEL in i.labels]
        return str(issue.body)

    def downloads(self) -> list[str]:
        return [path for path in self.index.requests if path.startswith("/files/")]


@pytest.fixture
def world(tmp_path):
    index = Index()
    try:
        with FakeGitHub() as server:
            yield World(server, index, tmp_path)
    finally:
        index.close()


def section(body: str) -> str:
    start = body.index("### Next vLLM release")
    return body[start:body.index("Kept current by", start)]


def test_a_new_release_on_the_index_is_a_dashboard_section_with_the_workarounds_it_brings(world):
    world.index.publish(NEWEST, vllm_sdist(NEWEST, {SITE: BROUGHT}))
    result = world.run("--json")
    assert result.returncode == 0, result.stderr
    ahead = json.loads(result.stdout)["next_release"]
    assert (ahead["newest"], ahead["pinned"], ahead["pin_file"], ahead["failure"]) == (NEWEST, PINNED,
                                                                                        "requirements.txt", None)
    assert [(site["file"], site["references"]) for site in ahead["new_sites"]] == [(SITE, ["pytorch/pytorch#123456"])]
    assert ahead["gone_sites"] == []
    shown = section(world.dashboard())
    assert f"**vLLM {NEWEST}** is the newest release on the package index" in shown
    assert f"this repository pins vLLM {PINNED} (pinned in `requirements.txt`)" in shown
    assert f"Inline XPU workarounds it brings since vLLM {PINNED}: 1:" in shown
    assert f"- `{SITE}:6-8` (`pytorch/pytorch#123456`): Workaround for" in shown
    assert f"Inline XPU workarounds it drops since vLLM {PINNED}: 0." in shown
    assert (f"Not tracked, and naming an upstream reference, in vLLM {NEWEST}: 1. `xpu-workarounds census "
            f"vllm=={NEWEST} --adopt` prints the `[[tracked]]` entries a maintainer would add for them:\n\n"
            f"- `{SITE}:6-8` (`pytorch/pytorch#123456`): Workaround for") in shown
    # The stand-in sdists hold none of the workarounds' targets: every one is drift at the new release.
    assert "**Drift** (" in shown and "vanished" in shown


def test_what_the_release_says_is_shown_as_text_never_as_a_mention_or_html(world):
    world.index.publish(NEWEST, vllm_sdist(NEWEST, {SITE: BROUGHT}))
    assert world.run().returncode == 0
    shown = section(world.dashboard())
    assert "@octocat" not in shown and "@&#8203;octocat" in shown
    assert "\\<img" in shown and not re.search(r"(?<!\\)<img", shown)


def test_an_idle_week_writes_nothing_and_downloads_nothing_again(world):
    world.index.publish(NEWEST, vllm_sdist(NEWEST, {SITE: BROUGHT}))
    assert world.run().returncode == 0
    fetched = len(world.downloads())
    assert fetched == 2  # the newest release and the pinned one, each once
    idle = world.run()
    assert idle.returncode == 0, idle.stderr
    assert writes(world.server) == 0
    assert len(world.downloads()) == fetched  # both came from the release cache


def test_thousands_of_untracked_sites_are_counted_in_the_dashboard_and_listed_whole_in_the_summary(world, tmp_path):
    from support.fakegithub_git import BODY_LIMIT

    many = "from vllm.platforms import current_platform\n" + "".join(
        f"\n\nif current_platform.is_xpu():\n    # Remove once torch ships pytorch/pytorch#{190000 + n}\n"
        f"    npid_{n} = 1\n" for n in range(3000))
    world.index.publish(NEWEST, vllm_sdist(NEWEST, {"vllm/lora/many.py": many}))
    summary = tmp_path / "summary.md"
    result = world.run(summary=summary)
    assert result.returncode == 0, result.stderr
    body = world.dashboard()  # the stand-in refuses a longer body, as GitHub does
    assert len(body) <= BODY_LIMIT
    shown = section(body)
    assert f"Inline XPU workarounds it brings since vLLM {PINNED}: 3000:" in shown
    assert (f"Not tracked, and naming an upstream reference, in vLLM {NEWEST}: 3000. `xpu-workarounds census "
            f"vllm=={NEWEST} --adopt` prints the `[[tracked]]` entries a maintainer would add for them:") in shown
    assert (f"- and 2980 more: the whole list is in the run's step summary; `xpu-workarounds census vllm=={NEWEST} "
            f"--since vllm=={PINNED}` lists them") in shown
    assert "- and 2980 more: the whole list is in the run's step summary\n" in shown
    whole = summary.read_text()
    assert whole.count("(`pytorch/pytorch#192999`)") == 2  # brought, and not tracked: every site, twice
    assert "pytorch/pytorch#192999" not in body


def counted_reads(monkeypatch) -> tuple[Counter[str], Counter[str]]:
    """How many times each release's archive is read (``archive.members``, what every unpacking reads
    it with) and hashed (``cache.sha256_of``: verified in the release cache, or recorded there), by
    file name, from now on in this process."""
    read: Counter[str] = Counter()
    hashed: Counter[str] = Counter()
    members, sha256_of = archive.members, cache.sha256_of

    def reading(path: Path, *args, **options):
        read[path.name] += 1
        return members(path, *args, **options)

    def hashing(path: Path) -> str:
        hashed[path.name] += 1
        return sha256_of(path)

    monkeypatch.setattr(archive, "members", reading)
    monkeypatch.setattr(cache, "sha256_of", hashing)
    return read, hashed


def test_a_look_ahead_reads_and_hashes_each_release_once(tmp_path, monkeypatch):
    """The newest release checked and its census taken, the pinned one checked and its census taken,
    the two censuses compared: each release opened once, downloaded into the release cache (its sdist
    read and hashed once, to make its reading, which is then hashed to be recorded and read once) and
    again from it (its reading alone, hashed and read once)."""
    index = Index()  # it serves the pinned release
    try:
        index.publish(NEWEST, vllm_sdist(NEWEST, {SITE: BROUGHT}))
        for name, value in {**pip_environment(index), "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")}.items():
            monkeypatch.setenv(name, value)
        manifest = reader.load(FROZEN_MANIFEST)
        readings = {f"vllm-{NEWEST}.zip": 1, f"vllm-{PINNED}.zip": 1}
        for run, each_once in (("downloaded", {**readings, f"vllm-{NEWEST}.tar.gz": 1, f"vllm-{PINNED}.tar.gz": 1}),
                               ("from the release cache", readings)):
            read, hashed = counted_reads(monkeypatch)
            found = look_ahead(manifest, Version(PINNED), "requirements.txt", newest=lambda: Version(NEWEST))
            assert (found.failure, found.notes) == (None, []) and found.checked and found.old, run
            assert [c.site.file for c in found.sites.new] == [SITE] and found.sites.gone == [], run
            assert (read, hashed) == (each_once, each_once), run
        assert len([path for path in index.requests if path.startswith("/files/")]) == 2
    finally:
        index.close()


def test_a_release_that_drops_a_workaround_says_so(world):
    world.index.publish(PINNED, vllm_sdist(PINNED, {SITE: BROUGHT}))  # the pinned release carries it ...
    world.index.publish(NEWEST, vllm_sdist(NEWEST))  # ... the newest no longer
    assert world.run().returncode == 0
    shown = section(world.dashboard())
    assert f"Inline XPU workarounds it brings since vLLM {PINNED}: 0." in shown
    assert f"Inline XPU workarounds it drops since vLLM {PINNED}: 1:" in shown


def test_when_the_pin_is_the_newest_release_nothing_is_ahead_and_nothing_is_downloaded(world):
    assert world.run().returncode == 0
    assert f"vLLM {PINNED}, the newest release on the package index, is no newer than the pin" in world.dashboard()
    assert world.downloads() == []


def test_an_index_that_cannot_be_reached_is_said_in_the_section_and_the_rest_of_the_run_is_done(world):
    world.index.close()
    result = world.run()
    assert result.returncode == 4
    assert "Traceback" not in result.stderr
    assert "next vLLM release: the package index could not be asked" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == ("xpu-workarounds: error: some steps failed (see above); "
                                                      "the others were done")
    body = world.dashboard()  # the dashboard was still opened, every workaround in it
    assert "| `cudagraph-profile-skip` |" in body
    assert "The newest vLLM release could not be looked at: the package index could not be asked" in section(body)


def test_without_look_ahead_the_index_is_not_asked_and_the_dashboard_has_no_such_section(world):
    world.index.publish(NEWEST, vllm_sdist(NEWEST, {SITE: BROUGHT}))
    result = world.run("--json", look_ahead=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["next_release"] is None
    assert "Next vLLM release" not in world.dashboard()
    assert world.index.requests == []


def pin_of(files: dict[str, str]) -> tuple[str | None, str | None]:
    pin, path = pinned_release(reader.load(FROZEN_MANIFEST), files, files.__getitem__)
    return (str(pin) if pin else None), path


def test_a_pyproject_deeper_in_the_tree_is_another_projects_never_the_repositorys_pin():
    decoy = '[project]\nname = "fixture"\ndependencies = ["vllm==0.1.0"]\n'
    files = {"a/pyproject.toml": decoy, "tests/fixtures/old/pyproject.toml": decoy, "requirements.txt": "vllm==0.99.0\n"}
    assert pin_of(files) == ("0.99.0", "requirements.txt")
    assert pin_of({"a/pyproject.toml": decoy}) == (None, None)


def test_where_the_pin_files_disagree_the_oldest_pin_is_compared_with():
    files = {"requirements.txt": "vllm==0.99.0\n", "requirements-xpu.txt": "vllm==0.98.1\n",
             "pyproject.toml": '[project]\nname = "x"\ndependencies = ["vllm==0.99.0"]\n', "README.md": "vllm==0.1.0\n"}
    assert pin_of(files) == ("0.98.1", "requirements-xpu.txt")


def test_the_pin_is_read_from_the_files_layout_pins_names_the_oldest_where_they_disagree(world):
    """A serving repository that declares its pin files under requirements/: the look-ahead reads them,
    not the root's requirements.txt, and compares with the oldest of their pins."""
    older = "0.98.0"
    declared = FROZEN_MANIFEST.read_text(encoding="utf-8") + '\n[layout]\npins = ["requirements/*.txt"]\n'
    world.project.commit("Pins under requirements/, declared", files={
        "workarounds.toml": declared, "requirements/serving.txt": f"vllm=={PINNED}\nfastapi\n",
        "requirements/batch.txt": f"vllm=={older}\nray\n", "requirements.txt": "vllm==0.1.0\n"})
    world.index.publish(older, vllm_sdist(older))
    world.index.publish(NEWEST, vllm_sdist(NEWEST, {SITE: BROUGHT}))
    result = world.run("--json")
    assert result.returncode == 0, result.stderr
    ahead = json.loads(result.stdout)["next_release"]
    assert (ahead["newest"], ahead["pinned"], ahead["pin_file"], ahead["notes"]) == (NEWEST, older,
                                                                                      "requirements/batch.txt", [])
    assert f"this repository pins vLLM {older} (pinned in `requirements/batch.txt`)" in section(world.dashboard())
    assert f"/files/vllm-{older}.tar.gz" in world.downloads()


def manifest_with(tmp_path: Path, layout: str) -> Manifest:
    path = tmp_path / "workarounds.toml"
    path.write_text(FROZEN_MANIFEST.read_text(encoding="utf-8") + layout, encoding="utf-8")
    return reader.load(path)


def test_a_declared_glob_reads_one_folder_and_a_glob_that_matches_nothing_finds_no_pin(tmp_path):
    manifest = manifest_with(tmp_path, '\n[layout]\npins = ["requirements/*.txt", "constraints/*.in"]\n')
    files = {"requirements/serving.txt": "vllm==0.99.0\n", "requirements/gpu/cuda.txt": "vllm==0.1.0\n",
             "requirements.txt": "vllm==0.2.0\n", "pyproject.toml": '[project]\ndependencies = ["vllm==0.3.0"]\n'}
    assert pinned_release(manifest, files, files.__getitem__) == (Version("0.99.0"), "requirements/serving.txt")
    elsewhere = {"requirements.txt": "vllm==0.2.0\n", "constraints.in": "vllm==0.2.0\n"}
    assert pinned_release(manifest, elsewhere, elsewhere.__getitem__) == (None, None)

