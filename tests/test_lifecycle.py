"""Time passing, over real HTTP: the weekly workflow's own command, run the way the schedule
runs it, against the stand-in GitHub (tests/support/fakegithub.py) with the real PyGithub, while
upstream moves.

The world: the frozen repository (tests/support/repository.py) on the stand-in, its manifest
current with upstream (every fact ``upstream --write`` would record is recorded) under a
floor policy (the latest 15 vLLM minor releases, and the torch and vllm-xpu-kernels floors
vLLM's oldest supported release pins for XPU), nothing retirable; upstream is the real history of every reference
(tests/support/upstream_history.py) up to vLLM v0.33.0, with torch v2.15.0 not yet tagged. Then:

1. upstream moves: torch tags v2.15.0 (it contains pytorch#192495, event-blocking-kwarg's
   root fix), vLLM tags v0.34.0, and vllm#47253 (pp-broadcast-sync's fix) is reverted on
   vLLM's main branch by a plain ``git revert`` commit. The next run opens one facts PR
   carrying exactly those changes and nothing else; the floor moves to vLLM 0.20.0, which
   still needs every workaround.
2. a maintainer merges the facts PR through the API, and vLLM tags v0.35.0: the floor moves
   to vLLM 0.21.0 (torch 2.11.0 pinned by it), so cudagraph-profile-skip is needed by no
   supported stack, and the next run opens its removal PR, citing the evidence.
3. nothing happens: the next run sends no write.

vLLM's releases also reach the package index (the stand-in on loopback, tests/support/package_index.py,
read by real pip): each week's dashboard looks ahead at the newest one, and the idle week downloads
nothing. Each run's requests are counted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import github
import pytest
from github import Auth
from support import upstream_history
from support.fakegithub import FakeGitHub
from support.fakegithub_git import install, store, writes
from support.package_index import Index, pip_environment, vllm_sdist
from support.repository import frozen
from test_retire_github import REPOSITORY, TOKEN
from test_workflow import ACTION, retire_script

from tracker import upstream
from tracker.retire import BRANCH_PREFIX, DASHBOARD_LABEL, DOCS_PATH, FACTS_BRANCH, MANIFEST_PATH, read_marker
from tracker.retire.removal import manifest_from_text
from tracker.upstream.settings import ClientSettings

POLICY = "\n[support.policy]\nvllm-minors = 15\nxpu-pins = true\n"
RETIRED = "cudagraph-profile-skip"
PERSON_TOKEN = "ghp_a-maintainers-own-token"


def with_policy(text: str) -> str:
    head, sep, rest = text.partition("[support]\n")
    table, blank, tail = rest.partition("\n\n")
    return head + sep + table + "\n" + POLICY + blank + tail


def retire_step() -> tuple[str, set[str]]:
    """The action's retire step (the workflow calls the action): its script and the names of the
    environment it sets."""
    text = ACTION.read_text()
    script = textwrap.dedent(retire_script())
    step = text[text.rindex("- name:", 0, text.index("retire --open-prs")):text.index("retire --open-prs")]
    env_block = step[step.index("env:"):step.index("run:")]
    return script, set(re.findall(r"^\s+([A-Z_]+):", env_block, flags=re.M))


class World:
    def __init__(self, server: FakeGitHub, index: Index, tmp_path: Path) -> None:
        self.server = server
        self.index = index  # vLLM's releases on the package index, v0.33.0 the newest
        install(server)
        upstream_history.seed(server)
        self.vllm = server.repo("vllm-project", "vllm")
        self.torch = server.repo("pytorch", "pytorch")
        self.later_tags = {"torch": self.torch.tags.pop("v2.15.0"), "vllm": self.vllm.tags.pop("v0.34.0")}
        self.cache = tmp_path / "actions-cache"  # what actions/cache restores and saves between weeks
        self.project = server.add_repo(REPOSITORY)
        files = frozen()
        # Before torch v2.15.0 was tagged, the manifest could not say pytorch#192495 was released in it.
        unreleased = files[MANIFEST_PATH].replace('released_in = "torch>=2.15.0"\n', "")
        files[MANIFEST_PATH] = self.current(with_policy(unreleased), tmp_path / "scratch")
        self.project.commit("The project, its manifest current with upstream", files=files)
        self.person = github.Github(auth=Auth.Token(PERSON_TOKEN), base_url=server.base_url, retry=None,
                                    seconds_between_requests=None, seconds_between_writes=None)

    def current(self, text: str, scratch: Path) -> str:
        """``text`` with every fact upstream knows now written in (what ``upstream --write`` does)."""
        report = upstream.track(manifest_from_text(text), mode="refresh", cache_dir=scratch,
                                client=ClientSettings(token=TOKEN, base_url=self.server.base_url, retries=0))
        return upstream.updated_text(text, report)[0]

    # ---- the schedule ---------------------------------------------------------------
    def week(self) -> dict:
        """One scheduled run of the workflow's retire step, its JSON outcome and its requests."""
        script, names = retire_step()
        assert names == {"XPU_WORKAROUNDS_GITHUB_TOKEN", "XPU_WORKAROUNDS_CACHE_DIR", "REPOSITORY", "BASE",
                         "MANIFEST", "DOCS", "DRY_RUN", "ONLY", "LOOK_AHEAD", "PROOFS", "INDEX_URL"}
        # The proof job's finding: every removal's copy passed this repository's tests (what a removal
        # whose copy fails does: tests/test_retire_github.py).
        shipped = manifest_from_text(self.project.commits[self.project.branches["main"]].files[MANIFEST_PATH]).ids
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("XPU_WORKAROUNDS", "GITHUB", "PIP_")) and "proxy" not in key.lower()}
        env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "GITHUB_API_URL": self.server.base_url,  # set by GitHub Actions on every runner
                    "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN, "GITHUB_TOKEN": "ghs_the-jobs-own-token",
                    "XPU_WORKAROUNDS_CACHE_DIR": str(self.cache), "REPOSITORY": REPOSITORY,
                    # The workflow's inputs on a scheduled run (which has no dispatch inputs).
                    "BASE": "", "MANIFEST": "workarounds.toml", "DOCS": "docs/workarounds.md",
                    "DRY_RUN": "false", "ONLY": "", "LOOK_AHEAD": "true", **pip_environment(self.index),
                    "PROOFS": json.dumps({"proven": list(shipped), "failed": {}}),
                    "INDEX_URL": "",  # the index-url input left empty: pip's own settings (the stand-in index)
                    # Not the workflow's: the stand-in has no secondary rate limits (tests/conftest.py).
                    "XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL": "0"})
        self.server.settle()
        self.server.reset_log()
        self.index.requests.clear()
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=300)
        self.server.settle()
        assert result.returncode == 0, result.stdout + result.stderr
        assert TOKEN not in result.stdout + result.stderr
        return {"lines": result.stdout.splitlines(), "writes": writes(self.server), "requests": self.requests(),
                "downloads": sum(1 for path in self.index.requests if path.startswith("/files/"))}

    def requests(self) -> dict[str, int]:
        log = self.server.log
        ours = [hit for hit in log if hit.path.startswith(f"/repos/{REPOSITORY}")]
        theirs = [hit for hit in log if not hit.path.startswith(f"/repos/{REPOSITORY}")]
        return {"upstream": len(theirs), "upstream_not_304": sum(1 for hit in theirs if hit.status != 304),
                "repository_reads": sum(1 for hit in ours if hit.method == "GET"),
                "writes": sum(1 for hit in ours if hit.method not in ("GET", "HEAD"))}

    # ---- upstream moves ------------------------------------------------------------
    def upstream_moves(self) -> str:
        self.torch.tags["v2.15.0"] = self.later_tags["torch"]
        self.vllm.tags["v0.34.0"] = self.later_tags["vllm"]
        self.index.publish("0.34.0", vllm_sdist("0.34.0"))
        pr = self.vllm.pulls[47253]
        revert = self.vllm.commit(f'Revert "{pr.title} (#47253)"\n\nThis reverts commit {pr.merge_commit_sha}.',
                                  date="2026-11-30T09:00:00", files={"vllm/xpu_47253.py": None})
        self.vllm.event(47253, "referenced", "2026-11-30T09:00:00", commit_id=revert)
        return revert

    def vllm_tags(self, tag: str) -> None:
        self.vllm.branch(f"releases/{tag}", "main")
        self.vllm.tag(tag, f"releases/{tag}")
        version = tag.removeprefix("v")
        self.index.publish(version, vllm_sdist(version))

    # ---- looking -------------------------------------------------------------------
    def pulls(self, branch: str):
        return [pr for pr in self.project.pulls.values() if pr.head == branch]

    @property
    def manifest_text(self) -> str:
        return self.project.commits[self.project.branches["main"]].files[MANIFEST_PATH]

    def dashboard(self):
        [issue] = [i for i in store(self.server).issues.get(REPOSITORY.lower(), {}).values()
                   if DASHBOARD_LABEL in i.labels]
        return issue


