"""Every removal PR passes this repository's own tests (CONTRIBUTING.md "How a removal is proven").

For each shipped workaround, its removal as ``retire --open-prs`` commits it is applied to a copy of
this checkout, and the fast tests marked ``reads_shipped`` run on the copy: the tests that read what
a removal changes, a workaround's own tests among them (tests/support/removal_proof.py; marker
``removal_proof``, two copies at a time, beside the rest of the suite in ``.ci/test``). Every
session fails an unmarked test that reads what a removal changes, as the planted tests below show.
The slow tests do not run on the copies: no file they run names a shipped workaround it does not own.
"""

from __future__ import annotations

import re
import signal
import subprocess

import pytest
from support import removal_proof, repository
from support.repository import ROOT, tracked_paths

from tracker.model import reader
from tracker.retire import MANIFEST_PATH
from tracker.retire.removal import module_name, owned_paths

pytestmark = pytest.mark.reads_shipped

MANIFEST = reader.load(ROOT / MANIFEST_PATH)
SHIPPED = [w.id for w in MANIFEST.workarounds]
PROOF = "test_the_marked_tests_pass_on_a_copy_without_the_workaround"


@pytest.fixture(scope="module")
def proofs(request):
    """The copies of every workaround whose proof this session runs, started at once."""
    stopped = signal.signal(signal.SIGTERM, signal.default_int_handler)  # by .ci/test: the copies stop too
    try:
        with removal_proof.proofs([item.callspec.params["workaround_id"] for item in request.session.items
                                   if getattr(item, "originalname", "") == PROOF]) as started:
            yield started
    finally:
        signal.signal(signal.SIGTERM, stopped)


def failures(result: subprocess.CompletedProcess[str]) -> str:
    """pytest's report of each error and failure, and the end of stderr."""
    start = min((at for at in (result.stdout.find("= ERRORS ="), result.stdout.find("= FAILURES =")) if at >= 0), default=0)
    return result.stdout[start:][-6000:] + result.stderr[-2000:]


@pytest.mark.removal_proof
@pytest.mark.parametrize("workaround_id", SHIPPED)
def test_the_marked_tests_pass_on_a_copy_without_the_workaround(proofs, workaround_id):
    result = proofs[workaround_id].result()
    assert result.returncode == 0, f"without {workaround_id}: {failures(result)}"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A copy without the manifest's last workaround, to plant tests in."""
    return removal_proof.removed_copy(SHIPPED[-1], tmp_path_factory.mktemp("planted") / "repository")


