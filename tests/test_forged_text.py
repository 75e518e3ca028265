"""Text the tool did not write stays text where it is printed: a forged title, symptom, note or
source value is a lint problem at its line; and what the manifest may hold (prose over several
lines, a pipe, a ``##[``) never becomes a workflow command in a CI log (``explain``, ``docs``,
``lint --format github``) nor a second row of the catalogue's tables."""

from __future__ import annotations

import os

import pytest
import tomlkit
from markdown_it import MarkdownIt
from support.manifests import manifest_text, workaround
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.model import reader

CLEAN = {name: None for name in os.environ if name.startswith("XPU_WORKAROUNDS")}
FORGED = "looks fine\n::warning::forged by the manifest"
TRACKED = {"id": "inline-sync", "title": "vLLM synchronizes the stream itself", "file": "vllm/platforms/xpu.py",
           "marker": "torch.xpu.synchronize()", "carried_in": ">=0.19.0"}


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=CLEAN)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def forged_lines(text: str) -> list[str]:
    """The lines a GitHub runner would take as workflow commands: ``::`` first on a line (after
    spaces), or its older form ``##[`` anywhere on one."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::") or "##[" in line]


def manifest_with(tmp_path, change) -> str:
    document = tomlkit.parse(manifest_text(workaround(upstream=[
        {"ref": "pytorch/pytorch#188240", "role": "root-fix", "state": "merged", "released_in": "torch>=2.14.0",
         "note": "the root fix", "remaining": "a corner of it"}])))
    document["tracked"] = tomlkit.aot()
    document["tracked"].append(tomlkit.item(dict(TRACKED)))
    document["sources"] = {"vllm": {"repository": "vllm-project/vllm", "tag": "v{version}"}}
    change(document)
    path = tmp_path / "workarounds.toml"
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
    return str(path)


def line_of(path: str, text: str) -> int:
    """The line of the manifest at ``path`` holding ``text`` (each test writes its forged value once)."""
    (number,) = [n for n, line in enumerate(open(path, encoding="utf-8"), 1) if text in line]
    return number


def setter(*keys: str | int, value: str = FORGED):
    def change(document) -> None:
        table = document
        for key in keys[:-1]:
            table = table[key]
        table[keys[-1]] = value
    return change


ONE_LINE_FIELDS = {
    "workaround[main-stream-sync].title": ("workaround", 0, "title"),
    "workaround[main-stream-sync].symptom": ("workaround", 0, "symptom"),
    "workaround[main-stream-sync].owner": ("workaround", 0, "owner"),
    "workaround[main-stream-sync].upstream[0].note": ("workaround", 0, "upstream", 0, "note"),
    "workaround[main-stream-sync].upstream[0].remaining": ("workaround", 0, "upstream", 0, "remaining"),
    "tracked[inline-sync].title": ("tracked", 0, "title"),
    "tracked[inline-sync].marker": ("tracked", 0, "marker"),
}


@pytest.mark.parametrize("field", ONE_LINE_FIELDS)
def test_a_forged_line_in_a_one_line_field_is_a_lint_problem_at_its_line(tmp_path, field):
    path = manifest_with(tmp_path, setter(*ONE_LINE_FIELDS[field]))
    result = invoke("lint", path)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{path}:{line_of(path, 'forged by the manifest')}: {field}: holds the control character '\\n': "
        "this field is one line of text"]


# A path or a tag is matched whole, so a trailing newline is also its format's problem: said once, as that.
@pytest.mark.parametrize(("keys", "value", "field", "said"), [
    (("tracked", 0, "file"), "vllm/platforms/xpu.py\n", "tracked[inline-sync].file", "must be a .py path"),
    (("sources", "vllm", "tag"), "v{version}\n", "sources.vllm.tag", "'v{version}\\n' is not a tag name"),
    (("workaround", 0, "title"), "Synchronize\x1b[2J the stream", "workaround[main-stream-sync].title",
     "holds the control character "),
    (("workaround", 0, "title"), "Synchronize \u202ethe stream", "workaround[main-stream-sync].title",
     "holds the control character "),
])
def test_a_trailing_newline_or_a_terminal_escape_in_a_one_line_field_is_a_lint_problem(tmp_path, keys, value,
                                                                                         field, said):
    path = manifest_with(tmp_path, setter(*keys, value=value))
    result = invoke("lint", path)
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"{path}:") and f": {field}: {said}" in line


def test_a_forged_id_is_one_problem_of_its_entry_not_two(tmp_path):
    path = manifest_with(tmp_path, setter("workaround", 0, "id"))
    result = invoke("lint", path)
    assert result.exit_code == 1
    assert [line for line in result.stdout.splitlines() if ".id:" in line] == [
        f"{path}:{line_of(path, 'forged by the manifest')}: workaround[0].id: must be lower-case words joined by '-'"]
    assert forged_lines(result.stdout) == []


def test_lint_for_github_keeps_each_problem_one_workflow_command(tmp_path):
    path = manifest_with(tmp_path, setter("workaround", 0, "title"))
    result = invoke("lint", "--format", "github", path)
    assert result.exit_code == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("::error file=") and ",title=workaround[main-stream-sync].title::holds the " in line


# What a valid manifest may hold and a printer must still keep in its place: prose over several
# lines (one of them a workflow command), the runner's older command form inside a title, a pipe.
PROSE = "The side stream is not ordered.\n::add-mask::the next line of why\n  ::stop-commands::token"
TITLE = "Sync | the stream ##[add-mask]secret"


def valid_but_hostile(tmp_path) -> str:
    def change(document) -> None:
        entry = document["workaround"][0]
        entry["why"] = entry["how"] = PROSE
        entry["title"] = TITLE
        entry["symptom"] = "`RuntimeError` ``` ##[warning]forged"
        document["tracked"][0]["title"] = TITLE
    return manifest_with(tmp_path, change)


def test_explain_prints_no_workflow_command_from_the_manifest(tmp_path):
    path = valid_but_hostile(tmp_path)
    assert reader.check(path) == []  # all of it is allowed
    result = invoke("--manifest", path, "explain", "main-stream-sync", "--platform", "cpu")
    assert result.exit_code == 0, result.output
    assert forged_lines(result.stdout) == []
    assert "  why: The side stream is not ordered. ::add-mask::the next line of why ::stop-commands::token" \
        in result.stdout.splitlines()


def test_docs_prints_no_workflow_command_and_keeps_each_table_row_whole(tmp_path):
    path = valid_but_hostile(tmp_path)
    result = invoke("--manifest", path, "docs")
    assert result.exit_code == 0, result.output
    assert forged_lines(result.stdout) == []
    html = MarkdownIt("commonmark").enable("table").render(result.stdout)
    # Each table keeps its columns: the title's pipe is in its cell, not a column of its own.
    assert "<td>Sync | the stream ##[add-mask]secret</td>" in html
    assert html.count("<td>Sync | the stream ##[add-mask]secret</td>") == 2
    assert "<code>`RuntimeError` ``` ##\\x5bwarning]forged</code>" in html
    assert "::add-mask::the next line of why" in html and "::stop-commands::token" in html


def test_why_an_old_release_could_not_be_compared_is_text_in_the_upgrade_comment(tmp_path):
    """The reason comes from pip and the package index (their words, a version from the PR's pin):
    in the pull request's comment it renders as the same text, never as emphasis, a link, HTML or
    a mention."""
    from packaging.version import Version

    from tracker.release.compare import ReleaseCheck
    from tracker.retire.upgrade import ReleaseMove, release_text

    path = tmp_path / "workarounds.toml"
    path.write_text(manifest_text(), encoding="utf-8")
    forged = "pip said **merged** <img src=x> [ok](https://evil.example) @maintainer `code`"
    lines = release_text(reader.load(path), ReleaseMove(["requirements.txt"], Version("0.24.0"), Version("0.25.0")),
                         ReleaseCheck("0.25.0", "sdist", {}, []), None, "workarounds.toml", old_unavailable=forged)
    (line,) = [line for line in lines if "could not be compared" in line]
    html = MarkdownIt("commonmark").render(line)
    assert html.count("<strong>") == 1 and "<img" not in html and "<a " not in html and "<code>" not in html, html
    assert "@\u200bmaintainer" in html.replace("&#8203;", "\u200b"), html


def test_the_upgrade_comments_old_release_column_gives_each_decision_its_reason(tmp_path):
    from packaging.version import Version

    from tracker.release.compare import ReleaseCheck, WorkaroundCheck
    from tracker.retire.upgrade import ReleaseMove, release_text

    path = tmp_path / "workarounds.toml"
    path.write_text(manifest_text(), encoding="utf-8")
    manifest = reader.load(path)
    [first, *_] = manifest.ids

    def checked(decision: str, reason: str) -> ReleaseCheck:
        return ReleaseCheck("x", "sdist", {}, [WorkaroundCheck(first, [], False, None, "", {
            "decision": decision, "reason": reason, "detail": ""})])

    move = ReleaseMove(["requirements.txt"], Version("0.24.0"), Version("0.25.0"))
    lines = release_text(manifest, move, checked("skip", "vllm-carries-fix"), checked("apply", "affected"),
                         "workarounds.toml")
    assert f"| `{first}` | apply (affected) | skip (vllm-carries-fix) | - |" in lines
    unavailable = release_text(manifest, move, checked("skip", "vllm-carries-fix"), None, "workarounds.toml",
                               old_unavailable="refused")
    assert f"| `{first}` | not compared | skip (vllm-carries-fix) | - |" in unavailable
    unpinned = release_text(manifest, ReleaseMove(["requirements.txt"], None, Version("0.25.0")),
                            checked("skip", "vllm-carries-fix"), None, "workarounds.toml")
    assert f"| `{first}` | no pin | skip (vllm-carries-fix) | - |" in unpinned