@pytest.fixture
def world(tmp_path):
    index = Index(version="0.33.0")
    try:
        with FakeGitHub() as server:
            yield World(server, index, tmp_path)
    finally:
        index.close()


def test_time_passing_facts_pr_then_removal_pr_then_an_idle_week(world):
    # Week 0: the manifest is current, nothing is retirable: only the dashboard is opened.
    first = world.week()
    assert not world.pulls(FACTS_BRANCH) and not [b for b in world.project.branches if b.startswith(BRANCH_PREFIX)]
    assert any("floor" in line and "vllm 0.19.0: latest 15 minors as of v0.33.0" in line for line in first["lines"])
    assert world.dashboard().state == "open"
    assert "**vLLM 0.33.0** is the newest release on the package index" in world.dashboard().body

    # Week 1: upstream moves.
    revert = world.upstream_moves()
    moved = world.week()
    [facts_pr] = world.pulls(FACTS_BRANCH)
    assert facts_pr.state == "open"
    head = world.project.commits[world.project.branches[FACTS_BRANCH]]
    base = world.project.commits[head.parents[0]]
    assert head.parents == [world.project.branches["main"]]
    changed = {path for path in set(head.files) | set(base.files) if head.files.get(path) != base.files.get(path)}
    assert changed == {MANIFEST_PATH, DOCS_PATH}
    before = manifest_from_text(base.files[MANIFEST_PATH])
    after = manifest_from_text(head.files[MANIFEST_PATH])
    differences = {(w.id, ref.ref, field, str(getattr(ref, field)), str(getattr(new, field)))
                   for w in before.workarounds for ref, new in zip(w.upstream, after.get(w.id).upstream, strict=True)
                   for field in ("state", "commit", "released_in") if getattr(ref, field) != getattr(new, field)}
    assert differences == {
        ("event-blocking-kwarg", "pytorch/pytorch#192495", "released_in", "None", "torch>=2.15.0"),
        ("pp-broadcast-sync", "vllm-project/vllm#47253", "state", "merged", "reverted"),
        ("pp-broadcast-sync", "vllm-project/vllm#47253", "released_in", "vllm>=0.25.0", "None"),
    }
    assert f"reverted by commit {revert[:12]}" in facts_pr.body
    assert "v2.15.0 is the first release tag containing it" in facts_pr.body
    assert read_marker(facts_pr.body).kind == "facts"
    assert not [b for b in world.project.branches if b.startswith(BRANCH_PREFIX)]  # nothing retirable yet
    assert any("vllm 0.20.0: latest 15 minors as of v0.34.0" in line for line in moved["lines"])

    # Week 2: a maintainer merges the facts PR (through the API), and vLLM tags v0.35.0.
    world.person.get_repo(REPOSITORY).get_pull(facts_pr.number).merge(merge_method="squash")
    assert world.manifest_text == head.files[MANIFEST_PATH]
    world.vllm_tags("v0.35.0")
    retiring = world.week()
    assert [pr.state for pr in world.pulls(FACTS_BRANCH)] == ["closed"]  # merged: nothing left to record
    removal_branches = sorted(b for b in world.project.branches if b.startswith(BRANCH_PREFIX))
    assert removal_branches == [BRANCH_PREFIX + RETIRED]
    [removal] = world.pulls(BRANCH_PREFIX + RETIRED)
    assert removal.state == "open"
    assert "vllm 0.21.0: latest 15 minors as of v0.35.0" in removal.body
    assert "torch 2.11.0: pinned by vLLM 0.21.0 for XPU" in removal.body
    assert "refreshed from GitHub by the run that wrote this" in removal.body
    dashboard = world.dashboard().body
    assert f"#{removal.number} open" in dashboard and "vllm 0.21.0: latest 15 minors as of v0.35.0" in dashboard
    assert "**vLLM 0.35.0** is the newest release on the package index" in dashboard

    # Week 3: nothing happened upstream or on the base: no write at all.
    idle = world.week()
    assert idle["writes"] == 0
    assert idle["downloads"] == 0  # vLLM 0.35.0 looked at again from the release cache

    counts = {name: run["requests"] for name, run in
              (("current", first), ("moved", moved), ("retiring", retiring), ("idle", idle))}
    assert counts == EXPECTED_REQUESTS, json.dumps(counts)


