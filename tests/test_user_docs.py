"""README.md and docs/ are for the people who use the project: no tracker references, links that resolve,
and the README's test command is the one CI runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
# The catalogue is generated from the manifest, whose prose abbreviates upstream pull requests
# ("vllm-xpu-kernels#513 and #564"): only its "issue N" is checked.
GENERATED = ROOT / "docs" / "workarounds.md"

# "issue 24", "issues 9 and 14", "Issue #3": this project's tracker, whose history is in git.
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
# "#24" on its own; an upstream reference names its repository ("pytorch/pytorch#188240",
# "vllm#39977") and so has a word character or "/" just before the "#".
BARE_NUMBER = re.compile(r"(?<![\w/.\-])#\d+\b")


def tracker_references(text: str, generated: bool) -> list[str]:
    patterns = (ISSUE,) if generated else (ISSUE, BARE_NUMBER)
    return [match.group(0) for pattern in patterns for match in pattern.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_user_docs_name_no_tracker_issue(page):
    found = tracker_references(page.read_text(encoding="utf-8"), page == GENERATED)
    assert not found, f"{page.relative_to(ROOT)} refers to the project's tracker: {found}"


@pytest.mark.parametrize(("text", "found"), [
    ("fixed in issue 24's rework", ["issue 24"]),
    ("Issues 9 and 14", ["Issues 9"]),
    ("see #24 for the plan", ["#24"]),
    ("(#3)", ["#3"]),
    ("landed in pytorch/pytorch#188240", []),
    ("vllm#39977 skips the profile", []),
    ("the PR's `(#N)` title", []),
    ("an issue titled 'dashboard'", []),
])
def test_the_check_tells_tracker_references_from_upstream_ones(text, found):
    assert tracker_references(text, generated=False) == found


LINK = re.compile(r"\]\((?!https?://|mailto:)([^)\s]*)\)")


def anchors(page: Path) -> set[str]:
    """The fragments GitHub gives a page's headings: lower case, punctuation but "-" dropped, spaces to "-"."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", page.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve_to_a_file_and_heading(page):
    broken = []
    for link in LINK.findall(page.read_text(encoding="utf-8")):
        target, _, fragment = link.partition("#")
        path = (page.parent / target) if target else page
        if not path.exists() or (fragment and path.suffix == ".md" and fragment not in anchors(path)):
            broken.append(link)
    assert not broken, f"{page.relative_to(ROOT)} links to files or headings that do not exist: {broken}"


def test_readme_shows_the_test_command_ci_runs():
    # .ci/run itself: it names torch's CPU index where pip knows PyPI alone (tests/test_workflow.py).
    assert "Set up and run the tests" in (text := (ROOT / "README.md").read_text(encoding="utf-8"))
    assert "```bash\n.ci/run\n```" in text and (ROOT / ".ci" / "run").stat().st_mode & 0o111


# Comments in the project's configuration that send a reader to a page's section:
# `README "Benchmarks"`, `docs/action.md "Repository settings"`, `(docs/security.md)`.
CONFIGURATION = sorted([ROOT / "pyproject.toml", ROOT / "action.yml", *(ROOT / ".ci").iterdir(),
                        *(ROOT / ".github" / "workflows").glob("*.yml"), ROOT / ".github" / "dependabot.yml"])
POINTER = re.compile(r"\b(README(?:\.md)?|docs/[\w./-]+\.md)(?:(?:'s)? \"([^\"]+)\")?")


