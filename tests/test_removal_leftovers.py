"""No removal leaves a file that imports or names what it deletes (tracker/retire/leftovers.py).

Every removal of a shipped workaround, as ``retire --open-prs`` computes it from this checkout's
git-tracked files, is checked without running anything: no Python file left imports the deleted
module (or a deleted test module), no workflow, ``.ci`` script or docs code block names it or a
deleted file, and its own tests go with it. The full proof (a removal's copy running the fast
tests) runs in the weekly workflow before the bot opens the PR (tests/support/removal_proof.py).
"""

from __future__ import annotations

import dataclasses

import pytest
from support import repository
from support.repository import ROOT, tracked_paths

from tracker.model import reader
from tracker.retire import MANIFEST_PATH, Snapshot, blob_sha, compute_removal
from tracker.retire.leftovers import checkout_leftovers, code_blocks, deleted_modules, leftovers


def test_no_removal_of_a_shipped_workaround_leaves_a_file_importing_or_naming_what_it_deletes():
    found = checkout_leftovers(ROOT, tracked_paths())
    assert found == {}, ("retiring these workarounds would leave these files broken (read the module from the "
                         "manifest and skip what is retired, use the tests' own workaround, or move the case into "
                         f"the workaround's own test file): {found}")


# ------------------------------------------------------------- planted, in the frozen repository

ID, MODULE = "static-launcher-uva", "workarounds.static_launcher_uva"


@pytest.fixture(scope="module")
def frozen_files() -> dict[str, str]:
    """The frozen repository's manifest, modules and tests (tests/support/repository.py)."""
    return {path: text for path, text in repository.frozen().items()
            if path == MANIFEST_PATH or path.startswith(("workarounds/", "tests/"))}


def left_by(files: dict[str, str], planted: dict[str, str], workaround_id: str = ID) -> list[str]:
    """What the removal of ``workaround_id`` leaves that uses it, with ``planted`` files added."""
    files = {**files, **planted}
    snapshot = Snapshot("main", "1" * 40, "2" * 40, {path: blob_sha(path) for path in files}, {},
                        files[MANIFEST_PATH], read=files.__getitem__)
    removal = compute_removal(snapshot, reader.load(repository.FROZEN_MANIFEST).get(workaround_id))
    return [str(leftover) for leftover in leftovers(removal, snapshot.paths, files.__getitem__)]


@pytest.mark.parametrize("source", [
    "import workarounds.static_launcher_uva\n",
    "from workarounds import static_launcher_uva\n",
    "from workarounds.static_launcher_uva import make_wrapper\n",
    "import workarounds.static_launcher_uva as launcher\n",
    "def case():\n    from workarounds import static_launcher_uva\n",  # inside a function, as the benchmark did
    "import importlib\n\nmodule = importlib.import_module('workarounds.static_launcher_uva')\n",
])
def test_a_python_file_importing_the_deleted_module_is_named_with_its_line(frozen_files, source):
    planted = {"benchmarks/bench_x.py": f'"""A benchmark."""\n\n{source}'}
    line = 3 + source.count("\n", 0, source.index("static_launcher_uva")) if "def " in source or "importlib" in source \
        else 3
    assert left_by(frozen_files, planted) == [f"benchmarks/bench_x.py:{line}: imports {MODULE}"]


def test_a_relative_import_inside_the_workarounds_package_and_a_deleted_test_module_imported_are_named(frozen_files):
    planted = {"workarounds/helpers.py": "from . import static_launcher_uva\nfrom .other import x\n",
               "tests/test_other.py": "from test_workaround_static_launcher_uva import test_switches_off\n"}
    assert left_by(frozen_files, planted) == [
        "tests/test_other.py:1: imports test_workaround_static_launcher_uva",
        f"workarounds/helpers.py:1: imports {MODULE}"]