# Requests per run. "upstream": requests about the upstream repositories. Upstream facts go
# through GitHub's GraphQL API (tracker/upstream/prefetch.py), batched: week 0 starts from an
# empty actions/cache and learns everything in 3 queries (REST: 61 requests). Afterwards the
# answers that can change (pull requests and timelines, tag lists, vLLM's pins on main) are
# asked again in one query, plus one for what is new (the compares against a new tag, vLLM's
# XPU pins at the new oldest supported release); compares, commits and files at a tag are
# never asked again. GraphQL has no conditional requests, so an idle week costs one query
# (1 point of a GITHUB_TOKEN's 1,000 an hour) where REST's 35 revalidations cost none; and no write.
# The three issues the [[tracked]] entries wait on (pytorch#146431, pytorch#191458, triton#8121)
# are read over REST (GraphQL's pullRequest does not answer an issue): 3 requests in week 0,
# then 3 conditional ones a week, answered 304 (no rate limit). A run that computes a removal
# reads the base's README.md once (its symptom table's row for the workaround goes with it):
# one read more in the retiring and idle weeks, and the edited README one write more. Outside the
# repository too, one GraphQL query a run asks who the token is (the issues it wrote are its own).
# Looking ahead reads the base's one pin file (pyproject.toml, which pins no vLLM) for the pinned
# release: one read a week (PIN_READS).
ISSUES = 3
WHO = 1
PIN_READS = 1
EXPECTED_REQUESTS = {
    "current": {"upstream": 3 + ISSUES + WHO, "upstream_not_304": 3 + ISSUES + WHO,
                "repository_reads": 15 + PIN_READS, "writes": 2},
    "moved": {"upstream": 2 + ISSUES + WHO, "upstream_not_304": 2 + WHO, "repository_reads": 16 + PIN_READS,
              "writes": 9},
    "retiring": {"upstream": 2 + ISSUES + WHO, "upstream_not_304": 2 + WHO, "repository_reads": 17 + PIN_READS,
                 "writes": 9},
    "idle": {"upstream": 1 + ISSUES + WHO, "upstream_not_304": 1 + WHO, "repository_reads": 19 + PIN_READS,
             "writes": 0},
}


