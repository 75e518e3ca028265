"""`lint`'s check of each workaround module against tracker.api's protocol, read as source."""

from __future__ import annotations

import sys

import pytest

from tracker.commands.lint import protocol_problems

GOOD = '''
    """``Symptom`` a user saw."""

    from tracker.api import Context, Finding


    def probe(context: Context) -> Finding | None:
        return None


    def make_wrapper(context: Context):
        def wrapper(wrapped, instance, args, kwargs):
            return wrapped(*args, **kwargs)

        return wrapper
'''


def test_every_shipped_workaround_module_follows_the_protocol():
    from tracker.model import reader

    assert {w.module: protocol_problems(w.module) for w in reader.load().workarounds} == {
        w.module: [] for w in reader.load().workarounds}


def test_a_module_that_follows_the_protocol_has_no_problem_and_is_not_imported(package):
    name = package.write("good", GOOD)
    assert protocol_problems(name) == []
    assert name not in sys.modules


def test_a_module_without_make_wrapper_is_a_problem(package):
    name = package.write("bad", GOOD.replace("def make_wrapper(", "def build_wrapper("))
    assert protocol_problems(name) == [f"module {name} has no top-level make_wrapper(context)"]


def test_a_module_without_a_docstring_is_a_problem(package):
    name = package.write("bad", GOOD.replace('"""``Symptom`` a user saw."""', ""))
    assert protocol_problems(name) == [f"module {name} has no docstring (it names the symptom a user saw)"]


def test_a_probe_or_make_wrapper_taking_other_arguments_is_a_problem(package):
    name = package.write("bad", GOOD.replace("def probe(context: Context)", "def probe(context, stack)")
                         .replace("def make_wrapper(context: Context)", "def make_wrapper()"))
    assert protocol_problems(name) == [f"{name}.make_wrapper must take exactly one argument, the context",
                                       f"{name}.probe must take exactly one argument, the context"]


def test_a_module_importing_more_of_tracker_than_the_api_is_a_problem(package):
    name = package.write("bad", GOOD.replace("from tracker.api import Context, Finding",
                                             "from tracker.api import Context, Finding\n    from tracker.runtime import activate"))
    assert protocol_problems(name) == [
        f"module {name} imports tracker.runtime; a workaround module imports only tracker.api"]


def test_a_module_that_does_not_exist_is_a_problem(package):
    assert protocol_problems(f"{package.name}.absent") == [f"module {package.name}.absent does not exist"]


# ------------------------------------------------- an adopter's repository, laid out otherwise


def adopter(tmp_path, git: bool = True):
    """A repository laid out as tests/test_action.py's adopter is: manifest ``xpu/workarounds.toml``,
    modules in ``xpu/workarounds/``, and a ``workarounds/`` of someone else's at the top."""
    import subprocess

    from test_action import adopter_files

    for path, text in adopter_files().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    if git:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    from tracker.model import reader

    manifest = reader.load(tmp_path / "xpu" / "workarounds.toml")
    return manifest, manifest.workarounds[0].module.rpartition(".")[2]


