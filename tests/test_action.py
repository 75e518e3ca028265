"""The action in other repositories, over real HTTP with real PyGithub on the stand-in GitHub.

Each test runs the action's own step script (``action.yml``) with the console script of this
environment, configured only through the environment as the action configures it, with the
files GitHub Actions gives a step (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``) and
``GITHUB_ACTIONS=true``; everything the run learns about the repository it reads through the
API, every change it makes goes through the API.

- An adopter laid out otherwise: manifest ``xpu/workarounds.toml``, modules in
  ``xpu/workarounds/``, tests in ``xpu/tests/``, no docs folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import upstream_history
from support.fakegithub import FakeGitHub
from support.fakegithub_git import install, store, writes
from support.manifests import checked, loaded
from support.repository import FROZEN_MANIFEST, stand_in_module
from test_workflow import ACTION as ACTION_FILE
from test_workflow import retire_script, run_scripts

from tracker.model.manifest import Layout
from tracker.retire import BRANCH_PREFIX, DASHBOARD_LABEL, FACTS_BRANCH, FACTS_ID, read_marker, remove_entry

TOKEN = "ghs_stand-in-token-for-tests"
ADOPTER = "xpu-adopter/serving-stack"
STATIC = "static-launcher-uva"
LAYOUT = '[layout]\nworkarounds = "xpu/workarounds"\ntests = "xpu/tests"\ndocs = ""\n\n'


def floors(text: str, torch: str) -> str:
    return re.sub(r'(?m)^torch = "[^"]+"$', f'torch = "{torch}"', text, count=1)


def adopter_files(layout: str = LAYOUT) -> dict[str, str]:
    """A repository laid out as ``[layout]`` says: the frozen manifest's workarounds (torch floor
    2.14.0, so ``static-launcher-uva`` is retirable), a module and a test for each, a fixture; and
    files outside the layout that share the convention's names, which are not the bot's to touch."""
    text = FROZEN_MANIFEST.read_text(encoding="utf-8")
    text = floors(text, "2.14.0").replace("[support]\n", layout + "[support]\n", 1)
    files = {"xpu/workarounds.toml": text, "README.md": "# A serving stack\n",
             "xpu/workarounds/__init__.py": '"""Workarounds."""\n',
             "xpu/tests/fixtures/static_launcher_uva/offload_config.json": '{"offload": "uva"}\n',
             # Outside the layout: same names, someone else's files.
             "tests/test_workaround_static_launcher_uva.py": "def test_theirs():\n    pass\n",
             "workarounds/static_launcher_uva.py": "# not a workaround module of this repository\n"}
    for w in loaded(text).workarounds:
        name = w.module.removeprefix("workarounds.")
        files[f"xpu/workarounds/{name}.py"] = stand_in_module(w.symptom)
        files[f"xpu/tests/test_workaround_{name}.py"] = "def test_switches_off():\n    pass\n"
    return files



class Step:
    """The action's retire step, run as GitHub Actions runs it, against one repository."""

    def __init__(self, server: FakeGitHub, tmp_path: Path, repository: str):
        self.server = server
        self.repository = repository
        self.tmp_path = tmp_path
        self.cache_dir = tmp_path / "cache"
        self.runs = 0

    def run(self, script: str, **inputs: str) -> subprocess.CompletedProcess[str]:
        self.runs += 1
        self.output = self.tmp_path / f"output-{self.runs}"
        self.summary = self.tmp_path / f"summary-{self.runs}"
        self.output.write_text("")
        env = {key: value for key, value in os.environ.items()
               if key not in ("GITHUB_TOKEN", "XPU_WORKAROUNDS_MANIFEST") and "proxy" not in key.lower()}
        env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "GITHUB_API_URL": self.server.base_url, "XPU_WORKAROUNDS_GITHUB_TOKEN": TOKEN,
                    "XPU_WORKAROUNDS_CACHE_DIR": str(self.cache_dir), "GITHUB_ACTIONS": "true",
                    "GITHUB_OUTPUT": str(self.output), "GITHUB_STEP_SUMMARY": str(self.summary),
                    "REPOSITORY": self.repository, "BASE": "", "DRY_RUN": "false", "ONLY": "",
                    "MANIFEST": "workarounds.toml", "DOCS": "docs/workarounds.md", **inputs})
        self.server.settle()
        self.server.reset_log()
        result = subprocess.run(["bash", "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env,
                                timeout=300)
        assert TOKEN not in result.stdout + result.stderr
        return result

    def outputs(self) -> dict[str, str]:
        """GITHUB_OUTPUT read as the runner reads it: ``name<<DELIMITER`` blocks."""
        found, lines = {}, self.output.read_text().splitlines()
        index = 0
        while index < len(lines):
            name, _, delimiter = lines[index].partition("<<")
            end = lines.index(delimiter, index + 1)
            found[name] = "\n".join(lines[index + 1:end])
            index = end + 1
        return found


@pytest.fixture
def server():
    with FakeGitHub() as running:
        install(running)
        upstream_history.seed(running)
        yield running


# ------------------------------------------------------------------ another layout


@pytest.fixture
def adopter(server, tmp_path):
    repo = server.add_repo(ADOPTER)
    repo.commit("The serving stack with its XPU workarounds", files=adopter_files())
    return repo, Step(server, tmp_path, ADOPTER)


def test_an_adopter_laid_out_otherwise_gets_exactly_the_right_removal_pr(adopter):
    repo, step = adopter
    base = dict(repo.commits[repo.branches["main"]].files)
    result = step.run(retire_script(), MANIFEST="xpu/workarounds.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    [pr] = [pr for pr in repo.pulls.values() if pr.head == BRANCH_PREFIX + STATIC]
    assert pr.state == "open" and read_marker(pr.body).id == STATIC
    branch = repo.commits[repo.branches[BRANCH_PREFIX + STATIC]]
    assert branch.parents == [repo.branches["main"]]
    assert set(base) - set(branch.files) == {"xpu/workarounds/static_launcher_uva.py",
                                             "xpu/tests/test_workaround_static_launcher_uva.py",
                                             "xpu/tests/fixtures/static_launcher_uva/offload_config.json"}
    assert set(branch.files) <= set(base)  # nothing created: no docs folder appears
    changed = {path for path in branch.files if branch.files[path] != base[path]}
    assert changed == {"xpu/workarounds.toml"}
    assert branch.files["xpu/workarounds.toml"] == remove_entry(base["xpu/workarounds.toml"], STATIC)
    assert checked(branch.files["xpu/workarounds.toml"]) == []
    assert "`xpu/workarounds.toml`" in pr.body and "docs/workarounds.md" not in pr.body + branch.message
    # Beside it, only the upstream-facts PR, which edits the manifest where it is and creates nothing.
    assert sorted(p.head for p in repo.pulls.values()) == sorted([FACTS_BRANCH, BRANCH_PREFIX + STATIC])
    facts = repo.commits[repo.branches[FACTS_BRANCH]].files
    assert set(facts) == set(base) and {p for p in facts if facts[p] != base[p]} == {"xpu/workarounds.toml"}


def test_an_adopters_run_writes_the_outputs_summary_and_nothing_to_stdout_it_should_not(adopter):
    repo, step = adopter
    result = step.run(retire_script(), MANIFEST="xpu/workarounds.toml")
    assert result.returncode == 0, result.stderr
    [pr] = [pr for pr in repo.pulls.values() if pr.head == BRANCH_PREFIX + STATIC]
    [facts] = [pr for pr in repo.pulls.values() if pr.head == FACTS_BRANCH]
    [dashboard] = [i for i in store(step.server).issues[ADOPTER.lower()].values() if DASHBOARD_LABEL in i.labels]
    outputs = step.outputs()
    assert json.loads(outputs["prs"]) == [
        {"id": FACTS_ID, "number": facts.number, "action": "opened", "url": f"{repo.html}/pull/{facts.number}"},
        {"id": STATIC, "number": pr.number, "action": "opened", "url": f"{repo.html}/pull/{pr.number}"}]
    assert json.loads(outputs["retirable"]) == [STATIC]
    assert outputs["dashboard"] == str(dashboard.number)
    summary = step.summary.read_text()
    assert f"| `{STATIC}` | **retirable** |" in summary
    assert f"[#{pr.number}]({repo.html}/pull/{pr.number})" in summary
    assert "`xpu/workarounds.toml`" in dashboard.body
    # A second run: nothing new, no write, the same outputs with "unchanged".
    again = step.run(retire_script(), MANIFEST="xpu/workarounds.toml")
    assert again.returncode == 0 and writes(step.server) == 0
    assert [item["action"] for item in json.loads(step.outputs()["prs"])] == ["unchanged", "unchanged"]


def test_a_missing_manifest_is_a_configuration_error_in_one_line_with_no_write(adopter):
    repo, step = adopter
    result = step.run(retire_script())  # the default manifest input: workarounds.toml, which it lacks
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "has no workarounds.toml" in result.stderr
    assert writes(step.server) == 0 and not repo.pulls


def test_a_layout_path_the_repository_lacks_is_a_configuration_error_with_no_write(server, tmp_path):
    repo = server.add_repo(ADOPTER)
    files = adopter_files(LAYOUT.replace('docs = ""', 'docs = "site/workarounds.md"'))
    repo.commit("A layout naming a catalogue that is not there", files=files)
    result = Step(server, tmp_path, ADOPTER).run(retire_script(), MANIFEST="xpu/workarounds.toml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "has no site/workarounds.md" in result.stderr
    assert writes(server) == 0 and not repo.pulls


def test_the_docs_input_names_the_catalogue_the_prs_regenerate(server, tmp_path):
    repo = server.add_repo(ADOPTER)
    files = adopter_files(LAYOUT.replace('docs = ""\n', ""))
    files["site/workarounds.md"] = "stale\n"
    repo.commit("A catalogue where the docs input says", files=files)
    step = Step(server, tmp_path, ADOPTER)
    result = step.run(retire_script(), MANIFEST="xpu/workarounds.toml", DOCS="site/workarounds.md")
    assert result.returncode == 0, result.stdout + result.stderr
    branch = repo.commits[repo.branches[BRANCH_PREFIX + STATIC]].files
    assert branch["site/workarounds.md"].startswith("# ") and STATIC not in branch["site/workarounds.md"]
    assert "docs/workarounds.md" not in branch


def test_a_manifest_problem_is_an_annotation_at_its_file_and_line(adopter):
    repo, step = adopter
    text = repo.commits[repo.branches["main"]].files["xpu/workarounds.toml"]
    line = text.splitlines().index('workarounds = "xpu/workarounds"') + 1
    repo.commit("Break the layout", files={"xpu/workarounds.toml": text.replace(
        'workarounds = "xpu/workarounds"', 'workarounds = "../elsewhere"')})
    result = step.run(retire_script(), MANIFEST="xpu/workarounds.toml")
    assert result.returncode == 4
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert annotations == [f"::error file=xpu/workarounds.toml,line={line},title=workarounds manifest::"
                           f"layout.workarounds: '../elsewhere' is not a path relative to the repository's root "
                           f"(no leading '/', no '..')"]
    assert writes(step.server) == 0


# ------------------------------------------------------- a component from [sources]

TRITON = "intel/intel-xpu-backend-for-triton"
TRITON_FIX = "triton-block-pointer-offsets"


def seed_triton(server: FakeGitHub) -> None:
    """A fourth repository: Intel's Triton backend, tagged v3.5.0, then #5000 merged, then v3.6.0."""
    repo = server.add_repo(TRITON)
    repo.commit("Initial", files={"third_party/intel/backend.py": "# backend\n"}, date="2026-05-01T00:00:00")
    repo.tag("v3.5.0", "main")
    repo.pull("[XPU] Keep block pointer offsets in 64 bits", number=5000, created="2026-06-01T00:00:00")
    repo.merge(5000, date="2026-06-10T00:00:00", files={"third_party/intel/backend.py": "# fixed\n"})
    repo.commit("Release 3.6.0", date="2026-07-01T00:00:00")
    repo.tag("v3.6.0", "main")


def triton_manifest(sources: bool = True) -> str:
    import tomlkit
    from support.manifests import SUPPORT, workaround

    entry = workaround(TRITON_FIX, title="Split block pointer loads on XPU", vllm_carries_fix=None,
                       affected=[{"triton": ">=3.0"}],
                       upstream=[{"ref": f"{TRITON}#5000", "role": "root-fix", "state": "open"}])
    document = {"schema": 1, "support": {**SUPPORT, "triton": "3.6.0"}, "workaround": [entry, workaround()]}
    if sources:
        document["sources"] = {"triton": {"repository": TRITON, "tag": "v{version}"}}
    return tomlkit.dumps(document)


def test_a_component_a_window_names_without_a_source_is_a_lint_error():
    problems = [str(p) for p in checked(triton_manifest(sources=False))]
    assert len(problems) == 1 and "affected[0].triton: no source releases triton" in problems[0], problems
    assert checked(triton_manifest()) == []


def test_a_sources_table_naming_a_fourth_repository_is_honoured(server, tmp_path):
    from support.repository import stand_in_module

    from tracker.model.catalogue import markdown
    from tracker.retire import FACTS_BRANCH, Retirer
    from tracker.upstream.settings import ClientSettings

    seed_triton(server)
    text = triton_manifest()
    module = TRITON_FIX.replace("-", "_")
    repo = server.add_repo(ADOPTER)
    repo.commit("A stack tracking the Triton backend", files={
        "workarounds.toml": text, "docs/workarounds.md": markdown(loaded(text)),
        "workarounds/__init__.py": "", f"workarounds/{module}.py": stand_in_module("slow block loads"),
        f"tests/test_workaround_{module}.py": "def test_switches_off():\n    pass\n",
        "workarounds/main_stream_sync.py": stand_in_module("wrong tokens with pipeline parallelism")})
    settings = ClientSettings(token=TOKEN, base_url=server.base_url, retries=0, timeout=15)
    import github
    from github import Auth

    gh = github.Github(auth=Auth.Token(TOKEN), base_url=server.base_url, retry=None, timeout=15,
                       seconds_between_requests=None, seconds_between_writes=None)
    outcome = Retirer(gh, settings, ADOPTER, refresh=True, cache_dir=tmp_path / "cache").run()
    assert not outcome.failed, [a.detail for a in outcome.actions]
    # The refresh learned from the fourth repository the first release tag containing #5000 ...
    [verdict] = outcome.retirable
    assert verdict["id"] == TRITON_FIX and "triton>=3.6.0" in verdict["evidence"]
    # ... recorded it in the facts PR, and opened the removal PR judged with it.
    facts = repo.commits[repo.branches[FACTS_BRANCH]].files["workarounds.toml"]
    assert 'released_in = "triton>=3.6.0"' in facts and 'state = "merged"' in facts
    removal = repo.commits[repo.branches[BRANCH_PREFIX + TRITON_FIX]].files
    assert f"workarounds/{module}.py" not in removal and f"tests/test_workaround_{module}.py" not in removal


# ------------------------------------------------------------- an upgrade pull request

PP = "vllm/v1/worker/gpu/pp_utils.py"
CHECKED = "main-stream-sync"  # applies at vLLM 0.23-0.24; vLLM 0.25.0 carries its own fix


def vllm_sdist(links: Path, version: str, params: str, fixed: bool, more: dict[str, str] | None = None) -> None:
    """A vLLM source distribution as PyPI serves one, holding what ``check`` reads (and ``more`` files)."""
    import shutil
    import tarfile

    root = links / "src" / f"vllm-{version}"
    shutil.rmtree(root, ignore_errors=True)
    sync = "        self.main_stream.synchronize()\n" if fixed else ""
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
             "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
             "requirements/xpu.txt": "torch==2.13.0\nvllm-xpu-kernels==0.1.5\n", "vllm/__init__.py": "",
             PP: f"class PPHandler:\n    def broadcast({params}):\n{sync}        return None\n", **(more or {})}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    with tarfile.open(links / f"vllm-{version}.tar.gz", "w:gz") as archive:
        archive.add(root, arcname=root.name)


@contextlib.contextmanager
def upgrade_pull_request(tmp_path: Path, base: dict[str, str], head: dict[str, str]):
    """A repository of ``base``'s files, a PR changing ``head``'s, and a package index on disk (pip's
    --find-links) holding vLLM 0.24.0, 0.25.0 (drifted) and 0.25.1."""
    links = tmp_path / "index"
    good = "self, sampled_token_ids, num_sampled, num_rejected, input_batch"
    vllm_sdist(links, "0.24.0", good, fixed=False)
    vllm_sdist(links, "0.25.0", "self, sampled_token_ids, num_sampled, input_batch", fixed=True)  # drifted
    vllm_sdist(links, "0.25.1", good, fixed=True)
    with FakeGitHub() as running:
        install(running)
        repo = running.add_repo(ADOPTER)
        repo.commit("A stack pinning vLLM 0.24.0", files=base)
        repo.commit("Move vLLM to 0.25.0", branch="bump-vllm", files=head)
        pr = repo.pull("Move vLLM to 0.25.0", head="bump-vllm")
        pr.head_sha = repo.branches["bump-vllm"]
        yield repo, pr, Step(running, tmp_path, ADOPTER), {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links),
                                                            "PULL_REQUEST": str(pr.number), "FAIL_ON_DRIFT": "false"}


@pytest.fixture
def upgrade(tmp_path):
    """A repository pinning vllm==0.24.0 in its requirements.txt, a PR moving it to 0.25.0."""
    from support.manifests import manifest_text, workaround

    with upgrade_pull_request(tmp_path, {"workarounds.toml": manifest_text(workaround()),
                                         "requirements.txt": "vllm==0.24.0\nfastapi\n"},
                              {"requirements.txt": "vllm==0.25.0\nfastapi\n"}) as world:
        yield world


def comments(step: Step, number: int) -> list[str]:
    return [c.body for c in store(step.server).comments.get((ADOPTER.lower(), number), [])]


def test_an_upgrade_pr_gets_one_comment_updated_not_duplicated_on_a_second_push(upgrade):
    from test_workflow import check_script

    from tracker.retire.upgrade import MARKER

    repo, pr, step, env = upgrade
    first = step.run(check_script(), **env)
    assert first.returncode == 0, first.stdout + first.stderr
    [body] = comments(step, pr.number)
    assert MARKER in body and "moves vLLM 0.24.0 to **vLLM 0.25.0**" in body
    assert "**Drift** (1)" in body
    [line] = [line for line in body.splitlines() if line.startswith(f"- `{CHECKED}`: ")]
    assert line.startswith(f"- `{CHECKED}`: **drift**: drifted: vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast ")
    assert "; **stops applying** (vllm-carries-fix); **becomes retirable**" in line
    assert step.summary.read_text() == body  # the same text in the step summary
    assert [line.split("::")[1].split(" ")[0] for line in first.stdout.splitlines() if line.startswith("::")] == \
        ["warning"]  # drift is a warning without fail-on-drift
    # A second push moves the pin again: the same comment is edited, with one write.
    repo.commit("Move vLLM to 0.25.1", branch="bump-vllm", files={"requirements.txt": "vllm==0.25.1\nfastapi\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    second = step.run(check_script(), **env)
    assert second.returncode == 0, second.stderr
    [edited] = comments(step, pr.number)
    assert "**vLLM 0.25.1**" in edited and "**No drift**" in edited and MARKER in edited
    assert writes(step.server) == 1 and "updated the comment" in second.stdout
    # Nothing new: nothing written.
    third = step.run(check_script(), **env)
    assert third.returncode == 0 and writes(step.server) == 0 and len(comments(step, pr.number)) == 1


def list_items(markdown: str) -> list[str]:
    """The items of the Markdown lists in ``markdown`` as CommonMark parses it (GitHub's comments are
    CommonMark with extensions), each item's text on one line."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(markdown)
    items, depth = [], 0
    for token in tokens:
        depth += {"list_item_open": 1, "list_item_close": -1}.get(token.type, 0)
        if depth == 1 and token.type == "inline":
            items.append(token.content)
    return items


def test_the_comment_lists_what_changes_one_markdown_list_item_per_workaround(upgrade):
    from support.manifests import PP_TARGET, manifest_text, workaround
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    at_025 = [{**PP_TARGET, "params": ["self", "sampled_token_ids", "num_sampled", "input_batch"]}]
    cause = [{"ref": "pytorch/pytorch#190001", "role": "cause", "state": "open"}]
    entries = [workaround(),  # drifts, stops applying and becomes retirable at 0.25.0
               workaround("late-regression", targets=at_025, vllm_carries_fix=None, upstream=cause,
                          affected=[{"vllm": ">=0.25.0"}]),  # starts applying
               workaround("steady-guard", targets=at_025, vllm_carries_fix=None, upstream=cause,
                          affected=[{"vllm": ">=0.23.0"}])]  # applies before and after: not listed
    repo.commit("Three workarounds", files={"workarounds.toml": manifest_text(*entries)})
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    [body] = comments(step, pr.number)
    items = list_items(body)
    assert [item.split(":", 1)[0] for item in items] == [f"`{CHECKED}`", "`late-regression`"]
    assert items[0].startswith(f"`{CHECKED}`: **drift**: drifted: vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast")
    assert items[0].endswith("; **stops applying** (vllm-carries-fix); **becomes retirable** once vLLM 0.25.0 "
                             "and its XPU pins are the oldest supported")
    assert items[1] == "`late-regression`: **starts applying** (affected)"
    # One source line per item: GitHub shows each workaround on a line of its own.
    assert [line for line in body.splitlines() if line.startswith("- ")] == [f"- {item}" for item in items]


def test_an_upgrade_that_changes_nothing_says_so_in_one_sentence(upgrade):
    from support.manifests import PP_TARGET, manifest_text, workaround
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    steady = workaround("steady-guard", targets=[{**PP_TARGET, "params": ["self", "sampled_token_ids", "num_sampled",
                                                                          "input_batch"]}], vllm_carries_fix=None,
                        upstream=[{"ref": "pytorch/pytorch#190001", "role": "cause", "state": "open"}],
                        affected=[{"vllm": ">=0.23.0"}])
    repo.commit("One workaround the upgrade leaves alone", files={"workarounds.toml": manifest_text(steady)})
    assert step.run(check_script(), **env).returncode == 0
    [body] = comments(step, pr.number)
    assert list_items(body) == []
    assert ("Nothing changes at vLLM 0.25.0: no workaround drifts, starts or stops applying, or becomes retirable."
            in body.splitlines())


def test_the_comment_lists_the_inline_xpu_workarounds_the_new_release_brings_and_drops(upgrade, tmp_path):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    good = "self, sampled_token_ids, num_sampled, num_rejected, input_batch"
    dropped = "from vllm.platforms import current_platform\n\nif current_platform.is_xpu():\n" \
              "    # Work around the oneCCL hang at shutdown.\n    timeout = 5\n"
    brought = "if current_platform.is_xpu():\n    # Remove once torch ships pytorch/pytorch#190002 [see](http://x) @all\n" \
              "    npid = 1\n"
    vllm_sdist(tmp_path / "index", "0.24.0", good, fixed=False, more={"vllm/engine.py": dropped})
    vllm_sdist(tmp_path / "index", "0.25.0", good, fixed=True, more={"vllm/engine.py": "x = 1\n",
                                                                       "vllm/lora/moe.py": brought})
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    [body] = comments(step, pr.number)
    assert "vLLM's own inline XPU workarounds: 1 new at vLLM 0.25.0, 1 gone since vLLM 0.24.0" in body
    new, gone = [item for item in list_items(body) if item.startswith(("new: ", "gone: "))]
    assert new.startswith("new: `vllm/lora/moe.py:1-3` Remove once torch ships pytorch/pytorch#190002 ")
    assert new.endswith("(**not tracked**, names `pytorch/pytorch#190002`, `http://x`)")
    assert "\\[see](http://x)" in new and "@all" not in body  # vLLM's comment renders as text: no link, no mention
    assert gone == "gone: `vllm/engine.py:3-5` Work around the oneCCL hang at shutdown. (not tracked, names no " \
                   "reference)"


def test_thousands_of_new_sites_make_a_comment_within_githubs_limit_and_the_whole_list_a_summary(upgrade, tmp_path):
    from support.fakegithub_git import BODY_LIMIT
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    good = "self, sampled_token_ids, num_sampled, num_rejected, input_batch"
    many = "from vllm.platforms import current_platform\n" + "".join(
        f"\n\nif current_platform.is_xpu():\n    # Remove once torch ships pytorch/pytorch#{190000 + n}\n"
        f"    npid_{n} = 1\n" for n in range(3000))
    vllm_sdist(tmp_path / "index", "0.25.0", good, fixed=True, more={"vllm/lora/many.py": many})
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    [body] = comments(step, pr.number)  # the stand-in refuses a longer body, as GitHub does
    assert len(body) <= BODY_LIMIT
    assert "vLLM's own inline XPU workarounds: 3000 new at vLLM 0.25.0, 0 gone since vLLM 0.24.0" in body
    items = [item for item in list_items(body) if item.startswith(("new: ", "and "))]
    shown = len(items) - 1
    assert shown > 100 and items[-1] == (
        f"and {3000 - shown} more new ({3000 - shown} of them not tracked and naming a reference): the whole list is "
        "in this check's step summary; `xpu-workarounds census vllm==0.25.0 --since vllm==0.24.0` lists them")
    assert items[0].startswith("new: `vllm/lora/many.py:4-6` Remove once torch ships pytorch/pytorch#190000")
    assert "`xpu-workarounds census vllm==0.25.0 --adopt` prints the `[[tracked]]` entries of the 3000 new" in body
    summary = step.summary.read_text()  # every site, in the step summary
    assert len([item for item in list_items(summary) if item.startswith("new: ")]) == 3000
    assert "pytorch/pytorch#192999" in summary and "pytorch/pytorch#192999" not in body


def test_a_site_of_one_line_is_named_by_its_line_in_the_comment_and_one_of_several_by_its_lines():
    from packaging.version import Version

    from tracker.census.count import Census, CountedSite
    from tracker.census.scan import Site
    from tracker.retire.upgrade import ReleaseMove, inline_lines

    one = Site("vllm/a.py", 5, 5, "Remove once torch ships it.", ())
    several = Site("vllm/b.py", 3, 7, "Work around the hang.", ())
    census = Census("0.25.0", "sdist", {}, [], new=[CountedSite(one)], gone=[CountedSite(several)])
    lines = inline_lines(ReleaseMove(["requirements.txt"], Version("0.24.0"), Version("0.25.0")), census)
    assert [line for line in lines if line.startswith("- ")] == [
        "- new: `vllm/a.py:5` Remove once torch ships it. (not tracked, names no reference)",
        "- gone: `vllm/b.py:3-7` Work around the hang. (not tracked, names no reference)"]


def test_an_old_release_that_cannot_be_fetched_is_named_and_the_new_one_still_checked(upgrade, tmp_path):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    (tmp_path / "index" / "vllm-0.24.0.tar.gz").unlink()  # the base's pin: gone from the index
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    [body] = comments(step, pr.number)
    [line] = [line for line in body.splitlines() if "could not be compared" in line]
    assert line.startswith("**vLLM 0.24.0 could not be compared**, so what starts or stops applying is not known: "
                           "pip download vllm==0.24.0 failed: ")
    # The new release was checked all the same: its drift is there; no verdict needs the old one.
    assert "**Drift** (1)" in body
    [item] = list_items(body)
    assert item.startswith(f"`{CHECKED}`: **drift**: ") and "stops applying" not in item
    assert "warning    vLLM 0.24.0 could not be compared: pip download vllm==0.24.0 failed" in result.stdout
    assert any(line.startswith("::warning ") and "could not be compared" in line for line in result.stdout.splitlines())


def test_a_new_release_that_cannot_be_fetched_fails_in_one_line_with_exit_4_and_no_write(upgrade, tmp_path):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    (tmp_path / "index" / "vllm-0.25.0.tar.gz").unlink()  # what the PR pins: not in the index
    result = step.run(check_script(), **env)
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "pip download vllm==0.25.0 failed" in result.stderr
    assert writes(step.server) == 0 and comments(step, pr.number) == []


def checked_in_this_process(upgrade, tmp_path: Path, monkeypatch):
    """The upgrade check of ``upgrade``'s PR run in this process (the function the step runs), and how
    many times each release's archive was read and hashed (``test_lookahead.counted_reads``)."""
    import github
    from github import Auth
    from test_lookahead import counted_reads

    from tracker.retire.upgrade import check_pull_request
    from tracker.upstream.settings import ClientSettings

    repo, pr, step, env = upgrade
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("XPU_WORKAROUNDS_CACHE_DIR", str(tmp_path / "cache"))
    read, hashed = counted_reads(monkeypatch)
    gh = github.Github(auth=Auth.Token(TOKEN), base_url=step.server.base_url, retry=None, timeout=15,
                       seconds_between_requests=None, seconds_between_writes=None)
    settings = ClientSettings(token=TOKEN, base_url=step.server.base_url, retries=0, timeout=15)
    return check_pull_request(gh, settings, ADOPTER, pr.number, "workarounds.toml"), read, hashed


def test_the_upgrade_check_reads_each_release_it_compares_once(upgrade, tmp_path, monkeypatch):
    """Its check, its census and the census compared with the old release's: each release's archive
    read once and hashed once, and so is the reading the release cache makes of it (as in
    ``test_lookahead``'s count; the function the step runs, in this process, to count)."""
    checked, read, hashed = checked_in_this_process(upgrade, tmp_path, monkeypatch)
    assert checked.comment == "created" and checked.warnings == [] and len(checked.drift) == 1
    assert "vLLM's own inline XPU workarounds: none new at vLLM 0.25.0, none gone since vLLM 0.24.0" in checked.text
    each_once = {f"vllm-{version}.{suffix}": 1 for version in ("0.25.0", "0.24.0") for suffix in ("tar.gz", "zip")}
    assert (read, hashed) == (each_once, each_once)


def test_drift_fails_the_step_only_with_fail_on_drift(upgrade):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    result = step.run(check_script(), **{**env, "FAIL_ON_DRIFT": "true"})
    assert result.returncode == 3, result.stdout + result.stderr
    assert any(line.startswith("::error ") and "PPHandler.broadcast" in line for line in result.stdout.splitlines())
    assert len(comments(step, pr.number)) == 1


def test_a_pr_from_a_fork_gets_the_text_in_the_step_summary_and_no_write(upgrade):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    step.server.add_repo("contributor/serving-stack")
    pr.head_repo = "contributor/serving-stack"
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert writes(step.server) == 0 and comments(step, pr.number) == []
    assert "**vLLM 0.25.0**" in step.summary.read_text() and "step summary" in result.stdout


def test_a_pr_that_does_not_move_the_vllm_pin_is_left_alone(upgrade):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    repo.commit("Only fastapi moves", branch="bump-vllm", files={"requirements.txt": "vllm==0.24.0\nfastapi>=1\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **env)
    assert result.returncode == 0 and "does not move the vLLM pin" in result.stdout
    assert writes(step.server) == 0 and not step.summary.exists()


# ------------------------------------------------------ tracked-only: a vLLM fork

FORK = "xpu-fork/vllm"
FORK_MANIFEST = ".xpu/workarounds.toml"
XPU_PY = "vllm/platforms/xpu.py"
TRACKED = """\
schema = 1

[[tracked]]
id = "empty-cache-before-graph"
title = "Empty the XPU cache before graph capture"
file = "vllm/platforms/xpu.py"
marker = "torch.xpu.empty_cache()  # before capture"
carried_in = ">=0.20.0"
waits_on = "pytorch/pytorch#188240"
dead_when = "torch>=2.14.0"

[[tracked]]
id = "event-polling"
title = "Poll XPU events instead of blocking"
file = "vllm/platforms/xpu.py"
marker = "while not event.query():"
carried_in = ">=0.20.0"
dead_when = "torch>=2.20.0"

[[tracked]]
id = "old-stream-guard"
title = "Guard the side stream"
file = "vllm/platforms/xpu.py"
marker = "with torch.xpu.stream(side):"
carried_in = ">=0.20.0"
dead_when = "torch>=2.10.0"
"""
XPU_SOURCE = ("def capture():\n    torch.xpu.empty_cache()  # before capture\n\n\n"
              "def wait(event):\n    while not event.query():\n        pass\n")
DEAD = "empty-cache-before-graph"


@pytest.fixture
def fork(tmp_path):
    with FakeGitHub() as running:
        install(running)
        repo = running.add_repo(FORK)
        repo.commit("vLLM with its XPU code", files={FORK_MANIFEST: TRACKED, XPU_PY: XPU_SOURCE,
                                                     "requirements/xpu.txt": "torch==2.15.0\nvllm-xpu-kernels==0.1.5\n",
                                                     "vllm/__init__.py": ""})
        yield repo, Step(running, tmp_path, FORK)


def inline_issues(step: Step):
    from tracker.retire.inline import INLINE_LABEL

    return [issue for issue in store(step.server).issues.get(FORK.lower(), {}).values() if INLINE_LABEL in issue.labels]


def test_a_tracked_only_fork_gets_one_issue_per_dead_inline_workaround_and_nothing_else(fork):
    repo, step = fork
    result = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert result.returncode == 0, result.stdout + result.stderr
    [issue] = inline_issues(step)
    assert DEAD in issue.title and issue.state == "open"
    assert "vLLM pins torch 2.15.0 for XPU" in issue.body and "torch>=2.14.0" in issue.body
    assert f"`{XPU_PY}`" in issue.body and "`torch.xpu.empty_cache()  # before capture`" in issue.body
    assert read_marker(issue.body).kind == "inline" and read_marker(issue.body).id == DEAD
    # Nothing else: no PR, no branch, no file; every request was to the fork itself, but one: who the token is.
    assert not repo.pulls and set(repo.branches) == {"main"}
    elsewhere = [(hit.method, hit.path) for hit in step.server.log if not hit.path.startswith(f"/repos/{FORK}")]
    assert elsewhere == [("POST", "/graphql")]
    [dashboard] = [i for i in store(step.server).issues[FORK.lower()].values() if DASHBOARD_LABEL in i.labels]
    for line in (f"| `{DEAD}` | `{XPU_PY}` | yes | **dead**", "| `event-polling` | `vllm/platforms/xpu.py` | yes | "
                 "**needed**", "| `old-stream-guard` | `vllm/platforms/xpu.py` | no | **gone**"):
        assert line in dashboard.body, line
    assert f"#{issue.number} open |" in dashboard.body
    outputs = step.outputs()
    assert json.loads(outputs["issues"]) == [{"id": DEAD, "number": issue.number, "action": "opened",
                                              "url": f"{repo.html}/issues/{issue.number}"}]
    assert json.loads(outputs["prs"]) == [] and json.loads(outputs["retirable"]) == []
    # Idempotent: a second run sends no write.
    again = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert again.returncode == 0 and writes(step.server) == 0 and len(inline_issues(step)) == 1


def drop_the_marker(repo) -> None:
    repo.commit("Drop the cache workaround", files={XPU_PY: XPU_SOURCE.replace(
        "    torch.xpu.empty_cache()  # before capture\n", "    pass\n")})


def test_the_issue_is_closed_with_a_comment_when_the_marker_is_gone(fork):
    repo, step = fork
    step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    [issue] = inline_issues(step)
    drop_the_marker(repo)
    result = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert issue.state == "closed"
    [comment] = [c.body for c in store(step.server).comments[(FORK.lower(), issue.number)]]
    assert comment.startswith("Closing: on `main` at ") and "is no longer in `vllm/platforms/xpu.py`" in comment
    assert read_marker(issue.body).closed == "marker-gone" and len(inline_issues(step)) == 1


def test_a_person_closing_the_issue_is_respected_until_the_evidence_changes(fork):
    repo, step = fork
    step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    [issue] = inline_issues(step)
    issue.state = "closed"  # a maintainer closes it: "not now"
    kept = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert kept.returncode == 0 and issue.state == "closed"
    assert "stays closed until the evidence changes" in kept.stdout
    assert writes(step.server) == 1 and "updated     dashboard" in kept.stdout  # its row says "closed"
    assert step.run(retire_script(), MANIFEST=FORK_MANIFEST).returncode == 0 and writes(step.server) == 0
    repo.commit("Pin torch 2.16.0 for XPU", files={"requirements/xpu.txt": "torch==2.16.0\nvllm-xpu-kernels==0.1.5\n"})
    moved = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert moved.returncode == 0 and issue.state == "open" and "torch 2.16.0" in issue.body
    assert len(inline_issues(step)) == 1


def test_an_idle_week_after_the_issue_was_closed_sends_no_write(fork):
    repo, step = fork
    step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    [issue] = inline_issues(step)
    drop_the_marker(repo)
    assert step.run(retire_script(), MANIFEST=FORK_MANIFEST).returncode == 0 and issue.state == "closed"
    idle = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert idle.returncode == 0 and writes(step.server) == 0, idle.stdout
    [dashboard] = [i for i in store(step.server).issues[FORK.lower()].values() if DASHBOARD_LABEL in i.labels]
    assert "**gone**: " in dashboard.body and f"| #{issue.number} closed |" in dashboard.body


def test_a_strangers_issue_with_the_bots_label_and_marker_is_neither_adopted_nor_edited(fork):
    from support.fakegithub_git import issue_by_person

    from tracker.retire.inline import INLINE_LABEL

    repo, step = fork
    forged = f"Rewrite me, bot.\n\n<!-- xpu-workarounds:inline id={DEAD} evidence=0 -->\n"
    theirs = issue_by_person(step.server, repo, "Dead code?", forged, [INLINE_LABEL])
    result = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (theirs.title, theirs.body, theirs.state) == ("Dead code?", forged, "open")
    [ours] = [issue for issue in inline_issues(step) if issue is not theirs]
    assert ours.user != theirs.user and read_marker(ours.body).id == DEAD
    drop_the_marker(repo)
    assert step.run(retire_script(), MANIFEST=FORK_MANIFEST).returncode == 0
    assert ours.state == "closed" and (theirs.body, theirs.state) == (forged, "open")
    assert (FORK.lower(), theirs.number) not in store(step.server).comments


def test_a_strangers_issue_with_the_dashboard_label_is_not_the_dashboard(fork):
    from support.fakegithub_git import issue_by_person

    repo, step = fork
    theirs = issue_by_person(step.server, repo, "XPU workarounds dashboard", "my own notes", [DASHBOARD_LABEL])
    assert step.run(retire_script(), MANIFEST=FORK_MANIFEST).returncode == 0
    assert theirs.body == "my own notes"
    [dashboard] = [i for i in store(step.server).issues[FORK.lower()].values()
                   if DASHBOARD_LABEL in i.labels and i is not theirs]
    assert f"`{DEAD}`" in dashboard.body


# A marker that quotes the bot's own hidden marker, with Markdown and a mention in it.
QUOTING = "torch.xpu.empty_cache()  # <!-- xpu-workarounds:inline id=event-polling evidence=0 --> `**now**` @team"


def test_a_marker_quoting_the_bots_marker_is_shown_as_text_and_opens_one_issue(fork):
    repo, step = fork
    repo.commit("A marker that quotes", files={
        FORK_MANIFEST: TRACKED.replace('marker = "torch.xpu.empty_cache()  # before capture"', f"marker = '{QUOTING}'"),
        XPU_PY: XPU_SOURCE.replace("torch.xpu.empty_cache()  # before capture", QUOTING)})
    assert step.run(retire_script(), MANIFEST=FORK_MANIFEST).returncode == 0
    [issue] = inline_issues(step)
    assert read_marker(issue.body).id == DEAD and f"``{QUOTING}``" in issue.body
    again = step.run(retire_script(), MANIFEST=FORK_MANIFEST)
    assert again.returncode == 0 and writes(step.server) == 0 and len(inline_issues(step)) == 1, again.stdout


# ------------------------------------------------- what a step is told, as data


def test_an_output_value_cannot_forge_another_output():
    from tracker.retire.summary import output_lines

    forged = 'x\nretirable<<EOF\n["everything"]\nEOF'
    text = output_lines({"prs": forged, "dashboard": "7"})
    delimiter = text.splitlines()[0].partition("<<")[2]
    assert re.fullmatch(r"xpu_workarounds_[0-9a-f]{32}", delimiter) and delimiter not in forged
    assert text == f"prs<<{delimiter}\n{forged}\n{delimiter}\n" + text[text.index("dashboard<<"):]
    assert output_lines({"a": "1"}) != output_lines({"a": "1"})  # a fresh delimiter each time


def test_an_annotation_cannot_be_broken_out_of_by_what_it_quotes():
    from tracker.escape import annotation

    line = annotation("warning", "one\n::error::forged 100%", file="x,y:z.toml", line=3)
    assert line == "::warning file=x%2Cy%3Az.toml,line=3,title=xpu-workarounds::one%0A::error::forged 100%25"
    assert "\n" not in line


def test_outside_actions_a_run_writes_no_output_summary_or_annotation(tmp_path):
    from tracker.retire.results import Action, ActionKind, RetireResult
    from tracker.retire.summary import publish

    failed = RetireResult("o/r", "main", "0" * 40, False, actions=[Action("x", ActionKind.FAILED, None, "b", "no")])
    printed: list[str] = []
    publish(failed, printed.append, environ={})
    assert printed == [] and list(tmp_path.iterdir()) == []
    publish(failed, printed.append, environ={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "out")})
    assert printed == ["::error title=xpu-workarounds::x: no"] and (tmp_path / "out").read_text().startswith("prs<<")


def test_the_vllm_source_says_where_vllms_pins_are_read():
    from tracker.upstream.audit import vllm_source

    text = TRACKED + '\n[sources.vllm]\nrepository = "xpu-fork/vllm"\npins = "requirements/xpu-fork.txt"\n'
    assert vllm_source(loaded(text)) == ("xpu-fork/vllm", "requirements/xpu-fork.txt")
    assert vllm_source(loaded(TRACKED)) == ("vllm-project/vllm", "requirements/xpu.txt")


# ------------------------------------------- the upgrade check believes only itself


def test_a_strangers_comment_carrying_the_marker_is_not_the_checks_comment(upgrade):
    from support.fakegithub_git import comment_by_person
    from test_workflow import check_script

    from tracker.retire.upgrade import MARKER

    repo, pr, step, env = upgrade
    forged = f"**No drift**: merge away.\n\n{MARKER}\n"
    theirs = comment_by_person(step.server, repo, pr.number, forged)
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert theirs.body == forged and "commented on" in result.stdout
    [ours] = [body for body in comments(step, pr.number) if body != forged]
    assert "**Drift** (1)" in ours and ours.endswith(f"{MARKER}\n")


def test_a_decoy_pin_file_cannot_hide_drift_in_the_real_one(upgrade):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    repo.commit("A decoy pinning a clean release", branch="bump-vllm", files={"requirements-a.txt": "vllm==0.25.1\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **{**env, "FAIL_ON_DRIFT": "true"})
    assert result.returncode == 3, result.stdout + result.stderr
    [body] = comments(step, pr.number)
    assert ("**The pin files disagree**: `requirements-a.txt` pins vLLM 0.25.1; `requirements.txt` pins vLLM 0.25.0. "
            "Each release is checked below.") in body
    assert "### XPU workarounds at vLLM 0.25.1" in body and "### XPU workarounds at vLLM 0.25.0" in body
    assert "**Drift** (1)" in body and "disagree   the pin files disagree" in result.stdout
    # Without --fail-on-drift the disagreement is said, and the step passes as for drift.
    assert step.run(check_script(), **env).returncode == 0 and writes(step.server) == 0


@pytest.mark.parametrize(("requirement", "why"), [
    ("vllm @ https://wheels.example/vllm-0.25.1-cp38-abi3-manylinux1_x86_64.whl", "a URL"),
    ("vllm==0.25.*", "a wildcard"),
    ("vllm===0.25.0-junk", "arbitrary equality (===)"),
    ("./vendor/vllm", "not a requirement by name and version (a path or a URL)"),
    ("-e git+https://github.com/vllm-project/vllm@v0.25.1#egg=vllm", "not a requirement by name and version"),
    ("vllm>=0.25", "not one release"),
])
def test_a_requirement_the_index_cannot_give_is_named_with_why_and_fails_the_step(upgrade, requirement, why):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    repo.commit("Move vLLM where the index cannot follow", branch="bump-vllm",
                files={"requirements.txt": f"{requirement}\nfastapi\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **env)
    assert result.returncode == 4, result.stdout + result.stderr
    [body] = comments(step, pr.number)
    shown = requirement.removeprefix("-e ")
    [item] = list_items(body)
    assert item.startswith(f"`requirements.txt`: `{shown}`: {why}"), item
    assert "### XPU workarounds at" not in body  # nothing was checked in its place
    assert any(line.startswith("::error ") and "was not checked" in line for line in result.stdout.splitlines())
    assert step.run(check_script(), **{**env, "FAIL_ON_DRIFT": "true"}).returncode == 3


def test_a_requirement_whose_location_only_mentions_vllm_is_not_a_vllm_pin(upgrade):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    kernels = "-e git+https://github.com/vllm-project/vllm-xpu-kernels@v0.1.16#egg=vllm-xpu-kernels"
    repo.commit("Kernels from their repository", branch="bump-vllm",
                files={"requirements.txt": f"vllm==0.24.0\n{kernels}\nfastapi\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **env)
    assert result.returncode == 0 and "does not move the vLLM pin" in result.stdout, result.stdout + result.stderr
    assert writes(step.server) == 0


def test_every_text_from_the_pr_renders_as_text(upgrade):
    from markdown_it import MarkdownIt
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    hostile = "vllm @ https://host/`` ` ``**now**@team<img src=x onerror=alert(1)>/vllm-0.25.1-py3-none-any.whl"
    repo.commit("A requirement that writes Markdown", branch="bump-vllm", files={"requirements.txt": hostile + "\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    assert step.run(check_script(), **env).returncode == 4
    [body] = comments(step, pr.number)
    tokens = [child for token in MarkdownIt("commonmark").parse(body) if token.children for child in token.children]
    assert hostile in [token.content for token in tokens if token.type == "code_inline"]
    assert not [token for token in tokens if token.type == "html_inline"]
    assert not [token for token in tokens if token.type == "text" and ("@team" in token.content or token.content == "now")]


def test_only_the_roots_pin_files_count_by_default_and_sources_vllm_pins_is_vllms_tree_not_a_pin_file(upgrade):
    from support.manifests import manifest_text, workaround
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    # [sources.vllm] pins names a file of vLLM's own tree: a file of that name here is not a pin file.
    sources = '\n[sources.vllm]\nrepository = "vllm-project/vllm"\npins = "requirements/xpu-extra.txt"\n'
    repo.commit("vLLM's XPU pins elsewhere in its tree", files={"workarounds.toml": manifest_text(workaround()) + sources})
    repo.commit("Back to the base pin; a tool, a fixture and a folder pin another vLLM", branch="bump-vllm",
                files={"requirements.txt": "vllm==0.24.0\nfastapi\n",
                       "tools/bench/pyproject.toml": '[project]\nname = "bench"\ndependencies = ["vllm==0.25.0"]\n',
                       "tests/fixtures/requirements.txt": "vllm==0.25.0\n",
                       "requirements/xpu-extra.txt": "vllm==0.25.0\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **env)
    assert result.returncode == 0 and "does not move the vLLM pin" in result.stdout, result.stdout + result.stderr
    assert writes(step.server) == 0 and comments(step, pr.number) == []
    # Each is named in the step summary, with the [layout] pins line that would count it.
    items = list_items(step.summary.read_text())
    defaults = ", ".join(f'"{pattern}"' for pattern in Layout().pins)
    assert items == [f"`{path}` moves `vllm==0.25.0` and is not a pin file: `[layout]` "
                     f'`pins = [{defaults}, "{path}"]` would count it.'
                     for path in ("requirements/xpu-extra.txt", "tests/fixtures/requirements.txt",
                                  "tools/bench/pyproject.toml")]
    assert [line for line in result.stdout.splitlines() if line.startswith("::notice ")] == [
        f"::notice title=not a pin file::{path} moves vllm==0.25.0 but is not a pin file: not checked; [layout] "
        f'pins = [{defaults}, "{path}"] would count it'
        for path in ("requirements/xpu-extra.txt", "tests/fixtures/requirements.txt", "tools/bench/pyproject.toml")]
    # Declared in [layout] pins, the folder's file is one.
    layout = '\n[layout]\npins = ["pyproject.toml", "requirements*.txt", "requirements/xpu-extra.txt"]\n'
    repo.commit("The manifest names its pin files", files={"workarounds.toml": manifest_text(workaround()) + layout})
    moved = step.run(check_script(), **env)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    [body] = comments(step, pr.number)
    assert "`requirements/xpu-extra.txt` moves no vLLM pin to **vLLM 0.25.0**" in body
    assert "tests/fixtures" not in body and "tools/bench" not in body


# ------------------------------------------- a serving repository declares its pin files

SERVING_PINS = '\n[layout]\npins = ["requirements/*.txt"]\n'


@pytest.fixture
def serving(tmp_path):
    """A serving repository pinning vLLM 0.24.0 in requirements/serving.txt and requirements/batch.txt,
    declared in [layout] pins (its root requirements.txt is not one), and a PR moving both to 0.25.0."""
    from support.manifests import manifest_text, workaround

    base = {"workarounds.toml": manifest_text(workaround()) + SERVING_PINS,
            "requirements/serving.txt": "vllm==0.24.0\nfastapi\n", "requirements/batch.txt": "vllm==0.24.0\nray\n",
            "requirements.txt": "-r requirements/serving.txt\n"}
    with upgrade_pull_request(tmp_path, base, {"requirements/serving.txt": "vllm==0.25.0\nfastapi\n",
                                               "requirements/batch.txt": "vllm==0.25.0\nray\n"}) as world:
        yield world


def test_a_serving_repositorys_upgrade_moving_both_declared_pin_files_gets_one_comment_naming_both(serving):
    from test_workflow import check_script

    from tracker.retire.upgrade import MARKER

    repo, pr, step, env = serving
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    [body] = comments(step, pr.number)
    assert "`requirements/batch.txt`, `requirements/serving.txt` move vLLM 0.24.0 to **vLLM 0.25.0**" in body
    assert "**Drift** (1)" in body and "disagree" not in body and body.endswith(f"{MARKER}\n")
    assert step.summary.read_text() == body  # no file outside the pin files moved vLLM: no notice
    assert "::notice" not in result.stdout


def test_a_serving_pr_moving_vllm_only_outside_its_pin_files_gets_a_step_summary_notice_and_no_comment(serving):
    from test_workflow import check_script

    repo, pr, step, env = serving
    repo.branch("bump-vllm", repo.branches["main"])
    repo.commit("Pin vLLM in the root file and a deeper one", branch="bump-vllm",
                files={"requirements.txt": "vllm==0.25.0\n", "requirements/gpu/cuda.txt": "vllm==0.25.1\n",
                       "constraints.in": "vllm==0.25.0\n", "docs/notes.txt": "vllm==0.25.0 is out\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **env)
    assert result.returncode == 0 and "does not move the vLLM pin" in result.stdout, result.stdout + result.stderr
    assert writes(step.server) == 0 and comments(step, pr.number) == []
    summary = step.summary.read_text()
    assert summary.startswith("### vLLM moves outside the pin files\n")
    assert '(`pins = ["requirements/*.txt"]` in the manifest at the PR\'s base)' in summary
    assert list_items(summary) == [
        '`constraints.in` moves `vllm==0.25.0` and is not a pin file: `[layout]` '
        '`pins = ["requirements/*.txt", "constraints.in"]` would count it.',
        '`requirements.txt` moves `vllm==0.25.0` and is not a pin file: `[layout]` '
        '`pins = ["requirements/*.txt", "requirements.txt"]` would count it.',
        '`requirements/gpu/cuda.txt` moves `vllm==0.25.1` and is not a pin file: `[layout]` '
        '`pins = ["requirements/*.txt", "requirements/gpu/cuda.txt"]` would count it.']
    assert ('To count them all: `pins = ["requirements/*.txt", "constraints.in", "requirements.txt", '
            '"requirements/gpu/cuda.txt"]`.') in summary.splitlines()
    assert "docs/notes.txt" not in summary  # a text file that names vLLM but pins nothing
    assert "not a pin  requirements.txt moves vllm==0.25.0 but is not a pin file" in result.stdout


def test_the_files_read_outside_the_pin_files_are_bounded_and_the_rest_counted(serving):
    from test_workflow import check_script

    from tracker.retire.pin_moves import OTHERS_READ

    repo, pr, step, env = serving
    notes = {f"docs/notes-{index:02}.txt": f"note {index}\n" for index in range(OTHERS_READ + 1)}
    repo.commit("Many notes, and vLLM moved in a file past them", branch="bump-vllm",
                files={**notes, "requirements.txt": "vllm==0.25.1\n"})
    pr.head_sha = repo.branches["bump-vllm"]
    result = step.run(check_script(), **env)
    assert result.returncode == 0, result.stdout + result.stderr
    [body] = comments(step, pr.number)  # the declared pin files are checked as ever
    assert "requirements.txt" not in body
    summary = step.summary.read_text()
    assert summary.startswith(body)
    assert (f"2 more changed files that could pin vLLM (`*.txt`, `*.in`, `pyproject.toml`) not read: the check "
            f"reads {OTHERS_READ} files that are not pin files, within its request budget.") in summary.splitlines()
    assert "requirements.txt" not in summary.removeprefix(body)


def test_a_pin_file_whose_content_is_not_base64_is_exit_4_in_one_line(upgrade):
    from test_workflow import check_script

    repo, pr, step, env = upgrade
    step.server.corrupt("/repos/<owner>/<repo>/contents/<path:path>", "content", "%%% not base64 %%%")
    result = step.run(check_script(), **env)
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "answered wrongly" in result.stderr and "not base64" in result.stderr
    assert writes(step.server) == 0


# ------------------------------------------- what a stranger's PR can make the check do is bounded


def test_a_pr_changing_more_pin_files_than_the_request_budget_fails_closed_naming_each_unread(serving):
    """Reading a pin file without includes costs two requests (head, base); past ``REQUESTS`` the rest are
    never read, and never passed: each is named as not checked, and the step fails."""
    from test_workflow import check_script

    from tracker.retire.pin_moves import REQUESTS

    repo, pr, step, env = serving
    many = {f"requirements/z-{index:04}.txt": "fastapi\n" for index in range(REQUESTS)}
    repo.commit("Touch many pin files", branch="bump-vllm", files=many)
    pr.head_sha = repo.branches["bump-vllm"]
    step.server.reset_log()
    result = step.run(check_script(), **env)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert step.server.count("/repos/<owner>/<repo>/contents/<path:path>") <= REQUESTS + 1  # + the manifest
    unread = [line for line in result.stdout.splitlines() if line.startswith("unchecked  ")]
    changed = len(many) + 2
    assert len(unread) == changed - REQUESTS // 2, result.stdout
    assert unread[-1] == ("unchecked  requirements/z-0199.txt: not checked: not read: the check spends at most "
                          f"{REQUESTS} requests reading the files of one PR (one per file at each of its base and "
                          f"head), and {len(unread)} of its pin files are past it")
    [body] = comments(step, pr.number)
    assert "- `requirements/z-0199.txt`: not read:" in body or "more: the whole list" in body


def test_a_pr_naming_more_releases_than_the_check_opens_fetches_no_more_and_fails_on_the_rest(upgrade, tmp_path,
                                                                                                monkeypatch):
    """Twelve pin files naming twelve releases: the check fetches ``RELEASES_OPENED`` of them, each once;
    the rest are named as not checked (the step fails), the old release only not compared."""
    from tracker.retire.upgrade import RELEASES_OPENED

    repo, pr, step, env = upgrade
    good = "self, sampled_token_ids, num_sampled, num_rejected, input_batch"
    versions = [f"0.26.{patch}" for patch in range(RELEASES_OPENED + 2)]
    for version in versions:
        vllm_sdist(tmp_path / "index", version, good, fixed=True)
    files = {f"requirements-{index:02}.txt": f"vllm=={version}\n" for index, version in enumerate(versions)}
    files["requirements-zz.txt"] = f"vllm=={versions[0]}\n"  # a release named twice is fetched once
    repo.commit("Twelve ways to move vLLM", branch="bump-vllm", files=files)
    pr.head_sha = repo.branches["bump-vllm"]
    checked, read, _ = checked_in_this_process(upgrade, tmp_path, monkeypatch)
    sdists = [name for name in read if name.endswith(".tar.gz")]  # each with the release cache's reading of it
    assert len(sdists) == RELEASES_OPENED and set(read.values()) == {1}, read
    assert sorted(read) == sorted([*sdists, *(name.replace(".tar.gz", ".zip") for name in sdists)]), read
    assert "vllm-0.24.0.tar.gz" not in read  # the old release: past the bound, never fetched
    fetched = {name.removeprefix("vllm-").removesuffix(".tar.gz") for name in sdists}
    named = {path: text.strip().removeprefix("vllm==") for path, text in {**files, "requirements.txt": "vllm==0.25.0"}.items()}
    assert sorted(line.split(":")[0] for line in checked.unchecked) == sorted(
        path for path, version in named.items() if version not in fetched)
    assert len(set(named.values()) - fetched) == len(set(named.values())) - RELEASES_OPENED
    assert all(f"the check opens at most {RELEASES_OPENED} releases per run" in line for line in checked.unchecked)
    assert checked.text is not None and "### vLLM requirements that were not checked" in checked.text


@pytest.mark.parametrize("path", ["pyproject.toml", "tools/pyproject.toml"])
def test_a_pin_file_nested_deeper_than_the_toml_parser_recurses_pins_nothing(path):
    """What the upgrade check and the weekly run's look-ahead read a pin file with: a ``pyproject.toml``
    nested 2,000 deep is no pin (and no RecursionError)."""
    from tracker.retire.pin_moves import vllm_requirements

    nested = 'x = ' + "[" * 2000 + "]" * 2000 + '\n[project]\ndependencies = ["vllm==0.25.0"]\n'
    assert vllm_requirements(path, nested) == ()
    assert [r.text for r in vllm_requirements(path, '[project]\ndependencies = ["vllm==0.25.0"]\n')] == ["vllm==0.25.0"]


def index_script() -> str:
    [script] = [s for s in run_scripts(ACTION_FILE) if "no private index configured" in s]
    return script


@pytest.mark.parametrize("given", ["", "http://pkgs.example.com/t/SECRET-5f1c/simple/"])
def test_an_empty_index_input_means_pypi_and_the_step_summary_says_so(tmp_path, given):
    summary = tmp_path / "summary"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    done = subprocess.run(["bash", "-c", textwrap.dedent(index_script())], capture_output=True, text=True,
                          env={**env, "INDEX_URL": given, "GITHUB_STEP_SUMMARY": str(summary)}, timeout=60)
    assert done.returncode == 0, done.stderr  # a Dependabot PR, which gets no secret, does not fail for it
    said = done.stdout + done.stderr + (summary.read_text() if summary.exists() else "")
    if given:
        assert said == ""  # nothing of the address, nor that there is one
    else:
        assert "no private index configured" in summary.read_text() and "read from PyPI" in summary.read_text()


def test_the_index_input_reaches_pip_in_the_install_and_every_step_that_fetches():
    text = ACTION_FILE.read_text()
    assert re.search(r"^  index-url:\n(?:    .*\n)*?    default: \"\"$", text, flags=re.M)
    fetching = [s for s in run_scripts(ACTION_FILE) if "pip install" in s or "xpu-workarounds \"${args" in s]
    assert len(fetching) == 3  # the install, the weekly run, the upgrade check
    for script in fetching:
        assert textwrap.dedent(script).startswith('if [ -n "$INDEX_URL" ]; then export PIP_INDEX_URL="$INDEX_URL"; fi\n'
                                          'unset INDEX_URL\n'), script
    assert text.count("INDEX_URL: ${{ inputs.index-url }}") == 4  # those three and the summary's