def retire_json(world: World) -> dict:
    """``retire --open-prs --json`` as a maintainer runs it by hand, between the weekly runs."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("XPU_WORKAROUNDS", "GITHUB")) and "proxy" not in key.lower()}
    env.update({"GITHUB_API_URL": world.server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
                "XPU_WORKAROUNDS_CACHE_DIR": str(world.cache), "XPU_WORKAROUNDS_GITHUB_WRITE_INTERVAL": "0"})
    result = subprocess.run([sys.executable, "-m", "tracker.commands", "retire", "--open-prs", "--repo", REPOSITORY,
                             "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def test_retire_json_carries_the_facts_pr_the_floors_with_their_origin_and_the_verdict_evidence(world):
    world.upstream_moves()
    moved = retire_json(world)
    [facts_pr] = world.pulls(FACTS_BRANCH)
    assert moved["facts_pr"] == {"id": "upstream-facts", "action": "opened", "pr": facts_pr.number,
                                 "branch": FACTS_BRANCH, "detail": f"opened #{facts_pr.number}"}
    assert moved["facts"]["source"] == "live" and moved["facts"]["unchecked"] == []
    assert {"component": "vllm", "version": "0.20.0", "origin": "latest 15 minors as of v0.34.0"} in moved["floors"]
    assert moved["retirable"] == []

    world.person.get_repo(REPOSITORY).get_pull(facts_pr.number).merge(merge_method="squash")
    world.vllm_tags("v0.35.0")
    retiring = retire_json(world)
    assert retiring["facts_pr"] is None  # merged, and the base has caught up: nothing to record, no action
    assert {"component": "torch", "version": "2.11.0", "origin": "pinned by vLLM 0.21.0 for XPU"} in retiring["floors"]
    [entry] = retiring["retirable"]
    assert entry["id"] == RETIRED and "0.21.0" in entry["evidence"]
    [action] = [a for a in retiring["actions"] if a["id"] == RETIRED]
    assert action["action"] == "opened" and action["branch"] == BRANCH_PREFIX + RETIRED