def test_a_module_found_through_the_manifest_or_a_name_in_a_string_is_not_an_import(frozen_files):
    """What reads the module through the manifest, and skips a retired one, keeps working; the id or the
    module's name as data (a fake repository's file) is not a use."""
    planted = {"benchmarks/bench_x.py": "import importlib\n\nfrom tracker.model.reader import load\n\n\n"
                                        f"def case():\n    if {ID!r} in load().ids:\n"
                                        f"        importlib.import_module(load().get({ID!r}).module)\n",
               "tests/test_data.py": f"FILES = {{'workarounds/static_launcher_uva.py': '', 'id': {ID!r}}}\n",
               "workarounds/static_launcher_uva_helpers.py": "import workarounds.static_launcher_uva_more\n"}
    assert left_by(frozen_files, planted) == []


def test_docs_code_blocks_workflows_and_ci_scripts_naming_the_module_or_a_deleted_file_are_named(frozen_files):
    planted = {
        "docs/guide.md": f"Prose may name `{MODULE}` and workarounds/static_launcher_uva.py.\n\n"
                         f"```bash\npython -c 'import {MODULE}'\n```\n\n"
                         "~~~\npytest tests/test_workaround_static_launcher_uva.py\n~~~\n\n"
                         f"```python\nimport {MODULE}_more\n```\n",
        ".github/workflows/ci.yml": "jobs:\n  one:\n    steps:\n      - run: pytest tests/test_workaround_static_launcher_uva.py\n",
        ".ci/check": f"#!/bin/sh\npython -m {MODULE}\n",
        "notes.txt": f"{MODULE}\n",  # not read: nothing runs it
    }
    assert left_by(frozen_files, planted) == [
        f".ci/check:2: names {MODULE}",
        ".github/workflows/ci.yml:4: names tests/test_workaround_static_launcher_uva.py",
        f"docs/guide.md:4: names {MODULE}",
        "docs/guide.md:8: names tests/test_workaround_static_launcher_uva.py"]


def test_a_removal_that_deletes_no_test_file_keeps_its_workarounds_tests(frozen_files):
    files = {path: text for path, text in frozen_files.items() if path != "tests/test_workaround_static_launcher_uva.py"}
    assert left_by(files, {}) == [f"tests/: keeps {ID}'s tests (no test file of its own is deleted: "
                                  "tests/test_workaround_<module>.py is its, by the layout)"]


def test_what_the_removal_writes_is_read_as_written(frozen_files):
    """The catalogue and README the removal regenerates are checked as they will be, not as they are."""
    files = {**frozen_files, "README.md": f"| x | [`{ID}`](docs/workarounds.md#{ID}) |\n\n```\nimport {MODULE}\n```\n"}
    snapshot = Snapshot("main", "1" * 40, "2" * 40, {path: blob_sha(path) for path in files}, {},
                        files[MANIFEST_PATH], read=files.__getitem__)
    removal = compute_removal(snapshot, reader.load(repository.FROZEN_MANIFEST).get(ID))
    assert [str(x) for x in leftovers(removal, snapshot.paths, files.__getitem__)] == [f"README.md:3: names {MODULE}"]  # its row gone
    edited = dataclasses.replace(removal, written={**removal.written, "README.md": "nothing\n"})
    assert leftovers(edited, snapshot.paths, files.__getitem__) == []


def test_the_deleted_modules_are_the_packages_and_the_tests_module_names():
    assert deleted_modules(["workarounds/x.py", "workarounds/y/__init__.py", "workarounds/y/part.py",
                            "tests/test_workaround_x.py", "tests/fixtures/x/data.json"]) == {
        "workarounds.x", "workarounds.y", "workarounds.y.part", "test_workaround_x"}


def test_only_fenced_code_blocks_are_read_of_markdown():
    text = "prose\n```\none\n```\ntext\n````md\n```\ninner\n````\n    indented prose\n"
    assert list(code_blocks(text)) == [(3, "one"), (7, "```"), (8, "inner")]