@pytest.mark.removal_proof
def test_a_removal_that_breaks_a_test_fails_its_proof(planted):
    """The copy is what the proof tests: its own manifest and code, not this checkout's. A test
    that needs the removed workaround (here: that it is shipped) passes here and fails there."""
    (planted / "tests" / "test_needs_the_workaround.py").write_text(
        "import pytest\n\nfrom tracker.model import reader\n\npytestmark = pytest.mark.reads_shipped\n\n\n"
        f"def test_it_is_shipped():\n    assert {SHIPPED[-1]!r} in reader.load().ids\n", encoding="utf-8")
    assert SHIPPED[-1] in reader.load().ids
    result = removal_proof.pytest_on(planted, "-m", removal_proof.ON_A_COPY, "tests/test_needs_the_workaround.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout and "test_it_is_shipped" in result.stdout


@pytest.mark.removal_proof
def test_a_test_that_reads_what_a_removal_changes_without_the_marker_fails(planted):
    """Whether it reads in its own process or a child's (the project's variables cleared, as tests
    clear them), while it runs or while its module is imported (by pytest, or first by a marked test
    module that imports from it), and whether or not a test before it imported the same module; a
    test that reads nothing of it passes, and so does a marked one."""
    module = MANIFEST.workarounds[0].module  # still shipped in the copy
    tests = planted / "tests"
    (tests / "test_planted.py").write_text(
        "import os\nimport subprocess\nimport sys\n\n\n"
        "def test_forgiving():\n    try:\n        open('workarounds.toml').close()\n    except OSError:\n        pass\n\n\n"
        "def test_in_a_child():\n"
        "    env = {k: v for k, v in os.environ.items() if not k.startswith('XPU_WORKAROUNDS')}\n"
        f"    subprocess.run([sys.executable, '-c', 'import {module}'], check=True, env=env)\n\n\n"
        f"def test_in_process():\n    import {module}  # noqa: F401\n\n\n"
        "def test_innocent():\n    open('pyproject.toml').close()\n", encoding="utf-8")
    (tests / "test_planted_marked.py").write_text(
        f"import pytest\n\nimport {module}  # noqa: F401\n\npytestmark = pytest.mark.reads_shipped\n\n\n"
        "def test_marked():\n    open('README.md').close()\n", encoding="utf-8")
    (tests / "test_planted_at_import.py").write_text(
        "README = open('README.md').read()\n\n\ndef test_uses_it():\n    assert README\n", encoding="utf-8")
    (tests / "test_planted_importer.py").write_text(
        "import pytest\nfrom test_planted_imported import README\n\npytestmark = pytest.mark.reads_shipped\n\n\n"
        "def test_imports_it():\n    assert README\n", encoding="utf-8")
    (tests / "test_planted_imported.py").write_text(
        "README = open('README.md').read()\n\n\ndef test_reads_at_import():\n    assert README\n", encoding="utf-8")
    result = removal_proof.pytest_on(planted, "tests/test_planted.py", "tests/test_planted_marked.py",
                                     "tests/test_planted_at_import.py", "tests/test_planted_importer.py",
                                     "tests/test_planted_imported.py")
    named = dict(re.findall(r"^(\S+) reads what a removal changes \(([^)]*)\)", result.stdout, flags=re.M))
    assert named == {"tests/test_planted.py::test_forgiving": "workarounds.toml",
                     "tests/test_planted.py::test_in_a_child": f"{module}, {module.replace('.', '/')}.py",
                     "tests/test_planted.py::test_in_process": f"{module}, {module.replace('.', '/')}.py",
                     "tests/test_planted_at_import.py::test_uses_it": "README.md",
                     "tests/test_planted_imported.py::test_reads_at_import": "README.md"}, result.stdout + result.stderr
    assert re.search(r"\b8 passed, .*5 errors", result.stdout), result.stdout


@pytest.mark.removal_proof
def test_a_workarounds_file_that_git_does_not_track_is_named_with_the_fix(planted, tmp_path):
    """The bot's removal is computed from git's files: one that exists but is not tracked (a new
    workaround not yet added) is named, with the command that adds it."""
    module = f"workarounds/{module_name(MANIFEST.workarounds[0])}.py"
    subprocess.run(["git", "-C", str(planted), "rm", "-q", "--cached", module], check=True)
    try:
        with pytest.raises(removal_proof.Untracked, match=re.escape(f"{module}: not tracked by git: run git add {module}")):
            removal_proof.removed_copy(SHIPPED[0], tmp_path / "repository", source=planted)
    finally:
        subprocess.run(["git", "-C", str(planted), "add", module], check=True)


def test_ci_runs_the_proof_beside_the_rest_of_the_suite():
    script = (ROOT / ".ci" / "test").read_text(encoding="utf-8")
    assert re.search(r"^nice -n 10 \S+ -m pytest -m removal_proof .*&$", script, flags=re.M), script
    assert re.search(r"^\S+ -m pytest -m \"slow_session and not removal_proof\" .*&$", script, flags=re.M), script
    assert re.search(r"^\S+ -m pytest -m \"not slow_session and not removal_proof\" -n 2 --dist loadfile$", script,
                     flags=re.M), script
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().endswith(".ci/test")


# Each shipped workaround named by id or module name (``workarounds.x``, ``test_workaround_x.py``),
# not inside a longer name (``vllm-x`` is a [[tracked]] entry's).
NAMED = {w.id: re.compile(rf"(?<![\w-]){re.escape(w.id)}(?![\w-])"
                          rf"|(?<![A-Za-z0-9]){re.escape(module_name(w))}(?![A-Za-z0-9_])")
         for w in MANIFEST.workarounds}
SLOW_MARK = re.compile(rf"\bmark\.({'|'.join(removal_proof.SLOW)})\b")


def test_no_file_a_slow_test_runs_names_a_shipped_workaround_it_does_not_own():
    """The copies run no slow test (vLLM, Ray, the release matrix): those read the workarounds from the
    manifest, or bring their own. So no file under tests/ names a shipped workaround, by id or
    module name, unless the workaround owns it (its removal deletes it), it is the frozen
    repository (its manifest is the frozen one's), or it is a test file with no slow test (the copies
    run it if it reads what a removal changes, and if it does not, what it names does not matter)."""
    paths = [path for path in tracked_paths() if path.startswith("tests/") and (ROOT / path).is_file()]
    owner = {path: w.id for w in MANIFEST.workarounds for path in owned_paths(w, paths)}
    naming = {}
    for path in paths:
        text = (ROOT / path).read_bytes().decode("utf-8", "replace")
        if (ROOT / path).is_relative_to(repository.FROZEN) or (
                re.fullmatch(r"tests/test_[^/]*\.py", path) and not SLOW_MARK.search(text)):
            continue
        named = {workaround_id for workaround_id, pattern in NAMED.items() if pattern.search(text)} - {owner.get(path)}
        if named:
            naming[path] = sorted(named)
    assert naming == {}, "retiring these workarounds would break these files (read the ids from the manifest, " \
                         f"bring the tests' own workaround, or move the case into the owner's test file): {naming}"