def run_lint(tmp_path, *args):
    import subprocess
    from pathlib import Path

    cli = Path(sys.executable).parent / "xpu-workarounds"
    return subprocess.run([str(cli), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("git", [True, False], ids=["in a git checkout", "no .git: the working directory"])
def test_lint_reads_an_adopters_modules_in_its_layout_folder(tmp_path, git):
    adopter(tmp_path, git)
    result = run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint")
    # The top-level workarounds/ (not a workaround module: no docstring, no make_wrapper) is not read.
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "xpu/workarounds.toml: ok\n"


@pytest.mark.parametrize("args", [["--manifest", "xpu/workarounds.toml", "lint"], ["lint", "xpu/workarounds.toml"]])
def test_lint_finds_a_broken_module_in_the_adopters_folder_not_this_tools_own(tmp_path, args):
    manifest, name = adopter(tmp_path)
    # The same module name exists in this tool's installed workarounds package, which passes lint.
    (tmp_path / "xpu" / "workarounds" / f"{name}.py").write_text("def build():\n    pass\n", encoding="utf-8")
    result = run_lint(tmp_path, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert [line.split(": ", 2)[2] for line in result.stdout.splitlines()] == [
        f"module workarounds.{name} has no docstring (it names the symptom a user saw)",
        f"module workarounds.{name} has no top-level make_wrapper(context)"]


def test_lint_reports_a_module_missing_from_the_adopters_folder(tmp_path):
    manifest, name = adopter(tmp_path)
    (tmp_path / "xpu" / "workarounds" / f"{name}.py").unlink()
    result = run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint")
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = result.stdout.splitlines()
    assert line.endswith(f": workaround[{manifest.workarounds[0].id}].module: module workarounds.{name} does not "
                         f"exist: no xpu/workarounds/{name}.py or xpu/workarounds/{name}/__init__.py")


def test_a_layout_folder_that_is_a_link_out_of_the_repository_is_not_read(tmp_path):
    import shutil

    root, outside = tmp_path / "repo", tmp_path / "outside"
    root.mkdir()
    manifest, name = adopter(root)
    shutil.move(root / "xpu" / "workarounds", outside)
    (root / "xpu" / "workarounds").symlink_to(outside)
    line = (root / "xpu" / "workarounds.toml").read_text().splitlines().index('workarounds = "xpu/workarounds"') + 1
    result = run_lint(root, "--manifest", "xpu/workarounds.toml", "lint")
    assert result.returncode == 1
    assert result.stdout == (f"xpu/workarounds.toml:{line}: layout.workarounds: xpu/workarounds/ in {root.resolve()} "
                             f"leads out of the repository (to {outside.resolve()}): its modules are not read\n")


def test_a_module_that_is_a_link_out_of_the_layout_folder_is_not_read(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    manifest, name = adopter(root)
    module = root / "xpu" / "workarounds" / f"{name}.py"
    (tmp_path / "elsewhere.py").write_text(module.read_text())
    module.unlink()
    module.symlink_to(tmp_path / "elsewhere.py")
    result = run_lint(root, "--manifest", "xpu/workarounds.toml", "lint")
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    assert line.endswith(f"module workarounds.{name} is a link out of xpu/workarounds (to "
                         f"{(tmp_path / 'elsewhere.py').resolve()}): not read")


def test_a_layout_folder_the_repository_lacks_is_one_problem_at_its_line(tmp_path):
    adopter(tmp_path)
    manifest = tmp_path / "xpu" / "workarounds.toml"
    text = manifest.read_text(encoding="utf-8").replace('workarounds = "xpu/workarounds"', 'workarounds = "xpu/fixes"')
    manifest.write_text(text, encoding="utf-8")
    line = text.splitlines().index('workarounds = "xpu/fixes"') + 1
    result = run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint")
    assert result.returncode == 1
    assert result.stdout == (f"xpu/workarounds.toml:{line}: layout.workarounds: no folder xpu/fixes/ in {tmp_path.resolve()} "
                             "(the repository's root), where the workaround modules are read\n")


@pytest.mark.parametrize(("old", "new", "field", "message"), [
    ('tests = "xpu/tests"', 'tests = "xpu/test"', "layout.tests",
     "no folder xpu/test/ in {root} (the repository's root), where the workarounds' tests are kept"),
    ('docs = ""', 'docs = "xpu/catalogue.md"', "layout.docs",
     "no file xpu/catalogue.md in {root} (the repository's root): write the catalogue there with "
     "`xpu-workarounds docs --output xpu/catalogue.md`, or docs = \"\" for none"),
])
def test_a_tests_folder_or_catalogue_the_repository_lacks_is_one_problem_at_its_line(tmp_path, old, new, field,
                                                                                      message):
    """What the Action would stop on (a [layout] path the repository does not have), lint says first."""
    adopter(tmp_path)
    manifest = tmp_path / "xpu" / "workarounds.toml"
    text = manifest.read_text(encoding="utf-8").replace(old, new)
    manifest.write_text(text, encoding="utf-8")
    line = text.splitlines().index(new) + 1
    result = run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint")
    assert result.returncode == 1
    assert result.stdout == f"xpu/workarounds.toml:{line}: {field}: {message.format(root=tmp_path.resolve())}\n"
    (tmp_path / new.split('"')[1]).parent.mkdir(parents=True, exist_ok=True)
    if field == "layout.docs":
        (tmp_path / "xpu" / "catalogue.md").write_text("# catalogue\n", encoding="utf-8")
    else:
        (tmp_path / "xpu" / "test").mkdir()
    assert run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint").returncode == 0


def test_pin_files_that_match_nothing_yet_pass_lint(tmp_path):
    """[layout] pins names files, or globs, that may not exist: unlike a folder [layout] sets, none is required."""
    adopter(tmp_path)
    manifest = tmp_path / "xpu" / "workarounds.toml"
    text = manifest.read_text(encoding="utf-8").replace('docs = ""', 'docs = ""\npins = ["requirements/*.txt"]')
    manifest.write_text(text, encoding="utf-8")
    result = run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint")
    assert (result.returncode, result.stdout) == (0, "xpu/workarounds.toml: ok\n"), result.stderr


@pytest.mark.parametrize(("entry", "why"), [
    ("../requirements.txt", "a '.' or '..' segment: paths stay inside the repository, written without them"),
    ("/srv/requirements.txt", "an absolute path: paths are relative to the repository's root"),
    ("requirements/**/*.txt", "'**': '*' matches within one folder; name each folder's files "
                              "(e.g. 'requirements/*.txt')"),
])
def test_a_pin_file_leaving_the_repository_is_one_line_at_its_line(tmp_path, entry, why):
    adopter(tmp_path)
    manifest = tmp_path / "xpu" / "workarounds.toml"
    text = manifest.read_text(encoding="utf-8").replace('docs = ""', f'docs = ""\npins = ["pyproject.toml", "{entry}"]')
    manifest.write_text(text, encoding="utf-8")
    line = text.splitlines().index(f'pins = ["pyproject.toml", "{entry}"]') + 1
    result = run_lint(tmp_path, "--manifest", "xpu/workarounds.toml", "lint")
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout == f"xpu/workarounds.toml:{line}: layout.pins: {entry!r}: {why}\n"