def pointers(path: Path) -> list[tuple[str, str]]:
    """(page, section or "") of every pointer in ``path``'s comments."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        comment = re.search(r"(?:^|\s)#(.*)$", line)  # "#" after a space: not a URL's fragment
        found += POINTER.findall(comment.group(1)) if comment else []
    return found


@pytest.mark.parametrize("path", CONFIGURATION, ids=lambda path: str(path.relative_to(ROOT)))
def test_comments_in_the_configuration_point_at_sections_that_exist(path):
    broken = []
    for page, section in pointers(path):
        target = ROOT / ("README.md" if page.startswith("README") else page)
        headings = re.findall(r"^#+\s+(.+?)\s*$", target.read_text(encoding="utf-8"), re.MULTILINE) \
            if target.is_file() else []
        if not target.is_file() or (section and section not in headings):
            broken.append(f'{page} "{section}"' if section else page)
    assert not broken, f"{path.relative_to(ROOT)} points at sections that are not there (moved to docs/?): {broken}"


def test_the_pointer_check_reads_page_and_section(tmp_path):
    sample = tmp_path / "sample.toml"
    sample.write_text('x = 1  # see README "Benchmarks"\n# Settings: docs/action.md "Repository settings".\n'
                      'url = "https://example.com/#README"\n')
    assert pointers(sample) == [("README", "Benchmarks"), ("docs/action.md", "Repository settings")]


def test_the_readmes_first_run_is_what_status_prints():
    """The README shows a `status` run as real output; it is. A line about a workaround the manifest no
    longer has (a removal PR does not edit this block) is the only kind that may be left over."""
    import shlex

    from typer.testing import CliRunner

    from tracker.commands.app import app
    from tracker.model import reader

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n\$ xpu-workarounds (status [^\n]*)\n(.*?)```", readme, re.DOTALL)
    assert block, "the README's first run is not a ```text block starting with $ xpu-workarounds status"
    env = {name: None for name in ("XPU_WORKAROUNDS", "XPU_WORKAROUNDS_DISABLE", "XPU_WORKAROUNDS_FORCE",
                                   "XPU_WORKAROUNDS_PLATFORM", "XPU_WORKAROUNDS_ASSUME", "XPU_WORKAROUNDS_MANIFEST")}
    result = CliRunner().invoke(app, shlex.split(block.group(1)), env=env)
    assert result.exit_code == 0, result.output
    printed = [line.split() for line in result.stdout.splitlines()]  # column widths follow the longest id
    shown = [line.split() for line in block.group(2).splitlines()]
    ids = set(reader.load().ids)
    regenerate = (f"README.md, \"A first run\": the block under `$ xpu-workarounds {block.group(1)}` is not what "
                  f"that command prints now. Regenerate it: run `xpu-workarounds {block.group(1)}` in the checkout "
                  "and paste its output under that line")
    left_over = [" ".join(line) for line in shown if line not in printed]
    assert all(line and line.split()[0].rstrip(":") not in ids and re.match(r"[a-z0-9-]+:?$", line.split()[0])
               for line in left_over), f"{regenerate} (shown, not printed: {left_over})"
    missing = [" ".join(line) for line in printed if line not in shown]
    assert [line for line in shown if line in printed] == printed, f"{regenerate} (printed, not shown: {missing})"


def test_every_vllm_release_the_docs_name_is_one_that_exists():
    """A reader copies ``check vllm==X`` as written: X must be a release on PyPI (the release
    matrix's list of every release from the support floor to the newest), not a future one."""
    from support.vllm_harness import ALL_RELEASES

    named = {(page.name, version) for page in PAGES
             for version in re.findall(r"\bvllm==(\d+\.\d+\.\d+)\b", page.read_text(encoding="utf-8"))}
    assert named and not {(page, version) for page, version in named if version not in ALL_RELEASES}


def test_the_readme_is_a_front_door_under_250_lines():
    # Details live in docs/: README says what the tool is, how to install and run it, and where to read on.
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move details into docs/"


def test_the_readme_and_so_the_pypi_page_states_the_supported_range_the_manifest_declares():
    from tracker.model import reader

    support = reader.load().support
    stated = re.search(r"\*\*Supported\*\*: vLLM >= (\S+), torch >= (\S+),\s+vllm-xpu-kernels >= (\S+) \(the "
                       r"manifest's `\[support\]`\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert stated, "README.md no longer states the supported range as the manifest's [support]"
    assert stated.groups() == (str(support["vllm"]), str(support["torch"]), str(support["vllm-xpu-kernels"]))
