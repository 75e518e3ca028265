"""`lint`: every broken manifest gets one clear line per problem, never a traceback."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.repository import FROZEN_MANIFEST

from tracker.commands.lint import lint
from tracker.model import manifest as manifest_module
from tracker.model import reader

pytestmark = pytest.mark.usefixtures("frozen_modules")

SHIPPED = reader.default_path()
# The cases edit the frozen manifest (the shipped one of 2026-12-04), whose text no retirement removes.
TEXT = FROZEN_MANIFEST.read_text(encoding="utf-8")
LINE = re.compile(r"^.+:(\d+): [\w\-\[\].]+: .+$")


def lint_text(tmp_path, text, name="broken.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path, lint(path)


def line_of(text, fragment, occurrence=1):
    hits = [number for number, line in enumerate(text.splitlines(), 1) if fragment in line]
    return hits[occurrence - 1]


def test_shipped_manifest_is_valid():
    assert reader.check() == []
    assert lint() == []


def test_a_valid_manifest_is_read_without_locating_any_line(monkeypatch):
    # Lines are found only to point at a problem: the locator reads the whole text, and every
    # vLLM process that activates reads the manifest.
    from tracker.model import lines

    built = []
    monkeypatch.setattr(lines.LineLocator, "__init__", lambda self, text: built.append(text))
    assert reader.load(SHIPPED).workarounds and built == []


def test_a_tracked_entry_with_a_broken_specifier_points_at_its_line(tmp_path):
    text = TEXT.replace('carried_in = "', 'carried_in = "!!', 1)
    problems = lint_text(tmp_path, text)[1]
    assert len(problems) == 1 and problems[0].line == line_of(text, 'carried_in = "!!')
    assert ".carried_in" in problems[0].field


@pytest.mark.usefixtures("frozen_modules")
def test_an_explicit_module_equal_to_the_derived_one_is_tolerated(tmp_path):
    text = TEXT.replace('id = "pp-broadcast-sync"', 'id = "pp-broadcast-sync"\nmodule = "workarounds.pp_broadcast_sync"')
    assert lint_text(tmp_path, text)[1] == []


def test_the_module_is_derived_from_the_id():
    assert [w.module for w in reader.load().workarounds] == [
        "workarounds." + w.id.replace("-", "_") for w in reader.load().workarounds]


def test_every_shipped_entry_has_its_module_and_every_module_its_entry():
    package = Path(SHIPPED).parent / "workarounds"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(modules) == sorted(w.module.removeprefix("workarounds.") for w in reader.load().workarounds)


def first(pattern: str) -> str:
    """The first text of the frozen manifest that matches ``pattern`` (the entry that comes first)."""
    found = re.search(pattern, TEXT, re.M)
    assert found, pattern
    return found.group(0)


RELEASED_IN = first(r'^released_in = "[a-z-]+>=[^"]+"$')
FIRST_KIND = first(r'kind = "\w+"')  # the first target of the first workaround
FIRST_WINDOW = first(r'^\[\[workaround\.affected\]\]\nvllm = "[^"]+"')  # its first affected window


# Each case: (what to replace, with what, field in the problem, words in the message,
#             text of the line the problem must point at)
BROKEN = {
    "bad specifier": ('torch = "<2.15.0"', 'torch = "<<2.15"', "affected[0].torch", "not a PEP 440 specifier",
                      'torch = "<<2.15"'),
    "window that can never match": ('vllm = ">=0.23.0,<0.25.0"', 'vllm = ">=0.25.0,<0.23.0"',
                                    "affected[0].vllm", "can never match", 'vllm = ">=0.25.0,<0.23.0"'),
    "empty range between equal bounds": (FIRST_WINDOW, '[[workaround.affected]]\nvllm = ">=0.28.0,<0.28.0"',
                                         "affected[0].vllm", "can never match", 'vllm = ">=0.28.0,<0.28.0"'),
    "bad state": ('state = "open"', 'state = "pending"', "upstream[2].state", "not one of", 'state = "pending"'),
    "bad role": ('role = "cause"', 'role = "culprit"', "upstream[0].role", "not one of", 'role = "culprit"'),
    "bad ref": ('ref = "vllm-project/vllm#47081"', 'ref = "vllm#47081"', "upstream[0].ref", "OWNER/REPO#NUMBER",
                'ref = "vllm#47081"'),
    "unknown key in a workaround": ("added = 2026-07-07", 'added = 2026-07-07\nownr = "x"', "ownr", "unknown key",
                                    'ownr = "x"'),
    "unknown top-level key": ("schema = 1", "schema = 1\nversion = 2", "version", "unknown key", "version = 2"),
    "unknown component in a window": ('vllm = ">=0.23.0,<0.25.0"', 'vlm = ">=0.23.0,<0.25.0"',
                                      "affected[0].vlm", "unknown component", "vlm = "),
    "module that does not exist": ('id = "pp-broadcast-sync"', 'id = "pp-sync"',
                                   "module", "module workarounds.pp_sync does not exist", 'id = "pp-sync"'),
    "explicit module that is not the derived one": ('id = "pp-broadcast-sync"',
                                                    'id = "pp-broadcast-sync"\nmodule = "os.path"', "module",
                                                    "derived from the id (workarounds.pp_broadcast_sync)",
                                                    'module = "os.path"'),
    "marker on a cause": ('role = "cause"\nstate = "merged"', 'role = "cause"\nstate = "merged"\nmarker = "x = 1"',
                          "upstream[0].marker", "only an inline-fix", 'marker = "x = 1"'),
    "marker that is not Python": ('marker = "self.main_stream.synchronize()"', 'marker = "self.main_stream.synchronize("',
                                  "upstream[1].marker", "not a Python statement or expression",
                                  'marker = "self.main_stream.synchronize("'),
    "affected window overlapping vllm_carries_fix": ('vllm = "<=0.19.1"', 'vllm = "<=0.21.1"', "vllm_carries_fix",
                                                     "overlaps affected[0] (vllm<=0.21.1)",
                                                     'vllm_carries_fix = ">=0.21.0,<0.31.0"'),
    "bad platform": ('platform = "xpu"', 'platform = "gaudi"', "platform", "not one of", "gaudi"),
    "released_in on an open reference": ('state = "open"', 'state = "open"\nreleased_in = "torch>=2.16.0"',
                                         "released_in", "cannot be in a release", "torch>=2.16.0"),
    "malformed released_in": (RELEASED_IN, 'released_in = "torch 2.14"',
                              "released_in", "COMPONENT>=VERSION", "torch 2.14"),
    "bad support version": ('torch = "2.10.0"', 'torch = "two"', "support.torch", "not a PEP 440 version",
                            'torch = "two"'),
    "date as string": ("added = 2026-07-07", 'added = "last week"', "added", "TOML date", "last week"),
    "target without module separator": ('path = "vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast"',
                                        'path = "vllm.v1.worker.gpu.pp_utils.PPHandler.broadcast"',
                                        "targets[0].path", "package.module:Attribute.path",
                                        "pp_utils.PPHandler.broadcast"),
    "bad target kind": (FIRST_KIND, 'kind = "property"', "targets[0].kind", "not one of",
                        'kind = "property"'),
    "bad id": ('id = "pp-broadcast-sync"', 'id = "PP_Sync"', "id", "lower-case", 'id = "PP_Sync"'),
    "remaining on a cause": ('ref = "vllm-project/vllm#47081"\nrole = "cause"',
                             'ref = "vllm-project/vllm#47081"\nrole = "cause"\nremaining = "x"',
                             "upstream[0].remaining", "only a fix", 'remaining = "x"'),
    "related reference without a note": ('>=0.1.6"\nnote = "the XPU view holds its host tensor; before it the '
                                         "view's deleter is a no-op\"", '>=0.1.6"', ".note", "must say what it changes",
                                         'ref = "vllm-project/vllm-xpu-kernels#262"'),
    "target absent_in that is not a specifier": ('absent_in = "<0.23.0" },', 'absent_in = "before 0.23" },',
                                                 "targets[0].absent_in", "not a PEP 440 specifier",
                                                 'absent_in = "before 0.23"'),
    "bad commit": (RELEASED_IN, RELEASED_IN + '\ncommit = "abc"', "commit", "40-character", 'commit = "abc"'),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_manifest_gets_a_pointed_problem(tmp_path, case):
    old, new, field, words, at = BROKEN[case]
    assert old in TEXT, case
    text = TEXT.replace(old, new, 1)
    _, problems = lint_text(tmp_path, text)
    hits = [p for p in problems if field in p.field and words in p.message]
    assert hits, [str(p) for p in problems]
    assert hits[0].line == line_of(text, at), str(hits[0])
    assert all(LINE.match(str(p)) for p in problems)


def test_missing_required_field_points_at_its_workaround(tmp_path):
    text = TEXT.replace('symptom = "wrong tokens with pipeline parallelism (PP > 1)"\n', "")
    _, problems = lint_text(tmp_path, text)
    assert [(p.field, p.message) for p in problems] == [("workaround[pp-broadcast-sync].symptom", "required")]
    assert problems[0].line == line_of(text, 'id = "pp-broadcast-sync"') - 1  # its [[workaround]] header


def test_duplicate_id_points_at_the_second_and_names_the_first(tmp_path):
    text = TEXT.replace('id = "cuda-event-redirect"', 'id = "event-blocking-kwarg"')
    _, problems = lint_text(tmp_path, text)
    assert [str(p).split(": ", 1)[1] for p in problems] == [
        f"workarounds[event-blocking-kwarg].id: duplicate id (first at line {line_of(TEXT, 'id = ')})"
        .replace("workarounds[", "workaround[")]
    assert problems[0].line == line_of(text, 'id = "event-blocking-kwarg"', 2)


@pytest.mark.parametrize("keyword", ["import", "class", "async"])
def test_an_id_that_is_a_python_keyword_is_refused_as_its_module_could_not_be_imported(tmp_path, keyword):
    text = TEXT.replace('id = "cuda-event-redirect"', f'id = "{keyword}"')
    _, problems = lint_text(tmp_path, text)
    assert [(p.field, p.line) for p in problems if "is a Python keyword" in p.message] == [
        (f"workaround[{keyword}].id", line_of(text, f'id = "{keyword}"'))]


def test_toml_syntax_error_points_at_its_line(tmp_path):
    _, problems = lint_text(tmp_path, "schema = 1\n\n[support\nvllm = '1'\n")
    assert [(p.line, p.field) for p in problems] == [(3, "toml")]


def test_file_that_is_not_utf8_is_reported(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"schema = 1\n\xff\xfe")
    assert [(p.line, p.field, p.message) for p in reader.check(path)] == [(2, "file", "not UTF-8")]


def test_missing_file_is_reported(tmp_path):
    problems = reader.check(tmp_path / "absent.toml")
    assert [(p.line, p.field) for p in problems] == [(1, "file")] and "No such file" in problems[0].message


def test_empty_manifest_lists_what_is_required(tmp_path):
    _, problems = lint_text(tmp_path, "")
    assert {p.field for p in problems} == {"schema", "support"}  # a first manifest has no workaround yet


def test_load_raises_manifest_error_carrying_the_problems(tmp_path):
    path, problems = lint_text(tmp_path, TEXT.replace('state = "open"', 'state = "pending"'))
    with pytest.raises(manifest_module.ManifestError) as info:
        reader.load(path)
    assert info.value.problems == problems


def test_lint_cli_prints_one_line_per_problem_and_exits_1(tmp_path):
    text = TEXT.replace('state = "open"', 'state = "pending"').replace('role = "cause"', 'role = "x"', 1)
    path, problems = lint_text(tmp_path, text)
    run = subprocess.run([sys.executable, "-m", "tracker.commands", "lint", str(path)], capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr == ""
    assert run.stdout.splitlines() == [str(p) for p in problems] and len(problems) == 2


def test_lint_cli_accepts_the_shipped_manifest():
    run = subprocess.run([sys.executable, "-m", "tracker.commands", "lint"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith(": ok")


# --- [layout] pins: the repository's own pin files, paths or globs ---------------------------


def test_pin_files_default_to_the_roots_pyproject_requirements_and_lock_files(tmp_path):
    path, problems = lint_text(tmp_path, TEXT)
    assert problems == [] and reader.load(path).layout.pins == ("pyproject.toml", "requirements*.txt", "uv.lock",
                                                                "pylock.toml", "pylock.*.toml")


def test_declared_pin_files_are_read_as_written_and_set_no_path_that_must_exist(tmp_path):
    text = TEXT + '\n[layout]\npins = ["requirements/*.txt", "constraints/serving-?.in", "pyproject.toml"]\n'
    path, problems = lint_text(tmp_path, text)
    assert problems == []
    layout = reader.load(path).layout
    assert layout.pins == ("requirements/*.txt", "constraints/serving-?.in", "pyproject.toml")
    assert layout.written == frozenset()  # a glob may match nothing: no file is required


@pytest.mark.parametrize(("value", "message"), [
    ('"requirements.txt"', "must be a list of paths or globs relative to the repository's root"),
    ('["requirements.txt", 3]', "must be a list of paths or globs relative to the repository's root"),
    ('["../requirements.txt"]', "'../requirements.txt': a '.' or '..' segment"),
    ('["requirements/../../x.txt"]', "'requirements/../../x.txt': a '.' or '..' segment"),
    ('["./requirements.txt"]', "'./requirements.txt': a '.' or '..' segment"),
    ('["/srv/requirements.txt"]', "'/srv/requirements.txt': an absolute path"),
    ('["requirements//serving.txt"]', "'requirements//serving.txt': an empty path segment"),
    ('["requirements/"]', "'requirements/': an empty path segment"),
    ('[""]', "'': an empty path"),
    ("['requirements\\serving.txt']", "'requirements\\\\serving.txt': a backslash"),
    ('["requirements/**/*.txt"]', "'requirements/**/*.txt': '**': '*' matches within one folder"),
    ('["requirements\\u0007.txt"]', "'requirements\\x07.txt': a control character"),
])
def test_a_pin_file_entry_that_is_not_a_relative_path_or_glob_is_refused_at_its_line(tmp_path, value, message):
    text = TEXT + f"\n[layout]\ntests = \"tests\"\npins = {value}\n"
    _, problems = lint_text(tmp_path, text)
    assert [(p.field, p.line) for p in problems] == [("layout.pins", line_of(text, "pins = "))], problems
    assert problems[0].message.startswith(message), problems[0].message
    assert LINE.match(str(problems[0]))


def test_an_empty_list_of_pin_files_is_accepted_and_names_none(tmp_path):
    from tracker.model.pin_files import is_pin_file

    path, problems = lint_text(tmp_path, TEXT + "\n[layout]\npins = []\n")
    assert problems == [] and reader.load(path).layout.pins == ()
    assert not is_pin_file("requirements.txt", ())


@pytest.mark.parametrize(("pattern", "path", "matched"), [
    ("requirements*.txt", "requirements.txt", True),
    ("requirements*.txt", "requirements-xpu.txt", True),
    ("requirements*.txt", "requirements/xpu.txt", False),  # '*' never crosses '/' (fnmatch's does)
    ("requirements*.txt", "tests/fixtures/requirements.txt", False),  # no match from the right (PurePath.match's)
    ("pyproject.toml", "tools/bench/pyproject.toml", False),
    ("requirements/*.txt", "requirements/serving.txt", True),
    ("requirements/*.txt", "requirements/gpu/cuda.txt", False),  # one folder, not its subfolders
    ("requirements/*.txt", "requirements.txt", False),
    ("*/requirements.txt", "serving/requirements.txt", True),
    ("*/requirements.txt", "a/b/requirements.txt", False),
    ("requirements/serving-?.txt", "requirements/serving-a.txt", True),
    ("requirements/serving-?.txt", "requirements/serving-ab.txt", False),
    ("requirements/[sb]*.txt", "requirements/batch.txt", True),
    ("requirements/[sb]*.txt", "requirements/cuda.txt", False),
    ("Requirements.txt", "requirements.txt", False),  # case counts, as in git
    ("x[*]y.txt", "x*y.txt", True),  # a file whose name holds a glob's character, named alone
    ("x[*]y.txt", "xzy.txt", False),
])
def test_a_pin_glob_matches_one_path_segment_at_a_time(pattern, path, matched):
    from tracker.model.pin_files import is_pin_file, matches

    assert matches(pattern, path) is matched
    assert is_pin_file(path, [pattern]) is matched


@pytest.mark.parametrize("path", ["../requirements.txt", "requirements/../requirements.txt", "./requirements.txt",
                                  "/requirements.txt", "requirements//x.txt"])
def test_a_path_leaving_or_bending_the_tree_is_never_a_pin_file(path):
    from tracker.model.pin_files import is_pin_file

    assert not is_pin_file(path, ["*", "*/*", "*/*/*", "requirements*.txt", "requirements/*.txt"])


def test_a_glob_that_matches_nothing_is_no_pin_file_and_no_error():
    from tracker.model.pin_files import is_pin_file

    assert not [path for path in ("requirements.txt", "pyproject.toml", "setup.cfg")
                if is_pin_file(path, ["requirements/*.txt", "deps/*.in"])]


def test_a_file_is_declared_by_its_name_with_a_globs_characters_escaped():
    from tracker.model.pin_files import declaring, is_pin_file, pin_glob_problem

    for path in ("requirements/serving.txt", "x*y/req?.txt", "deps/[a].txt"):
        entry = declaring(path)
        assert pin_glob_problem(entry) is None and is_pin_file(path, [entry])
    assert not is_pin_file("xzy/reqa.txt", [declaring("x*y/req?.txt")])


# --- generated breakage: whatever is done to the file, lint answers in lines, never raises ------

LINES = TEXT.splitlines()
JUNK = st.sampled_from(['"<<1"', '""', "1", "[]", "{}", "true", '"0.1.x"', '">=9,<1"', '"workarounds.nope"',
                        "2026-13-01", '"open"', "[[workaround]]", "[support]", "= =", '"\\x"', "[1, 2]",
                        '{ path = "a:b" }', '"torch>=abc"', '"a/b#0"', "nan"])


@st.composite
def broken_manifests(draw):
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "value", "duplicate", "garble"]))
        if action == "delete":
            del lines[index]
        elif action == "duplicate":
            lines.insert(index, lines[index])
        elif action == "value" and "=" in lines[index]:
            key = lines[index].split("=", 1)[0]
            lines[index] = f"{key}= {draw(JUNK)}"
        else:
            lines[index] = draw(st.text(alphabet='abc=[]"{}#.,<>0123456789 \n', max_size=20))
        if not lines:
            break
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=broken_manifests())
@example(text=TEXT.replace("[[workaround.affected]]", "[workaround.affected]", 1))
@example(text=TEXT.replace('vllm_carries_fix = ">=0.25.0"', "vllm_carries_fix = 0.25", 1))
@example(text=TEXT.replace("targets = [", "targets = 3 #[", 1))
def test_generated_broken_manifests_get_lines_not_tracebacks(tmp_path, frozen_modules, text):
    path, problems = lint_text(tmp_path, text)
    count = max(len(text.splitlines()), 1)
    for problem in problems:
        assert LINE.match(str(problem)), str(problem)
        assert 1 <= problem.line <= count
    if problems:
        with pytest.raises(manifest_module.ManifestError):
            reader.load(path)
    else:
        assert reader.load(path).ids
